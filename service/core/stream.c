/* stream — see stream.h. */
#include "stream.h"
#include "clock.h"
#include "event_id.h"
#include "fcond.h"
#include "jsonrpc.h"
#include "log.h"
#include "metrics.h"
#include "randid.h"
#include "store.h"
#include "strcopy.h"
#include "table.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct chunk {
    char *msg;
    size_t len;
};

struct stream {
    char id[RANDID_LEN + 1];
    char session[RANDID_LEN + 1];
    int standalone;
    int ephemeral;            /* memory only: never written to the store */
    int persisted;            /* its row is in the store (written with its first message) */
    int remote;               /* loaded from the store while active: another process writes it */
    char *owner;              /* the run that writes it, when another (stream_create_owned) */
    _Atomic int store_failed; /* a message could not be stored (stream_store_failed) */
    char *request_id;         /* JSON text, kept until the row is written */
    _Atomic int refs;
    /* Serialises appenders, so seqs commit in order. An fmutex: it is held
     * across the commit, which parks a fiber, and another fiber of the same
     * thread may append meanwhile (a call's relayed requests). */
    struct fmutex append_mu;
    pthread_mutex_t mu; /* guards everything below */
    struct fcond cv;    /* a chunk arrived, the stream ended, or readers detached */
    struct chunk *chunks;
    int64_t nchunks, cap;
    enum stream_state state;
    int64_t ended_wall_ms;
    unsigned reader_gen;
    unsigned poll_epoch;
    unsigned probe_epoch;
    struct stream_watch *watches; /* followers' wakers, signalled with cv */
};

/* The registry holds the streams still being written: an ended stream
 * never changes, so once it ends it leaves memory and stream_find loads it
 * from the store if a client resumes it. Sharded so that concurrent
 * requests do not queue on one lock. */
#define SHARDS 32

struct shard {
    pthread_mutex_t mu;
    struct table *streams;
    /* Held while a stream of the shard is loaded from the store, and while
     * another process's news of one is applied (stream_refresh): two
     * loaders make one copy, and news that arrives during a load waits for
     * the copy, rather than miss it. An fmutex, not mu: a load reads the
     * store, which parks a fiber. */
    struct fmutex load_mu;
};

static struct {
    struct shard shards[SHARDS];
    struct store *_Atomic store;
    _Atomic int shared;   /* other processes write to the store too (stream_registry_shared) */
    _Atomic int detached; /* shutting down: every read returns STREAM_DETACHED */
    void (*on_change)(const char *id); /* set before serving (stream_on_change) */
} reg;

/* After a request stream changed, with none of its locks held: the hook
 * may read it (and append to others). */
static void changed(struct stream *s)
{
    if (reg.on_change && !s->standalone)
        reg.on_change(s->id);
}

void stream_on_change(void (*fn)(const char *stream_id))
{
    reg.on_change = fn;
}

static pthread_once_t shards_once = PTHREAD_ONCE_INIT;

static void shards_init(void)
{
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_init(&reg.shards[i].mu, NULL);
        fmutex_init(&reg.shards[i].load_mu);
    }
}

/* Stream ids end in random hex digits. */
static struct shard *shard_of(const char *id)
{
    size_t len = strlen(id);
    unsigned h = 0;
    for (size_t i = len > 4 ? len - 4 : 0; i < len; i++)
        h = h * 31 + (unsigned char)id[i];
    return &reg.shards[h % SHARDS];
}

static const char *const state_names[] = {"active", "finished", "error", "expired"};

const char *stream_state_name(enum stream_state st)
{
    return state_names[st];
}

static enum stream_state state_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (name && strcmp(name, state_names[i]) == 0)
            return (enum stream_state)i;
    return STREAM_ERROR;
}

void stream_registry_init(struct store *st)
{
    pthread_once(&shards_once, shards_init);
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_lock(&reg.shards[i].mu);
        if (!reg.shards[i].streams)
            reg.shards[i].streams = table_new();
        pthread_mutex_unlock(&reg.shards[i].mu);
    }
    reg.store = st;
    reg.detached = 0;
}

static struct stream *stream_alloc(const char *id, const char *session, int standalone)
{
    struct stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    strcopy(s->id, sizeof s->id, id);
    strcopy(s->session, sizeof s->session, session);
    s->standalone = standalone;
    s->refs = 1;
    fmutex_init(&s->append_mu);
    pthread_mutex_init(&s->mu, NULL);
    fcond_init(&s->cv);
    return s;
}

