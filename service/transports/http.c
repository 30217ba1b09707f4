/* http — see http.h. */
#include "http.h"
#include "http_shared.h"
#include "legacy_sse.h"
#include "linger.h"
#include "auth.h"
#include "body_gate.h"
#include "request_host.h"
#include "conn_guard.h"
#include "forwarded.h"
#include "clock.h"
#include "core.h"
#include "jsonrpc.h"
#include "log.h"
#include "media_type.h"
#include "origin.h"
#include "refusal.h"
#include "request_log.h"
#include "protocol.h"
#include "sse.h"
#include "sse_follow.h"
#include "follow.h"
#include "workers.h"
#include "ws.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ulfius.h>
#include <unistd.h>

/* How long a POST in JSON mode waits for its response before giving up and
 * telling the client to resume the stream with GET. */
#define JSON_WAIT_MS 300000
/* In auto mode: a reply that is complete within this time is sent as JSON;
 * anything slower, or anything preceded by other messages, becomes SSE. */
#define AUTO_WAIT_MS 30
#define SSE_BLOCK 4096
/* A GET that finds the session's GET slot taken probes the holder and waits
 * this long for it to turn out dead before answering 409. */
#define HTTP_PROBE_WAIT_MS 1000
#define HTTP_PROBE_GAP_MS 50
#define MHD_STACK (256 * 1024)
#define HTTP_TRANSPORT "http"

/* How far http_start got; http_unwind undoes it. */
enum http_stage {
    HTTP_DOWN,      /* nothing runs (a failed start may have parsed `trusted`) */
    HTTP_GUARDED,   /* conn_guard's watchdog runs */
    HTTP_LINGERING, /* and linger's thread */
    HTTP_ROUTED,    /* and the ulfius instance holds the endpoints (and legacy_sse
                       its reservations) */
    HTTP_LISTENING, /* and libmicrohttpd serves */
    HTTP_SERVING,   /* through the request host: http_start succeeded */
};

static struct {
    struct _u_instance inst;
    struct http_config cfg;
    struct sockaddr_storage addr;
    struct forwarded *trusted;
    enum http_stage stage;
    _Atomic int streams_open; /* http_stream_response */
} http;

/* How long shutdown waits for the open event streams to write what their
 * readers took (the readers stop where they would wait, stream.h). */
#define DRAIN_MS 2000

/* ---- responses ---- */

static void send_json(struct _u_response *resp, unsigned status, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    ulfius_set_string_body_response(resp, status, text ? text : "{}");
    u_map_put(resp->map_header, "Content-Type", "application/json");
    free(text);
}

static int fail(struct _u_response *resp, unsigned status, int code, const char *message)
{
    request_log_error(code);
    char *text = refusal_body(code, message);
    ulfius_set_string_body_response(resp, status, text ? text : "{}");
    u_map_put(resp->map_header, "Content-Type", "application/json");
    free(text);
    return U_CALLBACK_COMPLETE;
}

int http_stream_response(struct _u_response *resp,
                         ssize_t (*write)(void *, uint64_t, char *, size_t),
                         void (*free_ud)(void *), void *ud, size_t block, int *counted)
{
    int rc =
        ulfius_set_stream_response(resp, 200, write, free_ud, U_STREAM_SIZE_UNKNOWN, block, ud);
    if (rc == U_OK) {
        *counted = 1;
        http.streams_open++;
    }
    return rc;
}

void http_stream_closed(int *counted)
{
    if (*counted)
        http.streams_open--;
    *counted = 0;
}

/* ---- request checks ---- */

/* A header field's value, its trailing whitespace cut (request_host.h).
 * Outside the request host (no request runs on this thread), ulfius's copy
 * as it came. */
static const char *header(const struct _u_request *req, const char *name)
{
    struct host_req *g = request_host_current();
    return g ? request_host_header(g, name) : u_map_get_case(req->map_header, name);
}

static int accepts(const struct _u_request *req, const char *type)
{
    return media_type_accepts(header(req, "Accept"), type);
}

/* Host and Origin first (DNS rebinding), then the bearer token: fills
 * *grant (principal "" without authentication). */
static int admitted(const struct _u_request *req, struct _u_response *resp,
                    struct auth_grant *grant)
{
    const char *forbidden =
        origin_refusal(http.cfg.origins, header(req, "Host"), header(req, "Origin"));
    if (forbidden) {
        fail(resp, 403, JSONRPC_SERVER_ERROR, forbidden);
        return 0;
    }
    /* At once, not after a wait for a database that is down: the client
     * (or the proxy in front) retries, and maybe another replica. */
    if (core_state() == CORE_STORE_AWAY) {
        u_map_put(resp->map_header, "Retry-After", "1");
        fail(resp, 503, JSONRPC_SERVER_ERROR,
             "Service Unavailable: the database cannot be reached; retry shortly");
        return 0;
    }
    const char *why;
    char client[FORWARDED_ADDR_MAX];
    request_host_client(request_host_current(), client);
    struct auth_request ar = {.dpop = header(req, "DPoP"),
                              .method = req->http_verb,
                              .path = req->url_path,
                              .resource_path = "/mcp",
                              .client = client};
    int rc = auth_check(header(req, "Authorization"), NULL, &ar, grant, &why);
    request_log_principal(grant->principal);
    if (rc != 0) {
        char challenge[768];
        int status = auth_challenge(grant, why, challenge, sizeof challenge);
        u_map_put(resp->map_header, "WWW-Authenticate", challenge);
        if (status == 503)
            u_map_put(resp->map_header, "Retry-After", "1");
        fail(resp, (unsigned)status, JSONRPC_SERVER_ERROR, why);
        return 0;
    }
    return 1;
}

