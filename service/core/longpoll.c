/* longpoll — see longpoll.h. */
#include "longpoll.h"
#include "clock.h"
#include "follow.h"
#include "jsonrpc.h"
#include "session.h"
#include "stream.h"
#include "ticker.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

int poll_opted_in(const json_t *params)
{
    return json_is_true(json_object_get(params, "stream"));
}

json_t *poll_ack(json_t *id, const struct stream *st, const char *transport)
{
    return jsonrpc_result(id, json_pack("{s:s, s:s, s:s}", "stream_id", stream_id(st), "status",
                                        "streaming_started", "transport", transport));
}

json_t *poll_chunk_notification(const struct stream *st, long long seq, const char *msg, size_t len,
                                int end)
{
    json_t *message = json_loadb(msg, len, JSON_ALLOW_NUL, NULL);
    if (!message)
        return NULL;
    return jsonrpc_notification("mcpd/chunk",
                                json_pack("{s:s, s:I, s:o, s:b}", "stream_id", stream_id(st), "seq",
                                          (json_int_t)seq, "message", message, "end", end));
}

/* seed 003's states: a stream with nothing in it yet is "initializing". */
static const char *state_of(struct stream *st)
{
    enum stream_state state = stream_state(st);
    if (state == STREAM_ACTIVE && stream_next_seq(st) == 0)
        return "initializing";
    return stream_state_name(state);
}

static json_int_t int_param(json_t *params, const char *key, json_int_t def, json_int_t max)
{
    json_t *v = json_object_get(params, key);
    json_int_t n = json_is_integer(v) ? json_integer_value(v) : def;
    if (n < 0)
        n = 0;
    return n > max ? max : n;
}

/* The answer to a poll from what its stream holds now. When there is no
 * chunk at from_seq yet and the stream is still being written, *target gets
 * a reference to it and *seq the position (the caller may park the poll
 * instead of sending this empty answer). */
static json_t *answer_now(struct session *s, json_t *id, json_t *params, const char *transport,
                          struct stream **target, int64_t *wait_seq)
{
    *target = NULL;
    json_t *sid = json_object_get(params, "stream_id");
    json_t *from = json_object_get(params, "from_seq");
    if (!json_is_string(sid) || (from && !json_is_integer(from)))
        return jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                             "Invalid params: mcpd/poll needs stream_id (string) and from_seq "
                             "(integer >= 0)",
                             NULL);
    struct stream *st = stream_find(json_string_value(sid));
    if (!st || strcmp(stream_session(st), session_id(s)) != 0) {
        stream_unref(st);
        return jsonrpc_error(id, JSONRPC_SESSION_NOT_FOUND, "Stream session not found or expired",
                             json_pack("{s:O, s:s}", "stream_id", sid, "transport", transport));
    }
    json_int_t seq = from ? json_integer_value(from) : 0;
    if (stream_cursor_check(st, seq) != STREAM_CURSOR_OK) {
        stream_unref(st);
        return jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                             "Invalid params: from_seq must be >= 0 and not past the end of a "
                             "stream still being written (poll on from the last next_seq)",
                             NULL);
    }
    json_int_t max_chunks = int_param(params, "max_chunks", 100, POLL_MAX_CHUNKS);
    if (max_chunks == 0)
        max_chunks = 1;

    struct stream_reader tok;
    stream_observe(st, &tok);
    json_t *chunks = json_array();
    for (json_int_t n = 0; n < max_chunks; n++) {
        struct stream_chunk ch;
        if (stream_read(st, &tok, seq, 0, &ch) != STREAM_CHUNK)
            break;
        json_t *message = json_loadb(ch.msg, ch.len, JSON_ALLOW_NUL, NULL);
        json_array_append_new(chunks,
                              json_pack("{s:I, s:o, s:b}", "seq", (json_int_t)ch.seq, "message",
                                        message ? message : json_null(), "end", ch.is_end));
        seq = ch.seq + 1;
    }
    int64_t next_available = stream_next_seq(st);
    const char *state = state_of(st);
    int active = stream_state(st) == STREAM_ACTIVE;
    json_t *result = json_pack("{s:s, s:o, s:b, s:I, s:s}", "stream_id", stream_id(st), "chunks",
                               chunks, "has_more", active || seq < next_available, "next_seq",
                               (json_int_t)seq, "state", state);
    if (active && json_array_size(chunks) == 0) {
        *target = st;
        *wait_seq = seq;
    } else {
        stream_unref(st);
    }
    return jsonrpc_result(id, result);
}

/* The answer is the reply stream's one message. It is stored whatever the
 * session's cap (a poll past it still learns where its stream stands), and
 * counted. */
static void deliver(struct session *s, struct stream *reply, json_t *answer)
{
    size_t len;
    char *text = jsonrpc_dump(answer, &len);
    enum stream_state end = json_object_get(answer, "error") ? STREAM_ERROR : STREAM_FINISHED;
    if (text)
        session_charge_always(s, len);
    if (!text || stream_append(reply, text, len, end) < 0)
        stream_end(reply, STREAM_ERROR);
    free(text);
    json_decref(answer);
}

