/* body_gate — see body_gate.h. */
#include "body_gate.h"
#include "clock.h"
#include "conn_guard.h"
#include "jsonrpc.h"
#include "log.h"
#include "metrics.h"
#include "refusal.h"
#include "request_log.h"
#include "ws.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <ulfius.h>
#include <unistd.h>

/* How long a refused connection is drained before it is closed, and how
 * long the chunked refusal may take to write. */
#define LINGER_MS 1000
#define WRITE_MS 2000

static struct {
    size_t max_body;
    MHD_AccessHandlerCallback inner; /* ulfius's access handler */
    void *inner_cls;
} gate;

/* The request on this connection's thread (thread-per-connection), reset
 * when it completes. */
static _Thread_local struct {
    int seen;          /* its first call has come */
    int refused;       /* answered by the gate: ulfius never sees it again */
    int websocket;     /* GET /mcp/ws: ws_upgrade answers it, not ulfius */
    int nul_in_path;   /* the raw path has %00 (body_gate_uri_logger) */
    uint64_t received; /* body bytes so far */
} req;

void body_gate_configure(size_t max_body)
{
    gate.max_body = max_body;
}

int body_gate_installed(void)
{
    return gate.inner != NULL;
}

/* What the gate answers instead of ulfius. */
struct gate_refusal {
    unsigned status;
    const char *reason; /* mcpd_refusals_total{reason}, and the log event */
    char message[120];  /* of the JSON-RPC error */
};

__attribute__((format(printf, 4, 5))) static int
set_refusal(struct gate_refusal *r, unsigned status, const char *reason, const char *fmt, ...)
{
    r->status = status;
    r->reason = reason;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
    return 1;
}

static int too_large(struct gate_refusal *r)
{
    return set_refusal(r, MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large",
                       "Payload Too Large: the limit is %zu bytes", gate.max_body);
}

/* The framing headers as libmicrohttpd stored them: one entry per field
 * line, so repeated fields are seen one by one. The walk over them also
 * trims every other field's trailing whitespace (scan_framing). */
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
    } else if (value) {
        /* RFC 9110 5.5: whitespace around a field value is not part of
         * it. libmicrohttpd drops the leading but keeps the trailing, so
         * "Mcp-Session-Id: <id> " named no session. The value lies in
         * libmicrohttpd's read buffer, which it writes itself while
         * parsing; cut here, before ulfius copies the fields, every reader
         * (ulfius's maps, ws.c's lookups, conn_guard) gets the same value.
         * The framing fields above stay as libmicrohttpd framed the body. */
        char *v = (char *)(uintptr_t)value;
        while (value_size && (v[value_size - 1] == ' ' || v[value_size - 1] == '\t'))
            v[--value_size] = '\0';
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

/* Whether a request is refused from its headers, before libmicrohttpd reads
 * any of its body (RFC 9112 §6: a body whose length is ambiguous must not be
 * read, or the bytes left over become the next request). */
static int headers_refusal(struct MHD_Connection *con, struct gate_refusal *r)
{
    if (req.nul_in_path)
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
    if (f.cl && strtoull(f.cl, NULL, 10) > gate.max_body)
        return too_large(r);
    return 0;
}

/* ulfius never sees the request again; the refusal is counted and logged as
 * the transports' own are. */
static void refused(const struct gate_refusal *r)
{
    req.refused = 1;
    metrics_refused(r->reason);
    request_log_error(JSONRPC_SERVER_ERROR);
    log_event(LOG_DEBUG, NULL, r->reason, "%u %s", r->status, r->message);
}

/* On the first call: libmicrohttpd then skips the body and closes the
 * connection after the answer. */
static enum MHD_Result refuse(struct MHD_Connection *con, const struct gate_refusal *r)
{
    refused(r);
    return conn_guard_queue_refusal(con, r->status, JSONRPC_SERVER_ERROR, r->message, 0);
}

static int wait_fd(int fd, short events, int64_t deadline)
{
    int64_t left = deadline - clock_mono_ms();
    if (left <= 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = events};
    return poll(&p, 1, (int)left) > 0;
}

/* 413 in the middle of a body: libmicrohttpd 0.9.75 accepts a response only
 * before the body or after all of it, so it goes straight to the socket;
 * the caller then has libmicrohttpd drop the connection. */
static void refuse_streamed(struct MHD_Connection *con)
{
    struct gate_refusal r;
    too_large(&r);
    refused(&r);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
    char *body = refusal_body(JSONRPC_SERVER_ERROR, r.message);
    char *text = NULL;
    int n = body ? asprintf(&text,
                            "HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json\r\n"
                            "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                            strlen(body), body)
                 : -1;
    free(body);
    if (!ci || n < 0)
        return;
    int64_t deadline = clock_mono_ms() + WRITE_MS;
    for (size_t off = 0; off < (size_t)n;) {
        ssize_t w = send(ci->connect_fd, text + off, (size_t)n - off, MSG_NOSIGNAL);
        if (w > 0)
            off += (size_t)w;
        else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            break;
        else if (w < 0 && errno != EINTR && !wait_fd(ci->connect_fd, POLLOUT, deadline))
            break;
    }
    free(text);
}

/* A lingering close: no more writes, then discard what the client still
 * sends until it stops or LINGER_MS pass, so that closing with unread
 * bytes does not reset the connection before the refusal is read. */
static void linger(struct MHD_Connection *con)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || ci->connect_fd < 0)
        return;
    int fd = ci->connect_fd;
    shutdown(fd, SHUT_WR);
    char sink[16384];
    int64_t deadline = clock_mono_ms() + LINGER_MS;
    for (;;) {
        ssize_t r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return;
        if (r < 0 && errno != EINTR && !wait_fd(fd, POLLIN, deadline))
            return;
    }
}

