/* db — see db.h: each call goes to the driver of its connection. */
#include "db.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int db_open(enum db_engine e, const char *target, struct db **out, char **err)
{
    const struct db_driver *drv = e == DB_PG ? &db_pg_driver : &db_sqlite_driver;
    *out = NULL;
    if (drv->open(target, out, err) != 0)
        return -1;
    (*out)->drv = drv;
    (*out)->engine = e;
    return 0;
}

void db_close(struct db *c)
{
    if (c)
        c->drv->close(c);
}

enum db_engine db_engine_of(struct db *c)
{
    return c->engine;
}

int db_migrate(struct db *c, const struct store_migration *m, int count, int *version, char **err)
{
    return c->drv->migrate(c, m, count, version, err);
}

int db_prepare(struct db *c, const char *const *sql, int n, char **err)
{
    return c->drv->prepare(c, sql, n, err);
}

int db_broken(struct db *c)
{
    return c->drv->broken(c);
}

int db_reset(struct db *c)
{
    return c->drv->reset(c);
}

int db_exec(struct db *c, int k, const struct db_param *p, int n, int64_t *changes, int64_t *value)
{
    return c->drv->exec(c, k, p, n, changes, value);
}

int db_exec_text(struct db *c, const char *sql, char **err)
{
    return c->drv->exec_text(c, sql, err);
}

int db_in_transaction(struct db *c)
{
    return c->drv->in_transaction(c);
}

int db_query(struct db *c, int k, const struct db_param *p, int n, struct db_rows *r)
{
    r->c = c;
    r->h = NULL;
    r->row = r->nrows = 0;
    return c->drv->query(c, k, p, n, r);
}

int db_next(struct db_rows *r)
{
    return r->c->drv->next(r);
}

const char *db_text(struct db_rows *r, int col)
{
    return r->c->drv->text(r, col);
}

size_t db_bytes(struct db_rows *r, int col)
{
    return r->c->drv->bytes(r, col);
}

int64_t db_int(struct db_rows *r, int col)
{
    return r->c->drv->integer(r, col);
}

int db_is_null(struct db_rows *r, int col)
{
    return r->c->drv->is_null(r, col);
}

void db_rows_end(struct db_rows *r)
{
    if (r->c)
        r->c->drv->rows_end(r);
    r->c = NULL;
}

int db_batch(struct db *c, struct db_call *calls, int n)
{
    return c->drv->batch(c, calls, n);
}

int db_listen(struct db *c, const char *channel)
{
    return c->drv->listen(c, channel);
}

int db_notify_wait(struct db *c, int timeout_ms, void (*cb)(void *arg, const char *payload),
                   void *arg)
{
    return c->drv->notify_wait(c, timeout_ms, cb, arg);
}

char *db_fmt_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}
