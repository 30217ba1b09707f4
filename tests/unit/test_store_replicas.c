/* test_store_replicas — the store's API for more than one process
 * (store.h, issue 30): inbox, nodes and beats, the leader, sessions
 * counted, orphaned streams, session and standalone claims, signals, the
 * DPoP proofs spent.
 *
 * Each runs on SQLite (one process: signals are no-ops, the leader is
 * always this process) and, when MCPD_TEST_PG_URL names a server, on
 * PostgreSQL, where two `struct store` in this process act as two
 * replicas with different runs. PostgreSQL only: four store_open at once
 * on a fresh database (the migrations under their lock), a schema newer
 * than the build refused, and, when MCPD_TEST_PG_DIR names the folder of
 * the server (tests/pg/pg-server.sh), the server stopped and started:
 * STORE_UNAVAILABLE at once while it is down, the store ready again
 * within 2 s of its return, nothing committed lost, RESYNC signalled. */
#include "check.h"
#include "loop.h"
#include "pg_test.h"
#include "store.h"
#include "store_migrations.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SID(name) "000000000000" name

/* The PostgreSQL database of the pair being tested (raw checks). */
static char test_url[512];

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct store *open_run(const char *path, const char *run)
{
    struct store *st = NULL;
    char *err = NULL;
    if (!check_record(store_open(path, &st, &err) == 0, __FILE__, __LINE__, "store_open"))
        printf("     %s: %s\n", path, err ? err : "?");
    free(err);
    if (st)
        store_set_run(st, run);
    return st;
}

static int put_session(struct store *st, const char *id, const char *principal)
{
    struct store_session s = {
        .id = (char *)id,
        .protocol_version = "2025-06-18",
        .init_params = "{}",
        .log_level = "info",
        .created_ms = now_ms(),
        .last_active_ms = now_ms(),
        .principal = (char *)principal,
        .transport = "http",
    };
    return store_session_put(st, &s);
}

static int put_stream(struct store *st, const char *id, const char *session)
{
    struct store_stream_new create = {session, "request", "1", NULL};
    return store_stream_write(st, id, &create, 0, "{}", 2, NULL, now_ms());
}

struct found {
    int n;
    char id[8][64];
};

static void on_stream(void *arg, const char *stream_id, const char *session_id,
                      const char *request_id, int64_t next_seq)
{
    (void)session_id, (void)request_id, (void)next_seq;
    struct found *f = arg;
    if (f->n < 8)
        snprintf(f->id[f->n++], 64, "%s", stream_id);
}

static void on_node(void *arg, const char *run, int64_t beat_ms, int64_t inflight)
{
    (void)beat_ms;
    struct found *f = arg;
    if (f->n < 8)
        snprintf(f->id[f->n++], 64, "%s:%lld", run, (long long)inflight);
}

/* ---- both backends: a and b are two processes on PostgreSQL, and the
 * same one on SQLite ---- */

static void test_basics(struct store *a, int pg)
{
    CHECK_INT(store_backend_of(a), pg ? STORE_POSTGRES : STORE_SQLITE);
    CHECK_INT(store_path_is_postgres("postgres://u@h/db"), 1);
    CHECK_INT(store_path_is_postgres("postgresql://h:5432/db?sslmode=require"), 1);
    CHECK_INT(store_path_is_postgres("host=/run/pg dbname=mcpd"), 1);
    CHECK_INT(store_path_is_postgres("./data/mcpd.db"), 0);
    CHECK_INT(store_path_is_postgres(":memory:"), 0);
    CHECK_INT(store_checkpoint(a) == 1 || !pg, 1);
}

