/* session — see session.h. */
#include "session.h"
#include "auth.h"
#include "clock.h"
#include "fcond.h"
#include "fiber.h"
#include "log.h"
#include "protocol.h"
#include "randid.h"
#include "store.h"
#include "stream.h"
#include "table.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct session {
    char id[RANDID_LEN + 1];
    char protocol[16];
    char principal[AUTH_PRINCIPAL_MAX]; /* "" without authentication */
    json_t *init_params;
    _Atomic int refs;
    pthread_mutex_t mu; /* guards the fields below */
    int log_level;
    int initialized;
    int ended;
    int client_gone; /* session_client_gone: nothing more can be asked of the client */
    struct stream *standalone;
    int get_claimed;
    int64_t get_cursor;
    struct fcond cursor_cv;         /* the GET stream wrote more */
    _Atomic int64_t last_active_ms; /* touched on every request: no lock */
    _Atomic int64_t persisted_active_ms;
    _Atomic int64_t checked_mono_ms; /* its stored state last read (shared store) */
    int64_t bytes;
    uint64_t next_out_id;
    struct table *tracked; /* in-flight requests */
    int64_t polls;         /* parked long-polls */
    struct table *pending; /* server→client requests awaiting answers */
};

/* How long the store's claim of a GET stream outlives its last renewal
 * (every beat): a process that dies holding one blocks a new GET on another
 * process this long at most. */
#define SESSION_GET_LEASE_MS 5000
/* How often, at most, a request on a shared store reads its session's
 * stored state (session_find). */
#define SESSION_RECHECK_MS 200

static struct {
    pthread_mutex_t mu;
    /* Held while a stored session is revived. A revival reads the store,
     * where a fiber parks: with a pthread mutex, the fibers that wanted it
     * next blocked every pool thread, the holder among them could not be
     * resumed, and the replica hung (a conformance run through 3 replicas). */
    struct fmutex load_mu;
    /* On a shared store: held from counting the stored sessions to storing
     * the new one, so that this process's sessions are each counted once,
     * in the store (see reserve_place). */
    struct fmutex place_mu;
    struct table *sessions;
    struct store *store;
    struct session_limits limits;
    /* What counts towards max_sessions besides the table: */
    int64_t creating;          /* sessions reserved by session_create, not yet in the table */
    struct table *creating_by; /* principal -> of those, how many (pointer-sized) */
    int64_t *dormant;          /* last activity of stored sessions not in memory, ascending */
    size_t ndormant;
    int dormant_incomplete; /* the list may miss some: session_find asks the store */
    int shared;             /* other processes share the store (session_registry_shared) */
    char id_tag[16];        /* ends server->client request ids: which process asked */
} reg = {
    .mu = PTHREAD_MUTEX_INITIALIZER, .load_mu = FMUTEX_INITIALIZER, .place_mu = FMUTEX_INITIALIZER};

struct dormant_list {
    int64_t *v;
    size_t n, cap;
    int incomplete; /* an entry could not be kept */
};

static void add_dormant(void *arg, int64_t last_active_ms)
{
    struct dormant_list *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        int64_t *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->incomplete = 1;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = last_active_ms;
}

