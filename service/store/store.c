/* store — see store.h. */
#include "store.h"
#include "fiber.h"
#include "store_migrations.h"
#include "clock.h"
#include "lock_hold.h"
#include "log.h"
#include "wal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The writes the writer thread knows, each one prepared statement. */
enum write_kind {
    W_SESSION_PUT,
    W_SESSION_STATE,
    W_SESSION_TOUCH,
    W_SESSION_DELETE,
    W_SESSION_STREAMS_DELETE,
    W_ROW,
    W_CHUNK,
    W_END,
    W_UNDO_ROW,
    W_UNDO_CHUNK,
    W_BEGIN,
    W_COMMIT,
    W_ROLLBACK,
    W_LOG,
    W_PURGE_IDLE_SESSIONS,
    W_PURGE_TOMBSTONES,
    W_PURGE_STREAMS,
    W_PURGE_LOGS,
    W_TOKEN_USED,
    W_TOKEN_CREATE,
    W_SECRET_PUT,
    W_RELAY_MARK,
    W_STATE_USE_PURGE,
    W_STATE_USE_CLAIM,
    W_STATE_USE_DONE,
    W_STATE_USE_RELEASE,
    W_COUNT,
    W_FLUSH = W_COUNT, /* no SQL: a marker whose commit means all before it committed */
    W_STREAM_WRITE     /* a row, a chunk and/or an end: see store_stream_write */
};

static const char *const write_sql[W_COUNT] = {
    [W_SESSION_PUT] = "INSERT OR REPLACE INTO sessions(id, protocol_version, init_params, "
                      "log_level, initialized, created_ms, last_active_ms, principal, transport) "
                      "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [W_SESSION_STATE] = "UPDATE sessions SET log_level = ?2, initialized = ?3 WHERE id = ?1",
    [W_SESSION_TOUCH] =
        "UPDATE sessions SET last_active_ms = MAX(last_active_ms, ?2) WHERE id = ?1",
    [W_SESSION_DELETE] = "UPDATE sessions SET deleted_ms = ?2 WHERE id = ?1",
    [W_SESSION_STREAMS_DELETE] = "DELETE FROM streams WHERE session_id = ?1",
    /* A stream write binds one vector to all three of these: ?1 stream id,
     * ?2 seq, ?3 message, ?4 is_end, ?5 now, ?6 session id, ?7 kind, ?8
     * request id, ?9 end state (NULL while the stream goes on). */
    [W_ROW] = "INSERT INTO streams(id, session_id, kind, request_id, state, created_ms, ended_ms) "
              "VALUES(?1, ?6, ?7, ?8, COALESCE(?9, 'active'), ?5, "
              "CASE WHEN ?9 IS NULL THEN NULL ELSE ?5 END)",
    [W_CHUNK] = "INSERT INTO chunks(stream_id, seq, message, is_end, created_ms) "
                "VALUES(?1, ?2, ?3, ?4, ?5)",
    [W_END] = "UPDATE streams SET state = ?9, ended_ms = ?5 WHERE id = ?1",
    /* The statements of one stream write stand or fall together: when the
     * second fails, these take back the first (see op_run). */
    [W_UNDO_ROW] = "DELETE FROM streams WHERE id = ?1",
    [W_UNDO_CHUNK] = "DELETE FROM chunks WHERE stream_id = ?1 AND seq = ?2",
    /* Prepared once, unlike sqlite3_exec's parse per commit. */
    [W_BEGIN] = "BEGIN",
    [W_COMMIT] = "COMMIT",
    [W_ROLLBACK] = "ROLLBACK",
    [W_LOG] = "INSERT INTO logs(ts_ms, level, session_id, event) VALUES(?1, ?2, ?3, ?4)",
    /* The purges delete one key range [?2, ?3] that a read found (see
     * store_purge), checking the condition again: a row in the range that
     * no longer qualifies stays. Their streams and chunks go by cascade. */
    [W_PURGE_IDLE_SESSIONS] = "DELETE FROM sessions WHERE id >= ?2 AND id <= ?3 "
                              "AND last_active_ms < ?1",
    /* Tombstones are few among many live rows: found by their index. */
    [W_PURGE_TOMBSTONES] = "DELETE FROM sessions INDEXED BY sessions_by_deleted "
                           "WHERE id >= ?2 AND id <= ?3 AND deleted_ms < ?1",
    [W_PURGE_STREAMS] = "DELETE FROM streams WHERE id >= ?2 AND id <= ?3 "
                        "AND ended_ms IS NOT NULL AND ended_ms < ?1",
    /* Log ids grow by one per row and rows go only from the oldest end, so
     * the newest ?2 rows are those above max(id) - ?2. */
    [W_TOKEN_USED] = "UPDATE tokens SET last_used_ms = MAX(COALESCE(last_used_ms, 0), ?2) "
                     "WHERE name = ?1",
    /* Never changes a token that exists, of this name or with this hash:
     * see store_token_create. */
    [W_TOKEN_CREATE] = "INSERT INTO tokens(name, hash, note, created_ms) VALUES(?1, ?2, ?3, ?4) "
                       "ON CONFLICT DO NOTHING",
    [W_SECRET_PUT] = "INSERT INTO secrets(name, value, created_ms) VALUES(?1, ?2, ?3) "
                     "ON CONFLICT(name) DO NOTHING",
    [W_PURGE_LOGS] = "DELETE FROM logs WHERE ts_ms < ?1 OR id <= (SELECT max(id) FROM logs) - ?2",
    /* With a stream write that copies a legacy request's message (?10, the
     * request's stream; ?11, how many of its messages are copied now): in
     * the same transaction as the copy, so that a restart neither repeats
     * nor loses one. Never backwards. */
    [W_RELAY_MARK] = "UPDATE streams SET relayed = MAX(COALESCE(relayed, 0), ?11) WHERE id = ?10",
    [W_STATE_USE_PURGE] = "DELETE FROM request_state_uses WHERE expires_ms < ?1",
    /* A state nobody has claimed is claimed; so is one whose claim a
     * previous run left unfinished (that process died with the request). */
    [W_STATE_USE_CLAIM] = "INSERT INTO request_state_uses(nonce, claim, run, answers, expires_ms) "
                          "VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(nonce) DO UPDATE SET "
                          "claim = excluded.claim, run = excluded.run, answers = excluded.answers "
                          "WHERE done = 0 AND run <> excluded.run",
    [W_STATE_USE_DONE] = "UPDATE request_state_uses SET done = 1, outcome = ?3 "
                         "WHERE nonce = ?1 AND claim = ?2",
    [W_STATE_USE_RELEASE] = "DELETE FROM request_state_uses "
                            "WHERE nonce = ?1 AND claim = ?2 AND done = 0",
};

