/* store — see store.h. The engines' differences live below this file: the
 * statements' texts in store_sql.c, each engine's connections in
 * db_sqlite.c and db_pg.c (db.h). Here: the write queue and its group
 * commit, the readers, and on PostgreSQL the threads that keep the
 * connections alive (reconnector) and hear other processes (listener). */
#include "store.h"
#include "clock.h"
#include "fnv1a.h"
#include "db.h"
#include "fcond.h"
#include "fiber.h"
#include "lock_hold.h"
#include "pg_array.h"
#include "log.h"
#include "store_migrations.h"
#include "store_sql.h"
#include "wal.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Queue entries that are no statement of their own. */
enum {
    W_FLUSH = SQL_COUNT, /* a marker whose commit means all before it committed */
    W_STREAM_WRITE       /* a row, a chunk and/or an end: see store_stream_write */
};

#define MAX_PARAMS 12

struct write_op {
    int kind; /* an enum store_sql write, W_FLUSH or W_STREAM_WRITE */
    int nparams;
    struct db_param p[MAX_PARAMS];
    int waited;                /* the enqueuer waits and frees; else the writer frees */
    int row, chunk, end, mark; /* W_STREAM_WRITE: which statements run */
    sem_t done;                /* a waiting thread's */
    struct fiber *fiber;       /* a waiting fiber's, woken with `committed` set */
    int committed;
    int rc;
    int64_t changes, value; /* what its (last) statement changed and returned */
    struct write_op *next;
};

/* Async writes wait at most this long for a waited one to carry them into
 * a commit, so a burst of them costs one transaction, not one each. */
#define ASYNC_DELAY_MS 10
/* ...and no more than this many pile up before the writer is woken. */
#define ASYNC_BATCH 512
/* The log is checkpointed once it holds this many pages (SQLite's own
 * default). */
#define WAL_CHECKPOINT_FRAMES 1000
/* PostgreSQL: reader connections and write queues unless MCPD_DB_READERS
 * and MCPD_DB_WRITERS say (1..64). Two writers let one commit's flush
 * overlap the next one's statements; more only multiplied the commits
 * (each an fsync) on a small machine. */
#define PG_READERS 4
#define PG_WRITERS 2
/* Reconnection attempts back off from the first to the last. */
#define RECONNECT_FIRST_MS 25
#define RECONNECT_MAX_MS 500
/* The listener looks at the stop flag this often. */
#define LISTEN_POLL_MS 200
/* Nodes whose beat is older than this are removed by store_purge. */
#define NODE_KEEP_MS 60000

/* One write queue: its connection, its writer thread, its group commit.
 * SQLite has one. PostgreSQL has several, so that commits are not
 * serialized through one connection: a stream's writes all go to the queue
 * its id hashes to (its row before its chunks, in order), every other
 * write to the first. */
struct wq {
    struct store *st;
    struct db *db;
    pthread_t writer;
    int started;               /* writer runs */
    pthread_mutex_t commit_mu; /* held by whoever is committing: the writer or a waiter */
    pthread_mutex_t qmu;
    pthread_cond_t qcv; /* writer: a waited write (or many async ones) arrived */
    struct write_op *head, *tail;
    int queued, waited_queued;
    int stop;
};

struct store {
    enum db_engine engine;
    struct wq *wq;
    int nwq;
    struct db **readers;  /* the readers' (the first queue's for :memory:, one) */
    int *rbusy, nreaders; /* guarded by rmu */
    pthread_mutex_t rmu;
    struct fcond rcv; /* a reader came free (a fiber waiting for one parks) */
    int shared;       /* :memory:: the writer's connection is the one reader */
    /* PostgreSQL: the threads that run a fiber's queries (rd_begin), one
     * per reader connection, and their queue (guarded by jmu). */
    pthread_t *rthreads;
    int nrthreads;
    pthread_mutex_t jmu;
    pthread_cond_t jcv;
    struct rd_job *jobs, *jobs_tail;
    int jstop;
    const char *const *sql;
    struct wal *wal;       /* SQLite files only */
    struct lock_hold hold; /* how long a commit_mu is held at a time */
    pthread_mutex_t qmu;   /* guards what follows, to avcv */
    int failed_since_flush;
    struct store_stats stats;
    int stop;
    int healthy;
    int schema_version;
    /* PostgreSQL: the database is reachable (else calls fail at once with
     * STORE_UNAVAILABLE and the reconnector works). */
    int available;
    pthread_cond_t avcv; /* reconnector: available fell to 0, or stop */
    pthread_t reconnector, listener;
    int threads; /* 1 when those two run */
    char *target;
    struct db *ldb;      /* the listener's connection, its thread's alone */
    pthread_mutex_t smu; /* guards run (written), cb, cb_arg, beaten */
    char *run;
    store_signal_cb cb;
    void *cb_arg;
    pthread_mutex_t lmu; /* guards the leader's connection */
    struct db *leader_db;
    int leader_held;
    int run_locked; /* leader_db holds this run's lock (mcpd_run_alive) */
    int beaten;     /* store_node_beat wrote this run's row once (guarded by smu) */
};

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- availability (PostgreSQL) ---- */

static int available(struct store *st)
{
    if (st->engine != DB_PG)
        return 1;
    pthread_mutex_lock(&st->qmu);
    int ok = st->available;
    pthread_mutex_unlock(&st->qmu);
    return ok;
}

/* A connection was found lost: until the reconnector has every connection
 * back, calls fail at once. */
static void mark_unavailable(struct store *st)
{
    pthread_mutex_lock(&st->qmu);
    if (st->available)
        log_local(LOG_WARN, NULL, "store_unavailable",
                  "lost the connection to PostgreSQL; reconnecting");
    st->available = 0;
    pthread_cond_signal(&st->avcv);
    pthread_mutex_unlock(&st->qmu);
}

/* ---- readers ---- */

static struct db *reader_get(struct store *st, int *slot)
{
    pthread_mutex_lock(&st->rmu);
    for (;;) {
        for (int i = 0; i < st->nreaders; i++)
            if (!st->rbusy[i]) {
                st->rbusy[i] = 1;
                *slot = i;
                pthread_mutex_unlock(&st->rmu);
                return st->readers[i];
            }
        fcond_wait_until(&st->rcv, &st->rmu, -1);
    }
}

static void reader_put(struct store *st, int slot)
{
    pthread_mutex_lock(&st->rmu);
    st->rbusy[slot] = 0;
    fcond_signal(&st->rcv);
    pthread_mutex_unlock(&st->rmu);
}

/* A read on a reader connection. */
struct rd {
    struct store *st;
    struct db_rows r;
    int slot;
};

/* The result of a failed read: a lost connection makes the store
 * unavailable. */
static int read_failed(struct store *st, struct db *c, int rc)
{
    if (rc == DB_UNAVAILABLE || db_broken(c)) {
        mark_unavailable(st);
        return STORE_UNAVAILABLE;
    }
    return -1;
}

/* Runs statement k on c. A connection the server dropped while it was
 * idle (a restart) reconnects once at once, so that the first read after
 * a restart is no failure; one whose server stopped answering does not
 * (the attempt would wait connect_timeout more, likely for nothing: the
 * reconnector takes over). */
static int query(struct db *c, int k, const struct db_param *p, int n, struct db_rows *r)
{
    int rc = db_query(c, k, p, n, r);
    if (rc == DB_UNAVAILABLE && db_broken(c) != DB_STALLED && db_reset(c) == 0)
        rc = db_query(c, k, p, n, r);
    return rc;
}

/* ---- a fiber's reads (PostgreSQL) ----
 *
 * A query on PostgreSQL is a network round trip, and with the database
 * host gone quiet it can last until the query timeout (db_pg.c). A
 * request's fiber must not hold its loop thread for that: it hands the
 * query to the store's reader threads and parks until one has run it. libpq then holds
 * the whole result, so the rows are read on the fiber. (A SQLite read is
 * a read of the page cache or the local disk, done in place.) */
struct rd_job {
    struct db *c;
    int k;
    const struct db_param *p;
    int n;
    struct db_rows *r;
    int rc;
    struct fiber *fiber;
    int done; /* set by fiber_wake_set: the job is the fiber's again */
    struct rd_job *next;
};

static void *reader_main(void *arg)
{
    struct store *st = arg;
    pthread_setname_np(pthread_self(), "mcpd-store-rd");
    pthread_mutex_lock(&st->jmu);
    for (;;) {
        while (!st->jobs && !st->jstop)
            pthread_cond_wait(&st->jcv, &st->jmu);
        struct rd_job *j = st->jobs;
        if (!j)
            break;
        st->jobs = j->next;
        if (!st->jobs)
            st->jobs_tail = NULL;
        pthread_mutex_unlock(&st->jmu);
        j->rc = query(j->c, j->k, j->p, j->n, j->r);
        fiber_wake_set(j->fiber, &j->done); /* j is on the fiber's stack: not touched after */
        pthread_mutex_lock(&st->jmu);
    }
    pthread_mutex_unlock(&st->jmu);
    return NULL;
}

static int query_parked(struct store *st, struct db *c, int k, const struct db_param *p, int n,
                        struct db_rows *r)
{
    struct rd_job j = {.c = c, .k = k, .p = p, .n = n, .r = r, .fiber = fiber_current()};
    pthread_mutex_lock(&st->jmu);
    if (st->jobs_tail)
        st->jobs_tail->next = &j;
    else
        st->jobs = &j;
    st->jobs_tail = &j;
    pthread_cond_signal(&st->jcv);
    pthread_mutex_unlock(&st->jmu);
    /* A cancelled fiber (its connection is going away) still waits for
     * the job, which points into its stack, without holding its thread. */
    int w;
    while ((w = fiber_park(&j.done, -1)) != 1)
        if (w == ECANCELED)
            fiber_park_outlast();
    return j.rc;
}

/* One reader thread per reader connection, for PostgreSQL. */
static int start_reader_threads(struct store *st, char **err)
{
    st->rthreads = calloc((size_t)st->nreaders, sizeof *st->rthreads);
    if (!st->rthreads) {
        *err = db_fmt_err("out of memory");
        return -1;
    }
    for (; st->nrthreads < st->nreaders; st->nrthreads++)
        if (pthread_create(&st->rthreads[st->nrthreads], NULL, reader_main, st) != 0) {
            *err = db_fmt_err("cannot start the store's reader threads");
            return -1;
        }
    return 0;
}

