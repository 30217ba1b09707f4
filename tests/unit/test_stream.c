/* test_stream — the stream and session registries (stream.c, session.c)
 * over a real SQLite store in a temporary folder: persistence, blocking
 * reads and their wake-ups, reader takeover, SSE polling, a simulated
 * restart (registries shut down, store closed and reopened), session end
 * and the in-memory reaper. */
#include "check.h"
#include "clock.h"
#include "session.h"
#include "store.h"
#include "stream.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[64];
static char dbpath[128];
static struct store *store;
static const struct session_limits limits = {.idle_ms = 60000, .max_bytes = 1000};

/* ---- helpers ---- */

/* session_create without the refusal reason (no caps in these tests). */
static struct session *new_session(const char *protocol, json_t *params)
{
    struct session *s = NULL;
    session_create(protocol, params, NULL, &s);
    return s;
}

static void start(void)
{
    char *err = NULL;
    store = NULL;
    if (store_open(dbpath, &store, &err) != 0) {
        printf("store_open(%s): %s\n", dbpath, err ? err : "?");
        free(err);
        exit(2);
    }
    stream_registry_init(store);
    session_registry_init(store, &limits);
}

static void stop(void)
{
    stream_registry_shutdown();
    session_registry_shutdown();
    store_close(store);
    store = NULL;
}

static int64_t append_str(struct stream *s, const char *msg, enum stream_state end)
{
    return stream_append(s, msg, strlen(msg), end);
}

/* Reads chunk seq without waiting (the deadline is now). */
/* A finder of one stored stream, beside others at once. */
struct finder {
    const char *id;
    struct stream *found;
};

static void *find_main(void *arg)
{
    struct finder *f = arg;
    f->found = stream_find(f->id);
    return NULL;
}

static enum stream_wait read_now(struct stream *s, struct stream_reader *r, int64_t seq,
                                 struct stream_chunk *c)
{
    return stream_read(s, r, seq, clock_mono_ms(), c);
}

/* A reader on its own thread: one stream_read with a deadline. */
struct bg_read {
    struct stream *s;
    struct stream_reader r;
    int64_t seq, wait_ms;
    enum stream_wait result;
    char msg[128];
    int is_end;
    int64_t elapsed_ms;
    pthread_t th;
};

static void *bg_main(void *arg)
{
    struct bg_read *b = arg;
    struct stream_chunk c = {0};
    int64_t t0 = clock_mono_ms();
    b->result = stream_read(b->s, &b->r, b->seq, t0 + b->wait_ms, &c);
    b->elapsed_ms = clock_mono_ms() - t0;
    if (b->result == STREAM_CHUNK) {
        snprintf(b->msg, sizeof b->msg, "%.*s", (int)c.len, c.msg);
        b->is_end = c.is_end;
    }
    return NULL;
}

/* Starts a reader (attached on the caller's thread, so the order of
 * attachments is deterministic) and gives it time to block. */
static void bg_start(struct bg_read *b, struct stream *s, int64_t seq, int64_t wait_ms)
{
    memset(b, 0, sizeof *b);
    b->s = s;
    b->seq = seq;
    b->wait_ms = wait_ms;
    b->result = (enum stream_wait) - 1;
    stream_attach(s, &b->r);
    pthread_create(&b->th, NULL, bg_main, b);
    usleep(150 * 1000);
}

static void bg_join(struct bg_read *b)
{
    pthread_join(b->th, NULL);
}

/* ---- the tests ---- */

/* chunk_cb that counts. */
static void count_chunk(void *arg, int64_t seq, const char *msg, size_t len, int is_end)
{
    (void)seq;
    (void)msg;
    (void)len;
    (void)is_end;
    (*(int *)arg)++;
}

static char saved_session[64], saved_active[64], saved_finished[64], saved_standalone[64];