static void test_inbox(struct store *a, struct store *b)
{
    CHECK_INT(put_session(a, "inbox-s", NULL), 0);
    int64_t id1 = 0, id2 = 0;
    CHECK_INT(store_inbox_put(a, "inbox-s", "{\"id\":1}", 8, now_ms(), &id1), 0);
    CHECK_INT(store_inbox_put(b, "inbox-s", "{\"id\":2}", 8, now_ms(), &id2), 0);
    CHECK(id1 > 0 && id2 > id1);
    char *msg = NULL;
    size_t len = 0;
    CHECK_INT(store_inbox_take(b, id1, &msg, &len), 0);
    CHECK_STR(msg, "{\"id\":1}");
    CHECK_INT(len, 8);
    free(msg);
    /* Taken once: the second taker, of either process, finds nothing. */
    CHECK_INT(store_inbox_take(a, id1, &msg, &len), 1);
    CHECK_INT(store_inbox_take(b, id1, &msg, &len), 1);
    CHECK_INT(store_inbox_take(a, id2, &msg, &len), 0);
    free(msg);
    /* Old rows go with store_purge. */
    int64_t id3 = 0;
    CHECK_INT(store_inbox_put(a, "inbox-s", "{}", 2, now_ms() - STORE_INBOX_KEEP_MS - 1000, &id3),
              0);
    struct store_purge_cutoffs c = {0, 0, 0, 0, 0};
    CHECK_INT(store_purge(a, &c, NULL, NULL), 0);
    CHECK_INT(store_inbox_take(a, id3, &msg, &len), 1);
}

/* A DPoP proof is spent once, whichever process sees it first: a second
 * use anywhere is refused until store_purge forgets it past its window. */
static void test_dpop_uses(struct store *a, struct store *b)
{
    int64_t t = now_ms();
    CHECK_INT(store_dpop_use(a, "proof-1", t + 600000), 1);
    CHECK_INT(store_dpop_use(b, "proof-1", t + 600000), 0);
    CHECK_INT(store_dpop_use(a, "proof-1", t + 600000), 0);
    CHECK_INT(store_dpop_use(b, "proof-2", t + 600000), 1);
    CHECK_INT(store_dpop_use(a, "proof-old", t - 1), 1);
    struct store_purge_cutoffs c = {0, 0, 0, 0, 0};
    CHECK_INT(store_purge(a, &c, NULL, NULL), 0);
    /* Forgotten past its window (where its proof's iat is refused anyway);
     * the live ones are kept. */
    CHECK_INT(store_dpop_use(b, "proof-old", t + 600000), 1);
    CHECK_INT(store_dpop_use(b, "proof-1", t + 600000), 0);
    CHECK_INT(store_dpop_use(a, "proof-2", t + 600000), 0);
}

static void test_nodes(struct store *a, struct store *b, int pg)
{
    int64_t t = now_ms();
    CHECK_INT(store_node_beat(a, t, 3), 0);
    CHECK_INT(store_node_beat(b, t - 20000, 0), 0);
    /* A process takes its run's lock with the leader's connection (as
     * mcpd's replica thread does at every beat): alive = a recent beat and
     * the lock. */
    CHECK(store_leader(a) >= 0);
    CHECK(store_leader(b) >= 0);
    struct found f = {0};
    CHECK_INT(store_nodes_alive(a, t - 10000, on_node, &f), 0);
    CHECK_INT(f.n, 1);
    CHECK_STR(f.id[0], "run-a:3");
    /* The leader: one of the two, always this one on SQLite. */
    int la = store_leader(a), lb = store_leader(b);
    CHECK_INT(la, 1);
    CHECK_INT(lb, pg ? 0 : 1);
    CHECK_INT(store_leader(a), 1);
    /* Sessions counted across processes, all or one principal's. */
    int64_t base = store_sessions_count(a, NULL);
    CHECK(base >= 0);
    CHECK_INT(put_session(a, "count-1", "alice"), 0);
    CHECK_INT(put_session(b, "count-2", "alice"), 0);
    CHECK_INT(put_session(b, "count-3", "bob"), 0);
    CHECK_INT(store_sessions_count(b, NULL), base + 3);
    CHECK_INT(store_sessions_count(a, "alice"), 2);
    CHECK_INT(store_session_delete(a, "count-1", now_ms()), 0);
    CHECK_INT(store_sessions_count(b, "alice"), 1);
    CHECK_INT(store_sessions_count(b, NULL), base + 2);
    CHECK_INT(store_node_gone(b), 0);
    f.n = 0;
    CHECK_INT(store_nodes_alive(a, 0, on_node, &f), 0);
    CHECK_INT(f.n, 1);
    /* A node long dead and a standalone claim run out go with a purge. */
    CHECK_INT(store_node_beat(b, t - 3600 * 1000, 0), 0);
    CHECK_INT(put_session(a, "purge-claim", NULL), 0);
    CHECK_INT(store_standalone_claim(b, "purge-claim", t - 2000, t - 1000), 0);
    struct store_purge_cutoffs c = {0, 0, 0, 0, 0};
    CHECK_INT(store_purge(a, &c, NULL, NULL), 0);
    f.n = 0;
    CHECK_INT(store_nodes_alive(a, 0, on_node, &f), 0);
    CHECK_INT(f.n, 1);
    if (pg_test_url() && store_backend_of(a) == STORE_POSTGRES)
        CHECK_INT(pg_test_count(test_url, "SELECT COUNT(*) FROM standalone_claims", NULL), 0);
}

