/* push — see push.h. */
#include "push.h"
#include "clock.h"
#include "core.h"
#include "jsonrpc.h"
#include "log.h"
#include "longpoll.h"
#include "protocol.h"
#include "session.h"
#include "stream.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Forwarders wake this often to notice that their connection closed. */
#define FORWARD_TICK_MS 1000
#define FORWARDER_STACK (128 * 1024)
#define EVENT_ID_KEY "mcpd/event-id"
#define DEFAULT_MAX_INFLIGHT 256
#define SESSION_ID_KEY "mcpd/session-id"

struct forwarder {
    struct push *p;
    struct stream *stream;
    int64_t next;
    int chunked;    /* opted in: messages go out as mcpd/chunk */
    int standalone; /* the session's standalone stream: holds its GET slot */
    int announce;   /* initialize's reply: tell the client its session id */
    pthread_t thread;
    struct forwarder *next_fwd;
};

struct push {
    struct push_io io;
    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;  /* a request forwarder finished */
    pthread_mutex_t send_mu;
    struct session *session;
    struct forwarder *forwarders;
    int busy; /* request forwarders still running */
    int closing;
    int dead; /* the transport could not send */
};

/* ---- sending ---- */

static int send_text(struct push *p, const char *text, size_t len)
{
    pthread_mutex_lock(&p->mu);
    int dead = p->dead;
    pthread_mutex_unlock(&p->mu);
    if (dead)
        return -1;
    pthread_mutex_lock(&p->send_mu);
    int rc = p->io.send(p->io.io, text, len);
    pthread_mutex_unlock(&p->send_mu);
    if (rc != 0) {
        pthread_mutex_lock(&p->mu);
        p->dead = 1;
        pthread_mutex_unlock(&p->mu);
    }
    return rc;
}

/* Sends msg (stolen). */
static int send_json(struct push *p, json_t *msg)
{
    size_t len;
    char *text = msg ? jsonrpc_dump(msg, &len) : NULL;
    json_decref(msg);
    if (!text)
        return -1;
    int rc = send_text(p, text, len);
    free(text);
    return rc;
}

static void send_error(struct push *p, json_t *id, int code, const char *message)
{
    send_json(p, jsonrpc_error(id, code, message, NULL));
}

/* The stored message with its event id in the object it already has
 * (params of a request or notification, result of a response); an error
 * response has no such object and goes out as stored. New reference. */
static json_t *with_event_id(const struct stream_chunk *ch, struct stream *st, const char *sid)
{
    json_t *msg = json_loadb(ch->msg, ch->len, JSON_ALLOW_NUL, NULL);
    json_t *holder = json_object_get(msg, "params");
    if (!json_is_object(holder))
        holder = json_object_get(msg, "result");
    if (!json_is_object(holder))
        return msg;
    json_t *meta = json_object_get(holder, "_meta");
    if (!json_is_object(meta)) {
        meta = json_object();
        json_object_set_new(holder, "_meta", meta);
    }
    char id[96];
    stream_event_id(st, ch->seq, id, sizeof id);
    json_object_set_new(meta, EVENT_ID_KEY, json_string(id));
    /* A WebSocket client has no response header to learn its session id
     * from, and needs it to resume after a reconnect. */
    if (sid)
        json_object_set_new(meta, SESSION_ID_KEY, json_string(sid));
    return msg;
}

static int forward_chunk(struct forwarder *f, const struct stream_chunk *ch)
{
    if (f->chunked)
        return send_json(f->p,
                         poll_chunk_notification(f->stream, ch->seq, ch->msg, ch->len, ch->is_end));
    if (f->p->io.event_ids)
        return send_json(
            f->p, with_event_id(ch, f->stream,
                                f->announce && ch->is_end ? session_id(f->p->session) : NULL));
    return send_text(f->p, ch->msg, ch->len);
}

/* ---- forwarders ---- */

static int stopping(struct push *p)
{
    pthread_mutex_lock(&p->mu);
    int stop = p->closing || p->dead;
    pthread_mutex_unlock(&p->mu);
    return stop;
}