/* After every read has ended. */
static void stop_reader_threads(struct store *st)
{
    pthread_mutex_lock(&st->jmu);
    st->jstop = 1;
    pthread_cond_broadcast(&st->jcv);
    pthread_mutex_unlock(&st->jmu);
    for (int i = 0; i < st->nrthreads; i++)
        pthread_join(st->rthreads[i], NULL);
    st->nrthreads = 0;
    free(st->rthreads);
    st->rthreads = NULL;
}

/* Starts statement k on a free reader; 0, then rd_next and rd_end, or -1 /
 * STORE_UNAVAILABLE. On a fiber, on PostgreSQL, the query runs on a
 * reader thread while the fiber parks. */
static int rd_begin(struct store *st, struct rd *q, int k, const struct db_param *p, int n)
{
    if (!available(st))
        return STORE_UNAVAILABLE;
    q->st = st;
    struct db *c = reader_get(st, &q->slot);
    int rc = st->nrthreads && fiber_current() ? query_parked(st, c, k, p, n, &q->r)
                                              : query(c, k, p, n, &q->r);
    if (rc != 0) {
        rc = read_failed(st, c, rc);
        reader_put(st, q->slot);
        q->r.c = NULL;
        return rc;
    }
    return 0;
}

/* 1 a row, 0 done, -1 / STORE_UNAVAILABLE. */
static int rd_next(struct rd *q)
{
    int rc = db_next(&q->r);
    return rc >= 0 ? rc : read_failed(q->st, q->r.c, rc);
}

static void rd_end(struct rd *q)
{
    if (!q->r.c)
        return;
    db_rows_end(&q->r);
    reader_put(q->st, q->slot);
}

static char *col_dup(struct rd *q, int col)
{
    const char *t = db_text(&q->r, col);
    return t ? strdup(t) : NULL;
}

#define P_TEXT(v)                                                                                  \
    {                                                                                              \
        .type = (v) ? DB_TEXT : DB_NULL, .s = (v), .len = (v) ? strlen(v) : 0                      \
    }
#define P_INT(v)                                                                                   \
    {                                                                                              \
        .type = DB_INT, .i = (v)                                                                   \
    }

/* ---- the write queue ---- */

static void op_free(struct write_op *op)
{
    free(op); /* its texts live in the same allocation (op_new) */
}

/* One statement of a write; a chunk whose stream is gone is
 * STORE_STREAM_GONE (its only parent is the stream's row: a request racing
 * its session's DELETE writes after the row is gone). */
static int run_stmt(struct db *db, struct write_op *op, int kind, int64_t *changes)
{
    int rc = db_exec(db, kind, op->p, op->nparams, changes, &op->value);
    if (rc == DB_FOREIGN_KEY)
        return kind == W_CHUNK ? STORE_STREAM_GONE : -1;
    return rc;
}

/* op_run's result when a stream write failed halfway and what it had
 * written could not be taken back: the transaction must not commit. */
#define OP_HALF_WRITTEN (-3)

/* SQLite: one write, statement by statement. */
static int op_run(struct db *db, struct write_op *op)
{
    if (op->kind == W_FLUSH)
        return 0;
    if (op->kind != W_STREAM_WRITE)
        return run_stmt(db, op, op->kind, &op->changes);
    /* At most two statements run (the row carries the end when there is a
     * row). When the second fails (a statement that fails changes nothing
     * itself), a delete takes the first back. A SAVEPOINT around them did
     * the same at about 7,000 more instructions per message (two more
     * statements, and SQLite's bookkeeping for a savepoint's pages). */
    int rc = 0;
    if (op->row)
        rc = run_stmt(db, op, W_ROW, NULL);
    if (rc == 0 && op->chunk) {
        rc = run_stmt(db, op, W_CHUNK, NULL);
        if (rc != 0 && op->row && run_stmt(db, op, W_UNDO_ROW, NULL) != 0)
            return OP_HALF_WRITTEN;
    }
    if (rc == 0 && op->end && !op->row) {
        int64_t changed = 0;
        rc = run_stmt(db, op, W_END, &changed);
        if (rc == 0 && changed != 1)
            rc = STORE_STREAM_GONE;
        if (rc != 0 && op->chunk && run_stmt(db, op, W_UNDO_CHUNK, NULL) != 0)
            return OP_HALF_WRITTEN;
    }
    /* A mark that fails (it updates one row by its key; the log says why)
     * leaves the copy in place: a later catch-up copies that message again
     * rather than losing it. Unless SQLite rolled the whole transaction
     * back with it (I/O, a full disk): then the batch has failed. */
    if (rc == 0 && op->mark && run_stmt(db, op, W_RELAY_MARK, NULL) != 0 && !db_in_transaction(db))
        return -1;
    return rc;
}

static int is_purge(int kind)
{
    return kind == W_PURGE_IDLE_SESSIONS || kind == W_PURGE_TOMBSTONES || kind == W_PURGE_STREAMS;
}

/* Where a commit that held the lock long spent it (microseconds), for the
 * warning logged once the lock is released. */
struct slow_commit {
    int64_t held, statements, commit, log_copy;
    uint64_t writes;
};

/* What running a batch came to: `fail` 0 when each op's rc is its own,
 * else the rc of every op (the transaction failed); the times split the
 * hold for the slow-commit warning. */
struct batch_result {
    int fail;
    uint64_t purged;
    int64_t t_statements, t_commit;
};

/* SQLite: BEGIN, each op, COMMIT, on the writer's connection. */
static void commit_sqlite(struct db *db, struct write_op *batch, struct batch_result *res)
{
    int began = db_exec(db, W_BEGIN, NULL, 0, NULL, NULL) == 0, failed = !began;
    for (struct write_op *op = batch; op && !failed; op = op->next) {
        op->rc = op_run(db, op);
        /* SQLite itself rolls the whole transaction back after some
         * failures (I/O, full disk, no memory, a trigger's ROLLBACK): what
         * ran before is gone, and what follows would commit alone. */
        failed = op->rc == OP_HALF_WRITTEN || (op->rc != 0 && !db_in_transaction(db));
        if (op->rc == 0 && is_purge(op->kind))
            res->purged += (uint64_t)op->changes;
    }
    res->t_statements = clock_mono_us();
    if (!failed && db_exec(db, W_COMMIT, NULL, 0, NULL, NULL) != 0)
        failed = 1;
    res->t_commit = clock_mono_us();
    /* (SQLite may have rolled it back already.) */
    if (failed && began && db_in_transaction(db))
        db_exec(db, W_ROLLBACK, NULL, 0, NULL, NULL);
    res->fail = failed ? -1 : 0;
}

/* PostgreSQL: the statements op adds to a pipelined batch. A stream
 * write's chunk and end are followed by its signal (pg_notify), which
 * PostgreSQL delivers at the commit. row_chunk_elsewhere: its stream row
 * and first chunk are in a W_ROW_CHUNK_MANY (pg_run). */
static int pg_calls_of(struct store *st, struct write_op *op, struct db_call *calls,
                       struct db_param *sig, char **payload, int row_chunk_elsewhere)
{
    int n = 0;
#define CALL(k_) (calls[n++] = (struct db_call){.k = (k_), .p = op->p, .n = op->nparams})
    if (op->kind == W_FLUSH)
        return 0;
    if (op->kind != W_STREAM_WRITE) {
        CALL(op->kind);
        return n;
    }
    if (op->row && op->chunk) {
        if (!row_chunk_elsewhere)
            CALL(W_ROW_CHUNK);
    } else {
        if (op->row)
            CALL(W_ROW);
        if (op->chunk)
            CALL(W_CHUNK);
    }
    if (op->end && !op->row)
        CALL(W_END);
    if (op->mark)
        CALL(W_RELAY_MARK);
#undef CALL
    /* A stream created and ended by one write had no reader anywhere
     * before this commit (nobody knew its id): no signal, which spares
     * PostgreSQL a NOTIFY (they serialize commits server-wide) for every
     * quick reply. */
    if ((op->chunk || op->end) && !(op->row && op->end)) {
        char next[32] = "";
        if (op->chunk)
            snprintf(next, sizeof next, "%lld", (long long)op->p[1].i + 1);
        pthread_mutex_lock(&st->smu);
        if (asprintf(payload, "%c %s %s %s%s", STORE_SIGNAL_STREAM, st->run ? st->run : "-",
                     op->p[0].s, next, op->end ? "e" : "") < 0)
            *payload = NULL;
        pthread_mutex_unlock(&st->smu);
        if (*payload) {
            *sig = (struct db_param){.type = DB_TEXT, .s = *payload, .len = strlen(*payload)};
            calls[n++] = (struct db_call){.k = W_NOTIFY, .p = sig, .n = 1};
        }
    }
    return n;
}

/* A statement of many rows (W_LOG_MANY, W_ROW_CHUNK_MANY): its parameters
 * are array literals (pg_array.h), one a column, owned here. */
struct many {
    struct db_param p[10];
    char *text[10];
};

static void many_free(struct many *m)
{
    for (int c = 0; c < 10; c++)
        free(m->text[c]);
}

/* Column c of m from a; 0, or -1 when out of memory. */
static int many_column(struct many *m, int c, struct pg_array *a)
{
    m->text[c] = pg_array_end(a);
    m->p[c] = (struct db_param){
        .type = DB_TEXT, .s = m->text[c], .len = m->text[c] ? strlen(m->text[c]) : 0};
    return m->text[c] ? 0 : -1;
}

/* Adds param p of op to a (text, NULL, or an integer). */
static void many_add(struct pg_array *a, const struct db_param *p)
{
    if (p->type == DB_INT)
        pg_array_add_int(a, p->i);
    else
        pg_array_add_text(a, p->type == DB_NULL ? NULL : p->s, p->len);
}

/* Every log line of the batch as one W_LOG_MANY call. 0, or -1 when out of
 * memory. */
static int pg_logs_call(struct write_op *first, struct write_op *end, struct many *m,
                        struct db_call *call)
{
    struct pg_array a[4];
    for (int c = 0; c < 4; c++)
        pg_array_begin(&a[c]);
    for (struct write_op *op = first; op != end; op = op->next)
        if (op->kind == W_LOG)
            for (int c = 0; c < 4; c++)
                many_add(&a[c], &op->p[c]);
    int rc = 0;
    for (int c = 0; c < 4; c++)
        rc |= many_column(m, c, &a[c]);
    *call = (struct db_call){.k = W_LOG_MANY, .p = m->p, .n = 4};
    return rc;
}

/* A stream's creation with its first message (a quick reply, mostly) that
 * can go with others' in one W_ROW_CHUNK_MANY; a large message goes alone,
 * rather than be copied and escaped into an array. */
