/* request_log — one line per MCP request over HTTP, for operators.
 *
 *   event=request msg="POST /mcp status=200 principal=laptop session=ab12…
 *   transport=http mcp=tools/call tool=echo error=- ms=3 in=112"
 *
 * on stderr, and a row in the logs table (info), which mcp-admin logs and
 * stats read. The request host (request_host.h) opens the record when a
 * request's headers arrive and closes it when libmicrohttpd reports the
 * request complete; in between, http.c and ws.c add what only they know.
 * The record is the request's (the host keeps it); the host binds it to
 * the thread whenever it runs
 * code for that request, so the calls below take no handle. Only /mcp,
 * /mcp/ws and the legacy /sse and /messages are logged (health checks
 * would drown the rest). */
#ifndef MCPD_REQUEST_LOG_H
#define MCPD_REQUEST_LOG_H

#include <microhttpd.h>

#include <stdint.h>

struct request_record {
    int open;
    char method[8], url[16], transport[8];
    char principal[64], session[64], mcp[48], tool[64];
    int error;
    size_t in;
    int64_t start_ms;
};

/* The record the calls below write to on this thread, until the next
 * bind or request_log_end. */
void request_log_bind(struct request_record *r);
void request_log_begin(const char *method, const char *url);
void request_log_principal(const char *principal);
void request_log_session(const char *session);
/* The MCP method, and the tool for tools/call (either may be NULL). */
void request_log_mcp(const char *method, const char *tool);
void request_log_error(int code);
void request_log_body(size_t bytes);
void request_log_end(struct MHD_Connection *con);

#endif
