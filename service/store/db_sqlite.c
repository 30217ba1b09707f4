/* db_sqlite — the store's SQLite driver (db.h): one connection to a file
 * in WAL mode (or ":memory:"), its files owner-only, the migrations
 * recorded in PRAGMA user_version, each statement prepared once. */
#include "db.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The log is trimmed to WAL_SIZE_LIMIT bytes when it starts over. */
#define WAL_SIZE_LIMIT "16777216"

struct db_sqlite {
    struct db base;
    sqlite3 *db;
    sqlite3_stmt **stmt;
    int nstmt;
};

static struct db_sqlite *sq(struct db *c)
{
    return (struct db_sqlite *)c;
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
        *err = db_fmt_err("cannot open database %s: %s", path, strerror(errno));
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

static int sq_exec_text(struct db *c, const char *sql, char **err)
{
    char *msg = NULL;
    if (sqlite3_exec(sq(c)->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        *err = db_fmt_err("%s", msg ? msg : sqlite3_errmsg(sq(c)->db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

int db_sqlite_files(const char *path, char **err)
{
    if (strcmp(path, ":memory:") == 0)
        return 0;
    if (mkdirs_for(path) != 0) {
        *err = db_fmt_err("cannot create the folder for %s: %s", path, strerror(errno));
        return -1;
    }
    return own_files(path, err);
}

static int sq_open(const char *path, struct db **out, char **err)
{
    struct db_sqlite *c = calloc(1, sizeof *c);
    if (!c) {
        *err = db_fmt_err("out of memory");
        return -1;
    }
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path, &c->db, flags, NULL) != SQLITE_OK) {
        *err = db_fmt_err("cannot open database %s: %s", path,
                          c->db ? sqlite3_errmsg(c->db) : "out of memory");
        sqlite3_close(c->db);
        free(c);
        return -1;
    }
    sqlite3_busy_timeout(c->db, 5000);
    *out = &c->base;
    /* NORMAL in WAL mode: a commit survives the process being killed
     * (SIGKILL); only an OS crash can lose the last commits. */
    /* Checkpoints run in wal.c, off the writer's commit path: the fsync
     * they need would otherwise stall every appender. A log that a burst
     * made large is cut back when it starts over. */
    if (sq_exec_text(&c->base,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                     "PRAGMA foreign_keys=ON; PRAGMA wal_autocheckpoint=0; "
                     "PRAGMA journal_size_limit=" WAL_SIZE_LIMIT ";",
                     err) != 0) {
        sqlite3_close(c->db);
        free(c);
        *out = NULL;
        return -1;
    }
    return 0;
}

static void sq_close(struct db *base)
{
    struct db_sqlite *c = sq(base);
    for (int k = 0; k < c->nstmt; k++)
        sqlite3_finalize(c->stmt[k]);
    free(c->stmt);
    sqlite3_close(c->db);
    free(c);
}

static int migrate_all(struct db *c, const struct store_migration *m, int count, int *version,
                       char **err)
{
    sqlite3_stmt *q;
    int v = 0;
    if (sqlite3_prepare_v2(sq(c)->db, "PRAGMA user_version", -1, &q, NULL) == SQLITE_OK) {
        if (sqlite3_step(q) == SQLITE_ROW)
            v = sqlite3_column_int(q, 0);
        sqlite3_finalize(q);
    }
    for (int i = 0; i < count; i++) {
        if (m[i].version <= v)
            continue;
        char *e = NULL;
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA user_version=%d;", m[i].version);
        if (sq_exec_text(c, "BEGIN IMMEDIATE", &e) || sq_exec_text(c, m[i].sql, &e) ||
            sq_exec_text(c, pragma, &e) || sq_exec_text(c, "COMMIT", &e)) {
            char *ignored = NULL;
            sq_exec_text(c, "ROLLBACK", &ignored);
            free(ignored);
            *err = db_fmt_err("migration %s failed: %s", m[i].name, e ? e : "?");
            free(e);
            return -1;
        }
        v = m[i].version;
    }
    *version = v;
    return 0;
}

static int sq_migrate(struct db *c, const struct store_migration *m, int count, int *version,
                      char **err)
{
    /* A migration may rebuild a table; with foreign keys on, dropping the
     * old one would cascade-delete everything that refers to it. */
    char *ignored = NULL;
    sq_exec_text(c, "PRAGMA foreign_keys=OFF", &ignored);
    free(ignored);
    int rc = migrate_all(c, m, count, version, err);
    ignored = NULL;
    sq_exec_text(c, "PRAGMA foreign_keys=ON", &ignored);
    free(ignored);
    return rc;
}

static int sq_prepare(struct db *base, const char *const *sql, int n, char **err)
{
    struct db_sqlite *c = sq(base);
    if (!(c->stmt = calloc((size_t)n, sizeof *c->stmt))) {
        *err = db_fmt_err("out of memory");
        return -1;
    }
    c->nstmt = n;
    for (int k = 0; k < n; k++) {
        if (sql[k] && sqlite3_prepare_v3(c->db, sql[k], -1, SQLITE_PREPARE_PERSISTENT, &c->stmt[k],
                                         NULL) != SQLITE_OK) {
            *err = db_fmt_err("prepare failed: %s", sqlite3_errmsg(c->db));
            return -1;
        }
    }
    return 0;
}

static int sq_broken(struct db *c)
{
    (void)c;
    return 0;
}

static int sq_reset(struct db *c)
{
    (void)c;
    return 0;
}

static sqlite3_stmt *bind_all(struct db_sqlite *c, int k, const struct db_param *p, int n)
{
    sqlite3_stmt *s = k >= 0 && k < c->nstmt ? c->stmt[k] : NULL;
    if (!s)
        return NULL;
    int nbind = sqlite3_bind_parameter_count(s);
    for (int i = 0; i < n && i < nbind; i++) {
        if (p[i].type == DB_INT)
            sqlite3_bind_int64(s, i + 1, p[i].i);
        else if (p[i].type == DB_TEXT)
            sqlite3_bind_text(s, i + 1, p[i].s, (int)p[i].len, SQLITE_STATIC);
        else
            sqlite3_bind_null(s, i + 1);
    }
    return s;
}

static int sq_exec(struct db *base, int k, const struct db_param *p, int n, int64_t *changes,
                   int64_t *value)
{
    struct db_sqlite *c = sq(base);
    sqlite3_stmt *s = bind_all(c, k, p, n);
    if (!s)
        return -1;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        if (value)
            *value = sqlite3_column_int64(s, 0);
        while ((rc = sqlite3_step(s)) == SQLITE_ROW)
            ;
    }
    int ext = rc == SQLITE_DONE ? SQLITE_OK : sqlite3_extended_errcode(c->db);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (changes)
        *changes = sqlite3_changes(c->db);
    if (ext == SQLITE_CONSTRAINT_FOREIGNKEY)
        return DB_FOREIGN_KEY;
    if (rc != SQLITE_DONE) {
        log_local(LOG_ERROR, NULL, "store_write_failed", "statement %d: %s", k,
                  sqlite3_errmsg(c->db));
        return -1;
    }
    return 0;
}

static int sq_in_transaction(struct db *c)
{
    return !sqlite3_get_autocommit(sq(c)->db);
}

static int sq_query(struct db *base, int k, const struct db_param *p, int n, struct db_rows *r)
{
    sqlite3_stmt *s = bind_all(sq(base), k, p, n);
    r->h = s;
    return s ? 0 : -1;
}

static int sq_next(struct db_rows *r)
{
    int rc = sqlite3_step(r->h);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        return rc == SQLITE_ROW;
    log_local(LOG_ERROR, NULL, "store_read_failed", "%s", sqlite3_errmsg(sq(r->c)->db));
    return -1;
}

static const char *sq_text(struct db_rows *r, int col)
{
    return (const char *)sqlite3_column_text(r->h, col);
}

static size_t sq_bytes(struct db_rows *r, int col)
{
    return (size_t)sqlite3_column_bytes(r->h, col);
}

static int64_t sq_int(struct db_rows *r, int col)
{
    return sqlite3_column_int64(r->h, col);
}

static int sq_is_null(struct db_rows *r, int col)
{
    return sqlite3_column_type(r->h, col) == SQLITE_NULL;
}

/* Reset at once: a statement left stepping would hold its snapshot. */
static void sq_rows_end(struct db_rows *r)
{
    if (!r->h)
        return;
    sqlite3_reset(r->h);
    sqlite3_clear_bindings(r->h);
}

/* SQLite runs a batch statement by statement (store.c's commit_sqlite). */
static int sq_batch(struct db *c, struct db_call *calls, int n)
{
    (void)c, (void)calls, (void)n;
    return -1;
}

/* One process: nothing to listen to. */
static int sq_listen(struct db *c, const char *channel)
{
    (void)c, (void)channel;
    return 0;
}

static int sq_notify_wait(struct db *c, int timeout_ms, void (*cb)(void *, const char *), void *arg)
{
    (void)c, (void)timeout_ms, (void)cb, (void)arg;
    return 0;
}

struct sqlite3 *db_sqlite_handle(struct db *c)
{
    return c->engine == DB_SQLITE ? sq(c)->db : NULL;
}

const struct db_driver db_sqlite_driver = {
    sq_open,      sq_close,          sq_migrate, sq_prepare, sq_broken,      sq_reset, sq_exec,
    sq_exec_text, sq_in_transaction, sq_query,   sq_next,    sq_text,        sq_bytes, sq_int,
    sq_is_null,   sq_rows_end,       sq_batch,   sq_listen,  sq_notify_wait,
};