static void test_sessions(void)
{
    json_t *params = json_pack("{s:{s:{}}, s:{s:s, s:s}}", "capabilities", "roots", "clientInfo",
                               "name", "unit", "version", "1");
    struct session *s = new_session("2025-06-18", params);
    CHECK(s != NULL);
    if (!s) {
        json_decref(params);
        return;
    }
    CHECK_INT(strlen(session_id(s)), 32);
    CHECK_STR(session_protocol(s), "2025-06-18");
    CHECK(json_equal(session_init_params(s), params));
    CHECK(session_init_params(s) != params); /* copied, not borrowed */
    CHECK(json_is_object(json_object_get(session_client_capabilities(s), "roots")));
    json_decref(params);
    CHECK_INT(session_count(), 1);

    /* Persisted before the id is handed out. */
    struct store_session row;
    CHECK_INT(store_session_get(store, session_id(s), &row), 0);
    CHECK_STR(row.protocol_version, "2025-06-18");
    store_session_free(&row);

    struct session *f = session_find(session_id(s));
    CHECK(f == s);
    session_unref(f);
    CHECK(session_find("0123456789abcdef0123456789abcdef") == NULL);
    CHECK(session_find("short") == NULL);

    json_t *empty = json_object();
    struct session *other = new_session("2025-11-25", empty);
    json_decref(empty);
    CHECK(other != NULL && strcmp(session_id(other), session_id(s)) != 0);
    if (other) {
        CHECK_INT(session_count(), 2);
        session_end(other);
        session_unref(other);
    }
    CHECK_INT(session_count(), 1);

    /* A standalone stream from the start. */
    struct stream *sa = session_standalone(s);
    CHECK(sa != NULL);
    if (sa) {
        CHECK(stream_is_standalone(sa));
        CHECK_STR(stream_session(sa), session_id(s));
        CHECK_INT(stream_state(sa), STREAM_ACTIVE);
        stream_unref(sa);
    }

    /* Bookkeeping. */
    CHECK_INT(session_get_claim(s), 0);
    CHECK_INT(session_get_claim(s), -1);
    session_get_release(s);
    CHECK_INT(session_get_claim(s), 0);
    session_get_release(s);

    int v1 = 1, v2 = 2;
    CHECK_INT(session_track(s, "7", &v1), 0);
    CHECK_INT(session_track(s, "7", &v2), -1);
    CHECK_INT(session_track(s, "\"7\"", &v2), 0);
    session_untrack(s, "7");
    CHECK_INT(session_track(s, "7", &v2), 0);
    session_untrack(s, "7");
    session_untrack(s, "\"7\"");

    char id1[64], id2[64];
    session_next_request_id(s, id1, sizeof id1);
    session_next_request_id(s, id2, sizeof id2);
    CHECK(strcmp(id1, id2) != 0);
    CHECK_INT(session_pending_add(s, id1, &v1), 0);
    CHECK(session_pending_take(s, id2) == NULL);
    CHECK(session_pending_take(s, id1) == &v1);
    CHECK(session_pending_take(s, id1) == NULL);

    /* Storage cap (1000 bytes). */
    CHECK_INT(session_charge(s, 600), 0);
    CHECK_INT(session_charge(s, 500), -1);
    CHECK_INT(session_charge(s, 400), 0);
    CHECK_INT(session_charge(s, 1), -1);

    session_set_log_level(s, 4);
    CHECK_INT(session_log_level(s), 4);
    CHECK_INT(session_initialized(s), 0);
    session_set_initialized(s);
    CHECK_INT(session_initialized(s), 1);
    CHECK_INT(store_flush(store), 0);
    CHECK_INT(store_session_get(store, session_id(s), &row), 0);
    CHECK_STR(row.log_level, "error");
    CHECK_INT(row.initialized, 1);
    store_session_free(&row);

    snprintf(saved_session, sizeof saved_session, "%s", session_id(s));
    session_unref(s);
}

