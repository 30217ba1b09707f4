/* randid — see randid.h. */
#include "randid.h"
#include "clock.h"

#include <stdint.h>

#include <errno.h>
#include <sys/random.h>

static int fill_random(unsigned char *raw, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom(raw + got, len - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

static void to_hex(const unsigned char *raw, size_t len, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
}

int randid_make(char out[RANDID_LEN + 1])
{
    unsigned char raw[RANDID_LEN / 2];
    if (fill_random(raw, sizeof raw) != 0)
        return -1;
    to_hex(raw, sizeof raw, out);
    out[RANDID_LEN] = '\0';
    return 0;
}

int randid_make_ordered(char out[RANDID_LEN + 1])
{
    unsigned char raw[RANDID_LEN / 2];
    if (fill_random(raw + 6, sizeof raw - 6) != 0)
        return -1;
    uint64_t ms = (uint64_t)clock_wall_ms();
    for (int i = 5; i >= 0; i--, ms >>= 8)
        raw[i] = (unsigned char)(ms & 0xff);
    to_hex(raw, sizeof raw, out);
    out[RANDID_LEN] = '\0';
    return 0;
}