static void stream_free(struct stream *s)
{
    free(s->request_id);
    free(s->owner);
    for (int64_t i = 0; i < s->nchunks; i++)
        free(s->chunks[i].msg);
    free(s->chunks);
    fmutex_destroy(&s->append_mu);
    pthread_mutex_destroy(&s->mu);
    fcond_destroy(&s->cv);
    free(s);
}

void stream_ref(struct stream *s)
{
    atomic_fetch_add(&s->refs, 1);
}

void stream_unref(struct stream *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1)
        stream_free(s);
}

/* Tells readers blocked on cv and followers watching the stream that it
 * changed. Called with s->mu held. */
static void broadcast(struct stream *s)
{
    fcond_broadcast(&s->cv);
    for (struct stream_watch *w = s->watches; w; w = w->next)
        stream_waker_signal(w->waker);
}

static void wake(struct stream *s)
{
    pthread_mutex_lock(&s->mu);
    s->reader_gen++;
    broadcast(s);
    pthread_mutex_unlock(&s->mu);
}

static void detach_one(void *arg, const char *key, void *value)
{
    (void)arg;
    (void)key;
    wake(value);
}

void stream_registry_detach_all(void)
{
    reg.detached = 1;
    for (int i = 0; i < SHARDS; i++) {
        struct shard *sh = &reg.shards[i];
        pthread_mutex_lock(&sh->mu);
        if (sh->streams)
            table_each(sh->streams, detach_one, NULL);
        pthread_mutex_unlock(&sh->mu);
    }
}

static void unref_one(void *arg, const char *key, void *value)
{
    (void)arg;
    (void)key;
    stream_unref(value);
}

void stream_registry_shutdown(void)
{
    stream_registry_detach_all();
    for (int i = 0; i < SHARDS; i++) {
        struct shard *sh = &reg.shards[i];
        pthread_mutex_lock(&sh->mu);
        if (sh->streams) {
            table_each(sh->streams, unref_one, NULL);
            table_free(sh->streams);
            sh->streams = NULL;
        }
        pthread_mutex_unlock(&sh->mu);
    }
    reg.store = NULL;
}

/* An ended stream leaves the registry (see the registry's comment). */
static void unregister(struct stream *s)
{
    struct shard *sh = shard_of(s->id);
    pthread_mutex_lock(&sh->mu);
    int held = sh->streams && table_get(sh->streams, s->id) == s;
    if (held)
        table_del(sh->streams, s->id);
    pthread_mutex_unlock(&sh->mu);
    if (held)
        stream_unref(s);
}

struct stream *stream_create_owned(const char *session_id, const json_t *request_id,
                                   const char *owner)
{
    struct stream *s = stream_create(session_id, STREAM_REQUEST, request_id);
    if (s) {
        s->remote = 1;
        s->owner = strdup(owner);
        if (!s->owner) {
            stream_end(s, STREAM_ERROR);
            stream_unref(s);
            return NULL;
        }
    }
    return s;
}

struct stream *stream_create(const char *session_id, enum stream_kind kind,
                             const json_t *request_id)
{
    char id[RANDID_LEN + 1];
    if (randid_make_ordered(id) != 0)
        return NULL;
    struct stream *s = stream_alloc(id, session_id, kind == STREAM_STANDALONE);
    if (!s)
        return NULL;
    s->ephemeral = kind == STREAM_EPHEMERAL;
    s->request_id = request_id ? jsonrpc_dump(request_id, NULL) : NULL;
    struct shard *sh = shard_of(s->id);
    pthread_mutex_lock(&sh->mu);
    int ok = sh->streams && reg.store && table_put(sh->streams, s->id, s) == 0;
    if (ok)
        stream_ref(s); /* the registry's reference */
    pthread_mutex_unlock(&sh->mu);
    if (!ok) {
        stream_unref(s);
        return NULL;
    }
    return s;
}

/* Chunks read from the store: those from seq `from` on, in order. */
struct fresh {
    int64_t from;
    struct chunk *v;
    int64_t n, cap;
    int oom;
    int end_seen; /* the last chunk read is the stream's last */
};