#define ROW_CHUNK_MANY_MAX (64 * 1024)
static int row_chunk_joins(const struct write_op *op)
{
    return op->kind == W_STREAM_WRITE && op->row && op->chunk && !op->mark &&
           op->p[2].len <= ROW_CHUNK_MANY_MAX;
}

/* The run of ops from `from` that share one W_ROW_CHUNK_MANY: those that
 * join, and the log lines between them (which go elsewhere and depend on
 * nothing); it ends at any other op, which may depend on the rows before it
 * or be depended on by those after it. Returns the op after the run, and
 * the number that join in *joined. */
static struct write_op *row_chunk_run(struct write_op *from, struct write_op *end, int *joined)
{
    *joined = 0;
    struct write_op *op = from;
    for (; op != end && (row_chunk_joins(op) || op->kind == W_LOG); op = op->next)
        *joined += row_chunk_joins(op);
    return op;
}

/* The run's stream rows and first messages as one W_ROW_CHUNK_MANY call (its
 * ten columns: store_sql.c). 0, or -1 when out of memory. */
static int pg_row_chunks_call(struct write_op *from, struct write_op *to, struct many *m,
                              struct db_call *call)
{
    /* The columns, from the W_STREAM_WRITE params (store_stream_write). */
    static const int param_of[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 11};
    struct pg_array a[10];
    for (int c = 0; c < 10; c++)
        pg_array_begin(&a[c]);
    for (struct write_op *op = from; op != to; op = op->next)
        if (row_chunk_joins(op))
            for (int c = 0; c < 10; c++)
                many_add(&a[c], &op->p[param_of[c]]);
    int rc = 0;
    for (int c = 0; c < 10; c++)
        rc |= many_column(m, c, &a[c]);
    *call = (struct db_call){.k = W_ROW_CHUNK_MANY, .p = m->p, .n = 10};
    return rc;
}

/* Runs the ops from `first` up to `end` (exclusive) as one pipelined
 * transaction and gives each its rc: 0 when committed (a chunk or end
 * that found no stream: STORE_STREAM_GONE), else the batch's failure.
 * Two or more log lines go as one statement where the first of them was
 * (logs depend on nothing else in the batch), and a run of two or more new
 * streams with their first messages as one statement where the run began.
 * A statement per row costs PostgreSQL more than the rows themselves. When
 * the batch fails, each op runs again alone (commit_pg), as its own
 * statements. */
static int pg_run(struct store *st, struct db *db, struct write_op *first, struct write_op *end,
                  struct batch_result *res)
{
    int nops = 0, nlogs = 0;
    for (struct write_op *op = first; op != end; op = op->next) {
        nops++;
        nlogs += op->kind == W_LOG;
    }
    /* At most five statements an op (a stream write), and its signal. */
    struct db_call *calls = calloc((size_t)nops * 5 + 1, sizeof *calls);
    struct db_param *sig = calloc((size_t)nops + 1, sizeof *sig);
    char **payload = calloc((size_t)nops + 1, sizeof *payload);
    int *at = calloc((size_t)nops + 1, sizeof *at);
    /* The logs' statement and one a run (a run is at least two ops). */
    struct many *many = calloc((size_t)nops / 2 + 2, sizeof *many);
    int rc = -1, n = 0, i = 0, nmany = 0, many_failed = 0, logs_placed = 0;
    /* In a run put in one statement (run_to: the op after it, NULL at the end). */
    int in_run = 0;
    struct write_op *run_to = NULL;
    if (calls && sig && payload && at && many) {
        for (struct write_op *op = first; op != end; op = op->next, i++) {
            at[i] = n;
            if (in_run && op == run_to)
                in_run = 0;
            if (nlogs > 1 && op->kind == W_LOG) {
                if (!logs_placed++)
                    many_failed |= pg_logs_call(first, end, &many[nmany++], &calls[n++]);
                continue;
            }
            int in_many = 0;
            if (row_chunk_joins(op)) {
                if (!in_run) {
                    int joined;
                    run_to = row_chunk_run(op, end, &joined);
                    in_run = joined > 1;
                    if (in_run)
                        many_failed |= pg_row_chunks_call(op, run_to, &many[nmany++], &calls[n++]);
                }
                in_many = in_run;
            }
            n += pg_calls_of(st, op, calls + n, &sig[i], &payload[i], in_many);
        }
        at[i] = n;
        rc = many_failed ? -1 : n > 0 ? db_batch(db, calls, n) : 0;
    }
    res->t_statements = res->t_commit = clock_mono_us();
    i = 0;
    for (struct write_op *op = first; op != end; op = op->next, i++) {
        op->rc = rc;
        if (rc == -1 && calls) {
            /* The call that failed says why (a chunk's missing stream). */
            for (int c = at[i]; c < at[i + 1]; c++)
                if (calls[c].rc == DB_FOREIGN_KEY && calls[c].k == W_CHUNK)
                    op->rc = STORE_STREAM_GONE;
        }
        if (rc != 0)
            continue;
        for (int c = at[i]; c < at[i + 1]; c++) {
            const struct db_call *call = &calls[c];
            if ((call->k == W_CHUNK || call->k == W_ROW_CHUNK || (call->k == W_END && !op->row)) &&
                call->changes == 0)
                op->rc = STORE_STREAM_GONE;
            if (call->k == op->kind) {
                op->changes = call->changes;
                op->value = call->value;
            }
        }
        if (is_purge(op->kind))
            res->purged += (uint64_t)op->changes;
    }
    for (int k = 0; payload && k < nops; k++)
        free(payload[k]);
    for (int k = 0; k < nmany; k++)
        many_free(&many[k]);
    free(many);
    free(calls);
    free(sig);
    free(payload);
    free(at);
    return rc;
}

/* PostgreSQL: the whole queue in one round trip. A failed statement
 * aborts a PostgreSQL transaction, so when one op fails the others run
 * again each in a transaction of its own, where only it fails. A lost
 * connection fails every op not yet committed with STORE_UNAVAILABLE (a
 * COMMIT whose answer never came is not claimed). */
static void commit_pg(struct store *st, struct db *db, struct write_op *batch,
                      struct batch_result *res)
{
    res->fail = 0;
    int rc = available(st) ? pg_run(st, db, batch, NULL, res) : STORE_UNAVAILABLE;
    if (rc == STORE_UNAVAILABLE)
        res->fail = rc;
    else if (rc == -1 && batch->next)
        for (struct write_op *op = batch; op; op = op->next) {
            if (rc == STORE_UNAVAILABLE)
                op->rc = rc;
            else
                rc = pg_run(st, db, op, op->next, res);
        }
    if (rc == STORE_UNAVAILABLE)
        mark_unavailable(st);
}

/* Commits everything queued as one transaction and hands each waited write
 * its result. Called with commit_mu held; its time is the lock's hold (a
 * queue another committer emptied first holds it for nothing worth
 * counting). Returns 1 when the hold was slow enough to log (*slow says
 * why): the caller logs after unlocking, so that a slow stderr does not
 * lengthen the very stall it reports. */
static int commit_queue(struct wq *q, struct slow_commit *slow)
{
    struct store *st = q->st;
    int64_t t0 = clock_mono_us();
    pthread_mutex_lock(&q->qmu);
    struct write_op *batch = q->head;
    q->head = q->tail = NULL;
    q->queued = q->waited_queued = 0;
    pthread_mutex_unlock(&q->qmu);
    if (!batch)
        return 0;

    /* :memory: has one connection, the one reader's. */
    int slot = 0;
    if (st->shared)
        reader_get(st, &slot);
    struct batch_result res = {0};
    if (st->engine == DB_PG)
        commit_pg(st, q->db, batch, &res);
    else
        commit_sqlite(q->db, batch, &res);
    int64_t copy_us = wal_take_hook_us(st->wal);
    if (st->shared)
        reader_put(st, slot);

    /* store_flush reports the failures nobody else heard of: a waited
     * write's failure went back to its caller. */
    int unheard_failed = res.fail != 0, committed = res.fail == 0;
    uint64_t nops = 0, nfailed = 0;
    struct write_op *next;
    for (struct write_op *op = batch; op; op = next) {
        next = op->next;
        if (res.fail)
            op->rc = res.fail;
        unheard_failed |= op->rc < 0 && !op->waited;
        nops += op->kind != W_FLUSH;
        nfailed += op->rc < 0;
        if (op->waited && op->fiber)
            fiber_wake_set(op->fiber, &op->committed); /* the waiter owns it from here */
        else if (op->waited)
            sem_post(&op->done);
        else
            op_free(op);
    }
    /* Counted before the commit is: a reader of store_stats never sees a
     * commit without its hold. */
    int64_t t3 = clock_mono_us();
    int logged = lock_hold_record(&st->hold, t3 - t0);
    if (logged)
        *slow = (struct slow_commit){t3 - t0, res.t_statements - t0,
                                     res.t_commit - res.t_statements, copy_us, nops};
    pthread_mutex_lock(&st->qmu);
    if (unheard_failed)
        st->failed_since_flush = 1;
    st->healthy = res.fail != -1;
    st->stats.commits += (uint64_t)committed;
    st->stats.writes += nops;
    st->stats.failures += nfailed;
    st->stats.purged += committed ? res.purged : 0;
    pthread_mutex_unlock(&st->qmu);
    return logged;
}

/* The warning for a slow hold, logged once the lock is released. */
static void report_slow(const struct slow_commit *slow)
{
    log_local(LOG_WARN, NULL, "store_slow_commit",
              "a commit held the store's commit lock for %.1f ms (%llu writes: statements "
              "%.1f ms, COMMIT %.1f ms, of which copying the log %.1f ms)",
              (double)slow->held / 1000, (unsigned long long)slow->writes,
              (double)slow->statements / 1000, (double)slow->commit / 1000,
              (double)slow->log_copy / 1000);
}

void store_stats(struct store *st, struct store_stats *out)
{
    pthread_mutex_lock(&st->qmu);
    *out = st->stats;
    pthread_mutex_unlock(&st->qmu);
    lock_hold_read(&st->hold, out);
}

/* The writer commits what no waiting thread commits itself: async writes
 * (after a short delay, so they share a commit), and waited ones that were
 * not alone in the queue or found a commit running. */
