/* oauth — JWT access tokens from an external authorization server (MCP
 * authorization: mcpd as an OAuth 2.1 resource server).
 *
 * A token is accepted when, in this order: its header names an allowed
 * algorithm (RS256/384/512, PS256/384/512, ES256/384/512: never "none",
 * never an HMAC, so a public key can never serve as a shared secret); its
 * signature verifies (cjose) with the issuer's key of that `kid` (jwks.h);
 * and only then its claims: `iss` is the issuer, `aud` (a string or an
 * array) holds this resource, or the audience configured instead (RFC
 * 8707: a token meant for another service is refused), `exp` is ahead and `nbf`/`iat` behind, each
 * with OAUTH_LEEWAY_S of clock skew, and every required scope is in `scope` (space-separated) or
 * `scp` (an array or a string). A token bound to a client's key (RFC 9449:
 * cnf.jkt) says so, for the caller to ask for a proof of that key (dpop.h).
 *
 * The principal is "oauth:<iss>#<sub>", or, when that does not fit
 * AUTH_PRINCIPAL_MAX, "oauth:" and the SHA-256 of "<iss>#<sub>" in hex
 * (cut to fit). Thread-safe once configured. */
#ifndef MCPD_OAUTH_H
#define MCPD_OAUTH_H

#include <cjose/jwk.h>
#include <cjose/jws.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define OAUTH_LEEWAY_S 60

enum oauth_verdict {
    OAUTH_OK = 0,
    OAUTH_INVALID,            /* 401 error="invalid_token" */
    OAUTH_INSUFFICIENT_SCOPE, /* 403 error="insufficient_scope" */
    OAUTH_BUSY,               /* 503: not checked now, retry shortly */
};

/* issuer and resource are URLs; audience what `aud` must hold (NULL or
 * "": the resource); scopes a space-separated list (may be NULL or "").
 * Copies them. 0, or -1. */
int oauth_configure(const char *issuer, const char *resource, const char *audience,
                    const char *scopes);
int oauth_enabled(void);
void oauth_shutdown(void);
const char *oauth_issuer(void);
const char *oauth_resource(void);
const char *oauth_scopes(void);   /* "" when none is required */
const char *oauth_audience(void); /* what aud must hold */

/* Checks a compact JWS, or (introspect.h, when configured) an opaque token, which client (the
 * client's address, or NULL) has its budget of introspection calls for. On OAUTH_OK fills
 * principal (cap bytes) and *expires_ms (wall clock); on OAUTH_OK and OAUTH_INSUFFICIENT_SCOPE,
 * bound (DPOP_JKT_LEN + 1 bytes: the thumbprint of the key the token is bound to, "" when it is
 * a plain bearer token), which the caller must compare before it says anything more. Otherwise
 * *why (static text) says why. */
enum oauth_verdict oauth_check(const char *token, const char *client, char *principal, size_t cap,
                               int64_t *expires_ms, char *bound, const char **why);

/* The claims of a JWS once its signature verifies with key: a new object
 * (caller decrefs), or NULL with *why = bad_signature or bad_claims
 * (static text). Nothing but the header is read before the signature. */
json_t *oauth_verified_claims(cjose_jws_t *jws, const cjose_jwk_t *key, const char *bad_signature,
                              const char *bad_claims, const char **why);

/* The protected resource metadata (RFC 9728), for the caller to free. */
char *oauth_resource_metadata(void);
/* The metadata's URL: the resource's origin, "/.well-known/oauth-protected-resource",
 * then the resource's path. Caller frees; NULL when out of memory. */
char *oauth_metadata_url(const char *resource);

/* ---- pure parts, exposed for the unit tests ---- */

/* 1 when alg may sign an access token, and which key type it needs. */
int oauth_alg_allowed(const char *alg, int *kty_rsa);
/* The claims' verdict for a token whose signature verified; audience is
 * what aud must hold. now_s: wall clock seconds. Fills principal and
 * *expires_ms on OAUTH_OK, and bound (as oauth_check) on OAUTH_OK and
 * OAUTH_INSUFFICIENT_SCOPE. */
enum oauth_verdict oauth_claims_check(json_t *claims, const char *issuer, const char *audience,
                                      const char *scopes, int64_t now_s, char *principal,
                                      size_t cap, int64_t *expires_ms, char *bound,
                                      const char **why);
/* The principal for iss and sub, into out (cap bytes, at least 48). 0, or -1. */
int oauth_principal(const char *iss, const char *sub, char *out, size_t cap);

#endif