static void fresh_chunk(void *arg, int64_t seq, const char *msg, size_t len, int is_end)
{
    struct fresh *f = arg;
    /* A gap cannot happen with ordered appends; never expose one. */
    if (f->oom || seq != f->from + f->n)
        return;
    f->end_seen = is_end;
    if (f->n == f->cap) {
        int64_t cap = f->cap ? f->cap * 2 : 8;
        struct chunk *c = realloc(f->v, (size_t)cap * sizeof *c);
        if (!c) {
            f->oom = 1;
            return;
        }
        f->v = c;
        f->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) {
        f->oom = 1;
        return;
    }
    memcpy(copy, msg, len);
    copy[len] = '\0';
    f->v[f->n].msg = copy;
    f->v[f->n].len = len;
    f->n++;
}

/* The state of a stream read as row + chunks f. The row is read before
 * the chunks: a last chunk committed between the two reads comes with a
 * row that still says active. The row is read again then, so that no
 * reader sees the last message without the end. */
static enum stream_state settled(const char *id, struct store_stream *row, const struct fresh *f)
{
    enum stream_state state = state_parse(row->state);
    if (f->end_seen && state == STREAM_ACTIVE) {
        struct store_stream again;
        struct fresh none = {.from = f->from + f->n};
        if (store_stream_get_from(reg.store, id, none.from, &again, fresh_chunk, &none) == 0) {
            state = state_parse(again.state);
            row->ended_ms = again.ended_ms;
            store_stream_free(&again);
        }
        for (int64_t i = 0; i < none.n; i++)
            free(none.v[i].msg);
        free(none.v);
    }
    return state;
}

static void fresh_free(struct fresh *f)
{
    for (int64_t i = 0; i < f->n; i++)
        free(f->v[i].msg);
    free(f->v);
}

/* A new reference to the stream if it is in the registry. */
static struct stream *registered(const char *id)
{
    struct shard *sh = shard_of(id);
    pthread_mutex_lock(&sh->mu);
    struct stream *s = sh->streams ? table_get(sh->streams, id) : NULL;
    if (s)
        stream_ref(s);
    pthread_mutex_unlock(&sh->mu);
    return s;
}

struct stream *stream_find(const char *id)
{
    struct stream *s = registered(id);
    if (s)
        return s;
    struct shard *sh = shard_of(id);
    fmutex_lock(&sh->load_mu);
    struct store *st = reg.store;
    struct store_stream row;
    struct fresh f = {0};
    struct stream *loaded = registered(id); /* loaded while this one waited */
    if (!loaded && st && store_stream_get(st, id, &row, fresh_chunk, &f) == 0) {
        enum stream_state state = settled(id, &row, &f);
        loaded = stream_alloc(row.id, row.session_id, strcmp(row.kind, "standalone") == 0);
        if (loaded) {
            loaded->chunks = f.v;
            loaded->nchunks = f.n;
            loaded->cap = f.cap;
            f.v = NULL;
            f.n = 0;
            loaded->state = state;
            loaded->persisted = 1;
            loaded->remote = 1;
            /* Whose it is matters only while it is being written. */
            if (loaded->state == STREAM_ACTIVE && row.owner)
                loaded->owner = strdup(row.owner);
            loaded->ended_wall_ms = row.ended_ms;
            /* Only a stream still being written needs one shared copy. */
            pthread_mutex_lock(&sh->mu);
            if (loaded->state == STREAM_ACTIVE && sh->streams &&
                table_put(sh->streams, loaded->id, loaded) == 0)
                stream_ref(loaded);
            pthread_mutex_unlock(&sh->mu);
        }
        store_stream_free(&row);
    }
    fresh_free(&f);
    fmutex_unlock(&sh->load_mu);
    return loaded;
}

const char *stream_owner(const struct stream *s)
{
    return s->owner;
}

int stream_store_failed(struct stream *s)
{
    return s->store_failed;
}

const char *stream_id(const struct stream *s)
{
    return s->id;
}

const char *stream_session(const struct stream *s)
{
    return s->session;
}

int stream_is_standalone(const struct stream *s)
{
    return s->standalone;
}

enum stream_state stream_state(struct stream *s)
{
    pthread_mutex_lock(&s->mu);
    enum stream_state st = s->state;
    pthread_mutex_unlock(&s->mu);
    return st;
}