static int cmp_ms(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

void session_registry_init(struct store *st, const struct session_limits *limits)
{
    /* The sessions a previous process left count until they are revived
     * (then they are in the table) or expire. */
    struct dormant_list l = {0};
    if (st && store_sessions_live(st, add_dormant, &l) != 0)
        l.incomplete = 1;
    if (l.n)
        qsort(l.v, l.n, sizeof *l.v, cmp_ms);
    pthread_mutex_lock(&reg.mu);
    reg.store = st;
    reg.limits = *limits;
    if (!reg.sessions)
        reg.sessions = table_new();
    if (!reg.creating_by)
        reg.creating_by = table_new();
    free(reg.dormant);
    reg.dormant = l.v;
    reg.ndormant = l.n;
    reg.dormant_incomplete = l.incomplete;
    pthread_mutex_unlock(&reg.mu);
}

/* Index of the first dormant entry at or after ms. reg.mu held. */
static size_t dormant_lower_bound(int64_t ms)
{
    size_t lo = 0, hi = reg.ndormant;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (reg.dormant[mid] < ms)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A dormant session was revived: it now counts in the table. reg.mu held. */
static void dormant_revived(int64_t last_active_ms)
{
    size_t i = dormant_lower_bound(last_active_ms);
    if (i < reg.ndormant && reg.dormant[i] == last_active_ms) {
        memmove(reg.dormant + i, reg.dormant + i + 1, (reg.ndormant - i - 1) * sizeof *reg.dormant);
        reg.ndormant--;
    }
}

void session_expire_dormant(int64_t cutoff_wall_ms)
{
    pthread_mutex_lock(&reg.mu);
    size_t n = dormant_lower_bound(cutoff_wall_ms);
    if (n) {
        memmove(reg.dormant, reg.dormant + n, (reg.ndormant - n) * sizeof *reg.dormant);
        reg.ndormant -= n;
    }
    pthread_mutex_unlock(&reg.mu);
}

struct principal_count {
    const char *principal;
    int64_t n;
};

static void count_principal(void *arg, const char *key, void *value)
{
    (void)key;
    struct principal_count *pc = arg;
    const struct session *s = value;
    pc->n += strcmp(s->principal, pc->principal) == 0;
}

/* Moves principal's count of sessions being created by delta (reg.mu held). */
static void creating_by_add(const char *principal, int delta)
{
    if (!principal || !*principal || !reg.creating_by)
        return;
    intptr_t n = (intptr_t)table_get(reg.creating_by, principal) + delta;
    if (n > 0)
        table_put(reg.creating_by, principal, (void *)n);
    else
        table_del(reg.creating_by, principal);
}

/* Takes one of the max_sessions places, and one of the principal's
 * max_per_principal, atomically with the counts. Sessions of a principal
 * are counted in memory (a dormant one left by a previous run counts once
 * it is used again). Returns 0 or the refusal. */
static int reserve_place(const char *principal)
{
    /* On a shared store every process's sessions count: the store holds
     * them all (this process's too, each persisted before its id is out).
     * The caller holds place_mu until its session is stored, so none of
     * this process's is between the two and the store's count is the whole
     * count: adding the ones being created counted a session stored but not
     * yet in the table twice, and refused initializes below the cap. Two
     * processes reserving the last place at once may both get it. */
    int64_t stored = 0, stored_by = 0;
    if (reg.shared && reg.limits.max_sessions > 0 &&
        (stored = store_sessions_count(reg.store, NULL)) < 0)
        return SESSION_FAILED;
    if (reg.shared && principal && *principal && reg.limits.max_per_principal > 0 &&
        (stored_by = store_sessions_count(reg.store, principal)) < 0)
        return SESSION_FAILED;
    pthread_mutex_lock(&reg.mu);
    int64_t live = reg.shared ? stored
                              : (reg.sessions ? (int64_t)table_count(reg.sessions) : 0) +
                                    reg.creating + (int64_t)reg.ndormant;
    int rc = reg.limits.max_sessions > 0 && live >= reg.limits.max_sessions ? SESSION_AT_CAP : 0;
    if (rc == 0 && principal && *principal && reg.limits.max_per_principal > 0) {
        struct principal_count pc = {principal, stored_by};
        if (!reg.shared) {
            pc.n = reg.creating_by ? (intptr_t)table_get(reg.creating_by, principal) : 0;
            if (reg.sessions)
                table_each(reg.sessions, count_principal, &pc);
        }
        if (pc.n >= reg.limits.max_per_principal)
            rc = SESSION_PRINCIPAL_AT_CAP;
    }
    if (rc == 0) {
        reg.creating++;
        creating_by_add(principal, 1);
    }
    pthread_mutex_unlock(&reg.mu);
    return rc;
}

static void session_free(struct session *s)
{
    json_decref(s->init_params);
    stream_unref(s->standalone);
    table_free(s->tracked);
    table_free(s->pending);
    pthread_mutex_destroy(&s->mu);
    fcond_destroy(&s->cursor_cv);
    free(s);
}

void session_ref(struct session *s)
{
    atomic_fetch_add(&s->refs, 1);
}

void session_unref(struct session *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1)
        session_free(s);
}

static void unref_entry(void *arg, const char *key, void *value)
{
    (void)arg;
    (void)key;
    session_unref(value);
}

void session_registry_shutdown(void)
{
    pthread_mutex_lock(&reg.mu);
    if (reg.sessions) {
        table_each(reg.sessions, unref_entry, NULL);
        table_free(reg.sessions);
        reg.sessions = NULL;
    }
    table_free(reg.creating_by);
    reg.creating_by = NULL;
    free(reg.dormant);
    reg.dormant = NULL;
    reg.ndormant = 0;
    reg.store = NULL;
    pthread_mutex_unlock(&reg.mu);
}

static struct session *session_alloc(const char *id, const char *protocol, json_t *init_params)
{
    struct session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    snprintf(s->id, sizeof s->id, "%s", id);
    snprintf(s->protocol, sizeof s->protocol, "%s", protocol);
    s->init_params = init_params;
    s->refs = 1;
    pthread_mutex_init(&s->mu, NULL);
    fcond_init(&s->cursor_cv);
    s->tracked = table_new();
    s->pending = table_new();
    s->last_active_ms = s->persisted_active_ms = clock_wall_ms();
    if (!s->tracked || !s->pending || !s->init_params) {
        session_free(s);
        return NULL;
    }
    return s;
}

/* Ends session_create's reservation, putting s (unless NULL) in the
 * registry, which takes its own reference. */
static int registry_add(struct session *s, const char *principal)
{
    int rc = -1;
    pthread_mutex_lock(&reg.mu);
    reg.creating--;
    creating_by_add(principal, -1);
    if (s && reg.sessions && table_put(reg.sessions, s->id, s) == 0) {
        session_ref(s);
        rc = 0;
    }
    pthread_mutex_unlock(&reg.mu);
    return rc;
}

/* An id a transport reserved: RANDID_LEN lowercase hex naming no session,
 * live or stored (session_find would revive a stored one). */
static int reserved_id_ok(const char *id)
{
    if (strlen(id) != RANDID_LEN || strspn(id, "0123456789abcdef") != RANDID_LEN)
        return 0;
    struct session *s = session_find(id);
    int taken = s != NULL;
    session_unref(s);
    return !taken;
}

int session_create(const char *protocol_version, json_t *init_params,
                   const struct session_origin *origin, struct session **out)
{
    *out = NULL;
    char *params = json_dumps(init_params, JSON_COMPACT);
    if (!params)
        return SESSION_FAILED;
    if (reg.limits.max_init_params > 0 && strlen(params) > (size_t)reg.limits.max_init_params) {
        free(params);
        return SESSION_PARAMS_TOO_LARGE;
    }
    const char *principal = origin ? origin->principal : NULL;
    const char *wanted = origin ? origin->id : NULL;
    if (wanted && !reserved_id_ok(wanted)) {
        free(params);
        return SESSION_FAILED;
    }
    int shared = reg.shared;
    if (shared)
        fmutex_lock(&reg.place_mu);
    int refused = reserve_place(principal);
    if (refused != 0) {
        if (shared)
            fmutex_unlock(&reg.place_mu);
        free(params);
        return refused;
    }
    char id[RANDID_LEN + 1];
    if (wanted)
        snprintf(id, sizeof id, "%s", wanted);
    struct session *s = wanted || randid_make(id) == 0
                            ? session_alloc(id, protocol_version, json_deep_copy(init_params))
                            : NULL;
    if (!s) {
        if (shared)
            fmutex_unlock(&reg.place_mu);
        free(params);
        registry_add(NULL, principal);
        return SESSION_FAILED;
    }
    s->log_level = 0;
    snprintf(s->principal, sizeof s->principal, "%s",
             origin && origin->principal ? origin->principal : "");
    struct store_session row = {
        .id = s->id,
        .protocol_version = s->protocol,
        .init_params = params,
        .log_level = (char *)protocol_log_level_name(s->log_level),
        .initialized = 0,
        .created_ms = s->last_active_ms,
        .last_active_ms = s->last_active_ms,
        .principal = s->principal[0] ? s->principal : NULL,
        .transport = origin ? (char *)origin->transport : NULL,
    };
    int stored = store_session_put(reg.store, &row) == 0;
    if (shared)
        fmutex_unlock(&reg.place_mu);
    stored = stored && (s->standalone = stream_create(s->id, STREAM_STANDALONE, NULL)) &&
             stream_persist(s->standalone) == 0;
    free(params);
    if (registry_add(stored ? s : NULL, principal) != 0) {
        session_free(s);
        return SESSION_FAILED;
    }
    *out = s;
    return 0;
}

/* A new reference to the session if it is in memory. */
static struct session *in_memory(const char *id)
{
    pthread_mutex_lock(&reg.mu);
    struct session *s = reg.sessions ? table_get(reg.sessions, id) : NULL;
    if (s)
        session_ref(s);
    pthread_mutex_unlock(&reg.mu);
    return s;
}

/* Revives a stored session after a restart; reg.load_mu held, reg.mu not:
 * summing the bytes of a session near its cap reads its whole history. */
static struct session *load(const char *id)
{
    struct store_session row;
    if (!reg.store || store_session_get(reg.store, id, &row) != 0)
        return NULL;
    json_t *params = json_loads(row.init_params, JSON_ALLOW_NUL, NULL);
    struct session *s = session_alloc(row.id, row.protocol_version, params);
    if (s) {
        s->log_level = protocol_log_level(row.log_level);
        if (s->log_level < 0)
            s->log_level = 0;
        s->initialized = row.initialized;
        snprintf(s->principal, sizeof s->principal, "%s", row.principal ? row.principal : "");
        s->bytes = store_session_bytes(reg.store, s->id);
        if (s->bytes < 0)
            s->bytes = 0;
        char *sid = NULL;
        int found = store_session_standalone(reg.store, s->id, &sid);
        /* Another process creating the session commits its standalone
         * stream just after its row: give it that moment, rather than make
         * a second standalone stream. */
        for (int i = 0; reg.shared && found == 1 && i < 20; i++) {
            fiber_sleep_ms(25);
            found = store_session_standalone(reg.store, s->id, &sid);
        }
        if (found == 0)
            s->standalone = stream_find(sid);
        free(sid);
        if (!s->standalone && (s->standalone = stream_create(s->id, STREAM_STANDALONE, NULL)))
            stream_persist(s->standalone);
        /* A revived session starts its GET where the stream ends: the
         * previous process may have delivered everything before it. */
        s->get_cursor = s->standalone ? stream_next_seq(s->standalone) : 0;
        pthread_mutex_lock(&reg.mu);
        int added = s->standalone && reg.sessions && table_put(reg.sessions, s->id, s) == 0;
        if (added) {
            dormant_revived(row.last_active_ms);
            session_ref(s);
        }
        pthread_mutex_unlock(&reg.mu);
        if (added) {
            log_event(LOG_INFO, s->id, "session_revived", "protocol=%s", s->protocol);
        } else {
            session_free(s);
            s = NULL;
        }
    }
    store_session_free(&row);
    return s;
}

struct session *session_find(const char *id)
{
    if (strlen(id) != RANDID_LEN)
        return NULL;
    struct session *s = in_memory(id);
    /* Another process may have ended it a moment ago (a DELETE there), or
     * changed its state (logging/setLevel there): its signal may not have
     * arrived yet, the store knows. */
    char level[16];
    int64_t now = clock_mono_ms(), checked = s ? atomic_load(&s->checked_mono_ms) : 0;
    /* At most once per SESSION_RECHECK_MS a session: a read on the
     * caller's thread costs a round trip, and between reads the signals
     * (replica.h) bring the same news within milliseconds. */
    int initialized = 0,
        live = s && reg.shared && now - checked >= SESSION_RECHECK_MS
                   ? store_session_live(reg.store, id, level, sizeof level, &initialized)
                   : -1;
    if (live == 1)
        atomic_store(&s->checked_mono_ms, now);
    if (live == 0) {
        session_unref(s);
        return NULL;
    }
    if (live == 1)
        session_apply_stored(s, protocol_log_level(level), initialized, 0);
    if (s)
        return s;
    /* Only a session a previous process left (a dormant one) can be
     * revived: once none is left, an id that is not in memory is gone or
     * never was, and a stranger sending made-up ids costs no store read. */
    pthread_mutex_lock(&reg.mu);
    int revivable = reg.ndormant > 0 || reg.dormant_incomplete || reg.shared;
    pthread_mutex_unlock(&reg.mu);
    /* A revival puts a session in the table and takes it off the dormant
     * count at once: one that just revived this id is in memory now. */
    if (!revivable)
        return in_memory(id);
    struct store_session row;
    if (!reg.store || store_session_get(reg.store, id, &row) != 0)
        return NULL;
    store_session_free(&row);
    /* Revivals take turns, so that two finders of one stored session do
     * not both load it (and create its standalone stream twice); lookups
     * of sessions in memory never wait for them, nor do lookups of ids the
     * store does not hold (checked above, outside the turn: a revival can
     * take long, reading a session's whole history). */
    fmutex_lock(&reg.load_mu);
    s = in_memory(id);
    if (!s)
        s = load(id);
    fmutex_unlock(&reg.load_mu);
    return s;
}

const char *session_id(const struct session *s)
{
    return s->id;
}

const char *session_principal(const struct session *s)
{
    return s->principal;
}

int session_belongs_to(const struct session *s, const char *principal)
{
    return strcmp(s->principal, principal ? principal : "") == 0;
}

const char *session_protocol(const struct session *s)
{
    return s->protocol;
}

json_t *session_init_params(const struct session *s)
{
    return s->init_params;
}

json_t *session_client_capabilities(const struct session *s)
{
    json_t *caps = json_object_get(s->init_params, "capabilities");
    return json_is_object(caps) ? caps : NULL;
}

int session_log_level(struct session *s)
{
    pthread_mutex_lock(&s->mu);
    int l = s->log_level;
    pthread_mutex_unlock(&s->mu);
    return l;
}

void session_set_log_level(struct session *s, int level)
{
    pthread_mutex_lock(&s->mu);
    s->log_level = level;
    int init = s->initialized;
    pthread_mutex_unlock(&s->mu);
    /* The signal first: queued together, both go in one commit, and
     * PostgreSQL delivers a NOTIFY at its commit. */
    store_signal(reg.store, STORE_SIGNAL_SESSION, s->id, NULL);
    store_session_set_state(reg.store, s->id, protocol_log_level_name(level), init);
    /* Every process reads a session's state from the store at each request
     * (session_find): it must be there before the answer is. */
    if (reg.shared)
        store_flush(reg.store);
}

int session_initialized(struct session *s)
{
    pthread_mutex_lock(&s->mu);
    int i = s->initialized;
    pthread_mutex_unlock(&s->mu);
    return i;
}

void session_set_initialized(struct session *s)
{
    pthread_mutex_lock(&s->mu);
    int was = s->initialized;
    s->initialized = 1;
    int level = s->log_level;
    pthread_mutex_unlock(&s->mu);
    if (!was) {
        store_signal(reg.store, STORE_SIGNAL_SESSION, s->id, NULL);
        store_session_set_state(reg.store, s->id, protocol_log_level_name(level), 1);
        if (reg.shared)
            store_flush(reg.store);
    }
}

void session_touch(struct session *s)
{
    int64_t now = clock_wall_ms();
    /* Persist at most a few times per idle period: often enough that the
     * store never expires a live session, rarely enough to cost nothing. */
    int64_t every = reg.limits.idle_ms / 4 < 10000 ? reg.limits.idle_ms / 4 : 10000;
    atomic_store(&s->last_active_ms, now);
    int64_t persisted = atomic_load(&s->persisted_active_ms);
    /* One toucher per period wins the exchange and writes. */
    if (now - persisted >= every &&
        atomic_compare_exchange_strong(&s->persisted_active_ms, &persisted, now))
        store_session_touch(reg.store, s->id, now);
}

int session_ended(struct session *s)
{
    pthread_mutex_lock(&s->mu);
    int e = s->ended;
    pthread_mutex_unlock(&s->mu);
    return e;
}

struct stream *session_standalone(struct session *s)
{
    pthread_mutex_lock(&s->mu);
    struct stream *st = s->standalone;
    if (st)
        stream_ref(st);
    pthread_mutex_unlock(&s->mu);
    return st;
}

int session_get_claim(struct session *s)
{
    pthread_mutex_lock(&s->mu);
    int rc = s->get_claimed || s->ended ? -1 : 0;
    if (rc == 0)
        s->get_claimed = 1;
    pthread_mutex_unlock(&s->mu);
    /* One GET in the whole deployment: the store's claim, renewed by
     * session_renew_get_claims while this one is open. */
    if (rc == 0 && reg.shared) {
        int64_t now = clock_wall_ms();
        if (store_standalone_claim(reg.store, s->id, now, now + SESSION_GET_LEASE_MS) != 0) {
            pthread_mutex_lock(&s->mu);
            s->get_claimed = 0;
            pthread_mutex_unlock(&s->mu);
            rc = -1;
        }
    }
    return rc;
}

void session_get_release(struct session *s)
{
    pthread_mutex_lock(&s->mu);
    s->get_claimed = 0;
    fcond_broadcast(&s->cursor_cv);
    pthread_mutex_unlock(&s->mu);
    if (reg.shared)
        store_standalone_release(reg.store, s->id);
}

static void renew_one(void *arg, const char *key, void *value)
{
    (void)key;
    struct session *s = value;
    struct session ***out = arg;
    pthread_mutex_lock(&s->mu);
    int held = s->get_claimed && !s->ended;
    pthread_mutex_unlock(&s->mu);
    if (held) {
        session_ref(s);
        *(*out)++ = s;
    }
}

void session_renew_get_claims(void)
{
    pthread_mutex_lock(&reg.mu);
    size_t n = reg.sessions ? table_count(reg.sessions) : 0;
    struct session **list = n ? calloc(n, sizeof *list) : NULL, **end = list;
    if (list)
        table_each(reg.sessions, renew_one, &end);
    pthread_mutex_unlock(&reg.mu);
    int64_t now = clock_wall_ms();
    for (struct session **p = list; p < end; p++) {
        store_standalone_claim(reg.store, (*p)->id, now, now + SESSION_GET_LEASE_MS);
        session_unref(*p);
    }
    free(list);
}

int64_t session_get_cursor(struct session *s)
{
    pthread_mutex_lock(&s->mu);
    int64_t c = s->get_cursor;
    pthread_mutex_unlock(&s->mu);
    return c;
}

void session_set_get_cursor(struct session *s, int64_t next_seq)
{
    pthread_mutex_lock(&s->mu);
    if (next_seq > s->get_cursor) {
        s->get_cursor = next_seq;
        fcond_broadcast(&s->cursor_cv);
    }
    pthread_mutex_unlock(&s->mu);
}

void session_wait_get_cursor(struct session *s, int64_t next_seq, int64_t deadline_mono_ms)
{
    pthread_mutex_lock(&s->mu);
    while (s->get_claimed && s->get_cursor < next_seq &&
           fcond_wait_until(&s->cursor_cv, &s->mu, deadline_mono_ms) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&s->mu);
}

int session_charge(struct session *s, size_t bytes)
{
    pthread_mutex_lock(&s->mu);
    int ok = s->bytes + (int64_t)bytes <= reg.limits.max_bytes;
    if (ok)
        s->bytes += (int64_t)bytes;
    pthread_mutex_unlock(&s->mu);
    return ok ? 0 : -1;
}

void session_charge_always(struct session *s, size_t bytes)
{
    pthread_mutex_lock(&s->mu);
    s->bytes += (int64_t)bytes;
    pthread_mutex_unlock(&s->mu);
}

void session_uncharge(const char *id, int64_t bytes)
{
    struct session *s = in_memory(id);
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->bytes = s->bytes > bytes ? s->bytes - bytes : 0;
    pthread_mutex_unlock(&s->mu);
    session_unref(s);
}

/* Under s->mu. */
static int at_inflight_cap(const struct session *s)
{
    return reg.limits.max_inflight > 0 &&
           (int64_t)table_count(s->tracked) + s->polls >= reg.limits.max_inflight;
}

enum session_track_rc session_track(struct session *s, const char *key, void *value)
{
    enum session_track_rc rc = SESSION_TRACK_OK;
    /* The cap counts the session's calls in every process: those of the
     * others from the store (a call there counts once it has written). */
    int64_t elsewhere = reg.shared && reg.limits.max_inflight > 0
                            ? store_session_calls_elsewhere(reg.store, s->id)
                            : 0;
    pthread_mutex_lock(&s->mu);
    if (s->ended)
        rc = SESSION_TRACK_ENDED;
    else if (table_get(s->tracked, key))
        rc = SESSION_TRACK_DUP;
    else if (at_inflight_cap(s) ||
             (elsewhere > 0 &&
              (int64_t)table_count(s->tracked) + s->polls + elsewhere >= reg.limits.max_inflight))
        rc = SESSION_TRACK_BUSY;
    else if (table_put(s->tracked, key, value) != 0)
        rc = SESSION_TRACK_NOMEM;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

enum session_track_rc session_poll_enter(struct session *s)
{
    enum session_track_rc rc = SESSION_TRACK_OK;
    pthread_mutex_lock(&s->mu);
    if (s->ended)
        rc = SESSION_TRACK_ENDED;
    else if (at_inflight_cap(s))
        rc = SESSION_TRACK_BUSY;
    else
        s->polls++;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void session_poll_leave(struct session *s)
{
    pthread_mutex_lock(&s->mu);
    s->polls--;
    pthread_mutex_unlock(&s->mu);
}

void session_untrack(struct session *s, const char *key)
{
    pthread_mutex_lock(&s->mu);
    table_del(s->tracked, key);
    pthread_mutex_unlock(&s->mu);
}

int session_with_tracked(struct session *s, const char *key, void (*fn)(void *value, void *arg),
                         void *arg)
{
    pthread_mutex_lock(&s->mu);
    void *v = table_get(s->tracked, key);
    if (v && fn)
        fn(v, arg);
    pthread_mutex_unlock(&s->mu);
    return v ? 0 : -1;
}

struct each_ctx {
    void (*fn)(void *value, void *arg);
    void *arg;
};

static void each_tracked(void *arg, const char *key, void *value)
{
    (void)key;
    struct each_ctx *c = arg;
    c->fn(value, c->arg);
}

void session_each_tracked(struct session *s, void (*fn)(void *value, void *arg), void *arg)
{
    struct each_ctx c = {fn, arg};
    pthread_mutex_lock(&s->mu);
    table_each(s->tracked, each_tracked, &c);
    pthread_mutex_unlock(&s->mu);
}

void session_next_request_id(struct session *s, char *out, size_t cap)
{
    pthread_mutex_lock(&s->mu);
    uint64_t n = ++s->next_out_id;
    pthread_mutex_unlock(&s->mu);
    /* The clock part keeps ids unique across restarts of the process (the
     * counter starts again); the tag names the process that asked, so
     * that an answer reaching another replica finds its way. */
    snprintf(out, cap, "mcpd-%llu-%08lx%s", (unsigned long long)n,
             (unsigned long)(clock_wall_ms() & 0xffffffff), reg.id_tag);
}

void session_registry_shared(const char *id_tag)
{
    pthread_mutex_lock(&reg.mu);
    reg.shared = 1;
    snprintf(reg.id_tag, sizeof reg.id_tag, "-%s", id_tag);
    pthread_mutex_unlock(&reg.mu);
}

const char *session_request_id_tag(const char *request_id)
{
    const char *dash = strrchr(request_id, '-');
    return strncmp(request_id, "mcpd-", 5) == 0 && dash && strchr(request_id + 5, '-') != dash
               ? dash + 1
               : NULL;
}

struct session *session_find_loaded(const char *id)
{
    return in_memory(id);
}

void session_apply_stored(struct session *s, int log_level, int initialized, int64_t last_active_ms)
{
    pthread_mutex_lock(&s->mu);
    if (log_level >= 0)
        s->log_level = log_level;
    s->initialized = s->initialized || initialized;
    pthread_mutex_unlock(&s->mu);
    int64_t mine = atomic_load(&s->last_active_ms);
    if (last_active_ms > mine)
        atomic_store(&s->last_active_ms, last_active_ms);
}

int session_pending_add(struct session *s, const char *key, void *value)
{
    pthread_mutex_lock(&s->mu);
    int rc = s->ended || s->client_gone ? -1 : table_put(s->pending, key, value);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int session_pending_has(struct session *s, const char *key)
{
    pthread_mutex_lock(&s->mu);
    int has = table_get(s->pending, key) != NULL;
    pthread_mutex_unlock(&s->mu);
    return has;
}

int64_t session_last_active_ms(const struct session *s)
{
    return atomic_load(&s->last_active_ms);
}

void *session_pending_take(struct session *s, const char *key)
{
    pthread_mutex_lock(&s->mu);
    void *v = table_del(s->pending, key);
    pthread_mutex_unlock(&s->mu);
    return v;
}

void session_client_gone(struct session *s, void (*fn)(void *arg, const char *key, void *value),
                         void *arg)
{
    struct table *fresh = table_new();
    pthread_mutex_lock(&s->mu);
    s->client_gone = 1;
    struct table *taken = fresh ? s->pending : NULL;
    if (fresh)
        s->pending = fresh;
    pthread_mutex_unlock(&s->mu);
    if (taken) {
        table_each(taken, fn, arg);
        table_free(taken);
    }
}

int session_end(struct session *s)
{
    pthread_mutex_lock(&s->mu);
    int was = s->ended;
    s->ended = 1;
    pthread_mutex_unlock(&s->mu);
    if (was)
        return 0;
    /* The store's tombstone first: while it is being written the registry
     * still answers with this (ended) session, and once the session leaves
     * the registry a lookup finds the tombstone, never a row to revive. */
    if (reg.store) {
        store_signal(reg.store, STORE_SIGNAL_SESSION, s->id, NULL);
        store_session_delete(reg.store, s->id, clock_wall_ms());
    }
    pthread_mutex_lock(&reg.mu);
    struct session *held = reg.sessions ? table_del(reg.sessions, s->id) : NULL;
    pthread_mutex_unlock(&reg.mu);
    stream_drop_session(s->id);
    session_unref(held);
    return 1;
}

struct idle_ctx {
    int64_t cutoff;
    int all;
    struct session **list;
    size_t n, cap;
};

static void collect(void *arg, const char *key, void *value)
{
    (void)key;
    struct idle_ctx *c = arg;
    struct session *s = value;
    pthread_mutex_lock(&s->mu);
    int take = c->all || s->last_active_ms < c->cutoff;
    pthread_mutex_unlock(&s->mu);
    if (!take)
        return;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct session **l = realloc(c->list, cap * sizeof *l);
        if (!l)
            return;
        c->list = l;
        c->cap = cap;
    }
    session_ref(s);
    c->list[c->n++] = s;
}

static void for_each(struct idle_ctx *c, void (*fn)(struct session *s, void *arg), void *arg)
{
    pthread_mutex_lock(&reg.mu);
    if (reg.sessions)
        table_each(reg.sessions, collect, c);
    pthread_mutex_unlock(&reg.mu);
    for (size_t i = 0; i < c->n; i++)
        fn(c->list[i], arg);
    free(c->list);
}

void session_each_idle(int64_t cutoff_wall_ms, void (*fn)(struct session *s, void *arg), void *arg)
{
    struct idle_ctx c = {.cutoff = cutoff_wall_ms};
    for_each(&c, fn, arg);
}

void session_each(void (*fn)(struct session *s, void *arg), void *arg)
{
    struct idle_ctx c = {.all = 1};
    for_each(&c, fn, arg);
}

size_t session_count(void)
{
    pthread_mutex_lock(&reg.mu);
    size_t n = reg.sessions ? table_count(reg.sessions) : 0;
    pthread_mutex_unlock(&reg.mu);
    return n;
}
