/* test_store — the SQLite store (store.c) on a real file in a temporary
 * folder and on ":memory:": migrations, sessions, streams and chunks, purge,
 * durability across close/reopen, group commit under concurrent
 * appenders, tokens an operator made or revoked that a bootstrap token
 * never changes, and owner-only files whatever the umask. Raw SQLite reads (a separate connection)
 * double-check what the store's own read functions cannot show, such as cascaded chunk rows. */
#include "check.h"
#include "pg_test.h"
#include "store.h"
#include "store_migrations.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Stream ids begin with 12 hex digits of their creation time (the store's
 * purge relies on it); these test streams all say "created at time 0", so
 * only their ended_ms decides when they are purged. */
#define SID(name) "000000000000" name

/* The three shapes of store_stream_write the tests use. */
static int put_stream(struct store *st, const char *id, const char *session, const char *kind,
                      const char *request_id, int64_t now)
{
    struct store_stream_new create = {session, kind, request_id, NULL};
    return store_stream_write(st, id, &create, -1, NULL, 0, NULL, now);
}

static int append(struct store *st, const char *id, int64_t seq, const char *msg, size_t len,
                  const char *end_state, int64_t now)
{
    return store_stream_write(st, id, NULL, seq, msg, len, end_state, now);
}

static int end_stream(struct store *st, const char *id, const char *state, int64_t now)
{
    return store_stream_write(st, id, NULL, -1, NULL, 0, state, now);
}

static char tmpdir[64];

/* ---- helpers ---- */

static struct store *open_store(const char *path)
{
    struct store *st = NULL;
    char *err = NULL;
    int rc = store_open(path, &st, &err);
    if (!check_record(rc == 0 && st != NULL, __FILE__, __LINE__, "store_open"))
        printf("     store_open(%s): %s\n", path, err ? err : "?");
    free(err);
    return rc == 0 ? st : NULL;
}

/* A count from a raw connection to the file (-1 on error). `arg` binds ?1
 * when not NULL. */
static int64_t raw_count(const char *path, const char *sql, const char *arg)
{
    if (store_path_is_postgres(path))
        return pg_test_count(path, sql, arg);
    sqlite3 *db = NULL;
    int64_t n = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *q = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK) {
            if (arg)
                sqlite3_bind_text(q, 1, arg, -1, SQLITE_TRANSIENT);
            if (sqlite3_step(q) == SQLITE_ROW)
                n = sqlite3_column_int64(q, 0);
        }
        sqlite3_finalize(q);
    }
    sqlite3_close(db);
    return n;
}

struct chunks {
    int n;
    int64_t seq[4096];
    char *msg[4096];
    size_t len[4096];
    int is_end[4096];
};

static void collect_chunk(void *arg, int64_t seq, const char *msg, size_t len, int is_end)
{
    struct chunks *c = arg;
    if (c->n >= 4096)
        return;
    c->seq[c->n] = seq;
    c->msg[c->n] = strndup(msg, len);
    c->len[c->n] = len;
    c->is_end[c->n] = is_end;
    c->n++;
}

static void chunks_free(struct chunks *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->msg[i]);
    c->n = 0;
}

/* store_stream_get into a fresh collector; returns the rc. */
static int get_stream(struct store *st, const char *id, struct store_stream *row, struct chunks *c)
{
    memset(c, 0, sizeof *c);
    return store_stream_get(st, id, row, collect_chunk, c);
}

static int put_session(struct store *st, const char *id, int64_t last_active)
{
    struct store_session s = {
        .id = (char *)id,
        .protocol_version = "2025-06-18",
        .init_params = "{\"clientInfo\":{\"name\":\"t\"}}",
        .log_level = "info",
        .initialized = 0,
        .created_ms = last_active,
        .last_active_ms = last_active,
    };
    return store_session_put(st, &s);
}

/* What a purge reported freed, by session (store_freed_cb). */
struct freed_log {
    int n, calls;
    char id[8][32];
    int64_t bytes[8];
};

static void on_freed(void *arg, const char *session_id, int64_t bytes)
{
    struct freed_log *f = arg;
    f->calls++;
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->id[i], session_id) == 0) {
            f->bytes[i] += bytes;
            return;
        }
    if (f->n < 8) {
        snprintf(f->id[f->n], sizeof f->id[0], "%s", session_id);
        f->bytes[f->n++] = bytes;
    }
}

static int64_t freed_for(const struct freed_log *f, const char *session_id)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->id[i], session_id) == 0)
            return f->bytes[i];
    return 0;
}

/* A purge whose tombstone cutoff is the idle one; f (may be NULL) gets
 * what it freed. */
static int purge_logged(struct store *st, int64_t idle, int64_t stream, int64_t log, int64_t rows,
                        struct freed_log *f)
{
    struct store_purge_cutoffs c = {idle, idle, stream, log, rows};
    return store_purge(st, &c, f ? on_freed : NULL, f);
}

static int purge(struct store *st, int64_t idle, int64_t stream, int64_t log, int64_t rows)
{
    return purge_logged(st, idle, stream, log, rows, NULL);
}

struct unfinished {
    int n;
    char id[16][64];
    char session[16][64];
    char request_id[16][64];
    int64_t next_seq[16];
};

static void collect_unfinished(void *arg, const char *stream_id, const char *session_id,
                               const char *request_id, int64_t next_seq)
{
    struct unfinished *u = arg;
    if (u->n >= 16)
        return;
    snprintf(u->id[u->n], 64, "%s", stream_id);
    snprintf(u->session[u->n], 64, "%s", session_id);
    snprintf(u->request_id[u->n], 64, "%s", request_id ? request_id : "(null)");
    u->next_seq[u->n] = next_seq;
    u->n++;
}

static int find_unfinished(const struct unfinished *u, const char *id)
{
    for (int i = 0; i < u->n; i++)
        if (strcmp(u->id[i], id) == 0)
            return i;
    return -1;
}

/* ---- the tests ---- */

static void test_open(void)
{
    /* The folder (two levels) does not exist yet. */
    char path[256];
    snprintf(path, sizeof path, "%s/a/b/mcpd.db", tmpdir);
    struct stat sb;
    CHECK(stat(path, &sb) != 0);
    struct store *st = open_store(path);
    if (!st)
        return;
    char dir[256];
    snprintf(dir, sizeof dir, "%s/a/b", tmpdir);
    CHECK(stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode));
    CHECK(stat(path, &sb) == 0 && S_ISREG(sb.st_mode));
    CHECK(store_migrations_count >= 1);
    int latest = store_migrations[store_migrations_count - 1].version;
    CHECK(latest >= 1);
    CHECK_INT(store_schema_version(st), latest);
    CHECK_INT(store_ready(st), 1);
    CHECK_INT(raw_count(path, "PRAGMA user_version", NULL), latest);
    CHECK_INT(raw_count(path,
                        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                        "('sessions', 'streams', 'chunks', 'logs')",
                        NULL),
              4);
    CHECK_INT(store_flush(st), 0);
    store_close(st);

    /* Reopening an up-to-date database applies nothing and works. */
    st = open_store(path);
    if (st) {
        CHECK_INT(store_schema_version(st), latest);
        CHECK_INT(store_ready(st), 1);
        store_close(st);
    }

    /* A folder that cannot be created (a regular file in the way). */
    char blocker[256], bad[300];
    snprintf(blocker, sizeof blocker, "%s/blocker", tmpdir);
    FILE *f = fopen(blocker, "w");
    if (f)
        fclose(f);
    snprintf(bad, sizeof bad, "%s/sub/x.db", blocker);
    struct store *none = (struct store *)1;
    char *err = NULL;
    CHECK_INT(store_open(bad, &none, &err), -1);
    CHECK(none == NULL);
    CHECK(err != NULL && err[0] != '\0');
    free(err);

    store_close(NULL); /* harmless */
}

/* Everything except reopen, on `path` (a file or ":memory:"). `rawpath`
 * is the file for raw checks, or NULL. */
