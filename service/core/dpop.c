/* dpop — see dpop.h. */
#include "dpop.h"
#include "b64url.h"
#include "log.h"
#include "oauth.h"
#include "replay_window.h"
#include "token_bucket.h"

#include <cjose/jwk.h>
#include <cjose/jws.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define JTI_MAX 256

static struct {
    pthread_mutex_t mu;
    struct replay_window *jtis; /* made on first use */
    struct token_bucket warnings;
} seen = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int sha256_b64url(const char *text, size_t n, char *out)
{
    unsigned char d[32];
    if (gnutls_hash_fast(GNUTLS_DIG_SHA256, text, n, d) != 0)
        return -1;
    b64url_encode_to(d, sizeof d, out);
    return 0;
}

int dpop_thumbprint(const json_t *jwk, char *jkt)
{
    const char *kty = json_string_value(json_object_get(jwk, "kty"));
    static const char *const rsa[] = {"e", "kty", "n", NULL};
    static const char *const ec[] = {"crv", "kty", "x", "y", NULL};
    const char *const *members = !kty                      ? NULL
                                 : strcmp(kty, "RSA") == 0 ? rsa
                                 : strcmp(kty, "EC") == 0  ? ec
                                                           : NULL;
    if (!members)
        return -1;
    /* RFC 7638 3: the required members only, sorted, no blanks. */
    json_t *canon = json_object();
    int ok = canon != NULL;
    for (int i = 0; ok && members[i]; i++) {
        json_t *v = json_object_get(jwk, members[i]);
        ok = json_is_string(v) && json_object_set(canon, members[i], v) == 0;
    }
    char *text = ok ? json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(canon);
    ok = text && sha256_b64url(text, strlen(text), jkt) == 0;
    free(text);
    return ok ? 0 : -1;
}

/* url's scheme://host[:port] lowercased without a default port, then its
 * path ("/" when none), into out. 0, or -1 when it is no http(s) URL or
 * does not fit. */
static int htu_normal(const char *url, char *out, size_t cap)
{
    const char *sep = strstr(url, "://");
    if (!sep)
        return -1;
    size_t scheme = (size_t)(sep - url);
    int https = scheme == 5 && strncasecmp(url, "https", 5) == 0;
    if (!https && !(scheme == 4 && strncasecmp(url, "http", 4) == 0))
        return -1;
    const char *host = sep + 3;
    size_t authority = strcspn(host, "/?#");
    size_t hostlen = authority;
    const char *colon = memchr(host, ':', authority);
    /* an IPv6 literal's colons are inside its brackets */
    const char *bracket = memchr(host, ']', authority);
    if (bracket && colon && colon < bracket)
        colon = memchr(bracket, ':', authority - (size_t)(bracket - host));
    if (colon) {
        const char *port = colon + 1;
        size_t plen = authority - (size_t)(port - host);
        if ((https && plen == 3 && memcmp(port, "443", 3) == 0) ||
            (!https && plen == 2 && memcmp(port, "80", 2) == 0))
            hostlen = (size_t)(colon - host);
    }
    const char *path = host + authority;
    size_t pathlen = strcspn(path, "?#");
    size_t n = 0;
    int w = snprintf(out, cap, "%s://", https ? "https" : "http");
    if (w < 0 || (size_t)w >= cap)
        return -1;
    n = (size_t)w;
    if (n + hostlen + (pathlen ? pathlen : 1) + 1 > cap)
        return -1;
    for (size_t i = 0; i < hostlen; i++)
        out[n++] = (char)((host[i] >= 'A' && host[i] <= 'Z') ? host[i] + 32 : host[i]);
    if (pathlen) {
        memcpy(out + n, path, pathlen);
        n += pathlen;
    } else {
        out[n++] = '/';
    }
    out[n] = '\0';
    return 0;
}

int dpop_htu_matches(const char *htu, const char *url)
{
    char a[2048], b[2048];
    return htu_normal(htu, a, sizeof a) == 0 && htu_normal(url, b, sizeof b) == 0 &&
           strcmp(a, b) == 0;
}

int dpop_first_use(const struct dpop_proof *p, int64_t now_s)
{
    pthread_mutex_lock(&seen.mu);
    if (!seen.jtis) {
        /* a proof is good for the window either side of its iat */
        seen.jtis = replay_window_new(DPOP_JTI_MAX, 2 * DPOP_IAT_WINDOW_S);
        token_bucket_init(&seen.warnings, 1.0 / 60, 1, now_s * 1000); /* one a minute */
    }
    uint64_t before = seen.jtis ? replay_window_forgotten(seen.jtis) : 0;
    int rc = seen.jtis ? replay_window_first(seen.jtis, p->use, now_s) : -1;
    int early = rc == 1 && replay_window_forgotten(seen.jtis) > before &&
                token_bucket_take(&seen.warnings, now_s * 1000);
    pthread_mutex_unlock(&seen.mu);
    if (early)
        log_event(LOG_WARN, NULL, "dpop_replay_window_full",
                  "more than %d DPoP proofs in %d s: this process forgets the oldest before "
                  "their window ends, so a replay of one costs a store call",
                  DPOP_JTI_MAX, 2 * DPOP_IAT_WINDOW_S);
    return rc;
}

void dpop_reset(void)
{
    pthread_mutex_lock(&seen.mu);
    replay_window_free(seen.jtis);
    seen.jtis = NULL;
    pthread_mutex_unlock(&seen.mu);
}