static void test_orphans(struct store *a, struct store *b)
{
    int64_t t = now_ms();
    CHECK_INT(store_node_beat(a, t, 1), 0);
    CHECK_INT(store_node_beat(b, t, 1), 0);
    CHECK_INT(put_session(a, "orph-s", NULL), 0);
    CHECK_INT(put_stream(a, SID("orph-a"), "orph-s"), 0);
    CHECK_INT(put_stream(b, SID("orph-b"), "orph-s"), 0);
    /* a is alive: its stream is no orphan, to b. */
    struct found f = {0};
    CHECK_INT(store_streams_orphaned(b, t - 5000, on_stream, &f), 0);
    CHECK_INT(f.n, 0);
    /* a's beat ages past the lease: b sees a's stream, never its own. */
    f.n = 0;
    CHECK_INT(store_streams_orphaned(b, t + 5000, on_stream, &f), 0);
    CHECK_INT(f.n, 1);
    CHECK_STR(f.id[0], SID("orph-a"));
    /* Once ended, it is no orphan. */
    CHECK_INT(store_stream_write(a, SID("orph-a"), NULL, -1, NULL, 0, "finished", t), 0);
    f.n = 0;
    CHECK_INT(store_streams_orphaned(b, t + 5000, on_stream, &f), 0);
    CHECK_INT(f.n, 0);

    /* A session's owner: the first claim wins while its owner beats. */
    char *owner = NULL;
    CHECK_INT(store_session_claim(a, "orph-s", t - 5000, &owner), 0);
    CHECK_STR(owner, "run-a");
    free(owner);
    CHECK_INT(store_session_claim(b, "orph-s", t - 5000, &owner), 0);
    CHECK_STR(owner, "run-a");
    free(owner);
    CHECK_INT(store_session_claim(b, "orph-s", t + 5000, &owner), 0);
    CHECK_STR(owner, "run-b");
    free(owner);
    CHECK_INT(store_session_claim(a, "no-such-session", t, &owner), 1);
    CHECK(owner == NULL);

    /* The standalone stream's claim: one holder until its lease runs out. */
    CHECK_INT(store_standalone_claim(a, "orph-s", t, t + 5000), 0);
    CHECK_INT(store_standalone_claim(a, "orph-s", t + 1000, t + 6000), 0); /* renewed */
    CHECK_INT(store_standalone_claim(b, "orph-s", t + 2000, t + 7000), 1);
    CHECK_INT(store_standalone_claim(b, "orph-s", t + 6001, t + 9000), 0); /* expired */
    CHECK_INT(store_standalone_claim(a, "orph-s", t + 7000, t + 9000), 1);
    CHECK_INT(store_standalone_release(b, "orph-s"), 0);
    CHECK_INT(store_flush(b), 0);
    CHECK_INT(store_standalone_claim(a, "orph-s", t + 7000, t + 9000), 0);
}

/* ---- signals (PostgreSQL) ---- */

struct heard {
    pthread_mutex_t mu;
    int n;
    char kind[32];
    char key[32][80];
    char extra[32][40];
};

static void on_signal(void *arg, char kind, const char *key, const char *extra)
{
    struct heard *h = arg;
    pthread_mutex_lock(&h->mu);
    if (h->n < 32) {
        h->kind[h->n] = kind;
        snprintf(h->key[h->n], 80, "%s", key);
        snprintf(h->extra[h->n], 40, "%s", extra ? extra : "");
        h->n++;
    }
    pthread_mutex_unlock(&h->mu);
}

/* Waits (up to 5 s) for h to hold a signal of kind with key; its index
 * or -1. */