/* A request that waited for its reply while its token was revoked or
 * expired: answered as a request with that token now would be. */
static int token_ended(struct _u_response *resp, const char *why)
{
    char msg[80], challenge[768];
    snprintf(msg, sizeof msg, "Unauthorized: %s while the request waited", why);
    struct auth_grant ended = {.refusal = AUTH_INVALID_TOKEN};
    auth_challenge(&ended, msg, challenge, sizeof challenge);
    u_map_put(resp->map_header, "WWW-Authenticate", challenge);
    return fail(resp, 401, JSONRPC_SERVER_ERROR, msg);
}

static int version_ok(const struct _u_request *req, struct _u_response *resp)
{
    const char *v = header(req, "MCP-Protocol-Version");
    if (v && !protocol_supported(v) && !protocol_is_stateless(v)) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "Bad Request: Unsupported protocol version %.40s (supported: "
                 "2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28)",
                 v);
        fail(resp, 400, JSONRPC_SERVER_ERROR, msg);
        return 0;
    }
    return 1;
}

/* Answers with a refusal from the core (takes its error). */
static int refused(struct _u_response *resp, struct core_reply *r)
{
    if (r->reason == CORE_AT_CAPACITY)
        u_map_put(resp->map_header, "Retry-After", REFUSAL_RETRY_AFTER_S);
    else if (r->reason == CORE_UNAVAILABLE)
        u_map_put(resp->map_header, "Retry-After", "1");
    request_log_error(refusal_code(r->error));
    send_json(resp, refusal_status(r->reason), r->error);
    r->error = NULL;
    core_reply_clear(r);
    return U_CALLBACK_COMPLETE;
}

/* Who asks, as the core sees it. */
static struct core_caller caller_of(const struct _u_request *req, const char *principal)
{
    const char *sid = header(req, "Mcp-Session-Id");
    if (sid && *sid)
        request_log_session(sid);
    return (struct core_caller){.principal = principal,
                                .transport = HTTP_TRANSPORT,
                                .session_id = sid && *sid ? sid : NULL,
                                .session_required =
                                    "Bad Request: Mcp-Session-Id header is required"};
}

/* ---- SSE writer ---- */

/* Headers that keep proxies from buffering or transforming the stream. */
static void sse_headers(struct _u_response *resp)
{
    u_map_put(resp->map_header, "Content-Type", "text/event-stream");
    u_map_put(resp->map_header, "Cache-Control", "no-cache, no-transform");
    u_map_put(resp->map_header, "X-Accel-Buffering", "no");
}

struct reader {
    struct sse_follow f;
    struct host_req *host; /* the request: the reader's waits run on its fiber */
    int primed;
    int counted; /* http_stream_response */
};

/* The first event: for a client that polls, an empty event whose id names
 * the stream, so it can come back to it; else a comment. */
static void prime(struct sse_follow *f)
{
    /* The priming id names this stream: it must be in the store before the
     * client can hold it, or a crash would leave it naming nothing. A look
     * on a copy (nothing moves) stores it if nothing is there yet. */
    int stored = 0;
    if (f->polling) {
        struct follow look = f->follow;
        struct stream_chunk ch;
        follow_read(&look, 0, &ch);
        stored = look.stored;
    }
    if (stored)
        sse_event(&f->buf, f->follow.event_id, http.cfg.retry_ms, "", 0);
    else
        sse_comment(&f->buf, "stream open");
}

/* The reader's lead (sse_follow.h): the priming event, in the block of
 * the first messages. */
static int priming(void *ud)
{
    return !((struct reader *)ud)->primed;
}

static void prime_reader(void *ud)
{
    struct reader *r = ud;
    prime(&r->f);
    r->primed = 1;
}

static const struct sse_lead reader_lead = {priming, prime_reader, 1};

static ssize_t sse_write(void *ud, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct reader *r = ud;
    return sse_follow_write(&r->f, r->host, out, max);
}

static void sse_release(void *ud)
{
    struct reader *r = ud;
    http_stream_closed(&r->counted);
    follow_end(&r->f.follow); /* a stateless request's session ends with it */
    sse_buf_free(&r->f.buf);
    free(r);
}

/* Answers with an SSE stream of what fl follows (for as long as its token
 * is valid). Takes fl over. */
static int start_sse(struct _u_response *resp, struct follow *fl)
{
    struct reader *r = calloc(1, sizeof *r);
    if (!r) {
        follow_end(fl);
        return fail(resp, 503, JSONRPC_INTERNAL_ERROR, "Out of memory");
    }
    r->host = request_host_current();
    r->f.follow = *fl;
    memset(fl, 0, sizeof *fl);
    r->f.polling = r->f.follow.polling;
    r->f.lead = &reader_lead;
    r->f.lead_ud = r;
    if (r->f.polling && http.cfg.sse_poll_ms > 0)
        r->f.poll_deadline = clock_mono_ms() + http.cfg.sse_poll_ms;
    if (http_stream_response(resp, sse_write, sse_release, r, SSE_BLOCK, &r->counted) != U_OK) {
        sse_release(r);
        return fail(resp, 503, JSONRPC_INTERNAL_ERROR, "Could not start the event stream");
    }
    sse_headers(resp);
    return U_CALLBACK_COMPLETE;
}