/* The proof's claims, once its signature verified. */
static int claims_check(json_t *c, const char *method, const char *htu, const char *token,
                        int64_t now_s, struct dpop_proof *out, const char **why)
{
    const char *jti = json_string_value(json_object_get(c, "jti"));
    const char *htm = json_string_value(json_object_get(c, "htm"));
    const char *u = json_string_value(json_object_get(c, "htu"));
    const char *ath = json_string_value(json_object_get(c, "ath"));
    json_t *iat = json_object_get(c, "iat");
    if (!jti || !*jti || strlen(jti) > JTI_MAX) {
        *why = "the DPoP proof has no jti";
        return -1;
    }
    if (!htm || strcmp(htm, method) != 0) {
        *why = "the DPoP proof is for another method (htm)";
        return -1;
    }
    if (!u || !dpop_htu_matches(u, htu)) {
        *why = "the DPoP proof is for another URL (htu)";
        return -1;
    }
    if (!json_is_integer(iat) && !json_is_real(iat)) {
        *why = "the DPoP proof has no iat";
        return -1;
    }
    double at = json_number_value(iat);
    if (at < (double)(now_s - DPOP_IAT_WINDOW_S) || at > (double)(now_s + DPOP_IAT_WINDOW_S)) {
        *why = "the DPoP proof is too old or from the future (iat)";
        return -1;
    }
    out->valid_until_s = (int64_t)at + DPOP_IAT_WINDOW_S + 1;
    char want[DPOP_JKT_LEN + 1];
    if (!ath || sha256_b64url(token, strlen(token), want) != 0 || strcmp(ath, want) != 0) {
        *why = "the DPoP proof is for another access token (ath)";
        return -1;
    }
    /* The jti is the client's: the same from two keys is two proofs. */
    char use[DPOP_JKT_LEN + 2 + JTI_MAX];
    int n = snprintf(use, sizeof use, "%s %s", out->jkt, jti);
    if (n < 0 || (size_t)n >= sizeof use || sha256_b64url(use, (size_t)n, out->use) != 0) {
        *why = "the DPoP proof could not be checked";
        return -1;
    }
    return 0;
}

/* The public key in the proof's header, checked against alg's family;
 * writes its thumbprint. NULL with *why. */
static cjose_jwk_t *proof_key(json_t *hdr, char *jkt, const char **why)
{
    const char *alg = json_string_value(json_object_get(hdr, "alg"));
    json_t *jwk = json_object_get(hdr, "jwk");
    int rsa = 0;
    if (!oauth_alg_allowed(alg, &rsa)) {
        *why = "the DPoP proof's signing algorithm is not allowed";
        return NULL;
    }
    if (!json_is_object(jwk)) {
        *why = "the DPoP proof carries no public key (jwk)";
        return NULL;
    }
    /* RFC 9449 4.3: a private key in a proof is refused, whoever sent it */
    static const char *const secret[] = {"d", "p", "q", "dp", "dq", "qi", "k"};
    for (size_t i = 0; i < sizeof secret / sizeof secret[0]; i++)
        if (json_object_get(jwk, secret[i])) {
            *why = "the DPoP proof's key holds private members";
            return NULL;
        }
    const char *kty = json_string_value(json_object_get(jwk, "kty"));
    if (!kty || strcmp(kty, rsa ? "RSA" : "EC") != 0 || dpop_thumbprint(jwk, jkt) != 0) {
        *why = "the DPoP proof's key does not suit its algorithm";
        return NULL;
    }
    /* The client picks the key: a huge modulus or exponent would make each
     * verification cost milliseconds of CPU. Real ones are at most 4096
     * bits with e = 65537. */
    const char *n = json_string_value(json_object_get(jwk, "n"));
    const char *e = json_string_value(json_object_get(jwk, "e"));
    if (rsa && (strlen(n) > B64URL_LEN(DPOP_RSA_MAX_BITS / 8) || strlen(e) > B64URL_LEN(4))) {
        *why = "the DPoP proof's RSA key is larger than 4096 bits or its exponent than 32";
        return NULL;
    }
    char *text = json_dumps(jwk, JSON_COMPACT);
    cjose_err err;
    cjose_jwk_t *key = text ? cjose_jwk_import(text, strlen(text), &err) : NULL;
    free(text);
    if (!key)
        *why = "the DPoP proof's key could not be read";
    return key;
}

int dpop_check(const char *proof, const char *method, const char *htu, const char *token,
               int64_t now_s, struct dpop_proof *out, const char **why)
{
    cjose_err err;
    size_t len = proof ? strlen(proof) : 0;
    if (!len || len > DPOP_PROOF_MAX) {
        *why = "a DPoP proof is required (the DPoP header)";
        return -1;
    }
    cjose_jws_t *jws = cjose_jws_import(proof, len, &err);
    if (!jws) {
        *why = "the DPoP proof is not a signed JWT";
        return -1;
    }
    int rc = -1;
    json_t *hdr = (json_t *)cjose_jws_get_protected(jws);
    const char *typ = json_string_value(json_object_get(hdr, "typ"));
    cjose_jwk_t *key = NULL;
    json_t *claims = NULL;
    if (!typ || strcmp(typ, "dpop+jwt") != 0) {
        *why = "the DPoP proof's typ is not dpop+jwt";
        goto out;
    }
    if (json_object_get(hdr, "crit")) {
        *why = "the DPoP proof has critical header parameters";
        goto out;
    }
    if (!(key = proof_key(hdr, out->jkt, why)))
        goto out;
    claims = oauth_verified_claims(jws, key, "the DPoP proof's signature does not verify",
                                   "the DPoP proof's claims are not a JSON object", why);
    if (claims)
        rc = claims_check(claims, method, htu, token, now_s, out, why);
out:
    json_decref(claims);
    cjose_jwk_release(key);
    cjose_jws_release(jws);
    return rc;
}
