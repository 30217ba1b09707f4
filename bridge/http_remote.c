/* http_remote — see http_remote.h.
 *
 * Two kinds of object: a struct req is a client request waiting for its
 * response (it outlives transfers: POST, then maybe resumes, then maybe a
 * retry after re-initialization), and a struct xfer is one HTTP exchange.
 * Responses are paired with requests by id wherever they arrive, so a
 * response that comes on a resumed or standalone stream still counts. */
#include "http_remote.h"

#include "bridge_log.h"
#include "remote_error.h"
#include "rpc_message.h"
#include "session.h"
#include "sse_parser.h"

#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_BODY (16u * 1024 * 1024) /* a JSON reply or one SSE event */
#define MAX_ERROR_BODY 4096          /* kept of a non-2xx body, for the message */
#define BACKOFF_BASE_MS 250
#define BACKOFF_CAP_MS 5000
#define DELETE_TIMEOUT_MS 2000
#define MSG_CAP 768

enum xfer_kind {
    XF_POST,      /* a client message */
    XF_RESUME,    /* GET with Last-Event-ID, for a request's dropped stream */
    XF_LISTEN,    /* the standalone GET stream */
    XF_REINIT,    /* the replayed initialize */
    XF_REINIT_OK, /* the replayed notifications/initialized */
    XF_POLL       /* mcpd/poll for a request's stream (--transport poll) */
};

struct req {
    struct req *next, *prev;
    json_t *id;
    char *key;
    char *body; /* as the client sent it */
    size_t body_len;
    char method[64];
    int is_initialize;
    int answered;
    int retried;           /* sent again after a re-initialization already */
    int waiting;           /* parked until re-initialization ends */
    int64_t resume_at;     /* a resume is scheduled (monotonic ms), or 0 */
    int64_t drop_deadline; /* resumes stop here */
    int resume_attempts;
    long retry_ms; /* the server's SSE retry: hint, or -1 */
    char *last_event_id;
    /* --transport poll: the request went with "stream": true, and its
     * messages are fetched with mcpd/poll from next_seq */
    int streamed;
    char *stream_id;
    long long next_seq;
    struct xfer *xf; /* the transfer serving it now, or NULL */
};

struct xfer {
    struct xfer *next, *prev;
    struct http_remote *r;
    enum xfer_kind kind;
    CURL *easy;
    struct curl_slist *hdrs;
    struct req *req; /* XF_POST of a request, XF_RESUME */
    char *body;      /* what is POSTed when no req owns it */
    size_t body_len;
    char method[64];     /* of a POSTed notification, for logs */
    unsigned generation; /* session generation it was sent under */
    long status;
    int headers_done, is_sse, is_json;
    char *session_hdr;
    struct sse_parser sse;
    struct sse_buf acc; /* a JSON body, or the start of an error body */
    int64_t started, last_activity;
    int timed_out, too_big;
    int got_event;     /* an SSE event arrived: the stream worked */
    int opening;       /* initialize or notifications/initialized: holds the rest */
    char poll_key[64]; /* XF_POLL: the id key of the mcpd/poll request */
    int poll_ended;    /* XF_POLL: the stream is finished, failed or expired */
    char errbuf[CURL_ERROR_SIZE];
};

/* A client notification or response held while the session opens. */
struct parked {
    struct parked *next;
    char *body;
    size_t len;
    char method[64];
};

struct http_remote {
    const struct bridge_options *o;
    struct remote_sink sink;
    CURLM *multi;
    char host[256];
    struct session s;
    struct req *reqs, *reqs_tail; /* in arrival order */
    struct xfer *xfers;
    /* While the client's initialize or notifications/initialized is on its
     * way, later messages wait: the server must see them in that order,
     * and they need the session id the initialize reply brings. */
    int hold;
    struct parked *parked, *parked_tail;
    int n_pending;
    /* the standalone GET stream */
    int listen_wanted; /* the server has one: keep it open */
    int64_t listen_at; /* reconnect scheduled (monotonic ms), or 0 */
    int listen_attempts;
    char *listen_last_id;
    char reinit_key[64]; /* the replayed initialize's id key */
    unsigned poll_count; /* for unique mcpd/poll ids */
    int stopping;
};

/* ------------------------------------------------------------------ util */

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static void emit(struct http_remote *r, const char *json, size_t len)
{
    r->sink.emit(r->sink.ud, json, len);
}

static void emit_json(struct http_remote *r, const json_t *m)
{
    char *s = json_dumps(m, JSON_COMPACT);
    if (s) {
        emit(r, s, strlen(s));
        free(s);
    }
}

static int64_t backoff_ms(int attempt, long hint_ms)
{
    int64_t base = hint_ms > 0 ? hint_ms : BACKOFF_BASE_MS;
    int64_t d = base << (attempt < 10 ? attempt : 10);
    if (d > BACKOFF_CAP_MS)
        d = BACKOFF_CAP_MS;
    /* jitter: half to all of it, so many bridges do not come back in step */
    return d / 2 + (int64_t)(random() % (d / 2 + 1));
}

/* ------------------------------------------------------------ requests */

static struct req *req_find(struct http_remote *r, const char *key)
{
    for (struct req *q = r->reqs; q; q = q->next) {
        if (!q->answered && strcmp(q->key, key) == 0)
            return q;
    }
    return NULL;
}