static void *forward_main(void *arg)
{
    struct forwarder *f = arg;
    struct push *p = f->p;
    struct stream_reader tok;
    stream_attach(f->stream, &tok);
    while (!stopping(p)) {
        struct stream_chunk ch;
        enum stream_wait w =
            stream_read(f->stream, &tok, f->next, clock_mono_ms() + FORWARD_TICK_MS, &ch);
        if (w == STREAM_CHUNK) {
            if (forward_chunk(f, &ch) != 0)
                break;
            f->next = ch.seq + 1;
            if (f->standalone)
                session_set_get_cursor(p->session, f->next);
            if (ch.is_end)
                break;
        } else if (w == STREAM_ENDED || w == STREAM_DETACHED || w == STREAM_REFUSED) {
            break;
        } else if (w == STREAM_TIMEOUT && f->standalone) {
            /* An open connection is activity: it must not expire under a
             * client that is simply quiet. */
            session_touch(p->session);
        }
    }
    if (f->standalone)
        session_get_release(p->session);
    pthread_mutex_lock(&p->mu);
    if (!f->standalone)
        p->busy--;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Starts following st from seq `from` (takes the reference to st). */
static void forward(struct push *p, struct stream *st, int64_t from, int chunked, int standalone,
                    int announce)
{
    struct forwarder *f = calloc(1, sizeof *f);
    if (!f) {
        stream_unref(st);
        return;
    }
    f->p = p;
    f->stream = st;
    f->next = from;
    f->chunked = chunked;
    f->standalone = standalone;
    f->announce = announce;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, FORWARDER_STACK);
    pthread_mutex_lock(&p->mu);
    if (!standalone)
        p->busy++;
    int rc = pthread_create(&f->thread, &attr, forward_main, f);
    if (rc == 0) {
        f->next_fwd = p->forwarders;
        p->forwarders = f;
    } else if (!standalone) {
        p->busy--;
    }
    pthread_mutex_unlock(&p->mu);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        log_event(LOG_ERROR, session_id(p->session), "forwarder_failed",
                  "cannot start a thread for stream %s", stream_id(st));
        if (standalone)
            session_get_release(p->session);
        stream_unref(st);
        free(f);
    }
}

/* The connection now serves session s (reference taken): forward its
 * standalone stream, unless another connection already does. */
static void adopt(struct push *p, struct session *s)
{
    session_ref(s);
    p->session = s;
    if (session_get_claim(s) != 0) {
        log_event(LOG_INFO, session_id(s), "standalone_elsewhere",
                  "another connection already follows this session's standalone stream");
        return;
    }
    struct stream *st = session_standalone(s);
    if (st)
        forward(p, st, session_get_cursor(s), 0, 1, 0);
    else
        session_get_release(s);
}

/* ---- receiving ---- */

static void deliver(struct push *p, struct core_reply *r, int announce)
{
    if (r->kind == CORE_REJECTED) {
        send_json(p, r->error);
        r->error = NULL;
    } else if (r->kind == CORE_STREAM) {
        int chunked = r->ack != NULL;
        if (r->ack) {
            send_json(p, r->ack);
            r->ack = NULL;
        }
        forward(p, r->stream, 0, chunked, 0, announce);
        r->stream = NULL;
    }
    core_reply_clear(r);
}

static void receive_one(struct push *p, json_t *msg)
{
    struct jsonrpc_msg m;
    struct jsonrpc_error err;
    if (jsonrpc_classify(msg, &m, &err) != 0) {
        json_t *id = json_object_get(msg, "id");
        send_error(p, json_is_string(id) || json_is_integer(id) ? id : NULL, err.code, err.message);
        return;
    }
    struct core_reply r;
    if (m.kind == JSONRPC_REQUEST && strcmp(m.method, "initialize") == 0) {
        if (p->session) {
            send_error(p, m.id, JSONRPC_INVALID_REQUEST,
                       "Invalid Request: this connection already has a session");
            return;
        }
        core_initialize(msg, &m, &r);
        if (r.session)
            adopt(p, r.session);
        deliver(p, &r, r.session != NULL);
        return;
    }
    if (!p->session) {
        /* Before initialize only pings make sense (the spec allows them). */
        if (m.kind == JSONRPC_REQUEST && strcmp(m.method, "ping") == 0)
            send_json(p, jsonrpc_result(m.id, json_object()));
        else if (m.kind == JSONRPC_REQUEST)
            send_error(p, m.id, JSONRPC_INVALID_REQUEST, "Invalid Request: send initialize first");
        return;
    }
    if (session_ended(p->session)) {
        if (m.kind == JSONRPC_REQUEST)
            send_error(p, m.id, JSONRPC_SESSION_NOT_FOUND, "Session not found");
        return;
    }
    if (m.kind == JSONRPC_REQUEST) {
        pthread_mutex_lock(&p->mu);
        int full = p->busy >= p->io.max_inflight;
        pthread_mutex_unlock(&p->mu);
        if (full) {
            send_error(p, m.id, JSONRPC_SERVER_ERROR,
                       "Too many requests in flight on this connection; wait for some to finish");
            return;
        }
    }
    core_submit(p->session, msg, &m, p->io.transport, &r);
    deliver(p, &r, 0);
}