/* A chunk's size as a session's storage cap counts it: the message's
 * bytes, not its characters. */
#define CHUNK_BYTES "LENGTH(CAST(c.message AS BLOB))"

#define MAX_PARAMS 11

struct param {
    enum { P_NULL, P_INT, P_TEXT } type;
    int64_t i;
    char *s;
    size_t len;
};

struct write_op {
    enum write_kind kind;
    int nparams;
    struct param p[MAX_PARAMS];
    int waited;                /* the enqueuer waits and frees; else the writer frees */
    int row, chunk, end, mark; /* W_STREAM_WRITE: which statements run */
    sem_t done;                /* a waiting thread's */
    struct fiber *fiber;       /* a waiting fiber's, woken with `committed` set */
    int committed;
    int rc;
    struct write_op *next;
};

/* Async writes wait at most this long for a waited one to carry them into
 * a commit, so a burst of them costs one transaction, not one each. */
#define ASYNC_DELAY_MS 10
/* ...and no more than this many pile up before the writer is woken. */
#define ASYNC_BATCH 512
/* The log is checkpointed once it holds this many pages (SQLite's own
 * default), and trimmed to WAL_SIZE_LIMIT bytes when it starts over. */
#define WAL_CHECKPOINT_FRAMES 1000
#define WAL_SIZE_LIMIT "16777216"

struct store {
    sqlite3 *wdb;        /* writer's connection */
    sqlite3 *rdb;        /* readers' connection (== wdb for :memory:) */
    pthread_mutex_t rmu; /* guards rdb, and wdb too when they are one */
    sqlite3_stmt *stmt[W_COUNT];
    pthread_t writer;
    struct wal *wal;           /* NULL for :memory: */
    pthread_mutex_t commit_mu; /* held by whoever is committing: the writer or a waiter */
    struct lock_hold hold;     /* how long commit_mu is held at a time */
    pthread_mutex_t qmu;
    pthread_cond_t qcv; /* writer: a waited write (or many async ones) arrived */
    struct write_op *head, *tail;
    int queued, waited_queued;
    int failed_since_flush;
    struct store_stats stats; /* guarded by qmu */
    int stop;
    int healthy;
    int schema_version;
};

static int migrate_all(struct store *st, char **err);

static char *fmt_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

static int mkdirs_for(const char *path)
{
    char *dup = strdup(path);
    if (!dup)
        return -1;
    for (char *p = dup + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dup, 0700) != 0 && errno != EEXIST) {
            free(dup);
            return -1;
        }
        *p = '/';
    }
    free(dup);
    return 0;
}

/* A store file that others may read or write loses those bits, with a
 * warning: it was made by an older mcpd (under the umask) or by hand. */
static void narrow_mode(int fd, const char *name)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || !(sb.st_mode & 077))
        return;
    unsigned was = (unsigned)(sb.st_mode & 0777), now = was & 0700;
    if (fchmod(fd, (mode_t)now) == 0)
        log_event(LOG_WARN, NULL, "store_file_mode",
                  "%s was open to other users (mode %03o); narrowed to %03o", name, was, now);
    else
        log_event(LOG_WARN, NULL, "store_file_mode",
                  "%s is open to other users (mode %03o) and could not be narrowed: %s", name, was,
                  strerror(errno));
}

/* The database holds token hashes, the request_state key and every
 * conversation, so only its owner may read it, whatever the umask. The
 * file is created 0600 here, before SQLite opens it (setting the umask
 * instead would change it for every thread of the process); SQLite gives
 * the -wal and -shm files it creates the main file's mode. Files that
 * exist already, these three, are narrowed to their owner's bits. The
 * folder is left alone: mkdirs_for makes a new one 0700, and an existing
 * one may be shared on purpose (/tmp). */
static int own_files(const char *path, char **err)
{
    int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        *err = fmt_err("cannot open database %s: %s", path, strerror(errno));
        return -1;
    }
    narrow_mode(fd, path);
    close(fd);
    static const char *const sides[] = {"-wal", "-shm"};
    for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
        char *side = NULL;
        if (asprintf(&side, "%s%s", path, sides[i]) < 0)
            side = NULL;
        fd = side ? open(side, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
        if (fd >= 0) {
            narrow_mode(fd, side);
            close(fd);
        }
        free(side);
    }
    return 0;
}