static void test_data(const char *path, const char *rawpath)
{
    struct store *st = open_store(path);
    if (!st)
        return;
    CHECK_INT(store_ready(st), 1);
    CHECK_INT(store_schema_version(st), store_migrations[store_migrations_count - 1].version);

    /* Sessions: round trip, unknown, replace. */
    struct store_session in = {
        .id = "sess-1",
        .protocol_version = "2025-11-25",
        .init_params = "{\"capabilities\":{\"sampling\":{}},\"x\":\"h\xc3\xa9\"}",
        .log_level = "warning",
        .initialized = 1,
        .created_ms = 1700000000123LL,
        .last_active_ms = 1700000000456LL,
    };
    CHECK_INT(store_session_put(st, &in), 0);
    struct store_session out;
    CHECK_INT(store_session_get(st, "sess-1", &out), 0);
    CHECK_STR(out.id, "sess-1");
    CHECK_STR(out.protocol_version, "2025-11-25");
    CHECK_STR(out.init_params, in.init_params);
    CHECK_STR(out.log_level, "warning");
    CHECK_INT(out.initialized, 1);
    CHECK_INT(out.created_ms, 1700000000123LL);
    CHECK_INT(out.last_active_ms, 1700000000456LL);
    store_session_free(&out);
    CHECK(out.id == NULL);

    CHECK_INT(store_session_get(st, "no-such-session", &out), 1);
    CHECK(out.id == NULL && out.init_params == NULL);

    in.log_level = "debug";
    in.initialized = 0;
    CHECK_INT(store_session_put(st, &in), 0);
    CHECK_INT(store_session_get(st, "sess-1", &out), 0);
    CHECK_STR(out.log_level, "debug");
    CHECK_INT(out.initialized, 0);
    store_session_free(&out);

    /* Async updates, visible after a flush; touch never goes back. */
    CHECK_INT(store_session_set_state(st, "sess-1", "error", 1), 0);
    CHECK_INT(store_session_touch(st, "sess-1", 1700000009999LL), 0);
    CHECK_INT(store_session_touch(st, "sess-1", 1600000000000LL), 0);
    CHECK_INT(store_flush(st), 0);
    CHECK_INT(store_session_get(st, "sess-1", &out), 0);
    CHECK_STR(out.log_level, "error");
    CHECK_INT(out.initialized, 1);
    CHECK_INT(out.last_active_ms, 1700000009999LL);
    store_session_free(&out);

    /* A stream of five chunks ending with "finished". */
    CHECK_INT(put_stream(st, SID("str-A"), "sess-1", "request", "7", 1000), 0);
    const char *msgs[5] = {"{\"m\":0}", "{\"m\":1}", "{\"m\":\"two\"}", "{\"m\":3}",
                           "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}"};
    for (int i = 0; i < 5; i++)
        CHECK_INT(append(st, SID("str-A"), i, msgs[i], strlen(msgs[i]), i == 4 ? "finished" : NULL,
                         2000 + i),
                  0);
    struct store_stream row;
    struct chunks *c = malloc(sizeof *c);
    CHECK_INT(get_stream(st, SID("str-A"), &row, c), 0);
    CHECK_STR(row.id, SID("str-A"));
    CHECK_STR(row.session_id, "sess-1");
    CHECK_STR(row.kind, "request");
    CHECK_STR(row.request_id, "7");
    CHECK_STR(row.state, "finished");
    CHECK_INT(row.ended_ms, 2004);
    CHECK_INT(c->n, 5);
    for (int i = 0; i < c->n && i < 5; i++) {
        CHECK_INT(c->seq[i], i);
        CHECK_STR(c->msg[i], msgs[i]);
        CHECK_INT(c->len[i], strlen(msgs[i]));
        CHECK_INT(c->is_end[i], i == 4);
    }
    chunks_free(c);
    store_stream_free(&row);
    CHECK(row.id == NULL);

    /* Unknown stream. */
    CHECK_INT(get_stream(st, SID("no-such-stream"), &row, c), 1);
    CHECK_INT(c->n, 0);

    /* Duplicate seq fails and loses nothing; the failure went back to its
     * caller, so a flush has nothing more to report. */
    CHECK_INT(put_stream(st, SID("str-B"), "sess-1", "request", "\"b\"", 1000), 0);
    CHECK_INT(append(st, SID("str-B"), 0, "{\"b\":0}", 7, NULL, 3000), 0);
    CHECK_INT(append(st, SID("str-B"), 1, "{\"b\":1}", 7, NULL, 3001), 0);
    CHECK_INT(append(st, SID("str-B"), 1, "{\"dup\":1}", 9, NULL, 3002), -1);
    CHECK_INT(store_flush(st), 0);
    CHECK_INT(get_stream(st, SID("str-B"), &row, c), 0);
    CHECK_STR(row.state, "active");
    CHECK_INT(row.ended_ms, 0);
    CHECK_INT(c->n, 2);
    if (c->n == 2) {
        CHECK_STR(c->msg[0], "{\"b\":0}");
        CHECK_STR(c->msg[1], "{\"b\":1}");
        CHECK_INT(c->is_end[1], 0);
    }
    chunks_free(c);
    store_stream_free(&row);
    CHECK_INT(store_ready(st), 1); /* one failed row does not make the store unhealthy */

    /* Duplicate seq as the final chunk (end_state set) must fail too, and
     * must not end the stream. */
    CHECK_INT(put_stream(st, SID("str-F"), "sess-1", "request", "\"f\"", 1000), 0);
    CHECK_INT(append(st, SID("str-F"), 0, "{\"f\":0}", 7, NULL, 3000), 0);
    CHECK_INT(append(st, SID("str-F"), 0, "{\"f\":\"end\"}", 11, "finished", 3001), -1);
    store_flush(st);
    CHECK_INT(get_stream(st, SID("str-F"), &row, c), 0);
    CHECK_STR(row.state, "active");
    CHECK_INT(c->n, 1);
    if (c->n == 1)
        CHECK_STR(c->msg[0], "{\"f\":0}");
    chunks_free(c);
    store_stream_free(&row);

    /* A chunk whose stream row is missing (deleted with its session under
     * a racing request) writes nothing and says so, with or without
     * end_state, and is no store failure. */
    struct store_stats fs0, fs1;
    store_stats(st, &fs0);
    CHECK_INT(append(st, SID("no-such-stream"), 0, "{}", 2, NULL, 3000), STORE_STREAM_GONE);
    CHECK_INT(append(st, SID("no-such-stream"), 0, "{}", 2, "finished", 3000), STORE_STREAM_GONE);
    CHECK_INT(end_stream(st, SID("no-such-stream"), "finished", 3000), STORE_STREAM_GONE);
    CHECK_INT(store_flush(st), 0);
    store_stats(st, &fs1);
    CHECK_INT(fs1.failures - fs0.failures, 0);
    CHECK_INT(get_stream(st, SID("no-such-stream"), &row, c), 1);

    /* Unfinished request streams: B (active, 2 chunks) and C (active, none)
     * but not A (finished), D (standalone), E (ended without chunk). F's
     * fate depends on the check above, so it is not asserted here. */
    CHECK_INT(put_stream(st, SID("str-C"), "sess-1", "request", "42", 1000), 0);
    CHECK_INT(put_stream(st, SID("str-D"), "sess-1", "standalone", NULL, 1000), 0);
    CHECK_INT(append(st, SID("str-D"), 0, "{\"d\":0}", 7, NULL, 3000), 0);
    CHECK_INT(put_stream(st, SID("str-E"), "sess-1", "request", "43", 1000), 0);
    CHECK_INT(append(st, SID("str-E"), 0, "{\"e\":0}", 7, NULL, 3000), 0);
    CHECK_INT(end_stream(st, SID("str-E"), "error", 3500), 0);
    CHECK_INT(get_stream(st, SID("str-E"), &row, c), 0);
    CHECK_STR(row.state, "error");
    CHECK_INT(row.ended_ms, 3500);
    CHECK_INT(c->n, 1);
    if (c->n == 1)
        CHECK_INT(c->is_end[0], 0);
    chunks_free(c);
    store_stream_free(&row);

    struct unfinished u = {0};
    CHECK_INT(store_streams_unfinished(st, collect_unfinished, &u), 0);
    int b = find_unfinished(&u, SID("str-B")), cc = find_unfinished(&u, SID("str-C"));
    CHECK(b >= 0);
    CHECK(cc >= 0);
    if (b >= 0) {
        CHECK_INT(u.next_seq[b], 2);
        CHECK_STR(u.session[b], "sess-1");
        CHECK_STR(u.request_id[b], "\"b\"");
    }
    if (cc >= 0) {
        CHECK_INT(u.next_seq[cc], 0);
        CHECK_STR(u.request_id[cc], "42");
    }
    CHECK_INT(find_unfinished(&u, SID("str-A")), -1);
    CHECK_INT(find_unfinished(&u, SID("str-D")), -1);
    CHECK_INT(find_unfinished(&u, SID("str-E")), -1);
    CHECK(u.n <= 3);

    /* The standalone stream of a session. */
    char *sid = NULL;
    CHECK_INT(store_session_standalone(st, "sess-1", &sid), 0);
    CHECK_STR(sid, SID("str-D"));
    free(sid);
    CHECK_INT(put_session(st, "sess-2", 5000), 0);
    sid = (char *)"x";
    CHECK_INT(store_session_standalone(st, "sess-2", &sid), 1);
    CHECK(sid == NULL);

    /* Bytes: an ASCII-only session sums the message lengths. */
    CHECK_INT(put_stream(st, SID("s2-a"), "sess-2", "request", "1", 1000), 0);
    CHECK_INT(put_stream(st, SID("s2-b"), "sess-2", "standalone", NULL, 1000), 0);
    CHECK_INT(append(st, SID("s2-a"), 0, "12345", 5, NULL, 1), 0);
    CHECK_INT(append(st, SID("s2-a"), 1, "1234567890", 10, "finished", 1), 0);
    CHECK_INT(append(st, SID("s2-b"), 0, "abc", 3, NULL, 1), 0);
    CHECK_INT(store_session_bytes(st, "sess-2"), 18);
    CHECK_INT(store_session_bytes(st, "no-such-session"), 0);
    /* Bytes means bytes: "héllo" is 6 bytes of UTF-8 (5 characters). */
    CHECK_INT(put_session(st, "sess-3", 5000), 0);
    CHECK_INT(put_stream(st, SID("s3-a"), "sess-3", "request", "1", 1000), 0);
    const char *utf8 = "\"h\xc3\xa9llo\"";
    CHECK_INT(append(st, SID("s3-a"), 0, utf8, strlen(utf8), NULL, 1), 0);
    CHECK_INT(strlen(utf8), 8);
    CHECK_INT(store_session_bytes(st, "sess-3"), 8);

    /* store_session_delete cascades to streams and chunks. */
    CHECK_INT(store_session_delete(st, "sess-2", 5000), 0);
    CHECK_INT(store_session_get(st, "sess-2", &out), 1);
    CHECK_INT(get_stream(st, SID("s2-a"), &row, c), 1);
    CHECK_INT(get_stream(st, SID("s2-b"), &row, c), 1);
    CHECK_INT(store_session_bytes(st, "sess-2"), 0);
    if (rawpath) {
        CHECK_INT(raw_count(rawpath,
                            "SELECT COUNT(*) FROM chunks WHERE stream_id LIKE '" SID("s2-") "%'",
                            NULL),
                  0);
        CHECK_INT(
            raw_count(rawpath, "SELECT COUNT(*) FROM streams WHERE session_id = ?1", "sess-2"), 0);
    }
    /* Other sessions untouched. */
    CHECK_INT(store_session_get(st, "sess-1", &out), 0);
    store_session_free(&out);
    CHECK_INT(get_stream(st, SID("str-A"), &row, c), 0);
    CHECK_INT(c->n, 5);
    chunks_free(c);
    store_stream_free(&row);

    /* Purge: ended streams older than the cutoff go (with their chunks);
     * newer ended ones and active ones (however old) stay. */
    CHECK_INT(put_session(st, "sess-P", 900000), 0);
    CHECK_INT(put_stream(st, SID("p-old"), "sess-P", "request", "1", 100), 0);
    CHECK_INT(append(st, SID("p-old"), 0, "{}", 2, NULL, 100), 0);
    CHECK_INT(append(st, SID("p-old"), 1, "{\"end\":1}", 9, "finished", 1000), 0);
    CHECK_INT(put_stream(st, SID("p-old2"), "sess-P", "request", "2", 100), 0);
    CHECK_INT(end_stream(st, SID("p-old2"), "error", 2000), 0);
    CHECK_INT(put_stream(st, SID("p-new"), "sess-P", "request", "3", 100), 0);
    CHECK_INT(append(st, SID("p-new"), 0, "{\"end\":1}", 9, "finished", 5000), 0);
    CHECK_INT(put_stream(st, SID("p-active"), "sess-P", "request", "4", 1), 0);
    CHECK_INT(append(st, SID("p-active"), 0, "{\"a\":0}", 7, NULL, 1), 0);
    CHECK_INT(store_log(st, 100, "info", "sess-P", "old event"), 0);
    CHECK_INT(store_log(st, 9000, "info", NULL, "new event"), 0);
    CHECK_INT(store_flush(st), 0);
    if (rawpath)
        CHECK_INT(raw_count(rawpath, "SELECT COUNT(*) FROM logs WHERE event LIKE '% event'", NULL),
                  2);

    /* The purge tells what each session lost: exactly the bytes
     * store_session_bytes no longer counts, nothing for an ended stream
     * without chunks (p-old2), nothing for what stays. */
    int64_t before1 = store_session_bytes(st, "sess-1");
    int64_t beforeP = store_session_bytes(st, "sess-P");
    struct freed_log freed = {0};
    CHECK_INT(purge_logged(st, 0, 3000, 5000, 0, &freed), 0);
    CHECK_INT(freed.n, 2);
    CHECK_INT(freed_for(&freed, "sess-P"), 2 + 9);
    CHECK_INT(freed_for(&freed, "sess-P"), beforeP - store_session_bytes(st, "sess-P"));
    CHECK(freed_for(&freed, "sess-1") > 0);
    CHECK_INT(freed_for(&freed, "sess-1"), before1 - store_session_bytes(st, "sess-1"));
    CHECK_INT(purge_logged(st, 0, 3000, 5000, 0, &freed), 0);
    CHECK_INT(freed.calls, 2); /* nothing left to free, nothing told */
    /* sess-2's tombstone (ended at 5000) stays until the ended cutoff
     * passes it: a running mcpd finds killed sessions by their tombstone. */
    if (rawpath) {
        CHECK_INT(raw_count(rawpath, "SELECT COUNT(*) FROM sessions WHERE id = ?1", "sess-2"), 1);
        struct store_purge_cutoffs early = {0, 5000, 0, 0, 0}, late = {0, 5001, 0, 0, 0};
        CHECK_INT(store_purge(st, &early, NULL, NULL), 0);
        CHECK_INT(raw_count(rawpath, "SELECT COUNT(*) FROM sessions WHERE id = ?1", "sess-2"), 1);
        CHECK_INT(store_purge(st, &late, NULL, NULL), 0);
        CHECK_INT(raw_count(rawpath, "SELECT COUNT(*) FROM sessions WHERE id = ?1", "sess-2"), 0);
    }
    /* Also sess-1's streams: A ended at 2004 (gone), E at 3500 (kept). */
    CHECK_INT(get_stream(st, SID("str-A"), &row, c), 1);
    CHECK_INT(get_stream(st, SID("str-E"), &row, c), 0);
    chunks_free(c);
    store_stream_free(&row);
    CHECK_INT(get_stream(st, SID("str-B"), &row, c), 0);
    CHECK_INT(c->n, 2);
    chunks_free(c);
    store_stream_free(&row);
    CHECK_INT(get_stream(st, SID("p-old"), &row, c), 1);
    CHECK_INT(get_stream(st, SID("p-old2"), &row, c), 1);
    CHECK_INT(get_stream(st, SID("p-new"), &row, c), 0);
    CHECK_INT(c->n, 1);
    chunks_free(c);
    store_stream_free(&row);
    CHECK_INT(get_stream(st, SID("p-active"), &row, c), 0);
    CHECK_STR(row.state, "active");
    CHECK_INT(c->n, 1);
    chunks_free(c);
    store_stream_free(&row);
    CHECK_INT(store_session_bytes(st, "sess-P"), 9 + 7);
    if (rawpath) {
        CHECK_INT(
            raw_count(rawpath, "SELECT COUNT(*) FROM chunks WHERE stream_id = ?1", SID("p-old")),
            0);
        CHECK_INT(raw_count(rawpath, "SELECT COUNT(*) FROM logs WHERE event LIKE '% event'", NULL),
                  1);
    }
    CHECK_INT(store_session_get(st, "sess-P", &out), 0); /* session cutoff 0: kept */
    store_session_free(&out);

    /* The logs table keeps only the newest rows past log_max_rows. */
    for (int i = 0; i < 10; i++)
        CHECK_INT(store_log(st, 9000 + i, "info", NULL, "bounded"), 0);
    CHECK_INT(purge(st, 0, 0, 0, 4), 0);
    if (rawpath) {
        CHECK_INT(raw_count(rawpath, "SELECT COUNT(*) FROM logs", NULL), 4);
        CHECK_INT(raw_count(rawpath, "SELECT COUNT(*) FROM logs WHERE ts_ms >= 9006", NULL), 4);
    }

    /* Idle sessions: purged with their streams. */
    CHECK_INT(put_session(st, "sess-idle", 10), 0);
    CHECK_INT(put_stream(st, SID("idle-s"), "sess-idle", "request", "1", 10), 0);
    CHECK_INT(append(st, SID("idle-s"), 0, "{}", 2, NULL, 10), 0);
    CHECK_INT(put_session(st, "sess-busy", 2000000), 0);
    CHECK_INT(purge(st, 1000000, 0, 0, 0), 0);
    CHECK_INT(store_session_get(st, "sess-idle", &out), 1);
    CHECK_INT(store_session_get(st, "sess-P", &out), 1);
    CHECK_INT(get_stream(st, SID("idle-s"), &row, c), 1);
    CHECK_INT(get_stream(st, SID("p-active"), &row, c), 1);
    CHECK_INT(store_session_get(st, "sess-busy", &out), 0);
    store_session_free(&out);
    CHECK_INT(store_session_get(st, "sess-1", &out), 0); /* touched at 1700000009999 */
    store_session_free(&out);

    CHECK_INT(store_flush(st), 0);
    store_close(st);
    free(c);
}

