/* db_pg — the store's PostgreSQL driver (db.h), through libpq.
 *
 * Each connection prepares every statement once (PQprepare, named "s<k>"),
 * and after a reconnect (db_reset) each again when it is next used. Parameters go as text, which
 * PostgreSQL converts to each one's inferred type. db_batch sends BEGIN,
 * the calls and COMMIT in pipeline mode and reads their results after one
 * Sync: a transaction costs one round trip however many statements it
 * holds. Migrations run in one transaction under an advisory lock, so
 * replicas starting together apply them once; the version is kept in
 * mcpd_schema. A connection whose server went away is marked broken, and
 * every call on it returns DB_UNAVAILABLE at once until db_reset.
 *
 * A call waits for its answer at most the query timeout (MCPD_DB_TIMEOUT_MS,
 * default 10 s) of silence, and the server ends a statement that runs
 * longer itself (statement_timeout): a server that stops answering without
 * closing the connection (a frozen host or process, a partition that drops
 * packets after the kernel acknowledged them) would otherwise hold the
 * caller, and with it the store's writer or a reader, for as long as it
 * stays so. Past the timeout the connection counts as lost: the store turns
 * unavailable (503 at once) and its reconnector takes over, whose attempts
 * connect_timeout bounds. So the connections are in nonblocking mode and
 * each call sends, then polls the socket, not libpq's blocking calls (only
 * the migrations at start-up, which wait for another replica's, block). */
#include "db.h"
#include "clock.h"
#include "log.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* pg_type's oid of text (catalog/pg_type_d.h is not in libpq-dev). */
#define TEXT_OID 25

/* The advisory lock that serializes migrations across replicas. */
#define MIGRATION_LOCK "7163102501"

#define TIMEOUT_DEFAULT_MS 10000

struct db_pg {
    struct db base;
    PGconn *conn;
    const char *const *sql; /* borrowed: store_sql's table */
    int *nparams;
    unsigned char *ready; /* statement k is prepared on this connection */
    int nsql;
    int broken;     /* 0, 1 or DB_STALLED */
    int timeout_ms; /* for a call's answer */
};

static struct db_pg *pg(struct db *c)
{
    return (struct db_pg *)c;
}

/* The first line of libpq's message, for logs and errors. */
static const char *conn_err(PGconn *conn)
{
    const char *m = conn ? PQerrorMessage(conn) : "out of memory";
    return m && *m ? m : "unknown error";
}

/* Ours come first so that the user's connection string overrides them: a
 * connection attempt is bounded, and a server that vanished without
 * closing the socket is noticed by TCP within seconds, not hours. The
 * server ends a statement itself after the call's timeout
 * (statement_timeout): a call mcpd gave up on does not go on holding
 * locks and a backend on a server that is slow rather than gone. */
static PGconn *connect_to(const char *target, int timeout_ms)
{
    char options[64];
    snprintf(options, sizeof options, "-c statement_timeout=%d", timeout_ms);
    const char *const keys[] = {"connect_timeout",  "keepalives_idle",  "keepalives_interval",
                                "keepalives_count", "tcp_user_timeout", "options",
                                "application_name", "dbname",           NULL};
    const char *const vals[] = {"2", "5", "2", "3", "10000", options, "mcpd", target, NULL};
    return PQconnectdbParams(keys, vals, 1);
}

/* The server's notices (a shutdown's FATAL among them) would go to
 * stderr: failures are reported where they happen instead. */
static void drop_notice(void *arg, const char *message)
{
    (void)arg, (void)message;
}

/* MCPD_DB_TIMEOUT_MS: 100 ms to 10 minutes. */
static int timeout_from_env(int *ms, char **err)
{
    const char *v = getenv("MCPD_DB_TIMEOUT_MS");
    *ms = TIMEOUT_DEFAULT_MS;
    if (!v)
        return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < 100 || n > 600000) {
        *err = db_fmt_err("MCPD_DB_TIMEOUT_MS must be a whole number from 100 to 600000, got "
                          "'%.40s'",
                          v);
        return -1;
    }
    *ms = (int)n;
    return 0;
}

