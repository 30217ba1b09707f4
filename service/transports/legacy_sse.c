/* legacy_sse — see legacy_sse.h. */
#include "legacy_sse.h"
#include "auth.h"
#include "request_host.h"
#include "clock.h"
#include "fcond.h"
#include "core.h"
#include "http_shared.h"
#include "jsonrpc.h"
#include "log.h"
#include "media_type.h"
#include "randid.h"
#include "request_log.h"
#include "sse.h"
#include "sse_follow.h"
#include "table.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ulfius.h>

#define LEGACY_TRANSPORT "sse"
#define SSE_BLOCK 16384
/* A reservation nobody initialized is forgotten this long after its last
 * /sse connection closed. */
#define RESERVATION_GRACE_MS 60000
/* Reservations held at once, at most; a GET /sse past it is answered 503. */
#define MAX_RESERVATIONS 10000
/* A connection waiting for its initialize checks this often whether the
 * server is stopping. */
#define PENDING_TICK_MS 250
#define ENDPOINT_PATH "/messages?sessionId="

/* ---- reservations ---- */

enum resv_state { RESV_OPEN, RESV_INITIALIZING, RESV_BOUND };

struct reservation {
    char principal[AUTH_PRINCIPAL_MAX];
    enum resv_state state;
    int conns;          /* /sse connections waiting on it */
    unsigned gen;       /* the newest of them; older ones give way */
    int64_t idle_since; /* monotonic: when conns last fell to 0 */
};

static struct {
    pthread_mutex_t mu;
    struct fcond cv; /* a reservation was bound to its session */
    struct table *table;
    int64_t last_sweep;
} rsv = {.mu = PTHREAD_MUTEX_INITIALIZER};

struct sweep {
    int64_t now;
    char (*ids)[RANDID_LEN + 1];
    size_t n;
};

static void pick_stale(void *arg, const char *key, void *value)
{
    struct sweep *sw = arg;
    struct reservation *r = value;
    if (r->conns == 0 &&
        (r->state == RESV_BOUND ||
         (r->state == RESV_OPEN && sw->now - r->idle_since >= RESERVATION_GRACE_MS)))
        snprintf(sw->ids[sw->n++], RANDID_LEN + 1, "%s", key);
}

/* Forgets bound reservations and those left idle past the grace. Called
 * with rsv.mu held, at most once a second. */
static void sweep_locked(void)
{
    int64_t now = clock_mono_ms();
    if (now - rsv.last_sweep < 1000 || table_count(rsv.table) == 0)
        return;
    rsv.last_sweep = now;
    struct sweep sw = {now, calloc(table_count(rsv.table), sizeof *sw.ids), 0};
    if (!sw.ids)
        return;
    table_each(rsv.table, pick_stale, &sw);
    for (size_t i = 0; i < sw.n; i++)
        free(table_del(rsv.table, sw.ids[i]));
    free(sw.ids);
}

/* A new reservation with one waiting connection: 0, or -1 (at the cap, out
 * of memory, no randomness). */
static int resv_new(char id[RANDID_LEN + 1], const char *principal)
{
    struct reservation *r = calloc(1, sizeof *r);
    if (!r || randid_make(id) != 0) {
        free(r);
        return -1;
    }
    snprintf(r->principal, sizeof r->principal, "%s", principal);
    r->conns = 1;
    pthread_mutex_lock(&rsv.mu);
    sweep_locked();
    int rc = -1;
    if (rsv.table && table_count(rsv.table) < MAX_RESERVATIONS && !table_get(rsv.table, id))
        rc = table_put(rsv.table, id, r);
    pthread_mutex_unlock(&rsv.mu);
    if (rc != 0)
        free(r);
    return rc;
}

/* Waits on an existing reservation of this principal not yet bound (a
 * reconnect): 0 with the connection's generation in *gen, or -1. The
 * connections waiting before it give way (the client left them), as
 * attaching to a stream detaches its earlier readers. */
static int resv_attach(const char *id, const char *principal, unsigned *gen)
{
    pthread_mutex_lock(&rsv.mu);
    struct reservation *r = rsv.table ? table_get(rsv.table, id) : NULL;
    int ok = r && r->state != RESV_BOUND && strcmp(r->principal, principal) == 0;
    if (ok) {
        r->conns++;
        *gen = ++r->gen;
        fcond_broadcast(&rsv.cv);
    }
    pthread_mutex_unlock(&rsv.mu);
    return ok ? 0 : -1;
}

