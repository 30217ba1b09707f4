/* oauth_jwt — see oauth_jwt.h. */
#include "oauth_jwt.h"

#include "pkce.h"

#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ASSERTION_LIFETIME_S 300

static char *b64(const unsigned char *in, size_t n)
{
    char *out = malloc(4 * n / 3 + 4);
    if (out)
        pkce_b64url(in, n, out);
    return out;
}

char *oauth_jwt_assertion(const char *key_file, const char *client_id, const char *audience,
                          char *err, size_t cap)
{
    char *jwt = NULL, *hdr = NULL, *claims = NULL, *h64 = NULL, *c64 = NULL, *s64 = NULL;
    unsigned char *sig = NULL;
    EVP_MD_CTX *ctx = NULL;
    FILE *f = fopen(key_file, "r");
    EVP_PKEY *key = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    if (!key) {
        snprintf(err, cap, "mcp-bridge: cannot read a private key from --oauth-client-key %s",
                 key_file);
        return NULL;
    }
    int ec = EVP_PKEY_base_id(key) == EVP_PKEY_EC;
    if (!ec && EVP_PKEY_base_id(key) != EVP_PKEY_RSA) {
        snprintf(err, cap, "mcp-bridge: --oauth-client-key must be an EC P-256 or an RSA key");
        goto out;
    }
    char jti[PKCE_MAX];
    if (pkce_random(jti, 16) < 0)
        goto out;
    long long now = (long long)time(NULL);
    json_t *h = json_pack("{s:s, s:s}", "alg", ec ? "ES256" : "RS256", "typ", "JWT");
    json_t *c = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I}", "iss", client_id, "sub", client_id,
                          "aud", audience, "jti", jti, "iat", (json_int_t)now, "exp",
                          (json_int_t)(now + ASSERTION_LIFETIME_S));
    hdr = h ? json_dumps(h, JSON_COMPACT) : NULL;
    claims = c ? json_dumps(c, JSON_COMPACT) : NULL;
    json_decref(h);
    json_decref(c);
    if (!hdr || !claims)
        goto out;
    h64 = b64((const unsigned char *)hdr, strlen(hdr));
    c64 = b64((const unsigned char *)claims, strlen(claims));
    if (!h64 || !c64)
        goto out;
    size_t in_len = strlen(h64) + strlen(c64) + 2;
    jwt = malloc(in_len + 1024);
    if (!jwt)
        goto out;
    snprintf(jwt, in_len, "%s.%s", h64, c64);
    size_t sig_len = 0;
    ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) != 1 ||
        EVP_DigestSign(ctx, NULL, &sig_len, (unsigned char *)jwt, strlen(jwt)) != 1 ||
        !(sig = malloc(sig_len)) ||
        EVP_DigestSign(ctx, sig, &sig_len, (unsigned char *)jwt, strlen(jwt)) != 1) {
        snprintf(err, cap, "mcp-bridge: signing the client assertion failed");
        free(jwt);
        jwt = NULL;
        goto out;
    }
    if (ec) {
        /* JWS wants r || s, 32 bytes each, not OpenSSL's DER */
        const unsigned char *p = sig;
        ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)sig_len);
        unsigned char raw[64];
        if (!es || BN_bn2binpad(ECDSA_SIG_get0_r(es), raw, 32) != 32 ||
            BN_bn2binpad(ECDSA_SIG_get0_s(es), raw + 32, 32) != 32) {
            ECDSA_SIG_free(es);
            free(jwt);
            jwt = NULL;
            goto out;
        }
        ECDSA_SIG_free(es);
        s64 = b64(raw, sizeof raw);
    } else {
        s64 = b64(sig, sig_len);
    }
    char *full = s64 ? malloc(strlen(jwt) + strlen(s64) + 2) : NULL;
    if (full)
        sprintf(full, "%s.%s", jwt, s64);
    free(jwt);
    jwt = full;
out:
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(key);
    free(sig);
    free(hdr);
    free(claims);
    free(h64);
    free(c64);
    free(s64);
    return jwt;
}