/* Close and reopen the same file: what was committed is there. */
static void test_durability(const char *path)
{
    struct store *st = open_store(path);
    if (!st)
        return;
    CHECK_INT(put_session(st, "dur-1", 4242), 0);
    CHECK_INT(put_stream(st, SID("dur-s"), "dur-1", "request", "\"q\"", 1), 0);
    char msg[32];
    for (int i = 0; i < 20; i++) {
        snprintf(msg, sizeof msg, "{\"n\":%d}", i);
        CHECK_INT(append(st, SID("dur-s"), i, msg, strlen(msg), NULL, 1), 0);
    }
    /* Async writes still queued at close are committed by store_close. */
    CHECK_INT(put_stream(st, SID("dur-late"), "dur-1", "standalone", NULL, 1), 0);
    CHECK_INT(store_log(st, 1, "info", "dur-1", "late"), 0);
    store_close(st);

    st = open_store(path);
    if (!st)
        return;
    CHECK_INT(store_ready(st), 1);
    struct store_session out;
    CHECK_INT(store_session_get(st, "dur-1", &out), 0);
    CHECK_INT(out.last_active_ms, 4242);
    store_session_free(&out);
    struct store_stream row;
    struct chunks *c = malloc(sizeof *c);
    CHECK_INT(get_stream(st, SID("dur-s"), &row, c), 0);
    CHECK_STR(row.state, "active");
    CHECK_STR(row.request_id, "\"q\"");
    CHECK_INT(c->n, 20);
    for (int i = 0; i < c->n; i++) {
        snprintf(msg, sizeof msg, "{\"n\":%d}", i);
        CHECK_INT(c->seq[i], i);
        CHECK_STR(c->msg[i], msg);
    }
    chunks_free(c);
    store_stream_free(&row);
    char *sid = NULL;
    CHECK_INT(store_session_standalone(st, "dur-1", &sid), 0);
    CHECK_STR(sid, SID("dur-late"));
    free(sid);
    /* The earlier test's data is there too. */
    CHECK_INT(store_session_get(st, "sess-1", &out), 0);
    store_session_free(&out);
    CHECK_INT(get_stream(st, SID("str-B"), &row, c), 0);
    CHECK_INT(c->n, 2);
    CHECK_STR(row.state, "active");
    chunks_free(c);
    store_stream_free(&row);
    CHECK_INT(get_stream(st, SID("str-E"), &row, c), 0);
    CHECK_STR(row.state, "error");
    chunks_free(c);
    store_stream_free(&row);
    CHECK_INT(get_stream(st, SID("str-A"), &row, c), 1); /* purged stays purged */
    /* And appending continues where it stopped. */
    struct unfinished u = {0};
    CHECK_INT(store_streams_unfinished(st, collect_unfinished, &u), 0);
    int i = find_unfinished(&u, SID("dur-s"));
    CHECK(i >= 0);
    if (i >= 0)
        CHECK_INT(u.next_seq[i], 20);
    CHECK_INT(append(st, SID("dur-s"), 20, "{\"n\":20}", 8, "error", 5), 0);
    CHECK_INT(get_stream(st, SID("dur-s"), &row, c), 0);
    CHECK_INT(c->n, 21);
    CHECK_STR(row.state, "error");
    if (c->n == 21)
        CHECK_INT(c->is_end[20], 1);
    chunks_free(c);
    store_stream_free(&row);
    /* PostgreSQL checkpoints by itself: nothing to copy. */
    CHECK_INT(store_checkpoint(st), store_path_is_postgres(path) ? 1 : 0);
    store_close(st);
    free(c);
}