static void resv_detach(const char *id)
{
    pthread_mutex_lock(&rsv.mu);
    struct reservation *r = rsv.table ? table_get(rsv.table, id) : NULL;
    if (r && --r->conns == 0)
        r->idle_since = clock_mono_ms();
    pthread_mutex_unlock(&rsv.mu);
}

/* State of a reservation, or -1 if there is none; *gen (may be NULL) is
 * its newest connection's generation. */
static int resv_state(const char *id, unsigned *gen)
{
    pthread_mutex_lock(&rsv.mu);
    struct reservation *r = rsv.table ? table_get(rsv.table, id) : NULL;
    int st = r ? (int)r->state : -1;
    if (r && gen)
        *gen = r->gen;
    pthread_mutex_unlock(&rsv.mu);
    return st;
}

/* 1 if `id` is a reservation of this principal still waiting for its
 * initialize. */
static int resv_pending(const char *id, const char *principal)
{
    pthread_mutex_lock(&rsv.mu);
    struct reservation *r = rsv.table ? table_get(rsv.table, id) : NULL;
    int pending = r && r->state != RESV_BOUND && strcmp(r->principal, principal) == 0;
    pthread_mutex_unlock(&rsv.mu);
    return pending;
}

/* An initialize for `id` by `principal` may go ahead: the reservation is
 * open and becomes INITIALIZING, so a second initialize cannot race it.
 * 0, -1 no such reservation (of this principal), -2 not open. */
static int resv_claim(const char *id, const char *principal)
{
    pthread_mutex_lock(&rsv.mu);
    struct reservation *r = rsv.table ? table_get(rsv.table, id) : NULL;
    int rc = -1;
    if (r && strcmp(r->principal, principal) == 0) {
        rc = r->state == RESV_OPEN ? 0 : -2;
        if (rc == 0)
            r->state = RESV_INITIALIZING;
    }
    pthread_mutex_unlock(&rsv.mu);
    return rc;
}

/* 1 when a reservation of that id is held here, whoever's. */
static int resv_held(const char *id)
{
    pthread_mutex_lock(&rsv.mu);
    int held = rsv.table && table_get(rsv.table, id) != NULL;
    pthread_mutex_unlock(&rsv.mu);
    return held;
}

/* After the initialize: bound (the session exists, waiting connections
 * follow it), or open again for another try. */
static void resv_settle(const char *id, int bound)
{
    pthread_mutex_lock(&rsv.mu);
    struct reservation *r = rsv.table ? table_get(rsv.table, id) : NULL;
    if (r) {
        r->state = bound ? RESV_BOUND : RESV_OPEN;
        if (!bound && r->conns == 0)
            r->idle_since = clock_mono_ms();
    }
    fcond_broadcast(&rsv.cv);
    pthread_mutex_unlock(&rsv.mu);
}

/* Waits up to the deadline for a reservation to change, or for the
 * waiting connection's token to end (checked under the lock that
 * wake_waiting takes, so its wake is not missed; said in f). The follow
 * is not open yet, so the check only looks at its token: nothing parks
 * under rsv.mu. */
static void resv_wait(int64_t deadline_mono_ms, struct sse_follow *f)
{
    pthread_mutex_lock(&rsv.mu);
    if (!sse_follow_token_ended(f))
        fcond_wait_until(&rsv.cv, &rsv.mu, deadline_mono_ms);
    pthread_mutex_unlock(&rsv.mu);
}

/* follow_token's wake for connections waiting for their initialize. */
static void wake_waiting(void)
{
    pthread_mutex_lock(&rsv.mu);
    if (rsv.table)
        fcond_broadcast(&rsv.cv);
    pthread_mutex_unlock(&rsv.mu);
}

/* ---- GET /sse ---- */

struct conn {
    char sid[RANDID_LEN + 1]; /* the session (or reservation) id */
    char principal[AUTH_PRINCIPAL_MAX];
    int waiting;          /* counted in the reservation's conns */
    unsigned gen;         /* which of them */
    int announce;         /* the endpoint event is still to be sent */
    int endpoint_id;      /* it carries sid as its event id (new stream) */
    int64_t keepalive_at; /* monotonic: next keepalive while waiting */
    /* Its session's standalone stream, once bound (f.follow.session holds the
     * session's standalone slot). */
    struct sse_follow f;
    struct host_req *host; /* the request: the writer's waits run on its fiber */
    int counted;           /* http_stream_response */
};

static struct core_caller caller_for(const char *principal, const char *sid)
{
    return (struct core_caller){.principal = principal,
                                .transport = LEGACY_TRANSPORT,
                                .session_id = sid,
                                .session_required =
                                    "Bad Request: the sessionId query parameter is required",
                                .relayed = 1};
}

