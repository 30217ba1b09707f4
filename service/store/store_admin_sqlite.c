/* store_admin_sqlite — mcp-admin's SQLite driver (store_admin_driver.h):
 * the SQL text of each query in SQLite's dialect, the connection (read-only
 * for reading commands), the online backup and PRAGMA integrity_check. */
#include "store_admin_driver.h"
#include "store_migrations.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct lite {
    sqlite3 *db;
    char *path;
};

/* The session columns (client_name and client_version are filled in from
 * init_params by store_admin.c, for both engines alike). */
#define SESSION_COLUMNS                                                                            \
    "s.id, s.principal, NULL AS client_name, NULL AS client_version, "                             \
    "s.protocol_version AS protocol, s.transport, s.created_ms, s.last_active_ms, "                \
    "s.deleted_ms AS ended_ms, s.kill_reason, "                                                    \
    "(SELECT COUNT(*) FROM streams t WHERE t.session_id = s.id AND t.state = 'active') AS "        \
    "open_streams, "                                                                               \
    "(SELECT COALESCE(SUM(LENGTH(CAST(c.message AS BLOB))), 0) FROM chunks c JOIN streams t ON "   \
    "t.id = c.stream_id WHERE t.session_id = s.id) AS stored_bytes, s.init_params "

static const char *const sql[STORE_ADMIN_QUERIES] = {
    [SAQ_SESSIONS] =
        "SELECT " SESSION_COLUMNS "FROM sessions s WHERE "
        "(?1 = 2 OR (?1 = 0 AND s.deleted_ms IS NULL) OR (?1 = 1 AND s.deleted_ms IS NOT NULL)) "
        "AND (?2 IS NULL OR s.principal = ?2) AND s.last_active_ms >= ?3 "
        "ORDER BY s.last_active_ms DESC, s.id LIMIT ?4",
    [SAQ_SESSION] = "SELECT " SESSION_COLUMNS ", s.log_level, s.initialized "
                    "FROM sessions s WHERE s.id = ?1",
    [SAQ_STREAMS] = "SELECT t.id, t.kind, t.state, t.request_id, t.created_ms, t.ended_ms, "
                    "COUNT(c.seq) AS chunks, "
                    "COALESCE(SUM(LENGTH(CAST(c.message AS BLOB))), 0) AS bytes "
                    "FROM streams t LEFT JOIN chunks c ON c.stream_id = t.id "
                    "WHERE t.session_id = ?1 GROUP BY t.id ORDER BY t.created_ms, t.id",
    [SAQ_LAST_MESSAGES] =
        "SELECT * FROM (SELECT c.stream_id, c.seq, c.created_ms, c.message FROM chunks c "
        "JOIN streams t ON t.id = c.stream_id WHERE t.session_id = ?1 "
        "ORDER BY c.created_ms DESC, c.stream_id DESC, c.seq DESC LIMIT ?2) "
        "ORDER BY created_ms, stream_id, seq",
    [SAQ_CHUNKS] = "SELECT seq, is_end, created_ms, message FROM chunks "
                   "WHERE stream_id = ?1 AND seq >= ?2 ORDER BY seq LIMIT ?3",
    [SAQ_LOGS] =
        "SELECT * FROM (SELECT l.id, l.ts_ms, l.level, l.session_id, s.principal, l.event "
        "FROM logs l LEFT JOIN sessions s ON s.id = l.session_id "
        "WHERE l.id > ?1 AND l.ts_ms >= ?2 AND (CASE l.level WHEN 'debug' THEN 0 WHEN 'info' "
        "THEN 1 WHEN 'warn' THEN 2 ELSE 3 END) >= ?3 AND (?4 IS NULL OR l.session_id = ?4) "
        "AND (?5 IS NULL OR s.principal = ?5) AND (?6 IS NULL OR instr(l.event, ?6) > 0) "
        "ORDER BY l.id DESC LIMIT ?7) ORDER BY id",
    [SAQ_COUNTS] =
        "SELECT (SELECT COUNT(*) FROM sessions) AS sessions, "
        "(SELECT COUNT(*) FROM sessions WHERE deleted_ms IS NULL) AS sessions_live, "
        "(SELECT COUNT(*) FROM streams) AS streams, "
        "(SELECT COUNT(*) FROM streams WHERE state = 'active') AS streams_open, "
        "(SELECT COUNT(*) FROM chunks) AS chunks, "
        "(SELECT COALESCE(SUM(LENGTH(CAST(message AS BLOB))), 0) FROM chunks) AS stored_bytes, "
        "(SELECT COUNT(*) FROM logs) AS log_rows, "
        "(SELECT COUNT(*) FROM tokens WHERE revoked_ms IS NULL) AS tokens, "
        "(SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()) "
        "AS database_bytes",
    [SAQ_PER_MINUTE] = "SELECT (ts_ms - ?1) / 60000 AS minute, COUNT(*) AS requests "
                       "FROM logs WHERE ts_ms >= ?1 AND event LIKE 'request %' "
                       "GROUP BY minute ORDER BY minute",
    [SAQ_WARNINGS] =
        "SELECT substr(event, 1, instr(event || ' ', ' ') - 1) AS reason, COUNT(*) AS n "
        "FROM logs WHERE level IN ('warn', 'error') AND ts_ms >= ?1 GROUP BY reason "
        "ORDER BY n DESC, reason",
    [SAQ_TOKENS] = "SELECT t.name, t.note, t.created_ms, t.expires_ms, t.revoked_ms, "
                   "t.last_used_ms, (SELECT COUNT(*) FROM sessions s WHERE "
                   "s.principal = t.name AND s.deleted_ms IS NULL) AS sessions "
                   "FROM tokens t ORDER BY t.created_ms, t.name",
    [SAQ_SANITY] =
        "SELECT (SELECT COUNT(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM streams t "
        "WHERE t.id = c.stream_id)) AS chunks_without_stream, "
        "(SELECT COUNT(*) FROM streams t WHERE NOT EXISTS (SELECT 1 FROM sessions s "
        "WHERE s.id = t.session_id)) AS streams_without_session",
    [SAQ_TOKEN_ADD] = "INSERT INTO tokens(name, hash, note, created_ms, expires_ms) "
                      "VALUES(?1, ?2, ?3, ?4, ?5)",
    [SAQ_TOKEN_REVOKE] = "UPDATE tokens SET revoked_ms = ?2 WHERE name = ?1 AND revoked_ms IS NULL",
    [SAQ_SESSION_KILL] = "UPDATE sessions SET deleted_ms = ?2, kill_reason = ?3 "
                         "WHERE id = ?1 AND deleted_ms IS NULL",
};