static void test_reads(void)
{
    struct session *s = session_find(saved_session);
    CHECK(s != NULL);
    if (!s)
        return;
    json_t *rid = json_integer(7);
    struct stream *st = stream_create(session_id(s), STREAM_REQUEST, rid);
    json_decref(rid);
    CHECK(st != NULL);
    if (!st) {
        session_unref(s);
        return;
    }
    CHECK(!stream_is_standalone(st));
    CHECK_INT(stream_next_seq(st), 0);
    struct stream *f = stream_find(stream_id(st));
    CHECK(f == st);
    stream_unref(f);

    /* A reader blocked on chunk 0 wakes when it is appended. */
    struct bg_read b;
    bg_start(&b, st, 0, 10000);
    CHECK_INT(append_str(st, "{\"n\":0}", STREAM_ACTIVE), 0);
    bg_join(&b);
    CHECK_INT(b.result, STREAM_CHUNK);
    CHECK_STR(b.msg, "{\"n\":0}");
    CHECK_INT(b.is_end, 0);
    CHECK(b.elapsed_ms >= 100); /* it really waited ... */
    CHECK(b.elapsed_ms < 5000); /* ... and was woken, not timed out */

    /* The deadline. */
    struct stream_reader r;
    struct stream_chunk c;
    stream_attach(st, &r);
    int64_t t0 = clock_mono_ms();
    CHECK_INT(stream_read(st, &r, 1, t0 + 200, &c), STREAM_TIMEOUT);
    int64_t waited = clock_mono_ms() - t0;
    CHECK(waited >= 190 && waited < 3000);
    CHECK_INT(read_now(st, &r, 1, &c), STREAM_TIMEOUT);

    /* A second attach takes the stream over: a blocked first reader wakes
     * with STREAM_DETACHED, and stays detached even when chunks exist. */
    bg_start(&b, st, 1, 10000);
    struct stream_reader r2;
    stream_attach(st, &r2);
    bg_join(&b);
    CHECK_INT(b.result, STREAM_DETACHED);
    CHECK(b.elapsed_ms < 5000);
    CHECK_INT(read_now(st, &b.r, 0, &c), STREAM_DETACHED);
    CHECK_INT(read_now(st, &r, 0, &c), STREAM_DETACHED);
    CHECK_INT(read_now(st, &r2, 0, &c), STREAM_CHUNK);

    /* SSE polling: STREAM_POLL once, then normal reads; a blocked reader
     * is told too; later readers are not. */
    CHECK_INT(append_str(st, "{\"n\":1}", STREAM_ACTIVE), 1);
    stream_detach_readers(st);
    CHECK_INT(read_now(st, &r2, 1, &c), STREAM_POLL);
    CHECK_INT(read_now(st, &r2, 1, &c), STREAM_CHUNK);
    CHECK_INT(c.seq, 1);
    CHECK_INT(c.len, 7);
    CHECK(memcmp(c.msg, "{\"n\":1}", 7) == 0);
    bg_start(&b, st, 2, 10000);
    stream_detach_readers(st);
    bg_join(&b);
    CHECK_INT(b.result, STREAM_POLL);
    CHECK(b.elapsed_ms < 5000);
    struct stream_reader r3;
    stream_attach(st, &r3);
    CHECK_INT(read_now(st, &r3, 0, &c), STREAM_CHUNK);

    /* Probes, likewise once. */
    stream_probe_readers(st);
    CHECK_INT(read_now(st, &r3, 0, &c), STREAM_PROBE);
    CHECK_INT(read_now(st, &r3, 0, &c), STREAM_CHUNK);

    /* Ending: the last chunk says so, and past it the stream has ended, at
     * once, whatever the deadline. */
    CHECK_INT(append_str(st, "{\"n\":2}", STREAM_ACTIVE), 2);
    CHECK_INT(read_now(st, &r3, 2, &c), STREAM_CHUNK);
    CHECK_INT(c.is_end, 0);
    bg_start(&b, st, 3, 10000);
    CHECK_INT(append_str(st, "{\"result\":{}}", STREAM_FINISHED), 3);
    bg_join(&b);
    CHECK_INT(b.result, STREAM_CHUNK);
    CHECK_STR(b.msg, "{\"result\":{}}");
    CHECK_INT(b.is_end, 1);
    stream_attach(st, &r3); /* bg_start's reader had taken over from r3 */
    CHECK_INT(stream_state(st), STREAM_FINISHED);
    CHECK_INT(read_now(st, &r3, 3, &c), STREAM_CHUNK);
    CHECK_INT(c.is_end, 1);
    CHECK_INT(read_now(st, &r3, 2, &c), STREAM_CHUNK);
    CHECK_INT(c.is_end, 0);
    t0 = clock_mono_ms();
    CHECK_INT(stream_read(st, &r3, 4, t0 + 5000, &c), STREAM_ENDED);
    CHECK(clock_mono_ms() - t0 < 1000);
    CHECK_INT(stream_read(st, &r3, 100, t0 + 5000, &c), STREAM_ENDED);
    CHECK_INT(append_str(st, "{\"late\":1}", STREAM_ACTIVE), -1);
    CHECK_INT(stream_end(st, STREAM_ERROR), -1);
    CHECK_INT(stream_state(st), STREAM_FINISHED);
    CHECK_INT(stream_next_seq(st), 4);

    /* A blocked reader wakes with STREAM_ENDED when the stream ends
     * without a message. */
    struct stream *st2 = stream_create(session_id(s), STREAM_REQUEST, NULL);
    CHECK(st2 != NULL);
    if (st2) {
        bg_start(&b, st2, 0, 10000);
        CHECK_INT(stream_end(st2, STREAM_ERROR), 0);
        bg_join(&b);
        CHECK_INT(b.result, STREAM_ENDED);
        CHECK(b.elapsed_ms < 5000);
        CHECK_INT(stream_state(st2), STREAM_ERROR);
        stream_unref(st2);
    }

    /* Everything appended is already in the store. */
    struct store_stream row;
    int stored = 0;
    CHECK_INT(store_stream_get(store, stream_id(st), &row, count_chunk, &stored), 0);
    CHECK_INT(stored, 4);
    CHECK_STR(row.state, "finished");
    CHECK_STR(row.request_id, "7");
    store_stream_free(&row);
    snprintf(saved_finished, sizeof saved_finished, "%s", stream_id(st));
    stream_unref(st);

    /* An active stream (three chunks) and a standalone message, to survive
     * the restart. */
    rid = json_string("req-a");
    st = stream_create(session_id(s), STREAM_REQUEST, rid);
    json_decref(rid);
    CHECK(st != NULL);
    if (st) {
        CHECK_INT(append_str(st, "{\"a\":0}", STREAM_ACTIVE), 0);
        CHECK_INT(append_str(st, "{\"a\":1}", STREAM_ACTIVE), 1);
        CHECK_INT(append_str(st, "{\"a\":2}", STREAM_ACTIVE), 2);
        snprintf(saved_active, sizeof saved_active, "%s", stream_id(st));
        stream_unref(st);
    }
    struct stream *sa = session_standalone(s);
    if (sa) {
        CHECK_INT(
            append_str(sa, "{\"method\":\"notifications/tools/list_changed\"}", STREAM_ACTIVE), 0);
        snprintf(saved_standalone, sizeof saved_standalone, "%s", stream_id(sa));
        stream_unref(sa);
    }
    session_unref(s);
}

