/* request_host — see request_host.h. */
#include "request_host.h"
#include "body_gate.h"
#include "conn_guard.h"
#include "fiber.h"
#include "linger.h"
#include "mhd_interpose.h"
#include "request_log.h"
#include "ws.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ulfius.h>

/* A header field's value as request_host_header made it (trimmed, or its
 * lines joined), kept for the request's later lookups of the name. */
struct field {
    struct field *next;
    const char *name; /* in the same allocation, after the value */
    char value[];
};

/* A request, from its first line to its completion: the URI logger makes
 * it (libmicrohttpd passes what that returns to every later call as the
 * request's con_cls) and the completion frees it. */
struct host_req {
    void *inner_cls;   /* ulfius's own state of the request */
    int seen;          /* its first call has come */
    int refused;       /* answered before ulfius (conn_guard, the gate): it never sees it */
    int websocket;     /* GET /mcp/ws: ws_upgrade answers it, not ulfius */
    int nul_in_path;   /* the raw path has %00 (body_gate_nul_in_path) */
    int closing;       /* completed: nothing may resume the connection */
    uint64_t received; /* body bytes so far */
    struct request_record log;
    struct ws_conn *ws_pending;
    struct MHD_Connection *con;
    struct field *fields; /* owned: request_host_header's copies */
    /* The handler, or a content reader's fill, on a fiber (one at a time). */
    struct fiber *fiber;
    const char *url, *method, *version;
    size_t no_data;
    enum MHD_Result result;
    int (*fill)(void *ud);
    void *fill_ud;
    int verdict;
    struct host_req *next, **prev; /* in fibers.live while it has a fiber */
};

/* Every request with a fiber, so that stopping can finish them: libmicrohttpd
 * aborts if a connection is still suspended when its daemon stops. */
static struct {
    pthread_mutex_t mu;
    struct host_req *live;
    int stopping;
} fibers = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The request whose code runs on this thread (set around each fiber run). */
static _Thread_local struct host_req *running;

/* ulfius's access handler, for a call the host does not answer itself. */
static enum MHD_Result inner(struct host_req *g, const char *upload_data, size_t *upload_data_size)
{
    void *cls;
    MHD_AccessHandlerCallback fn = mhd_interpose_inner(&cls);
    return fn(cls, g->con, g->url, g->method, g->version, upload_data, upload_data_size,
              &g->inner_cls);
}

/* ---- running a request's code on a fiber ---- */

static void host_suspend(void *cookie)
{
    struct host_req *g = cookie;
    MHD_suspend_connection(g->con);
}

static void host_resume(void *cookie)
{
    struct host_req *g = cookie;
    if (!g->closing)
        MHD_resume_connection(g->con);
}

static void handler_main(void *arg)
{
    struct host_req *g = arg;
    g->result = inner(g, NULL, &g->no_data);
}

/* The WebSocket handshake on a fiber too: a resume may revive the session
 * or wait on a stream's append lock, waits that park a fiber but would
 * block the pool thread that runs their holder. */
static void upgrade_main(void *arg)
{
    struct host_req *g = arg;
    g->result = ws_upgrade(g->con, g->url, &g->ws_pending);
}

static void fill_main(void *arg)
{
    struct host_req *g = arg;
    g->verdict = g->fill(g->fill_ud);
}

/* Runs g's fiber until it ends (1) or waits (0: its connection is
 * suspended, and libmicrohttpd calls again once it is resumed). */