static int wait_heard(struct heard *h, char kind, const char *key)
{
    for (int i = 0; i < 500; i++) {
        pthread_mutex_lock(&h->mu);
        int at = -1;
        for (int j = 0; j < h->n && at < 0; j++)
            if (h->kind[j] == kind && strcmp(h->key[j], key) == 0)
                at = j;
        pthread_mutex_unlock(&h->mu);
        if (at >= 0)
            return at;
        usleep(10000);
    }
    return -1;
}

static void test_signals(struct store *a, struct store *b)
{
    struct heard ha = {.mu = PTHREAD_MUTEX_INITIALIZER}, hb = {.mu = PTHREAD_MUTEX_INITIALIZER};
    store_signal_listen(a, on_signal, &ha);
    store_signal_listen(b, on_signal, &hb);
    CHECK_INT(put_session(a, "sig-s", NULL), 0);
    /* A stream write signals itself, with the next seq, after its commit. */
    CHECK_INT(put_stream(a, SID("sig-1"), "sig-s"), 0);
    int i = wait_heard(&hb, STORE_SIGNAL_STREAM, SID("sig-1"));
    CHECK(i >= 0);
    if (i >= 0)
        CHECK_STR(hb.extra[i], "1");
    CHECK_INT(store_stream_write(a, SID("sig-1"), NULL, 1, "{}", 2, "finished", now_ms()), 0);
    for (int k = 0; k < 500; k++) {
        pthread_mutex_lock(&hb.mu);
        int n = hb.n;
        pthread_mutex_unlock(&hb.mu);
        if (n >= 2)
            break;
        usleep(10000);
    }
    pthread_mutex_lock(&hb.mu);
    CHECK(hb.n >= 2);
    if (hb.n >= 2)
        CHECK_STR(hb.extra[1], "2e");
    pthread_mutex_unlock(&hb.mu);
    /* Sent by hand, with or without extra; a process hears not its own. */
    CHECK_INT(store_signal(b, STORE_SIGNAL_SESSION, "sig-s", NULL), 0);
    CHECK_INT(store_signal(b, STORE_SIGNAL_INBOX, "sig-s", "42"), 0);
    CHECK_INT(store_flush(b), 0);
    CHECK(wait_heard(&ha, STORE_SIGNAL_SESSION, "sig-s") >= 0);
    i = wait_heard(&ha, STORE_SIGNAL_INBOX, "sig-s");
    CHECK(i >= 0);
    if (i >= 0)
        CHECK_STR(ha.extra[i], "42");
    /* The inbox signals its row's id. */
    int64_t id = 0;
    CHECK_INT(store_inbox_put(b, "sig-s", "{}", 2, now_ms(), &id), 0);
    char want[32];
    snprintf(want, sizeof want, "%lld", (long long)id);
    int found = 0;
    for (int k = 0; k < 500 && !found; k++) {
        pthread_mutex_lock(&ha.mu);
        for (int j = 0; j < ha.n; j++)
            found |= ha.kind[j] == STORE_SIGNAL_INBOX && strcmp(ha.extra[j], want) == 0;
        pthread_mutex_unlock(&ha.mu);
        if (!found)
            usleep(10000);
    }
    CHECK(found);
    CHECK(wait_heard(&ha, STORE_SIGNAL_STREAM, SID("sig-1")) < 0 || 1);
    pthread_mutex_lock(&ha.mu);
    int own = 0;
    for (int j = 0; j < ha.n; j++)
        own |= ha.kind[j] == STORE_SIGNAL_STREAM;
    pthread_mutex_unlock(&ha.mu);
    CHECK_INT(own, 0);
    pthread_mutex_lock(&hb.mu);
    own = 0;
    for (int j = 0; j < hb.n; j++)
        own |= hb.kind[j] == STORE_SIGNAL_SESSION;
    pthread_mutex_unlock(&hb.mu);
    CHECK_INT(own, 0);
    store_signal_listen(a, NULL, NULL);
    store_signal_listen(b, NULL, NULL);
}

/* ---- PostgreSQL: migrations and faults ---- */

struct opener {
    const char *url;
    struct store *st;
    char *err;
    atomic_int *go;
};

static void *open_at_once(void *arg)
{
    struct opener *o = arg;
    while (!atomic_load(o->go))
        ;
    if (store_open(o->url, &o->st, &o->err) != 0)
        o->st = NULL;
    return NULL;
}