static int lite_exec(sqlite3 *db, const char *text, char **err)
{
    char *msg = NULL;
    if (sqlite3_exec(db, text, NULL, NULL, &msg) != SQLITE_OK) {
        store_admin_set_err(err, "%s", msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static int lite_open(const char *path, int writable, void **ctx, char **err)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        store_admin_set_err(err, "no database at %s: %s", path, strerror(errno));
        return -1;
    }
    struct lite *l = calloc(1, sizeof *l);
    if (!l || !(l->path = strdup(path))) {
        free(l);
        store_admin_set_err(err, "out of memory");
        return -1;
    }
    int flags = (writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY) | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path, &l->db, flags, NULL) != SQLITE_OK) {
        store_admin_set_err(err, "cannot open %s: %s", path,
                            l->db ? sqlite3_errmsg(l->db) : "out of memory");
        goto fail;
    }
    /* mcpd holds the write lock only for one short commit at a time. */
    sqlite3_busy_timeout(l->db, 2000);
    /* mcpd's checkpoints keep clear of its commits' log restarts (see
     * wal.h); one run from here after a write could not. */
    char *why = NULL;
    if (writable && lite_exec(l->db, "PRAGMA wal_autocheckpoint=0", &why) != 0) {
        store_admin_set_err(err, "cannot open %s: %s", path, why ? why : "?");
        free(why);
        goto fail;
    }
    *ctx = l;
    return 0;
