/* store_admin — see store_admin.h. */
#include "store_admin.h"
#include "clock.h"
#include "store_migrations.h"
#include "utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct store_admin {
    sqlite3 *db;
    int writable;
};

static void set_err(char **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(err, fmt, ap) < 0)
        *err = NULL;
    va_end(ap);
}

static int latest_version(void)
{
    int v = 0;
    for (int i = 0; i < store_migrations_count; i++)
        if (store_migrations[i].version > v)
            v = store_migrations[i].version;
    return v;
}

static int user_version(sqlite3 *db, int *out)
{
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL) != SQLITE_OK)
        return -1;
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    return rc == SQLITE_ROW ? 0 : -1;
}

int store_admin_open(const char *path, enum store_admin_mode mode, struct store_admin **out,
                     char **err)
{
    *out = NULL;
    *err = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        set_err(err, "no database at %s: %s", path, strerror(errno));
        return -1;
    }
    struct store_admin *a = calloc(1, sizeof *a);
    if (!a) {
        set_err(err, "out of memory");
        return -1;
    }
    a->writable = mode == STORE_ADMIN_WRITE;
    int flags = (a->writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY) | SQLITE_OPEN_NOMUTEX;
    int version = 0;
    if (sqlite3_open_v2(path, &a->db, flags, NULL) != SQLITE_OK) {
        set_err(err, "cannot open %s: %s", path, a->db ? sqlite3_errmsg(a->db) : "out of memory");
        goto fail;
    }
    /* mcpd holds the write lock only for one short commit at a time. */
    sqlite3_busy_timeout(a->db, 2000);
    /* mcpd's checkpoints keep clear of its commits' log restarts (see
     * wal.h); one run from here after a write could not. */
    if (a->writable &&
        sqlite3_exec(a->db, "PRAGMA wal_autocheckpoint=0", NULL, NULL, NULL) != SQLITE_OK) {
        set_err(err, "cannot open %s: %s", path, sqlite3_errmsg(a->db));
        goto fail;
    }
    if (user_version(a->db, &version) != 0) {
        set_err(err, "%s is not an mcpd database: %s", path, sqlite3_errmsg(a->db));
        goto fail;
    }
    if (version == 0) {
        set_err(err, "%s has no mcpd schema (start mcpd on it once)", path);
        goto fail;
    }
    if (version > latest_version()) {
        set_err(err, "%s has schema version %d; this mcp-admin knows up to %d (upgrade it)", path,
                version, latest_version());
        goto fail;
    }
    if (version < latest_version() && a->writable) {
        set_err(err,
                "%s has schema version %d, older than this mcp-admin's %d: start the new mcpd "
                "on it first (it migrates at start)",
                path, version, latest_version());
        goto fail;
    }
    *out = a;
    return 0;
fail:
    sqlite3_close(a->db);
    free(a);
    return -1;
}

void store_admin_close(struct store_admin *a)
{
    if (!a)
        return;
    sqlite3_close(a->db);
    free(a);
}

/* ---- queries ---- */

static sqlite3_stmt *prepare(struct store_admin *a, const char *sql, char **err)
{
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(a->db, sql, -1, &q, NULL) != SQLITE_OK) {
        set_err(err, "query failed: %s", sqlite3_errmsg(a->db));
        return NULL;
    }
    return q;
}

/* Text as jansson holds it. SQLite hands back the bytes that were stored,
 * and a client can have stored some that are not UTF-8 (a header value cut
 * mid-character); jansson refuses those, which would drop the column. Each
 * byte that is not part of a valid sequence becomes U+FFFD. */