/* An SSE reply that is already whole (a quick handler's, committed before
 * it returned): the events a reader would write, as one body of known
 * length. Streamed, the same reply costs a write for the headers, the
 * priming event, the messages and the end, and a poll before each; this is
 * one write. Returns -1, having answered nothing, when some message is not
 * there yet: the caller streams it. fl does not move: this reads a copy. */
static int send_sse_whole(struct _u_response *resp, const struct follow *fl)
{
    struct sse_follow f = {.follow = *fl, .polling = fl->polling};
    struct stream_chunk ch;
    int rc = 0;
    prime(&f);
    while (rc == 0 && !f.done)
        rc = follow_read(&f.follow, 0, &ch) == FOLLOW_MESSAGE ? sse_follow_take(&f, &ch) : -1;
    if (rc == 0 && ulfius_set_binary_body_response(resp, 200, f.buf.data + f.buf.off,
                                                   f.buf.len - f.buf.off) != U_OK)
        rc = -1;
    if (rc == 0)
        sse_headers(resp);
    sse_buf_free(&f.buf);
    return rc;
}

/* Sends one stored message as the JSON body. */
static int send_chunk_json(struct _u_response *resp, const struct stream_chunk *ch)
{
    /* A capability the client did not declare is a 400 whoever found it
     * missing (2026-07-28): the core up front, or a backend as it ran. */
    static const char missing[] = "-32021";
    int status = 200;
    if (ch->is_end && memmem(ch->msg, ch->len, missing, sizeof missing - 1)) {
        json_t *msg = json_loadb(ch->msg, ch->len, 0, NULL);
        json_t *code = json_object_get(json_object_get(msg, "error"), "code");
        if (json_integer_value(code) == JSONRPC_MISSING_CAPABILITY)
            status = 400;
        json_decref(msg);
    }
    ulfius_set_binary_body_response(resp, (unsigned)status, ch->msg, ch->len);
    u_map_put(resp->map_header, "Content-Type", "application/json");
    return U_CALLBACK_COMPLETE;
}

/* Whether e says a request's stream ended with no (more) response. */
static int reply_ended(enum follow_event e)
{
    return e == FOLLOW_STREAM_ENDED || e == FOLLOW_SESSION_ENDED || e == FOLLOW_STORE_FAILED;
}

/* A request whose stream ended with no response (why: as reply_ended):
 * its session ended under it (404, as for any request of an ended
 * session), its reply could not be stored (503, retry), or the client
 * cancelled it (the spec says to send nothing: an empty 202). */
static int ended_without_reply(struct _u_response *resp, enum follow_event why)
{
    if (why == FOLLOW_SESSION_ENDED)
        return fail(resp, 404, JSONRPC_SESSION_NOT_FOUND, "Session not found");
    if (why == FOLLOW_STORE_FAILED) {
        u_map_put(resp->map_header, "Retry-After", "1");
        return fail(resp, 503, JSONRPC_SERVER_ERROR,
                    "Service Unavailable: the reply could not be stored (the database cannot be "
                    "reached); retry shortly");
    }
    ulfius_set_empty_body_response(resp, 202);
    return U_CALLBACK_COMPLETE;
}

/* The whole answer that a wait for a reply's end came to, as JSON: its
 * token's end (401), the response, or the stream's end without one. -1
 * when e is none of these (the wait ran out, or a message that is not the
 * end). The JSON reply and auto mode's look ahead both answer through it,
 * so a token that ends during either wait gets the same 401. */
static int reply_final(struct _u_response *resp, enum follow_event e, const struct stream_chunk *ch)
{
    const char *ended = sse_follow_token_why(e);
    if (ended)
        return token_ended(resp, ended);
    if (e == FOLLOW_MESSAGE && ch->is_end)
        return send_chunk_json(resp, ch);
    if (reply_ended(e))
        return ended_without_reply(resp, e);
    return -1;
}

/* The reply to a request: JSON when fl reads the response only (the reply
 * mode's, and always for a single-message reply: a poll result, since a
 * poll exists for clients that cannot take streaming responses), else SSE
 * or, in auto mode, JSON when the response is ready at once. A wait for the reply (a long-poll, a
 * JSON reply, auto mode's look ahead) ends with 401 when fl's token is
 * revoked or expires meanwhile. Takes fl over. */
static int reply_stream(struct _u_response *resp, struct follow *fl)
{
    struct stream_chunk ch;
    int rc = -1;
    if (fl->final_only) {
        rc = reply_final(resp, follow_read(fl, clock_mono_ms() + JSON_WAIT_MS, &ch), &ch);
        if (rc == -1)
            rc = fail(resp, 503, JSONRPC_SERVER_ERROR,
                      "The reply is not ready; resume the stream with GET and Last-Event-ID");
    } else if (http.cfg.reply_mode == HTTP_REPLY_AUTO) {
        /* A look ahead on a copy: a poll notice it reads stays for the
         * SSE reader. */
        struct follow look = *fl;
        rc = reply_final(resp, follow_read(&look, clock_mono_ms() + AUTO_WAIT_MS, &ch), &ch);
    }
    if (rc == -1 && send_sse_whole(resp, fl) == 0)
        rc = U_CALLBACK_COMPLETE;
    if (rc == -1)
        return start_sse(resp, fl);
    /* The reply is written: a stateless request's session has served. */
    follow_end(fl);
    return rc;
}