static void announce(struct conn *c)
{
    c->announce = 0;
    char data[sizeof ENDPOINT_PATH + RANDID_LEN];
    int n = snprintf(data, sizeof data, "%s%s", ENDPOINT_PATH, c->sid);
    /* A reconnect keeps the client's last event id: its endpoint event
     * carries none. */
    if (sse_event_type(&c->f.buf, "endpoint") != 0 ||
        sse_event(&c->f.buf, c->endpoint_id ? c->sid : NULL, -1, data, (size_t)n) != 0)
        c->f.done = 1;
}

/* Waiting for the initialize of a reservation: a short wait, then either
 * the session (it was initialized), the end (the reservation is gone or
 * the server stops), or a keepalive comment. */
static void wait_bound(struct conn *c)
{
    unsigned gen = 0;
    int st = resv_state(c->sid, &gen);
    if (st != RESV_BOUND && st >= 0 && gen == c->gen) {
        int64_t deadline = clock_mono_ms() + PENDING_TICK_MS;
        if (c->keepalive_at < deadline)
            deadline = c->keepalive_at;
        resv_wait(deadline, &c->f);
        if (c->f.done)
            return;
        st = resv_state(c->sid, &gen);
    }
    if (st >= 0 && gen != c->gen) {
        sse_comment(&c->f.buf, "another connection took over");
        c->f.done = 1;
        return;
    }
    /* With several processes on one store the initialize may reach
     * another one, which creates the session with this id: it is then in
     * the store, and the relay there put the initialize result on its
     * standalone stream. So the newest connection looks for it on every
     * tick (core_caller.reserved: with one process, the core answers not
     * found without a lookup). */
    int bound = st == RESV_BOUND;
    if (bound || (st >= 0 && gen == c->gen)) {
        struct core_caller k = caller_for(c->principal, c->sid);
        k.reserved = !bound;
        struct core_reply refused = {0};
        int rc = follow_open(&c->f.follow, &k, NULL, HTTP_PROBE_WAIT_MS, &refused);
        /* Not made anywhere yet: for a reserved id the core says to
         * initialize first (400). */
        if (rc != 0 && !bound && refused.reason == CORE_BAD_REQUEST) {
            core_reply_clear(&refused);
        } else {
            if (rc == 0 && !bound)
                resv_settle(c->sid, 1); /* its POSTs here name the session now */
            resv_detach(c->sid);
            c->waiting = 0;
            c->f.event_type = "message";
            if (rc != 0) {
                sse_comment(&c->f.buf, refused.reason == CORE_CONFLICT
                                           ? "another connection follows this session"
                                           : "session ended");
                core_reply_clear(&refused);
                c->f.done = 1;
            }
            return;
        }
    }
    if (st < 0 || core_state() != CORE_SERVING) {
        sse_comment(&c->f.buf, "session ended");
        c->f.done = 1;
        return;
    }
    if (clock_mono_ms() >= c->keepalive_at) {
        /* A write to a client that is gone fails here, ending this. */
        sse_comment(&c->f.buf, "keepalive");
        c->keepalive_at = clock_mono_ms() + http_keepalive_ms();
    }
}

/* The connection's lead (sse_follow.h): the endpoint event, and the wait
 * for its session to be bound; each goes out on its own, and only a
 * followed stream's messages share a block. */
static int leading(void *ud)
{
    struct conn *c = ud;
    return !c->f.follow.session || c->announce;
}

static void lead_step(void *ud)
{
    struct conn *c = ud;
    if (sse_follow_token_ended(&c->f))
        return; /* said why: the stream ends */
    if (c->announce)
        announce(c);
    else
        wait_bound(c);
}

static const struct sse_lead conn_lead = {leading, lead_step, 0};

static ssize_t conn_write(void *ud, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct conn *c = ud;
    return sse_follow_write(&c->f, c->host, out, max);
}

static void conn_free(void *ud)
{
    struct conn *c = ud;
    http_stream_closed(&c->counted);
    if (c->waiting)
        resv_detach(c->sid);
    follow_end(&c->f.follow);
    sse_buf_free(&c->f.buf);
    free(c);
}

/* GET /sse with Last-Event-ID: the session goes on from there. The id is
 * either a cursor on a session's standalone stream (the id of a message
 * event; the stream names its session, since an EventSource reconnects
 * with nothing but this id) or a session id (the endpoint event's: nothing
 * after it was seen). Fills c, or answers the refusal and returns -1. */