static void *writer_main(void *arg)
{
    struct wq *q = arg;
    pthread_setname_np(pthread_self(), "mcpd-store");
    for (;;) {
        pthread_mutex_lock(&q->qmu);
        while (!q->waited_queued && !q->stop && q->queued < ASYNC_BATCH) {
            if (!q->head) {
                pthread_cond_wait(&q->qcv, &q->qmu);
            } else if (clock_cond_wait_until(&q->qcv, &q->qmu, clock_mono_ms() + ASYNC_DELAY_MS) ==
                       ETIMEDOUT) {
                break;
            }
        }
        int have = q->head != NULL, stopping = q->stop;
        pthread_mutex_unlock(&q->qmu);
        if (!have) {
            if (stopping)
                break;
            continue;
        }
        struct slow_commit slow;
        pthread_mutex_lock(&q->commit_mu);
        int slowed = commit_queue(q, &slow);
        pthread_mutex_unlock(&q->commit_mu);
        if (slowed)
            report_slow(&slow);
    }
    return NULL;
}

/* Builds an op from a format: 'i' int64, 's' text (NULL allowed), 'b' text
 * and its length, 'n' null. One allocation holds the op and a copy of every
 * text, where one each cost a malloc per parameter of every message. */
static struct write_op *op_new(int kind, const char *fmt, va_list ap)
{
    struct db_param p[MAX_PARAMS];
    const char *text[MAX_PARAMS];
    int n = 0;
    size_t bytes = 0;
    for (const char *f = fmt; *f && n < MAX_PARAMS; f++, n++) {
        p[n] = (struct db_param){.type = DB_NULL};
        if (*f == 'i') {
            p[n].type = DB_INT;
            p[n].i = va_arg(ap, int64_t);
        } else if (*f == 's' || *f == 'b') {
            text[n] = va_arg(ap, const char *);
            size_t len = *f == 'b' ? va_arg(ap, size_t) : (text[n] ? strlen(text[n]) : 0);
            if (text[n]) {
                p[n].type = DB_TEXT;
                p[n].len = len;
                bytes += len + 1;
            }
        }
    }
    struct write_op *op = calloc(1, sizeof *op + bytes);
    if (!op)
        return NULL;
    op->kind = kind;
    op->nparams = n;
    char *at = (char *)(op + 1);
    for (int i = 0; i < n; i++) {
        op->p[i] = p[i];
        if (p[i].type == DB_TEXT) {
            memcpy(at, text[i], p[i].len);
            at[p[i].len] = '\0';
            op->p[i].s = at;
            at += p[i].len + 1;
        }
    }
    return op;
}

/* The queue of an op: a stream write's by its stream id (FNV-1a), so that
 * a stream's writes keep their order; any other, the first. */
static struct wq *queue_of(struct store *st, const struct write_op *op)
{
    if (st->nwq == 1 || op->kind != W_STREAM_WRITE || !op->p[0].s)
        return &st->wq[0];
    return &st->wq[fnv1a_str(op->p[0].s) % (uint32_t)st->nwq];
}

/* Until the writer has handed op back. A fiber whose connection is going
 * away (cancelled) still needs its answer: it polls, which only shutdown
 * does. */
static void wait_committed(struct write_op *op)
{
    if (!op->fiber) {
        fiber_warn_if_blocking("a store commit wait");
        while (sem_wait(&op->done) != 0)
            ;
        return;
    }
    int r;
    while ((r = fiber_park(&op->committed, -1)) != 1)
        if (r == ECANCELED) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
}

/* Queues op; with wait, blocks until it is committed and returns its
 * result, with what its statement changed and returned in *changes and
 * *value (may be NULL), and frees it. While PostgreSQL cannot be reached,
 * fails at once. */
static int submit_to(struct store *st, struct wq *q, struct write_op *op, int wait,
                     int64_t *changes, int64_t *value)
{
    op->waited = wait;
    /* A fiber (an HTTP request on a pool thread) parks instead of
     * blocking: its pool thread serves other connections meanwhile. */
    op->fiber = wait ? fiber_current() : NULL;
    if (wait && !op->fiber)
        sem_init(&op->done, 0, 0);
    int up = available(st);
    pthread_mutex_lock(&q->qmu);
    if (q->stop || !up) {
        int rc = q->stop ? -1 : STORE_UNAVAILABLE;
        pthread_mutex_unlock(&q->qmu);
        if (wait && !op->fiber)
            sem_destroy(&op->done);
        op_free(op);
        return rc;
    }
    if (q->tail)
        q->tail->next = op;
    else
        q->head = op;
    q->tail = op;
    q->queued++;
    if (wait)
        q->waited_queued++;
    /* A fiber's write always goes to the writer thread: committed inline
     * it would hold the pool thread, and every connection on it, for the
     * whole commit, and commits would no longer gather many writes. */
    int alone = q->waited_queued == 1 && !op->fiber;
    /* Async writes wake the writer only in bulk; otherwise they ride along
     * with the next waited write or the writer's short timer. A waited
     * write that is not alone wakes it now, under the lock it holds
     * anyway. */
    if (wait ? !alone : q->queued == 1 || q->queued >= ASYNC_BATCH)
        pthread_cond_signal(&q->qcv);
    pthread_mutex_unlock(&q->qmu);
    if (!wait)
        return 0;
    /* A waited write alone in the queue, with no commit running, is
     * committed by its own thread (with whatever queued meanwhile): no
     * hand-off, which is what one request at a time wants. One that finds
     * others waiting leaves them all to the writer thread. Request threads that committed for
     * everyone (the first version) made the same load about 7% slower: the
     * commit lock, held back to back under load, was held longer per
     * request when the holder was also a connection's thread. (A fiber
     * never gets here: see `alone` above.) */
    if (alone) {
        if (pthread_mutex_trylock(&q->commit_mu) == 0) {
            struct slow_commit slow;
            int slowed = commit_queue(q, &slow);
            pthread_mutex_unlock(&q->commit_mu);
            if (slowed)
                report_slow(&slow);
        }
        /* Our write, or writes queued during our commit, may still wait. */
        pthread_mutex_lock(&q->qmu);
        if (q->waited_queued)
            pthread_cond_signal(&q->qcv);
        pthread_mutex_unlock(&q->qmu);
    }
    wait_committed(op);
    int rc = op->rc;
    if (changes)
        *changes = op->changes;
    if (value)
        *value = op->value;
    if (!op->fiber)
        sem_destroy(&op->done);
    op_free(op);
    return rc;
}

/* submit_to op's queue (queue_of). */
static int submit(struct store *st, struct write_op *op, int wait, int64_t *changes, int64_t *value)
{
    return submit_to(st, queue_of(st, op), op, wait, changes, value);
}

/* Queues a write of statement `kind` with the parameters fmt says; with
 * wait, returns its result (submit). */
static int enqueue_out(struct store *st, int wait, int64_t *changes, int64_t *value, int kind,
                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    struct write_op *op = op_new(kind, fmt, ap);
    va_end(ap);
    if (!op)
        return -1;
    return submit(st, op, wait, changes, value);
}

#define enqueue(st, wait, ...) enqueue_out(st, wait, NULL, NULL, __VA_ARGS__)

/* A waited W_STREAM_WRITE with its statement flags. */
static int enqueue_stream(struct store *st, int row, int chunk, int end, int mark, const char *fmt,
                          ...)
{
    va_list ap;
    va_start(ap, fmt);
    struct write_op *op = op_new(W_STREAM_WRITE, fmt, ap);
    va_end(ap);
    if (!op)
        return -1;
    op->row = row;
    op->chunk = chunk;
    op->end = end;
    op->mark = mark;
    return submit(st, op, 1, NULL, NULL);
}

/* ---- PostgreSQL: reconnecting and listening ---- */

static int stopping(struct store *st)
{
    pthread_mutex_lock(&st->qmu);
    int s = st->stop;
    pthread_mutex_unlock(&st->qmu);
    return s;
}

/* Every connection anew (after an outage all are stale, even those that
 * have not found out yet): the writer's between commits, each reader's
 * between reads. */
static int reconnect_all(struct store *st)
{
    int ok = 1;
    for (int i = 0; i < st->nwq && ok; i++) {
        pthread_mutex_lock(&st->wq[i].commit_mu);
        ok = db_reset(st->wq[i].db) == 0;
        pthread_mutex_unlock(&st->wq[i].commit_mu);
    }
    for (int i = 0; i < st->nreaders && ok; i++) {
        pthread_mutex_lock(&st->rmu);
        while (st->rbusy[i])
            fcond_wait_until(&st->rcv, &st->rmu, -1);
        st->rbusy[i] = 1;
        pthread_mutex_unlock(&st->rmu);
        ok = db_reset(st->readers[i]) == 0;
        reader_put(st, i);
    }
    return ok ? 0 : -1;
}

/* Waits for the store to become unavailable, then reconnects with a
 * backoff until every connection is back. */
static void *reconnector_main(void *arg)
{
    struct store *st = arg;
    pthread_setname_np(pthread_self(), "mcpd-store-re");
    for (;;) {
        pthread_mutex_lock(&st->qmu);
        while (st->available && !st->stop)
            pthread_cond_wait(&st->avcv, &st->qmu);
        int stop = st->stop;
        pthread_mutex_unlock(&st->qmu);
        if (stop)
            break;
        int64_t wait = RECONNECT_FIRST_MS;
        while (!stopping(st)) {
            if (reconnect_all(st) == 0) {
                pthread_mutex_lock(&st->qmu);
                st->available = 1;
                st->healthy = 1;
                pthread_mutex_unlock(&st->qmu);
                log_local(LOG_INFO, NULL, "store_available", "reconnected to PostgreSQL");
                break;
            }
            sleep_ms(wait);
            wait = wait * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS : wait * 2;
        }
    }
    return NULL;
}

/* Calls the callback (under smu, so store_signal_listen never races it). */
static void deliver(struct store *st, char kind, const char *run, const char *key,
                    const char *extra)
{
    pthread_mutex_lock(&st->smu);
    int own = run && st->run && strcmp(run, st->run) == 0;
    if (!own && st->cb)
        st->cb(st->cb_arg, kind, key, extra);
    pthread_mutex_unlock(&st->smu);
}

/* "<kind> <run> <key> [<extra>]" */
static void on_payload(void *arg, const char *payload)
{
    char run[128], key[256], extra[256];
    extra[0] = '\0';
    if (!payload[0] || payload[1] != ' ' ||
        sscanf(payload + 2, "%127s %255s %255s", run, key, extra) < 2)
        return;
    deliver(arg, payload[0], run, key, extra[0] ? extra : NULL);
}

/* Hears the other processes' signals. Its connection is also the first to
 * see the server go: then the store becomes unavailable at once. */
