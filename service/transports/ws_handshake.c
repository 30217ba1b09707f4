/* ws_handshake — see ws_handshake.h. */
#include "ws_handshake.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <string.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

/* Sec-WebSocket-Key: base64 of 16 bytes, i.e. 22 characters and "==". */
int ws_handshake_key_ok(const char *key)
{
    if (!key || strlen(key) != 24 || strcmp(key + 22, "==") != 0)
        return 0;
    for (int i = 0; i < 22; i++) {
        char c = key[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/'))
            return 0;
    }
    return 1;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* 21 bytes (the last ones zero padding) as 28 base64 characters, no NUL. */
static void base64_21(const unsigned char d[21], char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < 21; i += 3) {
        unsigned v = (unsigned)d[i] << 16 | (unsigned)d[i + 1] << 8 | d[i + 2];
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = b64[v >> 6 & 63];
        out[o++] = b64[v & 63];
    }
}

/* Sec-WebSocket-Accept: base64(SHA-1(key + GUID)), 28 characters. */
int ws_handshake_accept(const char *key, char out[29])
{
    char in[24 + sizeof WS_GUID];
    memcpy(in, key, 24);
    memcpy(in + 24, WS_GUID, sizeof WS_GUID - 1);
    unsigned char d[21] = {0}; /* 20 bytes of digest, padded to a multiple of 3 */
    if (gnutls_hash_fast(GNUTLS_DIG_SHA1, in, 24 + sizeof WS_GUID - 1, d) != 0)
        return -1;
    base64_21(d, out);
    out[27] = '='; /* 20 bytes: the last group has one byte of padding */
    out[28] = '\0';
    return 0;
}

int ws_handshake_new_key(char out[25])
{
    unsigned char d[21] = {0}; /* 16 random bytes, padded to a multiple of 3 */
    if (gnutls_rnd(GNUTLS_RND_NONCE, d, 16) != 0)
        return -1;
    char enc[28];
    base64_21(d, enc);
    memcpy(out, enc, 22);
    out[22] = out[23] = '='; /* 16 bytes: two characters of padding */
    out[24] = '\0';
    return 0;
}
