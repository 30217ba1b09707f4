/* relay — see relay.h. */
#include "relay.h"
#include "clock.h"
#include "core_int.h"
#include "follow.h"
#include "jsonrpc.h"
#include "log.h"
#include "session.h"
#include "store.h"
#include "stream.h"
#include "table.h"
#include "ticker.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The relay wakes at least this often, and copies at most this many
 * messages of one stream before looking at the others. */
#define RELAY_TICK_MS 1000
#define RELAY_BURST 32
#define RELAY_STACK (128 * 1024)

/* One thread copies every legacy request's stream onto its session's
 * standalone stream, in each stream's order, as messages are committed.
 * It follows many streams with one follow_group, as push.c's writer does, and
 * lets go of a stream when its last message is copied. */

struct relay_item {
    struct session *session;
    struct stream *stream;
    struct stream_reader tok;
    struct stream_watch watch;
    int64_t next;
    int catch_up; /* a past process's stream (relay_catch_up) */
    struct relay_item *next_i;
};

static struct {
    pthread_mutex_t mu;
    struct store *store;
    int64_t started_ms;          /* wall clock: streams older than this are a past process's */
    struct table *followed;      /* ids of the streams with an item, under mu */
    struct table *caught_up;     /* a past process's streams: how far a finished catch-up got */
    struct relay_item *incoming; /* handed over, not yet taken (newest first) */
    int open;                    /* takes streams (under mu): started, not stopping */
    struct relay_item *list;     /* the thread's (until it is stopped): followed, oldest first */
    struct follow_group group;   /* the followed streams wake the thread */
    int group_ready;
    struct ticker ticker;
} relay = {.mu = PTHREAD_MUTEX_INITIALIZER, .ticker = TICKER_INITIALIZER};

static void relay_item_free(struct relay_item *it)
{
    pthread_mutex_lock(&relay.mu);
    table_del(relay.followed, stream_id(it->stream));
    /* A second resume may have read the store's mark before this item
     * moved it on: it starts from here instead. */
    if (it->catch_up)
        table_put(relay.caught_up, stream_id(it->stream), (void *)(intptr_t)it->next);
    pthread_mutex_unlock(&relay.mu);
    stream_unref(it->stream);
    session_unref(it->session);
    free(it);
}

enum relay_pump { RELAY_IDLE, RELAY_SENT, RELAY_DONE };

static enum relay_pump relay_pump(struct relay_item *it)
{
    enum relay_pump r = RELAY_IDLE;
    for (int n = 0; n < RELAY_BURST; n++) {
        struct stream_chunk ch;
        enum stream_wait w = stream_read(it->stream, &it->tok, it->next, 0, &ch);
        if (w == STREAM_POLL || w == STREAM_PROBE)
            continue;
        if (w == STREAM_ENDED || w == STREAM_DETACHED || w == STREAM_REFUSED)
            return RELAY_DONE;
        if (w != STREAM_CHUNK)
            return r;
        if (core_relay_to_standalone(it->session, ch.msg, ch.len, stream_id(it->stream),
                                     ch.seq + 1) < 0 &&
            !session_ended(it->session))
            log_event(
                LOG_WARN, session_id(it->session), "relay_failed",
                "message %lld of stream %s did not reach the standalone stream (session storage "
                "full, or the store failed)",
                (long long)ch.seq, stream_id(it->stream));
        it->next = ch.seq + 1;
        if (ch.is_end)
            return RELAY_DONE;
        r = RELAY_SENT;
    }
    return r;
}

/* One look at every followed stream. */
static int64_t relay_tick(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&relay.mu);
    struct relay_item *in = relay.incoming;
    relay.incoming = NULL;
    pthread_mutex_unlock(&relay.mu);
    /* Oldest first, at the end of the list. */
    struct relay_item **tail = &relay.list;
    while (*tail)
        tail = &(*tail)->next_i;
    struct relay_item *rev = NULL;
    while (in) {
        struct relay_item *next = in->next_i;
        in->next_i = rev;
        rev = in;
        in = next;
    }
    for (struct relay_item *it = rev; it; it = it->next_i) {
        stream_observe(it->stream, &it->tok);
        /* A raw watch on the group's waker, as follow_join makes. */
        stream_watch(it->stream, &it->watch, &relay.group.waker);
    }
    *tail = rev;
    int busy = 0;
    for (struct relay_item **ip = &relay.list; *ip;) {
        struct relay_item *it = *ip;
        enum relay_pump r = relay_pump(it);
        if (r == RELAY_DONE) {
            *ip = it->next_i;
            stream_unwatch(it->stream, &it->watch);
            relay_item_free(it);
            continue;
        }
        busy |= r == RELAY_SENT;
        ip = &it->next_i;
    }
    /* A stream with more to copy is looked at again at once. */
    return busy ? 0 : clock_mono_ms() + RELAY_TICK_MS;
}

