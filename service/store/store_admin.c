/* store_admin — see store_admin.h. The behaviour of every command, once;
 * the engines' SQL and calls are the drivers' (store_admin_driver.h). */
#include "store_admin.h"
#include "clock.h"
#include "store_admin_driver.h"
#include "store_migrations.h"
#include "utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct store_admin {
    const struct store_admin_driver *drv;
    void *ctx;
    int writable;
    int version;
};

void store_admin_set_err(char **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(err, fmt, ap) < 0)
        *err = NULL;
    va_end(ap);
}

json_t *store_admin_text(const char *s, size_t n)
{
    if (!s || !n)
        return json_string("");
    json_t *v = json_stringn(s, n);
    if (v || n > SIZE_MAX / 3)
        return v;
    const unsigned char *u = (const unsigned char *)s;
    char *fixed = malloc(3 * n), *o = fixed;
    if (!fixed)
        return NULL;
    for (size_t i = 0; i < n;) {
        size_t len = u[i] >= 0x80 ? utf8_seq_len(u + i, n - i) : 1;
        if (len) {
            memcpy(o, u + i, len);
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

static int latest_version(void)
{
    int v = 0;
    for (int i = 0; i < store_migrations_count; i++)
        if (store_migrations[i].version > v)
            v = store_migrations[i].version;
    return v;
}

int store_admin_is_postgres(const char *path)
{
    /* The rule of mcpd's store (store_path_is_postgres), so that one --db
     * means the same database to both. */
    return strncmp(path, "postgres://", 11) == 0 || strncmp(path, "postgresql://", 13) == 0 ||
           strstr(path, "dbname=") != NULL || strstr(path, "host=") != NULL;
}

int store_admin_open(const char *path, enum store_admin_mode mode, struct store_admin **out,
                     char **err)
{
    *out = NULL;
    *err = NULL;
    struct store_admin *a = calloc(1, sizeof *a);
    if (!a) {
        store_admin_set_err(err, "out of memory");
        return -1;
    }
    a->drv = store_admin_is_postgres(path) ? &store_admin_pg : &store_admin_sqlite;
    a->writable = mode == STORE_ADMIN_WRITE;
    if (a->drv->open(path, a->writable, &a->ctx, err) != 0) {
        free(a);
        return -1;
    }
    const char *name = a->drv->name(a->ctx);
    char *why = NULL;
    if (a->drv->schema_version(a->ctx, &a->version, &why) != 0) {
        store_admin_set_err(err, "%s is not an mcpd database: %s", name, why ? why : "?");
        free(why);
        goto fail;
    }
    if (a->version == 0) {
        store_admin_set_err(err, "%s has no mcpd schema (start mcpd on it once)", name);
        goto fail;
    }
    if (a->version > latest_version()) {
        store_admin_set_err(err,
                            "%s has schema version %d; this mcp-admin knows up to %d (upgrade it)",
                            name, a->version, latest_version());
        goto fail;
    }
    if (a->version < latest_version() && a->writable) {
        store_admin_set_err(err,
                            "%s has schema version %d, older than this mcp-admin's %d: start the "
                            "new mcpd on it first (it migrates at start)",
                            name, a->version, latest_version());
        goto fail;
    }
    *out = a;
    return 0;
fail:
    a->drv->close(a->ctx);
    free(a);
    return -1;
}

void store_admin_close(struct store_admin *a)
{
    if (!a)
        return;
    a->drv->close(a->ctx);
    free(a);
}

const char *store_admin_name(struct store_admin *a)
{
    return a->drv->name(a->ctx);
}

/* ---- reads: each call one read-only transaction ---- */

static int read_begin(struct store_admin *a, char **err)
{
    return a->drv->begin(a->ctx, 0, err);
}

/* Ends the read and passes v through (NULL stays NULL, *err kept). */
static json_t *read_end(struct store_admin *a, json_t *v, char **err)
{
    char *e = NULL;
    if (a->drv->end(a->ctx, v != NULL, &e) != 0 && v) {
        json_decref(v);
        *err = e;
        return NULL;
    }
    free(e);
    return v;
}

#define ROWS(a, q, err, ...)                                                                       \
    ((a)->drv->rows((a)->ctx, (q), (const struct store_admin_param[]){__VA_ARGS__},                \
                    (int)(sizeof((const struct store_admin_param[]){__VA_ARGS__}) /                \
                          sizeof(struct store_admin_param)),                                       \
                    (err)))
#define ROWS0(a, q, err) ((a)->drv->rows((a)->ctx, (q), NULL, 0, (err)))

/* The client's name and version out of a session row's init_params (as
 * stored: the initialize request's params, JSON text), parsed here for
 * both engines alike. With keep_params the params stay, as JSON; else the
 * column goes. */
static void session_shape(json_t *s, int keep_params)
{
    json_t *params =
        json_loads(json_string_value(json_object_get(s, "init_params")), JSON_ALLOW_NUL, NULL);
    json_t *info = json_object_get(params, "clientInfo");
    json_t *name = json_object_get(info, "name"), *version = json_object_get(info, "version");
    json_object_set(s, "client_name", name ? name : json_null());
    json_object_set(s, "client_version", version ? version : json_null());
    if (keep_params) {
        json_object_set(s, "init_params", params ? params : json_null());
        json_object_set(s, "capabilities", json_object_get(params, "capabilities"));
    } else {
        json_object_del(s, "init_params");
    }
    json_decref(params);
}

json_t *store_admin_sessions(struct store_admin *a, const struct store_admin_sessions_filter *f,
                             char **err)
{
    if (read_begin(a, err) != 0)
        return NULL;
    json_t *list = ROWS(a, SAQ_SESSIONS, err, SAP_I((int64_t)f->which), SAP_T(f->principal),
                        SAP_I(f->active_since_ms), SAP_I(f->limit > 0 ? f->limit : -1));
    size_t i;
    json_t *s;
    json_array_foreach(list, i, s) session_shape(s, 0);
    return read_end(a, list, err);
}

static json_t *streams_of(struct store_admin *a, const char *session_id, char **err)
{
    return ROWS(a, SAQ_STREAMS, err, SAP_T(session_id));
}

json_t *store_admin_streams(struct store_admin *a, const char *session_id, char **err)
{
    if (read_begin(a, err) != 0)
        return NULL;
    return read_end(a, streams_of(a, session_id, err), err);
}

static json_t *session_in(struct store_admin *a, const char *id, int last_messages, char **err)
{
    json_t *found = ROWS(a, SAQ_SESSION, err, SAP_T(id));
    if (!found)
        return NULL;
    json_t *s = json_incref(json_array_get(found, 0));
    json_decref(found);
    if (!s)
        return json_null();
    session_shape(s, 1);
    json_t *streams = streams_of(a, id, err);
    json_t *last =
        streams ? ROWS(a, SAQ_LAST_MESSAGES, err, SAP_T(id), SAP_I(last_messages)) : NULL;
    if (!last) {
        json_decref(streams);
        json_decref(s);
        return NULL;
    }
    json_object_set_new(s, "streams", streams);
    json_object_set_new(s, "last_messages", last);
    return s;
}

json_t *store_admin_session(struct store_admin *a, const char *id, int last_messages, char **err)
{
    if (read_begin(a, err) != 0)
        return NULL;
    return read_end(a, session_in(a, id, last_messages, err), err);
}

json_t *store_admin_chunks(struct store_admin *a, const char *stream_id, int64_t from_seq,
                           int64_t limit, char **err)
{
    if (read_begin(a, err) != 0)
        return NULL;
    return read_end(
        a,
        ROWS(a, SAQ_CHUNKS, err, SAP_T(stream_id), SAP_I(from_seq), SAP_I(limit > 0 ? limit : -1)),
        err);
}

json_t *store_admin_logs(struct store_admin *a, const struct store_admin_logs_filter *f, char **err)
{
    if (read_begin(a, err) != 0)
        return NULL;
    return read_end(a,
                    ROWS(a, SAQ_LOGS, err, SAP_I(f->after_id), SAP_I(f->since_ms),
                         SAP_I(f->min_level), SAP_T(f->session), SAP_T(f->principal),
                         SAP_T(f->grep), SAP_I(f->limit > 0 ? f->limit : -1)),
                    err);
}

static json_t *stats_in(struct store_admin *a, char **err)
{
    json_t *counts = ROWS0(a, SAQ_COUNTS, err);
    if (!counts)
        return NULL;
    json_t *s = json_incref(json_array_get(counts, 0));
    json_decref(counts);
    if (!s) {
        store_admin_set_err(err, "query failed: no counts");
        return NULL;
    }
    json_object_set_new(s, "wal_bytes", a->drv->wal_bytes(a->ctx));
    /* mcpd logs one "request" row per HTTP request. */
    int64_t hour_ago = clock_wall_ms() - 3600000;
    json_t *per_minute = ROWS(a, SAQ_PER_MINUTE, err, SAP_I(hour_ago));
    json_t *warnings = per_minute ? ROWS(a, SAQ_WARNINGS, err, SAP_I(hour_ago)) : NULL;
    if (!warnings) {
        json_decref(per_minute);
        json_decref(s);
        return NULL;
    }
    json_object_set_new(s, "requests_per_minute", per_minute);
    json_object_set_new(s, "warnings_last_hour", warnings);
    return s;
}

json_t *store_admin_stats(struct store_admin *a, char **err)
{
    if (read_begin(a, err) != 0)
        return NULL;
    return read_end(a, stats_in(a, err), err);
}

json_t *store_admin_tokens(struct store_admin *a, char **err)
{
    if (read_begin(a, err) != 0)
        return NULL;
    return read_end(a, ROWS0(a, SAQ_TOKENS, err), err);
}

/* ---- writes: each one short transaction ---- */

/* A running mcpd's kill_watch finds sessions ended (and tokens revoked)
 * since it last looked by this timestamp, so the time is read inside the
 * write transaction, as late as it can be: read before a wait for the
 * lock, it could fall behind the watcher's window by the wait. */
static int write_one(struct store_admin *a, const char *what, enum store_admin_query q,
                     struct store_admin_param *p, int n, int stamp_param, char **err)
{
    if (!a->writable) {
        store_admin_set_err(err, "%s: the database was opened read-only", what);
        return -1;
    }
    char *e = NULL;
    if (a->drv->begin(a->ctx, 1, &e) != 0) {
        store_admin_set_err(err, "%s failed: %s", what, e ? e : "?");
        free(e);
        return -1;
    }
    if (stamp_param > 0)
        p[stamp_param - 1] = SAP_I(clock_wall_ms());
    int rc = a->drv->write(a->ctx, q, p, n, &e);
    char *end_err = NULL;
    if (a->drv->end(a->ctx, rc >= 0, &end_err) != 0 && rc >= 0) {
        rc = -1;
        e = end_err;
        end_err = NULL;
    }
    free(end_err);
    if (rc < 0)
        store_admin_set_err(err, "%s failed: %s", what, e ? e : "?");
    free(e);
    return rc;
}

int store_admin_token_add(struct store_admin *a, const char *name, const char *hash,
                          const char *note, int64_t expires_ms, char **err)
{
    struct store_admin_param p[] = {SAP_T(name), SAP_T(hash), SAP_T(note), SAP_I(0),
                                    expires_ms > 0 ? SAP_I(expires_ms) : SAP_T(NULL)};
    return write_one(a, "adding the token", SAQ_TOKEN_ADD, p, 5, 4, err);
}

int store_admin_token_revoke(struct store_admin *a, const char *name, char **err)
{
    struct store_admin_param p[] = {SAP_T(name), SAP_I(0)};
    return write_one(a, "revoking the token", SAQ_TOKEN_REVOKE, p, 2, 2, err);
}

int store_admin_session_kill(struct store_admin *a, const char *id, const char *reason, char **err)
{
    struct store_admin_param p[] = {SAP_T(id), SAP_I(0),
                                    SAP_T(reason && *reason ? reason : "killed by mcp-admin")};
    return write_one(a, "killing the session", SAQ_SESSION_KILL, p, 3, 2, err);
}

/* ---- the database as a whole ---- */

int store_admin_vacuum(struct store_admin *a, char **err)
{
    char *e = NULL;
    if (!a->writable || a->drv->vacuum(a->ctx, a->version, &e) != 0) {
        store_admin_set_err(err, "vacuum failed: %s",
                            a->writable ? (e ? e : "?") : "the database was opened read-only");
        free(e);
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
            store_admin_set_err(err, "%s exists: a backup never overwrites a file", file);
        else
            store_admin_set_err(err, "cannot create %s: %s", file, strerror(errno));
        return -1;
    }
    close(fd);
    char *e = NULL;
    if (a->drv->backup(a->ctx, file, a->version, &e) != 0) {
        store_admin_set_err(err, "backup to %s failed: %s", file, e ? e : "?");
        free(e);
        remove(file);
        return -1;
    }
    return 0;
}

/* What the sanity counts mean, by their column names in SAQ_SANITY. */
static const char *sanity_text(const char *key)
{
    if (strcmp(key, "chunks_without_stream") == 0)
        return "chunks without a stream";
    if (strcmp(key, "streams_without_session") == 0)
        return "streams without a session";
    return key;
}

static json_t *check_in(struct store_admin *a, char **err)
{
    json_t *problems = a->drv->integrity(a->ctx, err);
    if (!problems)
        return NULL;
    json_t *found = ROWS0(a, SAQ_SANITY, err);
    json_t *sanity = json_incref(json_array_get(found, 0));
    json_decref(found);
    if (!sanity) {
        if (found && !*err)
            store_admin_set_err(err, "query failed: no sanity counts");
        json_decref(problems);
        return NULL;
    }
    const char *key;
    json_t *n;
    json_object_foreach(sanity, key, n)
    {
        if (json_integer_value(n) != 0)
            json_array_append_new(
                problems,
                json_sprintf("%lld %s", (long long)json_integer_value(n), sanity_text(key)));
    }
    json_t *migrations = json_array();
    for (int i = 0; i < store_migrations_count; i++)
        json_array_append_new(migrations,
                              json_pack("{s:i, s:s, s:b}", "version", store_migrations[i].version,
                                        "name", store_migrations[i].name, "applied",
                                        store_migrations[i].version <= a->version));
    const char *first = json_string_value(json_array_get(problems, 0));
    return json_pack("{s:s, s:o, s:o, s:i, s:i, s:o}", "integrity", first ? first : "ok",
                     "problems", problems, "sanity", sanity, "schema_version", a->version,
                     "latest_version", latest_version(), "migrations", migrations);
}

json_t *store_admin_check(struct store_admin *a, char **err)
{
    if (read_begin(a, err) != 0)
        return NULL;
    return read_end(a, check_in(a, err), err);
}