static int resume(struct conn *c, const char *last, struct _u_response *resp)
{
    const char *cursor = strchr(last, ':') ? last : NULL;
    if (!cursor && strlen(last) == RANDID_LEN && resv_attach(last, c->principal, &c->gen) == 0) {
        snprintf(c->sid, sizeof c->sid, "%s", last);
        c->waiting = 1; /* not initialized yet: wait for it again */
        return 0;
    }
    struct core_caller k = caller_for(c->principal, cursor ? NULL : last);
    struct core_reply refused;
    if (follow_open(&c->f.follow, &k, cursor, HTTP_PROBE_WAIT_MS, &refused) != 0)
        return http_refused(resp, &refused), -1;
    c->f.event_type = "message";
    snprintf(c->sid, sizeof c->sid, "%s", c->f.follow.session_id);
    request_log_session(c->sid);
    return 0;
}

static int on_sse(const struct _u_request *req, struct _u_response *resp, void *ud)
{
    (void)ud;
    struct auth_grant grant;
    if (!http_admitted(req, resp, &grant))
        return U_CALLBACK_COMPLETE;
    if (!media_type_accepts(http_header(req, "Accept"), "text/event-stream"))
        return http_fail(resp, 406, JSONRPC_SERVER_ERROR,
                         "Not Acceptable: Accept must list text/event-stream");
    if (!http_version_ok(req, resp))
        return U_CALLBACK_COMPLETE;
    struct conn *c = calloc(1, sizeof *c);
    if (c)
        c->host = request_host_current();
    if (!c)
        return http_fail(resp, 503, JSONRPC_INTERNAL_ERROR, "Out of memory");
    snprintf(c->principal, sizeof c->principal, "%s", grant.principal);
    /* Waiting for its initialize or following its session, the stream
     * lasts as long as its token. */
    if (follow_token(&c->f.follow, &grant, wake_waiting) != 0) {
        free(c);
        return http_fail(resp, 503, JSONRPC_INTERNAL_ERROR, "Out of memory");
    }
    c->announce = 1;
    c->f.lead = &conn_lead;
    c->f.lead_ud = c;
    c->keepalive_at = clock_mono_ms() + http_keepalive_ms();
    const char *last = http_header(req, "Last-Event-ID");
    if (last && *last) {
        if (resume(c, last, resp) != 0) {
            conn_free(c);
            return U_CALLBACK_COMPLETE;
        }
    } else if (resv_new(c->sid, grant.principal) == 0) {
        c->waiting = 1;
        c->endpoint_id = 1;
        request_log_session(c->sid);
    } else {
        conn_free(c);
        u_map_put(resp->map_header, "Retry-After", "60");
        return http_fail(resp, 503, JSONRPC_SERVER_ERROR,
                         "Too many /sse streams waiting for initialize; retry later");
    }
    if (http_stream_response(resp, conn_write, conn_free, c, SSE_BLOCK, &c->counted) != U_OK) {
        conn_free(c);
        return http_fail(resp, 503, JSONRPC_INTERNAL_ERROR, "Could not start the event stream");
    }
    http_sse_headers(resp);
    return U_CALLBACK_COMPLETE;
}

/* ---- POST /messages ---- */

static int accepted(struct _u_response *resp)
{
    ulfius_set_string_body_response(resp, 202, "Accepted");
    u_map_put(resp->map_header, "Content-Type", "text/plain");
    return U_CALLBACK_COMPLETE;
}

/* Every reply went to the /sse stream (core_caller.relayed); a refusal of
 * the whole POST (no such session, already initialized, busy, ...) is its
 * answer, with a status as on /mcp. */
static int deliver(struct _u_response *resp, struct core_reply *r)
{
    if (r->kind == CORE_REJECTED)
        return http_refused(resp, r);
    core_reply_clear(r);
    return accepted(resp);
}