/* What every fresh connection gets: a reset makes a new one. */
static void set_up(struct db_pg *c)
{
    PQsetNoticeProcessor(c->conn, drop_notice, NULL);
    PQsetnonblocking(c->conn, 1);
}

static int pg_open(const char *target, struct db **out, char **err)
{
    struct db_pg *c = calloc(1, sizeof *c);
    if (!c) {
        *err = db_fmt_err("out of memory");
        return -1;
    }
    if (timeout_from_env(&c->timeout_ms, err) != 0) {
        free(c);
        return -1;
    }
    c->conn = connect_to(target, c->timeout_ms);
    if (!c->conn || PQstatus(c->conn) != CONNECTION_OK) {
        *err = db_fmt_err("cannot connect to PostgreSQL: %s", conn_err(c->conn));
        PQfinish(c->conn);
        free(c);
        return -1;
    }
    set_up(c);
    *out = &c->base;
    return 0;
}

static void pg_close(struct db *base)
{
    struct db_pg *c = pg(base);
    PQfinish(c->conn);
    free(c->nparams);
    free(c->ready);
    free(c);
}

/* Sends what libpq holds and waits until it has a whole result to hand
 * out (PQgetResult will not block), up to the monotonic *deadline, which
 * moves on by the timeout whenever bytes arrive (a large result is not a
 * silent server). -1 when the connection is lost or the server did not
 * answer in time: it is then broken. */
static int await(struct db_pg *c, int64_t *deadline)
{
    for (;;) {
        int unsent = PQflush(c->conn);
        if (unsent < 0)
            break;
        if (!unsent && !PQisBusy(c->conn))
            return 0;
        int64_t left = *deadline - clock_mono_ms();
        if (left <= 0) {
            log_local(LOG_WARN, NULL, "store_timeout",
                      "PostgreSQL did not answer within %d ms; the connection counts as lost",
                      c->timeout_ms);
            c->broken = DB_STALLED;
            return -1;
        }
        struct pollfd pfd = {.fd = PQsocket(c->conn), .events = POLLIN | (unsent ? POLLOUT : 0)};
        if (pfd.fd < 0)
            break;
        int n = poll(&pfd, 1, left > 1000 ? 1000 : (int)left);
        if ((n < 0 && errno != EINTR) || (n > 0 && (pfd.revents & POLLNVAL)))
            break;
        if (n > 0 && (pfd.revents & (POLLIN | POLLERR | POLLHUP))) {
            if (!PQconsumeInput(c->conn))
                break;
            *deadline = clock_mono_ms() + c->timeout_ms;
        }
    }
    c->broken = 1;
    return -1;
}

/* The call's next result (PQgetResult's), or NULL: none left, or the
 * connection is lost or timed out (then broken). */
static PGresult *result(struct db_pg *c, int64_t *deadline)
{
    return await(c, deadline) == 0 ? PQgetResult(c->conn) : NULL;
}

/* The first result of a call just sent (sent: what PQsend* returned);
 * whatever else it returned is read and dropped. */
static PGresult *first_result(struct db_pg *c, int sent)
{
    if (!sent)
        return NULL;
    int64_t deadline = clock_mono_ms() + c->timeout_ms;
    PGresult *res = result(c, &deadline);
    for (PGresult *more; res && (more = result(c, &deadline));)
        PQclear(more);
    return res;
}

/* A failed call's connection: lost when libpq says so or the server is
 * shutting down (SQLSTATE class 08, 57P). */
static int lost(struct db_pg *c, const PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    if (!c->broken && (PQstatus(c->conn) == CONNECTION_BAD ||
                       (state && (strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0))))
        c->broken = 1;
    return c->broken;
}

/* For the migrations, which block: one replica's wait for another's
 * (the advisory lock) has no bound worth setting. */
