/* remote_error — what the user reads when the remote server cannot answer.
 *
 * Each failure of an HTTP exchange (a curl error, an HTTP status, a body
 * that is not JSON-RPC, a silent server) becomes one sentence that starts
 * with "mcp-bridge:", says what happened to which host, and says what to
 * check, e.g. "mcp-bridge: TLS certificate of mcp.example.com is not
 * trusted (pass --cacert with the CA that signed it)". The bridge sends it
 * as the message of the JSON-RPC error that answers the request, so it
 * shows up in the desktop client's UI rather than in a log nobody reads.
 *
 * All functions write into the caller's buffer (NUL-terminated, cut to
 * cap) and return it. */
#ifndef MCP_BRIDGE_REMOTE_ERROR_H
#define MCP_BRIDGE_REMOTE_ERROR_H

#include <curl/curl.h>
#include <stddef.h>

/* A transfer that failed in curl. host is the server's host[:port];
 * curl_detail is curl's error buffer (may be empty). */
char *remote_error_curl(char *out, size_t cap, const char *host, CURLcode cc,
                        const char *curl_detail, long connect_timeout_ms);

/* A transfer that completed with an HTTP status the bridge cannot use.
 * body_hint: the start of the body (may be NULL), shown cut and sanitised. */
char *remote_error_status(char *out, size_t cap, const char *host, long status,
                          const char *body_hint);

/* The server accepted the connection but sent nothing for timeout_ms. */
char *remote_error_silent(char *out, size_t cap, const char *host, long timeout_ms,
                          int had_headers);

#endif