static void *listener_main(void *arg)
{
    struct store *st = arg;
    pthread_setname_np(pthread_self(), "mcpd-store-ls");
    int64_t wait = RECONNECT_FIRST_MS;
    int lost = 0;
    while (!stopping(st)) {
        if (lost) {
            if (db_reset(st->ldb) != 0 || db_listen(st->ldb, STORE_SQL_CHANNEL) != 0) {
                sleep_ms(wait);
                wait = wait * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS : wait * 2;
                continue;
            }
            wait = RECONNECT_FIRST_MS;
            lost = 0;
            /* Signals sent meanwhile are lost: followers read again. */
            deliver(st, STORE_SIGNAL_RESYNC, NULL, "", NULL);
        }
        if (db_notify_wait(st->ldb, LISTEN_POLL_MS, on_payload, st) != 0) {
            lost = 1;
            mark_unavailable(st);
        }
    }
    return NULL;
}

/* ---- opening and closing ---- */

int store_path_is_postgres(const char *path)
{
    if (!path)
        return 0;
    return strncmp(path, "postgres://", 11) == 0 || strncmp(path, "postgresql://", 13) == 0 ||
           strstr(path, "dbname=") != NULL || strstr(path, "host=") != NULL;
}

static const struct store_migration *migrations_of(enum db_engine e, int *count)
{
    *count = e == DB_PG ? store_migrations_pg_count : store_migrations_count;
    return e == DB_PG ? store_migrations_pg : store_migrations;
}

/* A bound on PostgreSQL connections: the environment's `name`, 1..64, or
 * def. */
/* The count the environment variable gives (def when unset), or -1 with a
 * message when it is not a whole number from 1 to 64: a typo must not
 * quietly run the pool at another size. */
static int pg_bound(const char *name, int def, char **err)
{
    const char *v = getenv(name);
    if (!v)
        return def;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < 1 || n > 64) {
        *err = db_fmt_err("%s must be a whole number from 1 to 64, got '%.40s'", name, v);
        return -1;
    }
    return (int)n;
}

/* Stops the writers, each once it has committed what its queue holds. */
static void stop_writers(struct store *st)
{
    for (int i = 0; i < st->nwq; i++) {
        struct wq *q = &st->wq[i];
        if (!q->started)
            continue;
        pthread_mutex_lock(&q->qmu);
        q->stop = 1;
        pthread_cond_signal(&q->qcv);
        pthread_mutex_unlock(&q->qmu);
        pthread_join(q->writer, NULL);
        q->started = 0;
    }
}

static void close_all(struct store *st)
{
    stop_reader_threads(st);
    wal_stop(st->wal);
    for (int i = 0; st->readers && i < st->nreaders; i++)
        if (!st->shared)
            db_close(st->readers[i]);
    free(st->readers);
    free(st->rbusy);
    for (int i = 0; i < st->nwq; i++) {
        db_close(st->wq[i].db);
        pthread_mutex_destroy(&st->wq[i].commit_mu);
        pthread_mutex_destroy(&st->wq[i].qmu);
        pthread_cond_destroy(&st->wq[i].qcv);
    }
    free(st->wq);
    db_close(st->ldb);
    db_close(st->leader_db);
    pthread_mutex_destroy(&st->rmu);
    pthread_mutex_destroy(&st->qmu);
    pthread_mutex_destroy(&st->smu);
    pthread_mutex_destroy(&st->lmu);
    fcond_destroy(&st->rcv);
    pthread_mutex_destroy(&st->jmu);
    pthread_cond_destroy(&st->jcv);
    pthread_cond_destroy(&st->avcv);
    free(st->target);
    free(st->run);
    free(st);
}

/* The write queues and their connections; the first brings the schema up
 * to date before any other connection prepares a statement. */
static int open_queues(struct store *st, const char *path, int n, char **err)
{
    if (!(st->wq = calloc((size_t)n, sizeof *st->wq))) {
        *err = db_fmt_err("out of memory");
        return -1;
    }
    for (; st->nwq < n; st->nwq++) {
        struct wq *q = &st->wq[st->nwq];
        q->st = st;
        pthread_mutex_init(&q->commit_mu, NULL);
        pthread_mutex_init(&q->qmu, NULL);
        clock_cond_init(&q->qcv);
    }
    int nmig;
    const struct store_migration *mig = migrations_of(st->engine, &nmig);
    for (int i = 0; i < n; i++)
        if (db_open(st->engine, path, &st->wq[i].db, err) != 0 ||
            (i == 0 && db_migrate(st->wq[i].db, mig, nmig, &st->schema_version, err) != 0) ||
            db_prepare(st->wq[i].db, st->sql, SQL_COUNT, err) != 0)
            return -1;
    return 0;
}

/* The readers: the writer's own connection for :memory:, one more for a
 * SQLite file (WAL lets it read while the writer commits), a pool for
 * PostgreSQL. */
static int open_readers(struct store *st, const char *path, int n, char **err)
{
    st->shared = st->engine == DB_SQLITE && strcmp(path, ":memory:") == 0;
    st->readers = calloc((size_t)n, sizeof *st->readers);
    st->rbusy = calloc((size_t)n, sizeof *st->rbusy);
    if (!st->readers || !st->rbusy) {
        *err = db_fmt_err("out of memory");
        return -1;
    }
    if (st->shared) {
        st->readers[0] = st->wq[0].db;
        st->nreaders = 1;
        return 0;
    }
    for (; st->nreaders < n; st->nreaders++)
        if (db_open(st->engine, path, &st->readers[st->nreaders], err) != 0 ||
            db_prepare(st->readers[st->nreaders], st->sql, SQL_COUNT, err) != 0) {
            db_close(st->readers[st->nreaders]);
            return -1;
        }
    return 0;
}

/* Stops the reconnector and the listener. */
static void stop_threads(struct store *st)
{
    pthread_mutex_lock(&st->qmu);
    st->stop = 1;
    pthread_cond_signal(&st->avcv);
    pthread_mutex_unlock(&st->qmu);
    if (st->threads) {
        pthread_join(st->reconnector, NULL);
        pthread_join(st->listener, NULL);
        st->threads = 0;
    }
}

int store_open(const char *path, struct store **out, char **err)
{
    *out = NULL;
    *err = NULL;
    struct store *st = calloc(1, sizeof *st);
    if (!st) {
        *err = db_fmt_err("out of memory");
        return -1;
    }
    pthread_mutex_init(&st->rmu, NULL);
    pthread_mutex_init(&st->qmu, NULL);
    pthread_mutex_init(&st->smu, NULL);
    pthread_mutex_init(&st->lmu, NULL);
    fcond_init(&st->rcv);
    pthread_mutex_init(&st->jmu, NULL);
    pthread_cond_init(&st->jcv, NULL);
    pthread_cond_init(&st->avcv, NULL);
    st->engine = store_path_is_postgres(path) ? DB_PG : DB_SQLITE;
    st->sql = store_sql_table(st->engine);
    st->target = strdup(path);
    if (!st->target) {
        *err = db_fmt_err("out of memory");
        goto fail;
    }
    /* Both pool sizes before any connection, so a bad one is what is said. */
    int nwriters = st->engine == DB_PG ? pg_bound("MCPD_DB_WRITERS", PG_WRITERS, err) : 1;
    int nreaders = nwriters < 0          ? -1
                   : st->engine == DB_PG ? pg_bound("MCPD_DB_READERS", PG_READERS, err)
                                         : 1;
    if (nreaders < 0 || (st->engine == DB_SQLITE && db_sqlite_files(path, err) != 0) ||
        open_queues(st, path, nwriters, err) != 0 || open_readers(st, path, nreaders, err) != 0)
        goto fail;
    if (st->engine == DB_SQLITE && !st->shared &&
        !(st->wal = wal_start(path, db_sqlite_handle(st->wq[0].db), &st->wq[0].commit_mu, &st->hold,
                              WAL_CHECKPOINT_FRAMES, err)))
        goto fail;
    if (st->engine == DB_PG) {
        if (start_reader_threads(st, err) != 0)
            goto fail;
        /* Listening before store_open returns: no signal sent after it is
         * missed. */
        if (db_open(DB_PG, path, &st->ldb, err) != 0)
            goto fail;
        if (db_listen(st->ldb, STORE_SQL_CHANNEL) != 0) {
            *err = db_fmt_err("cannot LISTEN on PostgreSQL");
            goto fail;
        }
        st->available = 1;
        if (pthread_create(&st->reconnector, NULL, reconnector_main, st) != 0) {
            *err = db_fmt_err("cannot start the store's reconnector thread");
            goto fail;
        }
        if (pthread_create(&st->listener, NULL, listener_main, st) != 0) {
            stop_threads(st);
            pthread_join(st->reconnector, NULL);
            *err = db_fmt_err("cannot start the store's listener thread");
            goto fail;
        }
        st->threads = 1;
    }
    for (int i = 0; i < st->nwq; i++) {
        if (pthread_create(&st->wq[i].writer, NULL, writer_main, &st->wq[i]) != 0) {
            *err = db_fmt_err("cannot start the store writer thread");
            stop_writers(st);
            stop_threads(st);
            goto fail;
        }
        st->wq[i].started = 1;
    }
    st->healthy = 1;
    *out = st;
    return 0;
fail:
    close_all(st);
    return -1;
}

void store_close(struct store *st)
{
    if (!st)
        return;
    stop_writers(st);
    stop_threads(st);
    close_all(st);
}

int store_ready(struct store *st)
{
    int nmig;
    const struct store_migration *mig = migrations_of(st->engine, &nmig);
    pthread_mutex_lock(&st->qmu);
    int ok = st->healthy && !st->stop && (st->engine != DB_PG || st->available) &&
             st->schema_version == mig[nmig - 1].version;
    pthread_mutex_unlock(&st->qmu);
    return ok;
}

int store_schema_version(struct store *st)
{
    return st->schema_version;
}

enum store_backend store_backend_of(struct store *st)
{
    return st->engine == DB_PG ? STORE_POSTGRES : STORE_SQLITE;
}

void store_set_run(struct store *st, const char *run)
{
    char *dup = run ? strdup(run) : NULL;
    pthread_mutex_lock(&st->smu);
    free(st->run);
    st->run = dup;
    pthread_mutex_unlock(&st->smu);
}

/* This run's id (malloc'd copy, NULL when unset). */
static char *run_of(struct store *st)
{
    pthread_mutex_lock(&st->smu);
    char *r = st->run ? strdup(st->run) : NULL;
    pthread_mutex_unlock(&st->smu);
    return r;
}

int store_flush(struct store *st)
{
    int rc = 0;
    for (int i = 0; i < st->nwq; i++) {
        struct write_op *op = calloc(1, sizeof *op);
        if (op)
            op->kind = W_FLUSH;
        int one = op ? submit_to(st, &st->wq[i], op, 1, NULL, NULL) : -1;
        if (rc == 0)
            rc = one;
    }
    pthread_mutex_lock(&st->qmu);
    if (st->failed_since_flush && rc == 0)
        rc = -1;
    st->failed_since_flush = 0;
    pthread_mutex_unlock(&st->qmu);
    return rc;
}

