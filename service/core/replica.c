/* replica — see replica.h. */
#include "replica.h"
#include "clock.h"
#include "log.h"
#include "store.h"
#include "stream.h"
#include "ticker.h"

#include <gnutls/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Signals waiting for the replica thread. Beyond this many the oldest are
 * dropped and the thread re-reads everything it follows instead. */
#define QUEUE_MAX 4096
/* Every stream others write is re-read at least this often, so that a lost
 * signal delays a reader by this much at worst. */
#define RESYNC_MS 2000

struct signal {
    char kind;
    char *key, *extra;
    struct signal *next;
};

static struct {
    struct store *store;
    struct replica_hooks hooks;
    int64_t lease_ms;
    struct ticker ticker;
    int running;
    pthread_mutex_t mu; /* guards the queue */
    struct signal *head, *tail;
    int queued;
    int overflow;                   /* signals were dropped: resync */
    int64_t next_beat, next_resync; /* monotonic ms (the thread's) */
    _Atomic int64_t inflight;
    pthread_mutex_t alive_mu;
    char *alive; /* the tags of the live processes, "tag,tag,...," (each beat) */
} rep = {.mu = PTHREAD_MUTEX_INITIALIZER,
         .alive_mu = PTHREAD_MUTEX_INITIALIZER,
         .ticker = TICKER_INITIALIZER};

static pthread_once_t run_once = PTHREAD_ONCE_INIT;
static char run[33], tag[13];

static void make_run(void)
{
    unsigned char raw[16];
    if (gnutls_rnd(GNUTLS_RND_NONCE, raw, sizeof raw) != 0) {
        /* Unique enough for a tag: time and pid. */
        int64_t t = clock_wall_ms();
        memcpy(raw, &t, sizeof t);
        memset(raw + sizeof t, 0, sizeof raw - sizeof t);
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(run + 2 * i, 3, "%02x", raw[i]);
    memcpy(tag, run, 12);
}

const char *replica_run(void)
{
    pthread_once(&run_once, make_run);
    return run;
}

const char *replica_tag(void)
{
    pthread_once(&run_once, make_run);
    return tag;
}

int replica_shared(void)
{
    return rep.running;
}

int replica_hex(const char *text, char *out, size_t cap)
{
    size_t n = strlen(text);
    if (2 * n + 1 > cap)
        return -1;
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", (unsigned char)text[i]);
    out[2 * n] = '\0';
    return 0;
}

int replica_unhex(const char *hex, char *out, size_t cap)
{
    size_t n = strlen(hex);
    if (n % 2 || n / 2 + 1 > cap)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (char)v;
    }
    out[n / 2] = '\0';
    return 0;
}

void replica_inflight_add(int delta)
{
    atomic_fetch_add(&rep.inflight, delta);
}

struct alive_list {
    char *v;
    size_t n, cap;
};

static void add_alive(void *arg, const char *node, int64_t beat_ms, int64_t inflight)
{
    (void)beat_ms;
    (void)inflight;
    struct alive_list *l = arg;
    if (l->n + 14 > l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        char *v = realloc(l->v, cap);
        if (!v)
            return;
        l->v = v;
        l->cap = cap;
    }
    l->n += (size_t)snprintf(l->v + l->n, l->cap - l->n, "%.12s,", node);
}

/* Which processes live, by tag, as the store says at this beat. */
static void read_alive(int64_t since_ms)
{
    struct alive_list l = {0};
    if (store_nodes_alive(rep.store, since_ms, add_alive, &l) != 0) {
        free(l.v);
        return;
    }
    pthread_mutex_lock(&rep.alive_mu);
    free(rep.alive);
    rep.alive = l.v ? l.v : strdup("");
    pthread_mutex_unlock(&rep.alive_mu);
}

static int in_alive(const char *needle)
{
    pthread_mutex_lock(&rep.alive_mu);
    /* Not read yet: assume alive (the inbox's message then waits unread). */
    int alive = !rep.alive || strstr(rep.alive, needle) != NULL;
    pthread_mutex_unlock(&rep.alive_mu);
    return alive;
}

int replica_tag_alive(const char *who)
{
    char needle[16];
    snprintf(needle, sizeof needle, "%.12s,", who);
    if (in_alive(needle))
        return 1;
    /* The list is a beat old: a process that started since is in the
     * store already. Asked only for answers to route (rare). */
    read_alive(clock_wall_ms() - rep.lease_ms);
    return in_alive(needle);
}

void replica_sweep(void)
{
    if (!rep.store)
        return;
    int64_t since = clock_wall_ms() - rep.lease_ms;
    read_alive(since);
    if (rep.hooks.orphans)
        rep.hooks.orphans(since);
}

/* On the store's listener thread: queue and wake, nothing more. */
static void on_signal(void *arg, char kind, const char *key, const char *extra)
{
    (void)arg;
    struct signal *sg = calloc(1, sizeof *sg);
    if (sg) {
        sg->kind = kind;
        sg->key = strdup(key ? key : "");
        sg->extra = extra ? strdup(extra) : NULL;
    }
    pthread_mutex_lock(&rep.mu);
    if (!sg || !sg->key || rep.queued >= QUEUE_MAX) {
        rep.overflow = 1;
        if (sg) {
            free(sg->key);
            free(sg->extra);
            free(sg);
        }
    } else {
        if (rep.tail)
            rep.tail->next = sg;
        else
            rep.head = sg;
        rep.tail = sg;
        rep.queued++;
    }
    pthread_mutex_unlock(&rep.mu);
    ticker_kick(&rep.ticker);
}