fail:
    sqlite3_close(l->db);
    free(l->path);
    free(l);
    return -1;
}

static void lite_close(void *ctx)
{
    struct lite *l = ctx;
    sqlite3_close(l->db);
    free(l->path);
    free(l);
}

static const char *lite_name(void *ctx)
{
    return ((struct lite *)ctx)->path;
}

static int user_version(sqlite3 *db, int *out, char **err)
{
    sqlite3_stmt *q;
    int rc = SQLITE_ERROR;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL) == SQLITE_OK) {
        rc = sqlite3_step(q);
        if (rc == SQLITE_ROW)
            *out = sqlite3_column_int(q, 0);
        sqlite3_finalize(q);
    }
    if (rc != SQLITE_ROW) {
        store_admin_set_err(err, "%s", sqlite3_errmsg(db));
        return -1;
    }
    return 0;
}

static int lite_schema_version(void *ctx, int *version, char **err)
{
    return user_version(((struct lite *)ctx)->db, version, err);
}

static int lite_begin(void *ctx, int write, char **err)
{
    /* A write takes the lock first, so that its timestamp is read with the
     * lock held (store_admin.c, write_one). */
    return lite_exec(((struct lite *)ctx)->db, write ? "BEGIN IMMEDIATE" : "BEGIN", err);
}

static int lite_end(void *ctx, int commit, char **err)
{
    return lite_exec(((struct lite *)ctx)->db, commit ? "COMMIT" : "ROLLBACK", err);
}

static sqlite3_stmt *prepare(struct lite *l, enum store_admin_query q,
                             const struct store_admin_param *p, int n, char **err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(l->db, sql[q], -1, &st, NULL) != SQLITE_OK) {
        store_admin_set_err(err, "query failed: %s", sqlite3_errmsg(l->db));
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (p[i].kind == SAP_INT)
            sqlite3_bind_int64(st, i + 1, p[i].i);
        else if (p[i].s)
            sqlite3_bind_text(st, i + 1, p[i].s, -1, SQLITE_STATIC);
    }
    return st;
}

static json_t *column(sqlite3_stmt *q, int i)
{
    switch (sqlite3_column_type(q, i)) {
    case SQLITE_INTEGER:
        return json_integer(sqlite3_column_int64(q, i));
    case SQLITE_FLOAT:
        return json_real(sqlite3_column_double(q, i));
    case SQLITE_NULL:
        return json_null();
    default:
        return store_admin_text((const char *)sqlite3_column_text(q, i),
                                (size_t)sqlite3_column_bytes(q, i));
    }
}

static json_t *lite_rows(void *ctx, enum store_admin_query q, const struct store_admin_param *p,
                         int n, char **err)
{
    struct lite *l = ctx;
    sqlite3_stmt *st = prepare(l, q, p, n, err);
    if (!st)
        return NULL;
    json_t *out = json_array();
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *row = json_object();
        for (int i = 0; i < sqlite3_column_count(st); i++)
            json_object_set_new(row, sqlite3_column_name(st, i), column(st, i));
        json_array_append_new(out, row);
    }
    if (rc != SQLITE_DONE) {
        store_admin_set_err(err, "query failed: %s", sqlite3_errmsg(l->db));
        json_decref(out);
        out = NULL;
    }
    sqlite3_finalize(st);
    return out;
}

static int lite_write(void *ctx, enum store_admin_query q, const struct store_admin_param *p, int n,
                      char **err)
{
    struct lite *l = ctx;
    sqlite3_stmt *st = prepare(l, q, p, n, err);
    if (!st)
        return -1;
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_CONSTRAINT)
        return 1;
    if (rc != SQLITE_DONE) {
        store_admin_set_err(err, "%s", sqlite3_errmsg(l->db));
        return -1;
    }
    return sqlite3_changes(l->db) > 0 ? 0 : 1;
}

