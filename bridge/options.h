/* options — the mcp-bridge command line: `mcp-bridge [options] URL`.
 *
 * options_parse fills a struct bridge_options from argv and checks it the
 * way a user burned by other bridges would want: the URL must be http(s)
 * (or ws(s) with --transport ws), plain http is refused unless the host is
 * a loopback address or --allow-http is given, TLS verification cannot be
 * turned off (a tcp:// URL, mcpd's raw TCP transport, has no TLS: loopback
 * only unless --allow-http), and the bearer token comes from an environment variable or a
 * file, never from the command line (where `ps` shows it). Header values
 * have ${NAME} expanded from the environment, so secrets can stay out of
 * the client's JSON config as well.
 *
 * The token and header values are secrets: nothing here logs them.
 *
 * Ownership: everything in struct bridge_options is malloc'd and released
 * by options_free. */
#ifndef MCP_BRIDGE_OPTIONS_H
#define MCP_BRIDGE_OPTIONS_H

#include "bridge_log.h"

#include <stddef.h>

enum bridge_transport {
    TRANSPORT_HTTP = 0, /* Streamable HTTP, falling back to HTTP+SSE on 404/405 */
    TRANSPORT_WS,       /* mcpd's WebSocket transport */
    TRANSPORT_POLL,     /* mcpd's long-polling mode */
    TRANSPORT_SSE,      /* the 2024-11-05 HTTP+SSE transport, forced */
    TRANSPORT_TCP,      /* mcpd's raw TCP transport (a tcp:// URL) */
    TRANSPORT_UDP,      /* mcpd's UDP transport (a udp:// URL) */
};

struct bridge_options {
    char *url;
    char **headers; /* "Name: value" lines, ${ENV} expanded; NULL-terminated */
    int n_headers;
    char *token; /* bearer token, or NULL */
    char *cacert;
    enum bridge_transport transport;
    long connect_timeout_ms;
    long response_timeout_ms;
    enum log_level log_level;
    int allow_http;
    /* OAuth (oauth_options.h, oauth.h) */
    char *oauth_client_id, *oauth_client_secret, *oauth_client_metadata_url;
    char *oauth_open_command, *oauth_scope, *oauth_client_key, *oauth_jwt_bearer;
    char *oauth_idp_token_endpoint, *oauth_idp_id_token, *oauth_idp_client_id;
    int oauth_client_credentials, oauth_off, logout;
};

enum options_result {
    OPTIONS_OK = 0,
    OPTIONS_EXIT_OK,  /* --help or --version was printed: exit 0 */
    OPTIONS_EXIT_BAD, /* a usage error was printed on stderr: exit 2 */
};

enum options_result options_parse(int argc, char **argv, struct bridge_options *out);
void options_free(struct bridge_options *o);

/* Expands ${NAME} in s from the environment (an unset NAME is an error,
 * reported in *err as a static string). Returns a malloc'd string, or NULL
 * with *err set. A '$' not followed by '{' is kept as is. */
char *options_expand_env(const char *s, const char **err);

/* Checks one --header argument: "Name: value" with a token-character name
 * and no CR or LF anywhere (header injection). Returns NULL when good, else
 * a static reason. */
const char *options_check_header(const char *h);

/* Checks the URL for the transport: scheme, host, and plain http only to a
 * loopback host unless allow_http. Returns 0, or -1 with a message written
 * into err (cap bytes). */
int options_check_url(const char *url, enum bridge_transport t, int allow_http, char *err,
                      size_t cap);

/* 1 when host (as in a URL: "localhost", "127.0.0.5", "[::1]", "::1") is a
 * loopback host. */
int options_is_loopback(const char *host);

#endif
