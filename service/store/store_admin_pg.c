/* store_admin_pg — mcp-admin's PostgreSQL driver (store_admin_driver.h),
 * through libpq: the SQL text of each query in PostgreSQL's dialect, one
 * connection per run of mcp-admin, and the operations with no common SQL.
 *
 * The connection string is libpq's own (a URL or key=value pairs);
 * connect_timeout defaults to 5 s, so an unreachable server is an error
 * within seconds, not a hang (the string may say otherwise). Reads run in
 * REPEATABLE READ READ ONLY transactions (one snapshot per command);
 * writes in short transactions that wait at most 1 s for a row lock that a
 * replica holds. Parameters are bound ($N), integers as int8 and text as
 * text; a NULL leaves its type to the statement. Results come back in
 * text form and become JSON by their column type, integers as integers,
 * so that the same rows read as the same JSON as from SQLite. Text is
 * ordered with COLLATE "C", as SQLite compares bytes.
 *
 * A backup is an SQLite file: the schema comes from the embedded SQLite
 * migrations at the database's version (store_admin_sqlite_create), and
 * every table of that schema is read from PostgreSQL, column by column of
 * the same names, in one REPEATABLE READ transaction, a row at a time
 * (libpq's single-row mode: memory stays flat however large the table). */
#include "store_admin_driver.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PostgreSQL's type OIDs (pg_type.dat; fixed since 7.x). */
enum { OID_BOOL = 16, OID_INT8 = 20, OID_INT2 = 21, OID_INT4 = 23, OID_TEXT = 25 };
enum { OID_FLOAT4 = 700, OID_FLOAT8 = 701, OID_NUMERIC = 1700 };

struct pg {
    PGconn *conn;
    char name[512];
};

#define SESSION_COLUMNS                                                                            \
    "s.id, s.principal, NULL AS client_name, NULL AS client_version, "                             \
    "s.protocol_version AS protocol, s.transport, s.created_ms, s.last_active_ms, "                \
    "s.deleted_ms AS ended_ms, s.kill_reason, "                                                    \
    "(SELECT COUNT(*) FROM streams t WHERE t.session_id = s.id AND t.state = 'active') AS "        \
    "open_streams, "                                                                               \
    "(SELECT COALESCE(SUM(octet_length(c.message)), 0)::bigint FROM chunks c JOIN streams t ON "   \
    "t.id = c.stream_id WHERE t.session_id = s.id) AS stored_bytes, s.init_params "

