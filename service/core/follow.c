/* follow — see follow.h. */
#include "follow.h"

#include "auth.h"
#include "clock.h"
#include "fiber.h"
#include "core_int.h"
#include "jsonrpc.h"
#include "protocol.h"
#include "randid.h"
#include "relay.h"
#include "session.h"
#include "workers.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* How long a JSON reply waits for the standalone stream's reader to write
 * the messages its request relayed there first: the client sees them before
 * the response, as on every transport. */
#define RELAY_WAIT_MS 2000

_Static_assert(FOLLOW_EVENT_ID_MAX >= RANDID_LEN + 22, "an event id fits: id, ':', an int64");

/* A follow's token: apart from the follow, since a transport moves and
 * copies its follow (a look ahead on a copy sees the token end too), while
 * auth holds this by its address. */
struct follow_token {
    struct auth_hold hold;
    _Atomic(const char *) why;      /* auth's static text, once it ended */
    struct stream *_Atomic reading; /* the follow's stream, once open */
    void (*wake)(void);
};

/* auth's callback, on the watcher's thread under its lock. The stream is
 * alive: follow_end lets go of the token before the stream. A reader
 * waiting on it returns (a probe), and a read after this one sees why:
 * each side writes its own word, then reads the other's. */
static void token_ended(void *ud, const char *why)
{
    struct follow_token *t = ud;
    atomic_store(&t->why, why);
    struct stream *s = atomic_load(&t->reading);
    if (s)
        stream_probe_readers(s);
    if (t->wake)
        t->wake();
}

int follow_token(struct follow *f, const struct auth_grant *grant, void (*wake)(void))
{
    if (!grant->principal[0] || f->token)
        return 0;
    struct follow_token *t = calloc(1, sizeof *t);
    if (!t)
        return -1;
    t->wake = wake;
    atomic_store(&t->reading, f->stream);
    f->token = t;
    auth_hold(&t->hold, grant, token_ended, t);
    return 0;
}

/* The event a read returns once the token ended, or FOLLOW_MESSAGE while
 * it is valid. */
static enum follow_event token_event(const struct follow *f)
{
    const char *why = f->token ? atomic_load(&f->token->why) : NULL;
    if (!why)
        return FOLLOW_MESSAGE;
    return strcmp(why, "token expired") == 0 ? FOLLOW_TOKEN_EXPIRED : FOLLOW_TOKEN_REVOKED;
}

static void start(struct follow *f, struct session *s, struct stream *st, int64_t next)
{
    struct follow_token *t = f->token;
    memset(f, 0, sizeof *f);
    f->token = t;
    if (t)
        atomic_store(&t->reading, st);
    f->stream = st;
    f->session = s;
    f->session_id = s ? session_id(s) : NULL;
    f->next = next;
    f->polling = s && protocol_has_sse_polling(session_protocol(s));
    stream_event_id(st, next - 1, f->event_id, sizeof f->event_id);
    stream_attach(st, &f->reader);
}

/* f->next moved past ch. */
static void read_past(struct follow *f, const struct stream_chunk *ch)
{
    f->next = ch->seq + 1;
    f->stored = 1;
    stream_event_id(f->stream, ch->seq, f->event_id, sizeof f->event_id);
}

void follow_reply(struct follow *f, struct core_reply *r, int final_only)
{
    if (r->session)
        session_ref(r->session);
    start(f, r->session, r->stream, 0);
    f->ephemeral = r->ephemeral && r->session;
    f->final_only = final_only;
    f->relay = final_only && !r->single && !f->ephemeral && r->session;
    r->stream = NULL;
}

void follow_resumed(struct follow *f, struct core_resume *res)
{
    start(f, res->session, res->stream, res->next);
    memset(res, 0, sizeof *res);
}

int follow_standalone(struct follow *f, struct session *s, int64_t probe_ms, int64_t from,
                      struct core_reply *refused)
{
    struct stream *st;
    int64_t cursor;
    if (core_standalone_claim(s, probe_ms, &st, &cursor, refused) != 0)
        return -1;
    session_ref(s);
    start(f, s, st, from >= 0 ? from : cursor);
    f->standalone = 1;
    /* A client that resumes past the cursor has seen what is before it. */
    session_set_get_cursor(s, f->next);
    session_touch(s);
    return 0;
}

/* A relayed client's cursor (legacy /sse): it must name a message of its
 * session's standalone stream, where the client reads everything. Fills
 * *s (a new reference) and *from, the message after the cursor. */
static int relayed_cursor(const struct core_caller *c, const char *cursor, struct session **s,
                          int64_t *from, struct core_reply *refused)
{
    struct core_resume res;
    if (core_resume(c, cursor, &res, refused) != 0)
        return -1;
    int standalone = res.standalone;
    *s = res.session;
    *from = res.next;
    res.session = NULL;
    core_resume_clear(&res);
    if (standalone)
        return 0;
    session_unref(*s);
    memset(refused, 0, sizeof *refused);
    core_reject(refused, CORE_BAD_REQUEST, NULL, JSONRPC_INVALID_PARAMS,
                "Bad Request: Last-Event-ID names no event of an /sse stream");
    return -1;
}