/* Answers a message with the core's reply (cleared). */
static int respond(struct _u_response *resp, struct core_reply *r, const struct auth_grant *grant)
{
    int rc = U_CALLBACK_COMPLETE;
    if (r->kind == CORE_REJECTED)
        return refused(resp, r);
    if (r->kind == CORE_ACCEPTED) {
        ulfius_set_empty_body_response(resp, 202);
    } else if (r->kind == CORE_ANSWERED || r->ack) {
        /* Opted in to long-polling: the handle now, the messages by poll. */
        send_json(resp, 200, r->ack ? r->ack : r->error);
        r->ack = r->error = NULL;
    } else {
        struct follow fl = {0};
        follow_reply(&fl, r, r->single || http.cfg.reply_mode == HTTP_REPLY_JSON);
        /* Waited for or streamed, the reply lasts as long as the token. */
        if (follow_token(&fl, grant, NULL) != 0) {
            follow_end(&fl);
            rc = fail(resp, 503, JSONRPC_INTERNAL_ERROR, "Out of memory");
        } else {
            rc = reply_stream(resp, &fl);
        }
    }
    core_reply_clear(r);
    return rc;
}

/* ---- POST ---- */

/* ---- batches (2025-03-26) ---- */

/* The SSE reply to a batch follows every request's stream at once. Batches
 * exist only in the legacy revision, so rather than teach the stream module
 * to wait on many streams, this writer checks each in turn and sleeps on
 * one for at most BATCH_TICK_MS. */
#define BATCH_TICK_MS 20

struct batch_reader {
    size_t n, left;
    struct follow *follows; /* one a request */
    int *done;
    int64_t last_write;
    struct sse_buf buf;
    struct host_req *host;
    int counted; /* http_stream_response */
};

static void batch_free(void *ud)
{
    struct batch_reader *b = ud;
    http_stream_closed(&b->counted);
    for (size_t i = 0; i < b->n; i++)
        follow_end(&b->follows[i]);
    free(b->follows);
    free(b->done);
    sse_buf_free(&b->buf);
    free(b);
}

/* Takes whatever stream i has ready; 1 if it wrote something. Its token's
 * end (every follow holds the one token) ends the whole reply. */
static int batch_take(struct batch_reader *b, size_t i)
{
    struct stream_chunk ch;
    enum follow_event e = follow_read(&b->follows[i], 0, &ch);
    const char *why = sse_follow_token_why(e);
    if (why) {
        sse_comment(&b->buf, why);
        b->left = 0;
        return 1;
    }
    if (e == FOLLOW_MESSAGE) {
        sse_event(&b->buf, b->follows[i].event_id, -1, ch.msg, ch.len);
        if (ch.is_end) {
            b->done[i] = 1;
            b->left--;
        }
        return 1;
    }
    if (reply_ended(e) || e == FOLLOW_DETACHED) {
        b->done[i] = 1;
        b->left--;
    }
    return 0;
}

/* As an SSE reader's fill (sse_follow.c), for every request of the batch. */
static int batch_fill(void *ud)
{
    struct batch_reader *b = ud;
    for (;;) {
        if (sse_pending(&b->buf))
            return 0;
        if (!b->left)
            return 1;
        int wrote = 0;
        size_t first = b->n;
        for (size_t i = 0; i < b->n && b->left; i++) {
            if (!b->done[i])
                wrote |= batch_take(b, i);
            if (!b->done[i] && first == b->n)
                first = i;
        }
        if (wrote || first == b->n)
            continue;
        if (clock_mono_ms() - b->last_write >= http.cfg.keepalive_ms) {
            sse_comment(&b->buf, "keepalive");
            continue;
        }
        /* A wait on a copy: what it finds, batch_take reads. */
        struct follow look = b->follows[first];
        struct stream_chunk ch;
        follow_read(&look, clock_mono_ms() + BATCH_TICK_MS, &ch);
    }
}

static ssize_t batch_write(void *ud, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct batch_reader *b = ud;
    int verdict;
    if (!request_host_fill(b->host, batch_fill, b, &verdict))
        return 0;
    if (verdict != 0)
        return verdict > 0 ? U_STREAM_END : U_STREAM_ERROR;
    b->last_write = clock_mono_ms();
    return (ssize_t)sse_drain(&b->buf, out, max);
}

/* A batch element's reply: errors and poll handles are answered at once;
 * request streams join the batch's reader. */
struct batch_gather {
    struct batch_reader *b;
    json_t *immediate;
    const struct auth_grant *grant; /* each stream lasts as long as its token */
    int failed;                     /* out of memory for a token's hold */
};

static void batch_each(void *ud, struct core_reply *r)
{
    struct batch_gather *g = ud;
    struct batch_reader *b = g->b;
    if (r->kind == CORE_REJECTED || r->kind == CORE_ANSWERED) {
        json_array_append(g->immediate, r->error);
    } else if (r->kind == CORE_STREAM && r->ack) {
        json_array_append(g->immediate, r->ack); /* the handle is the whole reply */
    } else if (r->kind == CORE_STREAM) {
        follow_reply(&b->follows[b->n], r, http.cfg.reply_mode == HTTP_REPLY_JSON);
        g->failed |= follow_token(&b->follows[b->n++], g->grant, NULL) != 0;
    }
    core_reply_clear(r);
}

