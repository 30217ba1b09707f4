/* token — see token.h. */
#include "token.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <string.h>

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int token_generate(char out[TOKEN_LEN + 1])
{
    unsigned char raw[33];
    if (gnutls_rnd(GNUTLS_RND_KEY, raw, 32) != 0)
        return -1;
    raw[32] = 0;
    memcpy(out, "mcpd_", 5);
    char *o = out + 5;
    /* 32 bytes = 10 groups of 3 and 2 left over: 43 characters, unpadded. */
    for (int i = 0; i < 33; i += 3) {
        unsigned v =
            (unsigned)raw[i] << 16 | (unsigned)raw[i + 1] << 8 | (i + 2 < 33 ? raw[i + 2] : 0);
        *o++ = B64URL[v >> 18 & 63];
        *o++ = B64URL[v >> 12 & 63];
        if (o - out < TOKEN_LEN)
            *o++ = B64URL[v >> 6 & 63];
        if (o - out < TOKEN_LEN)
            *o++ = B64URL[v & 63];
    }
    out[TOKEN_LEN] = '\0';
    return 0;
}

int token_hash(const char *token, char out[TOKEN_HASH_LEN + 1])
{
    unsigned char d[32];
    if (gnutls_hash_fast(GNUTLS_DIG_SHA256, token, strlen(token), d) != 0)
        return -1;
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
    return 0;
}
