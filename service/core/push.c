/* push — see push.h. */
#include "push.h"
#include "clock.h"
#include "core.h"
#include "fcond.h"
#include "follow.h"
#include "json_text.h"
#include "jsonrpc.h"
#include "log.h"
#include "longpoll.h"
#include "loop.h"
#include "session.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The writer wakes at least this often, to keep the session of an open
 * connection from expiring while its client is simply quiet. */
#define WRITER_TICK_MS 1000
/* How soon a session ended elsewhere closes a connection that does not
 * follow its standalone stream. */
#define ENDED_CHECK_MS 250
/* Chunks taken from one stream before the writer looks at the others, so
 * a chatty request cannot hold back its neighbours' replies. */
#define PUMP_BURST 32
#define EVENT_ID_KEY "mcpd/event-id"
#define DEFAULT_MAX_INFLIGHT 256
#define SESSION_ID_KEY "mcpd/session-id"

/* A stream the connection's writer follows (follow.h), in its group. */
struct push_follow {
    struct push *p;
    struct follow fl;
    int chunked;    /* opted in: messages go out as mcpd/chunk */
    int standalone; /* the session's standalone stream: holds its GET slot */
    int announce;   /* initialize's reply: tell the client its session id */
    /* A 2026-07-28 request's reply: the request's own session (held), which
     * ends once the reply is out or the client cancels the request; the
     * request's id, which a notifications/cancelled names; whether it is a
     * subscriptions/listen (which never ends by itself). */
    struct session *own;
    json_t *id;
    int listen;
    int cancelled; /* under p->mu: nothing more is sent for it */
    struct push_follow *next_f;
    struct push_follow *next_own; /* on p->own_list, under p->mu */
};