static int pg_exec_text(struct db *base, const char *sql, char **err)
{
    struct db_pg *c = pg(base);
    PGresult *res = PQexec(c->conn, sql);
    ExecStatusType s = PQresultStatus(res);
    int rc = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK ? 0 : -1;
    if (rc != 0) {
        *err = db_fmt_err("%s", res ? PQresultErrorMessage(res) : conn_err(c->conn));
        if (lost(c, res))
            rc = DB_UNAVAILABLE;
    }
    PQclear(res);
    return rc;
}

/* One integer a query returns, or -1. */
static long long query_int(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);
    long long v =
        PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)
            ? strtoll(PQgetvalue(res, 0, 0), NULL, 10)
            : -1;
    PQclear(res);
    return v;
}

static int pg_migrate(struct db *c, const struct store_migration *m, int count, int *version,
                      char **err)
{
    char *e = NULL;
    if (pg_exec_text(c, "BEGIN", &e) != 0 ||
        pg_exec_text(c, "SET LOCAL statement_timeout = 0", &e) != 0 ||
        pg_exec_text(c, "SELECT pg_advisory_xact_lock(" MIGRATION_LOCK ")", &e) != 0 ||
        pg_exec_text(c, "CREATE TABLE IF NOT EXISTS mcpd_schema (version INTEGER NOT NULL)", &e) !=
            0) {
        *err = db_fmt_err("cannot start the migrations: %s", e ? e : "?");
        goto fail;
    }
    long long v = query_int(pg(c)->conn, "SELECT COALESCE(MAX(version), 0) FROM mcpd_schema");
    if (v < 0) {
        *err = db_fmt_err("cannot read the schema version: %s", conn_err(pg(c)->conn));
        goto fail;
    }
    int latest = count > 0 ? m[count - 1].version : 0;
    if (v > latest) {
        *err = db_fmt_err("the database's schema is version %lld, newer than this mcpd knows (%d): "
                          "upgrade mcpd",
                          v, latest);
        goto fail;
    }
    for (int i = 0; i < count; i++) {
        if (m[i].version <= v)
            continue;
        char set[96];
        snprintf(set, sizeof set, "DELETE FROM mcpd_schema; INSERT INTO mcpd_schema VALUES(%d)",
                 m[i].version);
        if (pg_exec_text(c, m[i].sql, &e) != 0 || pg_exec_text(c, set, &e) != 0) {
            *err = db_fmt_err("migration %s failed: %s", m[i].name, e ? e : "?");
            goto fail;
        }
        v = m[i].version;
    }
    if (pg_exec_text(c, "COMMIT", &e) != 0) {
        *err = db_fmt_err("the migrations' commit failed: %s", e ? e : "?");
        goto fail;
    }
    *version = (int)v;
    return 0;
fail:
    free(e);
    PQclear(PQexec(pg(c)->conn, "ROLLBACK"));
    return -1;
}

/* How many parameters a statement takes (its highest $N); *unused gets a
 * bit for each $N (up to 32) that it never names. */
static int count_params(const char *sql, uint32_t *unused)
{
    int most = 0;
    uint32_t seen = 0;
    for (const char *p = sql; (p = strchr(p, '$')) != NULL; p++) {
        int v = atoi(p + 1);
        if (v > most)
            most = v;
        if (v >= 1 && v <= 32)
            seen |= 1u << (v - 1);
    }
    *unused = ~seen & (most >= 32 ? ~0u : (1u << most) - 1);
    return most;
}

/* The statements share one vector of parameters (store.c binds a stream
 * write's to each of its statements), so a statement may skip some:
 * PostgreSQL cannot infer their type, and is told they are text. */
