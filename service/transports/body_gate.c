/* body_gate — see body_gate.h. */
#include "body_gate.h"
#include "clock.h"
#include "conn_guard.h"
#include "fiber.h"
#include "jsonrpc.h"
#include "linger.h"
#include "log.h"
#include "metrics.h"
#include "refusal.h"
#include "request_log.h"
#include "ws.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <ulfius.h>
#include <unistd.h>

static struct {
    size_t max_body;
    MHD_AccessHandlerCallback inner; /* ulfius's access handler */
    void *inner_cls;
} gate;

/* A request, from its first line to its completion: the URI logger makes
 * it (libmicrohttpd passes what that returns to every later call as the
 * request's con_cls) and the completion frees it. A pool thread serves
 * many requests in turn, so nothing of a request lives in a thread-local. */
struct gate_req {
    void *inner_cls;   /* ulfius's own state of the request */
    int seen;          /* its first call has come */
    int refused;       /* answered by the gate: ulfius never sees it again */
    int websocket;     /* GET /mcp/ws: ws_upgrade answers it, not ulfius */
    int nul_in_path;   /* the raw path has %00 (body_gate_uri_logger) */
    int closing;       /* completed: nothing may resume the connection */
    uint64_t received; /* body bytes so far */
    struct request_record log;
    struct ws_conn *ws_pending;
    struct MHD_Connection *con;
    /* The handler, or a content reader's fill, on a fiber (one at a time). */
    struct fiber *fiber;
    const char *url, *method, *version;
    size_t no_data;
    enum MHD_Result result;
    int (*fill)(void *ud);
    void *fill_ud;
    int verdict;
    struct gate_req *next, **prev; /* in fibers.live while it has a fiber */
};

/* Every request with a fiber, so that stopping can finish them: libmicrohttpd
 * aborts if a connection is still suspended when its daemon stops. */