static enum MHD_Result gate_access(void *cls, struct MHD_Connection *con, const char *url,
                                   const char *method, const char *version, const char *upload_data,
                                   size_t *upload_data_size, void **con_cls)
{
    (void)cls;
    if (req.refused)
        return MHD_YES;
    if (!req.seen) {
        req.seen = 1;
        request_log_begin(method, url);
        enum MHD_Result rc;
        if (conn_guard_request_begin(con, &rc)) {
            req.refused = 1;
            return rc;
        }
        struct gate_refusal r;
        if (headers_refusal(con, &r))
            return refuse(con, &r);
        if (strcmp(method, "GET") == 0 && strcmp(url, "/mcp/ws") == 0) {
            /* RFC 6455 4.1. libmicrohttpd would refuse the 101 on an
             * HTTP/1.0 connection and close it without a word. */
            if (strcmp(version, MHD_HTTP_VERSION_1_1) != 0) {
                set_refusal(&r, MHD_HTTP_BAD_REQUEST, "ws_http_version",
                            "Bad Request: a WebSocket handshake needs HTTP/1.1");
                return refuse(con, &r);
            }
            req.websocket = 1;
            return MHD_YES;
        }
    } else if (*upload_data_size == 0) {
        conn_guard_request_received(con);
        if (req.websocket)
            return ws_upgrade(con);
    } else if (req.websocket) {
        *upload_data_size = 0; /* a handshake has no body: ignored */
        return MHD_YES;
    } else {
        req.received += *upload_data_size;
        request_log_body(*upload_data_size);
        if (req.received > gate.max_body) {
            refuse_streamed(con);
            linger(con);
            return MHD_NO;
        }
    }
    return gate.inner(gate.inner_cls, con, url, method, version, upload_data, upload_data_size,
                      con_cls);
}

void *body_gate_uri_logger(void *cls, const char *uri)
{
    const char *q = strchr(uri, '?');
    req.nul_in_path = memmem(uri, q ? (size_t)(q - uri) : strlen(uri), "%00", 3) != NULL;
    return ulfius_uri_logger(cls, uri);
}

void body_gate_request_completed(void *cls, struct MHD_Connection *con, void **con_cls,
                                 enum MHD_RequestTerminationCode toe)
{
    if (req.refused && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        linger(con);
    conn_guard_request_done(con);
    request_log_end(con);
    if (req.websocket)
        ws_request_completed();
    memset(&req, 0, sizeof req);
    mhd_request_completed(cls, con, con_cls, toe);
}

/* Interposes libmicrohttpd's MHD_start_daemon for ulfius (see body_gate.h).
 * Only thread-per-connection daemons are gated: the request state is per
 * thread. */
struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc,
                                    void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
    va_list ap;
    va_start(ap, dh_cls);
    struct MHD_Daemon *d;
    if (flags & MHD_USE_THREAD_PER_CONNECTION) {
        gate.inner = dh;
        gate.inner_cls = dh_cls;
        d = MHD_start_daemon_va(flags, port, apc, apc_cls, gate_access, NULL, ap);
    } else {
        d = MHD_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
    }
    va_end(ap);
    return d;
}
