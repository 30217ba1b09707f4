/* event_id — see event_id.h. */
#include "event_id.h"

#include <string.h>

int event_id_parse(const char *id, char *stream_out, size_t cap, int64_t *next)
{
    if (!id)
        return -1;
    const char *colon = strrchr(id, ':');
    if (!colon || colon == id || (size_t)(colon - id) >= cap)
        return -1;
    const char *d = colon + 1;
    int64_t seq;
    if (strcmp(d, "-1") == 0) {
        seq = -1;
    } else {
        /* No leading zeros: mcpd never writes them, and one spelling per
         * position keeps ids comparable. */
        if (*d < '0' || *d > '9' || (d[0] == '0' && d[1]))
            return -1;
        seq = 0;
        for (; *d; d++) {
            if (*d < '0' || *d > '9')
                return -1;
            int digit = *d - '0';
            if (seq > (INT64_MAX - digit) / 10)
                return -1;
            seq = seq * 10 + digit;
        }
        /* The reader continues at seq + 1, which must exist as an int64_t. */
        if (seq == INT64_MAX)
            return -1;
    }
    memcpy(stream_out, id, (size_t)(colon - id));
    stream_out[colon - id] = '\0';
    *next = seq + 1;
    return 0;
}