/* 2025-03-26 batches: the core takes the requests one by one and answers
 * invalid elements with errors. The replies come back as one JSON array
 * when each is a single message ready at once (or in json reply mode), and
 * otherwise as one SSE stream carrying every request's messages. */
static int post_batch(struct _u_response *resp, const struct core_caller *c, json_t *batch,
                      const struct auth_grant *grant)
{
    size_t n = json_array_size(batch);
    struct batch_reader *b = calloc(1, sizeof *b);
    if (b)
        b->host = request_host_current();
    if (b && n) {
        b->follows = calloc(n, sizeof *b->follows);
        b->done = calloc(n, sizeof *b->done);
    }
    if (!b || (n && (!b->follows || !b->done))) {
        if (b)
            batch_free(b);
        return fail(resp, 503, JSONRPC_INTERNAL_ERROR, "Out of memory");
    }
    struct batch_gather g = {b, json_array(), grant, 0};
    struct core_caller each = *c;
    each.each = batch_each;
    each.each_ud = &g;
    struct core_reply r;
    core_receive(&each, batch, &r);
    if (r.kind == CORE_REJECTED || g.failed) {
        json_decref(g.immediate);
        batch_free(b);
        if (r.kind != CORE_REJECTED)
            return fail(resp, 503, JSONRPC_INTERNAL_ERROR, "Out of memory");
        return refused(resp, &r);
    }
    json_t *errors = g.immediate, *finals = json_array();
    b->left = b->n;
    /* One JSON array when every reply is a single message, ready soon. The
     * streams' finals are kept apart until that is known: an SSE reply
     * reads every stream from its start, with event ids. */
    int as_json = http.cfg.reply_mode != HTTP_REPLY_SSE;
    int64_t deadline =
        clock_mono_ms() + (http.cfg.reply_mode == HTTP_REPLY_JSON ? JSON_WAIT_MS : AUTO_WAIT_MS);
    /* As a single request's JSON reply, the wait ends with its token. */
    const char *ended = NULL;
    for (size_t i = 0; i < b->n && as_json && !ended; i++) {
        /* The SSE reply, if it comes to that, reads from the start: a copy
         * waits here. */
        struct follow look = b->follows[i];
        struct stream_chunk ch;
        enum follow_event e = follow_read(&look, deadline, &ch);
        if ((ended = sse_follow_token_why(e)))
            break;
        if (e == FOLLOW_MESSAGE && ch.is_end)
            json_array_append_new(finals, json_loadb(ch.msg, ch.len, JSON_ALLOW_NUL, NULL));
        else if (!reply_ended(e))
            as_json = http.cfg.reply_mode == HTTP_REPLY_JSON;
    }
    if (ended) {
        json_decref(errors);
        json_decref(finals);
        batch_free(b);
        return token_ended(resp, ended);
    }
    if (as_json || b->n == 0)
        json_array_extend(errors, finals);
    json_decref(finals);
    if (as_json || b->n == 0) {
        batch_free(b);
        if (json_array_size(errors) == 0) {
            json_decref(errors);
            ulfius_set_empty_body_response(resp, 202);
            return U_CALLBACK_COMPLETE;
        }
        send_json(resp, 200, errors);
        return U_CALLBACK_COMPLETE;
    }
    /* SSE: the immediate answers first, then every stream. */
    size_t i;
    json_t *e;
    json_array_foreach(errors, i, e)
    {
        char *text = jsonrpc_dump(e, NULL);
        if (text)
            sse_event(&b->buf, NULL, -1, text, strlen(text));
        free(text);
    }
    json_decref(errors);
    if (sse_pending(&b->buf) == 0)
        sse_comment(&b->buf, "batch");
    if (http_stream_response(resp, batch_write, batch_free, b, SSE_BLOCK, &b->counted) != U_OK) {
        batch_free(b);
        return fail(resp, 503, JSONRPC_INTERNAL_ERROR, "Could not start the event stream");
    }
    sse_headers(resp);
    return U_CALLBACK_COMPLETE;
}

/* core_caller.header over a request (ud). */
static const char *request_header(void *ud, const char *name)
{
    return header(ud, name);
}

/* A request of a stateless revision: named so by MCP-Protocol-Version, or,
 * without the header and a session, by its params._meta. */
static int stateless(const struct _u_request *req, json_t *root)
{
    const char *v = header(req, "MCP-Protocol-Version");
    if (v && protocol_is_stateless(v))
        return 1;
    if (header(req, "Mcp-Session-Id"))
        return 0;
    /* A revision in _meta (even one mcpd does not serve: the core answers
     * with the versions it does) marks a stateless client. */
    json_t *meta = json_object_get(json_object_get(root, "params"), "_meta");
    return json_object_get(meta, PROTOCOL_META_VERSION) != NULL ||
           json_object_get(meta, PROTOCOL_META_CAPABILITIES) != NULL;
}