int64_t stream_next_seq(struct stream *s)
{
    pthread_mutex_lock(&s->mu);
    int64_t n = s->nchunks;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Makes room for `need` chunks (s->mu held). 0, or -1 out of memory. */
static int grow(struct stream *s, int64_t need)
{
    if (need <= s->cap)
        return 0;
    int64_t cap = s->cap ? s->cap : 4;
    while (cap < need)
        cap *= 2;
    struct chunk *c = realloc(s->chunks, (size_t)cap * sizeof *c);
    if (!c)
        return -1;
    s->chunks = c;
    s->cap = cap;
    return 0;
}

/* Adds what another process wrote to s since memory last looked: the
 * chunks past nchunks and the end. Called with append_mu held, so no
 * append of this process interleaves. Returns 1 if anything was new, 0 if
 * not, -1 if the store could not be read. */
static int refresh_locked(struct stream *s)
{
    pthread_mutex_lock(&s->mu);
    int64_t have = s->nchunks;
    int active = s->state == STREAM_ACTIVE;
    pthread_mutex_unlock(&s->mu);
    if (!active || !s->persisted || s->ephemeral || !reg.store)
        return 0;
    struct store_stream row;
    struct fresh f = {.from = have};
    int rc = store_stream_get_from(reg.store, s->id, have, &row, fresh_chunk, &f);
    if (rc != 0) {
        fresh_free(&f);
        /* Gone from the store: its session was deleted elsewhere. */
        if (rc == 1) {
            pthread_mutex_lock(&s->mu);
            s->state = STREAM_EXPIRED;
            broadcast(s);
            pthread_mutex_unlock(&s->mu);
            return 1;
        }
        return -1;
    }
    enum stream_state state = settled(s->id, &row, &f);
    int changed = 0;
    pthread_mutex_lock(&s->mu);
    if (f.n > 0 && grow(s, s->nchunks + f.n) == 0) {
        memcpy(s->chunks + s->nchunks, f.v, (size_t)f.n * sizeof *f.v);
        s->nchunks += f.n;
        f.n = 0;
        changed = 1;
    }
    /* The end only with every chunk before it, so no reader sees an end
     * that skips a message. */
    if (state != STREAM_ACTIVE && f.n == 0 && !f.oom) {
        s->state = state;
        s->ended_wall_ms = row.ended_ms;
        changed = 1;
    }
    if (changed)
        broadcast(s);
    pthread_mutex_unlock(&s->mu);
    store_stream_free(&row);
    fresh_free(&f);
    return changed;
}

static void refresh(struct stream *s)
{
    fmutex_lock(&s->append_mu);
    int fresh = refresh_locked(s) == 1;
    int ended = stream_state(s) != STREAM_ACTIVE;
    fmutex_unlock(&s->append_mu);
    if (ended)
        unregister(s);
    if (fresh)
        changed(s);
}

void stream_registry_shared(int shared)
{
    reg.shared = shared;
}

void stream_refresh(const char *id, int64_t next_seq, int ended)
{
    /* A load of this stream in progress publishes its copy first. */
    struct shard *sh = shard_of(id);
    fmutex_lock(&sh->load_mu);
    struct stream *s = registered(id);
    fmutex_unlock(&sh->load_mu);
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    int behind = next_seq < 0 || next_seq > s->nchunks || (ended && s->state == STREAM_ACTIVE);
    pthread_mutex_unlock(&s->mu);
    if (behind)
        refresh(s);
    stream_unref(s);
}

struct refresh_list {
    struct stream **v;
    size_t n, cap;
};

static void pick_shared(void *arg, const char *key, void *value)
{
    (void)key;
    struct refresh_list *l = arg;
    struct stream *s = value;
    if (!s->remote && !s->standalone)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct stream **v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return;
        l->v = v;
        l->cap = cap;
    }
    stream_ref(s);
    l->v[l->n++] = s;
}

void stream_refresh_all(void)
{
    struct refresh_list l = {0};
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_lock(&reg.shards[i].mu);
        if (reg.shards[i].streams)
            table_each(reg.shards[i].streams, pick_shared, &l);
        pthread_mutex_unlock(&reg.shards[i].mu);
    }
    for (size_t i = 0; i < l.n; i++) {
        refresh(l.v[i]);
        stream_unref(l.v[i]);
    }
    free(l.v);
}

/* Writes seq (or no chunk when seq < 0) and/or the end to the store, with
 * the stream's row when this is its first write. Called with append_mu. */