static void req_free(struct http_remote *r, struct req *q)
{
    if (q->prev)
        q->prev->next = q->next;
    else
        r->reqs = q->next;
    if (q->next)
        q->next->prev = q->prev;
    else
        r->reqs_tail = q->prev;
    if (!q->answered)
        r->n_pending--;
    json_decref(q->id);
    free(q->key);
    free(q->body);
    free(q->last_event_id);
    free(q->stream_id);
    free(q);
}

/* Answers q with a bridge error (unless it was answered meanwhile). */
static void req_fail(struct http_remote *r, struct req *q, const char *message)
{
    if (q->answered)
        return;
    bridge_log(BLOG_WARN, "request_failed", "%s id=%s: %s", q->method, q->key, message);
    char *reply = rpc_error_reply(q->id, RPC_BRIDGE_ERROR, message);
    q->answered = 1;
    r->n_pending--;
    if (reply) {
        emit(r, reply, strlen(reply));
        free(reply);
    }
}

/* ----------------------------------------------------------- incoming */

static void start_reinit(struct http_remote *r);

/* The result of the replayed initialize: adopt it, then send the replayed
 * notifications/initialized. */
static void reinit_result(struct http_remote *r, struct xfer *xf, const json_t *m)
{
    if (!json_object_get(m, "result")) {
        bridge_log(BLOG_ERROR, "reinit_refused", "the server refused the replayed initialize");
        return; /* the transfer's end fails the waiting requests */
    }
    session_adopt(&r->s, xf->session_hdr);
    bridge_log(BLOG_INFO, "session_reinitialized", "new session adopted");
}

static void incoming_one(struct http_remote *r, struct xfer *xf, const json_t *m, const char *raw,
                         size_t raw_len);

/* The reply to a "stream": true request: keeps the stream id. Returns 0
 * when m is not a handle (an error: that is the request's answer). */
static int stream_handle(struct req *q, const json_t *m)
{
    const json_t *res = json_object_get(m, "result");
    const char *sid = json_string_value(json_object_get(res, "stream_id"));
    if (!sid)
        return 0;
    free(q->stream_id);
    q->stream_id = strdup(sid);
    q->next_seq = 0;
    return q->stream_id != NULL;
}

/* An mcpd/poll result: relay its chunks, remember where to go on. */
static void poll_result(struct http_remote *r, struct xfer *xf, const json_t *m)
{
    struct req *q = xf->req;
    const json_t *res = json_object_get(m, "result");
    if (!res) {
        const json_t *err = json_object_get(m, "error");
        char msg[MSG_CAP];
        snprintf(msg, sizeof msg, "mcp-bridge: %s lost the request's stream (%s)", r->host,
                 json_string_value(json_object_get(err, "message"))
                     ? json_string_value(json_object_get(err, "message"))
                     : "mcpd/poll failed");
        xf->poll_ended = 1;
        req_fail(r, q, msg);
        return;
    }
    size_t i;
    const json_t *chunk;
    json_array_foreach(json_object_get(res, "chunks"), i, chunk)
    {
        const json_t *msg = json_object_get(chunk, "message");
        if (msg)
            incoming_one(r, xf, msg, NULL, 0);
    }
    const json_t *next = json_object_get(res, "next_seq");
    if (json_is_integer(next))
        q->next_seq = json_integer_value(next);
    const char *state = json_string_value(json_object_get(res, "state"));
    xf->poll_ended = state && (strcmp(state, "finished") == 0 || strcmp(state, "error") == 0 ||
                               strcmp(state, "expired") == 0);
    if (json_is_true(json_object_get(res, "has_more")))
        xf->poll_ended = 0;
}

/* One JSON-RPC message from the server (from xf). */
static void incoming_one(struct http_remote *r, struct xfer *xf, const json_t *m, const char *raw,
                         size_t raw_len)
{
    enum rpc_kind k = rpc_classify(m);
    if (k == RPC_RESPONSE) {
        char *key = rpc_id_key(json_object_get(m, "id"));
        if (!key)
            return;
        if (xf->kind == XF_REINIT && strcmp(key, r->reinit_key) == 0) {
            reinit_result(r, xf, m);
            free(key);
            return;
        }
        if (xf->kind == XF_POLL && strcmp(key, xf->poll_key) == 0) {
            free(key);
            poll_result(r, xf, m);
            return;
        }
        struct req *q = req_find(r, key);
        free(key);
        if (!q) {
            bridge_log(BLOG_DEBUG, "response_dropped", "a response to no pending request");
            return;
        }
        if (q->streamed && !q->stream_id && stream_handle(q, m))
            return; /* the handle is the bridge's business, not the client's */
        if (q->is_initialize) {
            const char *v =
                json_string_value(json_object_get(json_object_get(m, "result"), "protocolVersion"));
            if (v)
                session_set_version(&r->s, v);
            r->s.state = SESSION_READY;
        }
        q->answered = 1;
        r->n_pending--;
    } else if (k == RPC_INVALID) {
        bridge_log(BLOG_WARN, "bad_server_message",
                   "the server sent a message that is not "
                   "JSON-RPC; dropped");
        return;
    }
    if (raw && !memchr(raw, '\n', raw_len) && !memchr(raw, '\r', raw_len))
        emit(r, raw, raw_len);
    else
        emit_json(r, m);
}

