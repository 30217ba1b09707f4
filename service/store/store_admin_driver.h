/* store_admin_driver — what store_admin.c asks of a database engine.
 *
 * store_admin.c holds mcp-admin's behaviour once: the filters, the
 * transactions each command makes, the shaping of rows into JSON, the
 * checks at open. A driver (store_admin_sqlite.c, store_admin_pg.c) holds
 * only what differs between engines: how to connect, the SQL text of each
 * query (a table indexed by enum store_admin_query, all parameters bound:
 * ?N in SQLite, $N in PostgreSQL, numbered alike), how a value comes back
 * as JSON, and the operations with no common SQL (vacuum, backup, the
 * engine's own integrity check).
 *
 * Every query returns rows as a JSON array of objects keyed by column
 * name, in column order: integers as integers, text through
 * store_admin_text (valid UTF-8, whatever was stored), NULL as null. So
 * the same rows give the same JSON on either engine. */
#ifndef MCPD_STORE_ADMIN_DRIVER_H
#define MCPD_STORE_ADMIN_DRIVER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

enum store_admin_query {
    SAQ_SESSIONS,       /* 1 which (0 live, 1 ended, 2 all), 2 principal, 3 since, 4 limit */
    SAQ_SESSION,        /* 1 id */
    SAQ_STREAMS,        /* 1 session id */
    SAQ_LAST_MESSAGES,  /* 1 session id, 2 how many */
    SAQ_CHUNKS,         /* 1 stream id, 2 from seq, 3 limit */
    SAQ_LOGS,           /* 1 after id, 2 since, 3 level, 4 session, 5 principal, 6 grep, 7 limit */
    SAQ_COUNTS,         /* one row: stats' counts and sizes */
    SAQ_PER_MINUTE,     /* 1 since */
    SAQ_WARNINGS,       /* 1 since */
    SAQ_TOKENS,         /* no parameters */
    SAQ_SANITY,         /* one row: counts of rows that should not exist */
    SAQ_TOKEN_ADD,      /* 1 name, 2 hash, 3 note, 4 now, 5 expires */
    SAQ_TOKEN_REVOKE,   /* 1 name, 2 now */
    SAQ_SESSION_KILL,   /* 1 id, 2 now, 3 reason */
    STORE_ADMIN_QUERIES /* how many */
};

/* A bound parameter: a 64-bit integer, or text (borrowed for the call;
 * NULL binds SQL NULL). */
struct store_admin_param {
    enum { SAP_INT, SAP_TEXT } kind;
    int64_t i;
    const char *s;
};
#define SAP_I(v) ((struct store_admin_param){.kind = SAP_INT, .i = (v)})
#define SAP_T(v) ((struct store_admin_param){.kind = SAP_TEXT, .s = (v)})

struct store_admin_driver {
    /* Connects. The message in *err is one line without secrets. */
    int (*open)(const char *target, int writable, void **ctx, char **err);
    void (*close)(void *ctx);
    /* The target as messages may show it (a path; for a URL, without its
     * password). Borrowed. */
    const char *(*name)(void *ctx);
    /* The schema version recorded in the database (0: none), or -1 and
     * *err when it cannot be read (not an mcpd database). */
    int (*schema_version)(void *ctx, int *version, char **err);
    /* A transaction: a read-only one with one snapshot for all its
     * queries, or a short write. end commits (commit 1) or rolls back. */
    int (*begin)(void *ctx, int write, char **err);
    int (*end)(void *ctx, int commit, char **err);
    /* The rows of query q (NULL and *err on failure). */
    json_t *(*rows)(void *ctx, enum store_admin_query q, const struct store_admin_param *p, int n,
                    char **err);
    /* Runs a write: 0 when it changed a row, 1 when it changed none or hit
     * a uniqueness constraint, -1 on any other error. */
    int (*write)(void *ctx, enum store_admin_query q, const struct store_admin_param *p, int n,
                 char **err);
    /* Reclaims space and refreshes the planner's statistics of mcpd's
     * tables (those of the schema at `version`). */
    int (*vacuum)(void *ctx, int version, char **err);
    /* A consistent copy into `file`, which exists, empty and 0600, as an
     * SQLite database of mcpd's schema at the same version. */
    int (*backup)(void *ctx, const char *file, int version, char **err);
    /* The engine's own integrity problems, as an array of strings (empty:
     * none). */
    json_t *(*integrity)(void *ctx, char **err);
    /* Bytes of the write-ahead log that belongs to this database alone, or
     * JSON null where there is none (PostgreSQL's WAL is the server's). */
    json_t *(*wal_bytes)(void *ctx);
};

extern const struct store_admin_driver store_admin_sqlite;
extern const struct store_admin_driver store_admin_pg;

/* *err = a formatted message (malloc'd; NULL when out of memory). */
void store_admin_set_err(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* n bytes of text as a JSON string; bytes that are not UTF-8 become
 * U+FFFD each (a client can have stored some: a header cut mid-character). */
json_t *store_admin_text(const char *s, size_t n);

/* SQLite files in mcpd's schema, for a backup from another engine: a new
 * database in `file` (which exists, empty) with the embedded migrations
 * up to `version` applied and user_version set, as mcpd would have made
 * it. The caller sqlite3_close()s it. */
int store_admin_sqlite_create(const char *file, int version, sqlite3 **out, char **err);

#endif
