/* request_log — see request_log.h. */
#include "request_log.h"
#include "clock.h"
#include "log.h"
#include "strcopy.h"

#include <stdio.h>
#include <string.h>

/* The record of the request this thread is working for: bound by the
 * request host whenever it runs code for a request. */
static _Thread_local struct request_record *bound;
/* What the calls write to when nothing is bound (not an HTTP request). */
static _Thread_local struct request_record unbound;
#define rec (*(bound ? bound : &unbound))

void request_log_bind(struct request_record *r)
{
    bound = r;
}

void request_log_begin(const char *method, const char *url)
{
    memset(&rec, 0, sizeof rec);
    int ws = strcmp(url, "/mcp/ws") == 0;
    int sse = strcmp(url, "/sse") == 0 || strcmp(url, "/messages") == 0; /* legacy_sse.c */
    if (strcmp(url, "/mcp") != 0 && !ws && !sse)
        return;
    rec.open = 1;
    strcopy(rec.method, sizeof rec.method, method);
    strcopy(rec.url, sizeof rec.url, url);
    strcopy(rec.transport, sizeof rec.transport, ws ? "ws" : sse ? "sse" : "http");
    rec.start_ms = clock_mono_ms();
}

void request_log_principal(const char *principal)
{
    strcopy(rec.principal, sizeof rec.principal, principal);
}

void request_log_session(const char *session)
{
    strcopy(rec.session, sizeof rec.session, session);
}

void request_log_mcp(const char *method, const char *tool)
{
    strcopy(rec.mcp, sizeof rec.mcp, method);
    strcopy(rec.tool, sizeof rec.tool, tool);
    if (method && strcmp(method, "mcpd/poll") == 0)
        strcopy(rec.transport, sizeof rec.transport, "poll");
}

void request_log_error(int code)
{
    if (!rec.error)
        rec.error = code;
}

void request_log_body(size_t bytes)
{
    rec.in += bytes;
}

/* A sub-value of the line's msg that a client names (its HTTP method,
 * which libmicrohttpd takes as any bytes up to a space; its tool, its MCP
 * method; the principal is a token's name): bare when a plain token, else
 * quoted, so that "a status=200" cannot pose as a field of its own. */
static const char *sub_value(char *out, size_t cap, const char *s)
{
    if (!s[0])
        return "-";
    log_value(out, cap, s);
    return out;
}

void request_log_end(struct MHD_Connection *con)
{
    if (!rec.open)
        return;
    rec.open = 0;
    if (!log_enabled(LOG_INFO))
        return;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(con, MHD_CONNECTION_INFO_HTTP_STATUS);
    char error[16] = "-";
    if (rec.error)
        snprintf(error, sizeof error, "%d", rec.error);
    char method[4 * sizeof rec.method + 3], principal[4 * sizeof rec.principal + 3],
        mcp[4 * sizeof rec.mcp + 3], tool[4 * sizeof rec.tool + 3];
    log_event(LOG_INFO, rec.session[0] ? rec.session : NULL, "request",
              "%s %s status=%u principal=%s transport=%s mcp=%s tool=%s error=%s ms=%lld in=%zu",
              sub_value(method, sizeof method, rec.method), rec.url, ci ? ci->http_status : 0,
              sub_value(principal, sizeof principal, rec.principal), rec.transport,
              sub_value(mcp, sizeof mcp, rec.mcp), sub_value(tool, sizeof tool, rec.tool), error,
              (long long)(clock_mono_ms() - rec.start_ms), rec.in);
}