/* ---- writes ---- */

int store_session_put(struct store *st, const struct store_session *s)
{
    return enqueue(st, 1, W_SESSION_PUT, "ssssiiiss", s->id, s->protocol_version, s->init_params,
                   s->log_level, (int64_t)s->initialized, s->created_ms, s->last_active_ms,
                   s->principal, s->transport);
}

int store_session_set_state(struct store *st, const char *id, const char *log_level,
                            int initialized)
{
    return enqueue(st, 0, W_SESSION_STATE, "ssi", id, log_level, (int64_t)initialized);
}

int store_session_touch(struct store *st, const char *id, int64_t now_ms)
{
    return enqueue(st, 0, W_SESSION_TOUCH, "si", id, now_ms);
}

int store_session_delete(struct store *st, const char *id, int64_t now_ms)
{
    int rc = enqueue(st, 0, W_SESSION_DELETE, "si", id, now_ms);
    return rc ? rc : enqueue(st, 1, W_SESSION_STREAMS_DELETE, "s", id);
}

int store_stream_write(struct store *st, const char *stream_id,
                       const struct store_stream_new *create, int64_t seq, const char *msg,
                       size_t len, const char *end_state, int64_t now_ms)
{
    return store_stream_write_relayed(st, stream_id, create, seq, msg, len, end_state, now_ms,
                                      NULL);
}

int store_stream_write_relayed(struct store *st, const char *stream_id,
                               const struct store_stream_new *create, int64_t seq, const char *msg,
                               size_t len, const char *end_state, int64_t now_ms,
                               const struct store_relay_mark *mark)
{
    struct store_stream_new none = {0};
    const struct store_stream_new *c = create ? create : &none;
    struct store_relay_mark no_mark = {0};
    const struct store_relay_mark *m = mark ? mark : &no_mark;
    /* The run is read unlocked: store_set_run comes before any write. */
    return enqueue_stream(
        st, create != NULL, seq >= 0, end_state != NULL, mark != NULL, "sibiisssssis", stream_id,
        seq, msg ? msg : "", msg ? len : 0, (int64_t)(end_state != NULL), now_ms, c->session_id,
        c->kind, c->request_id, end_state, m->stream_id, m->copied, c->owner ? c->owner : st->run);
}

int store_log(struct store *st, int64_t ts_ms, const char *level, const char *session_id,
              const char *event)
{
    return enqueue(st, 0, W_LOG, "isss", ts_ms, level, session_id, event);
}

int store_checkpoint(struct store *st)
{
    if (st->engine == DB_PG)
        return 1; /* PostgreSQL checkpoints by itself */
    return st->wal ? wal_checkpoint(st->wal) : 0;
}

/* ---- reads ---- */

/* Rows per purge transaction, and the pause after each. A purge batch
 * shares its commit with live writes, and back to back the batches would
 * keep the writer (and on a small machine, a core) busy: unpaced, batches
 * tripled live p99 (43 against 14 ms at c=64). After each batch the purge
 * waits PURGE_PAUSE times as long as the batch took (its read, which holds
 * a snapshot, and its delete), so it takes at most a quarter of the
 * writer's time. A session of the benchmark holds ~10
 * chunks, a stream ~2. */
#define PURGE_SESSIONS_PER_BATCH 16
#define PURGE_STREAMS_PER_BATCH 128
#define PURGE_PAUSE 3

/* What the streams of one purge batch held, by session (see
 * store_freed_cb). */
struct freed {
    size_t n;
    struct {
        char *session_id;
        int64_t bytes;
    } v[PURGE_STREAMS_PER_BATCH];
};

static void freed_add(struct freed *f, struct rd *q)
{
    const char *sid = db_text(&q->r, 1);
    int64_t bytes = db_int(&q->r, 2);
    if (!sid || bytes <= 0)
        return;
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->v[i].session_id, sid) == 0) {
            f->v[i].bytes += bytes;
            return;
        }
    /* A batch reads at most PURGE_STREAMS_PER_BATCH rows. A failed strdup
     * leaves the count high, which only refuses sooner. */
    if (f->n < PURGE_STREAMS_PER_BATCH && (f->v[f->n].session_id = strdup(sid)))
        f->v[f->n++].bytes = bytes;
}

static void freed_clear(struct freed *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->v[i].session_id);
    f->n = 0;
}

/* The next key range of rows to purge, after *after: reads up to `batch`
 * ids matching statement k (?1 cutoff, ?2 after, ?3 limit, ?4 an optional
 * text bound) and puts the first and last in first/last (malloc'd). With
 * f, each row also names its session and bytes (columns 1 and 2), summed
 * into f. Returns how many ids it read, or -1 / STORE_UNAVAILABLE. */
static int purge_range(struct store *st, int k, int64_t cutoff, const char *after, int batch,
                       const char *bound, char **first, char **last, struct freed *f)
{
    *first = *last = NULL;
    struct db_param p[] = {P_INT(cutoff), P_TEXT(after), P_INT(batch), P_TEXT(bound)};
    struct rd q;
    int rc = rd_begin(st, &q, k, p, bound ? 4 : 3);
    if (rc != 0)
        return rc;
    int n = 0;
    while ((rc = rd_next(&q)) == 1) {
        char *id = col_dup(&q, 0);
        if (!id) {
            rc = -1;
            break;
        }
        if (f)
            freed_add(f, &q);
        if (n++ == 0) {
            *first = id;
        } else {
            free(*last);
            *last = id;
        }
    }
    rd_end(&q);
    if (rc != 0) {
        free(*first);
        free(*last);
        *first = *last = NULL;
        return rc;
    }
    if (n == 1)
        *last = strdup(*first);
    return n > 0 && !*last ? -1 : n;
}

/* Purges in key order, one bounded transaction per range, each queued
 * behind the live writes of the moment so they interleave. With freed, the
 * query's rows name their session and bytes (purge_range), reported once
 * the range's delete has committed. The rows read are the rows deleted:
 * an ended stream's end time never changes, and one still running at the
 * read can only end after the cutoff, which the delete checks again. */