static int exec_sql(sqlite3 *db, const char *sql, char **err)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        *err = fmt_err("%s", msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static int open_conn(const char *path, sqlite3 **db, char **err)
{
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path, db, flags, NULL) != SQLITE_OK) {
        *err = fmt_err("cannot open database %s: %s", path,
                       *db ? sqlite3_errmsg(*db) : "out of memory");
        sqlite3_close(*db);
        *db = NULL;
        return -1;
    }
    sqlite3_busy_timeout(*db, 5000);
    /* NORMAL in WAL mode: a commit survives the process being killed
     * (SIGKILL); only an OS crash can lose the last commits. */
    /* Checkpoints run in wal.c, off the writer's commit path: the fsync
     * they need would otherwise stall every appender. A log that a burst
     * made large is cut back when it starts over. */
    return exec_sql(*db,
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                    "PRAGMA foreign_keys=ON; PRAGMA wal_autocheckpoint=0; "
                    "PRAGMA journal_size_limit=" WAL_SIZE_LIMIT ";",
                    err);
}

static int migrate(struct store *st, char **err)
{
    /* A migration may rebuild a table; with foreign keys on, dropping the
     * old one would cascade-delete everything that refers to it. */
    char *ignored = NULL;
    exec_sql(st->wdb, "PRAGMA foreign_keys=OFF", &ignored);
    free(ignored);
    int rc = migrate_all(st, err);
    ignored = NULL;
    exec_sql(st->wdb, "PRAGMA foreign_keys=ON", &ignored);
    free(ignored);
    return rc;
}

static int migrate_all(struct store *st, char **err)
{
    sqlite3_stmt *q;
    int version = 0;
    if (sqlite3_prepare_v2(st->wdb, "PRAGMA user_version", -1, &q, NULL) == SQLITE_OK) {
        if (sqlite3_step(q) == SQLITE_ROW)
            version = sqlite3_column_int(q, 0);
        sqlite3_finalize(q);
    }
    for (int i = 0; i < store_migrations_count; i++) {
        const struct store_migration *m = &store_migrations[i];
        if (m->version <= version)
            continue;
        char *e = NULL;
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA user_version=%d;", m->version);
        if (exec_sql(st->wdb, "BEGIN IMMEDIATE", &e) || exec_sql(st->wdb, m->sql, &e) ||
            exec_sql(st->wdb, pragma, &e) || exec_sql(st->wdb, "COMMIT", &e)) {
            char *ignored = NULL;
            exec_sql(st->wdb, "ROLLBACK", &ignored);
            free(ignored);
            *err = fmt_err("migration %s failed: %s", m->name, e ? e : "?");
            free(e);
            return -1;
        }
        version = m->version;
    }
    st->schema_version = version;
    return 0;
}

static void op_free(struct write_op *op)
{
    free(op); /* its texts live in the same allocation (op_new) */
}

static int run_stmt(struct store *st, struct write_op *op, enum write_kind kind);

/* op_run's result when a stream write failed halfway and what it had
 * written could not be taken back: the transaction must not commit. */
#define OP_HALF_WRITTEN (-2)

static int op_run(struct store *st, struct write_op *op)
{
    if (op->kind == W_FLUSH)
        return 0;
    if (op->kind != W_STREAM_WRITE)
        return run_stmt(st, op, op->kind);
    /* At most two statements run (the row carries the end when there is a
     * row). When the second fails (a statement that fails changes nothing
     * itself), a delete takes the first back. A SAVEPOINT around them did
     * the same at about 7,000 more instructions per message (two more
     * statements, and SQLite's bookkeeping for a savepoint's pages). */
    int rc = 0;
    if (op->row)
        rc = run_stmt(st, op, W_ROW);
    if (rc == 0 && op->chunk) {
        rc = run_stmt(st, op, W_CHUNK);
        if (rc != 0 && op->row && run_stmt(st, op, W_UNDO_ROW) != 0)
            return OP_HALF_WRITTEN;
    }
    if (rc == 0 && op->end && !op->row) {
        rc = run_stmt(st, op, W_END);
        if (rc == 0 && sqlite3_changes(st->wdb) != 1)
            rc = STORE_STREAM_GONE;
        if (rc != 0 && op->chunk && run_stmt(st, op, W_UNDO_CHUNK) != 0)
            return OP_HALF_WRITTEN;
    }
    /* A mark that fails (it updates one row by its key; the log says why)
     * leaves the copy in place: a later catch-up copies that message again
     * rather than losing it. Unless SQLite rolled the whole transaction
     * back with it (I/O, a full disk): then the batch has failed. */
    if (rc == 0 && op->mark && run_stmt(st, op, W_RELAY_MARK) != 0 &&
        sqlite3_get_autocommit(st->wdb))
        return -1;
    return rc;
}

static int run_stmt(struct store *st, struct write_op *op, enum write_kind kind)
{
    sqlite3_stmt *s = st->stmt[kind];
    int nbind = sqlite3_bind_parameter_count(s);
    for (int i = 0; i < op->nparams && i < nbind; i++) {
        const struct param *p = &op->p[i];
        if (p->type == P_INT)
            sqlite3_bind_int64(s, i + 1, p->i);
        else if (p->type == P_TEXT)
            sqlite3_bind_text(s, i + 1, p->s, (int)p->len, SQLITE_STATIC);
        else
            sqlite3_bind_null(s, i + 1);
    }
    int rc = sqlite3_step(s);
    int ext = rc == SQLITE_DONE ? SQLITE_OK : sqlite3_extended_errcode(st->wdb);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    /* A chunk's only parent is its stream's row: a request racing its
     * session's DELETE writes after the row is gone. */
    if (kind == W_CHUNK && ext == SQLITE_CONSTRAINT_FOREIGNKEY)
        return STORE_STREAM_GONE;
    if (rc != SQLITE_DONE) {
        log_local(LOG_ERROR, NULL, "store_write_failed", "kind=%d: %s", kind,
                  sqlite3_errmsg(st->wdb));
        return -1;
    }
    return 0;
}

