/* jwks — the signing keys of one OAuth authorization server, fetched and
 * kept.
 *
 * The issuer's metadata is found by OpenID discovery
 * (<issuer>/.well-known/openid-configuration), then RFC 8414
 * (<origin>/.well-known/oauth-authorization-server<path>); its `issuer`
 * must equal the configured one, and its `jwks_uri` names the key set.
 * Both are fetched with libcurl (no redirects, JWKS_DOC_MAX bytes each),
 * within JWKS_FETCH_TIMEOUT_MS for the whole refresh.
 *
 * Keys are kept in memory. A token naming a `kid` that is not there makes
 * the set be fetched again, at most once every JWKS_REFRESH_MIN_MS, so a
 * flood of tokens with made-up `kid`s costs one fetch per interval, not one
 * per request. Fetches run one at a time under their own lock; lookups of
 * a known key never wait for one. A failed fetch keeps the keys already
 * held: with none held, every token is refused (fail closed).
 *
 * Only public keys for signing are kept: RSA and EC (cjose has no OKP), not
 * symmetric ("oct") keys, not those marked "use":"enc". Thread-safe. */
#ifndef MCPD_JWKS_H
#define MCPD_JWKS_H

#include <cjose/jwk.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define JWKS_FETCH_TIMEOUT_MS 5000
#define JWKS_REFRESH_MIN_MS 10000
/* A set this old is fetched again on the next lookup (keys rotate). */
#define JWKS_MAX_AGE_MS 3600000
#define JWKS_DOC_MAX (1024 * 1024)
#define JWKS_KEYS_MAX 64

/* Sets the issuer whose keys are looked up. No fetch yet. 0, or -1. */
int jwks_configure(const char *issuer);
void jwks_shutdown(void);

/* The key for kid (NULL: the token names none, and the set must then hold
 * exactly one key of type kty) of type kty (CJOSE_JWK_KTY_RSA or _EC),
 * retained for the caller (jwks_release it); or NULL, with *why
 * (static text) and *unreachable set when the set could not be fetched and
 * none is held. May fetch (see above). */
cjose_jwk_t *jwks_key(const char *kid, cjose_jwk_kty_t kty, const char **why, int *unreachable);

/* Lets go of a key from jwks_key (cjose's reference count is not atomic:
 * it is kept under the set's lock). NULL is fine. */
void jwks_release(cjose_jwk_t *jwk);
/* How many times the key set was fetched (for logs and tests). */
uint64_t jwks_fetches(void);

/* ---- pure parts, exposed for the unit tests ---- */

/* The URL of the discovery document: kind 0 OpenID (appended to the
 * issuer), 1 RFC 8414 (inserted between origin and path). Caller frees;
 * NULL on a malformed issuer or out of memory. */
char *jwks_discovery_url(const char *issuer, int kind);
/* The jwks_uri of a metadata document, when its issuer is `issuer`;
 * otherwise NULL with *why. Points into doc. */
const char *jwks_uri_of(json_t *doc, const char *issuer, const char **why);

struct jwks_key {
    char kid[128]; /* "" when the key has none */
    cjose_jwk_kty_t kty;
    cjose_jwk_t *jwk;
};
/* Reads the usable keys of a JWKS document into out (at most max). Returns
 * how many (keys it cannot use are skipped), or -1 when doc is no key set. */
int jwks_parse(json_t *doc, struct jwks_key *out, int max);

#endif