static int purge_batches(struct store *st, int select_k, int kind, int64_t cutoff, int batch,
                         const char *bound, store_freed_cb freed, void *arg)
{
    struct freed f = {0};
    char *after = strdup("");
    int rc = after ? 0 : -1;
    while (rc == 0) {
        char *first, *last;
        int64_t t0 = clock_mono_us();
        int n = purge_range(st, select_k, cutoff, after, batch, bound, &first, &last,
                            freed ? &f : NULL);
        if (n <= 0) {
            rc = n;
            break;
        }
        rc = enqueue(st, 1, kind, "iss", cutoff, first, last);
        for (size_t i = 0; rc == 0 && i < f.n; i++)
            freed(arg, f.v[i].session_id, f.v[i].bytes);
        freed_clear(&f);
        int64_t pause = (clock_mono_us() - t0) * PURGE_PAUSE;
        struct timespec ts = {(time_t)(pause / 1000000), (long)(pause % 1000000) * 1000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        free(first);
        free(after);
        after = last;
        if (n < batch)
            break;
    }
    freed_clear(&f);
    free(after);
    return rc;
}

int store_purge(struct store *st, const struct store_purge_cutoffs *c, store_freed_cb freed,
                void *arg)
{
    /* Stream ids start with 12 hex digits of their creation time (randid):
     * a stream that ended before the cutoff was created before it, so its
     * id sorts below the first id that could have been made at the
     * cutoff, and the key's range finds it. */
    char id_prefix[16];
    snprintf(id_prefix, sizeof id_prefix, "%012llx",
             (unsigned long long)(c->stream_ms > 0 ? c->stream_ms : 0) & 0xffffffffffffULL);
    int rc;
    if ((rc = purge_batches(st, R_PURGE_IDLE, W_PURGE_IDLE_SESSIONS, c->idle_ms,
                            PURGE_SESSIONS_PER_BATCH, NULL, NULL, NULL)) != 0 ||
        (rc = purge_batches(st, R_PURGE_TOMBSTONES, W_PURGE_TOMBSTONES, c->ended_ms,
                            PURGE_SESSIONS_PER_BATCH, NULL, NULL, NULL)) != 0 ||
        (rc = purge_batches(st, R_PURGE_STREAMS, W_PURGE_STREAMS, c->stream_ms,
                            PURGE_STREAMS_PER_BATCH, id_prefix, freed, arg)) != 0)
        return rc;
    /* Inbox rows nobody took, the rows of nodes long dead, standalone
     * claims whose lease ran out and DPoP proofs past their window go with
     * the log lines. */
    int64_t now = clock_wall_ms();
    if ((rc = enqueue(st, 0, W_PURGE_INBOX, "i", now - STORE_INBOX_KEEP_MS)) != 0 ||
        (rc = enqueue(st, 0, W_PURGE_NODES, "i", now - NODE_KEEP_MS)) != 0 ||
        (rc = enqueue(st, 0, W_PURGE_CLAIMS, "i", now)) != 0 ||
        (rc = enqueue(st, 0, W_PURGE_DPOP_USES, "i", now)) != 0)
        return rc;
    return enqueue(st, 1, W_PURGE_LOGS, "ii", c->log_ms,
                   c->log_max_rows > 0 ? c->log_max_rows : INT64_MAX);
}

void store_session_free(struct store_session *s)
{
    free(s->id);
    free(s->protocol_version);
    free(s->init_params);
    free(s->log_level);
    free(s->principal);
    free(s->transport);
    memset(s, 0, sizeof *s);
}

int store_session_get(struct store *st, const char *id, struct store_session *out)
{
    memset(out, 0, sizeof *out);
    struct db_param p[] = {P_TEXT(id)};
    struct rd q;
    int rc = rd_begin(st, &q, R_SESSION_GET, p, 1);
    if (rc != 0)
        return rc;
    rc = rd_next(&q);
    int result = rc == 1 ? 0 : rc == 0 ? 1 : rc;
    if (result == 0) {
        out->id = col_dup(&q, 0);
        out->protocol_version = col_dup(&q, 1);
        out->init_params = col_dup(&q, 2);
        out->log_level = col_dup(&q, 3);
        out->initialized = (int)db_int(&q.r, 4);
        out->created_ms = db_int(&q.r, 5);
        out->last_active_ms = db_int(&q.r, 6);
        out->principal = col_dup(&q, 7);
        out->transport = col_dup(&q, 8);
        if (!out->id || !out->protocol_version || !out->init_params || !out->log_level) {
            store_session_free(out);
            result = -1;
        }
    }
    rd_end(&q);
    return result;
}

/* A read of one integer (the first column of the first row), or def when
 * there is no row. */
static int64_t read_int(struct store *st, int k, const struct db_param *p, int n, int64_t def)
{
    struct rd q;
    int rc = rd_begin(st, &q, k, p, n);
    if (rc != 0)
        return rc;
    rc = rd_next(&q);
    int64_t v = rc == 1 ? db_int(&q.r, 0) : rc == 0 ? def : rc;
    rd_end(&q);
    return v;
}

int store_session_live(struct store *st, const char *id, char *log_level, size_t cap,
                       int *initialized)
{
    struct db_param p[] = {P_TEXT(id)};
    struct rd q;
    int rc = rd_begin(st, &q, R_SESSION_LIVE, p, 1);
    if (rc != 0)
        return rc;
    rc = rd_next(&q);
    if (rc == 1) {
        const char *level = db_text(&q.r, 0);
        snprintf(log_level, cap, "%s", level ? level : "");
        *initialized = (int)db_int(&q.r, 1);
    }
    rd_end(&q);
    return rc;
}

int64_t store_session_calls_elsewhere(struct store *st, const char *id)
{
    char *run = run_of(st);
    struct db_param p[] = {P_TEXT(id), P_TEXT(run)};
    int64_t n = read_int(st, R_SESSION_CALLS_ELSEWHERE, p, 2, 0);
    free(run);
    return n;
}

int64_t store_session_bytes(struct store *st, const char *id)
{
    struct db_param p[] = {P_TEXT(id)};
    return read_int(st, R_SESSION_BYTES, p, 1, -1);
}

/* Runs statement k and calls row(q, cb, arg) for each row: 0, or -1 /
 * STORE_UNAVAILABLE. */
static int read_each(struct store *st, int k, const struct db_param *p, int n,
                     void (*row)(struct rd *q, void *cb, void *arg), void *cb, void *arg)
{
    struct rd q;
    int rc = rd_begin(st, &q, k, p, n);
    if (rc != 0)
        return rc;
    while ((rc = rd_next(&q)) == 1)
        row(&q, cb, arg);
    rd_end(&q);
    return rc;
}

static void row_live(struct rd *q, void *cb, void *arg)
{
    ((void (*)(void *, int64_t))cb)(arg, db_int(&q->r, 0));
}

int store_sessions_live(struct store *st, void (*cb)(void *arg, int64_t last_active_ms), void *arg)
{
    return read_each(st, R_SESSIONS_LIVE, NULL, 0, row_live, (void *)cb, arg);
}

void store_stream_free(struct store_stream *s)
{
    free(s->id);
    free(s->session_id);
    free(s->kind);
    free(s->request_id);
    free(s->state);
    free(s->owner);
    memset(s, 0, sizeof *s);
}

struct chunk_each {
    store_chunk_cb cb;
    void *arg;
};

static void row_chunk(struct rd *q, void *cb, void *arg)
{
    (void)cb;
    struct chunk_each *e = arg;
    e->cb(e->arg, db_int(&q->r, 0), db_text(&q->r, 1), db_bytes(&q->r, 1), (int)db_int(&q->r, 2));
}

int store_stream_get(struct store *st, const char *id, struct store_stream *out,
                     store_chunk_cb chunk_cb, void *arg)
{
    return store_stream_get_from(st, id, 0, out, chunk_cb, arg);
}

int store_stream_get_from(struct store *st, const char *id, int64_t from_seq,
                          struct store_stream *out, store_chunk_cb chunk_cb, void *arg)
{
    memset(out, 0, sizeof *out);
    struct db_param p[] = {P_TEXT(id), P_INT(from_seq)};
    struct rd q;
    int rc = rd_begin(st, &q, R_STREAM_ROW, p, 1);
    if (rc != 0)
        return rc;
    rc = rd_next(&q);
    if (rc != 1) {
        rd_end(&q);
        return rc == 0 ? 1 : rc;
    }
    out->id = col_dup(&q, 0);
    out->session_id = col_dup(&q, 1);
    out->kind = col_dup(&q, 2);
    out->request_id = col_dup(&q, 3);
    out->state = col_dup(&q, 4);
    out->ended_ms = db_int(&q.r, 5);
    out->owner = col_dup(&q, 6);
    rd_end(&q);
    struct chunk_each e = {chunk_cb, arg};
    rc = read_each(st, R_STREAM_CHUNKS, p, 2, row_chunk, NULL, &e);
    if (rc != 0)
        store_stream_free(out);
    return rc;
}

static void row_open_stream(struct rd *q, void *cb, void *arg)
{
    ((store_open_stream_cb)cb)(arg, db_text(&q->r, 0), db_text(&q->r, 1), db_text(&q->r, 2),
                               db_int(&q->r, 3));
}

int store_streams_unfinished(struct store *st, store_open_stream_cb cb, void *arg)
{
    return read_each(st, R_UNFINISHED, NULL, 0, row_open_stream, (void *)cb, arg);
}

static void row_relayed(struct rd *q, void *cb, void *arg)
{
    ((store_relayed_cb)cb)(arg, db_text(&q->r, 0), db_int(&q->r, 1));
}

int store_streams_relayed(struct store *st, const char *session_id, int64_t created_before_ms,
                          store_relayed_cb cb, void *arg)
{
    struct db_param p[] = {P_TEXT(session_id), P_INT(created_before_ms)};
    return read_each(st, R_RELAYED, p, 2, row_relayed, (void *)cb, arg);
}

/* A read of one text (the first column of the first row): 0 and *out
 * (malloc'd, NULL for a NULL column), 1 no row, or -1 / STORE_UNAVAILABLE. */
static int read_text(struct store *st, int k, const struct db_param *p, int n, char **out)
{
    *out = NULL;
    struct rd q;
    int rc = rd_begin(st, &q, k, p, n);
    if (rc != 0)
        return rc;
    rc = rd_next(&q);
    int result = rc == 1 ? 0 : rc == 0 ? 1 : rc;
    if (result == 0 && db_text(&q.r, 0) && !(*out = col_dup(&q, 0)))
        result = -1;
    rd_end(&q);
    return result;
}

int store_session_standalone(struct store *st, const char *session_id, char **id_out)
{
    struct db_param p[] = {P_TEXT(session_id)};
    int rc = read_text(st, R_STANDALONE, p, 1, id_out);
    return rc == 0 && !*id_out ? -1 : rc;
}

int store_token_lookup(struct store *st, const char *hash, struct store_token *out)
{
    memset(out, 0, sizeof *out);
    struct db_param p[] = {P_TEXT(hash)};
    struct rd q;
    int rc = rd_begin(st, &q, R_TOKEN_LOOKUP, p, 1);
    if (rc != 0)
        return rc;
    rc = rd_next(&q);
    int result = rc == 1 ? 0 : rc == 0 ? 1 : rc;
    if (result == 0) {
        snprintf(out->name, sizeof out->name, "%s", db_text(&q.r, 0));
        out->expires_ms = db_is_null(&q.r, 1) ? 0 : db_int(&q.r, 1);
        out->revoked_ms = db_is_null(&q.r, 2) ? 0 : db_int(&q.r, 2);
    }
    rd_end(&q);
    return result;
}

int store_token_used(struct store *st, const char *name, int64_t now_ms)
{
    return enqueue(st, 0, W_TOKEN_USED, "si", name, now_ms);
}

static void row_name(struct rd *q, void *cb, void *arg)
{
    ((void (*)(void *, const char *))cb)(arg, db_text(&q->r, 0));
}

int store_tokens_revoked_since(struct store *st, int64_t since_ms,
                               void (*cb)(void *arg, const char *name), void *arg)
{
    struct db_param p[] = {P_INT(since_ms)};
    return read_each(st, R_TOKENS_REVOKED, p, 1, row_name, (void *)cb, arg);
}

static void row_ended(struct rd *q, void *cb, void *arg)
{
    ((void (*)(void *, const char *, const char *))cb)(arg, db_text(&q->r, 0), db_text(&q->r, 1));
}

int store_sessions_ended_by_operator(struct store *st, int64_t since_ms,
                                     void (*cb)(void *arg, const char *id, const char *why),
                                     void *arg)
{
    struct db_param p[] = {P_INT(since_ms)};
    return read_each(st, R_ENDED_BY_OPERATOR, p, 1, row_ended, (void *)cb, arg);
}

int store_secret(struct store *st, const char *name, const char *candidate, int64_t now_ms,
                 char *out, size_t cap)
{
    /* The first value stored wins, so every process (and every start) reads
     * the same key back. */
    int rc = enqueue(st, 1, W_SECRET_PUT, "ssi", name, candidate, now_ms);
    if (rc != 0)
        return rc;
    struct db_param p[] = {P_TEXT(name)};
    char *v = NULL;
    rc = read_text(st, R_SECRET, p, 1, &v);
    if (rc == 0) {
        rc = v && strlen(v) < cap ? 0 : -1;
        if (rc == 0)
            snprintf(out, cap, "%s", v);
    } else if (rc == 1) {
        rc = -1;
    }
    free(v);
    return rc;
}

/* What the token named `name` is to `hash`; STORE_TOKEN_HASH_TAKEN when
 * there is none of that name. -1 on error. */
static int token_state(struct store *st, const char *name, const char *hash,
                       enum store_token_create_result *out)
{
    struct db_param p[] = {P_TEXT(name)};
    struct rd q;
    int rc = rd_begin(st, &q, R_TOKEN_STATE, p, 1);
    if (rc != 0)
        return rc;
    rc = rd_next(&q);
    if (rc == 1) {
        const char *have = db_text(&q.r, 0);
        *out = !db_is_null(&q.r, 1)              ? STORE_TOKEN_REVOKED
               : have && strcmp(have, hash) == 0 ? STORE_TOKEN_EXISTS
                                                 : STORE_TOKEN_OTHER_HASH;
    } else {
        *out = STORE_TOKEN_HASH_TAKEN;
    }
    rd_end(&q);
    return rc >= 0 ? 0 : rc;
}

int store_token_create(struct store *st, const char *name, const char *hash, const char *note,
                       int64_t now_ms, enum store_token_create_result *out)
{
    int rc = token_state(st, name, hash, out);
    if (rc != 0)
        return rc;
    if (*out != STORE_TOKEN_HASH_TAKEN)
        return 0; /* a token of that name exists: it stays as it is */
    if ((rc = enqueue(st, 1, W_TOKEN_CREATE, "sssi", name, hash, note, now_ms)) != 0 ||
        (rc = token_state(st, name, hash, out)) != 0)
        return rc;
    /* The row is ours unless mcp-admin added one of that name in between;
     * no row: the hash is another name's, and nothing was added. */
    if (*out == STORE_TOKEN_EXISTS)
        *out = STORE_TOKEN_CREATED;
    return 0;
}

int store_state_use_claim(struct store *st, const struct store_state_use *u, int64_t now_ms,
                          struct store_state_use *out)
{
    memset(out, 0, sizeof *out);
    /* Expired uses go in the same commit: the table holds live states only. */
    int rc;
    if ((rc = enqueue(st, 0, W_STATE_USE_PURGE, "i", now_ms)) != 0 ||
        (rc = enqueue(st, 1, W_STATE_USE_CLAIM, "ssssi", u->nonce, u->claim, u->run, u->answers,
                      u->expires_ms)) != 0)
        return rc;
    struct db_param p[] = {P_TEXT(u->nonce)};
    struct rd q;
    if ((rc = rd_begin(st, &q, R_STATE_USE, p, 1)) != 0)
        return rc;
    rc = rd_next(&q);
    if (rc == 1) {
        out->claim = col_dup(&q, 0);
        out->run = col_dup(&q, 1);
        out->answers = col_dup(&q, 2);
        out->done = (int)db_int(&q.r, 3);
        out->outcome = col_dup(&q, 4);
        rc = out->claim && out->run && out->answers ? 0 : -1;
    } else if (rc == 0) {
        rc = -1;
    }
    rd_end(&q);
    if (rc != 0)
        store_state_use_free(out);
    return rc;
}

int store_state_use_done(struct store *st, const char *nonce, const char *claim,
                         const char *outcome)
{
    return enqueue(st, 0, W_STATE_USE_DONE, "sss", nonce, claim, outcome);
}

int store_state_use_release(struct store *st, const char *nonce, const char *claim)
{
    return enqueue(st, 0, W_STATE_USE_RELEASE, "ss", nonce, claim);
}

void store_state_use_free(struct store_state_use *u)
{
    free(u->claim);
    free(u->run);
    free(u->answers);
    free(u->outcome);
    memset(u, 0, sizeof *u);
}

int store_dpop_use(struct store *st, const char *proof, int64_t expires_ms)
{
    int64_t changed = 0;
    int rc = enqueue_out(st, 1, &changed, NULL, W_DPOP_USE, "si", proof, expires_ms);
    return rc != 0 ? rc : changed == 1;
}

/* ---- more than one process ---- */

void store_signal_listen(struct store *st, store_signal_cb cb, void *arg)
{
    pthread_mutex_lock(&st->smu);
    st->cb = cb;
    st->cb_arg = arg;
    pthread_mutex_unlock(&st->smu);
}

int store_signal(struct store *st, char kind, const char *key, const char *extra)
{
    if (st->engine != DB_PG)
        return 0; /* one process: nobody to tell */
    char *run = run_of(st), *payload = NULL;
    if (asprintf(&payload, "%c %s %s%s%s", kind, run ? run : "-", key, extra ? " " : "",
                 extra ? extra : "") < 0)
        payload = NULL;
    free(run);
    if (!payload)
        return -1;
    int rc = enqueue(st, 0, W_NOTIFY, "s", payload);
    free(payload);
    return rc;
}

int store_inbox_put(struct store *st, const char *session_id, const char *msg, size_t len,
                    int64_t now_ms, int64_t *id_out)
{
    char *run = run_of(st);
    int64_t id = 0;
    int rc = enqueue_out(st, 1, NULL, &id, W_INBOX_PUT, "sbis", session_id, msg, len, now_ms,
                         run ? run : "-");
    free(run);
    if (rc == 0 && id_out)
        *id_out = id;
    return rc;
}

int store_inbox_take(struct store *st, int64_t id, char **msg, size_t *len)
{
    *msg = NULL;
    *len = 0;
    struct db_param p[] = {P_INT(id)};
    struct rd q;
    int rc = rd_begin(st, &q, R_INBOX_TAKE, p, 1);
    if (rc != 0)
        return rc;
    rc = rd_next(&q);
    int result = rc == 1 ? 0 : rc == 0 ? 1 : rc;
    if (result == 0) {
        const char *t = db_text(&q.r, 0);
        size_t n = db_bytes(&q.r, 0);
        if (!t || !(*msg = malloc(n + 1))) {
            result = -1;
        } else {
            memcpy(*msg, t, n);
            (*msg)[n] = '\0';
            *len = n;
        }
    }
    rd_end(&q);
    return result;
}

int store_node_beat(struct store *st, int64_t now_ms, int64_t inflight)
{
    char *run = run_of(st);
    int rc = run ? enqueue(st, 1, W_NODE_BEAT, "sii", run, now_ms, inflight) : -1;
    pthread_mutex_lock(&st->smu);
    int first = rc == 0 && !st->beaten;
    st->beaten |= first;
    pthread_mutex_unlock(&st->smu);
    if (first)
        store_signal(st, STORE_SIGNAL_NODE, run, "up");
    free(run);
    return rc;
}

int store_node_gone(struct store *st)
{
    char *run = run_of(st);
    int rc = -1;
    if (run) {
        store_signal(st, STORE_SIGNAL_NODE, run, "down");
        rc = enqueue(st, 1, W_NODE_GONE, "s", run);
    }
    free(run);
    return rc;
}

struct node_each {
    void (*cb)(void *arg, const char *run, int64_t beat_ms, int64_t inflight);
    void *arg;
};

static void row_node(struct rd *q, void *cb, void *arg)
{
    (void)cb;
    struct node_each *e = arg;
    e->cb(e->arg, db_text(&q->r, 0), db_int(&q->r, 1), db_int(&q->r, 2));
}

int store_nodes_alive(struct store *st, int64_t alive_since_ms,
                      void (*cb)(void *arg, const char *run, int64_t beat_ms, int64_t inflight),
                      void *arg)
{
    struct db_param p[] = {P_INT(alive_since_ms)};
    struct node_each e = {cb, arg};
    return read_each(st, R_NODES_ALIVE, p, 1, row_node, NULL, &e);
}

/* The leader's lock is a session-level advisory lock on a connection of
 * its own, kept for the process's life: when that connection drops, the
 * server releases the lock and this process is no longer the leader until
 * it takes the lock again. Each call checks the connection. */
int store_leader(struct store *st)
{
    if (st->engine != DB_PG)
        return 1;
    if (!available(st))
        return STORE_UNAVAILABLE;
    pthread_mutex_lock(&st->lmu);
    int rc = 0;
    if (st->leader_db && (st->leader_held || st->run_locked)) {
        int64_t one = 0;
        if (db_exec(st->leader_db, R_PING, NULL, 0, NULL, &one) != 0 || one != 1) {
            if (st->leader_held)
                log_local(LOG_WARN, NULL, "store_leader_lost",
                          "the leader's connection to PostgreSQL dropped: leadership lost");
            db_close(st->leader_db);
            st->leader_db = NULL;
            st->leader_held = 0;
            st->run_locked = 0;
        }
    }
    if (st->leader_db && db_broken(st->leader_db)) {
        db_close(st->leader_db);
        st->leader_db = NULL;
        st->leader_held = 0;
        st->run_locked = 0;
    }
    char *err = NULL;
    if (!st->leader_db && (db_open(DB_PG, st->target, &st->leader_db, &err) != 0 ||
                           db_prepare(st->leader_db, st->sql, SQL_COUNT, &err) != 0)) {
        db_close(st->leader_db);
        st->leader_db = NULL;
        rc = STORE_UNAVAILABLE;
    }
    free(err);
    /* The same connection holds this process's run lock: others see it
     * alive while it is (mcpd_run_alive), and dead the moment it dies. */
    if (rc == 0 && !st->run_locked && st->run) {
        struct db_param p[] = {P_TEXT(st->run)};
        int64_t got = 0;
        st->run_locked = db_exec(st->leader_db, R_RUN_LOCK, p, 1, NULL, &got) == 0 && got == 1;
    }
    if (rc == 0 && !st->leader_held) {
        int64_t got = 0;
        int e = db_exec(st->leader_db, R_LEADER, NULL, 0, NULL, &got);
        if (e != 0)
            rc = e == DB_UNAVAILABLE ? STORE_UNAVAILABLE : -1;
        st->leader_held = e == 0 && got == 1;
    }
    if (rc == 0)
        rc = st->leader_held;
    pthread_mutex_unlock(&st->lmu);
    return rc;
}

int64_t store_sessions_count(struct store *st, const char *principal)
{
    struct db_param p[] = {P_TEXT(principal)};
    return read_int(st, R_SESSIONS_COUNT, p, 1, -1);
}

int store_streams_orphaned(struct store *st, int64_t alive_since_ms, store_open_stream_cb cb,
                           void *arg)
{
    char *run = run_of(st);
    struct db_param p[] = {P_TEXT(run), P_INT(alive_since_ms)};
    int rc = read_each(st, R_ORPHANED, p, 2, row_open_stream, (void *)cb, arg);
    free(run);
    return rc;
}

int store_session_claim(struct store *st, const char *session_id, int64_t alive_since_ms,
                        char **owner_out)
{
    *owner_out = NULL;
    char *run = run_of(st);
    int rc = run ? enqueue(st, 1, W_SESSION_CLAIM, "ssi", session_id, run, alive_since_ms) : -1;
    free(run);
    if (rc != 0)
        return rc;
    struct db_param p[] = {P_TEXT(session_id)};
    rc = read_text(st, R_SESSION_OWNER, p, 1, owner_out);
    /* A session that is gone, or deleted before anyone claimed it: 1. */
    return rc == 0 && !*owner_out ? 1 : rc;
}

int store_standalone_claim(struct store *st, const char *session_id, int64_t now_ms,
                           int64_t lease_until_ms)
{
    char *run = run_of(st);
    int64_t changed = 0;
    int rc = run ? enqueue_out(st, 1, &changed, NULL, W_STANDALONE_CLAIM, "ssii", session_id, run,
                               now_ms, lease_until_ms)
                 : -1;
    free(run);
    return rc != 0 ? rc : changed == 1 ? 0 : 1;
}

int store_standalone_release(struct store *st, const char *session_id)
{
    char *run = run_of(st);
    int rc = run ? enqueue(st, 0, W_STANDALONE_RELEASE, "ss", session_id, run) : -1;
    free(run);
    return rc;
}
