/* unprobed_frame — see unprobed_frame.h. */
#include "unprobed_frame.h"

int unprobed_frame(void)
{
    volatile char frame[UNPROBED_FRAME_SIZE];
    frame[0] = 1;
    return frame[0];
}