/* ---- group commit under concurrency ---- */

#define NTHREADS 8
#define NCHUNKS 500

struct worker {
    struct store *st;
    int t;
    int failures;
};

static void *append_worker(void *arg)
{
    struct worker *w = arg;
    char stream[32], msg[64];
    snprintf(stream, sizeof stream, SID("conc-%d"), w->t);
    for (int i = 0; i < NCHUNKS; i++) {
        int n = snprintf(msg, sizeof msg, "{\"t\":%d,\"i\":%d}", w->t, i);
        if (append(w->st, stream, i, msg, (size_t)n, i == NCHUNKS - 1 ? "finished" : NULL, i) != 0)
            w->failures++;
    }
    return NULL;
}

static void test_concurrency(const char *path, const char *rawpath)
{
    struct store *st = open_store(path);
    if (!st)
        return;
    CHECK_INT(put_session(st, "conc", 1), 0);
    char stream[32];
    for (int t = 0; t < NTHREADS; t++) {
        snprintf(stream, sizeof stream, SID("conc-%d"), t);
        CHECK_INT(put_stream(st, stream, "conc", "request", "1", 1), 0);
    }
    pthread_t th[NTHREADS];
    struct worker w[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        w[t] = (struct worker){.st = st, .t = t};
        CHECK_INT(pthread_create(&th[t], NULL, append_worker, &w[t]), 0);
    }
    int failures = 0;
    for (int t = 0; t < NTHREADS; t++) {
        pthread_join(th[t], NULL);
        failures += w[t].failures;
    }
    CHECK_INT(failures, 0);
    CHECK_INT(store_flush(st), 0);

    struct chunks *c = malloc(sizeof *c);
    char msg[64];
    int64_t total_bytes = 0;
    for (int t = 0; t < NTHREADS; t++) {
        snprintf(stream, sizeof stream, SID("conc-%d"), t);
        struct store_stream row;
        CHECK_INT(get_stream(st, stream, &row, c), 0);
        CHECK_STR(row.state, "finished");
        CHECK_INT(c->n, NCHUNKS);
        int bad = 0;
        for (int i = 0; i < c->n; i++) {
            int n = snprintf(msg, sizeof msg, "{\"t\":%d,\"i\":%d}", t, i);
            total_bytes += n;
            if (c->seq[i] != i || strcmp(c->msg[i], msg) != 0 || c->is_end[i] != (i == NCHUNKS - 1))
                bad++;
        }
        CHECK_INT(bad, 0);
        chunks_free(c);
        store_stream_free(&row);
    }
    CHECK_INT(store_session_bytes(st, "conc"), total_bytes);
    if (rawpath) {
        CHECK_INT(raw_count(rawpath,
                            "SELECT COUNT(*) FROM chunks WHERE stream_id LIKE '" SID("conc-") "%'",
                            NULL),
                  NTHREADS * NCHUNKS);
        CHECK_INT(raw_count(rawpath,
                            "SELECT COUNT(*) FROM (SELECT stream_id, seq FROM chunks WHERE "
                            "stream_id LIKE '" SID("conc-") "%' GROUP BY stream_id, seq) AS g",
                            NULL),
                  NTHREADS * NCHUNKS);
    }
    CHECK_INT(store_flush(st), 0);
    store_close(st);
    free(c);
}

/* ---- the write-ahead log stays bounded under sustained writes ---- */

#define WAL_BOUND (24LL << 20) /* the log may briefly pass its 4 MB trigger */
#define WAL_DATA (64LL << 20)  /* at least this much passes through it */
#define WAL_WRITERS 4

struct wal_writer {
    struct store *st;
    int t;
    const char *path;
    atomic_int *stop;
    int failures;
};

static long long file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long long)sb.st_size : 0;
}

static void *wal_write(void *arg)
{
    struct wal_writer *w = arg;
    char stream[32], msg[1100];
    snprintf(stream, sizeof stream, SID("wal-%d"), w->t);
    memset(msg, 'x', sizeof msg);
    msg[0] = '"';
    msg[sizeof msg - 1] = '"';
    for (int i = 0; !*w->stop && i < 200000; i++)
        if (append(w->st, stream, i, msg, sizeof msg, NULL, i) != 0)
            w->failures++;
    return NULL;
}

/* Every page of the database passes through the log, so 64 MB of data
 * written by appenders that never pause would leave a log of 64 MB or more
 * if it never started over (checkpoints beside a busy writer never finish). */
/* The reaper's periodic store_checkpoint, as fast as it can go, beside
 * the writers: checkpoints started on demand and those the log's growth
 * forces inside a commit must never use the checkpoint connection at once. */
struct wal_checkpointer {
    struct store *st;
    atomic_int *stop;
};

static void *wal_checkpoint_loop(void *arg)
{
    struct wal_checkpointer *c = arg;
    while (!*c->stop)
        store_checkpoint(c->st);
    return NULL;
}

/* 1 when SQLite's integrity_check finds nothing wrong with the file. */
static int integrity_ok(const char *path)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    int ok = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
             sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL) == SQLITE_OK &&
             sqlite3_step(q) == SQLITE_ROW &&
             strcmp((const char *)sqlite3_column_text(q, 0), "ok") == 0;
    if (!ok && q && sqlite3_column_text(q, 0))
        printf("     integrity_check: %s\n", sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    sqlite3_close(db);
    return ok;
}