static const char *const sql[STORE_ADMIN_QUERIES] = {
    [SAQ_SESSIONS] =
        "SELECT " SESSION_COLUMNS "FROM sessions s WHERE "
        "($1 = 2 OR ($1 = 0 AND s.deleted_ms IS NULL) OR ($1 = 1 AND s.deleted_ms IS NOT NULL)) "
        "AND ($2::text IS NULL OR s.principal = $2) AND s.last_active_ms >= $3 "
        "ORDER BY s.last_active_ms DESC, s.id COLLATE \"C\" LIMIT NULLIF($4, -1)",
    [SAQ_SESSION] = "SELECT " SESSION_COLUMNS ", s.log_level, s.initialized "
                    "FROM sessions s WHERE s.id = $1",
    [SAQ_STREAMS] = "SELECT t.id, t.kind, t.state, t.request_id, t.created_ms, t.ended_ms, "
                    "COUNT(c.seq) AS chunks, "
                    "COALESCE(SUM(octet_length(c.message)), 0)::bigint AS bytes "
                    "FROM streams t LEFT JOIN chunks c ON c.stream_id = t.id "
                    "WHERE t.session_id = $1 GROUP BY t.id "
                    "ORDER BY t.created_ms, t.id COLLATE \"C\"",
    [SAQ_LAST_MESSAGES] =
        "SELECT * FROM (SELECT c.stream_id, c.seq, c.created_ms, c.message FROM chunks c "
        "JOIN streams t ON t.id = c.stream_id WHERE t.session_id = $1 "
        "ORDER BY c.created_ms DESC, c.stream_id COLLATE \"C\" DESC, c.seq DESC LIMIT $2) m "
        "ORDER BY created_ms, stream_id COLLATE \"C\", seq",
    [SAQ_CHUNKS] = "SELECT seq, is_end, created_ms, message FROM chunks "
                   "WHERE stream_id = $1 AND seq >= $2 ORDER BY seq LIMIT NULLIF($3, -1)",
    [SAQ_LOGS] =
        "SELECT * FROM (SELECT l.id, l.ts_ms, l.level, l.session_id, s.principal, l.event "
        "FROM logs l LEFT JOIN sessions s ON s.id = l.session_id "
        "WHERE l.id > $1 AND l.ts_ms >= $2 AND (CASE l.level WHEN 'debug' THEN 0 WHEN 'info' "
        "THEN 1 WHEN 'warn' THEN 2 ELSE 3 END) >= $3 AND ($4::text IS NULL OR l.session_id = $4) "
        "AND ($5::text IS NULL OR s.principal = $5) "
        "AND ($6::text IS NULL OR strpos(l.event, $6) > 0) "
        "ORDER BY l.id DESC LIMIT NULLIF($7, -1)) x ORDER BY id",
    [SAQ_COUNTS] =
        "SELECT (SELECT COUNT(*) FROM sessions) AS sessions, "
        "(SELECT COUNT(*) FROM sessions WHERE deleted_ms IS NULL) AS sessions_live, "
        "(SELECT COUNT(*) FROM streams) AS streams, "
        "(SELECT COUNT(*) FROM streams WHERE state = 'active') AS streams_open, "
        "(SELECT COUNT(*) FROM chunks) AS chunks, "
        "(SELECT COALESCE(SUM(octet_length(message)), 0)::bigint FROM chunks) AS stored_bytes, "
        "(SELECT COUNT(*) FROM logs) AS log_rows, "
        "(SELECT COUNT(*) FROM tokens WHERE revoked_ms IS NULL) AS tokens, "
        "pg_database_size(current_database()) AS database_bytes",
    /* ILIKE: SQLite's LIKE ignores the case of ASCII letters. */
    [SAQ_PER_MINUTE] = "SELECT (ts_ms - $1) / 60000 AS minute, COUNT(*) AS requests "
                       "FROM logs WHERE ts_ms >= $1 AND event ILIKE 'request %' "
                       "GROUP BY minute ORDER BY minute",
    [SAQ_WARNINGS] = "SELECT reason, n FROM (SELECT split_part(event, ' ', 1) AS reason, "
                     "COUNT(*) AS n FROM logs WHERE level IN ('warn', 'error') AND ts_ms >= $1 "
                     "GROUP BY 1) w ORDER BY n DESC, reason COLLATE \"C\"",
    [SAQ_TOKENS] = "SELECT t.name, t.note, t.created_ms, t.expires_ms, t.revoked_ms, "
                   "t.last_used_ms, (SELECT COUNT(*) FROM sessions s WHERE "
                   "s.principal = t.name AND s.deleted_ms IS NULL) AS sessions "
                   "FROM tokens t ORDER BY t.created_ms, t.name COLLATE \"C\"",
    [SAQ_SANITY] =
        "SELECT (SELECT COUNT(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM streams t "
        "WHERE t.id = c.stream_id)) AS chunks_without_stream, "
        "(SELECT COUNT(*) FROM streams t WHERE NOT EXISTS (SELECT 1 FROM sessions s "
        "WHERE s.id = t.session_id)) AS streams_without_session",
    [SAQ_TOKEN_ADD] = "INSERT INTO tokens(name, hash, note, created_ms, expires_ms) "
                      "VALUES($1, $2, $3, $4, $5)",
    [SAQ_TOKEN_REVOKE] = "UPDATE tokens SET revoked_ms = $2 WHERE name = $1 AND revoked_ms IS NULL",
    [SAQ_SESSION_KILL] = "UPDATE sessions SET deleted_ms = $2, kill_reason = $3 "
                         "WHERE id = $1 AND deleted_ms IS NULL",
};

/* libpq's messages span lines ("...failed: Connection refused\n\tIs the
 * server running..."): one line, as mcp-admin's errors are. */