static int prepare_one(struct db_pg *c, int k, char **err)
{
    if (k < 0 || k >= c->nsql || !c->sql[k])
        return -1;
    if (c->ready[k])
        return 0;
    char name[16];
    snprintf(name, sizeof name, "s%d", k);
    uint32_t unused;
    int n = count_params(c->sql[k], &unused);
    Oid types[32] = {0};
    for (int i = 0; i < n && i < 32; i++)
        types[i] = unused & (1u << i) ? TEXT_OID : 0;
    PGresult *res = first_result(c, PQsendPrepare(c->conn, name, c->sql[k], n, types));
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok && err)
        *err = db_fmt_err("prepare failed (%d): %s", k,
                          res ? PQresultErrorMessage(res) : conn_err(c->conn));
    else if (!ok && !lost(c, res))
        log_local(LOG_ERROR, NULL, "store_prepare_failed", "statement %d: %s", k,
                  res ? PQresultErrorMessage(res) : conn_err(c->conn));
    if (!ok)
        lost(c, res);
    PQclear(res);
    c->ready[k] = (unsigned char)ok;
    return ok ? 0 : -1;
}

static int pg_prepare(struct db *base, const char *const *sql, int n, char **err)
{
    struct db_pg *c = pg(base);
    c->sql = sql;
    c->nsql = n;
    if (!(c->nparams = calloc((size_t)n, sizeof *c->nparams)) ||
        !(c->ready = calloc((size_t)n, 1))) {
        *err = db_fmt_err("out of memory");
        return -1;
    }
    uint32_t unused;
    for (int k = 0; k < n; k++)
        c->nparams[k] = sql[k] ? count_params(sql[k], &unused) : 0;
    /* All at once here, so that a statement the server refuses stops
     * store_open; after a reconnect each is prepared again on first use. */
    for (int k = 0; k < n; k++)
        if (sql[k] && prepare_one(c, k, err) != 0)
            return -1;
    return 0;
}

static int pg_broken(struct db *c)
{
    return pg(c)->broken ? pg(c)->broken : PQstatus(pg(c)->conn) == CONNECTION_BAD;
}

static int pg_reset(struct db *base)
{
    struct db_pg *c = pg(base);
    PQreset(c->conn);
    if (PQstatus(c->conn) != CONNECTION_OK)
        return -1;
    set_up(c);
    c->broken = 0;
    if (c->ready)
        memset(c->ready, 0, (size_t)c->nsql);
    return 0;
}

/* Parameters as text: integers printed into buf. */
struct texts {
    const char *v[16];
    int len[16];
    char buf[16][24];
};

static int to_texts(struct db_pg *c, int k, const struct db_param *p, int n, struct texts *t)
{
    int want = k >= 0 && k < c->nsql ? c->nparams[k] : 0;
    for (int i = 0; i < want && i < 16; i++) {
        const struct db_param *q = i < n ? &p[i] : NULL;
        if (!q || q->type == DB_NULL) {
            t->v[i] = NULL;
            t->len[i] = 0;
        } else if (q->type == DB_INT) {
            t->len[i] = snprintf(t->buf[i], sizeof t->buf[i], "%lld", (long long)q->i);
            t->v[i] = t->buf[i];
        } else {
            t->v[i] = q->s;
            t->len[i] = (int)q->len;
        }
    }
    return want > 16 ? 16 : want;
}

/* A result's outcome as db_exec reports it. */
static int outcome(struct db_pg *c, PGresult *res, int k, int64_t *changes, int64_t *value)
{
    ExecStatusType s = PQresultStatus(res);
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) {
        if (changes)
            *changes = strtoll(PQcmdTuples(res), NULL, 10);
        if (value && PQntuples(res) > 0 && PQnfields(res) > 0 && !PQgetisnull(res, 0, 0))
            *value = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        return 0;
    }
    if (s == PGRES_PIPELINE_ABORTED)
        return -1;
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    if (state && strcmp(state, "23503") == 0)
        return DB_FOREIGN_KEY;
    if (lost(c, res))
        return DB_UNAVAILABLE;
    log_local(LOG_ERROR, NULL, "store_write_failed", "statement %d: %s", k,
              res ? PQresultErrorMessage(res) : conn_err(c->conn));
    return -1;
}