/* A store at path holding one initialized session, or NULL. */
static struct store *open_with_session(const char *path, const char *session)
{
    struct store *st = open_store(path);
    if (!st)
        return NULL;
    struct store_session in = {.id = (char *)session,
                               .protocol_version = "2025-11-25",
                               .init_params = "{}",
                               .log_level = "info",
                               .initialized = 1,
                               .created_ms = 1,
                               .last_active_ms = 1};
    CHECK_INT(store_session_put(st, &in), 0);
    return st;
}

/* A stream write's statements stand or fall together: when the second
 * fails, the first is taken back. Triggers on the file make the second
 * statement fail: a new stream's first message, and an end written with a
 * message. */
static void test_write_atomic(const char *path)
{
    struct store *st = open_with_session(path, "sess-a");
    if (!st)
        return;
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    CHECK(
        sqlite3_exec(db,
                     "CREATE TRIGGER fail_chunk BEFORE INSERT ON chunks WHEN NEW.message = 'FAIL' "
                     "BEGIN SELECT RAISE(ABORT, 'injected'); END;"
                     "CREATE TRIGGER fail_end BEFORE UPDATE ON streams WHEN NEW.state = 'boom' "
                     "BEGIN SELECT RAISE(ABORT, 'injected'); END;"
                     "CREATE TRIGGER fail_tx BEFORE INSERT ON chunks WHEN NEW.message = 'TX' "
                     "BEGIN SELECT RAISE(ROLLBACK, 'injected'); END;",
                     NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);

    struct store_stream_new create = {"sess-a", "request", "1", NULL};
    CHECK_INT(store_stream_write(st, SID("atomic-a"), &create, 0, "FAIL", 4, "finished", 10), -1);
    CHECK_INT(raw_count(path, "SELECT count(*) FROM streams WHERE id = ?1", SID("atomic-a")), 0);
    CHECK_INT(store_stream_write(st, SID("atomic-a"), &create, 0, "{}", 2, "finished", 10), 0);
    CHECK_INT(raw_count(path, "SELECT count(*) FROM chunks WHERE stream_id = ?1", SID("atomic-a")),
              1);

    CHECK_INT(put_stream(st, SID("atomic-b"), "sess-a", "request", "2", 10), 0);
    CHECK_INT(append(st, SID("atomic-b"), 0, "{}", 2, "boom", 20), -1);
    CHECK_INT(raw_count(path, "SELECT count(*) FROM chunks WHERE stream_id = ?1", SID("atomic-b")),
              0);
    CHECK_INT(append(st, SID("atomic-b"), 0, "{}", 2, "finished", 20), 0);
    CHECK_INT(raw_count(path, "SELECT count(*) FROM chunks WHERE stream_id = ?1", SID("atomic-b")),
              1);
    CHECK_INT(store_flush(st), 0); /* their writers heard of the failures */

    /* A failure after which SQLite rolled the whole transaction back
     * itself (a trigger's ROLLBACK here; I/O errors, a full disk): the
     * write fails, leaves nothing, and the next one goes through. */
    CHECK_INT(store_stream_write(st, SID("atomic-c"), &create, 0, "TX", 2, "finished", 30), -1);
    CHECK_INT(raw_count(path, "SELECT count(*) FROM streams WHERE id = ?1", SID("atomic-c")), 0);
    CHECK_INT(store_stream_write(st, SID("atomic-c"), &create, 0, "{}", 2, "finished", 30), 0);
    CHECK_INT(raw_count(path, "SELECT count(*) FROM chunks WHERE stream_id = ?1", SID("atomic-c")),
              1);
    store_close(st);
}

struct relayed_row {
    int n;
    char id[4][64];
    int64_t copied[4];
};

static void collect_relayed(void *arg, const char *stream_id, int64_t copied)
{
    struct relayed_row *r = arg;
    if (r->n < 4) {
        snprintf(r->id[r->n], sizeof r->id[r->n], "%s", stream_id);
        r->copied[r->n++] = copied;
    }
}

/* The legacy relay's progress: recorded with the copy, in its commit (a
 * copy that fails records nothing), never backwards; read back only for a
 * legacy session's request streams created before the given time. */
static void test_relay_marks(const char *path)
{
    struct store *st = open_store(path);
    if (!st)
        return;
    struct store_session legacy = {.id = "sess-l",
                                   .protocol_version = "2024-11-05",
                                   .init_params = "{}",
                                   .log_level = "info",
                                   .created_ms = 1,
                                   .last_active_ms = 1,
                                   .transport = "sse"};
    struct store_session other = legacy;
    other.id = "sess-o";
    other.transport = "http";
    CHECK_INT(store_session_put(st, &legacy), 0);
    CHECK_INT(store_session_put(st, &other), 0);
    CHECK_INT(put_stream(st, SID("rq-1"), "sess-l", "request", "1", 100), 0);
    CHECK_INT(put_stream(st, SID("rq-2"), "sess-l", "request", "2", 200), 0);
    CHECK_INT(put_stream(st, SID("rq-late"), "sess-l", "request", "3", 900), 0);
    CHECK_INT(put_stream(st, SID("sa"), "sess-l", "standalone", NULL, 100), 0);
    CHECK_INT(put_stream(st, SID("rq-o"), "sess-o", "request", "1", 100), 0);

    struct store_relay_mark m = {SID("rq-1"), 2};
    CHECK_INT(store_stream_write_relayed(st, SID("sa"), NULL, 0, "{}", 2, NULL, 300, &m), 0);
    CHECK_INT(raw_count(path, "SELECT relayed FROM streams WHERE id = ?1", SID("rq-1")), 2);
    m.copied = 1; /* an older count does not undo a newer one */
    CHECK_INT(store_stream_write_relayed(st, SID("sa"), NULL, 1, "{}", 2, NULL, 300, &m), 0);
    CHECK_INT(raw_count(path, "SELECT relayed FROM streams WHERE id = ?1", SID("rq-1")), 2);
    /* The copy fails (seq 0 is taken): no mark either. */
    m = (struct store_relay_mark){SID("rq-2"), 5};
    CHECK_INT(store_stream_write_relayed(st, SID("sa"), NULL, 0, "{}", 2, NULL, 300, &m), -1);
    CHECK_INT(raw_count(path, "SELECT count(*) FROM streams WHERE id = ?1 AND relayed IS NULL",
                        SID("rq-2")),
              1);

    /* rq-1 has 3 messages (2 copied), rq-2 one (none), rq-late one. */
    for (int i = 0; i < 3; i++)
        CHECK_INT(append(st, SID("rq-1"), i, "{}", 2, NULL, 100), 0);
    CHECK_INT(append(st, SID("rq-2"), 0, "{}", 2, NULL, 200), 0);
    CHECK_INT(append(st, SID("rq-late"), 0, "{}", 2, NULL, 900), 0);
    struct relayed_row r = {0};
    CHECK_INT(store_streams_relayed(st, "sess-l", 500, collect_relayed, &r), 0);
    CHECK_INT(r.n, 2); /* not the standalone stream, not one created at 900 */
    CHECK_STR(r.id[0], SID("rq-1"));
    CHECK_INT(r.copied[0], 2);
    CHECK_STR(r.id[1], SID("rq-2"));
    CHECK_INT(r.copied[1], 0);
    /* Once every message is copied, a stream is not named. */
    m = (struct store_relay_mark){SID("rq-1"), 3};
    CHECK_INT(store_stream_write_relayed(st, SID("sa"), NULL, 2, "{}", 2, NULL, 300, &m), 0);
    r.n = 0;
    CHECK_INT(store_streams_relayed(st, "sess-l", 500, collect_relayed, &r), 0);
    CHECK_INT(r.n, 1);
    CHECK_STR(r.id[0], SID("rq-2"));
    r.n = 0;
    CHECK_INT(store_streams_relayed(st, "sess-o", 500, collect_relayed, &r), 0);
    CHECK_INT(r.n, 0); /* not a legacy session */

    /* A mark that takes the whole transaction down with it (as an I/O
     * error would) fails the copy too: nothing of it is stored, and the
     * next write goes through. (That the rest of such a batch is failed
     * too, not committed alone, needs two writers in one batch: op_run.) */
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    CHECK(sqlite3_exec(db,
                       "CREATE TRIGGER fail_mark BEFORE UPDATE OF relayed ON streams "
                       "WHEN NEW.relayed = 99 BEGIN SELECT RAISE(ROLLBACK, 'injected'); END;",
                       NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    m = (struct store_relay_mark){SID("rq-2"), 99};
    CHECK_INT(store_stream_write_relayed(st, SID("sa"), NULL, 3, "{}", 2, NULL, 300, &m), -1);
    CHECK_INT(
        raw_count(path, "SELECT count(*) FROM chunks WHERE stream_id = ?1 AND seq = 3", SID("sa")),
        0);
    m.copied = 1;
    CHECK_INT(store_stream_write_relayed(st, SID("sa"), NULL, 3, "{}", 2, NULL, 300, &m), 0);
    store_close(st);
}

struct blocked_write {
    struct store *st;
    int rc;
};

static void *write_blocked(void *arg)
{
    struct blocked_write *b = arg;
    b->rc = put_stream(b->st, SID("held-up"), "sess-h", "request", "1", 10);
    return NULL;
}

/* A commit that waits for another process's write lock (a busy SQLite
 * lock, as mcp-admin's writes or a slow disk would make it) holds the
 * store's commit lock all that time: the histogram counts it in its
 * (100 ms, 1 s] bucket, and its time in the sum. */
static void test_slow_hold(const char *path)
{
    struct store *st = open_with_session(path, "sess-h");
    if (!st)
        return;
    struct store_stats before, after;
    store_stats(st, &before);
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK);
    struct blocked_write b = {st, -2};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, write_blocked, &b), 0);
    /* Held long enough that the write waits at least 100 ms however late
     * its thread starts on a loaded machine. */
    usleep(300 * 1000);
    CHECK(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);
    pthread_join(t, NULL);
    sqlite3_close(db);
    CHECK_INT(b.rc, 0);
    store_stats(st, &after);
    CHECK(after.hold[STORE_HOLD_BUCKETS - 1] - before.hold[STORE_HOLD_BUCKETS - 1] >= 1);
    CHECK(after.hold_sum_us - before.hold_sum_us >= 100000);
    store_close(st);
}