/* A statement without parameters. */
static int step_plain(struct store *st, enum write_kind kind)
{
    int rc = sqlite3_step(st->stmt[kind]);
    sqlite3_reset(st->stmt[kind]);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* Where a commit that held the lock long spent it (microseconds), for the
 * warning logged once the lock is released. */
struct slow_commit {
    int64_t held, statements, commit, log_copy;
    uint64_t writes;
};

/* Commits everything queued as one transaction and hands each waited write
 * its result. Called with commit_mu held; its time is the lock's hold (a
 * queue another committer emptied first holds it for nothing worth
 * counting). Returns 1 when the hold was slow enough to log (*slow says
 * why): the caller logs after unlocking, so that a slow stderr does not
 * lengthen the very stall it reports. */
static int commit_queue(struct store *st, struct slow_commit *slow)
{
    int64_t t0 = clock_mono_us();
    pthread_mutex_lock(&st->qmu);
    struct write_op *batch = st->head;
    st->head = st->tail = NULL;
    st->queued = st->waited_queued = 0;
    pthread_mutex_unlock(&st->qmu);
    if (!batch)
        return 0;

    int shared = st->rdb == st->wdb; /* :memory: has one connection */
    if (shared)
        pthread_mutex_lock(&st->rmu);
    int began = step_plain(st, W_BEGIN) == 0, failed = !began;
    uint64_t purged = 0;
    for (struct write_op *op = batch; op && !failed; op = op->next) {
        op->rc = op_run(st, op);
        /* SQLite itself rolls the whole transaction back after some
         * failures (I/O, full disk, no memory, a trigger's ROLLBACK): what
         * ran before is gone, and what follows would commit alone. */
        failed = op->rc == OP_HALF_WRITTEN || (op->rc != 0 && sqlite3_get_autocommit(st->wdb));
        if (op->rc == 0 && (op->kind == W_PURGE_IDLE_SESSIONS || op->kind == W_PURGE_TOMBSTONES ||
                            op->kind == W_PURGE_STREAMS))
            purged += (uint64_t)sqlite3_changes(st->wdb);
    }
    int64_t t1 = clock_mono_us();
    if (!failed && step_plain(st, W_COMMIT) != 0)
        failed = 1;
    int64_t t2 = clock_mono_us(), copy_us = wal_take_hook_us(st->wal);
    if (failed && began)
        step_plain(st, W_ROLLBACK);
    if (shared)
        pthread_mutex_unlock(&st->rmu);

    /* store_flush reports the failures nobody else heard of: a waited
     * write's failure went back to its caller. */
    int unheard_failed = failed;
    uint64_t nops = 0, nfailed = 0;
    struct write_op *next;
    for (struct write_op *op = batch; op; op = next) {
        next = op->next;
        if (failed)
            op->rc = -1;
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
        *slow = (struct slow_commit){t3 - t0, t1 - t0, t2 - t1, copy_us, nops};
    pthread_mutex_lock(&st->qmu);
    if (unheard_failed)
        st->failed_since_flush = 1;
    st->healthy = !failed;
    st->stats.commits += !failed;
    st->stats.writes += nops;
    st->stats.failures += nfailed;
    st->stats.purged += failed ? 0 : purged;
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
    struct store *st = arg;
    pthread_setname_np(pthread_self(), "mcpd-store");
    for (;;) {
        pthread_mutex_lock(&st->qmu);
        while (!st->waited_queued && !st->stop && st->queued < ASYNC_BATCH) {
            if (!st->head) {
                pthread_cond_wait(&st->qcv, &st->qmu);
            } else if (clock_cond_wait_until(&st->qcv, &st->qmu,
                                             clock_mono_ms() + ASYNC_DELAY_MS) == ETIMEDOUT) {
                break;
            }
        }
        int have = st->head != NULL, stopping = st->stop;
        pthread_mutex_unlock(&st->qmu);
        if (!have) {
            if (stopping)
                break;
            continue;
        }
        struct slow_commit slow;
        pthread_mutex_lock(&st->commit_mu);
        int slowed = commit_queue(st, &slow);
        pthread_mutex_unlock(&st->commit_mu);
        if (slowed)
            report_slow(&slow);
    }
    return NULL;
}

/* Builds an op from a format: 'i' int64, 's' text (NULL allowed), 'b' text
 * and its length, 'n' null. One allocation holds the op and a copy of every
 * text, where one each cost a malloc per parameter of every message. */
static struct write_op *op_new(enum write_kind kind, const char *fmt, va_list ap)
{
    struct param p[MAX_PARAMS];
    const char *text[MAX_PARAMS];
    int n = 0;
    size_t bytes = 0;
    for (const char *f = fmt; *f && n < MAX_PARAMS; f++, n++) {
        p[n] = (struct param){.type = P_NULL};
        if (*f == 'i') {
            p[n].type = P_INT;
            p[n].i = va_arg(ap, int64_t);
        } else if (*f == 's' || *f == 'b') {
            text[n] = va_arg(ap, const char *);
            size_t len = *f == 'b' ? va_arg(ap, size_t) : (text[n] ? strlen(text[n]) : 0);
            if (text[n]) {
                p[n].type = P_TEXT;
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
        if (p[i].type == P_TEXT) {
            memcpy(at, text[i], p[i].len);
            at[p[i].len] = '\0';
            op->p[i].s = at;
            at += p[i].len + 1;
        }
    }
    return op;
}

/* Enqueues a write; with wait, blocks until it is committed and returns its
 * result. */
static int submit(struct store *st, struct write_op *op, int wait);

static int enqueue(struct store *st, int wait, enum write_kind kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    struct write_op *op = op_new(kind, fmt, ap);
    va_end(ap);
    if (!op)
        return -1;
    return submit(st, op, wait);
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
 * result (and frees it). */
static int submit(struct store *st, struct write_op *op, int wait)
{
    op->waited = wait;
    /* A fiber (an HTTP request on a pool thread) parks instead of
     * blocking: its pool thread serves other connections meanwhile. */
    op->fiber = wait ? fiber_current() : NULL;
    if (wait && !op->fiber)
        sem_init(&op->done, 0, 0);
    pthread_mutex_lock(&st->qmu);
    if (st->stop) {
        pthread_mutex_unlock(&st->qmu);
        if (wait && !op->fiber)
            sem_destroy(&op->done);
        op_free(op);
        return -1;
    }
    if (st->tail)
        st->tail->next = op;
    else
        st->head = op;
    st->tail = op;
    st->queued++;
    if (wait)
        st->waited_queued++;
    /* A fiber's write always goes to the writer thread: committed inline
     * it would hold the pool thread, and every connection on it, for the
     * whole commit, and commits would no longer gather many writes. */
    int alone = st->waited_queued == 1 && !op->fiber;
    /* Async writes wake the writer only in bulk; otherwise they ride along
     * with the next waited write or the writer's short timer. A waited
     * write that is not alone wakes it now, under the lock it holds
     * anyway. */
    if (wait ? !alone : st->queued == 1 || st->queued >= ASYNC_BATCH)
        pthread_cond_signal(&st->qcv);
    pthread_mutex_unlock(&st->qmu);
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
        if (pthread_mutex_trylock(&st->commit_mu) == 0) {
            struct slow_commit slow;
            int slowed = commit_queue(st, &slow);
            pthread_mutex_unlock(&st->commit_mu);
            if (slowed)
                report_slow(&slow);
        }
        /* Our write, or writes queued during our commit, may still wait. */
        pthread_mutex_lock(&st->qmu);
        if (st->waited_queued)
            pthread_cond_signal(&st->qcv);
        pthread_mutex_unlock(&st->qmu);
    }
    wait_committed(op);
    int rc = op->rc;
    if (!op->fiber)
        sem_destroy(&op->done);
    op_free(op);
    return rc;
}

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
    return submit(st, op, 1);
}

int store_open(const char *path, struct store **out, char **err)
{
    *out = NULL;
    *err = NULL;
    int memory = strcmp(path, ":memory:") == 0;
    if (!memory && mkdirs_for(path) != 0) {
        *err = fmt_err("cannot create the folder for %s: %s", path, strerror(errno));
        return -1;
    }
    if (!memory && own_files(path, err) != 0)
        return -1;
    struct store *st = calloc(1, sizeof *st);
    if (!st) {
        *err = fmt_err("out of memory");
        return -1;
    }
    pthread_mutex_init(&st->rmu, NULL);
    pthread_mutex_init(&st->qmu, NULL);
    pthread_mutex_init(&st->commit_mu, NULL);
    clock_cond_init(&st->qcv);
    if (open_conn(path, &st->wdb, err) || migrate(st, err))
        goto fail;
    if (memory)
        st->rdb = st->wdb;
    else if (open_conn(path, &st->rdb, err))
        goto fail;
    for (int k = 0; k < W_COUNT; k++) {
        if (sqlite3_prepare_v3(st->wdb, write_sql[k], -1, SQLITE_PREPARE_PERSISTENT, &st->stmt[k],
                               NULL) != SQLITE_OK) {
            *err = fmt_err("prepare failed: %s", sqlite3_errmsg(st->wdb));
            goto fail;
        }
    }
    if (!memory && !(st->wal = wal_start(path, st->wdb, &st->commit_mu, &st->hold,
                                         WAL_CHECKPOINT_FRAMES, err)))
        goto fail;
    if (pthread_create(&st->writer, NULL, writer_main, st) != 0) {
        *err = fmt_err("cannot start the store writer thread");
        goto fail;
    }
    st->healthy = 1;
    *out = st;
    return 0;
fail:
    wal_stop(st->wal);
    for (int k = 0; k < W_COUNT; k++)
        sqlite3_finalize(st->stmt[k]);
    if (st->rdb && st->rdb != st->wdb)
        sqlite3_close(st->rdb);
    sqlite3_close(st->wdb);
    free(st);
    return -1;
}

void store_close(struct store *st)
{
    if (!st)
        return;
    pthread_mutex_lock(&st->qmu);
    st->stop = 1;
    pthread_cond_signal(&st->qcv);
    pthread_mutex_unlock(&st->qmu);
    pthread_join(st->writer, NULL);
    wal_stop(st->wal);
    for (int k = 0; k < W_COUNT; k++)
        sqlite3_finalize(st->stmt[k]);
    if (st->rdb != st->wdb)
        sqlite3_close(st->rdb);
    sqlite3_close(st->wdb);
    pthread_mutex_destroy(&st->rmu);
    pthread_mutex_destroy(&st->qmu);
    pthread_mutex_destroy(&st->commit_mu);
    pthread_cond_destroy(&st->qcv);
    free(st);
}

int store_ready(struct store *st)
{
    pthread_mutex_lock(&st->qmu);
    int ok = st->healthy && !st->stop &&
             st->schema_version == store_migrations[store_migrations_count - 1].version;
    pthread_mutex_unlock(&st->qmu);
    return ok;
}

int store_schema_version(struct store *st)
{
    return st->schema_version;
}

int store_flush(struct store *st)
{
    int rc = enqueue(st, 1, W_FLUSH, "");
    pthread_mutex_lock(&st->qmu);
    if (st->failed_since_flush)
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
    if (enqueue(st, 0, W_SESSION_DELETE, "si", id, now_ms))
        return -1;
    return enqueue(st, 1, W_SESSION_STREAMS_DELETE, "s", id);
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
    return enqueue_stream(st, create != NULL, seq >= 0, end_state != NULL, mark != NULL,
                          "sibiisssssi", stream_id, seq, msg ? msg : "", msg ? len : 0,
                          (int64_t)(end_state != NULL), now_ms, c->session_id, c->kind,
                          c->request_id, end_state, m->stream_id, m->copied);
}

int store_log(struct store *st, int64_t ts_ms, const char *level, const char *session_id,
              const char *event)
{
    return enqueue(st, 0, W_LOG, "isss", ts_ms, level, session_id, event);
}

int store_checkpoint(struct store *st)
{
    return st->wal ? wal_checkpoint(st->wal) : 0;
}

/* ---- reads ---- */

static char *col_dup(sqlite3_stmt *q, int col)
{
    const unsigned char *t = sqlite3_column_text(q, col);
    return t ? strdup((const char *)t) : NULL;
}

/* Prepares a read on rdb with the lock held; the caller must call
 * read_end. */
static sqlite3_stmt *read_begin(struct store *st, const char *sql)
{
    pthread_mutex_lock(&st->rmu);
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(st->rdb, sql, -1, &q, NULL) != SQLITE_OK) {
        pthread_mutex_unlock(&st->rmu);
        return NULL;
    }
    return q;
}

static void read_end(struct store *st, sqlite3_stmt *q)
{
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->rmu);
}

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

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void pause_us(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* What the streams of one purge batch held, by session (see
 * store_freed_cb). */
struct freed {
    size_t n;
    struct {
        char *session_id;
        int64_t bytes;
    } v[PURGE_STREAMS_PER_BATCH];
};

static void freed_add(struct freed *f, sqlite3_stmt *q)
{
    const char *sid = (const char *)sqlite3_column_text(q, 1);
    int64_t bytes = sqlite3_column_int64(q, 2);
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
 * ids matching the query (?1 cutoff, ?2 after, ?3 limit, ?4 an optional
 * text bound) and puts the first and last in first/last (malloc'd). With
 * f, each row also names its session and bytes (columns 1 and 2), summed
 * into f. Returns how many ids it read, or -1. */
static int purge_range(struct store *st, const char *sql, int64_t cutoff, const char *after,
                       int batch, const char *bound, char **first, char **last, struct freed *f)
{
    *first = *last = NULL;
    sqlite3_stmt *q = read_begin(st, sql);
    if (!q)
        return -1;
    sqlite3_bind_int64(q, 1, cutoff);
    sqlite3_bind_text(q, 2, after, -1, SQLITE_STATIC);
    sqlite3_bind_int(q, 3, batch);
    if (bound)
        sqlite3_bind_text(q, 4, bound, -1, SQLITE_STATIC);
    int n = 0, rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        char *id = col_dup(q, 0);
        if (!id)
            break;
        if (f)
            freed_add(f, q);
        if (n++ == 0) {
            *first = id;
        } else {
            free(*last);
            *last = id;
        }
    }
    read_end(st, q);
    if (rc != SQLITE_DONE) {
        free(*first);
        free(*last);
        *first = *last = NULL;
        return -1;
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
static int purge_batches(struct store *st, const char *select_sql, enum write_kind kind,
                         int64_t cutoff, int batch, const char *bound, store_freed_cb freed,
                         void *arg)
{
    struct freed f = {0};
    char *after = strdup("");
    int rc = after ? 0 : -1;
    while (rc == 0) {
        char *first, *last;
        int64_t t0 = mono_us();
        int n = purge_range(st, select_sql, cutoff, after, batch, bound, &first, &last,
                            freed ? &f : NULL);
        if (n <= 0) {
            rc = n;
            break;
        }
        rc = enqueue(st, 1, kind, "iss", cutoff, first, last);
        for (size_t i = 0; rc == 0 && i < f.n; i++)
            freed(arg, f.v[i].session_id, f.v[i].bytes);
        freed_clear(&f);
        pause_us((mono_us() - t0) * PURGE_PAUSE);
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
    if (purge_batches(st,
                      "SELECT id FROM sessions WHERE id > ?2 AND last_active_ms < ?1 "
                      "ORDER BY id LIMIT ?3",
                      W_PURGE_IDLE_SESSIONS, c->idle_ms, PURGE_SESSIONS_PER_BATCH, NULL, NULL,
                      NULL) != 0 ||
        purge_batches(st,
                      "SELECT id FROM sessions INDEXED BY sessions_by_deleted WHERE id > ?2 "
                      "AND deleted_ms < ?1 ORDER BY id LIMIT ?3",
                      W_PURGE_TOMBSTONES, c->ended_ms, PURGE_SESSIONS_PER_BATCH, NULL, NULL,
                      NULL) != 0 ||
        purge_batches(st,
                      "SELECT s.id, s.session_id, (SELECT SUM(" CHUNK_BYTES ") FROM chunks c "
                      "WHERE c.stream_id = s.id) FROM streams s WHERE s.id > ?2 AND s.id < ?4 "
                      "AND s.ended_ms IS NOT NULL AND s.ended_ms < ?1 ORDER BY s.id LIMIT ?3",
                      W_PURGE_STREAMS, c->stream_ms, PURGE_STREAMS_PER_BATCH, id_prefix, freed,
                      arg) != 0)
        return -1;
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
    sqlite3_stmt *q = read_begin(st, "SELECT id, protocol_version, init_params, log_level, "
                                     "initialized, created_ms, last_active_ms, principal, "
                                     "transport FROM sessions "
                                     "WHERE id = ?1 AND deleted_ms IS NULL");
    if (!q)
        return -1;
    sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    int result = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? 1 : -1;
    if (result == 0) {
        out->id = col_dup(q, 0);
        out->protocol_version = col_dup(q, 1);
        out->init_params = col_dup(q, 2);
        out->log_level = col_dup(q, 3);
        out->initialized = sqlite3_column_int(q, 4);
        out->created_ms = sqlite3_column_int64(q, 5);
        out->last_active_ms = sqlite3_column_int64(q, 6);
        out->principal = col_dup(q, 7);
        out->transport = col_dup(q, 8);
        if (!out->id || !out->protocol_version || !out->init_params || !out->log_level) {
            store_session_free(out);
            result = -1;
        }
    }
    read_end(st, q);
    return result;
}

int64_t store_session_bytes(struct store *st, const char *id)
{
    sqlite3_stmt *q = read_begin(st, "SELECT COALESCE(SUM(" CHUNK_BYTES "), 0) FROM chunks c "
                                     "JOIN streams s ON s.id = c.stream_id "
                                     "WHERE s.session_id = ?1");
    if (!q)
        return -1;
    sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
    int64_t n = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
    read_end(st, q);
    return n;
}

int store_sessions_live(struct store *st, void (*cb)(void *arg, int64_t last_active_ms), void *arg)
{
    sqlite3_stmt *q =
        read_begin(st, "SELECT last_active_ms FROM sessions WHERE deleted_ms IS NULL");
    if (!q)
        return -1;
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW)
        cb(arg, sqlite3_column_int64(q, 0));
    read_end(st, q);
    return rc == SQLITE_DONE ? 0 : -1;
}

void store_stream_free(struct store_stream *s)
{
    free(s->id);
    free(s->session_id);
    free(s->kind);
    free(s->request_id);
    free(s->state);
    memset(s, 0, sizeof *s);
}

int store_stream_get(struct store *st, const char *id, struct store_stream *out,
                     store_chunk_cb chunk_cb, void *arg)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *q = read_begin(st, "SELECT id, session_id, kind, request_id, state, "
                                     "COALESCE(ended_ms, 0) FROM streams WHERE id = ?1");
    if (!q)
        return -1;
    sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    if (rc != SQLITE_ROW) {
        read_end(st, q);
        return rc == SQLITE_DONE ? 1 : -1;
    }
    out->id = col_dup(q, 0);
    out->session_id = col_dup(q, 1);
    out->kind = col_dup(q, 2);
    out->request_id = col_dup(q, 3);
    out->state = col_dup(q, 4);
    out->ended_ms = sqlite3_column_int64(q, 5);
    sqlite3_finalize(q);
    int result = 0;
    if (sqlite3_prepare_v2(st->rdb,
                           "SELECT seq, message, is_end FROM chunks WHERE stream_id = ?1 "
                           "ORDER BY seq",
                           -1, &q, NULL) != SQLITE_OK) {
        pthread_mutex_unlock(&st->rmu);
        store_stream_free(out);
        return -1;
    }
    sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW)
        chunk_cb(arg, sqlite3_column_int64(q, 0), (const char *)sqlite3_column_text(q, 1),
                 (size_t)sqlite3_column_bytes(q, 1), sqlite3_column_int(q, 2));
    if (rc != SQLITE_DONE)
        result = -1;
    read_end(st, q);
    if (result)
        store_stream_free(out);
    return result;
}

int store_streams_unfinished(struct store *st, store_open_stream_cb cb, void *arg)
{
    sqlite3_stmt *q = read_begin(st, "SELECT s.id, s.session_id, s.request_id, "
                                     "COALESCE((SELECT MAX(seq) + 1 FROM chunks c "
                                     "WHERE c.stream_id = s.id), 0) "
                                     "FROM streams s WHERE s.kind = 'request' AND "
                                     "s.state = 'active'");
    if (!q)
        return -1;
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW)
        cb(arg, (const char *)sqlite3_column_text(q, 0), (const char *)sqlite3_column_text(q, 1),
           (const char *)sqlite3_column_text(q, 2), sqlite3_column_int64(q, 3));
    read_end(st, q);
    return rc == SQLITE_DONE ? 0 : -1;
}

int store_streams_relayed(struct store *st, const char *session_id, int64_t created_before_ms,
                          store_relayed_cb cb, void *arg)
{
    sqlite3_stmt *q = read_begin(st, "SELECT s.id, COALESCE(s.relayed, 0) FROM streams s "
                                     "JOIN sessions e ON e.id = s.session_id "
                                     "WHERE s.session_id = ?1 AND s.kind = 'request' AND "
                                     "s.created_ms < ?2 AND e.transport = 'sse' AND "
                                     "(SELECT COUNT(*) FROM chunks c WHERE c.stream_id = s.id) > "
                                     "COALESCE(s.relayed, 0) ORDER BY s.id");
    if (!q)
        return -1;
    sqlite3_bind_text(q, 1, session_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, created_before_ms);
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW)
        cb(arg, (const char *)sqlite3_column_text(q, 0), sqlite3_column_int64(q, 1));
    read_end(st, q);
    return rc == SQLITE_DONE ? 0 : -1;
}

int store_session_standalone(struct store *st, const char *session_id, char **id_out)
{
    *id_out = NULL;
    sqlite3_stmt *q = read_begin(st, "SELECT id FROM streams WHERE session_id = ?1 AND "
                                     "kind = 'standalone' ORDER BY created_ms LIMIT 1");
    if (!q)
        return -1;
    sqlite3_bind_text(q, 1, session_id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    int result = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? 1 : -1;
    if (result == 0 && !(*id_out = col_dup(q, 0)))
        result = -1;
    read_end(st, q);
    return result;
}

int store_token_lookup(struct store *st, const char *hash, struct store_token *out)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *q = read_begin(st, "SELECT name, expires_ms, revoked_ms FROM tokens "
                                     "WHERE hash = ?1");
    if (!q)
        return -1;
    sqlite3_bind_text(q, 1, hash, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    int result = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? 1 : -1;
    if (result == 0) {
        snprintf(out->name, sizeof out->name, "%s", (const char *)sqlite3_column_text(q, 0));
        out->expires_ms = sqlite3_column_type(q, 1) == SQLITE_NULL ? 0 : sqlite3_column_int64(q, 1);
        out->revoked_ms = sqlite3_column_type(q, 2) == SQLITE_NULL ? 0 : sqlite3_column_int64(q, 2);
    }
    read_end(st, q);
    return result;
}

int store_token_used(struct store *st, const char *name, int64_t now_ms)
{
    return enqueue(st, 0, W_TOKEN_USED, "si", name, now_ms);
}

int store_tokens_revoked_since(struct store *st, int64_t since_ms,
                               void (*cb)(void *arg, const char *name), void *arg)
{
    sqlite3_stmt *q = read_begin(st, "SELECT name FROM tokens WHERE revoked_ms >= ?1");
    if (!q)
        return -1;
    sqlite3_bind_int64(q, 1, since_ms);
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW)
        cb(arg, (const char *)sqlite3_column_text(q, 0));
    read_end(st, q);
    return rc == SQLITE_DONE ? 0 : -1;
}

int store_sessions_ended_by_operator(struct store *st, int64_t since_ms,
                                     void (*cb)(void *arg, const char *id, const char *why),
                                     void *arg)
{
    /* Killed by mcp-admin, or belonging to a token revoked since. */
    sqlite3_stmt *q = read_begin(
        st, "SELECT id, kill_reason FROM sessions WHERE deleted_ms >= ?1 AND kill_reason IS NOT "
            "NULL UNION ALL SELECT s.id, 'token ' || t.name || ' revoked' FROM sessions s "
            "JOIN tokens t ON t.name = s.principal WHERE t.revoked_ms >= ?1 AND s.deleted_ms IS "
            "NULL");
    if (!q)
        return -1;
    sqlite3_bind_int64(q, 1, since_ms);
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW)
        cb(arg, (const char *)sqlite3_column_text(q, 0), (const char *)sqlite3_column_text(q, 1));
    read_end(st, q);
    return rc == SQLITE_DONE ? 0 : -1;
}