static int lite_vacuum(void *ctx, int version, char **err)
{
    (void)version;
    return lite_exec(((struct lite *)ctx)->db, "VACUUM", err);
}

static int lite_backup(void *ctx, const char *file, int version, char **err)
{
    (void)version; /* the copy is the database, schema and all */
    struct lite *l = ctx;
    sqlite3 *dst = NULL;
    if (sqlite3_open_v2(file, &dst, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        store_admin_set_err(err, "%s", dst ? sqlite3_errmsg(dst) : "out of memory");
        sqlite3_close(dst);
        return -1;
    }
    sqlite3_backup *b = sqlite3_backup_init(dst, "main", l->db, "main");
    int rc = SQLITE_ERROR;
    if (b) {
        /* One step, so one read transaction: a copy made in steps starts
         * over whenever another process writes between two of them, and
         * under a busy mcpd it never finished. In WAL mode the read holds
         * up no writer; mcpd's checkpoints wait for it (wal.h). */
        while ((rc = sqlite3_backup_step(b, -1)) == SQLITE_BUSY || rc == SQLITE_LOCKED)
            sqlite3_sleep(5);
        sqlite3_backup_finish(b);
    }
    if (rc != SQLITE_DONE)
        store_admin_set_err(err, "%s", sqlite3_errmsg(dst));
    sqlite3_close(dst);
    return rc == SQLITE_DONE ? 0 : -1;
}

static json_t *lite_integrity(void *ctx, char **err)
{
    struct lite *l = ctx;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(l->db, "PRAGMA integrity_check", -1, &q, NULL) != SQLITE_OK) {
        store_admin_set_err(err, "query failed: %s", sqlite3_errmsg(l->db));
        return NULL;
    }
    json_t *problems = json_array();
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *line = (const char *)sqlite3_column_text(q, 0);
        if (line && strcmp(line, "ok") != 0)
            json_array_append_new(problems,
                                  store_admin_text(line, (size_t)sqlite3_column_bytes(q, 0)));
    }
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) {
        store_admin_set_err(err, "query failed: %s", sqlite3_errmsg(l->db));
        json_decref(problems);
        return NULL;
    }
    return problems;
}

static json_t *lite_wal_bytes(void *ctx)
{
    struct lite *l = ctx;
    char *wal = NULL;
    struct stat sb;
    json_int_t n =
        asprintf(&wal, "%s-wal", l->path) >= 0 && stat(wal, &sb) == 0 ? (json_int_t)sb.st_size : 0;
    free(wal);
    return json_integer(n);
}

int store_admin_sqlite_create(const char *file, int version, sqlite3 **out, char **err)
{
    *out = NULL;
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(file, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        store_admin_set_err(err, "%s", db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return -1;
    }
    /* As store.c migrates: in order, each up to `version`, and the version
     * recorded; in one transaction, since the file is new. */
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA user_version=%d", version);
    if (lite_exec(db, "BEGIN", err) != 0)
        goto fail;
    for (int i = 0; i < store_migrations_count; i++)
        if (store_migrations[i].version <= version &&
            lite_exec(db, store_migrations[i].sql, err) != 0)
            goto fail;
    if (lite_exec(db, pragma, err) != 0 || lite_exec(db, "COMMIT", err) != 0)
        goto fail;
    *out = db;
    return 0;
fail:
    sqlite3_close(db);
    return -1;
}

const struct store_admin_driver store_admin_sqlite = {
    .open = lite_open,
    .close = lite_close,
    .name = lite_name,
    .schema_version = lite_schema_version,
    .begin = lite_begin,
    .end = lite_end,
    .rows = lite_rows,
    .write = lite_write,
    .vacuum = lite_vacuum,
    .backup = lite_backup,
    .integrity = lite_integrity,
    .wal_bytes = lite_wal_bytes,
};
