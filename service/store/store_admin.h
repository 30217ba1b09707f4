/* store_admin — the operator's view of an mcpd database (mcp-admin's SQL).
 *
 * The database is an SQLite file or a PostgreSQL database (a libpq
 * connection string: "postgres://...", "postgresql://..." or
 * "host=... dbname=...": store_admin_is_postgres). This file's functions hold the behaviour of
 * both: the filters, the transactions, the JSON shaping of rows and the
 * checks at open; the SQL text and the engine's calls are a driver's
 * (store_admin_driver.h; store_admin_sqlite.c, store_admin_pg.c).
 *
 * mcp-admin runs next to a live mcpd (or several, on PostgreSQL). Reading
 * commands open the database read-only (SQLite: SQLITE_OPEN_READONLY, the
 * file is never created or changed, and WAL lets them read while mcpd
 * writes) and make each call one read-only transaction, one snapshot;
 * writing commands make one short write transaction each, so mcpd never
 * waits more than a few milliseconds. Every statement binds its
 * parameters. A database that is missing or cannot be reached, is not
 * mcpd's, or has a newer schema than this build knows is refused at open
 * with a one-line message (a PostgreSQL server that does not answer within
 * connect_timeout, 5 s unless the connection string says otherwise).
 *
 * Results come back as jansson values (new references, the caller
 * decrefs): arrays of objects with the column names as keys, times in
 * milliseconds since the epoch. On error they are NULL with *err set (the
 * caller frees). */
#ifndef MCPD_STORE_ADMIN_H
#define MCPD_STORE_ADMIN_H

#include <jansson.h>
#include <stdint.h>

struct store_admin;

enum store_admin_mode { STORE_ADMIN_READ, STORE_ADMIN_WRITE };

int store_admin_open(const char *path, enum store_admin_mode mode, struct store_admin **out,
                     char **err);
void store_admin_close(struct store_admin *a);
/* The database as messages may show it: the path, or for PostgreSQL the
 * database, host and port without the password. Borrowed. */
const char *store_admin_name(struct store_admin *a);
/* 1 when `path` names a PostgreSQL database: a postgres:// or
 * postgresql:// URL, or libpq key=value pairs with dbname= or host=. */
int store_admin_is_postgres(const char *path);

struct store_admin_sessions_filter {
    enum { SESSIONS_ACTIVE, SESSIONS_ENDED, SESSIONS_ALL } which;
    const char *principal;   /* NULL: any */
    int64_t active_since_ms; /* 0: any */
    int64_t limit;
};
json_t *store_admin_sessions(struct store_admin *a, const struct store_admin_sessions_filter *f,
                             char **err);
/* One session with its params, streams and last messages; JSON null when
 * there is no such session. */
json_t *store_admin_session(struct store_admin *a, const char *id, int last_messages, char **err);
json_t *store_admin_streams(struct store_admin *a, const char *session_id, char **err);
json_t *store_admin_chunks(struct store_admin *a, const char *stream_id, int64_t from_seq,
                           int64_t limit, char **err);

struct store_admin_logs_filter {
    int64_t after_id;    /* rows with a larger id (following); 0: from the start */
    int64_t since_ms;    /* 0: any time */
    int min_level;       /* log_level.h's order */
    const char *session; /* NULL: any */
    const char *principal;
    const char *grep; /* a substring of the event line */
    int64_t limit;    /* the newest `limit` rows, oldest first */
};
json_t *store_admin_logs(struct store_admin *a, const struct store_admin_logs_filter *f,
                         char **err);
/* Counts, sizes (wal_bytes null on PostgreSQL, whose WAL is the
 * server's), requests per minute over the last hour, refusals. */
json_t *store_admin_stats(struct store_admin *a, char **err);

json_t *store_admin_tokens(struct store_admin *a, char **err);
/* 0 added, 1 the name is taken, -1 error. */
int store_admin_token_add(struct store_admin *a, const char *name, const char *hash,
                          const char *note, int64_t expires_ms, char **err);
/* 0 revoked, 1 no such token (or already revoked), -1 error. */
int store_admin_token_revoke(struct store_admin *a, const char *name, char **err);
/* Marks the session ended, with the reason: a running mcpd's kill_watch
 * ends it within a second (its streams go as with a DELETE); a stopped one
 * never revives it, and the reaper purges it. 0, 1 no such live session,
 * -1 error. */
int store_admin_session_kill(struct store_admin *a, const char *id, const char *reason, char **err);

/* SQLite: VACUUM; PostgreSQL: VACUUM (ANALYZE) of mcpd's tables. */
int store_admin_vacuum(struct store_admin *a, char **err);
/* A consistent copy of the whole database into `file`, while mcpd keeps
 * writing: always an SQLite file of mcpd's schema at the database's
 * version, which mcpd and mcp-admin open as they would any (SQLite: the
 * online backup; PostgreSQL: every table read in one REPEATABLE READ
 * transaction). The file must not exist; it is created 0600 (owner only),
 * whatever the umask, and removed again when the copy fails. */
int store_admin_backup(struct store_admin *a, const char *file, char **err);
/* {integrity ("ok" or the first problem), problems:[text...], sanity:{
 * counts of rows that should not exist}, schema_version, latest_version,
 * migrations:[...]}. The problems are the engine's own check (SQLite's
 * PRAGMA integrity_check; on PostgreSQL, indexes left invalid) and every
 * nonzero sanity count. */
json_t *store_admin_check(struct store_admin *a, char **err);

#endif