static json_t *text_value(const unsigned char *s, size_t n)
{
    if (!s || !n)
        return json_string("");
    json_t *v = json_stringn((const char *)s, n);
    if (v || n > SIZE_MAX / 3)
        return v;
    char *fixed = malloc(3 * n), *o = fixed;
    if (!fixed)
        return NULL;
    for (size_t i = 0; i < n;) {
        size_t len = s[i] >= 0x80 ? utf8_seq_len(s + i, n - i) : 1;
        if (len) {
            memcpy(o, s + i, len);
            o += len;
            i += len;
        } else {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    v = json_stringn(fixed, (size_t)(o - fixed));
    free(fixed);
    return v;
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
        return text_value(sqlite3_column_text(q, i), (size_t)sqlite3_column_bytes(q, i));
    }
}

/* Every row as an object keyed by column name; finalizes q. */
static json_t *rows(struct store_admin *a, sqlite3_stmt *q, char **err)
{
    json_t *out = json_array();
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        json_t *row = json_object();
        for (int i = 0; i < sqlite3_column_count(q); i++)
            json_object_set_new(row, sqlite3_column_name(q, i), column(q, i));
        json_array_append_new(out, row);
    }
    if (rc != SQLITE_DONE) {
        set_err(err, "query failed: %s", sqlite3_errmsg(a->db));
        json_decref(out);
        out = NULL;
    }
    sqlite3_finalize(q);
    return out;
}

#define SESSION_COLUMNS                                                                            \
    "s.id, s.principal, json_extract(s.init_params, '$.clientInfo.name') AS client_name, "         \
    "json_extract(s.init_params, '$.clientInfo.version') AS client_version, "                      \
    "s.protocol_version AS protocol, s.transport, s.created_ms, s.last_active_ms, "                \
    "s.deleted_ms AS ended_ms, s.kill_reason, "                                                    \
    "(SELECT COUNT(*) FROM streams t WHERE t.session_id = s.id AND t.state = 'active') AS "        \
    "open_streams, "                                                                               \
    "(SELECT COALESCE(SUM(LENGTH(CAST(c.message AS BLOB))), 0) FROM chunks c JOIN streams t ON "   \
    "t.id = c.stream_id WHERE t.session_id = s.id) AS stored_bytes "

json_t *store_admin_sessions(struct store_admin *a, const struct store_admin_sessions_filter *f,
                             char **err)
{
    sqlite3_stmt *q = prepare(
        a,
        "SELECT " SESSION_COLUMNS "FROM sessions s WHERE "
        "(?1 = 2 OR (?1 = 0 AND s.deleted_ms IS NULL) OR (?1 = 1 AND s.deleted_ms IS NOT NULL)) "
        "AND (?2 IS NULL OR s.principal = ?2) AND s.last_active_ms >= ?3 "
        "ORDER BY s.last_active_ms DESC LIMIT ?4",
        err);
    if (!q)
        return NULL;
    sqlite3_bind_int(q, 1, (int)f->which);
    if (f->principal)
        sqlite3_bind_text(q, 2, f->principal, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, f->active_since_ms);
    sqlite3_bind_int64(q, 4, f->limit > 0 ? f->limit : -1);
    return rows(a, q, err);
}

json_t *store_admin_streams(struct store_admin *a, const char *session_id, char **err)
{
    sqlite3_stmt *q = prepare(a,
                              "SELECT t.id, t.kind, t.state, t.request_id, t.created_ms, "
                              "t.ended_ms, COUNT(c.seq) AS chunks, "
                              "COALESCE(SUM(LENGTH(CAST(c.message AS BLOB))), 0) AS bytes "
                              "FROM streams t LEFT JOIN chunks c ON c.stream_id = t.id "
                              "WHERE t.session_id = ?1 GROUP BY t.id ORDER BY t.created_ms, t.id",
                              err);
    if (!q)
        return NULL;
    sqlite3_bind_text(q, 1, session_id, -1, SQLITE_STATIC);
    return rows(a, q, err);
}

