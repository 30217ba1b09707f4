/* randid — see randid.h. */
#include "randid.h"

#include <errno.h>
#include <sys/random.h>

int randid_make(char out[RANDID_LEN + 1])
{
    unsigned char raw[RANDID_LEN / 2];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)n;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof raw; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[RANDID_LEN] = '\0';
    return 0;
}