void push_receive(struct push *p, const char *buf, size_t len)
{
    struct jsonrpc_error err;
    json_t *root = jsonrpc_parse(buf, len, &err);
    if (!root) {
        send_error(p, NULL, err.code, err.message);
        return;
    }
    if (!json_is_array(root)) {
        receive_one(p, root);
    } else if (json_array_size(root) == 0) {
        send_error(p, NULL, JSONRPC_INVALID_REQUEST, "Invalid Request: empty batch");
    } else if (!p->session || !protocol_allows_batch(session_protocol(p->session))) {
        send_error(p, NULL, JSONRPC_INVALID_REQUEST,
                   "Invalid Request: batches are only accepted on 2025-03-26 sessions");
    } else {
        /* Each reply goes out on its own as it is ready: a push connection
         * has no single response to gather them into. */
        size_t i;
        json_t *msg;
        json_array_foreach(root, i, msg) receive_one(p, msg);
    }
    json_decref(root);
}

int push_resume(struct push *p, const char *sid, const char *last_event_id)
{
    if (p->session)
        return strcmp(session_id(p->session), sid) == 0 ? 0 : -1;
    struct session *s = session_find(sid);
    if (!s)
        return -1;
    struct stream *st = NULL;
    int64_t next = 0;
    if (last_event_id) {
        enum stream_cursor c = stream_resume(last_event_id, sid, &st, &next);
        if (c != STREAM_CURSOR_OK) {
            session_unref(s);
            return c == STREAM_CURSOR_BAD ? -3 : -2;
        }
    }
    session_touch(s);
    /* A resumed standalone stream continues from the client's position,
     * not from what the last connection believed it had sent. */
    if (st && stream_is_standalone(st)) {
        session_set_get_cursor(s, next);
        stream_unref(st);
        st = NULL;
    }
    adopt(p, s);
    session_unref(s);
    if (st)
        forward(p, st, next, 0, 0, 0);
    return 0;
}

/* ---- lifecycle ---- */

struct push *push_open(const struct push_io *io)
{
    struct push *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->io = *io;
    if (p->io.max_inflight <= 0)
        p->io.max_inflight = DEFAULT_MAX_INFLIGHT;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->send_mu, NULL);
    clock_cond_init(&p->cv);
    return p;
}

const char *push_session_id(struct push *p)
{
    return p->session ? session_id(p->session) : NULL;
}

int push_drain(struct push *p, int64_t timeout_ms)
{
    int64_t deadline = clock_mono_ms() + timeout_ms;
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0 && !p->dead && clock_mono_ms() < deadline)
        clock_cond_wait_until(&p->cv, &p->mu, deadline);
    int left = p->busy;
    pthread_mutex_unlock(&p->mu);
    return left > 0 ? -1 : 0;
}

void push_close(struct push *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->closing = 1;
    struct forwarder *list = p->forwarders;
    p->forwarders = NULL;
    pthread_mutex_unlock(&p->mu);
    /* Wake them now rather than at their next tick. */
    for (struct forwarder *f = list; f; f = f->next_fwd)
        stream_probe_readers(f->stream);
    struct forwarder *next;
    for (struct forwarder *f = list; f; f = next) {
        next = f->next_fwd;
        pthread_join(f->thread, NULL);
        stream_unref(f->stream);
        free(f);
    }
    session_unref(p->session);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->send_mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