static void set_pg_err(char **err, const char *prefix, const char *msg)
{
    msg = msg ? msg : "?";
    char *line = malloc(2 * strlen(msg) + 1), *o = line;
    if (!line) {
        *err = NULL;
        return;
    }
    int broke = 0;
    for (const char *p = msg; *p; p++) {
        if (*p == '\n' || *p == '\r') {
            broke = 1;
        } else if (*p == '\t' && (broke || o == line)) {
            continue;
        } else {
            if (broke && o > line) {
                *o++ = ';';
                *o++ = ' ';
            }
            broke = 0;
            *o++ = *p == '\t' ? ' ' : *p;
        }
    }
    *o = '\0';
    store_admin_set_err(err, "%s%s", prefix, line);
    free(line);
}

/* The message of a failed result: its primary text, else the connection's. */
static void set_res_err(char **err, struct pg *p, PGresult *r)
{
    const char *primary = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    set_pg_err(err, "", primary ? primary : PQerrorMessage(p->conn));
}

static int command(struct pg *p, const char *text, char **err)
{
    PGresult *r = PQexec(p->conn, text);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok)
        set_res_err(err, p, r);
    PQclear(r);
    return ok ? 0 : -1;
}

/* The server's notices would reach the terminal raw and unasked (libpq
 * prints them to stderr): a failure is reported where it happens instead. */
static void drop_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

static int pg_open(const char *target, int writable, void **ctx, char **err)
{
    struct pg *p = calloc(1, sizeof *p);
    if (!p) {
        store_admin_set_err(err, "out of memory");
        return -1;
    }
    /* Before dbname, whose expansion (the connection string) may set them
     * otherwise. */
    const char *const keys[] = {"connect_timeout", "application_name", "dbname", NULL};
    const char *const values[] = {"5", "mcp-admin", target, NULL};
    p->conn = PQconnectdbParams(keys, values, 1);
    if (!p->conn || PQstatus(p->conn) != CONNECTION_OK) {
        set_pg_err(err, "cannot connect to PostgreSQL: ",
                   p->conn ? PQerrorMessage(p->conn) : "out of memory");
        goto fail;
    }
    /* The name without the password that the URL may hold. */
    const char *host = PQhost(p->conn);
    if (host && host[0] == '/')
        snprintf(p->name, sizeof p->name, "PostgreSQL database %s (socket in %s)", PQdb(p->conn),
                 host);
    else
        snprintf(p->name, sizeof p->name, "PostgreSQL database %s at %s:%s", PQdb(p->conn),
                 host ? host : "?", PQport(p->conn));
    PQsetNoticeProcessor(p->conn, drop_notice, NULL);
    if (PQsetClientEncoding(p->conn, "UTF8") != 0) {
        set_pg_err(err, "cannot open the database: ", PQerrorMessage(p->conn));
        goto fail;
    }
    /* A standby takes reads only. A write waits at most 1 s for a row a
     * replica holds locked: its timestamp, read before the wait, must stay
     * within the look-back of mcpd's kill_watch (2 s). */
    char *why = NULL;
    if (writable) {
        PGresult *r = PQexec(p->conn, "SELECT pg_is_in_recovery()");
        int standby = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
                      PQgetvalue(r, 0, 0)[0] == 't';
        PQclear(r);
        if (standby) {
            store_admin_set_err(err, "%s is a read-only standby: connect to the primary", p->name);
            goto fail;
        }
        if (command(p, "SET lock_timeout = '1s'", &why) != 0) {
            store_admin_set_err(err, "cannot open %s: %s", p->name, why ? why : "?");
            free(why);
            goto fail;
        }
    }
    *ctx = p;
    return 0;
fail:
    PQfinish(p->conn);
    free(p);
    return -1;
}

static void pg_close(void *ctx)
{
    struct pg *p = ctx;
    PQfinish(p->conn);
    free(p);
}

static const char *pg_name(void *ctx)
{
    return ((struct pg *)ctx)->name;
}