int store_secret(struct store *st, const char *name, const char *candidate, int64_t now_ms,
                 char *out, size_t cap)
{
    /* The first value stored wins, so every process (and every start) reads
     * the same key back. */
    if (enqueue(st, 1, W_SECRET_PUT, "ssi", name, candidate, now_ms) != 0)
        return -1;
    sqlite3_stmt *q = read_begin(st, "SELECT value FROM secrets WHERE name = ?1");
    if (!q)
        return -1;
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    int rc = -1;
    if (sqlite3_step(q) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(q, 0);
        if (v && strlen(v) < cap) {
            snprintf(out, cap, "%s", v);
            rc = 0;
        }
    }
    read_end(st, q);
    return rc;
}

/* What the token named `name` is to `hash`; STORE_TOKEN_HASH_TAKEN when
 * there is none of that name. -1 on error. */
static int token_state(struct store *st, const char *name, const char *hash,
                       enum store_token_create_result *out)
{
    sqlite3_stmt *q = read_begin(st, "SELECT hash, revoked_ms FROM tokens WHERE name = ?1");
    if (!q)
        return -1;
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        const char *have = (const char *)sqlite3_column_text(q, 0);
        *out = sqlite3_column_type(q, 1) != SQLITE_NULL ? STORE_TOKEN_REVOKED
               : have && strcmp(have, hash) == 0        ? STORE_TOKEN_EXISTS
                                                        : STORE_TOKEN_OTHER_HASH;
    } else {
        *out = STORE_TOKEN_HASH_TAKEN;
    }
    read_end(st, q);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