/* A JSON text from the server: one message or a batch. Returns -1 when it
 * is not JSON. */
static int incoming_text(struct http_remote *r, struct xfer *xf, const char *text, size_t len)
{
    json_error_t err;
    json_t *m = json_loadb(text, len, 0, &err);
    if (!m) {
        bridge_log(BLOG_WARN, "bad_server_json", "%s", err.text);
        return -1;
    }
    if (json_is_array(m)) {
        size_t i;
        json_t *e;
        json_array_foreach(m, i, e) incoming_one(r, xf, e, NULL, 0);
    } else {
        incoming_one(r, xf, m, text, len);
    }
    json_decref(m);
    return 0;
}

static int on_sse_event(void *ud, const struct sse_event *ev)
{
    struct xfer *xf = ud;
    struct http_remote *r = xf->r;
    /* remember where we are, for Last-Event-ID */
    if (*ev->last_id) {
        char **slot = xf->req                 ? &xf->req->last_event_id
                      : xf->kind == XF_LISTEN ? &r->listen_last_id
                                              : NULL;
        if (slot && (!*slot || strcmp(*slot, ev->last_id) != 0)) {
            free(*slot);
            *slot = strdup(ev->last_id);
        }
    }
    xf->got_event = 1;
    if (strcmp(ev->type, "message") != 0)
        return 0;
    if (ev->len == 0 || (ev->len == 1 && ev->data[0] == ' '))
        return 0; /* a priming event */
    incoming_text(r, xf, ev->data, ev->len);
    return 0;
}

/* ---------------------------------------------------------- transfers */

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
    struct xfer *xf = ud;
    size_t len = size * n;
    xf->last_activity = clock_mono_ms();
    if (len >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
        /* a new header block (after 1xx): start over */
        xf->headers_done = xf->is_sse = xf->is_json = 0;
        free(xf->session_hdr);
        xf->session_hdr = NULL;
        return len;
    }
    if (len <= 2 && (buf[0] == '\r' || buf[0] == '\n')) {
        curl_easy_getinfo(xf->easy, CURLINFO_RESPONSE_CODE, &xf->status);
        if (xf->status >= 200)
            xf->headers_done = 1;
        /* the session of an initialize is needed before its reply is
         * relayed: the client's next message must carry it */
        if (xf->headers_done && xf->kind == XF_POST && xf->req && xf->req->is_initialize &&
            xf->status / 100 == 2) {
            session_adopt(&xf->r->s, xf->session_hdr);
        }
        return len;
    }
    const char *colon = memchr(buf, ':', len);
    if (!colon)
        return len;
    size_t name_len = (size_t)(colon - buf);
    const char *v = colon + 1;
    size_t vlen = len - name_len - 1;
    while (vlen && (*v == ' ' || *v == '\t'))
        v++, vlen--;
    while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
        vlen--;
    if (name_len == 12 && strncasecmp(buf, "content-type", 12) == 0) {
        xf->is_sse = vlen >= 17 && strncasecmp(v, "text/event-stream", 17) == 0;
        xf->is_json = vlen >= 16 && strncasecmp(v, "application/json", 16) == 0;
    } else if (name_len == 14 && strncasecmp(buf, "mcp-session-id", 14) == 0 && vlen &&
               vlen < 1024) {
        free(xf->session_hdr);
        xf->session_hdr = dup_n(v, vlen);
    }
    return len;
}

static size_t on_body(char *buf, size_t size, size_t n, void *ud)
{
    struct xfer *xf = ud;
    size_t len = size * n;
    xf->last_activity = clock_mono_ms();
    if (xf->status / 100 == 2 && xf->is_sse) {
        if (sse_parser_feed(&xf->sse, buf, len, on_sse_event, xf) < 0) {
            xf->too_big = 1;
            return 0; /* aborts the transfer */
        }
        return len;
    }
    size_t cap = xf->status / 100 == 2 ? MAX_BODY : MAX_ERROR_BODY;
    size_t take = xf->acc.len + len > cap ? cap - xf->acc.len : len;
    if (take < len && xf->status / 100 == 2) {
        xf->too_big = 1;
        return 0;
    }
    if (take) {
        char *bigger = realloc(xf->acc.p, xf->acc.len + take + 1);
        if (!bigger)
            return 0;
        xf->acc.p = bigger;
        memcpy(xf->acc.p + xf->acc.len, buf, take);
        xf->acc.len += take;
        xf->acc.p[xf->acc.len] = '\0';
    }
    return len;
}

static struct curl_slist *add_header(struct curl_slist *l, const char *name, const char *value)
{
    char line[2048];
    snprintf(line, sizeof line, "%s: %s", name, value);
    struct curl_slist *more = curl_slist_append(l, line);
    return more ? more : l;
}