static int pg_schema_version(void *ctx, int *version, char **err)
{
    struct pg *p = ctx;
    /* mcpd_schema holds the version (the highest row, should it keep one
     * per migration); a database without it has no mcpd schema. Two
     * statements: one naming a missing table fails whole. */
    PGresult *r = PQexec(p->conn, "SELECT to_regclass('mcpd_schema') IS NOT NULL");
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    int exists = ok && PQgetvalue(r, 0, 0)[0] == 't';
    *version = 0;
    if (exists) {
        PQclear(r);
        r = PQexec(p->conn, "SELECT COALESCE(MAX(version), 0) FROM mcpd_schema");
        ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
        if (ok)
            *version = atoi(PQgetvalue(r, 0, 0));
    }
    if (!ok)
        set_res_err(err, p, r);
    PQclear(r);
    return ok ? 0 : -1;
}

static int pg_begin(void *ctx, int write, char **err)
{
    return command(ctx, write ? "BEGIN" : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", err);
}

static int pg_end(void *ctx, int commit, char **err)
{
    return command(ctx, commit ? "COMMIT" : "ROLLBACK", err);
}

#define MAX_PARAMS 8

static PGresult *run(struct pg *p, enum store_admin_query q, const struct store_admin_param *pr,
                     int n, char **err)
{
    if (n > MAX_PARAMS) {
        store_admin_set_err(err, "query failed: too many parameters");
        return NULL;
    }
    char ints[MAX_PARAMS][24];
    const char *values[MAX_PARAMS];
    unsigned int types[MAX_PARAMS];
    for (int i = 0; i < n && i < MAX_PARAMS; i++) {
        if (pr[i].kind == SAP_INT) {
            snprintf(ints[i], sizeof ints[i], "%lld", (long long)pr[i].i);
            values[i] = ints[i];
            types[i] = OID_INT8;
        } else {
            values[i] = pr[i].s;
            types[i] = pr[i].s ? OID_TEXT : 0;
        }
    }
    return PQexecParams(p->conn, sql[q], n, types, values, NULL, NULL, 0);
}

static json_t *value(const PGresult *r, int row, int col)
{
    if (PQgetisnull(r, row, col))
        return json_null();
    const char *v = PQgetvalue(r, row, col);
    switch (PQftype(r, col)) {
    case OID_INT2:
    case OID_INT4:
    case OID_INT8:
        return json_integer(strtoll(v, NULL, 10));
    case OID_FLOAT4:
    case OID_FLOAT8:
        return json_real(strtod(v, NULL));
    case OID_NUMERIC:
        return strchr(v, '.') ? json_real(strtod(v, NULL)) : json_integer(strtoll(v, NULL, 10));
    case OID_BOOL:
        return json_boolean(v[0] == 't');
    default:
        return store_admin_text(v, (size_t)PQgetlength(r, row, col));
    }
}

static json_t *pg_rows(void *ctx, enum store_admin_query q, const struct store_admin_param *pr,
                       int n, char **err)
{
    struct pg *p = ctx;
    PGresult *r = run(p, q, pr, n, err);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        char *why = NULL;
        set_res_err(&why, p, r);
        store_admin_set_err(err, "query failed: %s", why ? why : "?");
        free(why);
        PQclear(r);
        return NULL;
    }
    json_t *out = json_array();
    for (int i = 0; i < PQntuples(r); i++) {
        json_t *row = json_object();
        for (int c = 0; c < PQnfields(r); c++)
            json_object_set_new(row, PQfname(r, c), value(r, i, c));
        json_array_append_new(out, row);
    }
    PQclear(r);
    return out;
}

static int pg_write(void *ctx, enum store_admin_query q, const struct store_admin_param *pr, int n,
                    char **err)
{
    struct pg *p = ctx;
    PGresult *r = run(p, q, pr, n, err);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        /* Class 23, integrity constraint violation: as SQLITE_CONSTRAINT. */
        const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
        int constraint = state && strncmp(state, "23", 2) == 0;
        if (!constraint)
            set_res_err(err, p, r);
        PQclear(r);
        return constraint ? 1 : -1;
    }
    int changed = atoi(PQcmdTuples(r)) > 0;
    PQclear(r);
    return changed ? 0 : 1;
}

/* The names of the tables of an SQLite database of mcpd's schema, in
 * order; calls cb for each (stops at its first nonzero). */