static int run_fiber(struct host_req *g)
{
    struct host_req *outer = running;
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
static int start_fiber(struct host_req *g, void (*fn)(void *))
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

struct host_req *request_host_current(void)
{
    return running;
}

void request_host_client(const struct host_req *g, char *out)
{
    out[0] = '\0';
    if (g && g->con)
        conn_guard_client(g->con, out);
}

/* The lines of one field, for request_host_header. */
struct field_walk {
    const char *name;
    size_t name_len;
    const char *first; /* the first line's value */
    size_t first_len, lines, total;
    char *joined; /* with lines > 1: every line, ", " between, each trimmed */
    size_t len;
};

static size_t trimmed_len(const char *v, size_t len)
{
    while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
        len--;
    return len;
}

static enum MHD_Result each_line(void *cls, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    struct field_walk *w = cls;
    /* The length first: this runs for every field, for every lookup. */
    if (!value || key_size != w->name_len || strcasecmp(key, w->name) != 0)
        return MHD_YES;
    size_t n = trimmed_len(value, value_size);
    if (w->lines++ == 0) {
        w->first = value;
        w->first_len = value_size;
    }
    if (w->joined) {
        if (w->len) {
            memcpy(w->joined + w->len, ", ", 2);
            w->len += 2;
        }
        memcpy(w->joined + w->len, value, n);
        w->len += n;
    }
    w->total += n + 2;
    return MHD_YES;
}

const char *request_host_header(struct host_req *g, const char *name)
{
    if (!g || !g->con)
        return NULL;
    for (struct field *f = g->fields; f; f = f->next)
        if (strcasecmp(f->name, name) == 0)
            return f->value;
    struct field_walk w = {.name = name, .name_len = strlen(name)};
    MHD_get_connection_values_n(g->con, MHD_HEADER_KIND, each_line, &w);
    if (!w.lines)
        return NULL;
    size_t len = trimmed_len(w.first, w.first_len);
    if (w.lines == 1 && len == w.first_len)
        return w.first; /* as libmicrohttpd holds it: no copy */
    /* A field on several lines is one list (RFC 9110 5.3), as ulfius joins
     * it: a singleton field sent twice reads as one invalid value and is
     * refused, never silently the first. */
    size_t cap = w.lines == 1 ? len : w.total;
    struct field *f = malloc(sizeof *f + cap + 1 + w.name_len + 1);
    if (!f)
        return w.first; /* untrimmed rather than absent */
    if (w.lines == 1) {
        memcpy(f->value, w.first, len);
    } else {
        w.joined = f->value;
        w.lines = 0;
        MHD_get_connection_values_n(g->con, MHD_HEADER_KIND, each_line, &w);
        len = w.len;
    }
    f->value[len] = '\0';
    char *copy = f->value + len + 1;
    memcpy(copy, name, w.name_len + 1);
    f->name = copy;
    f->next = g->fields;
    g->fields = f;
    return f->value;
}

int request_host_fill(struct host_req *g, int (*fill)(void *ud), void *ud, int *verdict)
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

void request_host_stop(void)
{
    pthread_mutex_lock(&fibers.mu);
    fibers.stopping = 1;
    for (struct host_req *g = fibers.live; g; g = g->next)
        fiber_cancel(g->fiber);
    pthread_mutex_unlock(&fibers.mu);
}

/* ---- libmicrohttpd's callbacks ---- */

static enum MHD_Result final_call(struct host_req *g)
{
    if (g->fiber) /* resumed */
        return run_fiber(g) ? g->result : MHD_YES;
    conn_guard_request_received(g->con);
    int r = start_fiber(g, g->websocket ? upgrade_main : handler_main);
    if (r < 0)
        return MHD_NO; /* out of memory: the connection is closed */
    return r ? g->result : MHD_YES;
}

static enum MHD_Result host_call(struct host_req *g, const char *upload_data,
                                 size_t *upload_data_size)
{
    if (g->refused)
        return MHD_YES;
    if (!g->seen) {
        g->seen = 1;
        fiber_thread_nonblocking();
        request_log_begin(g->method, g->url);
        enum MHD_Result rc;
        if (conn_guard_request_begin(g->con, &rc) ||
            body_gate_headers(g->con, g->method, g->url, g->version, g->nul_in_path, &rc)) {
            g->refused = 1;
            return rc;
        }
        if (strcmp(g->method, "GET") == 0 && strcmp(g->url, "/mcp/ws") == 0) {
            g->websocket = 1;
            return MHD_YES;
        }
    } else if (*upload_data_size == 0) {
        return final_call(g);
    } else if (g->websocket) {
        *upload_data_size = 0; /* a handshake has no body: ignored */
        return MHD_YES;
    } else {
        request_log_body(*upload_data_size);
        if (body_gate_body(g->con, &g->received, *upload_data_size)) {
            g->refused = 1;
            return MHD_NO;
        }
    }
    return inner(g, upload_data, upload_data_size);
}

static enum MHD_Result host_access(void *cls, struct MHD_Connection *con, const char *url,
                                   const char *method, const char *version, const char *upload_data,
                                   size_t *upload_data_size, void **con_cls)
{
    (void)cls;
    struct host_req *g = *con_cls;
    if (!g)
        return MHD_NO; /* the URI logger found no memory */
    g->con = con;
    g->url = url;
    g->method = method;
    g->version = version;
    request_log_bind(&g->log);
    enum MHD_Result rc = host_call(g, upload_data, upload_data_size);
    request_log_bind(NULL);
    return rc;
}

void request_host_install(void)
{
    mhd_interpose_route(host_access);
}

int request_host_installed(void)
{
    return mhd_interpose_installed();
}

void *request_host_uri_logger(void *cls, const char *uri)
{
    struct host_req *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->nul_in_path = body_gate_nul_in_path(uri);
    g->inner_cls = ulfius_uri_logger(cls, uri);
    if (!g->inner_cls) {
        free(g);
        return NULL;
    }
    return g;
}

void request_host_completed(void *cls, struct MHD_Connection *con, void **con_cls,
                            enum MHD_RequestTerminationCode toe)
{
    struct host_req *g = *con_cls;
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
    if (g->refused && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci)
            linger_hand_off(ci->connect_fd, NULL, 0);
    }
    conn_guard_request_done(con);
    request_log_end(con);
    request_log_bind(NULL);
    ws_request_completed(&g->ws_pending);
    mhd_request_completed(cls, con, &g->inner_cls, toe);
    while (g->fields) {
        struct field *f = g->fields;
        g->fields = f->next;
        free(f);
    }
    free(g);
    *con_cls = NULL;
}