static int write_through(struct stream *s, int64_t seq, const char *msg, size_t len,
                         enum stream_state end_state, int64_t now,
                         const struct store_relay_mark *mark)
{
    if (s->ephemeral)
        return 0;
    struct store_stream_new create = {s->session, s->standalone ? "standalone" : "request",
                                      s->request_id, s->owner};
    int rc = store_stream_write_relayed(
        reg.store, s->id, s->persisted ? NULL : &create, seq, msg, len,
        end_state != STREAM_ACTIVE ? state_names[end_state] : NULL, now, mark);
    if (rc == 0)
        s->persisted = 1;
    return rc;
}

int stream_persist(struct stream *s)
{
    fmutex_lock(&s->append_mu);
    int rc = s->persisted ? 0 : write_through(s, -1, NULL, 0, STREAM_ACTIVE, clock_wall_ms(), NULL);
    fmutex_unlock(&s->append_mu);
    return rc;
}

static int64_t append(struct stream *s, const char *msg, size_t len, enum stream_state end_state,
                      const struct store_relay_mark *mark)
{
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, msg, len);
    copy[len] = '\0';

    fmutex_lock(&s->append_mu);
    pthread_mutex_lock(&s->mu);
    int64_t seq = s->nchunks;
    int ended = s->state != STREAM_ACTIVE || grow(s, seq + 1) != 0;
    pthread_mutex_unlock(&s->mu);

    int64_t now = clock_wall_ms();
    int rc = ended ? 0 : write_through(s, seq, copy, len, end_state, now, mark);
    /* Another process may have written this seq first (a session's
     * standalone stream takes messages from every replica): take in what
     * it wrote and try the next free seq. */
    for (int tries = 0; rc < 0 && rc != STORE_UNAVAILABLE && reg.shared && tries < 8; tries++) {
        if (refresh_locked(s) != 1)
            break;
        pthread_mutex_lock(&s->mu);
        seq = s->nchunks;
        ended = s->state != STREAM_ACTIVE || grow(s, seq + 1) != 0;
        pthread_mutex_unlock(&s->mu);
        rc = ended ? 0 : write_through(s, seq, copy, len, end_state, now, mark);
    }
    if (ended || rc != 0) {
        fmutex_unlock(&s->append_mu);
        free(copy);
        /* STORE_STREAM_GONE is no failure: the session was deleted while
         * the request ran, and the message has no reader left. */
        if (rc < 0)
            s->store_failed = 1;
        if (rc < 0)
            log_event(LOG_ERROR, s->session, "stream_append_failed", "stream=%s seq=%lld", s->id,
                      (long long)seq);
        return -1;
    }

    pthread_mutex_lock(&s->mu);
    s->chunks[seq].msg = copy;
    s->chunks[seq].len = len;
    s->nchunks = seq + 1;
    if (end_state != STREAM_ACTIVE) {
        s->state = end_state;
        s->ended_wall_ms = now;
    }
    broadcast(s);
    pthread_mutex_unlock(&s->mu);
    fmutex_unlock(&s->append_mu);
    if (end_state != STREAM_ACTIVE)
        unregister(s);
    metrics_add(METRIC_MESSAGES, 1);
    metrics_add(METRIC_MESSAGE_BYTES, len);
    changed(s);
    return seq;
}

int64_t stream_append(struct stream *s, const char *msg, size_t len, enum stream_state end_state)
{
    return append(s, msg, len, end_state, NULL);
}

int64_t stream_append_relayed(struct stream *s, const char *msg, size_t len, const char *source_id,
                              int64_t copied)
{
    struct store_relay_mark mark = {source_id, copied};
    return append(s, msg, len, STREAM_ACTIVE, &mark);
}

int stream_end(struct stream *s, enum stream_state state)
{
    fmutex_lock(&s->append_mu);
    pthread_mutex_lock(&s->mu);
    int already = s->state != STREAM_ACTIVE;
    pthread_mutex_unlock(&s->mu);
    int64_t now = clock_wall_ms();
    int rc = already ? -1 : write_through(s, -1, NULL, 0, state, now, NULL);
    if (!already) {
        /* Even if the store failed, readers must not wait forever. */
        pthread_mutex_lock(&s->mu);
        s->state = state;
        s->ended_wall_ms = now;
        broadcast(s);
        pthread_mutex_unlock(&s->mu);
    }
    fmutex_unlock(&s->append_mu);
    if (!already) {
        unregister(s);
        changed(s);
    }
    return rc == 0 ? 0 : -1;
}