static struct xfer *xfer_new(struct http_remote *r, enum xfer_kind kind, const char *method_http,
                             const char *body, size_t body_len, const char *last_event_id)
{
    struct xfer *xf = calloc(1, sizeof *xf);
    if (!xf)
        return NULL;
    xf->r = r;
    xf->kind = kind;
    xf->generation = r->s.generation;
    xf->started = xf->last_activity = clock_mono_ms();
    sse_parser_init(&xf->sse, MAX_BODY);
    xf->easy = curl_easy_init();
    if (!xf->easy) {
        free(xf);
        return NULL;
    }
    const struct bridge_options *o = r->o;
    CURL *e = xf->easy;
    curl_easy_setopt(e, CURLOPT_URL, o->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, xf);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, xf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, xf);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, xf->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (o->cacert)
        curl_easy_setopt(e, CURLOPT_CAINFO, o->cacert);
    /* a proxy must not see a compressed stream it would buffer */
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, NULL);

    struct curl_slist *h = NULL;
    if (body) {
        h = add_header(h, "Content-Type", "application/json");
        h = add_header(h, "Accept", "application/json, text/event-stream");
        h = curl_slist_append(h, "Expect:");
    } else {
        h = add_header(h, "Accept", "text/event-stream");
    }
    /* a replayed initialize starts a session: the old id must not go with it */
    if (r->s.id && kind != XF_REINIT)
        h = add_header(h, "Mcp-Session-Id", r->s.id);
    if (r->s.protocol_version && kind != XF_REINIT)
        h = add_header(h, "MCP-Protocol-Version", r->s.protocol_version);
    if (last_event_id)
        h = add_header(h, "Last-Event-ID", last_event_id);
    if (o->token) {
        char auth[1024 + 64];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->token);
        h = curl_slist_append(h, auth);
    }
    for (int i = 0; i < o->n_headers; i++)
        h = curl_slist_append(h, o->headers[i]);
    xf->hdrs = h;
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);

    if (strcmp(method_http, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    } else if (strcmp(method_http, "GET") != 0) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method_http);
    }
    return xf;
}

static void xfer_start(struct http_remote *r, struct xfer *xf)
{
    xf->next = r->xfers;
    if (r->xfers)
        r->xfers->prev = xf;
    r->xfers = xf;
    curl_multi_add_handle(r->multi, xf->easy);
}

static void xfer_free(struct http_remote *r, struct xfer *xf)
{
    if (xf->prev)
        xf->prev->next = xf->next;
    else if (r->xfers == xf)
        r->xfers = xf->next;
    if (xf->next)
        xf->next->prev = xf->prev;
    curl_multi_remove_handle(r->multi, xf->easy);
    curl_easy_cleanup(xf->easy);
    curl_slist_free_all(xf->hdrs);
    sse_parser_free(&xf->sse);
    free(xf->acc.p);
    free(xf->body);
    free(xf->session_hdr);
    if (xf->req && xf->req->xf == xf)
        xf->req->xf = NULL;
    free(xf);
}

/* Sends q's body (again). */
static void post_req(struct http_remote *r, struct req *q)
{
    /* a new POST of a streamed request gets a new stream */
    free(q->stream_id);
    q->stream_id = NULL;
    struct xfer *xf = xfer_new(r, XF_POST, "POST", q->body, q->body_len, NULL);
    if (!xf) {
        req_fail(r, q, "mcp-bridge: out of memory");
        return;
    }
    xf->req = q;
    q->xf = xf;
    q->waiting = 0;
    xfer_start(r, xf);
}

/* Fetches q's next messages with mcpd/poll. The poll waits at most half
 * the response timeout, so a silent poll is never mistaken for a dead one. */
static void poll_req(struct http_remote *r, struct req *q)
{
    q->resume_at = 0;
    long wait_ms = r->o->response_timeout_ms / 2;
    if (wait_ms > 20000)
        wait_ms = 20000;
    char id[48];
    snprintf(id, sizeof id, "mcp-bridge-poll-%u", ++r->poll_count);
    json_t *m = json_pack("{s:s, s:s, s:s, s:{s:s, s:I, s:i, s:i}}", "jsonrpc", "2.0", "id", id,
                          "method", "mcpd/poll", "params", "stream_id", q->stream_id, "from_seq",
                          (json_int_t)q->next_seq, "wait_ms", (int)wait_ms, "max_chunks", 100);
    char *body = m ? json_dumps(m, JSON_COMPACT) : NULL;
    json_decref(m);
    struct xfer *xf = body ? xfer_new(r, XF_POLL, "POST", body, strlen(body), NULL) : NULL;
    if (!xf) {
        free(body);
        req_fail(r, q, "mcp-bridge: out of memory");
        return;
    }
    xf->body = body;
    snprintf(xf->poll_key, sizeof xf->poll_key, "\"%s\"", id);
    snprintf(xf->method, sizeof xf->method, "mcpd/poll");
    xf->req = q;
    q->xf = xf;
    xfer_start(r, xf);
}

static void resume_req(struct http_remote *r, struct req *q)
{
    if (q->stream_id) {
        poll_req(r, q);
        return;
    }
    q->resume_at = 0;
    struct xfer *xf = xfer_new(r, XF_RESUME, "GET", NULL, 0, q->last_event_id);
    if (!xf) {
        req_fail(r, q, "mcp-bridge: out of memory");
        return;
    }
    xf->req = q;
    q->xf = xf;
    xfer_start(r, xf);
}

static struct xfer *post_other(struct http_remote *r, enum xfer_kind kind, const char *body,
                               size_t len, const char *method)
{
    char *copy = dup_n(body, len);
    struct xfer *xf = copy ? xfer_new(r, kind, "POST", copy, len, NULL) : NULL;
    if (!xf) {
        free(copy);
        bridge_log(BLOG_ERROR, "out_of_memory", "dropping %s", method);
        return NULL;
    }
    xf->body = copy;
    snprintf(xf->method, sizeof xf->method, "%s", method);
    xfer_start(r, xf);
    return xf;
}