static void test_restart(void)
{
    stop();
    start();
    CHECK_INT(stream_count(), 0);
    CHECK_INT(session_count(), 0);

    struct session *s = session_find(saved_session);
    CHECK(s != NULL);
    if (!s)
        return;
    CHECK_STR(session_id(s), saved_session);
    CHECK_STR(session_protocol(s), "2025-06-18");
    CHECK(json_is_object(json_object_get(session_client_capabilities(s), "roots")));
    CHECK_STR(json_string_value(
                  json_object_get(json_object_get(session_init_params(s), "clientInfo"), "name")),
              "unit");
    CHECK_INT(session_log_level(s), 4);
    CHECK_INT(session_initialized(s), 1);
    struct session *again = session_find(saved_session);
    CHECK(again == s);
    session_unref(again);
    CHECK_INT(session_count(), 1);

    /* The same standalone stream, with its message. */
    struct stream *sa = session_standalone(s);
    CHECK(sa != NULL);
    if (sa) {
        CHECK_STR(stream_id(sa), saved_standalone);
        CHECK_INT(stream_next_seq(sa), 1);
        CHECK_INT(session_get_cursor(s), 1);
        stream_unref(sa);
    }

    /* Finders of a stored stream still being written, all at once, share
     * one copy of it (it is loaded once, under its shard's load lock). */
    enum { FINDERS = 8 };
    pthread_t th[FINDERS];
    struct finder fd[FINDERS];
    for (int i = 0; i < FINDERS; i++) {
        fd[i] = (struct finder){.id = saved_active};
        CHECK_INT(pthread_create(&th[i], NULL, find_main, &fd[i]), 0);
    }
    for (int i = 0; i < FINDERS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < FINDERS; i++) {
        CHECK(fd[i].found != NULL && fd[i].found == fd[0].found);
        stream_unref(fd[i].found);
    }

    /* The active request stream: every chunk in order, still active, and
     * appends continue at the next seq. */
    struct stream *st = stream_find(saved_active);
    CHECK(st != NULL);
    if (st) {
        CHECK_STR(stream_session(st), saved_session);
        CHECK(!stream_is_standalone(st));
        CHECK_INT(stream_state(st), STREAM_ACTIVE);
        CHECK_INT(stream_next_seq(st), 3);
        struct stream_reader r;
        struct stream_chunk c;
        stream_attach(st, &r);
        char want[32];
        for (int i = 0; i < 3; i++) {
            snprintf(want, sizeof want, "{\"a\":%d}", i);
            CHECK_INT(read_now(st, &r, i, &c), STREAM_CHUNK);
            CHECK_INT(c.seq, i);
            CHECK(c.len == strlen(want) && memcmp(c.msg, want, c.len) == 0);
            CHECK_INT(c.is_end, 0);
        }
        CHECK_INT(read_now(st, &r, 3, &c), STREAM_TIMEOUT);
        CHECK_INT(append_str(st, "{\"a\":3}", STREAM_ERROR), 3);
        CHECK_INT(read_now(st, &r, 3, &c), STREAM_CHUNK);
        CHECK_INT(c.is_end, 1);
        /* Ended, it has left memory: finding it loads the stored copy. */
        struct stream *same = stream_find(saved_active);
        CHECK(same != NULL && same != st);
        CHECK(same && stream_next_seq(same) == 4 && stream_state(same) == STREAM_ERROR);
        stream_unref(same);
        stream_unref(st);
    }

    /* The finished stream: all four chunks, the last one the end. */
    st = stream_find(saved_finished);
    CHECK(st != NULL);
    if (st) {
        CHECK_INT(stream_state(st), STREAM_FINISHED);
        CHECK_INT(stream_next_seq(st), 4);
        struct stream_reader r;
        struct stream_chunk c;
        stream_attach(st, &r);
        CHECK_INT(read_now(st, &r, 0, &c), STREAM_CHUNK);
        CHECK(c.len == 7 && memcmp(c.msg, "{\"n\":0}", 7) == 0);
        CHECK_INT(read_now(st, &r, 3, &c), STREAM_CHUNK);
        CHECK(c.len == 13 && memcmp(c.msg, "{\"result\":{}}", 13) == 0);
        CHECK_INT(c.is_end, 1);
        CHECK_INT(read_now(st, &r, 4, &c), STREAM_ENDED);
        stream_unref(st);
    }
    CHECK(stream_find("0123456789abcdef0123456789abcdef") == NULL);
    session_unref(s);
}

