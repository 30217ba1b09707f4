/* kill_watch — see kill_watch.h. */
#include "kill_watch.h"
#include "auth.h"
#include "clock.h"
#include "store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A kill is looked for this far back as well: mcp-admin's clock reading and
 * its commit come a moment apart. */
#define OVERLAP_MS 2000
/* A purge keeps a killed session's row long enough to be seen here. */
_Static_assert(OVERLAP_MS + 4 * KILL_WATCH_MS < STORE_ENDED_KEEP_MS,
               "tombstones must outlive the watcher's look-back");

static struct {
    struct store *store;
    void (*end)(const char *session_id, const char *why);
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running, stopping;
} kw = {.mu = PTHREAD_MUTEX_INITIALIZER};

struct found {
    char (*ids)[64];
    char (*whys)[128];
    size_t n, cap;
};

static void collect(void *arg, const char *id, const char *why)
{
    struct found *f = arg;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        void *ids = realloc(f->ids, cap * sizeof *f->ids);
        if (!ids)
            return;
        f->ids = ids;
        void *whys = realloc(f->whys, cap * sizeof *f->whys);
        if (!whys)
            return;
        f->whys = whys;
        f->cap = cap;
    }
    snprintf(f->ids[f->n], sizeof f->ids[f->n], "%s", id ? id : "");
    snprintf(f->whys[f->n], sizeof f->whys[f->n], "%s", why ? why : "");
    f->n++;
}

struct names {
    char (*v)[AUTH_PRINCIPAL_MAX];
    size_t n, cap;
};

static void collect_name(void *arg, const char *name)
{
    struct names *f = arg;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        void *v = realloc(f->v, cap * sizeof *f->v);
        if (!v)
            return;
        f->v = v;
        f->cap = cap;
    }
    snprintf(f->v[f->n++], sizeof f->v[0], "%s", name ? name : "");
}

/* Until the next look, or the next token expiry if that comes first. */
static void wait_next(int64_t next_expiry)
{
    int64_t ms = KILL_WATCH_MS;
    if (next_expiry) {
        int64_t left = next_expiry - clock_wall_ms();
        if (left < ms)
            ms = left > 0 ? left : 0;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&kw.cv, &kw.mu, &ts);
}

static void *watch_main(void *arg)
{
    pthread_setname_np(pthread_self(), "mcpd-kill-watch");
    (void)arg;
    int64_t since = clock_wall_ms() - OVERLAP_MS, revoked_since = since, next_expiry = 0;
    pthread_mutex_lock(&kw.mu);
    while (!kw.stopping) {
        wait_next(next_expiry);
        if (kw.stopping)
            break;
        pthread_mutex_unlock(&kw.mu);
        int64_t now = clock_wall_ms();
        /* Tokens first: their connections say why before their sessions
         * end under them. A revocation is reported for OVERLAP_MS, so a
         * connection admitted by a check just before it is still found. */
        struct names revoked = {0};
        if (store_tokens_revoked_since(kw.store, revoked_since, collect_name, &revoked) == 0)
            revoked_since = now - OVERLAP_MS;
        for (size_t i = 0; i < revoked.n; i++)
            auth_token_revoked(revoked.v[i]);
        free(revoked.v);
        next_expiry = auth_expire(clock_wall_ms());
        struct found f = {0};
        /* Sessions already ended here are not found again by end(). */
        if (store_sessions_ended_by_operator(kw.store, since, collect, &f) == 0)
            since = now - OVERLAP_MS;
        for (size_t i = 0; i < f.n; i++)
            kw.end(f.ids[i], f.whys[i]);
        free(f.ids);
        free(f.whys);
        pthread_mutex_lock(&kw.mu);
    }
    pthread_mutex_unlock(&kw.mu);
    return NULL;
}

int kill_watch_start(struct store *st, void (*end)(const char *session_id, const char *why))
{
    kw.store = st;
    kw.end = end;
    kw.stopping = 0;
    clock_cond_init(&kw.cv);
    if (pthread_create(&kw.thread, NULL, watch_main, NULL) != 0) {
        pthread_cond_destroy(&kw.cv);
        return -1;
    }
    kw.running = 1;
    return 0;
}

void kill_watch_stop(void)
{
    if (!kw.running)
        return;
    pthread_mutex_lock(&kw.mu);
    kw.stopping = 1;
    pthread_cond_signal(&kw.cv);
    pthread_mutex_unlock(&kw.mu);
    pthread_join(kw.thread, NULL);
    pthread_cond_destroy(&kw.cv);
    kw.running = 0;
}
