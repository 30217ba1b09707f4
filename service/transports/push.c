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

/* The writer wakes at least this often, to keep the session of an open
 * connection from expiring while its client is simply quiet. */
#define WRITER_TICK_MS 1000
/* How soon a session ended elsewhere closes a connection that does not
 * follow its standalone stream. */
#define ENDED_CHECK_MS 250
#define WRITER_STACK (128 * 1024)
/* Chunks taken from one stream before the writer looks at the others, so
 * a chatty request cannot hold back its neighbours' replies. */
#define PUMP_BURST 32
#define EVENT_ID_KEY "mcpd/event-id"
#define DEFAULT_MAX_INFLIGHT 256
#define SESSION_ID_KEY "mcpd/session-id"

/* A stream the connection's writer follows. */
struct follow {
    struct push *p;
    struct stream *stream;
    struct stream_reader tok;
    struct stream_watch watch;
    int64_t next;
    int chunked;    /* opted in: messages go out as mcpd/chunk */
    int standalone; /* the session's standalone stream: holds its GET slot */
    int announce;   /* initialize's reply: tell the client its session id */
    struct follow *next_f;
};

struct push {
    struct push_io io;
    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;  /* a request's stream was released */
    pthread_mutex_t send_mu;
    /* The writer sleeps here; the streams it follows and push_receive
     * (handing it a new one) wake it. */
    struct stream_waker waker;
    pthread_t writer;
    struct session *session;
    struct follow *incoming; /* handed to the writer, not yet taken */
    int busy;                /* request streams not yet released */
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

static int forward_chunk(struct follow *f, const struct stream_chunk *ch)
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

/* ---- the writer ---- */

/* One writer per connection follows every stream the connection has: the
 * standalone stream and each request's. It sends each stream's messages in
 * commit order and lets go of a request's stream as soon as its last
 * message is out, so a connection that lives for days holds only what is
 * in flight: one thread, however many requests it serves. */

enum pump { PUMP_IDLE, PUMP_SENT, PUMP_DONE };

/* Sends what f has ready, up to PUMP_BURST messages, without waiting. */
static enum pump pump(struct follow *f)
{
    struct push *p = f->p;
    enum pump r = PUMP_IDLE;
    for (int n = 0; n < PUMP_BURST; n++) {
        struct stream_chunk ch;
        enum stream_wait w = stream_read(f->stream, &f->tok, f->next, 0, &ch);
        if (w == STREAM_POLL || w == STREAM_PROBE)
            continue; /* HTTP's concerns: a push connection reads on */
        if (w == STREAM_ENDED || w == STREAM_DETACHED || w == STREAM_REFUSED)
            return PUMP_DONE;
        if (w != STREAM_CHUNK)
            return r;
        if (forward_chunk(f, &ch) != 0)
            return PUMP_DONE; /* the connection is dead; the writer stops */
        f->next = ch.seq + 1;
        if (f->standalone)
            session_set_get_cursor(p->session, f->next);
        if (ch.is_end)
            return PUMP_DONE;
        r = PUMP_SENT;
    }
    return r;
}

static void release(struct follow *f)
{
    struct push *p = f->p;
    stream_unwatch(f->stream, &f->watch);
    if (f->standalone) {
        session_get_release(p->session);
    } else {
        pthread_mutex_lock(&p->mu);
        p->busy--;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    stream_unref(f->stream);
    free(f);
}

/* Moves what push_receive handed over onto the writer's own list, oldest
 * first, and starts watching it. Returns 1 when the writer is to stop. */
static int take_incoming(struct push *p, struct follow **tail)
{
    pthread_mutex_lock(&p->mu);
    int stop = p->closing || p->dead;
    struct follow *in = p->incoming;
    p->incoming = NULL;
    pthread_mutex_unlock(&p->mu);
    struct follow *rev = NULL;
    while (in) {
        struct follow *next = in->next_f;
        in->next_f = rev;
        rev = in;
        in = next;
    }
    for (struct follow *f = rev, *next; f; f = next) {
        next = f->next_f;
        f->next_f = NULL;
        stream_attach(f->stream, &f->tok);
        stream_watch(f->stream, &f->watch, &p->waker);
        *tail = f;
        tail = &f->next_f;
    }
    return stop;
}

static void *writer_main(void *arg)
{
    struct push *p = arg;
    struct follow *list = NULL;
    int64_t next_touch = clock_mono_ms() + WRITER_TICK_MS;
    int ended_told = 0;
    for (;;) {
        unsigned seen = stream_waker_epoch(&p->waker);
        struct follow **tail = &list;
        while (*tail)
            tail = &(*tail)->next_f;
        if (take_incoming(p, tail))
            break;
        int busy = 0, standalone = 0;
        for (struct follow **fp = &list; *fp;) {
            struct follow *f = *fp;
            enum pump r = pump(f);
            if (r == PUMP_DONE) {
                *fp = f->next_f;
                release(f);
                busy = 1;
                continue;
            }
            busy |= r == PUMP_SENT;
            standalone |= f->standalone;
            fp = &f->next_f;
        }
        /* The session ended elsewhere (a DELETE on another connection,
         * expiry, mcp-admin session kill): the connection has nothing left
         * to carry. The end of a followed standalone stream wakes the
         * writer at once; otherwise it is noticed within ENDED_CHECK_MS. */
        if (!ended_told && p->io.session_ended && p->session && session_ended(p->session)) {
            ended_told = 1;
            p->io.session_ended(p->io.io);
        }
        if (busy)
            continue;
        int64_t now = clock_mono_ms();
        if (now >= next_touch) {
            /* An open connection is activity: it must not expire under a
             * client that is simply quiet. */
            if (standalone)
                session_touch(p->session);
            next_touch = now + WRITER_TICK_MS;
        }
        int64_t wake = now + ENDED_CHECK_MS < next_touch ? now + ENDED_CHECK_MS : next_touch;
        stream_waker_wait(&p->waker, seen, wake);
    }
    while (list) {
        struct follow *next = list->next_f;
        release(list);
        list = next;
    }
    return NULL;
}

/* Hands st to the writer, to follow from seq `from` (takes the reference
 * to st). */
static void forward(struct push *p, struct stream *st, int64_t from, int chunked, int standalone,
                    int announce)
{
    struct follow *f = calloc(1, sizeof *f);
    if (!f) {
        log_event(LOG_ERROR, session_id(p->session), "forward_failed",
                  "out of memory following stream %s", stream_id(st));
        if (standalone)
            session_get_release(p->session);
        stream_unref(st);
        return;
    }
    f->p = p;
    f->stream = st;
    f->next = from;
    f->chunked = chunked;
    f->standalone = standalone;
    f->announce = announce;
    pthread_mutex_lock(&p->mu);
    if (!standalone)
        p->busy++;
    f->next_f = p->incoming;
    p->incoming = f;
    pthread_mutex_unlock(&p->mu);
    stream_waker_signal(&p->waker);
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
        struct session_origin origin = {p->io.principal[0] ? p->io.principal : NULL,
                                        p->io.transport};
        core_initialize(msg, &m, &origin, &r);
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
    if (s && !session_belongs_to(s, p->io.principal)) {
        session_unref(s);
        s = NULL;
    }
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
    stream_waker_init(&p->waker);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, WRITER_STACK);
    int rc = pthread_create(&p->writer, &attr, writer_main, p);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        log_event(LOG_ERROR, NULL, "writer_failed", "cannot start a connection's writer thread");
        stream_waker_destroy(&p->waker);
        pthread_mutex_destroy(&p->mu);
        pthread_mutex_destroy(&p->send_mu);
        pthread_cond_destroy(&p->cv);
        free(p);
        return NULL;
    }
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
    pthread_mutex_unlock(&p->mu);
    stream_waker_signal(&p->waker);
    pthread_join(p->writer, NULL);
    /* Whatever was handed over after the writer's last look. */
    struct follow *in = p->incoming;
    p->incoming = NULL;
    while (in) {
        struct follow *next = in->next_f;
        if (in->standalone)
            session_get_release(p->session);
        stream_unref(in->stream);
        free(in);
        in = next;
    }
    session_unref(p->session);
    stream_waker_destroy(&p->waker);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->send_mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
