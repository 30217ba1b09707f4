/* auth — bearer tokens on every way in over the network.
 *
 * With --auth token, every request to /mcp (POST, GET, DELETE, long-polls)
 * and every WebSocket handshake must carry a token that mcp-admin issued:
 * `Authorization: Bearer <token>`, or, for WebSocket clients that cannot
 * set headers, a second subprotocol `bearer.<token>` next to `mcp`. The
 * token is hashed (token.h) and looked up in the store; its name is the
 * request's principal, and a session belongs to the principal that created
 * it. Unknown, expired and revoked tokens are refused with 401 and
 * `WWW-Authenticate: Bearer`.
 *
 * Lookups are cached for AUTH_CACHE_MS so that a busy client costs no
 * query per request; a revocation therefore takes effect within that time
 * (and kill_watch ends the revoked principal's sessions). Thread-safe. */
#ifndef MCPD_AUTH_H
#define MCPD_AUTH_H

#include <stdint.h>

struct store;

#define AUTH_CACHE_MS 500
#define AUTH_PRINCIPAL_MAX 64

/* mode: "none" or "token". Returns 0, or -1 for another mode. */
int auth_configure(const char *mode, struct store *st);
int auth_required(void);
/* Accepts the token in `file` (surrounding blanks ignored) as the one named
 * "bootstrap", for deployments that provision a first token as a secret.
 * It only creates that token: one that exists (revoked, or with another
 * value) is left as it is, with a warning. Returns 0, or -1 with *err
 * (caller frees) when the file holds no token or the store fails. */
int auth_bootstrap(const char *file, char **err);
void auth_shutdown(void);

/* Checks a request's credentials: the Authorization header value, or the
 * WebSocket subprotocol list (either may be NULL). On success returns 0
 * and writes the principal ("" when auth is off). Otherwise returns -1
 * and *why says why, for the 401's message (static text). */
int auth_check(const char *authorization, const char *ws_protocols,
               char principal[AUTH_PRINCIPAL_MAX], const char **why);

#endif