json_t *store_admin_session(struct store_admin *a, const char *id, int last_messages, char **err)
{
    sqlite3_stmt *q = prepare(a,
                              "SELECT " SESSION_COLUMNS ", s.init_params, s.log_level, "
                              "s.initialized FROM sessions s WHERE s.id = ?1",
                              err);
    if (!q)
        return NULL;
    sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
    json_t *found = rows(a, q, err);
    if (!found)
        return NULL;
    json_t *s = json_incref(json_array_get(found, 0));
    json_decref(found);
    if (!s)
        return json_null();
    /* The params as JSON, and the capabilities out of them. */
    json_t *params = json_loads(json_string_value(json_object_get(s, "init_params")), 0, NULL);
    json_object_set_new(s, "init_params", params ? params : json_null());
    json_object_set(s, "capabilities", json_object_get(params, "capabilities"));
    json_t *streams = store_admin_streams(a, id, err);
    if (!streams) {
        json_decref(s);
        return NULL;
    }
    json_object_set_new(s, "streams", streams);
    q = prepare(a,
                "SELECT * FROM (SELECT c.stream_id, c.seq, c.created_ms, c.message FROM chunks c "
                "JOIN streams t ON t.id = c.stream_id WHERE t.session_id = ?1 "
                "ORDER BY c.created_ms DESC, c.seq DESC LIMIT ?2) ORDER BY created_ms, seq",
                err);
    json_t *last = q ? (sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC),
                        sqlite3_bind_int(q, 2, last_messages), rows(a, q, err))
                     : NULL;
    if (!last) {
        json_decref(s);
        return NULL;
    }
    json_object_set_new(s, "last_messages", last);
    return s;
}

json_t *store_admin_chunks(struct store_admin *a, const char *stream_id, int64_t from_seq,
                           int64_t limit, char **err)
{
    sqlite3_stmt *q = prepare(a,
                              "SELECT seq, is_end, created_ms, message FROM chunks "
                              "WHERE stream_id = ?1 AND seq >= ?2 ORDER BY seq LIMIT ?3",
                              err);
    if (!q)
        return NULL;
    sqlite3_bind_text(q, 1, stream_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, from_seq);
    sqlite3_bind_int64(q, 3, limit > 0 ? limit : -1);
    return rows(a, q, err);
}

json_t *store_admin_logs(struct store_admin *a, const struct store_admin_logs_filter *f, char **err)
{
    sqlite3_stmt *q = prepare(
        a,
        "SELECT * FROM (SELECT l.id, l.ts_ms, l.level, l.session_id, s.principal, l.event "
        "FROM logs l LEFT JOIN sessions s ON s.id = l.session_id "
        "WHERE l.id > ?1 AND l.ts_ms >= ?2 AND (CASE l.level WHEN 'debug' THEN 0 WHEN 'info' "
        "THEN 1 WHEN 'warn' THEN 2 ELSE 3 END) >= ?3 AND (?4 IS NULL OR l.session_id = ?4) "
        "AND (?5 IS NULL OR s.principal = ?5) AND (?6 IS NULL OR instr(l.event, ?6) > 0) "
        "ORDER BY l.id DESC LIMIT ?7) ORDER BY id",
        err);
    if (!q)
        return NULL;
    sqlite3_bind_int64(q, 1, f->after_id);
    sqlite3_bind_int64(q, 2, f->since_ms);
    sqlite3_bind_int(q, 3, f->min_level);
    if (f->session)
        sqlite3_bind_text(q, 4, f->session, -1, SQLITE_STATIC);
    if (f->principal)
        sqlite3_bind_text(q, 5, f->principal, -1, SQLITE_STATIC);
    if (f->grep)
        sqlite3_bind_text(q, 6, f->grep, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 7, f->limit > 0 ? f->limit : -1);
    return rows(a, q, err);
}

static int64_t one_int(struct store_admin *a, const char *sql, int64_t bind, char **err)
{
    sqlite3_stmt *q = prepare(a, sql, err);
    if (!q)
        return -1;
    if (sqlite3_bind_parameter_count(q) > 0)
        sqlite3_bind_int64(q, 1, bind);
    int64_t v = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
    sqlite3_finalize(q);
    return v;
}