static int on_post(const struct _u_request *req, struct _u_response *resp, void *ud)
{
    (void)ud;
    struct auth_grant grant;
    if (!admitted(req, resp, &grant))
        return U_CALLBACK_COMPLETE;
    if (!accepts(req, "application/json") || !accepts(req, "text/event-stream"))
        return fail(resp, 406, JSONRPC_SERVER_ERROR,
                    "Not Acceptable: Accept must list application/json and text/event-stream");
    if (!media_type_is(header(req, "Content-Type"), "application/json"))
        return fail(resp, 415, JSONRPC_SERVER_ERROR,
                    "Unsupported Media Type: Content-Type must be application/json");
    /* Bodies over max_body never get here: body_gate refused them. */
    struct jsonrpc_error err;
    json_t *root = req->binary_body_length
                       ? jsonrpc_parse(req->binary_body, req->binary_body_length, &err)
                       : NULL;
    if (!root) {
        if (!req->binary_body_length)
            return fail(resp, 400, JSONRPC_PARSE_ERROR, "Parse error: empty body");
        return fail(resp, 400, err.code, err.message);
    }
    struct core_caller c = caller_of(req, grant.principal);
    c.stateless = stateless(req, root);
    /* A stateless request's revision is checked by the core, against the
     * versions it serves, with the error 2026-07-28 defines. */
    if (!c.stateless && !version_ok(req, resp)) {
        json_decref(root);
        return U_CALLBACK_COMPLETE;
    }
    /* A stateless request's Mcp-* headers must agree with its body. */
    c.header = request_header;
    c.header_ud = (void *)req;
    int rc;
    if (json_is_array(root)) {
        request_log_mcp("batch", NULL);
        rc = post_batch(resp, &c, root, &grant);
    } else {
        const char *method = json_string_value(json_object_get(root, "method"));
        request_log_mcp(method, method && strcmp(method, "tools/call") == 0
                                    ? json_string_value(
                                          json_object_get(json_object_get(root, "params"), "name"))
                                    : NULL);
        struct core_reply r;
        core_receive(&c, root, &r);
        if (r.session_made)
            u_map_put(resp->map_header, "Mcp-Session-Id", r.session_made);
        rc = respond(resp, &r, &grant);
    }
    json_decref(root);
    return rc;
}

/* ---- GET ---- */

/* A 2026-07-28 client has no session to GET or DELETE. */
static int stateless_refusal(const struct _u_request *req, struct _u_response *resp)
{
    const char *v = header(req, "MCP-Protocol-Version");
    if (!v || !protocol_is_stateless(v))
        return 0;
    u_map_put(resp->map_header, "Allow", "POST");
    fail(resp, 405, JSONRPC_SERVER_ERROR,
         "Method Not Allowed: 2026-07-28 has no sessions; send requests with POST");
    return 1;
}

static int on_get(const struct _u_request *req, struct _u_response *resp, void *ud)
{
    (void)ud;
    struct auth_grant grant;
    if (!admitted(req, resp, &grant))
        return U_CALLBACK_COMPLETE;
    if (stateless_refusal(req, resp))
        return U_CALLBACK_COMPLETE;
    if (!accepts(req, "text/event-stream"))
        return fail(resp, 406, JSONRPC_SERVER_ERROR,
                    "Not Acceptable: Accept must list text/event-stream");
    if (!version_ok(req, resp))
        return U_CALLBACK_COMPLETE;
    struct core_caller c = caller_of(req, grant.principal);
    struct core_reply r;
    struct follow fl = {0};
    if (follow_open(&fl, &c, header(req, "Last-Event-ID"), HTTP_PROBE_WAIT_MS, &r) != 0)
        return refused(resp, &r);
    if (follow_token(&fl, &grant, NULL) != 0) {
        follow_end(&fl);
        return fail(resp, 503, JSONRPC_INTERNAL_ERROR, "Out of memory");
    }
    return start_sse(resp, &fl);
}

/* ---- DELETE, others ---- */

static int on_delete(const struct _u_request *req, struct _u_response *resp, void *ud)
{
    (void)ud;
    struct auth_grant grant;
    if (!admitted(req, resp, &grant) || stateless_refusal(req, resp) || !version_ok(req, resp))
        return U_CALLBACK_COMPLETE;
    struct core_caller c = caller_of(req, grant.principal);
    struct core_reply r;
    if (core_delete(&c, &r) != 0)
        return refused(resp, &r);
    ulfius_set_empty_body_response(resp, 200);
    return U_CALLBACK_COMPLETE;
}

static int on_healthz(const struct _u_request *req, struct _u_response *resp, void *ud)
{
    (void)req;
    (void)ud;
    send_json(resp, 200, json_pack("{s:s}", "status", "ok"));
    return U_CALLBACK_COMPLETE;
}

/* RFC 9728: where clients learn which authorization server to ask. */
static int on_resource_metadata(const struct _u_request *req, struct _u_response *resp, void *ud)
{
    (void)req;
    (void)ud;
    u_map_put(resp->map_header, "Content-Type", "application/json");
    u_map_put(resp->map_header, "Cache-Control", "max-age=300");
    ulfius_set_string_body_response(resp, 200, http.cfg.resource_metadata);
    return U_CALLBACK_COMPLETE;
}

static int on_readyz(const struct _u_request *req, struct _u_response *resp, void *ud)
{
    (void)req;
    (void)ud;
    int ready = core_state() == CORE_SERVING;
    send_json(resp, ready ? 200 : 503, json_pack("{s:s}", "status", ready ? "ready" : "not ready"));
    return U_CALLBACK_COMPLETE;
}