static void test_wal_bounded(void)
{
    char path[256], wal[300];
    snprintf(path, sizeof path, "%s/wal/mcpd.db", tmpdir);
    snprintf(wal, sizeof wal, "%s-wal", path);
    struct store *st = open_store(path);
    if (!st)
        return;
    CHECK_INT(put_session(st, "wal", 1), 0);
    char stream[32];
    for (int t = 0; t < WAL_WRITERS; t++) {
        snprintf(stream, sizeof stream, SID("wal-%d"), t);
        CHECK_INT(put_stream(st, stream, "wal", "request", "1", 1), 0);
    }
    atomic_int stop = 0;
    pthread_t th[WAL_WRITERS];
    struct wal_writer w[WAL_WRITERS];
    for (int t = 0; t < WAL_WRITERS; t++) {
        w[t] = (struct wal_writer){.st = st, .t = t, .path = path, .stop = &stop};
        CHECK_INT(pthread_create(&th[t], NULL, wal_write, &w[t]), 0);
    }
    pthread_t cth;
    struct wal_checkpointer cp = {st, &stop};
    CHECK_INT(pthread_create(&cth, NULL, wal_checkpoint_loop, &cp), 0);
    long long max_wal = 0;
    for (int i = 0; i < 6000 && file_size(path) < WAL_DATA && max_wal <= WAL_BOUND; i++) {
        long long n = file_size(wal);
        if (n > max_wal)
            max_wal = n;
        usleep(10000);
    }
    stop = 1;
    int failures = 0;
    for (int t = 0; t < WAL_WRITERS; t++) {
        pthread_join(th[t], NULL);
        failures += w[t].failures;
    }
    pthread_join(cth, NULL);
    CHECK_INT(failures, 0);
    CHECK(file_size(path) >= WAL_DATA);
    if (!check_record(max_wal <= WAL_BOUND, __FILE__, __LINE__, "max_wal <= WAL_BOUND"))
        printf("     the log reached %lld bytes\n", max_wal);
    store_close(st);
    CHECK(integrity_ok(path));
}

/* A database made by the first migration, with data in it, is brought up
 * to date by store_open and keeps every row: a migration that rebuilds a
 * table must not cascade-delete what refers to it. */
