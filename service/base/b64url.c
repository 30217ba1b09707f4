/* b64url — see b64url.h. */
#include "b64url.h"

#include <stdlib.h>
#include <string.h>

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void b64url_encode_to(const unsigned char *in, size_t n, char *out)
{
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = b64[v >> 6 & 63];
        out[o++] = b64[v & 63];
    }
    if (i < n) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0u);
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        if (i + 1 < n)
            out[o++] = b64[v >> 6 & 63];
    }
    out[o] = '\0';
}

char *b64url_encode(const unsigned char *in, size_t n)
{
    char *out = malloc(B64URL_LEN(n) + 1);
    if (out)
        b64url_encode_to(in, n, out);
    return out;
}

static int b64_value(char c)
{
    const char *p = c ? strchr(b64, c) : NULL;
    return p ? (int)(p - b64) : -1;
}

unsigned char *b64url_decode(const char *in, size_t n, size_t *len)
{
    if (n % 4 == 1)
        return NULL;
    unsigned char *out = malloc(n / 4 * 3 + 3);
    if (!out)
        return NULL;
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_value(in[i]);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = acc << 6 | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits & 0xFF);
        }
    }
    if (bits && (acc & ((1u << bits) - 1)) != 0) {
        free(out);
        return NULL;
    }
    *len = o;
    return out;
}
