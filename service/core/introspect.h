/* introspect — opaque access tokens, checked by the authorization server
 * (OAuth 2.0 Token Introspection, RFC 7662).
 *
 * With --oauth-introspection-url, a bearer value that is not a JWT is
 * POSTed there (token=…, token_type_hint=access_token) with mcpd's client
 * credentials (HTTP Basic, RFC 6749 2.3.1), within INTROSPECT_TIMEOUT_MS.
 * An answer with "active": true is then checked as a JWT's claims are
 * (oauth.h: aud, exp, nbf, scopes; iss when present must be the issuer),
 * `sub` falling back to `client_id` for the principal.
 *
 * Answers are kept INTROSPECT_CACHE_MS, keyed by the token's SHA-256 (the
 * token itself is never kept), in an auth_cache (auth_cache.h): at most
 * INTROSPECT_CACHE_TOKENS active tokens and as many inactive values, each
 * kind evicting its own least recently used. So memory is bounded however
 * many tokens are tried, a flood of made-up ones never pushes out a token
 * in use, and a token revoked at the server is refused within
 * INTROSPECT_CACHE_MS. The server is asked outside the lock. Thread-safe
 * once configured.
 *
 * Tokens not in the table cost a call to the server each, so a flood of
 * made-up ones would be passed on to it. The calls are therefore budgeted:
 * INTROSPECT_RATE a second, INTROSPECT_BURST in a row, and of those each
 * client (by address; an IPv6 client by its /64) INTROSPECT_CLIENT_RATE a second and
 * INTROSPECT_CLIENT_BURST in a row, so that one client's flood leaves
 * most of the budget to everyone else's new tokens. The clients' budgets
 * are kept for the last INTROSPECT_CLIENTS addresses seen, at most (a slot
 * an address lands on that another holds starts full again; the overall
 * budget still bounds the calls). A token over a budget is neither
 * accepted nor refused but answered OAUTH_BUSY (503, retry shortly);
 * tokens already in the table keep being served. */
#ifndef MCPD_INTROSPECT_H
#define MCPD_INTROSPECT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "oauth.h"

#define INTROSPECT_TIMEOUT_MS 5000
#define INTROSPECT_CACHE_MS 10000
#define INTROSPECT_CACHE_TOKENS 1024
#define INTROSPECT_RATE 20
#define INTROSPECT_BURST 40
#define INTROSPECT_CLIENT_RATE 5
#define INTROSPECT_CLIENT_BURST 10
#define INTROSPECT_CLIENTS 1024

/* Copies the settings. 0, or -1. */
int introspect_configure(const char *url, const char *client_id, const char *client_secret);
int introspect_enabled(void);
void introspect_shutdown(void);

/* As oauth_check, for an opaque token. */
enum oauth_verdict introspect_check(const char *token, const char *client, char *principal,
                                    size_t cap, int64_t *expires_ms, char *bound, const char **why);

/* The claims to check for an introspection answer (pure; for the unit
 * tests): NULL when it is not an active token's, else a new object with
 * `iss` set to issuer when absent and `sub` to `client_id` when absent
 * (caller decrefs). */
json_t *introspect_claims(json_t *answer, const char *issuer);

#endif