static void test_concurrent_migration(void)
{
    char url[512];
    if (!check_record(pg_test_db(url, sizeof url) == 0, __FILE__, __LINE__, "pg_test_db"))
        return;
    atomic_int go = 0;
    struct opener o[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        o[i] = (struct opener){url, NULL, NULL, &go};
        CHECK_INT(pthread_create(&th[i], NULL, open_at_once, &o[i]), 0);
    }
    atomic_store(&go, 1);
    int latest = store_migrations_pg[store_migrations_pg_count - 1].version;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        if (!check_record(o[i].st != NULL, __FILE__, __LINE__, "concurrent store_open"))
            printf("     %s\n", o[i].err ? o[i].err : "?");
        free(o[i].err);
        if (o[i].st) {
            CHECK_INT(store_schema_version(o[i].st), latest);
            CHECK_INT(store_ready(o[i].st), 1);
        }
    }
    CHECK_INT(pg_test_count(url, "SELECT COUNT(*) FROM mcpd_schema", NULL), 1);
    CHECK_INT(pg_test_count(url, "SELECT version FROM mcpd_schema", NULL), latest);
    for (int i = 0; i < 4; i++)
        store_close(o[i].st);

    /* A schema newer than this build knows is refused. */
    CHECK_INT(pg_test_exec(url, "UPDATE mcpd_schema SET version = 999"), 0);
    struct store *st = NULL;
    char *err = NULL;
    CHECK_INT(store_open(url, &st, &err), -1);
    CHECK(st == NULL);
    CHECK(err && strstr(err, "newer"));
    free(err);
}

static int server(const char *cmd)
{
    const char *dir = getenv("MCPD_TEST_PG_DIR");
    char line[1024];
    snprintf(line, sizeof line, "%s/tests/pg/pg-server.sh %s '%s' %s >/dev/null", MCPD_SOURCE_DIR,
             cmd, dir, strcmp(cmd, "start") == 0 ? "\"$(cat \"$MCPD_TEST_PG_DIR/port\")\"" : "");
    return system(line);
}

static void test_restart(struct store *a, const char *url)
{
    struct heard h = {.mu = PTHREAD_MUTEX_INITIALIZER};
    store_signal_listen(a, on_signal, &h);
    CHECK_INT(put_session(a, "keep-s", NULL), 0);
    CHECK_INT(put_stream(a, SID("keep-1"), "keep-s"), 0);
    CHECK_INT(store_leader(a), 1);
    CHECK_INT(server("stop"), 0);
    /* Down: the store says so at once, and every call fails fast. */
    int down = 0;
    for (int i = 0; i < 200 && !down; i++) {
        down = !store_ready(a);
        if (!down)
            usleep(10000);
    }
    CHECK_INT(down, 1);
    int64_t t0 = mono_ms();
    CHECK_INT(put_session(a, "lost-s", NULL), STORE_UNAVAILABLE);
    struct store_session s;
    CHECK_INT(store_session_get(a, "keep-s", &s), STORE_UNAVAILABLE);
    CHECK_INT(store_session_touch(a, "keep-s", now_ms()), STORE_UNAVAILABLE);
    CHECK_INT(store_sessions_count(a, NULL), STORE_UNAVAILABLE);
    CHECK(store_leader(a) < 0);
    CHECK(mono_ms() - t0 < 1000);
    /* Back: ready within 2 s of the server's return, with what it had. */
    CHECK_INT(server("start"), 0);
    int64_t t1 = mono_ms();
    while (!store_ready(a) && mono_ms() - t1 < 10000)
        usleep(10000);
    int64_t took = mono_ms() - t1;
    if (!check_record(took <= 2000, __FILE__, __LINE__, "ready within 2 s"))
        printf("     took %lld ms\n", (long long)took);
    CHECK_INT(store_session_get(a, "keep-s", &s), 0);
    store_session_free(&s);
    CHECK_INT(store_session_get(a, "lost-s", &s), 1);
    CHECK_INT(put_session(a, "after-s", NULL), 0);
    CHECK_INT(pg_test_count(url, "SELECT COUNT(*) FROM chunks WHERE stream_id = ?1", SID("keep-1")),
              1);
    /* The listener came back and said signals may have been lost; the
     * leader's lock went with its connection and is taken again. */
    CHECK(wait_heard(&h, STORE_SIGNAL_RESYNC, "") >= 0);
    CHECK_INT(store_leader(a), 1);
    store_signal_listen(a, NULL, NULL);
}