static void test_upgrade(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/old/mcpd.db", tmpdir);
    char dir[256];
    snprintf(dir, sizeof dir, "%s/old", tmpdir);
    mkdir(dir, 0700);
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    char *e = NULL;
    CHECK(sqlite3_exec(db, store_migrations[0].sql, NULL, NULL, &e) == SQLITE_OK);
    sqlite3_free(e);
    CHECK(sqlite3_exec(db,
                       "PRAGMA user_version=1;"
                       "INSERT INTO sessions(id, protocol_version, init_params, created_ms, "
                       "last_active_ms) VALUES('old-s', '2025-06-18', '{}', 1, 1);"
                       "INSERT INTO streams(id, session_id, kind, state, created_ms) "
                       "VALUES('000000000001old', 'old-s', 'request', 'active', 1);"
                       "INSERT INTO chunks(stream_id, seq, message, created_ms) "
                       "VALUES('000000000001old', 0, '{\"kept\":1}', 1);",
                       NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);

    struct store *st = open_store(path);
    if (!st)
        return;
    CHECK_INT(store_schema_version(st), store_migrations[store_migrations_count - 1].version);
    struct store_session sess;
    CHECK_INT(store_session_get(st, "old-s", &sess), 0);
    store_session_free(&sess);
    struct store_stream row;
    struct chunks *c = malloc(sizeof *c);
    CHECK_INT(get_stream(st, "000000000001old", &row, c), 0);
    CHECK_INT(c->n, 1);
    store_stream_free(&row);
    chunks_free(c);
    free(c);
    store_close(st);
    CHECK_INT(raw_count(path, "SELECT COUNT(*) FROM chunks", NULL), 1);
}

/* A purge larger than one batch: it commits range by range (so live writes
 * get in between), removes every expired session and ended stream with
 * their chunks, and leaves alone what is live, interleaved with them in
 * key order: live sessions between idle ones, active and recent streams
 * between ended ones. */
static void test_purge_batches(const char *path)
{
    struct store *st = open_store(path);
    if (!st)
        return;
    enum { SESSIONS = 300, STREAMS = 1500 };
    int ok = 1;
    char id[64];
    for (int i = 0; i < SESSIONS && ok; i++) {
        snprintf(id, sizeof id, "sess-%04d", i);
        ok = put_session(st, id, i % 5 == 0 ? 2000000 : 10) == 0; /* every 5th is live */
    }
    CHECK(ok);
    /* Streams of a live session, in key order: every 7th still active,
     * every 11th (not 7th) ended after the cutoff; two chunks each. */
    ok = put_session(st, "sess-keep", 2000000) == 0;
    for (int i = 0; i < STREAMS && ok; i++) {
        snprintf(id, sizeof id, SID("b-%05d"), i);
        int active = i % 7 == 0, recent = !active && i % 11 == 0;
        ok = put_stream(st, id, "sess-keep", "request", "1", 10) == 0 &&
             append(st, id, 0, "{}", 2, NULL, 10) == 0 &&
             append(st, id, 1, "{\"end\":1}", 9, active ? NULL : "finished",
                    recent ? 9000 : 1000) == 0;
    }
    /* Streams of idle sessions go with their session. */
    for (int i = 0; i < SESSIONS && ok; i++) {
        snprintf(id, sizeof id, SID("s-%04d"), i);
        char sess[32];
        snprintf(sess, sizeof sess, "sess-%04d", i);
        ok = put_stream(st, id, sess, "request", "1", 10) == 0 &&
             append(st, id, 0, "{}", 2, "finished", 10) == 0;
    }
    CHECK(ok);
    struct store_stats before, after;
    store_stats(st, &before);
    CHECK_INT(purge(st, 1000000, 5000, 0, 0), 0);
    store_stats(st, &after);
    /* 240 idle sessions in batches of at most 32, then the ended streams of
     * live sessions (about 1,160 of sess-keep's, 60 of the live sess-*'s)
     * in batches of at most 256: at least 8 + 5 commits. */
    CHECK(after.commits - before.commits >= 13);
    int kept_streams = 0;
    for (int i = 0; i < STREAMS; i++)
        kept_streams += i % 7 == 0 || i % 11 == 0;
    /* Counted: the idle sessions, and the streams deleted as such (those of
     * idle sessions went with them by cascade). */
    CHECK_INT(after.purged - before.purged,
              SESSIONS * 4 / 5 + (STREAMS - kept_streams) + SESSIONS / 5);

    struct store_session out;
    int kept = 0, gone = 0;
    for (int i = 0; i < SESSIONS; i++) {
        snprintf(id, sizeof id, "sess-%04d", i);
        int rc = store_session_get(st, id, &out);
        if (rc == 0)
            store_session_free(&out);
        kept += rc == 0 && i % 5 == 0;
        gone += rc == 1 && i % 5 != 0;
    }
    CHECK_INT(kept, SESSIONS / 5);
    CHECK_INT(gone, SESSIONS - SESSIONS / 5);
    struct store_stream row;
    struct chunks *c = calloc(1, sizeof *c);
    if (!CHECK(c != NULL)) {
        store_close(st);
        return;
    }
    int right = 0;
    for (int i = 0; i < STREAMS; i++) {
        snprintf(id, sizeof id, SID("b-%05d"), i);
        int rc = get_stream(st, id, &row, c);
        int keep = i % 7 == 0 || i % 11 == 0;
        right += keep ? rc == 0 && c->n == 2 : rc == 1;
        if (rc == 0) {
            chunks_free(c);
            store_stream_free(&row);
        }
    }
    CHECK_INT(right, STREAMS);
    for (int i = 0; i < SESSIONS; i++) {
        snprintf(id, sizeof id, SID("s-%04d"), i);
        right += get_stream(st, id, &row, c) == 1;
    }
    CHECK_INT(right, STREAMS + SESSIONS); /* ended at 10: gone with or without their session */
    /* Nothing is left behind in the chunks table either. */
    int64_t keep_chunks = 0;
    for (int i = 0; i < STREAMS; i++)
        keep_chunks += 2 * (i % 7 == 0 || i % 11 == 0);
    if (path && strcmp(path, ":memory:") != 0)
        CHECK_INT(raw_count(path, "SELECT COUNT(*) FROM chunks", NULL), keep_chunks);
    CHECK_INT(store_session_bytes(st, "sess-keep"), keep_chunks / 2 * 11);
    free(c);
    store_close(st);
}

/* A statement on a raw connection to the file; 0 or -1. */
static int raw_exec(const char *path, const char *sql)
{
    if (store_path_is_postgres(path))
        return pg_test_exec(path, sql);
    sqlite3 *db = NULL;
    int rc =
        sqlite3_open(path, &db) == SQLITE_OK && sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK
            ? 0
            : -1;
    sqlite3_close(db);
    return rc;
}

/* store_token_create (--bootstrap-token-file) adds a token only when none
 * of its name exists, and never changes one: not its hash, not a
 * revocation, across a reopen too. */
/* New streams with their first message, from many threads at once, so that
 * commits carry several (PostgreSQL writes a run of them as one statement of
 * arrays): each lands whole with its row's fields; one for a session that
 * does not exist fails alone, and the others in its commit still land. */
#define BURST_THREADS 8
#define BURST_STREAMS 60

struct burst {
    struct store *st;
    int t;
    int failures, ghost_failures;
};

static void burst_msg(int t, int i, char *msg, size_t cap)
{
    snprintf(msg, cap, "{\"t\":%d,\"i\":%d,\"s\":\"q\\\"b\\\\s {a,b} NULL caf\u00e9\"}", t, i);
}

static void *burst_worker(void *arg)
{
    struct burst *b = arg;
    char id[48], rid[16], msg[96];
    for (int i = 0; i < BURST_STREAMS; i++) {
        snprintf(id, sizeof id, SID("burst-%d-%d"), b->t, i);
        snprintf(rid, sizeof rid, "%d", i);
        burst_msg(b->t, i, msg, sizeof msg);
        int ghost = b->t == 0 && i % 10 == 5;
        struct store_stream_new c = {ghost ? "no-such-session" : "burst",
                                     i % 3 == 2 ? "standalone" : "request", i % 3 == 2 ? NULL : rid,
                                     NULL};
        const char *end = i % 3 == 0 ? "finished" : i % 3 == 1 ? "error" : NULL;
        int rc = store_stream_write(b->st, id, &c, 0, msg, strlen(msg), end, 1000 + i);
        if (ghost)
            b->ghost_failures += rc != 0;
        else
            b->failures += rc != 0;
    }
    return NULL;
}

static void test_stream_burst(const char *path)
{
    struct store *st = open_store(path);
    if (!st)
        return;
    CHECK_INT(put_session(st, "burst", 1), 0);
    pthread_t th[BURST_THREADS];
    struct burst b[BURST_THREADS];
    for (int t = 0; t < BURST_THREADS; t++) {
        b[t] = (struct burst){.st = st, .t = t};
        CHECK_INT(pthread_create(&th[t], NULL, burst_worker, &b[t]), 0);
    }
    int failures = 0;
    for (int t = 0; t < BURST_THREADS; t++) {
        pthread_join(th[t], NULL);
        failures += b[t].failures;
    }
    CHECK_INT(failures, 0);
    CHECK_INT(b[0].ghost_failures, BURST_STREAMS / 10);
    struct chunks *c = malloc(sizeof *c);
    char id[48], msg[96];
    int bad = 0;
    for (int t = 0; t < BURST_THREADS && c; t++)
        for (int i = 0; i < BURST_STREAMS; i++) {
            snprintf(id, sizeof id, SID("burst-%d-%d"), t, i);
            struct store_stream row;
            int found = get_stream(st, id, &row, c);
            if (t == 0 && i % 10 == 5) {
                bad += found != 1;
                chunks_free(c);
                continue;
            }
            burst_msg(t, i, msg, sizeof msg);
            const char *state = i % 3 == 0 ? "finished" : i % 3 == 1 ? "error" : "active";
            int ok = found == 0 && strcmp(row.session_id, "burst") == 0 &&
                     strcmp(row.kind, i % 3 == 2 ? "standalone" : "request") == 0 &&
                     (i % 3 == 2 ? row.request_id == NULL
                                 : row.request_id && atoi(row.request_id) == i) &&
                     strcmp(row.state, state) == 0 && row.ended_ms == (i % 3 == 2 ? 0 : 1000 + i) &&
                     c->n == 1 && c->seq[0] == 0 && strcmp(c->msg[0], msg) == 0 &&
                     c->is_end[0] == (i % 3 != 2);
            if (!ok)
                printf("burst stream %d-%d: found %d\n", t, i, found);
            bad += !ok;
            if (found == 0)
                store_stream_free(&row);
            chunks_free(c);
        }
    CHECK_INT(bad, 0);
    free(c);
    store_close(st);
}

/* Log lines with every character an array literal or SQL could trip on
 * (PostgreSQL writes a commit's lines as one statement of arrays,
 * pg_array.h): each lands whole, once, with its session or NULL. */
static void test_log_lines(const char *path)
{
    struct store *st = NULL;
    char *err = NULL;
    CHECK_INT(store_open(path, &st, &err), 0);
    free(err);
    if (!st)
        return;
    static const char *const events[] = {
        "plain",
        "a \"quoted\" word",
        "back\\slash\\",
        "{braces},{and commas}",
        "NULL",
        "",
        "line\nbreak\ttab",
        "caf\u00e9 \u2603 \U0001F600",
        "'single' -- not SQL; DROP TABLE logs",
        "\\\"",
    };
    const int nev = (int)(sizeof events / sizeof *events), rounds = 40;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < nev; i++)
            CHECK_INT(store_log(st, 1000 + r, i % 2 ? "warn" : "info", i % 3 ? "sess-L" : NULL,
                                events[i]),
                      0);
    CHECK_INT(store_flush(st), 0);
    struct store_stats stats;
    store_stats(st, &stats);
    /* Lines written while a commit ran share the next one. */
    CHECK(stats.commits < stats.writes);
    for (int i = 0; i < nev; i++) {
        const char *q = i % 3
                            ? "SELECT COUNT(*) FROM logs WHERE event = ?1 AND session_id = 'sess-L'"
                            : "SELECT COUNT(*) FROM logs WHERE event = ?1 AND session_id IS NULL";
        if (raw_count(path, q, events[i]) != rounds)
            printf("log line %d: %lld rows\n", i, (long long)raw_count(path, q, events[i]));
        CHECK_INT(raw_count(path, q, events[i]), rounds);
    }
    CHECK_INT(raw_count(path, "SELECT COUNT(*) FROM logs", NULL), (int64_t)nev * rounds);
    store_close(st);
}

static void test_token_create(const char *path)
{
    struct store *st = open_store(path);
    if (!st)
        return;
    enum store_token_create_result r = STORE_TOKEN_HASH_TAKEN;
    struct store_token tok;
    CHECK_INT(store_token_create(st, "bootstrap", "hash-one", "from a file", 1000, &r), 0);
    CHECK_INT(r, STORE_TOKEN_CREATED);
    CHECK_INT(store_token_create(st, "bootstrap", "hash-one", "from a file", 2000, &r), 0);
    CHECK_INT(r, STORE_TOKEN_EXISTS);
    CHECK_INT(store_token_create(st, "bootstrap", "hash-two", "from a file", 2000, &r), 0);
    CHECK_INT(r, STORE_TOKEN_OTHER_HASH);
    CHECK_INT(store_token_lookup(st, "hash-one", &tok), 0);
    CHECK_INT(store_token_lookup(st, "hash-two", &tok), 1);
    /* Another name with a hash that is taken: nothing added. */
    CHECK_INT(store_token_create(st, "second", "hash-one", NULL, 2000, &r), 0);
    CHECK_INT(r, STORE_TOKEN_HASH_TAKEN);
    CHECK_INT(store_token_lookup(st, "hash-one", &tok), 0);
    CHECK_STR(tok.name, "bootstrap");
    store_close(st);
    /* Revoked by mcp-admin: it stays revoked, whatever hash is offered. */
    CHECK_INT(raw_exec(path, "UPDATE tokens SET revoked_ms = 5000 WHERE name = 'bootstrap'"), 0);
    st = open_store(path);
    if (!st)
        return;
    CHECK_INT(store_token_create(st, "bootstrap", "hash-one", "from a file", 6000, &r), 0);
    CHECK_INT(r, STORE_TOKEN_REVOKED);
    CHECK_INT(store_token_create(st, "bootstrap", "hash-two", "from a file", 6000, &r), 0);
    CHECK_INT(r, STORE_TOKEN_REVOKED);
    CHECK_INT(store_token_lookup(st, "hash-one", &tok), 0);
    CHECK_INT(tok.revoked_ms, 5000);
    store_close(st);
}

