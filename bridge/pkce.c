/* pkce — see pkce.h. SHA-256 is OpenSSL's (libcrypto), not hand-written. */
#include "pkce.h"

#include <openssl/sha.h>
#include <string.h>
#include <sys/random.h>

void pkce_b64url(const unsigned char *in, size_t n, char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        out[o++] = a[v >> 6 & 63];
        out[o++] = a[v & 63];
    }
    if (n - i == 1) {
        unsigned v = (unsigned)in[i] << 16;
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
    } else if (n - i == 2) {
        unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8;
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        out[o++] = a[v >> 6 & 63];
    }
    out[o] = '\0';
}

int pkce_random(char *out, size_t n)
{
    unsigned char buf[32];
    if (n > sizeof buf || getrandom(buf, n, 0) != (ssize_t)n)
        return -1;
    pkce_b64url(buf, n, out);
    return 0;
}

int pkce_verifier(char *out)
{
    return pkce_random(out, 32);
}

void pkce_challenge(const char *verifier, char *out)
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)verifier, strlen(verifier), md);
    pkce_b64url(md, sizeof md, out);
}