json_t *store_admin_stats(struct store_admin *a, const char *path, char **err)
{
    int64_t now = clock_wall_ms();
    json_t *s = json_object();
    static const struct {
        const char *key, *sql;
    } counts[] = {
        {"sessions", "SELECT COUNT(*) FROM sessions"},
        {"sessions_live", "SELECT COUNT(*) FROM sessions WHERE deleted_ms IS NULL"},
        {"streams", "SELECT COUNT(*) FROM streams"},
        {"streams_open", "SELECT COUNT(*) FROM streams WHERE state = 'active'"},
        {"chunks", "SELECT COUNT(*) FROM chunks"},
        {"stored_bytes", "SELECT COALESCE(SUM(LENGTH(CAST(message AS BLOB))), 0) FROM chunks"},
        {"log_rows", "SELECT COUNT(*) FROM logs"},
        {"tokens", "SELECT COUNT(*) FROM tokens WHERE revoked_ms IS NULL"},
        {"database_bytes", "SELECT page_count * page_size FROM pragma_page_count(), "
                           "pragma_page_size()"},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        int64_t v = one_int(a, counts[i].sql, 0, err);
        if (v < 0) {
            json_decref(s);
            return NULL;
        }
        json_object_set_new(s, counts[i].key, json_integer(v));
    }
    char *wal = NULL;
    struct stat sb;
    json_object_set_new(s, "wal_bytes",
                        json_integer(asprintf(&wal, "%s-wal", path) >= 0 && stat(wal, &sb) == 0
                                         ? (json_int_t)sb.st_size
                                         : 0));
    free(wal);
    /* mcpd logs one "request" row per HTTP request. */
    sqlite3_stmt *q = prepare(a,
                              "SELECT (ts_ms - ?1) / 60000 AS minute, COUNT(*) AS requests "
                              "FROM logs WHERE ts_ms >= ?1 AND event LIKE 'request %' "
                              "GROUP BY minute ORDER BY minute",
                              err);
    json_t *per_minute = q ? (sqlite3_bind_int64(q, 1, now - 3600000), rows(a, q, err)) : NULL;
    if (!per_minute) {
        json_decref(s);
        return NULL;
    }
    json_object_set_new(s, "requests_per_minute", per_minute);
    q = prepare(a,
                "SELECT substr(event, 1, instr(event || ' ', ' ') - 1) AS reason, COUNT(*) AS n "
                "FROM logs WHERE level IN ('warn', 'error') AND ts_ms >= ?1 GROUP BY reason "
                "ORDER BY n DESC",
                err);
    json_t *warnings = q ? (sqlite3_bind_int64(q, 1, now - 3600000), rows(a, q, err)) : NULL;
    if (!warnings) {
        json_decref(s);
        return NULL;
    }
    json_object_set_new(s, "warnings_last_hour", warnings);
    return s;
}

json_t *store_admin_tokens(struct store_admin *a, char **err)
{
    sqlite3_stmt *q = prepare(a,
                              "SELECT t.name, t.note, t.created_ms, t.expires_ms, t.revoked_ms, "
                              "t.last_used_ms, (SELECT COUNT(*) FROM sessions s WHERE "
                              "s.principal = t.name AND s.deleted_ms IS NULL) AS sessions "
                              "FROM tokens t ORDER BY t.created_ms, t.name",
                              err);
    return q ? rows(a, q, err) : NULL;
}

/* ---- writes ---- */

static int exec_write(struct store_admin *a, const char *what, sqlite3_stmt *q, char **err)
{
    if (!a->writable) {
        set_err(err, "%s: the database was opened read-only", what);
        sqlite3_finalize(q);
        return -1;
    }
    int rc = sqlite3_step(q);
    sqlite3_finalize(q);
    if (rc == SQLITE_CONSTRAINT)
        return 1;
    if (rc != SQLITE_DONE) {
        set_err(err, "%s failed: %s", what, sqlite3_errmsg(a->db));
        return -1;
    }
    return sqlite3_changes(a->db) > 0 ? 0 : 1;
}

/* A running mcpd's kill_watch finds sessions ended since it last looked by
 * this timestamp, so the time is read with the write lock held: read before
 * a busy wait, it could fall behind the watcher's window by the wait. */
