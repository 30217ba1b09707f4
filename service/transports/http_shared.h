/* http_shared — what the Streamable HTTP transport (http.c) lends to the
 * other endpoints on its server (legacy_sse.c: GET /sse and POST
 * /messages), so that they admit, refuse and stream exactly as /mcp does:
 * the same Host/Origin checks and bearer tokens, the same JSON-RPC error
 * bodies and status codes, the same SSE headers and keepalives. */
#ifndef MCPD_HTTP_SHARED_H
#define MCPD_HTTP_SHARED_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "auth.h"

struct _u_request;
struct _u_response;
struct core_reply;

/* A header field's value as request_host_header reads it (trailing
 * whitespace cut, lines joined); NULL when absent. Borrowed for the
 * request's life. */
const char *http_header(const struct _u_request *req, const char *name);
/* Host and Origin (DNS rebinding), then the bearer token: fills *grant
 * (principal "" without authentication; a response that lasts holds it
 * with follow_token). 0 after answering 403/401. */
int http_admitted(const struct _u_request *req, struct _u_response *resp, struct auth_grant *grant);
/* Answers with a JSON-RPC error (no id); returns U_CALLBACK_COMPLETE. */
int http_fail(struct _u_response *resp, unsigned status, int code, const char *message);
/* An MCP-Protocol-Version header, if any, must be one mcpd serves. 0 after
 * answering 400. */
int http_version_ok(const struct _u_request *req, struct _u_response *resp);
/* Answers with a core refusal (takes and clears r); U_CALLBACK_COMPLETE. */
int http_refused(struct _u_response *resp, struct core_reply *r);
/* Headers that keep proxies from buffering or transforming a stream. */
void http_sse_headers(struct _u_response *resp);
/* 1 when url_path names the one-segment path `name` (no slash), as ulfius
 * routes it: "/mcp", "/mcp/" and "//mcp" all name "mcp". */
int http_path_is(const char *url_path, const char *name);
/* How long an idle event stream waits before a keepalive comment. */
int64_t http_keepalive_ms(void);
/* Starts a streamed response as ulfius_set_stream_response does, and counts
 * it open (*counted) until its free callback calls http_stream_closed:
 * shutdown lets the open ones write out what their readers already took (a
 * subscription's final result, an answer from the grace period) before it
 * closes the connections. Returns ulfius's U_OK or its error. */
int http_stream_response(struct _u_response *resp,
                         ssize_t (*write)(void *, uint64_t, char *, size_t),
                         void (*free_ud)(void *), void *ud, size_t block, int *counted);
/* Called by a counted response's free callback (any response's: it does
 * nothing when *counted is 0). */
void http_stream_closed(int *counted);
/* A GET that finds a session's stream followed probes the holder and
 * waits this long for it to turn out dead. */
#define HTTP_PROBE_WAIT_MS 1000
#define HTTP_PROBE_GAP_MS 50

#endif