/* ---- the parking lot: polls waiting for a chunk, followed by one thread ---- */

struct parked {
    struct parked *next;
    struct session *s;
    json_t *id, *params;
    const char *transport;
    struct stream *reply, *target;
    struct stream_watch watch;
    int64_t seq, deadline;
};

static struct {
    pthread_mutex_t mu; /* guards head */
    struct parked *head;
    struct follow_group group; /* the parked polls' streams wake the lot */
    struct ticker ticker;
} lot = {.mu = PTHREAD_MUTEX_INITIALIZER, .ticker = TICKER_INITIALIZER};

/* Its answer can go now: a chunk, the end, the session's end, the deadline
 * or (all) shutdown. */
static int due(struct parked *p, int64_t now, int all)
{
    return all || now >= p->deadline || stream_next_seq(p->target) > p->seq ||
           stream_state(p->target) != STREAM_ACTIVE || session_ended(p->s);
}

static void unpark(struct parked *p)
{
    stream_unwatch(p->target, &p->watch);
    struct stream *target;
    int64_t seq;
    json_t *answer = answer_now(p->s, p->id, p->params, p->transport, &target, &seq);
    stream_unref(target);
    /* The place first: a client that polls again as soon as it reads the
     * answer must find it free, not at the cap (a spurious 429). */
    session_poll_leave(p->s);
    deliver(p->s, p->reply, answer);
    stream_unref(p->target);
    stream_unref(p->reply);
    session_unref(p->s);
    json_decref(p->id);
    json_decref(p->params);
    free(p);
}

/* Answers the parked polls that are due (every one, with all). Returns the
 * earliest deadline of those left, a second ahead at the latest. */
static int64_t lot_sweep(int all)
{
    int64_t now = clock_mono_ms(), next = now + 1000;
    struct parked *ready = NULL;
    pthread_mutex_lock(&lot.mu);
    for (struct parked **pp = &lot.head; *pp;) {
        struct parked *p = *pp;
        if (due(p, now, all)) {
            *pp = p->next;
            p->next = ready;
            ready = p;
            continue;
        }
        if (p->deadline < next)
            next = p->deadline;
        pp = &p->next;
    }
    pthread_mutex_unlock(&lot.mu);
    while (ready) {
        struct parked *p = ready;
        ready = p->next;
        unpark(p);
    }
    return next;
}

static int64_t lot_tick(void *arg)
{
    (void)arg;
    return lot_sweep(0);
}

static void lot_sleep(void *group, int64_t deadline)
{
    follow_wait(group, deadline);
}

static void lot_wake(void *group)
{
    follow_wake(group);
}

int poll_lot_start(void)
{
    follow_group_init(&lot.group);
    if (ticker_start(&lot.ticker, &(struct ticker_job){.name = "mcpd-longpoll",
                                                       .tick = lot_tick,
                                                       .arg = &lot.group,
                                                       .sleep = lot_sleep,
                                                       .wake = lot_wake}) != 0) {
        follow_group_destroy(&lot.group);
        return -1;
    }
    return 0;
}

void poll_lot_stop(void)
{
    if (!ticker_stop(&lot.ticker))
        return;
    /* After the thread: nothing else sweeps the lot now. */
    lot_sweep(1);
    follow_group_destroy(&lot.group);
}

int poll_submit(struct session *s, json_t *id, json_t *params, const char *transport,
                struct stream *reply)
{
    struct stream *target;
    int64_t seq;
    json_t *answer = answer_now(s, id, params, transport, &target, &seq);
    json_int_t wait_ms = int_param(params, "wait_ms", 0, POLL_MAX_WAIT_MS);
    struct parked *p = target && wait_ms > 0 ? calloc(1, sizeof *p) : NULL;
    if (!p) {
        stream_unref(target);
        deliver(s, reply, answer);
        return 0;
    }
    int rc = session_poll_enter(s);
    if (rc != 0) {
        stream_unref(target);
        json_decref(answer);
        free(p);
        return rc;
    }
    json_decref(answer);
    session_ref(s);
    stream_ref(reply);
    *p = (struct parked){.s = s,
                         .id = json_incref(id),
                         .params = json_incref(params),
                         .transport = transport,
                         .reply = reply,
                         .target = target,
                         .seq = seq,
                         .deadline = clock_mono_ms() + wait_ms};
    /* A raw watch on the group's waker, as follow_join makes for a follow. */
    stream_watch(target, &p->watch, &lot.group.waker);
    pthread_mutex_lock(&lot.mu);
    p->next = lot.head;
    lot.head = p;
    pthread_mutex_unlock(&lot.mu);
    /* The lot checks it at once: a chunk may have come before the watch. */
    ticker_kick(&lot.ticker);
    return 0;
}