static int each_table(sqlite3 *db, int (*cb)(void *arg, const char *table), void *arg, char **err)
{
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT "
                           "LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
                           -1, &q, NULL) != SQLITE_OK) {
        store_admin_set_err(err, "%s", sqlite3_errmsg(db));
        return -1;
    }
    int rc = 0;
    while (rc == 0 && sqlite3_step(q) == SQLITE_ROW)
        rc = cb(arg, (const char *)sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    return rc;
}

struct vacuum_list {
    struct pg *p;
    char *text;
};

static int add_to_vacuum(void *arg, const char *table)
{
    struct vacuum_list *v = arg;
    char *id = PQescapeIdentifier(v->p->conn, table, strlen(table)), *more = NULL;
    int rc = id && asprintf(&more, "%s, %s", v->text, id) >= 0 ? 0 : -1;
    PQfreemem(id);
    if (rc == 0) {
        free(v->text);
        v->text = more;
    }
    return rc;
}

static int pg_vacuum(void *ctx, int version, char **err)
{
    /* mcpd's tables are those of its schema at this version (as SQLite's
     * migrations make it), and the version's own table. VACUUM runs
     * outside a transaction, as one statement. */
    struct pg *p = ctx;
    sqlite3 *schema = NULL;
    if (store_admin_sqlite_create(":memory:", version, &schema, err) != 0)
        return -1;
    struct vacuum_list v = {p, strdup("VACUUM (ANALYZE) mcpd_schema")};
    int rc = v.text ? each_table(schema, add_to_vacuum, &v, err) : -1;
    sqlite3_close(schema);
    if (rc != 0 && !*err)
        store_admin_set_err(err, "out of memory");
    if (rc == 0)
        rc = command(p, v.text, err);
    free(v.text);
    return rc;
}

struct copy {
    struct pg *p;
    sqlite3 *dst;
    char **err;
};

/* One table: SELECT its columns (the SQLite table's, by name) from
 * PostgreSQL a row at a time, INSERT each into the copy. The names are
 * quoted the standard way ("%w"), which both engines read. */
static int copy_table(void *arg, const char *table)
{
    struct copy *c = arg;
    sqlite3_str *list = sqlite3_str_new(c->dst), *marks = sqlite3_str_new(c->dst);
    sqlite3_stmt *cols = NULL, *ins = NULL;
    int ncols = 0, rc = -1;
    if (sqlite3_prepare_v2(c->dst, "SELECT name FROM pragma_table_info(?1) ORDER BY cid", -1, &cols,
                           NULL) != SQLITE_OK)
        goto done;
    sqlite3_bind_text(cols, 1, table, -1, SQLITE_STATIC);
    for (; sqlite3_step(cols) == SQLITE_ROW; ncols++) {
        sqlite3_str_appendf(list, "%s\"%w\"", ncols ? ", " : "", sqlite3_column_text(cols, 0));
        sqlite3_str_appendf(marks, "%s?", ncols ? ", " : "");
    }
    char *names = sqlite3_str_finish(list), *qs = sqlite3_str_finish(marks);
    list = marks = NULL;
    char *select = sqlite3_mprintf("SELECT %s FROM \"%w\"", names, table);
    char *insert = sqlite3_mprintf("INSERT INTO \"%w\" (%s) VALUES (%s)", table, names, qs);
    int ready = names && qs && select && insert &&
                sqlite3_prepare_v2(c->dst, insert, -1, &ins, NULL) == SQLITE_OK;
    int sent = ready && PQsendQuery(c->p->conn, select) && PQsetSingleRowMode(c->p->conn);
    sqlite3_free(names);
    sqlite3_free(qs);
    sqlite3_free(select);
    sqlite3_free(insert);
    if (!ready)
        goto done;
    if (!sent) {
        set_pg_err(c->err, "", PQerrorMessage(c->p->conn));
        goto done;
    }
    PGresult *r;
    int failed = 0;
    /* Every result is read, failed or not, so the connection is free
     * again for the next statement. */
    while ((r = PQgetResult(c->p->conn))) {
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_SINGLE_TUPLE && !failed) {
            for (int i = 0; i < ncols && i < PQnfields(r); i++) {
                const char *v = PQgetvalue(r, 0, i);
                Oid type = PQftype(r, i);
                if (PQgetisnull(r, 0, i))
                    sqlite3_bind_null(ins, i + 1);
                else if (type == OID_INT2 || type == OID_INT4 || type == OID_INT8)
                    sqlite3_bind_int64(ins, i + 1, strtoll(v, NULL, 10));
                else
                    sqlite3_bind_text(ins, i + 1, v, PQgetlength(r, 0, i), SQLITE_TRANSIENT);
            }
            if (sqlite3_step(ins) != SQLITE_DONE) {
                store_admin_set_err(c->err, "%s: %s", table, sqlite3_errmsg(c->dst));
                failed = 1;
            }
            sqlite3_reset(ins);
        } else if (st != PGRES_SINGLE_TUPLE && st != PGRES_TUPLES_OK && !failed) {
            char *why = NULL;
            set_res_err(&why, c->p, r);
            store_admin_set_err(c->err, "%s: %s", table, why ? why : "?");
            free(why);
            failed = 1;
        }
        PQclear(r);
    }
    rc = failed ? -1 : 0;
