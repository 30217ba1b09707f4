/* randid — see randid.h. */
#include "randid.h"
#include "clock.h"

#include <stdint.h>

#include <errno.h>
#include <string.h>
#include <sys/random.h>

/* Each thread draws from its own buffer of kernel randomness, refilled 256
 * bytes at a time: a getrandom call per id was one of the ten system calls
 * of a request, and system calls are dear on a virtual machine. The bytes
 * are the kernel's CSPRNG output either way; each is handed out once. */
#define POOL_BYTES 256

static int fill_random(unsigned char *raw, size_t len)
{
    static _Thread_local unsigned char pool[POOL_BYTES];
    static _Thread_local size_t pos, end;
    while (len > 0) {
        if (pos == end) {
            ssize_t n = getrandom(pool, sizeof pool, 0);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                return -1;
            }
            pos = 0;
            end = (size_t)n;
            continue;
        }
        size_t take = len < end - pos ? len : end - pos;
        memcpy(raw, pool + pos, take);
        memset(pool + pos, 0, take); /* handed out once: no copy stays behind */
        pos += take;
        raw += take;
        len -= take;
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
