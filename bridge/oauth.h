/* oauth — mcp-bridge's OAuth 2.1 client (MCP authorization, 2025-06-18
 * onwards): when the server answers 401 (or 403 insufficient_scope), the
 * bridge finds the protected resource metadata (RFC 9728) and the
 * authorization server's (RFC 8414 / OpenID discovery, with the 2025-03-26
 * fall-backs), identifies itself (--oauth-client-id, a client ID metadata
 * document, or dynamic registration, RFC 7591), runs the authorization
 * code flow with PKCE S256 through a loopback redirect on 127.0.0.1 (or
 * the client credentials grant with --oauth-client-credentials), and keeps
 * the tokens (oauth_store.h), refreshing them quietly.
 *
 * The sign-in is synchronous: the bridge is single-threaded, and requests
 * that arrive meanwhile wait in the stdio pipe, bounded by the sign-in's
 * own timeout. Tokens are never logged.
 *
 * Ownership: oauth_new's object is freed by oauth_free; oauth_token's
 * string belongs to the object (valid until the next oauth_* call). */
#ifndef MCP_BRIDGE_OAUTH_H
#define MCP_BRIDGE_OAUTH_H

#include "options.h"

#include <curl/curl.h>

#include <stddef.h>

struct oauth;

/* The OAuth client for o's server, or NULL when OAuth is off (a static
 * Authorization is given with --token-* or --header, or --oauth off) or out
 * of memory. */
struct oauth *oauth_new(const struct bridge_options *o);
void oauth_free(struct oauth *a);

/* The access token to send (refreshed first when it has expired), or NULL
 * when the bridge has none yet. */
const char *oauth_token(struct oauth *a);

/* Adds the Authorization header (Bearer, or DPoP with its proof for the
 * request htm url) to *h when the bridge has a token. 0, or -1. */
int oauth_headers(struct oauth *a, const char *htm, const char *url, struct curl_slist **h);

/* The MCP server's DPoP-Nonce header value (nonce[0..len)): the next
 * proofs carry it. */
void oauth_dpop_nonce(struct oauth *a, const char *nonce, size_t len);

/* The server answered status (401 or 403) with the WWW-Authenticate value
 * www_auth (may be NULL): sign in (or refresh, or step up). Returns 0 when
 * there is a new token to retry with, else -1 with a message for the user
 * in err (cap bytes). */
int oauth_challenge(struct oauth *a, long status, const char *www_auth, char *err, size_t cap);

/* mcp-bridge --logout URL: forgets the sign-in kept for url. 0, or -1. */
int oauth_logout(const char *url);

#endif
