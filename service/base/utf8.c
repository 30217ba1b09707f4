/* utf8 — see utf8.h. */
#include "utf8.h"

void utf8_check_init(struct utf8_check *u)
{
    u->need = 0;
    u->lo = 0x80;
    u->hi = 0xBF;
}

/* One byte: 0 if it may continue valid UTF-8, -1 if not. */
static int step(struct utf8_check *u, unsigned char c)
{
    if (u->need) {
        if (c < u->lo || c > u->hi)
            return -1;
        u->need--;
        u->lo = 0x80;
        u->hi = 0xBF;
        return 0;
    }
    if (c < 0x80)
        return 0;
    u->lo = 0x80;
    u->hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        u->need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
        u->need = 2;
        if (c == 0xE0)
            u->lo = 0xA0; /* E0 80..9F would be overlong */
        else if (c == 0xED)
            u->hi = 0x9F; /* ED A0..BF are the surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        u->need = 3;
        if (c == 0xF0)
            u->lo = 0x90; /* F0 80..8F would be overlong */
        else if (c == 0xF4)
            u->hi = 0x8F; /* F4 90..BF is past U+10FFFF */
    } else {
        return -1; /* 80..C1: stray continuation or overlong lead; F5..FF */
    }
    return 0;
}

int utf8_check_feed(struct utf8_check *u, const void *buf, size_t n)
{
    const unsigned char *s = buf;
    for (size_t i = 0; i < n; i++) {
        if (!u->need && s[i] < 0x80)
            continue;
        if (step(u, s[i]) != 0)
            return -1;
    }
    return 0;
}

int utf8_check_complete(const struct utf8_check *u)
{
    return u->need == 0;
}

int utf8_valid(const void *s, size_t len)
{
    struct utf8_check u;
    utf8_check_init(&u);
    return utf8_check_feed(&u, s, len) == 0 && utf8_check_complete(&u);
}

size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    if (n == 0 || s[0] < 0x80)
        return 0;
    struct utf8_check u;
    utf8_check_init(&u);
    if (step(&u, s[0]) != 0)
        return 0;
    size_t k = (size_t)u.need + 1;
    if (k > n)
        return 0;
    for (size_t i = 1; i < k; i++)
        if (step(&u, s[i]) != 0)
            return 0;
    return k;
}

size_t utf8_repair(const void *in, size_t n, char *out)
{
    const unsigned char *s = in;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = s[i] < 0x80 ? 1 : utf8_seq_len(s + i, n - i);
        if (k) {
            for (size_t j = 0; j < k; j++)
                out[o++] = (char)s[i + j];
            i += k;
            continue;
        }
        out[o++] = (char)0xEF; /* U+FFFD REPLACEMENT CHARACTER */
        out[o++] = (char)0xBF;
        out[o++] = (char)0xBD;
        i++;
    }
    out[o] = '\0';
    return o;
}