/* A client notification or response goes out, unless the session is
 * opening (then it waits its turn). */
static void post_message(struct http_remote *r, const char *body, size_t len, const char *method)
{
    if (r->hold) {
        struct parked *p = calloc(1, sizeof *p);
        if (p && (p->body = dup_n(body, len))) {
            p->len = len;
            snprintf(p->method, sizeof p->method, "%s", method);
            if (r->parked_tail)
                r->parked_tail->next = p;
            else
                r->parked = p;
            r->parked_tail = p;
        } else {
            free(p);
            bridge_log(BLOG_ERROR, "out_of_memory", "dropping %s", method);
        }
        return;
    }
    struct xfer *xf = post_other(r, XF_POST, body, len, method);
    if (xf && strcmp(method, "notifications/initialized") == 0) {
        xf->opening = 1;
        r->hold++;
    }
}

/* The session is open (or re-opened): what waited goes out, notifications
 * first, in the order the client sent them. */
static void release_waiting(struct http_remote *r)
{
    while (r->parked && !r->hold) {
        struct parked *p = r->parked;
        r->parked = p->next;
        if (!r->parked)
            r->parked_tail = NULL;
        post_message(r, p->body, p->len, p->method);
        free(p->body);
        free(p);
    }
    if (r->hold || r->s.state == SESSION_REINIT)
        return;
    for (struct req *q = r->reqs; q; q = q->next) {
        if (q->waiting && !q->answered)
            post_req(r, q);
        q->waiting = 0;
    }
}

static void open_listen(struct http_remote *r)
{
    r->listen_at = 0;
    for (struct xfer *xf = r->xfers; xf; xf = xf->next) {
        if (xf->kind == XF_LISTEN)
            return;
    }
    struct xfer *xf = xfer_new(r, XF_LISTEN, "GET", NULL, 0, r->listen_last_id);
    if (xf)
        xfer_start(r, xf);
}

/* ------------------------------------------------------ re-initialize */

static void start_reinit(struct http_remote *r)
{
    char *body = session_replay_initialize(&r->s, r->reinit_key, sizeof r->reinit_key);
    if (!body) {
        bridge_log(BLOG_ERROR, "reinit_impossible", "the client's initialize was not seen");
        return;
    }
    bridge_log(BLOG_INFO, "session_lost",
               "the server no longer knows the session; "
               "re-initializing");
    r->s.state = SESSION_REINIT;
    r->listen_wanted = 0;
    r->listen_at = 0;
    free(r->listen_last_id);
    r->listen_last_id = NULL;
    post_other(r, XF_REINIT, body, strlen(body), "initialize");
    free(body);
}

/* Re-initialization ended: send the parked requests (again), or fail them. */
static void end_reinit(struct http_remote *r, const char *failure)
{
    /* after a failure the old session id stays: the next 404 tries again */
    r->s.state = SESSION_READY;
    if (!failure) {
        release_waiting(r);
        r->listen_wanted = 1;
        open_listen(r);
        return;
    }
    for (struct req *q = r->reqs, *next; q; q = next) {
        next = q->next;
        if (!q->waiting)
            continue;
        q->waiting = 0;
        req_fail(r, q, failure);
        if (!q->xf)
            req_free(r, q);
    }
}

/* A request met a 404 for its session. */
static void session_gone(struct http_remote *r, struct req *q, unsigned generation)
{
    if (q->retried) {
        req_fail(r, q,
                 "mcp-bridge: the server lost the session again right after the bridge "
                 "re-initialized it; it may be restarting in a loop (check its logs)");
        return;
    }
    q->retried = 1;
    q->waiting = 1;
    if (r->s.state == SESSION_REINIT)
        return;
    if (generation != r->s.generation) {
        end_reinit(r, NULL); /* already re-initialized since: just send again */
        return;
    }
    start_reinit(r);
}

/* --------------------------------------------------------- completion */

static void describe_failure(struct http_remote *r, struct xfer *xf, CURLcode cc, char *msg)
{
    if (xf->timed_out)
        remote_error_silent(msg, MSG_CAP, r->host, r->o->response_timeout_ms, xf->headers_done);
    else if (xf->too_big)
        snprintf(msg, MSG_CAP, "mcp-bridge: %s sent a message larger than %u bytes", r->host,
                 MAX_BODY);
    else if (cc == CURLE_OK && xf->status / 100 == 2)
        snprintf(msg, MSG_CAP, "mcp-bridge: %s closed the response stream before answering",
                 r->host);
    else if (cc != CURLE_OK)
        remote_error_curl(msg, MSG_CAP, r->host, cc, xf->errbuf, r->o->connect_timeout_ms);
    else
        remote_error_status(msg, MSG_CAP, r->host, xf->status, xf->acc.p);
}

/* An error body that is the JSON-RPC answer to q: relay it. */
static int relay_error_body(struct http_remote *r, struct xfer *xf)
{
    if (!xf->acc.p)
        return 0;
    json_t *m = json_loadb(xf->acc.p, xf->acc.len, 0, NULL);
    int ok = m && rpc_classify(m) == RPC_RESPONSE;
    if (ok)
        incoming_one(r, xf, m, NULL, 0);
    json_decref(m);
    return ok;
}