static void handle(const struct signal *sg)
{
    switch (sg->kind) {
    case STORE_SIGNAL_STREAM: {
        /* extra: the next seq, with 'e' appended when the stream ended. */
        char *end = NULL;
        long long next = sg->extra ? strtoll(sg->extra, &end, 10) : -1;
        int ended = end && *end == 'e';
        stream_refresh(sg->key, end && end != sg->extra ? next : -1, ended);
        break;
    }
    case STORE_SIGNAL_SESSION:
        if (rep.hooks.session_changed)
            rep.hooks.session_changed(sg->key);
        break;
    case STORE_SIGNAL_INBOX: {
        /* extra: "<inbox id>.<target>" */
        char *dot = NULL;
        long long id = sg->extra ? strtoll(sg->extra, &dot, 10) : 0;
        if (rep.hooks.inbox && id > 0 && dot && *dot == '.')
            rep.hooks.inbox(sg->key, id, dot + 1);
        break;
    }
    case STORE_SIGNAL_PROBE:
        if (rep.hooks.probe)
            rep.hooks.probe(sg->key);
        break;
    case STORE_SIGNAL_LIST:
        if (rep.hooks.list_changed)
            rep.hooks.list_changed(sg->key);
        break;
    case STORE_SIGNAL_RESOURCE: {
        size_t cap = strlen(sg->key) / 2 + 1;
        char *uri = malloc(cap);
        if (uri && replica_unhex(sg->key, uri, cap) == 0 && *uri && rep.hooks.resource_updated)
            rep.hooks.resource_updated(uri);
        free(uri);
        break;
    }
    case STORE_SIGNAL_RESYNC:
        stream_refresh_all();
        break;
    default:
        break;
    }
}

/* Handles the signals queued, re-reads the streams others write when due
 * (or signals were dropped), and beats when due. */
static int64_t replica_tick(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&rep.mu);
    struct signal *list = rep.head;
    int overflow = rep.overflow;
    rep.head = rep.tail = NULL;
    rep.queued = 0;
    rep.overflow = 0;
    pthread_mutex_unlock(&rep.mu);

    for (struct signal *sg = list, *next; sg; sg = next) {
        next = sg->next;
        handle(sg);
        free(sg->key);
        free(sg->extra);
        free(sg);
    }
    int64_t now = clock_mono_ms();
    if (overflow || now >= rep.next_resync) {
        stream_refresh_all();
        rep.next_resync = now + RESYNC_MS;
    }
    if (now >= rep.next_beat) {
        int64_t wall = clock_wall_ms();
        if (store_node_beat(rep.store, wall, atomic_load(&rep.inflight)) != 0)
            log_event(LOG_WARN, NULL, "replica_beat_failed", "store unavailable");
        if (rep.hooks.beat)
            rep.hooks.beat();
        /* The leader's connection holds this run's lock too
         * (mcpd_run_alive): take it before telling who lives. */
        int leader = store_leader(rep.store) == 1;
        read_alive(wall - rep.lease_ms);
        if (leader && rep.hooks.orphans)
            rep.hooks.orphans(wall - rep.lease_ms);
        rep.next_beat = now + REPLICA_BEAT_MS;
    }
    return rep.next_beat < rep.next_resync ? rep.next_beat : rep.next_resync;
}

int replica_start(struct store *st, int64_t lease_ms, const struct replica_hooks *hooks)
{
    if (store_backend_of(st) != STORE_POSTGRES)
        return 0;
    rep.store = st;
    rep.hooks = *hooks;
    rep.lease_ms = lease_ms;
    stream_registry_shared(1);
    store_signal_listen(st, on_signal, NULL);
    /* Alive before serving anything: a beat, and this run's lock (taken
     * with the leader's connection), so no other process's sweep takes
     * this one's first calls for a dead process's. */
    store_node_beat(st, clock_wall_ms(), 0);
    /* And who else lives, read before serving too: a request for a dead
     * process's call, the first thing a client retries after a SIGKILL
     * and restart, must not be handed to it. The leader ends such calls
     * now, as one process on SQLite does at start. */
    int leader = store_leader(st) == 1;
    read_alive(clock_wall_ms() - lease_ms);
    if (leader && rep.hooks.orphans)
        rep.hooks.orphans(clock_wall_ms() - lease_ms);
    rep.next_beat = clock_mono_ms() + REPLICA_BEAT_MS;
    rep.next_resync = clock_mono_ms() + RESYNC_MS;
    if (ticker_start(&rep.ticker,
                     &(struct ticker_job){.name = "mcpd-replica", .tick = replica_tick}) != 0)
        return -1;
    rep.running = 1;
    log_event(LOG_INFO, NULL, "replica_started", "run=%s lease_ms=%lld", replica_run(),
              (long long)lease_ms);
    return 0;
}

void replica_stop(void)
{
    if (!ticker_stop(&rep.ticker))
        return;
    store_signal_listen(rep.store, NULL, NULL);
    store_node_gone(rep.store);
    rep.running = 0;
    for (struct signal *sg = rep.head, *next; sg; sg = next) {
        next = sg->next;
        free(sg->key);
        free(sg->extra);
        free(sg);
    }
    rep.head = rep.tail = NULL;
    rep.queued = 0;
    pthread_mutex_lock(&rep.alive_mu);
    free(rep.alive);
    rep.alive = NULL;
    pthread_mutex_unlock(&rep.alive_mu);
}