/* initialize, POSTed for a reservation: creates the session with its id. */
static int post_initialize(struct _u_response *resp, const char *sid, const char *principal,
                           json_t *root)
{
    int claim = strlen(sid) == RANDID_LEN ? resv_claim(sid, principal) : -1;
    if (claim != 0) {
        /* Not a reservation waiting for its initialize here: a session of
         * this principal (which refuses a second initialize), or nothing
         * (404), unless several processes share the store and no
         * reservation of this id is held here: the /sse connection that
         * reserved it may be another's, the core then creates the session
         * with it (core_caller.adopt), and that connection finds it. */
        struct core_caller k = caller_for(principal, sid);
        k.adopt = claim == -1 && strlen(sid) == RANDID_LEN && !resv_held(sid);
        struct core_reply r;
        core_receive(&k, root, &r);
        return deliver(resp, &r);
    }
    struct core_caller k = caller_for(principal, NULL);
    k.new_session_id = sid;
    struct core_reply r;
    core_receive(&k, root, &r);
    /* The initialize result reached the standalone stream through the
     * relay; a waiting /sse follows that stream from its start. */
    int created = r.kind != CORE_REJECTED;
    int rc = deliver(resp, &r);
    resv_settle(sid, created);
    return rc;
}

static int on_messages(const struct _u_request *req, struct _u_response *resp, void *ud)
{
    (void)ud;
    struct auth_grant grant;
    if (!http_admitted(req, resp, &grant))
        return U_CALLBACK_COMPLETE;
    const char *principal = grant.principal;
    const char *sid = u_map_get(req->map_url, "sessionId");
    if (!sid || !*sid)
        return http_fail(resp, 400, JSONRPC_SERVER_ERROR,
                         "Bad Request: the sessionId query parameter is required");
    request_log_session(sid);
    if (!media_type_is(http_header(req, "Content-Type"), "application/json"))
        return http_fail(resp, 415, JSONRPC_SERVER_ERROR,
                         "Unsupported Media Type: Content-Type must be application/json");
    /* Bodies over max_body never get here: body_gate refused them. */
    if (!http_version_ok(req, resp))
        return U_CALLBACK_COMPLETE;
    struct jsonrpc_error err;
    json_t *root = req->binary_body_length
                       ? jsonrpc_parse(req->binary_body, req->binary_body_length, &err)
                       : NULL;
    if (!root) {
        if (!req->binary_body_length)
            return http_fail(resp, 400, JSONRPC_PARSE_ERROR, "Parse error: empty body");
        return http_fail(resp, 400, err.code, err.message);
    }
    const char *method = json_string_value(json_object_get(root, "method"));
    int rc;
    if (json_is_array(root)) {
        request_log_mcp("batch", NULL);
        struct core_caller k = caller_for(principal, sid);
        struct core_reply r;
        core_receive(&k, root, &r);
        rc = deliver(resp, &r);
    } else if (method && strcmp(method, "initialize") == 0 && json_object_get(root, "id")) {
        request_log_mcp(method, NULL);
        rc = post_initialize(resp, sid, principal, root);
    } else {
        request_log_mcp(method, method && strcmp(method, "tools/call") == 0
                                    ? json_string_value(
                                          json_object_get(json_object_get(root, "params"), "name"))
                                    : NULL);
        /* A reservation not yet initialized names no session, unless
         * another process initialized it: else the core says to
         * initialize first. */
        int pending = strlen(sid) == RANDID_LEN && resv_pending(sid, principal);
        struct core_caller k = caller_for(principal, sid);
        k.reserved = pending;
        if (pending)
            k.session_required = "Invalid Request: send initialize first";
        struct core_reply r;
        core_receive(&k, root, &r);
        if (pending && r.kind != CORE_REJECTED)
            resv_settle(sid, 1); /* before the /sse connection here noticed */
        rc = deliver(resp, &r);
    }
    json_decref(root);
    return rc;
}

const char *legacy_sse_allow(const char *url_path)
{
    if (http_path_is(url_path, "sse"))
        return "GET";
    return http_path_is(url_path, "messages") ? "POST" : NULL;
}

/* ---- lifecycle ---- */

void legacy_sse_add_endpoints(struct _u_instance *inst)
{
    pthread_mutex_lock(&rsv.mu);
    if (!rsv.table) {
        rsv.table = table_new();
        fcond_init(&rsv.cv);
    }
    pthread_mutex_unlock(&rsv.mu);
    ulfius_add_endpoint_by_val(inst, "GET", "/sse", NULL, 0, on_sse, NULL);
    ulfius_add_endpoint_by_val(inst, "POST", "/messages", NULL, 0, on_messages, NULL);
}

static void free_entry(void *arg, const char *key, void *value)
{
    (void)arg;
    (void)key;
    free(value);
}

void legacy_sse_stop(void)
{
    pthread_mutex_lock(&rsv.mu);
    if (rsv.table) {
        table_each(rsv.table, free_entry, NULL);
        table_free(rsv.table);
        rsv.table = NULL;
        fcond_destroy(&rsv.cv);
    }
    pthread_mutex_unlock(&rsv.mu);
}