static void test_session_end(void)
{
    struct session *s = session_find(saved_session);
    CHECK(s != NULL);
    if (!s)
        return;
    json_t *rid = json_integer(99);
    struct stream *st = stream_create(session_id(s), STREAM_REQUEST, rid);
    json_decref(rid);
    CHECK(st != NULL);
    if (!st) {
        session_unref(s);
        return;
    }
    CHECK_INT(append_str(st, "{\"p\":0}", STREAM_ACTIVE), 0);
    char live[64];
    snprintf(live, sizeof live, "%s", stream_id(st));

    /* A reader following it sees the end when the session ends. */
    struct bg_read b;
    bg_start(&b, st, 1, 10000);
    session_end(s);
    bg_join(&b);
    CHECK_INT(b.result, STREAM_ENDED);
    CHECK(b.elapsed_ms < 5000);
    CHECK_INT(stream_state(st), STREAM_EXPIRED);
    CHECK_INT(session_ended(s), 1);
    CHECK_INT(session_track(s, "1", s), -2); /* refused: the session ended */
    CHECK_INT(session_get_claim(s), -1);

    CHECK(session_find(saved_session) == NULL);
    CHECK(stream_find(live) == NULL);
    CHECK(stream_find(saved_active) == NULL);
    CHECK(stream_find(saved_finished) == NULL);
    CHECK(stream_find(saved_standalone) == NULL);
    struct store_session row;
    CHECK_INT(store_session_get(store, saved_session, &row), 1);
    struct store_stream srow;
    int n = 0;
    CHECK_INT(store_stream_get(store, live, &srow, count_chunk, &n), 1);
    CHECK_INT(n, 0);
    CHECK_INT(session_count(), 0);
    session_end(s); /* twice is harmless */
    stream_unref(st);
    session_unref(s);

    /* Still gone after a restart. */
    stop();
    start();
    CHECK(session_find(saved_session) == NULL);
    CHECK(stream_find(saved_active) == NULL);
}

