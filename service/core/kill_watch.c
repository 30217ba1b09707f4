/* kill_watch — see kill_watch.h. */
#include "kill_watch.h"
#include "auth.h"
#include "clock.h"
#include "store.h"
#include "ticker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A kill is looked for this far back as well: mcp-admin's clock reading and
 * its commit come a moment apart. */
#define OVERLAP_MS 2000
/* A purge keeps a killed session's row long enough to be seen here. */
_Static_assert(OVERLAP_MS + 4 * KILL_WATCH_MS < STORE_ENDED_KEEP_MS,
               "tombstones must outlive the watcher's look-back");

static struct {
    struct store *store;
    void (*end)(const char *session_id, const char *why);
    struct ticker ticker;
    /* The watcher's own: what it looked for last, and the next expiry. */
    int64_t since, revoked_since, next_expiry;
} kw = {.ticker = TICKER_INITIALIZER};

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

/* The next look, or the next token expiry if that comes first. */
static int64_t next_look(void)
{
    int64_t ms = KILL_WATCH_MS;
    if (kw.next_expiry) {
        int64_t left = kw.next_expiry - clock_wall_ms();
        if (left < ms)
            ms = left > 0 ? left : 0;
    }
    return clock_mono_ms() + ms;
}

static int64_t watch_tick(void *arg)
{
    (void)arg;
    int64_t now = clock_wall_ms();
    /* The ended sessions are read before the revoked tokens: a session
     * ended because its token was revoked is then never seen before that
     * revocation (read the other way round, a revocation committed between
     * the two reads ended the session first, and its connections said
     * "session ended" instead of why). Sessions already ended here are not
     * found again by end(). */
    struct found f = {0};
    if (store_sessions_ended_by_operator(kw.store, kw.since, collect, &f) == 0)
        kw.since = now - OVERLAP_MS;
    /* Tokens first: their connections say why before their sessions
     * end under them. A revocation is reported for OVERLAP_MS, so a
     * connection admitted by a check just before it is still found. */
    struct names revoked = {0};
    if (store_tokens_revoked_since(kw.store, kw.revoked_since, collect_name, &revoked) == 0)
        kw.revoked_since = now - OVERLAP_MS;
    for (size_t i = 0; i < revoked.n; i++)
        auth_token_revoked(revoked.v[i]);
    free(revoked.v);
    kw.next_expiry = auth_expire(clock_wall_ms());
    for (size_t i = 0; i < f.n; i++)
        kw.end(f.ids[i], f.whys[i]);
    free(f.ids);
    free(f.whys);
    return next_look();
}

int kill_watch_start(struct store *st, void (*end)(const char *session_id, const char *why))
{
    kw.store = st;
    kw.end = end;
    kw.since = kw.revoked_since = clock_wall_ms() - OVERLAP_MS;
    kw.next_expiry = 0;
    return ticker_start(&kw.ticker, &(struct ticker_job){.name = "mcpd-kill-watch",
                                                         .first_ms = KILL_WATCH_MS,
                                                         .tick = watch_tick});
}

void kill_watch_stop(void)
{
    ticker_stop(&kw.ticker);
}
