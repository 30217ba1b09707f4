/* pkce — see pkce.h. SHA-256 is OpenSSL's (libcrypto), not hand-written. */
#include "pkce.h"
#include "b64url.h"

#include <openssl/sha.h>
#include <string.h>
#include <sys/random.h>

int pkce_random(char *out, size_t n)
{
    unsigned char buf[32];
    if (n > sizeof buf || getrandom(buf, n, 0) != (ssize_t)n)
        return -1;
    b64url_encode_to(buf, n, out);
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
    b64url_encode_to(md, sizeof md, out);
}