/* The request's stream ended before its response: resume it, or fail. */
static void stream_dropped(struct http_remote *r, struct req *q, struct xfer *xf, CURLcode cc)
{
    int64_t now = clock_mono_ms();
    char msg[MSG_CAP];
    if (!q->last_event_id && !q->stream_id) {
        char cause[MSG_CAP];
        describe_failure(r, xf, cc, cause);
        snprintf(msg, sizeof msg,
                 "mcp-bridge: %s closed the response stream before answering, without event "
                 "ids to resume it; the request may or may not have run (%.300s)",
                 r->host, cause + strlen("mcp-bridge: "));
        req_fail(r, q, msg);
        return;
    }
    if (!q->drop_deadline)
        q->drop_deadline = now + r->o->response_timeout_ms;
    if (now >= q->drop_deadline) {
        describe_failure(r, xf, cc, msg);
        char full[MSG_CAP + 512];
        snprintf(full, sizeof full,
                 "mcp-bridge: the response stream from %s dropped and could not be resumed "
                 "within %ld ms (last: %.400s)",
                 r->host, r->o->response_timeout_ms, msg + strlen("mcp-bridge: "));
        req_fail(r, q, full);
        return;
    }
    if (q->retry_ms < 0)
        q->retry_ms = xf->sse.retry_ms;
    q->resume_at = now + backoff_ms(q->resume_attempts++, q->retry_ms);
    bridge_log(BLOG_INFO, "stream_dropped", "%s id=%s: resuming after %s", q->method, q->key,
               q->stream_id ? "a failed poll" : q->last_event_id);
}

static void done_request(struct http_remote *r, struct xfer *xf, CURLcode cc)
{
    struct req *q = xf->req;
    long st = xf->status;
    char msg[MSG_CAP];
    if (q->answered)
        return;
    if (cc == CURLE_OK && !xf->timed_out && st / 100 == 2 && xf->is_json && xf->acc.p) {
        if (incoming_text(r, xf, xf->acc.p, xf->acc.len) < 0) {
            snprintf(msg, sizeof msg,
                     "mcp-bridge: %s answered with a body that is not JSON: is the URL an MCP "
                     "endpoint?",
                     r->host);
            req_fail(r, q, msg);
        }
    }
    if (q->answered)
        return;
    if (q->stream_id && (xf->kind == XF_POST || xf->kind == XF_POLL) && cc == CURLE_OK &&
        !xf->timed_out && st / 100 == 2) {
        /* a streamed request: its handle, or a poll that brought what there was */
        if (xf->poll_ended)
            req_fail(r, q, "mcp-bridge: the request's stream ended without a response");
        else
            poll_req(r, q);
        return;
    }
    if (xf->kind == XF_POLL && st != 404 && (cc != CURLE_OK || xf->timed_out || st >= 500)) {
        stream_dropped(r, q, xf, cc); /* the server is away: poll again later */
        return;
    }
    if (cc == CURLE_OK && !xf->timed_out && st / 100 == 2 && xf->is_json) {
        req_fail(r, q, "mcp-bridge: the server's JSON reply did not answer this request");
        return;
    }
    if (st == 404 && r->s.id && !q->is_initialize && !xf->timed_out) {
        /* the session died (for a resume: while the stream was down) */
        session_gone(r, q, xf->generation);
        return;
    }
    if (xf->kind == XF_RESUME && (st == 405 || st == 400)) {
        snprintf(msg, sizeof msg,
                 "mcp-bridge: the response stream from %s dropped and the server cannot "
                 "resume it (HTTP %ld to GET with Last-Event-ID)",
                 r->host, st);
        req_fail(r, q, msg);
        return;
    }
    if (st / 100 == 2 && xf->is_sse && !xf->too_big) {
        stream_dropped(r, q, xf, cc);
        return;
    }
    if (xf->timed_out && xf->headers_done && xf->is_sse) {
        stream_dropped(r, q, xf, cc);
        return;
    }
    if (xf->kind == XF_RESUME && (cc != CURLE_OK || st >= 500) && !xf->timed_out) {
        stream_dropped(r, q, xf, cc); /* the server is restarting: keep trying */
        return;
    }
    if (cc == CURLE_OK && !xf->timed_out && st / 100 == 2) {
        snprintf(msg, sizeof msg,
                 st == 202 ? "mcp-bridge: %s accepted the request (HTTP 202) but will not "
                             "answer it"
                           : "mcp-bridge: %s answered with a body that is neither JSON nor an "
                             "event stream: is the URL an MCP endpoint?",
                 r->host);
        req_fail(r, q, msg);
        return;
    }
    if (cc == CURLE_OK && !xf->timed_out && relay_error_body(r, xf) && q->answered)
        return;
    describe_failure(r, xf, cc, msg);
    req_fail(r, q, msg);
}