/* Appenders while the server drops every connection of the store
 * (pg_terminate_backend, as a failover or an operator would): each write
 * that said it committed is there (none is claimed that did not happen),
 * those that failed said so, and the store serves again. */
struct dropper {
    struct store *st;
    int t;
    atomic_int *stop;
    int ok[400];
    int n;
};

static void *append_through(void *arg)
{
    struct dropper *d = arg;
    char id[64];
    snprintf(id, sizeof id, SID("drop-%d"), d->t);
    for (int seq = 0; seq < 400 && !atomic_load(d->stop); seq++, d->n++) {
        int rc = store_stream_write(d->st, id, NULL, seq, "{}", 2, NULL, now_ms());
        d->ok[seq] = rc == 0;
        if (rc != 0 && rc != STORE_UNAVAILABLE && rc != -1)
            d->ok[seq] = -1;
        /* A failed seq is written again, as the core would not: the rows
         * must then hold exactly the acknowledged ones or those ambiguous. */
        if (rc != 0)
            usleep(2000);
    }
    return NULL;
}

static void test_dropped_connections(const char *url)
{
    struct store *st = open_run(url, "run-drop");
    if (!st)
        return;
    CHECK_INT(put_session(st, "drop-s", NULL), 0);
    enum { N = 4 };
    char id[64];
    for (int t = 0; t < N; t++) {
        snprintf(id, sizeof id, SID("drop-%d"), t);
        struct store_stream_new create = {"drop-s", "request", "1", NULL};
        CHECK_INT(store_stream_write(st, id, &create, -1, NULL, 0, NULL, now_ms()), 0);
    }
    atomic_int stop = 0;
    static struct dropper d[N];
    pthread_t th[N];
    for (int t = 0; t < N; t++) {
        d[t] = (struct dropper){.st = st, .t = t, .stop = &stop};
        CHECK_INT(pthread_create(&th[t], NULL, append_through, &d[t]), 0);
    }
    for (int i = 0; i < 3; i++) {
        usleep(150000);
        pg_test_count(url,
                      "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                      "application_name = 'mcpd' AND datname = current_database()",
                      NULL);
    }
    int64_t t0 = mono_ms();
    while (!store_ready(st) && mono_ms() - t0 < 10000)
        usleep(10000);
    CHECK(mono_ms() - t0 <= 2000);
    usleep(100000);
    atomic_store(&stop, 1);
    int acked = 0, failed = 0, odd = 0, missing = 0;
    for (int t = 0; t < N; t++) {
        pthread_join(th[t], NULL);
        snprintf(id, sizeof id, SID("drop-%d"), t);
        for (int seq = 0; seq < d[t].n; seq++) {
            char q[160];
            snprintf(q, sizeof q, "SELECT COUNT(*) FROM chunks WHERE stream_id = ?1 AND seq = %d",
                     seq);
            acked += d[t].ok[seq] == 1;
            failed += d[t].ok[seq] == 0;
            odd += d[t].ok[seq] < 0;
            if (d[t].ok[seq] == 1 && pg_test_count(url, q, id) != 1)
                missing++;
        }
    }
    CHECK(acked > 0);
    CHECK_INT(odd, 0);
    if (!check_record(missing == 0, __FILE__, __LINE__, "every acknowledged write is there"))
        printf("     %d of %d acknowledged writes are missing\n", missing, acked);
    printf("     dropped connections: %d writes acknowledged, %d refused\n", acked, failed);
    /* It serves again. A connection killed but not used since is found
     * dead by the write that uses it (STORE_UNAVAILABLE, and the store
     * reconnects): a client's retry then goes through. */
    int rc = -1;
    for (int64_t t1 = mono_ms(); rc != 0 && mono_ms() - t1 < 5000; usleep(rc ? 50000 : 0))
        rc = put_session(st, "drop-after", NULL);
    CHECK_INT(rc, 0);
    store_close(st);
}

/* A read from a fiber while another connection holds the table locked. */
struct parked_read {
    struct store *st;
    int rc;
    atomic_int done;
};

static void read_main(void *arg)
{
    struct parked_read *pr = arg;
    struct store_session row;
    pr->rc = store_session_get(pr->st, "parked-read", &row);
    if (pr->rc == 0)
        store_session_free(&row);
    atomic_store(&pr->done, 1);
}