done:
    if (rc != 0 && !*c->err)
        store_admin_set_err(c->err, "%s: %s", table, sqlite3_errmsg(c->dst));
    sqlite3_free(sqlite3_str_finish(list));
    sqlite3_free(sqlite3_str_finish(marks));
    sqlite3_finalize(cols);
    sqlite3_finalize(ins);
    return rc;
}

static int pg_backup(void *ctx, const char *file, int version, char **err)
{
    struct pg *p = ctx;
    struct copy c = {p, NULL, err};
    if (store_admin_sqlite_create(file, version, &c.dst, err) != 0)
        return -1;
    /* One snapshot for every table: the copy is of one moment, as
     * SQLite's online backup is. */
    int rc = pg_begin(p, 0, err);
    if (rc == 0) {
        char *msg = NULL;
        rc = sqlite3_exec(c.dst, "BEGIN", NULL, NULL, &msg) == SQLITE_OK ? 0 : -1;
        if (rc == 0)
            rc = each_table(c.dst, copy_table, &c, err);
        if (rc == 0 && sqlite3_exec(c.dst, "COMMIT", NULL, NULL, &msg) != SQLITE_OK)
            rc = -1;
        if (rc != 0 && !*err)
            store_admin_set_err(err, "%s", msg ? msg : sqlite3_errmsg(c.dst));
        sqlite3_free(msg);
        char *ignored = NULL;
        pg_end(p, 0, &ignored);
        free(ignored);
    }
    if (sqlite3_close(c.dst) != SQLITE_OK && rc == 0) {
        store_admin_set_err(err, "closing the copy failed");
        rc = -1;
    }
    return rc;
}

static json_t *pg_integrity(void *ctx, char **err)
{
    /* SQLite's integrity_check has no counterpart here (PostgreSQL checks
     * its pages as it reads them); what can be left broken is an index a
     * failed CREATE INDEX CONCURRENTLY left invalid. */
    struct pg *p = ctx;
    PGresult *r =
        PQexec(p->conn, "SELECT 'index ' || i.indexrelid::regclass::text || ' is invalid' "
                        "FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
                        "WHERE c.relnamespace = current_schema()::regnamespace "
                        "AND NOT i.indisvalid ORDER BY 1");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        char *why = NULL;
        set_res_err(&why, p, r);
        store_admin_set_err(err, "query failed: %s", why ? why : "?");
        free(why);
        PQclear(r);
        return NULL;
    }
    json_t *problems = json_array();
    for (int i = 0; i < PQntuples(r); i++)
        json_array_append_new(problems, value(r, i, 0));
    PQclear(r);
    return problems;
}

static json_t *pg_wal_bytes(void *ctx)
{
    (void)ctx;
    return json_null();
}

const struct store_admin_driver store_admin_pg = {
    .open = pg_open,
    .close = pg_close,
    .name = pg_name,
    .schema_version = pg_schema_version,
    .begin = pg_begin,
    .end = pg_end,
    .rows = pg_rows,
    .write = pg_write,
    .vacuum = pg_vacuum,
    .backup = pg_backup,
    .integrity = pg_integrity,
    .wal_bytes = pg_wal_bytes,
};
