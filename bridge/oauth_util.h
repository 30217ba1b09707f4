/* oauth_util — the pure parts of mcp-bridge's OAuth client: reading a
 * WWW-Authenticate challenge, and building the well-known URLs where the
 * protected resource metadata (RFC 9728) and the authorization server
 * metadata (RFC 8414, OpenID Connect Discovery) may be, in the order the
 * MCP authorization specification (2025-11-25) says to try them.
 *
 * Every returned string is malloc'd and owned by the caller. */
#ifndef MCP_BRIDGE_OAUTH_UTIL_H
#define MCP_BRIDGE_OAUTH_UTIL_H

#include <stddef.h>

#define OAUTH_MAX_URLS 3

/* The value of auth-param name (resource_metadata, scope, error, ...) of
 * the Bearer challenge in a WWW-Authenticate value, unquoted; NULL when
 * absent (or no Bearer challenge). */
char *oauth_challenge_param(const char *www_authenticate, const char *name);

/* "scheme://host[:port]" of url, or NULL. */
char *oauth_origin(const char *url);

/* Where to look for the protected resource metadata of the MCP server at
 * server_url, without a resource_metadata hint: the path-suffixed
 * well-known URL first (when the URL has a path), then the root one. Fills
 * out (OAUTH_MAX_URLS slots, NULL-terminated when fewer) and returns the
 * count. */
int oauth_prm_urls(const char *server_url, char **out);

/* Where to look for the metadata of the authorization server issuer: with
 * a path, oauth-authorization-server and openid-configuration inserted
 * after the host, then openid-configuration appended; without one, the two
 * root documents. Same conventions as oauth_prm_urls. */
int oauth_as_urls(const char *issuer, char **out);

/* The http(s) form of a WebSocket or raw TCP URL (ws: and tcp: become http:,
 * wss: https:), without a fragment: the URL curl connects for them and the
 * one their sign-in is kept under. Any other URL keeps its scheme. NULL
 * when out of memory. */
char *oauth_http_url(const char *url);

/* Frees the n strings of out. */
void oauth_urls_free(char **out, int n);

/* 1 when the words of the space-separated list have word. */
int oauth_has_word(const char *list, const char *word);

#endif
