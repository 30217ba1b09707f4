/* body_gate — see body_gate.h. */
#include "body_gate.h"
#include "conn_guard.h"
#include "jsonrpc.h"
#include "linger.h"
#include "log.h"
#include "metrics.h"
#include "refusal.h"
#include "request_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static size_t max_body;

void body_gate_configure(size_t limit)
{
    max_body = limit;
}

/* What the gate answers instead of ulfius. */
struct refusal {
    unsigned status;
    const char *reason; /* mcpd_refusals_total{reason}, and the log event */
    char message[120];  /* of the JSON-RPC error */
};

__attribute__((format(printf, 4, 5))) static int
set_refusal(struct refusal *r, unsigned status, const char *reason, const char *fmt, ...)
{
    r->status = status;
    r->reason = reason;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
    return 1;
}

static int too_large(struct refusal *r)
{
    return set_refusal(r, MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large",
                       "Payload Too Large: the limit is %zu bytes", max_body);
}

/* The framing headers as libmicrohttpd stored them: one entry per field
 * line, so repeated fields are seen one by one. */
struct framing {
    unsigned te_fields, cl_fields;
    int chunked;     /* one Transfer-Encoding field, exactly "chunked" */
    int cl_conflict; /* a Content-Length differs from the first */
    const char *cl;  /* the first Content-Length: the one libmicrohttpd uses */
    size_t cl_len;
};

static enum MHD_Result scan_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                    size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    struct framing *f = cls;
    /* The length first: most fields are neither, and this runs for every
     * field of every request. */
    if (key_size == sizeof MHD_HTTP_HEADER_TRANSFER_ENCODING - 1 &&
        strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        f->te_fields++;
        /* libmicrohttpd reads the first field only, and frames the body as
         * chunked for this exact value only (no list, no trailing space);
         * after a second field chunked would not be the last coding. */
        f->chunked = f->te_fields == 1 && strcasecmp(value, "chunked") == 0;
    } else if (key_size == sizeof MHD_HTTP_HEADER_CONTENT_LENGTH - 1 &&
               strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (f->cl_fields++ == 0) {
            f->cl = value;
            f->cl_len = value_size;
        } else if (value_size != f->cl_len || memcmp(value, f->cl, value_size) != 0) {
            f->cl_conflict = 1;
        }
    }
    return MHD_YES;
}

static enum MHD_Result scan_nul(void *cls, enum MHD_ValueKind kind, const char *key,
                                size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    int *nul = cls;
    /* The sizes are the decoded ones; ulfius reads these as C strings. */
    *nul = memchr(key, '\0', key_size) || (value && memchr(value, '\0', value_size));
    return *nul ? MHD_NO : MHD_YES;
}

int body_gate_nul_in_path(const char *uri)
{
    const char *q = strchr(uri, '?');
    return memmem(uri, q ? (size_t)(q - uri) : strlen(uri), "%00", 3) != NULL;
}

/* Whether a request is refused from its headers, before libmicrohttpd reads
 * any of its body (RFC 9112 §6: a body whose length is ambiguous must not be
 * read, or the bytes left over become the next request). */
static int refusal_of(struct MHD_Connection *con, const char *method, const char *url,
                      const char *version, int nul_in_path, struct refusal *r)
{
    if (nul_in_path)
        return set_refusal(r, MHD_HTTP_BAD_REQUEST, "nul_in_path",
                           "Bad Request: the path decodes to a NUL byte");
    int nul = 0;
    MHD_get_connection_values_n(con, MHD_GET_ARGUMENT_KIND, scan_nul, &nul);
    if (nul)
        return set_refusal(r, MHD_HTTP_BAD_REQUEST, "nul_in_query",
                           "Bad Request: the query string decodes to a NUL byte");
    struct framing f = {0};
    MHD_get_connection_values_n(con, MHD_HEADER_KIND, scan_framing, &f);
    if (f.te_fields && f.cl_fields)
        return set_refusal(r, MHD_HTTP_BAD_REQUEST, "bad_framing",
                           "Bad Request: both Content-Length and Transfer-Encoding");
    if (f.te_fields && !f.chunked)
        return set_refusal(r, MHD_HTTP_NOT_IMPLEMENTED, "transfer_coding",
                           "Not Implemented: the only Transfer-Encoding served is chunked");
    if (f.cl_conflict)
        return set_refusal(r, MHD_HTTP_BAD_REQUEST, "bad_framing",
                           "Bad Request: conflicting Content-Length values");
    /* libmicrohttpd has refused a malformed first Content-Length itself
     * (NOTES.md), so this one is plain digits. */
    if (f.cl && strtoull(f.cl, NULL, 10) > max_body)
        return too_large(r);
    if (strcmp(method, "GET") == 0 && strcmp(url, "/mcp/ws") == 0 &&
        strcmp(version, MHD_HTTP_VERSION_1_1) != 0)
        return set_refusal(r, MHD_HTTP_BAD_REQUEST, "ws_http_version",
                           "Bad Request: a WebSocket handshake needs HTTP/1.1");
    return 0;
}

/* ulfius never sees the request again; the refusal is counted and logged as
 * the transports' own are. */
static void count(const struct refusal *r)
{
    metrics_refused(r->reason);
    request_log_error(JSONRPC_SERVER_ERROR);
    log_event(LOG_DEBUG, NULL, r->reason, "%u %s", r->status, r->message);
}

int body_gate_headers(struct MHD_Connection *con, const char *method, const char *url,
                      const char *version, int nul_in_path, enum MHD_Result *rc)
{
    struct refusal r;
    if (!refusal_of(con, method, url, version, nul_in_path, &r))
        return 0;
    count(&r);
    *rc = conn_guard_queue_refusal(con, r.status, JSONRPC_SERVER_ERROR, r.message, 0);
    return 1;
}

/* 413 in the middle of a body: libmicrohttpd 0.9.75 accepts a response only
 * before the body or after all of it, so it goes on the socket directly
 * (linger_hand_off); the caller then has libmicrohttpd drop the
 * connection. */
int body_gate_body(struct MHD_Connection *con, uint64_t *received, size_t bytes)
{
    *received += bytes;
    if (*received <= max_body)
        return 0;
    struct refusal r;
    too_large(&r);
    count(&r);
    char *body = refusal_body(JSONRPC_SERVER_ERROR, r.message);
    char *text = NULL;
    int n = body ? asprintf(&text,
                            "HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json\r\n"
                            "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                            strlen(body), body)
                 : -1;
    free(body);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (n >= 0 && ci)
        linger_hand_off(ci->connect_fd, text, (size_t)n);
    free(text);
    return 1;
}
