/* oauth — see oauth.h. */
#include "oauth.h"
#include "dpop.h"
#include "auth.h"
#include "introspect.h"
#include "jwks.h"
#include "clock.h"
#include "token.h"

#include <cjose/jws.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    char *issuer, *resource, *audience, *scopes;
} oa;

int oauth_configure(const char *issuer, const char *resource, const char *audience,
                    const char *scopes)
{
    oauth_shutdown();
    oa.issuer = strdup(issuer);
    oa.resource = strdup(resource);
    oa.audience = strdup(audience && *audience ? audience : resource);
    oa.scopes = strdup(scopes ? scopes : "");
    if (!oa.issuer || !oa.resource || !oa.audience || !oa.scopes || jwks_configure(issuer) != 0) {
        oauth_shutdown();
        return -1;
    }
    return 0;
}

int oauth_enabled(void)
{
    return oa.issuer != NULL;
}

void oauth_shutdown(void)
{
    if (oa.issuer)
        jwks_shutdown();
    free(oa.issuer);
    free(oa.resource);
    free(oa.audience);
    free(oa.scopes);
    oa.issuer = oa.resource = oa.audience = oa.scopes = NULL;
}

const char *oauth_issuer(void)
{
    return oa.issuer;
}

const char *oauth_resource(void)
{
    return oa.resource;
}

const char *oauth_audience(void)
{
    return oa.audience;
}

const char *oauth_scopes(void)
{
    return oa.scopes ? oa.scopes : "";
}