int store_token_create(struct store *st, const char *name, const char *hash, const char *note,
                       int64_t now_ms, enum store_token_create_result *out)
{
    if (token_state(st, name, hash, out) != 0)
        return -1;
    if (*out != STORE_TOKEN_HASH_TAKEN)
        return 0; /* a token of that name exists: it stays as it is */
    if (enqueue(st, 1, W_TOKEN_CREATE, "sssi", name, hash, note, now_ms) != 0 ||
        token_state(st, name, hash, out) != 0)
        return -1;
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
    if (enqueue(st, 0, W_STATE_USE_PURGE, "i", now_ms) != 0 ||
        enqueue(st, 1, W_STATE_USE_CLAIM, "ssssi", u->nonce, u->claim, u->run, u->answers,
                u->expires_ms) != 0)
        return -1;
    sqlite3_stmt *q = read_begin(st, "SELECT claim, run, answers, done, outcome "
                                     "FROM request_state_uses WHERE nonce = ?1");
    if (!q)
        return -1;
    sqlite3_bind_text(q, 1, u->nonce, -1, SQLITE_STATIC);
    int rc = -1;
    if (sqlite3_step(q) == SQLITE_ROW) {
        out->claim = col_dup(q, 0);
        out->run = col_dup(q, 1);
        out->answers = col_dup(q, 2);
        out->done = sqlite3_column_int(q, 3);
        out->outcome = col_dup(q, 4);
        rc = out->claim && out->run && out->answers ? 0 : -1;
    }
    read_end(st, q);
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
