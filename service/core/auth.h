/* auth — bearer tokens on every way in over the network, for as long as
 * the access they grant lasts.
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
 * With OAuth, a token the authorization server bound to the client's key
 * (RFC 9449) comes as `Authorization: DPoP <token>` with a proof of that
 * key in the `DPoP` header (dpop.h), on requests that carry one (HTTP and
 * the WebSocket handshake). A bound token sent as a bearer token, or with
 * a proof of another key, is refused: else the binding would mean nothing.
 *
 * Lookups are cached (auth_cache.h: bounded, least recently used evicted,
 * unknown values forgotten after AUTH_CACHE_MS) so that a busy client costs
 * no query per request; a revocation therefore takes effect on new
 * requests within AUTH_CACHE_MS. The store is asked outside the lock, so
 * a slow or failing lookup holds up no other request.
 *
 * A check grants access for a moment; a connection lasts. Every
 * connection authenticated by a token (a WebSocket, an event stream, a
 * request waiting for its reply) holds it with auth_hold until it ends:
 * transports through their follow (follow_token) or push connection
 * (push_io.grant).
 * kill_watch reports revoked tokens (auth_token_revoked) and asks for
 * expiries (auth_expire), and each hold of such a token is told to end
 * through its callback. Thread-safe. */
#ifndef MCPD_AUTH_H
#define MCPD_AUTH_H

#include <stddef.h>
#include <stdint.h>

struct store;

#define AUTH_CACHE_MS 500
/* Cached answers: tokens in use, and unknown bearer values. */
#define AUTH_CACHE_KNOWN_MAX 4096
#define AUTH_CACHE_UNKNOWN_MAX 1024
#define AUTH_PRINCIPAL_MAX 64

/* The longest bearer value read (JWT access tokens run to kilobytes). */
#define AUTH_BEARER_MAX 8192

/* Why a check failed, for the refusal's status and WWW-Authenticate. */
enum auth_refusal {
    AUTH_NO_TOKEN = 0,       /* 401, no error code */
    AUTH_INVALID_TOKEN,      /* 401 error="invalid_token" */
    AUTH_INSUFFICIENT_SCOPE, /* 403 error="insufficient_scope" */
    AUTH_INVALID_PROOF,      /* 401 error="invalid_dpop_proof" */
    AUTH_BUSY                /* 503 with Retry-After: not checked now */
};

/* What a successful check grants (and, on failure, why it failed). */
struct auth_grant {
    char principal[AUTH_PRINCIPAL_MAX]; /* the token's name, or "oauth:<iss>#<sub>"; "" when auth is
                                           off */
    int64_t expires_ms;                 /* wall clock; 0: never */
    enum auth_refusal refusal;          /* when the check failed */
    int dpop;                           /* the request used the DPoP scheme */
};

/* What a request says of itself, for a DPoP proof: the DPoP header (NULL
 * when absent), the method, the path it was sent to (the public origin is
 * the OAuth resource's), and the path at which the transport serves the
 * resource ("/mcp"; NULL: none): that path and what is under it ("/mcp/ws")
 * are the resource's public URL and what is under it, even behind a proxy
 * that serves them under a prefix. */
struct auth_request {
    const char *dpop;
    const char *method;
    const char *path;
    const char *resource_path;
    /* The client's address (behind a trusted proxy, the one it names), for
     * the per-client budget of calls to the authorization server
     * (introspect.h); NULL or "": not known, only the overall budget. */
    const char *client;
};

/* A connection holding a token: embedded in the connection (which owns it),
 * linked while held. */
struct auth_hold {
    void (*end)(void *ud, const char *why);
    void *ud;
    char principal[AUTH_PRINCIPAL_MAX];
    int64_t expires_ms;
    struct auth_hold *next, **prev; /* prev is NULL while not held */
};

/* mode: "none", "token", "oauth" or "token,oauth" (oauth.h must be
 * configured first for oauth). Returns 0, or -1 for another mode. */
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
 * WebSocket subprotocol list (either may be NULL); req is NULL for a way
 * in without HTTP (TCP's greeting), where no DPoP proof can come. On
 * success returns 0 and fills *grant (principal "" when auth is off).
 * Otherwise returns -1 and *why says why, for the 401's message (static
 * text). May read the store, and with a DPoP proof waits for its commit
 * (store_dpop_use): call it on a fiber or a thread that may block. */
int auth_check(const char *authorization, const char *ws_protocols, const struct auth_request *req,
               struct auth_grant *grant, const char **why);

/* The refusal of a failed check (or of a token that ended while a request
 * waited: refusal AUTH_INVALID_TOKEN): returns its status (401, 403, or
 * 503 for AUTH_BUSY, which the caller sends with Retry-After) and
 * writes the WWW-Authenticate value into buf (cap bytes): "Bearer" and the
 * error and why (RFC 6750; no error without a token); with OAuth, also the
 * resource metadata's URL and the required scopes (RFC 9728), under the
 * scheme "DPoP" with the proof algorithms when the request used it. */
int auth_challenge(const struct auth_grant *grant, const char *why, char *buf, size_t cap);

/* Holds the grant's token for a connection until auth_release: when the
 * token is revoked or expires, end(ud, why) is called once, on the
 * watcher's thread, with why "token revoked" or "token expired" (static
 * text); the hold is released by then. end must only record and wake (it
 * runs under the registry's lock: no auth_* call, no blocking write). A
 * grant without a principal (auth off) is not held. h is zeroed memory or
 * a released hold. */
void auth_hold(struct auth_hold *h, const struct auth_grant *grant,
               void (*end)(void *ud, const char *why), void *ud);
/* Lets go of the token. On return end is not running and will not be
 * called, so the connection may free its memory. A hold never made or
 * already ended is fine. */
void auth_release(struct auth_hold *h);
/* The watcher saw the token `name` revoked: its cached answers go, and
 * every connection holding it is ended. */
void auth_token_revoked(const char *name);
/* Ends every connection whose token has expired by now_wall_ms. Returns the
 * earliest expiry still ahead among the holds (wall clock), or 0. */
int64_t auth_expire(int64_t now_wall_ms);
/* Answers held in the lookup cache (known tokens, or unknown values). */
size_t auth_cache_size(int known);

#endif