int follow_open(struct follow *f, const struct core_caller *c, const char *cursor, int64_t probe_ms,
                struct core_reply *refused)
{
    if (cursor && !c->relayed) {
        struct core_resume res;
        if (core_resume(c, cursor, &res, refused) != 0)
            return -1;
        follow_resumed(f, &res);
        return 0;
    }
    struct session *s;
    /* A relayed client that names its session, not a message, has seen
     * nothing of its stream but the endpoint event: from the start. */
    int64_t from = c->relayed ? 0 : -1;
    if (cursor) {
        if (relayed_cursor(c, cursor, &s, &from, refused) != 0)
            return -1;
    } else if (!(s = core_session_open(c, refused))) {
        return -1;
    }
    /* What a past process's relay had not copied comes first. */
    if (c->relayed)
        relay_catch_up(s);
    int rc = follow_standalone(f, s, probe_ms, from, refused);
    session_unref(s);
    return rc;
}

/* What stream_read's outcome w means to the transport. A stop tells its
 * cause: the session's end first (it ends the session's streams too), then
 * a reply that could not be stored. */
static enum follow_event event_of(struct follow *f, enum stream_wait w)
{
    enum follow_event token = token_event(f);
    if (w != STREAM_CHUNK && token != FOLLOW_MESSAGE)
        return token; /* a wait its end cut short */
    switch (w) {
    case STREAM_CHUNK:
        return FOLLOW_MESSAGE;
    case STREAM_TIMEOUT:
        return FOLLOW_IDLE;
    case STREAM_PROBE:
        return FOLLOW_PROBED;
    case STREAM_POLL:
        return FOLLOW_POLL;
    case STREAM_ENDED:
    case STREAM_DETACHED:
    case STREAM_REFUSED:
        break;
    }
    if (f->session && session_ended(f->session))
        return FOLLOW_SESSION_ENDED;
    if (stream_store_failed(f->stream))
        return FOLLOW_STORE_FAILED;
    return w == STREAM_ENDED ? FOLLOW_STREAM_ENDED : FOLLOW_DETACHED;
}

/* A final_only follow's read (follow_reply). */
static enum follow_event read_final(struct follow *f, int64_t deadline, struct stream_chunk *ch)
{
    int64_t relayed = -1;
    for (;;) {
        enum stream_wait w = stream_read(f->stream, &f->reader, f->next, deadline, ch);
        if (w == STREAM_POLL)
            continue;
        if (w == STREAM_CHUNK)
            read_past(f, ch);
        if (w != STREAM_CHUNK || ch->is_end) {
            /* The response after what it relayed, as on every transport
             * (but a token's end is told at once). */
            if (relayed >= 0 && token_event(f) == FOLLOW_MESSAGE)
                session_wait_get_cursor(f->session, relayed + 1, clock_mono_ms() + RELAY_WAIT_MS);
            return event_of(f, w);
        }
        if (f->relay) {
            int64_t r = core_relay_to_standalone(f->session, ch->msg, ch->len, NULL, 0);
            if (r >= 0)
                relayed = r;
        }
    }
}

enum follow_event follow_read(struct follow *f, int64_t deadline, struct stream_chunk *ch)
{
    if (deadline > 0)
        follow_sent(f); /* a read that waits: what came before is written */
    enum follow_event e = token_event(f);
    if (e != FOLLOW_MESSAGE)
        return e;
    if (!f->stream) /* only its token, so far */
        return FOLLOW_IDLE;
    if (f->final_only)
        return read_final(f, deadline, ch);
    enum stream_wait w = stream_read(f->stream, &f->reader, f->next, deadline, ch);
    if (w == STREAM_CHUNK)
        read_past(f, ch);
    else if (f->polling && !f->stored && w != STREAM_ENDED && w != STREAM_REFUSED &&
             token_event(f) == FOLLOW_MESSAGE)
        f->stored = stream_persist(f->stream) == 0; /* the stream goes on, or may be resumed */
    if (f->session && (w == STREAM_CHUNK || (w == STREAM_TIMEOUT && deadline > 0)))
        session_touch(f->session);
    return event_of(f, w);
}

void follow_sent(struct follow *f)
{
    if (f->standalone)
        session_set_get_cursor(f->session, f->next);
}

void follow_unread(struct follow *f, const struct stream_chunk *ch)
{
    f->next = ch->seq;
    stream_event_id(f->stream, ch->seq - 1, f->event_id, sizeof f->event_id);
}

static void end_own(void *arg)
{
    struct session *s = arg;
    core_end_session(s);
    session_unref(s);
}

void follow_end(struct follow *f)
{
    if (f->token) {
        auth_release(&f->token->hold); /* no token_ended runs after this */
        free(f->token);
    }
    if (f->group)
        stream_unwatch(f->stream, &f->watch);
    if (f->standalone)
        core_standalone_release(f->session, f->next);
    stream_unref(f->stream);
    if (!f->ephemeral)
        session_unref(f->session);
    else if (fiber_current() || workers_submit(end_own, f->session) != 0)
        end_own(f->session); /* the reference goes with it */
    memset(f, 0, sizeof *f);
}

void follow_group_init(struct follow_group *g)
{
    stream_waker_init(&g->waker);
    g->seen = 0;
}

void follow_group_destroy(struct follow_group *g)
{
    stream_waker_destroy(&g->waker);
}

void follow_join(struct follow *f, struct follow_group *g)
{
    f->group = g;
    stream_watch(f->stream, &f->watch, &g->waker);
}

void follow_wake(struct follow_group *g)
{
    stream_waker_signal(&g->waker);
}

void follow_wait(struct follow_group *g, int64_t deadline)
{
    /* The waiter looked at its follows after the last return: a change
     * since then moved the epoch past `seen`, and one before it was seen
     * by that look. */
    stream_waker_wait(&g->waker, g->seen, deadline);
    g->seen = stream_waker_epoch(&g->waker);
}