void stream_observe(struct stream *s, struct stream_reader *r)
{
    pthread_mutex_lock(&s->mu);
    r->passive = 1;
    r->gen = s->reader_gen;
    r->poll_epoch = s->poll_epoch;
    r->probe_epoch = s->probe_epoch;
    pthread_mutex_unlock(&s->mu);
}

void stream_attach(struct stream *s, struct stream_reader *r)
{
    pthread_mutex_lock(&s->mu);
    r->passive = 0;
    r->gen = ++s->reader_gen;
    r->poll_epoch = s->poll_epoch;
    r->probe_epoch = s->probe_epoch;
    broadcast(s);
    pthread_mutex_unlock(&s->mu);
}

void stream_probe_readers(struct stream *s)
{
    pthread_mutex_lock(&s->mu);
    s->probe_epoch++;
    broadcast(s);
    pthread_mutex_unlock(&s->mu);
}

void stream_detach_readers(struct stream *s)
{
    pthread_mutex_lock(&s->mu);
    s->poll_epoch++;
    broadcast(s);
    pthread_mutex_unlock(&s->mu);
}

enum stream_wait stream_read(struct stream *s, struct stream_reader *reader, int64_t seq,
                             int64_t deadline_mono_ms, struct stream_chunk *out)
{
    enum stream_wait result;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (!reader->passive && s->reader_gen != reader->gen) {
            result = STREAM_DETACHED;
            break;
        }
        if (!reader->passive && s->poll_epoch != reader->poll_epoch) {
            reader->poll_epoch = s->poll_epoch;
            result = STREAM_POLL;
            break;
        }
        if (!reader->passive && s->probe_epoch != reader->probe_epoch) {
            reader->probe_epoch = s->probe_epoch;
            result = STREAM_PROBE;
            break;
        }
        /* The one guard every read passes: never index outside the chunks. */
        if (seq < 0 || (seq > s->nchunks && s->state == STREAM_ACTIVE)) {
            result = STREAM_REFUSED;
            break;
        }
        if (seq < s->nchunks) {
            out->seq = seq;
            out->msg = s->chunks[seq].msg;
            out->len = s->chunks[seq].len;
            out->is_end = s->state != STREAM_ACTIVE && seq == s->nchunks - 1;
            result = STREAM_CHUNK;
            break;
        }
        if (s->state != STREAM_ACTIVE) {
            result = STREAM_ENDED;
            break;
        }
        /* At shutdown a reader still takes what is there (a subscription's
         * final result, a call's answer from the grace period); it stops
         * only where it would wait. */
        if (reg.detached) {
            result = STREAM_DETACHED;
            break;
        }
        if (fcond_wait_until(&s->cv, &s->mu, deadline_mono_ms) == ETIMEDOUT) {
            result = seq < s->nchunks ? STREAM_CHUNK : STREAM_TIMEOUT;
            if (result == STREAM_TIMEOUT)
                break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return result;
}

void stream_waker_init(struct stream_waker *w)
{
    pthread_mutex_init(&w->mu, NULL);
    fcond_init(&w->cv);
    w->epoch = 0;
}

void stream_waker_destroy(struct stream_waker *w)
{
    pthread_mutex_destroy(&w->mu);
    fcond_destroy(&w->cv);
}

void stream_waker_signal(struct stream_waker *w)
{
    pthread_mutex_lock(&w->mu);
    w->epoch++;
    fcond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

unsigned stream_waker_epoch(struct stream_waker *w)
{
    pthread_mutex_lock(&w->mu);
    unsigned e = w->epoch;
    pthread_mutex_unlock(&w->mu);
    return e;
}

void stream_waker_wait(struct stream_waker *w, unsigned seen, int64_t deadline_mono_ms)
{
    pthread_mutex_lock(&w->mu);
    while (w->epoch == seen)
        if (fcond_wait_until(&w->cv, &w->mu, deadline_mono_ms) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&w->mu);
}

void stream_watch(struct stream *s, struct stream_watch *node, struct stream_waker *w)
{
    pthread_mutex_lock(&s->mu);
    node->waker = w;
    node->next = s->watches;
    s->watches = node;
    pthread_mutex_unlock(&s->mu);
}

void stream_unwatch(struct stream *s, struct stream_watch *node)
{
    pthread_mutex_lock(&s->mu);
    for (struct stream_watch **pp = &s->watches; *pp; pp = &(*pp)->next)
        if (*pp == node) {
            *pp = node->next;
            break;
        }
    pthread_mutex_unlock(&s->mu);
}

void stream_event_id(const struct stream *s, int64_t seq, char *out, size_t cap)
{
    snprintf(out, cap, "%s:%lld", s->id, (long long)seq);
}

static int cursor_ok(struct stream *s, int64_t next)
{
    pthread_mutex_lock(&s->mu);
    int ok = next >= 0 && (next <= s->nchunks || s->state != STREAM_ACTIVE);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

enum stream_cursor stream_cursor_check(struct stream *s, int64_t next)
{
    int ok = cursor_ok(s, next);
    /* Another process may have handed out a position this one has not
     * read yet: read the store before calling it bad. */
    if (!ok && next > 0 && reg.shared) {
        refresh(s);
        ok = cursor_ok(s, next);
    }
    if (ok)
        return STREAM_CURSOR_OK;
    metrics_refused("bad_cursor");
    return STREAM_CURSOR_BAD;
}

enum stream_cursor stream_resume(const char *event_id, const char *session_id, struct stream **out,
                                 int64_t *next)
{
    *out = NULL;
    char id[RANDID_LEN + 1];
    if (event_id_parse(event_id, id, sizeof id, next) != 0) {
        metrics_refused("bad_cursor");
        return STREAM_CURSOR_BAD;
    }
    struct stream *s = stream_find(id);
    if (!s || strcmp(s->session, session_id) != 0) {
        stream_unref(s);
        return STREAM_CURSOR_UNKNOWN;
    }
    enum stream_cursor rc = stream_cursor_check(s, *next);
    if (rc == STREAM_CURSOR_OK)
        *out = s;
    else
        stream_unref(s);
    return rc;
}

int stream_cursor_code(enum stream_cursor c)
{
    return c == STREAM_CURSOR_BAD ? JSONRPC_INVALID_PARAMS : JSONRPC_SERVER_ERROR;
}

const char *stream_cursor_message(enum stream_cursor c)
{
    if (c == STREAM_CURSOR_BAD)
        return "Bad Request: Last-Event-ID is not a position in its stream (malformed, "
               "negative, too large, or past the end of a stream still being written)";
    return "Bad Request: Last-Event-ID names no stream of this session (it may have expired)";
}

struct sweep {
    const char *session;
    struct stream **victims;
    size_t n, cap;
};

static void pick(void *arg, const char *key, void *value)
{
    (void)key;
    struct sweep *sw = arg;
    struct stream *s = value;
    if (strcmp(s->session, sw->session) != 0)
        return;
    if (sw->n == sw->cap) {
        size_t cap = sw->cap ? sw->cap * 2 : 16;
        struct stream **v = realloc(sw->victims, cap * sizeof *v);
        if (!v)
            return;
        sw->victims = v;
        sw->cap = cap;
    }
    sw->victims[sw->n++] = s;
}

void stream_drop_session(const char *session_id)
{
    struct sweep sw = {.session = session_id};
    for (int i = 0; i < SHARDS; i++) {
        struct shard *sh = &reg.shards[i];
        size_t first = sw.n;
        pthread_mutex_lock(&sh->mu);
        if (sh->streams) {
            table_each(sh->streams, pick, &sw);
            for (size_t k = first; k < sw.n; k++)
                table_del(sh->streams, sw.victims[k]->id);
        }
        pthread_mutex_unlock(&sh->mu);
    }
    for (size_t i = 0; i < sw.n; i++) {
        struct stream *s = sw.victims[i];
        pthread_mutex_lock(&s->mu);
        if (s->state == STREAM_ACTIVE)
            s->state = STREAM_EXPIRED;
        broadcast(s);
        pthread_mutex_unlock(&s->mu);
        stream_unref(s);
    }
    free(sw.victims);
}

size_t stream_count(void)
{
    size_t n = 0;
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_lock(&reg.shards[i].mu);
        n += reg.shards[i].streams ? table_count(reg.shards[i].streams) : 0;
        pthread_mutex_unlock(&reg.shards[i].mu);
    }
    return n;
}