static unsigned mode_of(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (unsigned)(sb.st_mode & 0777) : 01000;
}

/* Under umask 022 the store's folder is 0700 and its files 0600; files an
 * older mcpd left 0644 are narrowed when the store opens. */
static void test_file_modes(const char *dir)
{
    mode_t before = umask(022);
    char path[300], wal[310], shm[310];
    snprintf(path, sizeof path, "%s/mcpd.db", dir);
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    struct store *st = open_store(path);
    if (st) {
        CHECK_INT(store_log(st, 1, "info", NULL, "a row"), 0);
        CHECK_INT(store_flush(st), 0);
        CHECK_INT(mode_of(dir), 0700);
        CHECK_INT(mode_of(path), 0600);
        CHECK_INT(mode_of(wal), 0600);
        CHECK_INT(mode_of(shm), 0600);
        /* Open to others while the store runs; narrowed at the next open. */
        CHECK_INT(chmod(path, 0644), 0);
        CHECK_INT(chmod(wal, 0664), 0);
        CHECK_INT(chmod(shm, 0640), 0);
        /* The -wal and -shm stay when a connection is left open, as they do
         * when mcpd is killed. */
        sqlite3 *keep = NULL;
        CHECK_INT(sqlite3_open(path, &keep), SQLITE_OK);
        CHECK_INT(sqlite3_exec(keep, "SELECT COUNT(*) FROM logs", NULL, NULL, NULL), SQLITE_OK);
        store_close(st);
        st = open_store(path);
        CHECK_INT(mode_of(path), 0600);
        CHECK_INT(mode_of(wal), 0600);
        CHECK_INT(mode_of(shm), 0600);
        store_close(st);
        sqlite3_close(keep);
    }
    umask(before);
}

/* 1 when this process holds a POSIX lock on the file (/proc/locks). */
static int holds_lock_on(const char *file)
{
    struct stat sb;
    FILE *f = fopen("/proc/locks", "r");
    if (!f || stat(file, &sb) != 0) {
        if (f)
            fclose(f);
        return 0;
    }
    char line[256], want[64];
    snprintf(want, sizeof want, ":%llu ", (unsigned long long)sb.st_ino);
    int pid = (int)getpid(), found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        int holder = 0;
        const char *p = strstr(line, "POSIX");
        found =
            p && strstr(line, want) && sscanf(p + 5, "%*s %*s %d", &holder) == 1 && holder == pid;
    }
    fclose(f);
    return found;
}

/* Another process (mcp-admin) writes to the file while the store has it
 * open, and the store reads what it wrote: nothing the store did when it
 * opened (making its files owner-only) may have dropped the locks its
 * connections hold, or that write lands under their feet and corrupts the
 * file. Through the sqlite3 shell, a process of its own. */
static void test_other_process(const char *dir)
{
    if (system("command -v sqlite3 >/dev/null 2>&1") != 0) {
        printf("SKIP test_other_process: no sqlite3 shell\n");
        return;
    }
    char path[320], cmd[700];
    snprintf(path, sizeof path, "%s/mcpd.db", dir);
    struct store *st = open_store(path);
    if (!st)
        return;
    struct store_token tok;
    CHECK_INT(store_token_lookup(st, "hash-one", &tok), 1);
    /* SQLite's lock on the -shm file (the one that tells another process
     * the log's index is in use) is held by this process. */
    char shm[330];
    snprintf(shm, sizeof shm, "%s-shm", path);
    CHECK(holds_lock_on(shm));
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd,
                 "sqlite3 '%s' \"PRAGMA busy_timeout=5000; INSERT INTO tokens(name, hash, "
                 "created_ms) VALUES('t%d', 'hash-%d', 1)\" >/dev/null",
                 path, i, i);
        CHECK_INT(system(cmd), 0);
        char hash[16];
        snprintf(hash, sizeof hash, "hash-%d", i);
        CHECK_INT(store_token_lookup(st, hash, &tok), 0);
        snprintf(hash, sizeof hash, "other-%d", i);
        CHECK_INT(put_session(st, hash, 2000 + i), 0);
        CHECK(store_checkpoint(st) >= 0); /* as the reaper does */
    }
    store_close(st);
    CHECK(integrity_ok(path));
    /* Everything either process wrote is there. */
    st = open_store(path);
    if (!st)
        return;
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "hash-%d", i);
        CHECK_INT(store_token_lookup(st, id, &tok), 0);
        struct store_session out;
        snprintf(id, sizeof id, "other-%d", i);
        CHECK_INT(store_session_get(st, id, &out), 0);
        store_session_free(&out);
    }
    store_close(st);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mcpd-test-store-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    char path[256];
    snprintf(path, sizeof path, "%s/a/b/mcpd.db", tmpdir);

    test_open();
    test_upgrade();
    test_data(path, path);
    test_durability(path);
    char cpath[256];
    snprintf(cpath, sizeof cpath, "%s/conc/mcpd.db", tmpdir);
    test_concurrency(cpath, cpath);
    test_wal_bounded();
    char ppath[256];
    snprintf(ppath, sizeof ppath, "%s/purge/mcpd.db", tmpdir);
    test_purge_batches(ppath);
    test_purge_batches(":memory:");
    char apath[256];
    snprintf(apath, sizeof apath, "%s/atomic/mcpd.db", tmpdir);
    test_write_atomic(apath);
    char rpath[256];
    snprintf(rpath, sizeof rpath, "%s/relay/mcpd.db", tmpdir);
    test_relay_marks(rpath);
    char hpath[256];
    snprintf(hpath, sizeof hpath, "%s/hold/mcpd.db", tmpdir);
    test_slow_hold(hpath);
    char tpath[256];
    snprintf(tpath, sizeof tpath, "%s/tokens/mcpd.db", tmpdir);
    test_token_create(tpath);
    char mdir[256];
    snprintf(mdir, sizeof mdir, "%s/modes", tmpdir);
    test_file_modes(mdir);
    char opath[256];
    snprintf(opath, sizeof opath, "%s/other", tmpdir);
    test_other_process(opath);
    char lpath[256];
    snprintf(lpath, sizeof lpath, "%s/logs/mcpd.db", tmpdir);
    test_log_lines(lpath);
    char bpath[256];
    snprintf(bpath, sizeof bpath, "%s/burst/mcpd.db", tmpdir);
    test_stream_burst(bpath);

    /* The same on a throwaway in-memory store. */
    test_data(":memory:", NULL);
    test_concurrency(":memory:", NULL);

    /* And on PostgreSQL, each on a fresh database (not the SQLite-only
     * ones: file modes, the log, SQLite triggers that inject faults). */
    if (!pg_test_url()) {
        printf("SKIP PostgreSQL runs: MCPD_TEST_PG_URL is unset\n");
    } else {
        char url[512];
        /* test_durability reopens what test_data left. */
        if (check_record(pg_test_db(url, sizeof url) == 0, __FILE__, __LINE__, "pg_test_db")) {
            test_data(url, url);
            test_durability(url);
        }
        if (check_record(pg_test_db(url, sizeof url) == 0, __FILE__, __LINE__, "pg_test_db"))
            test_concurrency(url, url);
        if (check_record(pg_test_db(url, sizeof url) == 0, __FILE__, __LINE__, "pg_test_db"))
            test_purge_batches(url);
        if (check_record(pg_test_db(url, sizeof url) == 0, __FILE__, __LINE__, "pg_test_db"))
            test_token_create(url);
        if (check_record(pg_test_db(url, sizeof url) == 0, __FILE__, __LINE__, "pg_test_db"))
            test_log_lines(url);
        if (check_record(pg_test_db(url, sizeof url) == 0, __FILE__, __LINE__, "pg_test_db"))
            test_stream_burst(url);
        pg_test_drop_all();
    }

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", tmpdir);
    return check_summary();
}