static int on_metrics(const struct _u_request *req, struct _u_response *resp, void *ud)
{
    (void)req;
    (void)ud;
    char *page = core_metrics();
    if (!page)
        return fail(resp, 503, JSONRPC_INTERNAL_ERROR, "Out of memory");
    ulfius_set_string_body_response(resp, 200, page);
    u_map_put(resp->map_header, "Content-Type", "text/plain; version=0.0.4");
    free(page);
    return U_CALLBACK_COMPLETE;
}

/* ---- lent to the other endpoints (http_shared.h) ---- */

const char *http_header(const struct _u_request *req, const char *name)
{
    return header(req, name);
}

int http_admitted(const struct _u_request *req, struct _u_response *resp, struct auth_grant *grant)
{
    return admitted(req, resp, grant);
}

int http_fail(struct _u_response *resp, unsigned status, int code, const char *message)
{
    return fail(resp, status, code, message);
}

int http_version_ok(const struct _u_request *req, struct _u_response *resp)
{
    return version_ok(req, resp);
}

int http_refused(struct _u_response *resp, struct core_reply *r)
{
    return refused(resp, r);
}

void http_sse_headers(struct _u_response *resp)
{
    sse_headers(resp);
}

int64_t http_keepalive_ms(void)
{
    return http.cfg.keepalive_ms;
}

int http_path_is(const char *url_path, const char *name)
{
    /* As ulfius matches a one-segment URL format: empty segments do not
     * count, so "/mcp/" and "//mcp" are "/mcp" too. */
    size_t n = strlen(name);
    url_path += strspn(url_path, "/");
    if (strncmp(url_path, name, n) != 0)
        return 0;
    url_path += n;
    return url_path[strspn(url_path, "/")] == '\0';
}

/* The read-only endpoints beside /mcp. */
static const struct {
    const char *path;
    int (*cb)(const struct _u_request *, struct _u_response *, void *);
} probes[] = {{"/healthz", on_healthz}, {"/readyz", on_readyz}, {"/metrics", on_metrics}};

/* Reached when no endpoint matched the method and path: 405 for a path
 * that other methods serve, else 404. (Endpoints for "any method" would do
 * the same, but ulfius matches every request against them, at a split URL
 * and a dozen allocations each.) */
static int on_unknown(const struct _u_request *req, struct _u_response *resp, void *ud)
{
    (void)ud;
    const char *allow =
        http_path_is(req->url_path, "mcp") ? "GET, POST, DELETE" : legacy_sse_allow(req->url_path);
    for (size_t i = 0; !allow && i < sizeof probes / sizeof probes[0]; i++)
        if (http_path_is(req->url_path, probes[i].path + 1))
            allow = "GET, HEAD";
    if (allow) {
        u_map_put(resp->map_header, "Allow", allow);
        return fail(resp, 405, JSONRPC_SERVER_ERROR, "Method Not Allowed");
    }
    return fail(resp, 404, JSONRPC_SERVER_ERROR, "Not Found: MCP is served at /mcp");
}

/* ---- lifecycle ---- */

/* MHD's own error lines, through the event log. Every WebSocket connection
 * ends with one ("Failed to send the response headers ..."), since ws shuts
 * the socket down under MHD: those are debug. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    int should_log;
    unsigned long held;
    if (conn_guard_accept_failed(line, &should_log, &held)) {
        if (should_log)
            log_event(LOG_WARN, NULL, "accept_failed",
                      "%s; retrying every 100 ms (%lu similar lines held back); raise the "
                      "open-files limit or lower --max-connections",
                      line, held);
        return;
    }
    /* What a client can cause at will (hanging up mid-request, the
     * WebSocket takeover) must not fill the log. */
    int client_caused = strstr(line, "`/mcp/ws") || strstr(line, "closed by remote side") ||
                        strstr(line, "incomplete request") || strstr(line, "Content-Length") ||
                        strstr(line, "Error processing request");
    log_event(client_caused ? LOG_DEBUG : LOG_WARN, NULL, "mhd", "%s", line);
}

/* libmicrohttpd's threads: each serves its share of the connections with
 * epoll, and never blocks (request_host.h), so one per CPU keeps them all
 * busy. At least two, so that one slow step (an inline commit) does not
 * hold every connection. */
static unsigned pool_size(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 2 ? (unsigned)(n > 64 ? 64 : n) : 2;
}

/* libmicrohttpd's own inactivity timeout, as long as conn_guard's request
 * timeout (which already cuts a connection that idles that long between
 * requests; a suspended connection, waiting for its reply or its stream,
 * is exempt). It is also what wakes a pool thread now and then: out of
 * descriptors, libmicrohttpd 0.9.75's epoll mode can leave connections
 * whose clients have gone unclosed until their thread next runs its
 * timeouts, and that thread accepts nothing until one of its connections
 * closes (NOTES.md). 0: none. */
static unsigned idle_timeout_s(int64_t request_timeout_ms)
{
    if (request_timeout_ms <= 0)
        return 0;
    int64_t s = (request_timeout_ms + 999) / 1000;
    return s > 86400 ? 86400u : (unsigned)s;
}

/* Stops what http_start started, the last first: the one place each of
 * its parts is let go, after a failed start and in http_stop. */