/* Runs prepared statement k with p as text; its result (NULL: out of
 * memory), which the caller clears. */
static PGresult *exec_prepared(struct db_pg *c, int k, const struct db_param *p, int n)
{
    if (prepare_one(c, k, NULL) != 0)
        return NULL;
    struct texts t;
    int np = to_texts(c, k, p, n, &t);
    char name[16];
    snprintf(name, sizeof name, "s%d", k);
    return first_result(c, PQsendQueryPrepared(c->conn, name, np, t.v, t.len, NULL, 0));
}

static int pg_exec(struct db *base, int k, const struct db_param *p, int n, int64_t *changes,
                   int64_t *value)
{
    struct db_pg *c = pg(base);
    if (c->broken)
        return DB_UNAVAILABLE;
    PGresult *res = exec_prepared(c, k, p, n);
    int rc = outcome(c, res, k, changes, value);
    PQclear(res);
    return rc;
}

static int pg_in_transaction(struct db *c)
{
    return PQtransactionStatus(pg(c)->conn) != PQTRANS_IDLE;
}

static int pg_query(struct db *base, int k, const struct db_param *p, int n, struct db_rows *r)
{
    struct db_pg *c = pg(base);
    if (c->broken)
        return DB_UNAVAILABLE;
    PGresult *res = exec_prepared(c, k, p, n);
    ExecStatusType s = PQresultStatus(res);
    if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK) {
        int rc = lost(c, res) ? DB_UNAVAILABLE : -1;
        if (rc == -1)
            log_local(LOG_ERROR, NULL, "store_read_failed", "statement %d: %s", k,
                      res ? PQresultErrorMessage(res) : conn_err(c->conn));
        PQclear(res);
        return rc;
    }
    r->h = res;
    r->nrows = PQntuples(res);
    r->row = -1;
    return 0;
}

static int pg_next(struct db_rows *r)
{
    return ++r->row < r->nrows ? 1 : 0;
}

static const char *pg_text(struct db_rows *r, int col)
{
    return PQgetisnull(r->h, r->row, col) ? NULL : PQgetvalue(r->h, r->row, col);
}

static size_t pg_bytes(struct db_rows *r, int col)
{
    return (size_t)PQgetlength(r->h, r->row, col);
}

static int64_t pg_int(struct db_rows *r, int col)
{
    return PQgetisnull(r->h, r->row, col) ? 0 : strtoll(PQgetvalue(r->h, r->row, col), NULL, 10);
}

static int pg_is_null(struct db_rows *r, int col)
{
    return PQgetisnull(r->h, r->row, col);
}

static void pg_rows_end(struct db_rows *r)
{
    PQclear(r->h);
    r->h = NULL;
}

static int send_text(PGconn *conn, const char *sql)
{
    return PQsendQueryParams(conn, sql, 0, NULL, NULL, NULL, NULL, 0);
}

/* The next result of the pipeline, and the NULL that ends it. NULL when
 * the connection is lost or timed out. */
static PGresult *next_result(struct db_pg *c, int64_t *deadline)
{
    PGresult *res = result(c, deadline);
    if (!res)
        return NULL;
    if (PQresultStatus(res) != PGRES_PIPELINE_SYNC)
        PQclear(result(c, deadline));
    return res;
}