struct push {
    struct push_io io;
    struct auth_hold hold; /* io.grant's token */
    pthread_mutex_t mu;    /* guards everything below */
    struct fcond cv;       /* a request's stream was released, or the writer ended */
    /* One message at a time; a fiber holds it across a full socket. */
    struct fmutex send_mu;
    /* The writer sleeps on its group; the streams it follows and
     * push_receive (handing it a new one) wake it. */
    struct follow_group group;
    int writer_done;
    struct session *session;
    struct push_follow *incoming; /* handed to the writer, not yet taken */
    /* The 2026-07-28 requests in flight (follows with `own`), for
     * notifications/cancelled, which arrives on the reading thread. */
    struct push_follow *own_list;
    int busy; /* request streams not yet released */
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
    fmutex_lock(&p->send_mu);
    int rc = p->io.send(p->io.io, text, len);
    fmutex_unlock(&p->send_mu);
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
static json_t *with_event_id(const struct stream_chunk *ch, struct follow *fl, const char *sid)
{
    char why[120];
    json_t *msg = json_text_read(ch->msg, ch->len, JSON_TEXT_MAX_DEPTH, why, sizeof why);
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
    json_object_set_new(meta, EVENT_ID_KEY, json_string(fl->event_id));
    /* A WebSocket client has no response header to learn its session id
     * from, and needs it to resume after a reconnect. */
    if (sid)
        json_object_set_new(meta, SESSION_ID_KEY, json_string(sid));
    return msg;
}

static int forward_chunk(struct push_follow *f, const struct stream_chunk *ch)
{
    if (f->chunked)
        return send_json(
            f->p, poll_chunk_notification(f->fl.stream, ch->seq, ch->msg, ch->len, ch->is_end));
    /* A stateless request's stream is not resumed (its session ends with
     * it): no event ids. */
    if (f->p->io.event_ids && !f->own)
        return send_json(
            f->p, with_event_id(ch, &f->fl,
                                f->announce && ch->is_end ? session_id(f->p->session) : NULL));
    return send_text(f->p, ch->msg, ch->len);
}

/* ---- the writer ---- */

/* One writer per connection follows every stream the connection has: the
 * standalone stream and each request's. It sends each stream's messages in
 * commit order and lets go of a request's stream as soon as its last
 * message is out, so a connection that lives for days holds only what is
 * in flight: one fiber on the event loop (loop.h), however many requests
 * it serves. Its waits (the waker, a full socket) park the fiber. */

enum pump { PUMP_IDLE, PUMP_SENT, PUMP_DONE };

static int cancelled(struct push_follow *f)
{
    pthread_mutex_lock(&f->p->mu);
    int c = f->cancelled;
    pthread_mutex_unlock(&f->p->mu);
    return c;
}

/* Lets go of f's stream (and with it the standalone claim, or the
 * request's own session: the reply is out, or the connection is gone and
 * a request nobody can read is cancelled, as when an HTTP client hangs up)
 * and frees f, which is on no list of the writer's; off p->own_list. */
static void follow_free(struct push_follow *f)
{
    struct push *p = f->p;
    if (f->own) {
        pthread_mutex_lock(&p->mu);
        struct push_follow **fp = &p->own_list;
        while (*fp && *fp != f)
            fp = &(*fp)->next_own;
        if (*fp)
            *fp = f->next_own;
        pthread_mutex_unlock(&p->mu);
        session_unref(f->own);
        json_decref(f->id);
    }
    follow_end(&f->fl);
    free(f);
}

/* Sends what f has ready, up to PUMP_BURST messages, without waiting. */
static enum pump pump(struct push_follow *f)
{
    enum pump r = PUMP_IDLE;
    if (f->own && cancelled(f))
        return PUMP_DONE;
    for (int n = 0; n < PUMP_BURST; n++) {
        struct stream_chunk ch;
        enum follow_event e = follow_read(&f->fl, 0, &ch);
        if (e == FOLLOW_POLL || e == FOLLOW_PROBED)
            continue; /* HTTP's concerns: a push connection reads on */
        if (e == FOLLOW_IDLE)
            return r;
        if (e != FOLLOW_MESSAGE)
            return PUMP_DONE; /* stopped, whatever the cause */
        if (f->own && cancelled(f))
            return PUMP_DONE; /* the spec: nothing more for a cancelled request */
        if (forward_chunk(f, &ch) != 0) {
            /* The connection is dead; the writer stops. The standalone
             * stream's next reader gets what this one could not send. */
            follow_unread(&f->fl, &ch);
            return PUMP_DONE;
        }
        if (f->standalone)
            follow_sent(&f->fl);
        if (ch.is_end)
            return PUMP_DONE;
        r = PUMP_SENT;
    }
    return r;
}

static void release(struct push_follow *f)
{
    struct push *p = f->p;
    if (!f->standalone) {
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0 && p->io.busy)
            p->io.busy(p->io.io, 0);
        fcond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    follow_free(f);
}

/* Moves what push_receive handed over onto the writer's own list, oldest
 * first, and into the writer's group. Returns 1 when the writer is to
 * stop. */
static int take_incoming(struct push *p, struct push_follow **tail)
{
    pthread_mutex_lock(&p->mu);
    int stop = p->closing || p->dead;
    struct push_follow *in = p->incoming;
    p->incoming = NULL;
    pthread_mutex_unlock(&p->mu);
    struct push_follow *rev = NULL;
    while (in) {
        struct push_follow *next = in->next_f;
        in->next_f = rev;
        rev = in;
        in = next;
    }
    for (struct push_follow *f = rev, *next; f; f = next) {
        next = f->next_f;
        f->next_f = NULL;
        follow_join(&f->fl, &p->group);
        *tail = f;
        tail = &f->next_f;
    }
    return stop;
}

/* The connection's session ended elsewhere. The session is set once, by
 * the reading thread, while the writer runs. */
static int ended(struct push *p)
{
    pthread_mutex_lock(&p->mu);
    struct session *s = p->session;
    pthread_mutex_unlock(&p->mu);
    return s && session_ended(s);
}

static void writer_main(void *arg)
{
    struct push *p = arg;
    struct push_follow *list = NULL;
    int64_t next_touch = clock_mono_ms() + WRITER_TICK_MS;
    int ended_told = 0;
    for (;;) {
        struct push_follow **tail = &list;
        while (*tail)
            tail = &(*tail)->next_f;
        if (take_incoming(p, tail))
            break;
        int busy = 0, standalone = 0;
        for (struct push_follow **fp = &list; *fp;) {
            struct push_follow *f = *fp;
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
        if (!ended_told && p->io.session_ended && ended(p)) {
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
        follow_wait(&p->group, wake);
    }
    while (list) {
        struct push_follow *next = list->next_f;
        release(list);
        list = next;
    }
    /* push_close frees p as soon as it sees this: nothing after it. */
    pthread_mutex_lock(&p->mu);
    p->writer_done = 1;
    fcond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* A follow for the writer, not yet following anything; NULL (logged)
 * when out of memory. */
static struct push_follow *follow_new(struct push *p, struct session *s)
{
    struct push_follow *f = calloc(1, sizeof *f);
    if (!f) {
        log_event(LOG_ERROR, s ? session_id(s) : NULL, "forward_failed",
                  "out of memory following a stream");
        return NULL;
    }
    f->p = p;
    return f;
}

/* Hands f, following its stream, to the writer. */
static void hand_over(struct push *p, struct push_follow *f)
{
    /* A connection has no SSE polling: no read of it stores a stream early
     * (follow.h's stored). */
    f->fl.polling = 0;
    pthread_mutex_lock(&p->mu);
    if (!f->standalone && p->busy++ == 0 && p->io.busy)
        p->io.busy(p->io.io, 1);
    if (f->own) {
        f->next_own = p->own_list;
        p->own_list = f;
    }
    f->next_f = p->incoming;
    p->incoming = f;
    pthread_mutex_unlock(&p->mu);
    follow_wake(&p->group);
}

/* Hands r's reply stream to the writer (taking it from r). A 2026-07-28
 * request's reply (r->ephemeral) takes r's session too, as its own, with
 * the request's id and method (borrowed). */
static void forward(struct push *p, struct core_reply *r, int chunked, int announce, json_t *id,
                    const char *method)
{
    struct push_follow *f = follow_new(p, r->session);
    if (!f) {
        if (r->ephemeral)
            core_end_session(r->session);
        return;
    }
    follow_reply(&f->fl, r, 0);
    f->chunked = chunked;
    f->announce = announce;
    if (r->ephemeral) {
        f->own = r->session;
        r->session = NULL;
        f->id = json_incref(id);
        f->listen = method && strcmp(method, "subscriptions/listen") == 0;
    }
    hand_over(p, f);
}

/* Cancels the 2026-07-28 requests in flight that match: those with the id
 * `id` (NULL: any), or only subscriptions (listens_only). Their sessions
 * end, which stops their work; the writer sends nothing more for them and
 * lets them go. Returns how many matched. */
static int cancel_own(struct push *p, json_t *id, int listens_only)
{
    int n = 0;
    for (;;) {
        struct push_follow *hit = NULL;
        pthread_mutex_lock(&p->mu);
        for (struct push_follow *f = p->own_list; f && !hit; f = f->next_own)
            if (!f->cancelled && (!id || json_equal(f->id, id)) && (!listens_only || f->listen))
                hit = f;
        struct session *s = NULL;
        if (hit) {
            hit->cancelled = 1;
            s = hit->own;
            session_ref(s);
        }
        pthread_mutex_unlock(&p->mu);
        if (!hit)
            break;
        n++;
        /* The follow may be freed meanwhile; s is held. */
        if (s) {
            log_event(LOG_INFO, session_id(s), "request_cancelled",
                      "by the client on its connection");
            core_end_session(s);
            session_unref(s);
        }
    }
    if (n)
        follow_wake(&p->group);
    return n;
}

/* The connection now serves session s (reference taken): forward its
 * standalone stream from `from` (-1: where its last reader stopped),
 * unless another connection already does. */
static void adopt(struct push *p, struct session *s, int64_t from)
{
    session_ref(s);
    /* The writer reads it (is the session still alive?) */
    pthread_mutex_lock(&p->mu);
    p->session = s;
    pthread_mutex_unlock(&p->mu);
    if (p->io.session_named)
        p->io.session_named(p->io.io, session_id(s));
    struct push_follow *f = follow_new(p, s);
    if (!f)
        return;
    struct core_reply refused;
    if (follow_standalone(&f->fl, s, 0, from, &refused) == 0) {
        f->standalone = 1;
        hand_over(p, f);
    } else {
        log_event(
            LOG_INFO, session_id(s), "standalone_elsewhere", "%s",
            json_string_value(json_object_get(json_object_get(refused.error, "error"), "message")));
        core_reply_clear(&refused);
        free(f);
    }
}

/* ---- receiving ---- */

static void deliver(struct push *p, struct core_reply *r, json_t *id, const char *method)
{
    if (r->kind == CORE_STREAM && r->ephemeral) {
        /* A 2026-07-28 request: its reply, then its session ends. */
        forward(p, r, 0, 0, id, method);
        core_reply_clear(r);
        return;
    }
    /* initialize made a session: the connection serves it from now on, and
     * the reply tells a client without headers its id. */
    int fresh = !p->session && r->session && r->kind == CORE_STREAM;
    if (fresh)
        adopt(p, r->session, -1);
    if (r->kind == CORE_REJECTED || r->kind == CORE_ANSWERED) {
        /* A notification is never answered, not even with an error. */
        if (!r->notification) {
            send_json(p, r->error);
            r->error = NULL;
        }
    } else if (r->kind == CORE_STREAM) {
        int chunked = r->ack != NULL;
        if (r->ack) {
            send_json(p, r->ack);
            r->ack = NULL;
        }
        forward(p, r, chunked, fresh, NULL, NULL);
    }
    core_reply_clear(r);
}

static struct core_caller caller(struct push *p)
{
    return (struct core_caller){.principal = p->io.grant.principal,
                                .transport = p->io.transport,
                                .session_id = p->session ? session_id(p->session) : NULL,
                                .connection = 1};
}

static void deliver_each(void *ud, struct core_reply *r)
{
    deliver(ud, r, NULL, NULL);
}

/* A notifications/cancelled naming a 2026-07-28 request of this
 * connection: there is no stream to close on a connection, so this is how
 * its client cancels it (and a subscription). Returns 1 when it did. */
static int cancels_own(struct push *p, json_t *msg)
{
    json_t *method = json_object_get(msg, "method");
    if (!json_is_string(method) || strcmp(json_string_value(method), "notifications/cancelled") ||
        json_object_get(msg, "id"))
        return 0;
    json_t *id = json_object_get(json_object_get(msg, "params"), "requestId");
    return (json_is_string(id) || json_is_integer(id)) && cancel_own(p, id, 0) > 0;
}

static int connection_full(struct push *p, json_t *msg)
{
    if (!json_is_string(json_object_get(msg, "method")) || !json_object_get(msg, "id"))
        return 0;
    pthread_mutex_lock(&p->mu);
    int full = p->busy >= p->io.max_inflight;
    pthread_mutex_unlock(&p->mu);
    if (full)
        send_error(p, json_object_get(msg, "id"), JSONRPC_SERVER_ERROR,
                   "Too many requests in flight on this connection; wait for some to finish");
    return full;
}

void push_receive(struct push *p, const char *buf, size_t len)
{
    struct jsonrpc_error err;
    json_t *root = jsonrpc_parse(buf, len, &err);
    if (!root) {
        send_error(p, NULL, err.code, err.message);
        return;
    }
    struct core_caller c = caller(p);
    /* Each reply of a batch goes out on its own as it is ready: a push
     * connection has no single response to gather them into. */
    c.each = deliver_each;
    c.each_ud = p;
    if (!cancels_own(p, root) && !connection_full(p, root)) {
        struct core_reply r;
        core_receive(&c, root, &r);
        deliver(p, &r, json_object_get(root, "id"),
                json_string_value(json_object_get(root, "method")));
    }
    json_decref(root);
}

/* A reconnect: adopts session sid and, with last_event_id, the stream it
 * names (push_open). 0, or -1 with *refused filled. */
static int resume(struct push *p, const char *sid, const char *last_event_id,
                  struct core_reply *refused)
{
    struct core_caller c = caller(p);
    c.session_id = sid;
    if (!last_event_id) {
        struct session *s = core_session_open(&c, refused);
        if (!s)
            return -1;
        session_touch(s);
        adopt(p, s, -1);
        session_unref(s);
        return 0;
    }
    /* Resolved first, followed by kind: the connection takes the
     * standalone stream only through its claim (adopt), never from a
     * reader that holds it. */
    struct core_resume res;
    if (core_resume(&c, last_event_id, &res, refused) != 0)
        return -1;
    struct push_follow *f = res.standalone ? NULL : follow_new(p, res.session);
    if (!f) {
        /* A resumed standalone stream continues from the client's
         * position, not from what the last connection believed it had
         * sent. */
        adopt(p, res.session, res.standalone ? res.next : -1);
        core_resume_clear(&res);
        return 0;
    }
    follow_resumed(&f->fl, &res);
    adopt(p, f->fl.session, -1);
    hand_over(p, f);
    return 0;
}

/* ---- lifecycle ---- */

struct push *push_open(const struct push_io *io, struct core_reply *refused)
{
    struct push *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->io = *io;
    p->io.resume_session = p->io.resume_event = NULL; /* borrowed for this call only */
    if (p->io.max_inflight <= 0)
        p->io.max_inflight = DEFAULT_MAX_INFLIGHT;
    pthread_mutex_init(&p->mu, NULL);
    fmutex_init(&p->send_mu);
    fcond_init(&p->cv);
    follow_group_init(&p->group);
    if (loop_spawn(writer_main, p) != 0) {
        log_event(LOG_ERROR, NULL, "writer_failed", "cannot start a connection's writer");
        follow_group_destroy(&p->group);
        pthread_mutex_destroy(&p->mu);
        fmutex_destroy(&p->send_mu);
        fcond_destroy(&p->cv);
        free(p);
        return NULL;
    }
    if (p->io.token_ended)
        auth_hold(&p->hold, &p->io.grant, p->io.token_ended, p->io.io);
    struct core_reply none;
    if (!refused)
        refused = &none;
    memset(refused, 0, sizeof *refused);
    if (io->resume_session && resume(p, io->resume_session, io->resume_event, refused) != 0 &&
        refused == &none)
        core_reply_clear(&none);
    return p;
}

/* The client can read what is in flight but answer nothing more. */
static void client_left(struct push *p)
{
    /* A subscription lasts until its client cancels it or goes: this one
     * can read no more than what is already in flight. */
    cancel_own(p, NULL, 1);
    pthread_mutex_lock(&p->mu);
    struct session *s = p->session;
    if (s)
        session_ref(s);
    pthread_mutex_unlock(&p->mu);
    if (s)
        core_client_gone(s);
    session_unref(s);
}

/* Waits up to drain_ms for every request of the connection to finish
 * sending: 0 when all did, -1 otherwise. */
static int drain(struct push *p, int64_t drain_ms)
{
    int64_t deadline = clock_mono_ms() + drain_ms;
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0 && !p->dead && clock_mono_ms() < deadline)
        fcond_wait_until(&p->cv, &p->mu, deadline);
    int left = p->busy;
    pthread_mutex_unlock(&p->mu);
    return left > 0 ? -1 : 0;
}

int push_close(struct push *p, int gone, int64_t drain_ms)
{
    if (!p)
        return 0;
    auth_release(&p->hold);
    if (gone)
        client_left(p);
    int drained = drain(p, drain_ms);
    pthread_mutex_lock(&p->mu);
    p->closing = 1;
    pthread_mutex_unlock(&p->mu);
    follow_wake(&p->group);
    /* The writer sees `closing` at its next look, within a message. On a
     * fiber this parks; a plain thread (an upgrade that never happened)
     * waits in slices with a deadline, which fcond does not report as
     * blocking. */
    pthread_mutex_lock(&p->mu);
    while (!p->writer_done)
        fcond_wait_until(&p->cv, &p->mu, clock_mono_ms() + WRITER_TICK_MS);
    pthread_mutex_unlock(&p->mu);
    /* Whatever was handed over after the writer's last look. */
    struct push_follow *in = p->incoming;
    p->incoming = NULL;
    while (in) {
        struct push_follow *next = in->next_f;
        follow_free(in);
        in = next;
    }
    session_unref(p->session);
    follow_group_destroy(&p->group);
    pthread_mutex_destroy(&p->mu);
    fmutex_destroy(&p->send_mu);
    fcond_destroy(&p->cv);
    free(p);
    return drained;
}