int oauth_alg_allowed(const char *alg, int *kty_rsa)
{
    static const char *const rsa[] = {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"};
    static const char *const ec[] = {"ES256", "ES384", "ES512"};
    for (size_t i = 0; alg && i < sizeof rsa / sizeof rsa[0]; i++)
        if (strcmp(alg, rsa[i]) == 0)
            return *kty_rsa = 1;
    for (size_t i = 0; alg && i < sizeof ec / sizeof ec[0]; i++)
        if (strcmp(alg, ec[i]) == 0) {
            *kty_rsa = 0;
            return 1;
        }
    return 0;
}

/* Printable ASCII without blanks, quotes or backslashes. */
static int plain(const char *s)
{
    for (; *s; s++)
        if (*s <= ' ' || *s > '~' || *s == '"' || *s == '\\' || *s == '\'')
            return 0;
    return 1;
}

int oauth_principal(const char *iss, const char *sub, char *out, size_t cap)
{
    if (cap < 48)
        return -1;
    int n = snprintf(out, cap, "oauth:%s#%s", iss, sub);
    if (n >= 0 && (size_t)n < cap && plain(iss) && plain(sub))
        return 0;
    /* Too long to keep whole, or holding what a log line or a terminal
     * should not show: a digest names the same person every time. */
    char *both = NULL, hash[TOKEN_HASH_LEN + 1];
    if (asprintf(&both, "%s#%s", iss, sub) < 0)
        return -1;
    int rc = token_hash(both, hash);
    free(both);
    if (rc != 0)
        return -1;
    snprintf(out, cap, "oauth:%s", hash);
    return 0;
}

/* 1 when word (len bytes) is one of the space-separated words of list. */
static int has_word(const char *list, const char *word, size_t len)
{
    for (const char *p = list; p && *p;) {
        p += strspn(p, " ");
        size_t n = strcspn(p, " ");
        if (n == len && n && strncmp(p, word, n) == 0)
            return 1;
        p += n;
    }
    return 0;
}

/* 1 when the token's scopes hold the scope word (len bytes). */
static int granted(json_t *claims, const char *word, size_t len)
{
    if (has_word(json_string_value(json_object_get(claims, "scope")), word, len))
        return 1;
    json_t *scp = json_object_get(claims, "scp");
    if (json_is_string(scp))
        return has_word(json_string_value(scp), word, len);
    size_t i;
    json_t *s;
    json_array_foreach(scp, i, s)
    {
        const char *v = json_string_value(s);
        if (v && strlen(v) == len && strncmp(v, word, len) == 0)
            return 1;
    }
    return 0;
}

static int audience_holds(json_t *aud, const char *audience)
{
    if (json_is_string(aud))
        return strcmp(json_string_value(aud), audience) == 0;
    size_t i;
    json_t *a;
    json_array_foreach(aud, i, a)
    {
        if (json_is_string(a) && strcmp(json_string_value(a), audience) == 0)
            return 1;
    }
    return 0;
}

/* A NumericDate claim: 1 and *out when present and a number, 0 when
 * absent, -1 when malformed. */
static int date_claim(json_t *claims, const char *name, int64_t *out)
{
    json_t *v = json_object_get(claims, name);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return -1;
    double d = json_number_value(v);
    if (!(d > -1e15 && d < 1e15))
        return -1;
    *out = (int64_t)d;
    return 1;
}

enum oauth_verdict oauth_claims_check(json_t *claims, const char *issuer, const char *audience,
                                      const char *scopes, int64_t now_s, char *principal,
                                      size_t cap, int64_t *expires_ms, char *bound,
                                      const char **why)
{
    bound[0] = '\0';
    const char *iss = json_string_value(json_object_get(claims, "iss"));
    if (!iss || strcmp(iss, issuer) != 0) {
        *why = "the token was issued by another authorization server";
        return OAUTH_INVALID;
    }
    if (!audience_holds(json_object_get(claims, "aud"), audience)) {
        *why = "the token is not meant for this resource (aud)";
        return OAUTH_INVALID;
    }
    int64_t exp = 0, nbf = 0, iat = 0;
    int has_exp = date_claim(claims, "exp", &exp);
    int has_nbf = date_claim(claims, "nbf", &nbf);
    int has_iat = date_claim(claims, "iat", &iat);
    if (has_exp != 1 || has_nbf < 0 || has_iat < 0) {
        *why = "the token has no valid exp, or a malformed nbf or iat";
        return OAUTH_INVALID;
    }
    if (now_s >= exp + OAUTH_LEEWAY_S) {
        *why = "the token has expired";
        return OAUTH_INVALID;
    }
    if ((has_nbf && now_s + OAUTH_LEEWAY_S < nbf) || (has_iat && now_s + OAUTH_LEEWAY_S < iat)) {
        *why = "the token is not valid yet (nbf)";
        return OAUTH_INVALID;
    }
    const char *sub = json_string_value(json_object_get(claims, "sub"));
    if (!sub || !*sub) {
        *why = "the token names no subject (sub)";
        return OAUTH_INVALID;
    }
    /* The binding before the scopes: whoever cannot prove the key learns
     * nothing of what the token grants (the caller compares bound). */
    json_t *cnf = json_object_get(claims, "cnf");
    if (cnf) {
        const char *jkt = json_string_value(json_object_get(cnf, "jkt"));
        /* a binding not understood (x5t#S256: mutual TLS) cannot be proven */
        if (!jkt || strlen(jkt) != DPOP_JKT_LEN) {
            *why = "the token is bound to a key in a way this server cannot check (cnf)";
            return OAUTH_INVALID;
        }
        memcpy(bound, jkt, DPOP_JKT_LEN + 1);
    }
    for (const char *p = scopes; p && *p;) {
        p += strspn(p, " ");
        size_t n = strcspn(p, " ");
        if (n && !granted(claims, p, n)) {
            *why = "the token lacks a required scope";
            return OAUTH_INSUFFICIENT_SCOPE;
        }
        p += n;
    }
    if (oauth_principal(iss, sub, principal, cap) != 0) {
        *why = "the token's principal could not be formed";
        return OAUTH_INVALID;
    }
    /* The grant ends with the token, the leeway included. */
    *expires_ms = (exp + OAUTH_LEEWAY_S) * 1000;
    return OAUTH_OK;
}

json_t *oauth_verified_claims(cjose_jws_t *jws, const cjose_jwk_t *key, const char *bad_signature,
                              const char *bad_claims, const char **why)
{
    cjose_err err;
    uint8_t *payload = NULL;
    size_t payload_len = 0;
    if (!cjose_jws_verify(jws, key, &err)) {
        *why = bad_signature;
        return NULL;
    }
    json_t *claims = NULL;
    if (!cjose_jws_get_plaintext(jws, &payload, &payload_len, &err) ||
        !(claims = json_loadb((const char *)payload, payload_len, 0, NULL)) ||
        !json_is_object(claims)) {
        json_decref(claims);
        *why = bad_claims;
        return NULL;
    }
    return claims;
}

enum oauth_verdict oauth_check(const char *token, const char *client, char *principal, size_t cap,
                               int64_t *expires_ms, char *bound, const char **why)
{
    bound[0] = '\0';
    if (!strchr(token, '.') && introspect_enabled())
        return introspect_check(token, client, principal, cap, expires_ms, bound, why);
    cjose_err err;
    cjose_jws_t *jws = cjose_jws_import(token, strlen(token), &err);
    if (!jws) {
        *why = "the token is not a signed JWT";
        return OAUTH_INVALID;
    }
    enum oauth_verdict v = OAUTH_INVALID;
    json_t *hdr = (json_t *)cjose_jws_get_protected(jws);
    const char *alg = json_string_value(json_object_get(hdr, "alg"));
    json_t *kidv = json_object_get(hdr, "kid");
    int rsa = 0, unreachable = 0;
    cjose_jwk_t *key = NULL;
    json_t *claims = NULL;
    /* RFC 7515 4.1.11: an extension named critical must be understood, and
     * this code understands none. */
    if (json_object_get(hdr, "crit")) {
        *why = "the token has critical header parameters";
        goto out;
    }
    if (!oauth_alg_allowed(alg, &rsa)) {
        *why = "the token's signing algorithm is not allowed";
        goto out;
    }
    if (kidv && !json_is_string(kidv)) {
        *why = "the token's kid is not a string";
        goto out;
    }
    key = jwks_key(json_string_value(kidv), rsa ? CJOSE_JWK_KTY_RSA : CJOSE_JWK_KTY_EC, why,
                   &unreachable);
    if (!key)
        goto out;
    /* Nothing the token says is read before this point but its header. */
    claims = oauth_verified_claims(jws, key, "the token's signature does not verify",
                                   "the token's claims are not a JSON object", why);
    if (!claims)
        goto out;
    v = oauth_claims_check(claims, oa.issuer, oa.audience, oa.scopes, clock_wall_ms() / 1000,
                           principal, cap, expires_ms, bound, why);
out:
    json_decref(claims);
    jwks_release(key);
    cjose_jws_release(jws);
    return v;
}

char *oauth_resource_metadata(void)
{
    json_t *scopes = json_array();
    for (const char *p = oauth_scopes(); *p;) {
        p += strspn(p, " ");
        size_t n = strcspn(p, " ");
        if (n)
            json_array_append_new(scopes, json_stringn(p, n));
        p += n;
    }
    json_t *algs = json_array();
    for (const char *p = DPOP_ALGS; *p;) {
        size_t n = strcspn(p, " ");
        json_array_append_new(algs, json_stringn(p, n));
        p += n + strspn(p + n, " ");
    }
    json_t *doc =
        json_pack("{s:s, s:[s], s:o, s:[s], s:o}", "resource", oa.resource, "authorization_servers",
                  oa.issuer, "scopes_supported", scopes, "bearer_methods_supported", "header",
                  "dpop_signing_alg_values_supported", algs);
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return text;
}

char *oauth_metadata_url(const char *resource)
{
    const char *scheme_end = strstr(resource, "://");
    if (!scheme_end)
        return NULL;
    const char *host = scheme_end + 3;
    size_t origin = (size_t)(host - resource) + strcspn(host, "/?#");
    const char *path = resource + origin;
    size_t plen = strcspn(path, "?#");
    while (plen && path[plen - 1] == '/')
        plen--;
    char *url = NULL;
    if (asprintf(&url, "%.*s/.well-known/oauth-protected-resource%.*s", (int)origin, resource,
                 (int)plen, path) < 0)
        return NULL;
    return url;
}