static void http_unwind(void)
{
    if (http.stage >= HTTP_LISTENING)
        ulfius_stop_framework(&http.inst);
    if (http.stage >= HTTP_ROUTED) {
        ulfius_clean_instance(&http.inst);
        legacy_sse_stop();
    }
    if (http.stage >= HTTP_LINGERING)
        linger_stop();
    /* After libmicrohttpd has stopped: nothing calls the guard any more. */
    if (http.stage >= HTTP_GUARDED)
        conn_guard_stop();
    forwarded_free(http.trusted);
    http.trusted = NULL;
    http.stage = HTTP_DOWN;
}

int http_start(const struct http_config *cfg, char **err)
{
    http.cfg = *cfg;
    memset(&http.addr, 0, sizeof http.addr);
    int v6 = 0;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&http.addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&http.addr;
    if (inet_pton(AF_INET, cfg->host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)cfg->port);
    } else if (inet_pton(AF_INET6, cfg->host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)cfg->port);
        v6 = 1;
    } else {
        if (asprintf(err, "not a numeric IP address: %s", cfg->host) < 0)
            *err = NULL;
        return -1;
    }
    char why[200];
    struct conn_guard_config gc = {cfg->request_timeout_ms, cfg->connection_limit,
                                   cfg->connection_limit_per_ip, NULL};
    if (forwarded_parse(cfg->trusted_proxies, &http.trusted, why, sizeof why) != 0 ||
        (gc.trusted = http.trusted, conn_guard_start(&gc, why, sizeof why)) != 0) {
        *err = strdup(why);
        goto fail;
    }
    http.stage = HTTP_GUARDED;
    if (linger_start() != 0) {
        *err = strdup("cannot start the lingering-close thread");
        goto fail;
    }
    http.stage = HTTP_LINGERING;
    if (ulfius_init_instance(&http.inst, (unsigned)cfg->port, NULL, NULL) != U_OK) {
        *err = strdup("cannot initialise the HTTP server");
        goto fail;
    }
    http.stage = HTTP_ROUTED;
    /* body_gate refuses longer bodies before ulfius stores them; this
     * bounds what ulfius would keep should a body slip past it. */
    http.inst.max_post_body_size = cfg->max_body;
    body_gate_configure(cfg->max_body);
    request_host_install();
    struct ws_config wc = {cfg->ws_max_message, cfg->ws_ping_ms, 0, cfg->origins};
    ws_configure(&wc);
    ulfius_add_endpoint_by_val(&http.inst, "POST", "/mcp", NULL, 0, on_post, NULL);
    ulfius_add_endpoint_by_val(&http.inst, "GET", "/mcp", NULL, 0, on_get, NULL);
    ulfius_add_endpoint_by_val(&http.inst, "DELETE", "/mcp", NULL, 0, on_delete, NULL);
    /* HEAD wherever GET is plain (RFC 9110 9.3.2); libmicrohttpd sends
     * the GET answer's headers without its body. Not on /mcp, where a GET
     * opens a stream. */
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        ulfius_add_endpoint_by_val(&http.inst, "GET", probes[i].path, NULL, 0, probes[i].cb, NULL);
        ulfius_add_endpoint_by_val(&http.inst, "HEAD", probes[i].path, NULL, 0, probes[i].cb, NULL);
    }
    legacy_sse_add_endpoints(&http.inst);
    if (http.cfg.resource_metadata) {
        static const char *const meta[] = {"/.well-known/oauth-protected-resource",
                                           "/.well-known/oauth-protected-resource/mcp"};
        for (size_t i = 0; i < 2; i++)
            ulfius_add_endpoint_by_val(&http.inst, "GET", meta[i], NULL, 0, on_resource_metadata,
                                       NULL);
    }
    ulfius_set_default_endpoint(&http.inst, on_unknown, NULL);

    struct MHD_OptionItem ops[] = {
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)request_host_completed, NULL},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)request_host_uri_logger, NULL},
        {MHD_OPTION_SOCK_ADDR, 0, &http.addr},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)conn_guard_notify, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)conn_guard_mhd_limit(), NULL},
        {MHD_OPTION_THREAD_STACK_SIZE, MHD_STACK, NULL},
        {MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)pool_size(), NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)idle_timeout_s(cfg->request_timeout_ms), NULL},
        {MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
                     MHD_ALLOW_UPGRADE | MHD_ALLOW_SUSPEND_RESUME | (v6 ? MHD_USE_IPv6 : 0);
    if (ulfius_start_framework_with_mhd_options(&http.inst, flags, ops) != U_OK) {
        if (asprintf(err, "cannot listen on %s port %d: %s", cfg->host, cfg->port,
                     strerror(errno)) < 0)
            *err = NULL;
        goto fail;
    }
    http.stage = HTTP_LISTENING;
    if (!request_host_installed()) {
        /* ulfius no longer starts libmicrohttpd through MHD_start_daemon:
         * without the host --max-body would only hold after the body, and
         * a handler's wait would block a pool thread. */
        *err = strdup("the request body limit could not be installed (see mhd_interpose.h)");
        goto fail;
    }
    http.stage = HTTP_SERVING;
    return 0;
fail:
    http_unwind();
    return -1;
}

void http_stop(void)
{
    if (http.stage != HTTP_SERVING)
        return;
    int64_t until = clock_mono_ms() + DRAIN_MS;
    while (http.streams_open > 0 && clock_mono_ms() < until)
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000000}, NULL);
    ws_stop();
    request_host_stop();
    http_unwind();
}