static void done_other(struct http_remote *r, struct xfer *xf, CURLcode cc)
{
    char msg[MSG_CAP];
    int ok = cc == CURLE_OK && !xf->timed_out && xf->status / 100 == 2;
    switch (xf->kind) {
    case XF_POST:
        if (ok) {
            if (xf->is_json && xf->acc.p)
                incoming_text(r, xf, xf->acc.p, xf->acc.len);
            if (strcmp(xf->method, "notifications/initialized") == 0) {
                r->listen_wanted = 1;
                open_listen(r);
            }
            return;
        }
        if (xf->status == 404 && r->s.id && xf->generation == r->s.generation &&
            r->s.state == SESSION_READY)
            start_reinit(r);
        describe_failure(r, xf, cc, msg);
        bridge_log(BLOG_WARN, "notification_failed", "%s: %s", xf->method, msg);
        return;
    case XF_LISTEN:
        if (r->stopping)
            return;
        if (xf->status == 405 || xf->status == 404 || xf->status == 400 ||
            (xf->status / 100 == 2 && !xf->is_sse)) {
            bridge_log(BLOG_DEBUG, "no_listen_stream", "the server has no GET stream (HTTP %ld)",
                       xf->status);
            r->listen_wanted = 0;
            return;
        }
        if (!r->listen_wanted || xf->generation != r->s.generation)
            return;
        if (xf->status / 100 == 2 && xf->got_event)
            r->listen_attempts = 0;
        r->listen_at = clock_mono_ms() + backoff_ms(r->listen_attempts++, xf->sse.retry_ms);
        return;
    case XF_REINIT:
        if (ok && xf->is_json && xf->acc.p)
            incoming_text(r, xf, xf->acc.p, xf->acc.len);
        if (ok && r->s.state == SESSION_REINIT && r->s.generation != xf->generation) {
            if (r->s.initialized_body)
                post_other(r, XF_REINIT_OK, r->s.initialized_body, strlen(r->s.initialized_body),
                           "notifications/initialized");
            else
                end_reinit(r, NULL);
            return;
        }
        describe_failure(r, xf, cc, msg);
        if (ok)
            snprintf(msg, sizeof msg,
                     "mcp-bridge: the session with %s was lost and the server refused to "
                     "start a new one",
                     r->host);
        end_reinit(r, msg);
        return;
    case XF_REINIT_OK:
        if (!ok) {
            describe_failure(r, xf, cc, msg);
            bridge_log(BLOG_WARN, "notification_failed", "notifications/initialized: %s", msg);
        }
        end_reinit(r, NULL);
        return;
    case XF_RESUME:
    case XF_POLL:
        return; /* they always serve a request: done_request */
    }
}

static void xfer_done(struct http_remote *r, struct xfer *xf, CURLcode cc)
{
    struct req *q = xf->req;
    int opening = xf->opening;
    if (q)
        done_request(r, xf, cc);
    else
        done_other(r, xf, cc);
    xfer_free(r, xf);
    if (opening && --r->hold == 0)
        release_waiting(r);
    if (q && q->answered && !q->xf && !q->resume_at)
        req_free(r, q);
}

/* ----------------------------------------------------------- public */