static int pg_batch(struct db *base, struct db_call *calls, int n)
{
    struct db_pg *c = pg(base);
    if (c->broken)
        return DB_UNAVAILABLE;
    PGconn *conn = c->conn;
    for (int i = 0; i < n; i++)
        if (prepare_one(c, calls[i].k, NULL) != 0) {
            calls[i].rc = -1;
            return c->broken ? DB_UNAVAILABLE : -1;
        }
    if (!PQenterPipelineMode(conn)) {
        lost(c, NULL);
        return DB_UNAVAILABLE;
    }
    int sent = send_text(conn, "BEGIN");
    for (int i = 0; i < n && sent; i++) {
        struct texts t;
        int np = to_texts(c, calls[i].k, calls[i].p, calls[i].n, &t);
        char name[16];
        snprintf(name, sizeof name, "s%d", calls[i].k);
        sent = PQsendQueryPrepared(conn, name, np, t.v, t.len, NULL, 0);
        calls[i].rc = -1;
        calls[i].changes = calls[i].value = 0;
    }
    sent = sent && send_text(conn, "COMMIT") && PQpipelineSync(conn);
    int failed = !sent, committed = 0, gone = !sent;
    int64_t deadline = clock_mono_ms() + c->timeout_ms;
    /* BEGIN, the calls, COMMIT, then the Sync. */
    for (int i = -1; i <= n + 1 && !gone; i++) {
        PGresult *res = next_result(c, &deadline);
        if (!res) {
            gone = 1;
            break;
        }
        if (i >= 0 && i < n) {
            calls[i].rc = outcome(c, res, calls[i].k, &calls[i].changes, &calls[i].value);
            failed |= calls[i].rc != 0;
        } else if (i == n) {
            committed = PQresultStatus(res) == PGRES_COMMAND_OK;
        }
        ExecStatusType s = PQresultStatus(res);
        PQclear(res);
        if (s == PGRES_FATAL_ERROR && PQstatus(conn) == CONNECTION_BAD)
            gone = 1;
    }
    if (gone || c->broken || PQstatus(conn) == CONNECTION_BAD) {
        /* Whether COMMIT was reached is unknown unless its result came. */
        if (!c->broken)
            c->broken = 1;
        return committed ? 0 : DB_UNAVAILABLE;
    }
    PQexitPipelineMode(conn);
    if (PQtransactionStatus(conn) != PQTRANS_IDLE)
        PQclear(first_result(c, send_text(conn, "ROLLBACK")));
    if (committed)
        return 0;
    return c->broken ? DB_UNAVAILABLE : failed ? -1 : DB_UNAVAILABLE;
}

static int pg_listen(struct db *base, const char *channel)
{
    struct db_pg *c = pg(base);
    char *q = PQescapeIdentifier(c->conn, channel, strlen(channel));
    char *sql = NULL;
    if (!q || asprintf(&sql, "LISTEN %s", q) < 0)
        sql = NULL;
    PQfreemem(q);
    PGresult *res = sql ? first_result(c, PQsendQuery(c->conn, sql)) : NULL;
    int rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : DB_UNAVAILABLE;
    PQclear(res);
    free(sql);
    return rc;
}

static int pg_notify_wait(struct db *base, int timeout_ms, void (*cb)(void *, const char *),
                          void *arg)
{
    struct db_pg *c = pg(base);
    if (c->broken)
        return DB_UNAVAILABLE;
    struct pollfd pfd = {.fd = PQsocket(c->conn), .events = POLLIN};
    if (pfd.fd < 0 || poll(&pfd, 1, timeout_ms) < 0) {
        c->broken = pfd.fd < 0;
        return c->broken ? DB_UNAVAILABLE : 0;
    }
    if (!PQconsumeInput(c->conn) || PQstatus(c->conn) == CONNECTION_BAD) {
        c->broken = 1;
        return DB_UNAVAILABLE;
    }
    PGnotify *n;
    while ((n = PQnotifies(c->conn)) != NULL) {
        cb(arg, n->extra);
        PQfreemem(n);
    }
    return 0;
}

const struct db_driver db_pg_driver = {
    pg_open,      pg_close,          pg_migrate, pg_prepare, pg_broken,      pg_reset, pg_exec,
    pg_exec_text, pg_in_transaction, pg_query,   pg_next,    pg_text,        pg_bytes, pg_int,
    pg_is_null,   pg_rows_end,       pg_batch,   pg_listen,  pg_notify_wait,
};