static void mark_main(void *arg)
{
    atomic_store((atomic_int *)arg, 1);
}

/* Polls flag up to ms; 1 once it is set. */
static int wait_flag(atomic_int *flag, int64_t ms)
{
    int64_t deadline = mono_ms() + ms;
    while (!atomic_load(flag) && mono_ms() < deadline)
        usleep(5000);
    return atomic_load(flag);
}

/* A fiber's read on PostgreSQL parks: with one loop thread, a second fiber
 * runs while the first waits for a table another connection holds locked
 * (a read that blocked its thread would let nothing else run there until
 * the lock went). */
static void test_read_parks(const char *url)
{
    struct store *st = open_run(url, "run-rd");
    if (!st)
        return;
    CHECK_INT(put_session(st, "parked-read", "p"), 0);
    PGconn *lk = PQconnectdb(url);
    PGresult *r1 = PQexec(lk, "BEGIN");
    PQclear(r1);
    PGresult *r2 = PQexec(lk, "LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE");
    CHECK(PQresultStatus(r2) == PGRES_COMMAND_OK);
    PQclear(r2);
    CHECK_INT(loop_start(1), 0);
    struct parked_read pr = {.st = st, .rc = -9};
    atomic_int marked = 0;
    CHECK_INT(loop_spawn(read_main, &pr), 0);
    usleep(100000); /* the read is waiting for the lock */
    CHECK_INT(loop_spawn(mark_main, &marked), 0);
    CHECK(wait_flag(&marked, 3000));
    CHECK(!atomic_load(&pr.done));
    PGresult *r3 = PQexec(lk, "COMMIT");
    PQclear(r3);
    PQfinish(lk);
    CHECK(wait_flag(&pr.done, 5000));
    CHECK_INT(pr.rc, 0);
    loop_stop();
    store_close(st);
}

static void run_pair(const char *path_a, const char *path_b, int pg)
{
    struct store *a = open_run(path_a, "run-a");
    struct store *b = pg ? open_run(path_b, "run-b") : a;
    if (!a || !b) {
        store_close(a);
        return;
    }
    test_basics(a, pg);
    test_inbox(a, b);
    test_dpop_uses(a, b);
    if (pg) {
        test_nodes(a, b, pg);
        test_orphans(a, b);
        test_signals(a, b);
    } else {
        /* One process: b is a, renamed where two runs are needed. */
        struct store *b2 = open_run(path_a, "run-b");
        if (b2) {
            test_nodes(a, b2, pg);
            test_orphans(a, b2);
            CHECK_INT(store_signal(a, STORE_SIGNAL_SESSION, "x", NULL), 0);
            store_close(b2);
        }
    }
    if (b != a)
        store_close(b);
    store_close(a);
}

int main(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/mcpd-test-replicas-%d.db", (int)getpid());
    run_pair(path, path, 0);
    static const char *const sides[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char side[80];
        snprintf(side, sizeof side, "%s%s", path, sides[i]);
        unlink(side);
    }

    if (!pg_test_url()) {
        printf("SKIP PostgreSQL runs: MCPD_TEST_PG_URL is unset\n");
    } else {
        char url[512];
        if (check_record(pg_test_db(url, sizeof url) == 0, __FILE__, __LINE__, "pg_test_db")) {
            snprintf(test_url, sizeof test_url, "%s", url);
            run_pair(url, url, 1);
        }
        test_concurrent_migration();
        if (check_record(pg_test_db(url, sizeof url) == 0, __FILE__, __LINE__, "pg_test_db"))
            test_dropped_connections(url);
        if (check_record(pg_test_db(url, sizeof url) == 0, __FILE__, __LINE__, "pg_test_db"))
            test_read_parks(url);
        if (!getenv("MCPD_TEST_PG_DIR")) {
            printf("SKIP the server's restart: MCPD_TEST_PG_DIR is unset\n");
        } else if (check_record(pg_test_db(url, sizeof url) == 0, __FILE__, __LINE__,
                                "pg_test_db")) {
            struct store *a = open_run(url, "run-a");
            if (a)
                test_restart(a, url);
            store_close(a);
        }
        pg_test_drop_all();
    }
    return check_summary();
}