static int exec_write_stamped(struct store_admin *a, const char *what, sqlite3_stmt *q,
                              int stamp_param, char **err)
{
    if (!a->writable)
        return exec_write(a, what, q, err); /* says the database is read-only */
    char *msg = NULL;
    if (sqlite3_exec(a->db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK) {
        set_err(err, "%s failed: %s", what, msg ? msg : sqlite3_errmsg(a->db));
        sqlite3_free(msg);
        sqlite3_finalize(q);
        return -1;
    }
    sqlite3_bind_int64(q, stamp_param, clock_wall_ms());
    int rc = exec_write(a, what, q, err);
    if (sqlite3_exec(a->db, rc < 0 ? "ROLLBACK" : "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
        if (rc >= 0)
            set_err(err, "%s failed: %s", what, msg ? msg : sqlite3_errmsg(a->db));
        sqlite3_free(msg);
        return -1;
    }
    return rc;
}

int store_admin_token_add(struct store_admin *a, const char *name, const char *hash,
                          const char *note, int64_t expires_ms, char **err)
{
    sqlite3_stmt *q = prepare(a,
                              "INSERT INTO tokens(name, hash, note, created_ms, expires_ms) "
                              "VALUES(?1, ?2, ?3, ?4, ?5)",
                              err);
    if (!q)
        return -1;
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, hash, -1, SQLITE_STATIC);
    if (note)
        sqlite3_bind_text(q, 3, note, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 4, clock_wall_ms());
    if (expires_ms > 0)
        sqlite3_bind_int64(q, 5, expires_ms);
    return exec_write(a, "adding the token", q, err);
}

int store_admin_token_revoke(struct store_admin *a, const char *name, char **err)
{
    sqlite3_stmt *q =
        prepare(a, "UPDATE tokens SET revoked_ms = ?2 WHERE name = ?1 AND revoked_ms IS NULL", err);
    if (!q)
        return -1;
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    return exec_write_stamped(a, "revoking the token", q, 2, err);
}

int store_admin_session_kill(struct store_admin *a, const char *id, const char *reason, char **err)
{
    sqlite3_stmt *q = prepare(a,
                              "UPDATE sessions SET deleted_ms = ?2, kill_reason = ?3 "
                              "WHERE id = ?1 AND deleted_ms IS NULL",
                              err);
    if (!q)
        return -1;
    sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, reason && *reason ? reason : "killed by mcp-admin", -1, SQLITE_STATIC);
    return exec_write_stamped(a, "killing the session", q, 2, err);
}

int store_admin_vacuum(struct store_admin *a, char **err)
{
    char *msg = NULL;
    if (!a->writable || sqlite3_exec(a->db, "VACUUM", NULL, NULL, &msg) != SQLITE_OK) {
        set_err(err, "vacuum failed: %s", msg ? msg : "the database was opened read-only");
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

int store_admin_backup(struct store_admin *a, const char *file, char **err)
{
    /* The copy holds what the database holds (token hashes, the server's
     * secrets, every conversation): created here, exclusively and 0600
     * whatever the umask, before SQLite opens it; its journal takes the
     * file's mode. */
    int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == EEXIST)
            set_err(err, "%s exists: a backup never overwrites a file", file);
        else
            set_err(err, "cannot create %s: %s", file, strerror(errno));
        return -1;
    }
    close(fd);
    sqlite3 *dst = NULL;
    if (sqlite3_open_v2(file, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        set_err(err, "cannot create %s: %s", file, dst ? sqlite3_errmsg(dst) : "out of memory");
        sqlite3_close(dst);
        remove(file);
        return -1;
    }
    sqlite3_backup *b = sqlite3_backup_init(dst, "main", a->db, "main");
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
    if (rc != SQLITE_DONE) {
        set_err(err, "backup to %s failed: %s", file, sqlite3_errmsg(dst));
        sqlite3_close(dst);
        remove(file);
        return -1;
    }
    sqlite3_close(dst);
    return 0;
}

json_t *store_admin_check(struct store_admin *a, char **err)
{
    sqlite3_stmt *q = prepare(a, "PRAGMA integrity_check", err);
    if (!q)
        return NULL;
    json_t *problems = rows(a, q, err);
    if (!problems)
        return NULL;
    int version = 0;
    user_version(a->db, &version);
    json_t *migrations = json_array();
    for (int i = 0; i < store_migrations_count; i++)
        json_array_append_new(migrations,
                              json_pack("{s:i, s:s, s:b}", "version", store_migrations[i].version,
                                        "name", store_migrations[i].name, "applied",
                                        store_migrations[i].version <= version));
    json_t *first = json_array_get(problems, 0);
    const char *verdict = json_string_value(json_object_get(first, "integrity_check"));
    json_t *out = json_pack("{s:s, s:o, s:i, s:i, s:o}", "integrity", verdict ? verdict : "?",
                            "problems", problems, "schema_version", version, "latest_version",
                            latest_version(), "migrations", migrations);
    return out;
}
