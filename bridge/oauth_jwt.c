/* oauth_jwt — see oauth_jwt.h. */
#include "oauth_jwt.h"

#include "b64url.h"
#include "pkce.h"

#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ASSERTION_LIFETIME_S 300

static char *b64(const unsigned char *in, size_t n)
{
    char *out = malloc(4 * n / 3 + 4);
    if (out)
        b64url_encode_to(in, n, out);
    return out;
}

/* header.claims.signature, signed with key (ES256 for an EC key, RS256 for
 * RSA); malloc'd, or NULL. */
static char *sign_jws(EVP_PKEY *key, const json_t *h, const json_t *c)
{
    char *hdr = json_dumps(h, JSON_COMPACT), *claims = json_dumps(c, JSON_COMPACT);
    char *h64 = hdr ? b64((const unsigned char *)hdr, strlen(hdr)) : NULL;
    char *c64 = claims ? b64((const unsigned char *)claims, strlen(claims)) : NULL;
    char *input = NULL, *s64 = NULL, *jwt = NULL;
    unsigned char *sig = NULL;
    size_t sig_len = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!h64 || !c64 || !ctx)
        goto out;
    input = malloc(strlen(h64) + strlen(c64) + 2);
    if (!input)
        goto out;
    sprintf(input, "%s.%s", h64, c64);
    if (EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) != 1 ||
        EVP_DigestSign(ctx, NULL, &sig_len, (unsigned char *)input, strlen(input)) != 1 ||
        !(sig = malloc(sig_len)) ||
        EVP_DigestSign(ctx, sig, &sig_len, (unsigned char *)input, strlen(input)) != 1)
        goto out;
    if (EVP_PKEY_base_id(key) == EVP_PKEY_EC) {
        /* JWS wants r || s, 32 bytes each, not OpenSSL's DER */
        const unsigned char *p = sig;
        ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)sig_len);
        unsigned char raw[64];
        if (es && BN_bn2binpad(ECDSA_SIG_get0_r(es), raw, 32) == 32 &&
            BN_bn2binpad(ECDSA_SIG_get0_s(es), raw + 32, 32) == 32)
            s64 = b64(raw, sizeof raw);
        ECDSA_SIG_free(es);
    } else {
        s64 = b64(sig, sig_len);
    }
    if (s64 && (jwt = malloc(strlen(input) + strlen(s64) + 2)) != NULL)
        sprintf(jwt, "%s.%s", input, s64);
out:
    EVP_MD_CTX_free(ctx);
    free(sig);
    free(hdr);
    free(claims);
    free(h64);
    free(c64);
    free(input);
    free(s64);
    return jwt;
}

char *oauth_jwt_assertion(const char *key_file, const char *client_id, const char *audience,
                          char *err, size_t cap)
{
    char *jwt = NULL;
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
    char jti[PKCE_MAX];
    if (!ec && EVP_PKEY_base_id(key) != EVP_PKEY_RSA) {
        snprintf(err, cap, "mcp-bridge: --oauth-client-key must be an EC P-256 or an RSA key");
    } else if (pkce_random(jti, 16) == 0) {
        long long now = (long long)time(NULL);
        json_t *h = json_pack("{s:s, s:s}", "alg", ec ? "ES256" : "RS256", "typ", "JWT");
        json_t *c = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I}", "iss", client_id, "sub", client_id,
                              "aud", audience, "jti", jti, "iat", (json_int_t)now, "exp",
                              (json_int_t)(now + ASSERTION_LIFETIME_S));
        jwt = h && c ? sign_jws(key, h, c) : NULL;
        json_decref(h);
        json_decref(c);
        if (!jwt)
            snprintf(err, cap, "mcp-bridge: signing the client assertion failed");
    }
    EVP_PKEY_free(key);
    return jwt;
}

struct oauth_dpop {
    EVP_PKEY *key;
    json_t *jwk;
};

/* The run's state around key (taken over, freed on failure). */
static struct oauth_dpop *dpop_of(EVP_PKEY *key)
{
    struct oauth_dpop *d = calloc(1, sizeof *d);
    if (!d) {
        EVP_PKEY_free(key);
        return NULL;
    }
    d->key = key;
    BIGNUM *x = NULL, *y = NULL;
    unsigned char bx[32], by[32];
    char sx[64], sy[64];
    if (d->key && EVP_PKEY_get_bn_param(d->key, "qx", &x) == 1 &&
        EVP_PKEY_get_bn_param(d->key, "qy", &y) == 1 && BN_bn2binpad(x, bx, 32) == 32 &&
        BN_bn2binpad(y, by, 32) == 32) {
        b64url_encode_to(bx, 32, sx);
        b64url_encode_to(by, 32, sy);
        d->jwk = json_pack("{s:s, s:s, s:s, s:s}", "kty", "EC", "crv", "P-256", "x", sx, "y", sy);
    }
    BN_free(x);
    BN_free(y);
    if (!d->jwk) {
        oauth_dpop_free(d);
        return NULL;
    }
    return d;
}

struct oauth_dpop *oauth_dpop_new(void)
{
    return dpop_of(EVP_EC_gen("P-256"));
}

char *oauth_dpop_export(const struct oauth_dpop *d)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL, *data;
    if (b && PEM_write_bio_PrivateKey(b, d->key, NULL, NULL, 0, NULL, NULL) == 1) {
        long n = BIO_get_mem_data(b, &data);
        if (n > 0 && (out = malloc((size_t)n + 1)) != NULL) {
            memcpy(out, data, (size_t)n);
            out[n] = '\0';
        }
    }
    BIO_free(b);
    return out;
}

struct oauth_dpop *oauth_dpop_import(const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    EVP_PKEY *key = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    /* only the kind of key this module makes */
    if (key && !EVP_PKEY_is_a(key, "EC")) {
        EVP_PKEY_free(key);
        key = NULL;
    }
    return key ? dpop_of(key) : NULL;
}

void oauth_dpop_free(struct oauth_dpop *d)
{
    if (!d)
        return;
    EVP_PKEY_free(d->key);
    json_decref(d->jwk);
    free(d);
}

char *oauth_dpop_proof(struct oauth_dpop *d, const char *htm, const char *htu, const char *token,
                       const char *nonce)
{
    char jti[PKCE_MAX];
    if (pkce_random(jti, 16) < 0)
        return NULL;
    json_t *h = json_pack("{s:s, s:s, s:O}", "typ", "dpop+jwt", "alg", "ES256", "jwk", d->jwk);
    json_t *c = json_pack("{s:s, s:s, s:s, s:I}", "jti", jti, "htm", htm, "htu", htu, "iat",
                          (json_int_t)time(NULL));
    char *jwt = NULL;
    if (h && c) {
        if (token) {
            unsigned char md[SHA256_DIGEST_LENGTH];
            char ath[PKCE_MAX];
            SHA256((const unsigned char *)token, strlen(token), md);
            b64url_encode_to(md, sizeof md, ath);
            json_object_set_new(c, "ath", json_string(ath));
        }
        if (nonce)
            json_object_set_new(c, "nonce", json_string(nonce));
        jwt = sign_jws(d->key, h, c);
    }
    json_decref(h);
    json_decref(c);
    return jwt;
}
