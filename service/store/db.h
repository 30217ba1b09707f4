/* db — one connection of the store to its database engine, SQLite or
 * PostgreSQL, behind one small interface.
 *
 * store.c holds the logic (the write queue, the group commit, what each
 * call reads and writes) and names its statements by number; the SQL text
 * of each number, in each dialect, is store_sql.c's. A driver (db_sqlite.c,
 * db_pg.c) opens a connection, applies the migrations its own way, prepares
 * every statement once per connection (db_prepare) and runs them with bound
 * parameters. db_batch, PostgreSQL's, runs a whole transaction in one round
 * trip (libpq pipeline mode).
 *
 * A call that failed because the connection is lost returns DB_UNAVAILABLE
 * (== STORE_UNAVAILABLE) and db_broken says so until db_reset reconnects:
 * DB_STALLED when the server stopped answering (the call's timeout,
 * db_pg.c), which a reconnect at once would likely find stalled too.
 * Strings a row returns (db_text) are valid until the next db_next or
 * db_rows_end. */
#ifndef MCPD_DB_H
#define MCPD_DB_H

#include "store_migrations.h"

#include <stddef.h>
#include <stdint.h>

enum db_engine { DB_SQLITE, DB_PG };

#define DB_UNAVAILABLE (-2)
/* db_exec's result when a foreign key is violated (a chunk whose stream is
 * gone). */
#define DB_FOREIGN_KEY 2

struct db_param {
    enum { DB_NULL, DB_INT, DB_TEXT } type;
    int64_t i;
    const char *s; /* NUL-terminated, len bytes */
    size_t len;
};

/* What a driver implements (db.c dispatches each db_* call to it); every
 * connection a driver makes begins with a struct db naming the driver. */
struct db_rows;
struct db_call;
struct db;
struct db_driver {
    int (*open)(const char *target, struct db **out, char **err);
    void (*close)(struct db *c);
    int (*migrate)(struct db *c, const struct store_migration *m, int count, int *version,
                   char **err);
    int (*prepare)(struct db *c, const char *const *sql, int n, char **err);
    int (*broken)(struct db *c);
    int (*reset)(struct db *c);
    int (*exec)(struct db *c, int k, const struct db_param *p, int n, int64_t *changes,
                int64_t *value);
    int (*exec_text)(struct db *c, const char *sql, char **err);
    int (*in_transaction)(struct db *c);
    int (*query)(struct db *c, int k, const struct db_param *p, int n, struct db_rows *r);
    int (*next)(struct db_rows *r);
    const char *(*text)(struct db_rows *r, int col);
    size_t (*bytes)(struct db_rows *r, int col);
    int64_t (*integer)(struct db_rows *r, int col);
    int (*is_null)(struct db_rows *r, int col);
    void (*rows_end)(struct db_rows *r);
    int (*batch)(struct db *c, struct db_call *calls, int n);
    int (*listen)(struct db *c, const char *channel);
    int (*notify_wait)(struct db *c, int timeout_ms, void (*cb)(void *arg, const char *payload),
                       void *arg);
};
struct db {
    const struct db_driver *drv;
    enum db_engine engine;
};
extern const struct db_driver db_sqlite_driver, db_pg_driver;

/* Opens a connection to `target` (a file path or ":memory:" for SQLite; a
 * libpq connection string for PostgreSQL). 0, or -1 with *err (malloc'd). */
int db_open(enum db_engine e, const char *target, struct db **out, char **err);
void db_close(struct db *c);
enum db_engine db_engine_of(struct db *c);
/* Brings the schema up to the last of the `count` migrations; *version is
 * the schema's version afterwards. Refuses a schema newer than them. */
int db_migrate(struct db *c, const struct store_migration *m, int count, int *version, char **err);
/* Prepares sql[0..n-1] (NULL entries are skipped) on this connection; kept
 * for db_reset. */
int db_prepare(struct db *c, const char *const *sql, int n, char **err);
/* Nonzero when the connection is known lost: 1, or DB_STALLED. */
#define DB_STALLED 3
int db_broken(struct db *c);
/* Reconnects and prepares again what db_prepare prepared. 0 or -1. */
int db_reset(struct db *c);

/* Runs statement k. *changes (may be NULL): rows it changed; *value (may
 * be NULL): the first column of its first row, when it returns one and it
 * is an integer. 0, -1, DB_FOREIGN_KEY or DB_UNAVAILABLE. */
int db_exec(struct db *c, int k, const struct db_param *p, int n, int64_t *changes, int64_t *value);
/* Runs unprepared SQL (one or more statements, no parameters). */
int db_exec_text(struct db *c, const char *sql, char **err);
/* 1 inside a transaction (SQLite rolls it back by itself after some
 * failures: then 0). */
int db_in_transaction(struct db *c);

struct db_rows {
    struct db *c;
    void *h; /* the driver's statement or result */
    int row, nrows;
};
/* Starts statement k as a query; then db_next until it returns 0 (done)
 * or an error; db_rows_end always. */
int db_query(struct db *c, int k, const struct db_param *p, int n, struct db_rows *r);
/* 1 a row, 0 done, -1 or DB_UNAVAILABLE. */
int db_next(struct db_rows *r);
const char *db_text(struct db_rows *r, int col); /* NULL for NULL */
size_t db_bytes(struct db_rows *r, int col);
int64_t db_int(struct db_rows *r, int col);
int db_is_null(struct db_rows *r, int col);
void db_rows_end(struct db_rows *r);

/* One statement of a batch, and what it did: rc as db_exec's, changes and
 * value as there. */
struct db_call {
    int k;
    const struct db_param *p;
    int n;
    int rc;
    int64_t changes, value;
};
/* PostgreSQL: BEGIN, the calls, COMMIT, in one round trip. 0 committed;
 * -1 a call failed (its rc says which) and nothing was committed;
 * DB_UNAVAILABLE the connection was lost, COMMIT's outcome unknown. */
int db_batch(struct db *c, struct db_call *calls, int n);

/* PostgreSQL's notifications on this connection: LISTEN to channel, then
 * db_notify_wait waits up to timeout_ms and calls cb with each payload.
 * 0, or DB_UNAVAILABLE when the connection is lost. */
int db_listen(struct db *c, const char *channel);
int db_notify_wait(struct db *c, int timeout_ms, void (*cb)(void *arg, const char *payload),
                   void *arg);

/* A malloc'd message, printf-style (NULL when out of memory): the
 * drivers' and the store's *err. */
char *db_fmt_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* SQLite: makes the file's folder, creates the file owner-only and
 * narrows the modes of the files that exist (0 or -1 and *err). Only
 * before any connection to the file is open: closing a descriptor of a
 * file drops every POSIX lock the process holds on it, SQLite's among
 * them, and another process could then write under a connection's feet. */
int db_sqlite_files(const char *path, char **err);

/* The SQLite handle (wal.c needs it); NULL on PostgreSQL. */
struct sqlite3 *db_sqlite_handle(struct db *c);

#endif