struct http_remote *http_remote_new(const struct bridge_options *o, struct remote_sink sink)
{
    struct http_remote *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->o = o;
    r->sink = sink;
    r->multi = curl_multi_init();
    if (!r->multi) {
        free(r);
        return NULL;
    }
    curl_multi_setopt(r->multi, CURLMOPT_MAXCONNECTS, 64L);
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL;
    if (u && curl_url_set(u, CURLUPART_URL, o->url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
        curl_url_get(u, CURLUPART_PORT, &port, 0);
        snprintf(r->host, sizeof r->host, "%s%s%s", host, port ? ":" : "", port ? port : "");
    } else {
        snprintf(r->host, sizeof r->host, "the server");
    }
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    srandom((unsigned)clock_mono_ms() ^ (unsigned)getpid());
    return r;
}

void http_remote_free(struct http_remote *r)
{
    if (!r)
        return;
    while (r->xfers)
        xfer_free(r, r->xfers);
    while (r->reqs)
        req_free(r, r->reqs);
    while (r->parked) {
        struct parked *p = r->parked;
        r->parked = p->next;
        free(p->body);
        free(p);
    }
    curl_multi_cleanup(r->multi);
    free(r->listen_last_id);
    session_free(&r->s);
    free(r);
}

CURLM *http_remote_multi(struct http_remote *r)
{
    return r->multi;
}

int http_remote_pending(struct http_remote *r)
{
    return r->n_pending;
}

/* The client gave up on a request: it expects no reply any more. */
static void forget_cancelled(struct http_remote *r, const json_t *id)
{
    char *key = id ? rpc_id_key(id) : NULL;
    struct req *q = key ? req_find(r, key) : NULL;
    free(key);
    if (q) {
        q->answered = 1;
        r->n_pending--;
        q->resume_at = 0;
    }
}

/* The request with "stream": true in its params (compact JSON, length in
 * *len), or NULL when out of memory. */
static char *with_stream_flag(const json_t *m, size_t *len)
{
    json_t *copy = json_deep_copy(m);
    json_t *params = json_object_get(copy, "params");
    if (copy && !json_is_object(params)) {
        params = json_object();
        json_object_set_new(copy, "params", params);
    }
    char *s = NULL;
    if (params && json_object_set_new(params, "stream", json_true()) == 0)
        s = json_dumps(copy, JSON_COMPACT);
    json_decref(copy);
    if (s)
        *len = strlen(s);
    return s;
}

void http_remote_send(struct http_remote *r, const char *body, size_t len, json_t *m)
{
    enum rpc_kind k = rpc_classify(m);
    const char *method = json_string_value(json_object_get(m, "method"));
    if (k != RPC_REQUEST) {
        if (method && strcmp(method, "notifications/initialized") == 0)
            session_remember_initialized(&r->s, body, len);
        if (method && strcmp(method, "notifications/cancelled") == 0)
            forget_cancelled(r, json_object_get(json_object_get(m, "params"), "requestId"));
        if (r->s.state == SESSION_REINIT)
            return; /* it was meant for the old session: the new one would not know it */
        post_message(r, body, len, method ? method : "response");
        return;
    }
    /* --transport poll: every request but initialize asks for a handle */
    int streamed = r->o->transport == TRANSPORT_POLL && strcmp(method, "initialize") != 0;
    char *own_body = streamed ? with_stream_flag(m, &len) : dup_n(body, len);
    struct req *q = own_body ? calloc(1, sizeof *q) : NULL;
    if (!q || !(q->key = rpc_id_key(json_object_get(m, "id")))) {
        free(own_body);
        free(q);
        char *reply = rpc_error_reply(json_object_get(m, "id"), RPC_INTERNAL_ERROR,
                                      "mcp-bridge: out of memory");
        if (reply)
            emit(r, reply, strlen(reply));
        free(reply);
        return;
    }
    q->body = own_body;
    q->body_len = len;
    q->streamed = streamed;
    q->id = json_incref(json_object_get(m, "id"));
    q->retry_ms = -1;
    snprintf(q->method, sizeof q->method, "%s", method);
    q->is_initialize = strcmp(method, "initialize") == 0;
    q->prev = r->reqs_tail;
    if (r->reqs_tail)
        r->reqs_tail->next = q;
    else
        r->reqs = q;
    r->reqs_tail = q;
    r->n_pending++;
    if (q->is_initialize) {
        session_remember_initialize(&r->s, body, len);
        r->s.state = SESSION_NONE;
        post_req(r, q);
        if (q->xf) {
            q->xf->opening = 1;
            r->hold++;
        }
        return;
    }
    if (r->hold || r->s.state == SESSION_REINIT) {
        q->waiting = 1;
        return;
    }
    post_req(r, q);
}

void http_remote_run(struct http_remote *r)
{
    int running;
    curl_multi_perform(r->multi, &running);
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(r->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct xfer *xf = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&xf);
        CURLcode cc = msg->data.result;
        if (!xf->status)
            curl_easy_getinfo(xf->easy, CURLINFO_RESPONSE_CODE, &xf->status);
        xfer_done(r, xf, cc);
    }
    /* silent servers: our own deadlines (curl has no time-to-first-byte) */
    int64_t now = clock_mono_ms();
    long limit = r->o->response_timeout_ms;
    for (struct xfer *xf = r->xfers, *next; xf; xf = next) {
        next = xf->next;
        if (xf->kind == XF_LISTEN && xf->headers_done)
            continue; /* idle by nature; TCP keepalive watches it */
        if (now - xf->last_activity < limit)
            continue;
        bridge_log(BLOG_DEBUG, "transfer_timeout", "no bytes for %ld ms", limit);
        xf->timed_out = 1;
        curl_multi_remove_handle(r->multi, xf->easy);
        xfer_done(r, xf, CURLE_OPERATION_TIMEDOUT);
    }
    /* scheduled resumes and reconnects */
    for (struct req *q = r->reqs, *next; q; q = next) {
        next = q->next;
        if (q->resume_at && now >= q->resume_at && !q->answered)
            resume_req(r, q);
        else if (q->answered && !q->xf)
            req_free(r, q);
    }
    if (r->listen_wanted && r->listen_at && now >= r->listen_at && !r->stopping)
        open_listen(r);
}

long http_remote_timeout_ms(struct http_remote *r)
{
    int64_t now = clock_mono_ms(), next = now + 1000;
    for (struct req *q = r->reqs; q; q = q->next) {
        if (q->resume_at && q->resume_at < next)
            next = q->resume_at;
    }
    if (r->listen_at && r->listen_at < next)
        next = r->listen_at;
    long curl_ms = -1;
    curl_multi_timeout(r->multi, &curl_ms);
    long ms = (long)(next - now);
    if (curl_ms >= 0 && curl_ms < ms)
        ms = curl_ms;
    return ms < 0 ? 0 : ms;
}

void http_remote_shutdown(struct http_remote *r, const char *why)
{
    r->stopping = 1;
    for (struct req *q = r->reqs; q; q = q->next)
        req_fail(r, q, why);
    while (r->xfers)
        xfer_free(r, r->xfers);
    if (!r->s.id)
        return;
    /* end the session on the server: it frees what it holds for us */
    struct xfer *xf = xfer_new(r, XF_POST, "DELETE", NULL, 0, NULL);
    if (!xf)
        return;
    curl_easy_setopt(xf->easy, CURLOPT_TIMEOUT_MS, (long)DELETE_TIMEOUT_MS);
    CURLcode cc = curl_easy_perform(xf->easy);
    curl_easy_getinfo(xf->easy, CURLINFO_RESPONSE_CODE, &xf->status);
    bridge_log(BLOG_DEBUG, "session_deleted", "DELETE: %s, HTTP %ld", curl_easy_strerror(cc),
               xf->status);
    curl_easy_cleanup(xf->easy);
    curl_slist_free_all(xf->hdrs);
    sse_parser_free(&xf->sse);
    free(xf->acc.p);
    free(xf);
}