static void relay_sleep(void *group, int64_t deadline)
{
    follow_wait(group, deadline);
}

static void relay_wake(void *group)
{
    follow_wake(group);
}

/* Hands st to the relay from message `from` on (takes the reference to
 * st). Returns 0 (also when st is followed already: nothing to add), or -1
 * (the relay is not running, out of memory). */
static int follow_from(struct session *s, struct stream *st, int64_t from, int catch_up)
{
    struct relay_item *it = calloc(1, sizeof *it);
    pthread_mutex_lock(&relay.mu);
    int ok = it && relay.open;
    int dup = ok && table_get(relay.followed, stream_id(st));
    if (ok && !dup && table_put(relay.followed, stream_id(st), it) != 0)
        ok = 0;
    if (ok && !dup) {
        intptr_t done = catch_up ? (intptr_t)table_get(relay.caught_up, stream_id(st)) : 0;
        session_ref(s);
        it->session = s;
        it->stream = st;
        it->next = done > from ? done : from;
        it->catch_up = catch_up;
        it->next_i = relay.incoming;
        relay.incoming = it;
    }
    pthread_mutex_unlock(&relay.mu);
    if (!ok || dup) {
        free(it);
        stream_unref(st);
        return ok ? 0 : -1;
    }
    ticker_kick(&relay.ticker);
    return 0;
}

int relay_follow(struct session *s, struct stream *st)
{
    return follow_from(s, st, 0, 0);
}

struct past {
    struct past *next;
    int64_t copied;
    char id[];
};

static void collect_past(void *arg, const char *stream_id, int64_t copied)
{
    struct past **head = arg;
    size_t n = strlen(stream_id) + 1;
    struct past *p = malloc(sizeof *p + n);
    if (!p)
        return;
    p->copied = copied;
    memcpy(p->id, stream_id, n);
    p->next = *head;
    *head = p;
}

void relay_catch_up(struct session *s)
{
    struct past *list = NULL, *rev = NULL, *next;
    if (store_streams_relayed(relay.store, session_id(s), relay.started_ms, collect_past, &list) !=
        0)
        log_event(LOG_WARN, session_id(s), "relay_catch_up_failed",
                  "could not read the relay's progress from the store");
    for (; list; list = next) { /* back in creation order */
        next = list->next;
        list->next = rev;
        rev = list;
    }
    for (struct past *p = rev; p; p = next) {
        next = p->next;
        struct stream *st = stream_find(p->id);
        /* An ended stream whose every message is copied ends its item at
         * once; the others get what they missed, in order. */
        if (st && stream_next_seq(st) > p->copied)
            follow_from(s, st, p->copied, 1);
        else
            stream_unref(st);
        free(p);
    }
}

int relay_message(struct session *s, json_t *msg)
{
    size_t len;
    char *text = msg ? jsonrpc_dump(msg, &len) : NULL;
    json_decref(msg);
    int rc = text && core_relay_to_standalone(s, text, len, NULL, 0) >= 0 ? 0 : -1;
    if (rc != 0)
        log_event(LOG_WARN, session_id(s), "relay_failed",
                  "an immediate answer did not reach the standalone stream");
    free(text);
    return rc;
}

int relay_start(struct store *st)
{
    relay.store = st;
    relay.started_ms = clock_wall_ms();
    if (!(relay.followed = table_new()) || !(relay.caught_up = table_new()))
        return -1;
    follow_group_init(&relay.group);
    relay.group_ready = 1;
    if (ticker_start(&relay.ticker, &(struct ticker_job){.name = "mcpd-relay",
                                                         .stack = RELAY_STACK,
                                                         .tick = relay_tick,
                                                         .arg = &relay.group,
                                                         .sleep = relay_sleep,
                                                         .wake = relay_wake}) != 0)
        return -1;
    pthread_mutex_lock(&relay.mu);
    relay.open = 1;
    pthread_mutex_unlock(&relay.mu);
    return 0;
}

void relay_stop(void)
{
    pthread_mutex_lock(&relay.mu);
    relay.open = 0;
    pthread_mutex_unlock(&relay.mu);
    if (ticker_stop(&relay.ticker)) {
        /* The thread's items, then those handed over since its last look. */
        while (relay.list) {
            struct relay_item *it = relay.list;
            relay.list = it->next_i;
            stream_unwatch(it->stream, &it->watch);
            relay_item_free(it);
        }
        struct relay_item *in = relay.incoming;
        relay.incoming = NULL;
        while (in) {
            struct relay_item *next = in->next_i;
            relay_item_free(in);
            in = next;
        }
    }
    if (relay.group_ready) {
        follow_group_destroy(&relay.group);
        relay.group_ready = 0;
    }
    table_free(relay.followed);
    table_free(relay.caught_up);
    relay.followed = relay.caught_up = NULL;
}