static struct {
    pthread_mutex_t mu;
    struct gate_req *live;
    int stopping;
} fibers = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The request whose code runs on this thread (set around each fiber run). */
static _Thread_local struct gate_req *running;

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
static int headers_refusal(struct gate_req *g, struct MHD_Connection *con, struct gate_refusal *r)
{
    if (g->nul_in_path)
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
static void refused(struct gate_req *g, const struct gate_refusal *r)
{
    g->refused = 1;
    metrics_refused(r->reason);
    request_log_error(JSONRPC_SERVER_ERROR);
    log_event(LOG_DEBUG, NULL, r->reason, "%u %s", r->status, r->message);
}

/* On the first call: libmicrohttpd then skips the body and closes the
 * connection after the answer. */
static enum MHD_Result refuse(struct gate_req *g, struct MHD_Connection *con,
                              const struct gate_refusal *r)
{
    refused(g, r);
    return conn_guard_queue_refusal(con, r->status, JSONRPC_SERVER_ERROR, r->message, 0);
}

static int connection_fd(struct MHD_Connection *con)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* 413 in the middle of a body: libmicrohttpd 0.9.75 accepts a response only
 * before the body or after all of it, so it goes on the socket directly
 * (linger_hand_off); the caller then has libmicrohttpd drop the
 * connection. */
static void refuse_streamed(struct gate_req *g, struct MHD_Connection *con)
{
    struct gate_refusal r;
    too_large(&r);
    refused(g, &r);
    char *body = refusal_body(JSONRPC_SERVER_ERROR, r.message);
    char *text = NULL;
    int n = body ? asprintf(&text,
                            "HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json\r\n"
                            "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                            strlen(body), body)
                 : -1;
    free(body);
    if (n >= 0)
        linger_hand_off(connection_fd(con), text, (size_t)n);
    free(text);
}

/* ---- running a request's code on a fiber ---- */

static void host_suspend(void *cookie)
{
    struct gate_req *g = cookie;
    MHD_suspend_connection(g->con);
}

static void host_resume(void *cookie)
{
    struct gate_req *g = cookie;
    if (!g->closing)
        MHD_resume_connection(g->con);
}

static void handler_main(void *arg)
{
    struct gate_req *g = arg;
    g->result = gate.inner(gate.inner_cls, g->con, g->url, g->method, g->version, NULL, &g->no_data,
                           &g->inner_cls);
}

/* The WebSocket handshake on a fiber too: a resume may revive the session
 * or wait on a stream's append lock, waits that park a fiber but would
 * block the pool thread that runs their holder. */
static void upgrade_main(void *arg)
{
    struct gate_req *g = arg;
    g->result = ws_upgrade(g->con, g->url, &g->ws_pending);
}

static void fill_main(void *arg)
{
    struct gate_req *g = arg;
    g->verdict = g->fill(g->fill_ud);
}

/* Runs g's fiber until it ends (1) or waits (0: its connection is
 * suspended, and libmicrohttpd calls again once it is resumed). */
static int run_fiber(struct gate_req *g)
{
    struct gate_req *outer = running;
    running = g;
    enum fiber_state st = fiber_run(g->fiber);
    running = outer;
    if (st == FIBER_PARKED)
        return 0;
    pthread_mutex_lock(&fibers.mu);
    *g->prev = g->next;
    if (g->next)
        g->next->prev = g->prev;
    pthread_mutex_unlock(&fibers.mu);
    fiber_free(g->fiber);
    g->fiber = NULL;
    return 1;
}

/* 1 ended, 0 waits, -1 no fiber (out of memory). */
static int start_fiber(struct gate_req *g, void (*fn)(void *))
{
    struct fiber_host host = {.suspend = host_suspend, .resume = host_resume, .cookie = g};
    g->fiber = fiber_new(fn, &host, g);
    if (!g->fiber)
        return -1;
    pthread_mutex_lock(&fibers.mu);
    g->next = fibers.live;
    if (g->next)
        g->next->prev = &g->next;
    g->prev = &fibers.live;
    fibers.live = g;
    if (fibers.stopping)
        fiber_cancel(g->fiber);
    pthread_mutex_unlock(&fibers.mu);
    return run_fiber(g);
}

struct gate_req *body_gate_request(void)
{
    return running;
}

void body_gate_client(const struct gate_req *g, char *out)
{
    out[0] = '\0';
    if (g && g->con)
        conn_guard_client(g->con, out);
}

int body_gate_fill(struct gate_req *g, int (*fill)(void *ud), void *ud, int *verdict)
{
    if (!g) {
        *verdict = fill(ud);
        return 1;
    }
    int r;
    request_log_bind(&g->log);
    if (g->fiber) {
        r = run_fiber(g);
    } else {
        g->fill = fill;
        g->fill_ud = ud;
        r = start_fiber(g, fill_main);
    }
    request_log_bind(NULL);
    if (r == 0)
        return 0;
    *verdict = r < 0 ? -1 : g->verdict;
    return 1;
}

void body_gate_stop(void)
{
    pthread_mutex_lock(&fibers.mu);
    fibers.stopping = 1;
    for (struct gate_req *g = fibers.live; g; g = g->next)
        fiber_cancel(g->fiber);
    pthread_mutex_unlock(&fibers.mu);
}

/* ---- libmicrohttpd's callbacks ---- */

static enum MHD_Result final_call(struct gate_req *g, struct MHD_Connection *con, const char *url,
                                  const char *method, const char *version)
{
    if (g->fiber) /* resumed */
        return run_fiber(g) ? g->result : MHD_YES;
    conn_guard_request_received(con);
    g->url = url;
    g->method = method;
    g->version = version;
    int r = start_fiber(g, g->websocket ? upgrade_main : handler_main);
    if (r < 0)
        return MHD_NO; /* out of memory: the connection is closed */
    return r ? g->result : MHD_YES;
}

static enum MHD_Result gate_call(struct gate_req *g, struct MHD_Connection *con, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size)
{
    if (g->refused)
        return MHD_YES;
    if (!g->seen) {
        g->seen = 1;
        g->con = con;
        fiber_thread_nonblocking();
        request_log_begin(method, url);
        enum MHD_Result rc;
        if (conn_guard_request_begin(con, &rc)) {
            g->refused = 1;
            return rc;
        }
        struct gate_refusal r;
        if (headers_refusal(g, con, &r))
            return refuse(g, con, &r);
        if (strcmp(method, "GET") == 0 && strcmp(url, "/mcp/ws") == 0) {
            /* RFC 6455 4.1. libmicrohttpd would refuse the 101 on an
             * HTTP/1.0 connection and close it without a word. */
            if (strcmp(version, MHD_HTTP_VERSION_1_1) != 0) {
                set_refusal(&r, MHD_HTTP_BAD_REQUEST, "ws_http_version",
                            "Bad Request: a WebSocket handshake needs HTTP/1.1");
                return refuse(g, con, &r);
            }
            g->websocket = 1;
            return MHD_YES;
        }
    } else if (*upload_data_size == 0) {
        return final_call(g, con, url, method, version);
    } else if (g->websocket) {
        *upload_data_size = 0; /* a handshake has no body: ignored */
        return MHD_YES;
    } else {
        g->received += *upload_data_size;
        request_log_body(*upload_data_size);
        if (g->received > gate.max_body) {
            refuse_streamed(g, con);
            return MHD_NO;
        }
    }
    return gate.inner(gate.inner_cls, con, url, method, version, upload_data, upload_data_size,
                      &g->inner_cls);
}

static enum MHD_Result gate_access(void *cls, struct MHD_Connection *con, const char *url,
                                   const char *method, const char *version, const char *upload_data,
                                   size_t *upload_data_size, void **con_cls)
{
    (void)cls;
    struct gate_req *g = *con_cls;
    if (!g)
        return MHD_NO; /* the URI logger found no memory */
    request_log_bind(&g->log);
    enum MHD_Result rc = gate_call(g, con, url, method, version, upload_data, upload_data_size);
    request_log_bind(NULL);
    return rc;
}

void *body_gate_uri_logger(void *cls, const char *uri)
{
    struct gate_req *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    const char *q = strchr(uri, '?');
    g->nul_in_path = memmem(uri, q ? (size_t)(q - uri) : strlen(uri), "%00", 3) != NULL;
    g->inner_cls = ulfius_uri_logger(cls, uri);
    if (!g->inner_cls) {
        free(g);
        return NULL;
    }
    return g;
}

void body_gate_request_completed(void *cls, struct MHD_Connection *con, void **con_cls,
                                 enum MHD_RequestTerminationCode toe)
{
    struct gate_req *g = *con_cls;
    if (!g)
        return;
    request_log_bind(&g->log);
    /* Only a stopping daemon closes a connection whose request waits: the
     * fiber is finished here, every wait in it now ending at once. */
    g->closing = 1;
    if (g->fiber) {
        fiber_cancel(g->fiber);
        while (!run_fiber(g))
            ;
    }
    if (g->refused && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        linger_hand_off(connection_fd(con), NULL, 0);
    conn_guard_request_done(con);
    request_log_end(con);
    request_log_bind(NULL);
    ws_request_completed(&g->ws_pending);
    mhd_request_completed(cls, con, &g->inner_cls, toe);
    free(g);
    *con_cls = NULL;
}

/* Interposes libmicrohttpd's MHD_start_daemon for ulfius (see body_gate.h). */
struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc,
                                    void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
    va_list ap;
    va_start(ap, dh_cls);
    gate.inner = dh;
    gate.inner_cls = dh_cls;
    struct MHD_Daemon *d = MHD_start_daemon_va(flags, port, apc, apc_cls, gate_access, NULL, ap);
    va_end(ap);
    return d;
}