static void test_reap(void)
{
    stop();
    start();
    json_t *empty = json_object();
    struct session *s = new_session("2025-03-26", empty);
    json_decref(empty);
    CHECK(s != NULL);
    if (!s)
        return;
    size_t base = stream_count(); /* the standalone stream */
    CHECK_INT(base, 1);
    struct stream *done = stream_create(session_id(s), STREAM_REQUEST, NULL);
    struct stream *err = stream_create(session_id(s), STREAM_REQUEST, NULL);
    struct stream *act = stream_create(session_id(s), STREAM_REQUEST, NULL);
    CHECK(done && err && act);
    if (!done || !err || !act) {
        stream_unref(done);
        stream_unref(err);
        stream_unref(act);
        session_unref(s);
        return;
    }
    CHECK_INT(append_str(done, "{\"d\":0}", STREAM_ACTIVE), 0);
    CHECK_INT(append_str(done, "{\"d\":1}", STREAM_FINISHED), 1);
    CHECK_INT(stream_end(err, STREAM_ERROR), 0);
    CHECK_INT(append_str(act, "{\"x\":0}", STREAM_ACTIVE), 0);
    /* Ended streams leave memory at once (the store has them); the active
     * one stays, and finding it gives the same object. */
    CHECK_INT(stream_count(), base + 1);
    struct stream *f = stream_find(stream_id(act));
    CHECK(f == act);
    stream_unref(f);
    CHECK_INT(stream_state(act), STREAM_ACTIVE);
    CHECK_INT(append_str(act, "{\"x\":1}", STREAM_ACTIVE), 1);

    /* A reader holding an ended stream can still read it. */
    struct stream_reader r;
    struct stream_chunk c;
    stream_attach(done, &r);
    CHECK_INT(read_now(done, &r, 1, &c), STREAM_CHUNK);
    CHECK_INT(c.is_end, 1);

    /* The store still has it: stream_find brings it back from there. */
    f = stream_find(stream_id(done));
    CHECK(f != NULL);
    if (f) {
        CHECK(f != done);
        CHECK_INT(stream_state(f), STREAM_FINISHED);
        CHECK_INT(stream_next_seq(f), 2);
        CHECK_INT(stream_count(), base + 1); /* a loaded ended stream is not registered */
        stream_unref(f);
    }

    stream_unref(done);
    stream_unref(err);
    stream_unref(act);
    session_end(s);
    session_unref(s);
    CHECK_INT(stream_count(), 0);
}

static void test_detach_all(void)
{
    json_t *empty = json_object();
    struct session *s = new_session("2025-11-25", empty);
    json_decref(empty);
    CHECK(s != NULL);
    if (!s)
        return;
    struct stream *sa = session_standalone(s);
    CHECK(sa != NULL);
    if (sa) {
        struct bg_read b;
        bg_start(&b, sa, 0, 10000);
        stream_registry_detach_all();
        bg_join(&b);
        CHECK_INT(b.result, STREAM_DETACHED);
        CHECK(b.elapsed_ms < 5000);
        /* Later readers too, where they would wait: what is already there
         * (a subscription's final result at shutdown) is still read. */
        struct stream_reader r;
        struct stream_chunk c;
        stream_attach(sa, &r);
        CHECK_INT(read_now(sa, &r, 0, &c), STREAM_DETACHED);
        const char *last = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/last\"}";
        CHECK(stream_append(sa, last, strlen(last), STREAM_ACTIVE) == 0);
        CHECK_INT(read_now(sa, &r, 0, &c), STREAM_CHUNK);
        CHECK(c.len == strlen(last) && memcmp(c.msg, last, c.len) == 0);
        CHECK_INT(read_now(sa, &r, 1, &c), STREAM_DETACHED);
        stream_unref(sa);
    }
    session_unref(s);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mcpd-test-stream-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(dbpath, sizeof dbpath, "%s/db/mcpd.db", tmpdir);
    start();
    test_sessions();
    test_reads();
    test_restart();
    test_session_end();
    test_reap();
    test_detach_all();
    stop();

    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", tmpdir);
    return check_summary();
}
