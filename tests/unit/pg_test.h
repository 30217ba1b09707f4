/* pg_test — the unit tests' PostgreSQL databases.
 *
 * When MCPD_TEST_PG_URL names a server (postgres://user@host:port/db, as
 * tests/pg/pg-server.sh prints), pg_test_db creates a fresh database on it
 * for one test, mcpd_test_<pid>_<n>, and gives its URL; pg_test_drop_all
 * drops them at the end. pg_test_count runs a raw count query on one
 * (?1 as in SQLite: bound to `arg` when not NULL). Header-only, like
 * check.h; links with libpq (the store's). */
#ifndef MCPD_TEST_PG_TEST_H
#define MCPD_TEST_PG_TEST_H

#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int pg_test_n;

/* The server's URL, or NULL (the PostgreSQL runs are skipped). */
static inline const char *pg_test_url(void)
{
    const char *u = getenv("MCPD_TEST_PG_URL");
    return u && *u ? u : NULL;
}

/* Runs sql on the server's own database; 0 or -1. */
static inline int pg_test_admin(const char *sql)
{
    PGconn *c = PQconnectdb(pg_test_url());
    PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
    int ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        printf("     pg_test: %s: %s\n", sql, r ? PQresultErrorMessage(r) : PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    return ok ? 0 : -1;
}

/* A fresh database: its URL in url (cap bytes). 0 or -1. */
static inline int pg_test_db(char *url, size_t cap)
{
    const char *base = pg_test_url();
    const char *slash = base ? strrchr(base, '/') : NULL;
    if (!slash || slash - base < 12)
        return -1;
    char name[64], sql[128];
    snprintf(name, sizeof name, "mcpd_test_%d_%d", (int)getpid(), ++pg_test_n);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
    if (pg_test_admin(sql) != 0)
        return -1;
    snprintf(url, cap, "%.*s/%s", (int)(slash - base), base, name);
    return 0;
}

static inline void pg_test_drop_all(void)
{
    for (int i = 1; i <= pg_test_n; i++) {
        char sql[128];
        snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS mcpd_test_%d_%d WITH (FORCE)",
                 (int)getpid(), i);
        pg_test_admin(sql);
    }
}

/* Runs sql (no parameters) on the database at url: 0 or -1. */
static inline int pg_test_exec(const char *url, const char *sql)
{
    PGconn *c = PQconnectdb(url);
    PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
    int ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    PQfinish(c);
    return ok ? 0 : -1;
}

/* The first column of the first row of sql on the database at url, as an
 * integer; -1 on error. */
static inline int64_t pg_test_count(const char *url, const char *sql, const char *arg)
{
    char *q = strdup(sql);
    for (char *p = q; p && *p; p++)
        if (*p == '?')
            *p = '$';
    PGconn *c = PQconnectdb(url);
    const char *v[1] = {arg};
    PGresult *r = PQstatus(c) == CONNECTION_OK && q
                      ? PQexecParams(c, q, arg ? 1 : 0, NULL, v, NULL, NULL, 0)
                      : NULL;
    int64_t n =
        r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)
            ? strtoll(PQgetvalue(r, 0, 0), NULL, 10)
            : -1;
    if (!r || PQresultStatus(r) != PGRES_TUPLES_OK)
        printf("     pg_test_count: %s\n", r ? PQresultErrorMessage(r) : PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    free(q);
    return n;
}

#endif
