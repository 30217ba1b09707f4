/* test_follow — the transports' one way to read the core (follow.c) over
 * the real stream and session registries and a real SQLite store in a
 * temporary folder: a reply read to its end, a copy that reads ahead
 * without moving the original or taking its poll notice, event ids (and
 * the stream stored before a polling client can hold one), the standalone
 * stream's one-reader claim and delivery cursor (marked by a read that
 * waits; a message read but not written, follow_unread), why a stream
 * stopped (its end, a detach, its session's end, a reply that could not
 * be stored), a JSON reply's read of its response only, a resumed cursor,
 * one waiter following several streams (follow_group), and a follow that
 * lasts as long as its token (follow_token). */
#include "auth.h"
#include "check.h"
#include "clock.h"
#include "follow.h"
#include "session.h"
#include "store.h"
#include "stream.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[64];
static char dbpath[128];
static struct store *store;
static const struct session_limits limits = {.idle_ms = 60000, .max_bytes = 100000};

static struct session *new_session(const char *protocol)
{
    json_t *params = json_pack("{s:{}, s:{s:s, s:s}}", "capabilities", "clientInfo", "name", "unit",
                               "version", "1");
    struct session *s = NULL;
    session_create(protocol, params, NULL, &s);
    json_decref(params);
    return s;
}

static void append_str(struct stream *st, const char *msg, enum stream_state end)
{
    stream_append(st, msg, strlen(msg), end);
}

/* A reply of kind CORE_STREAM, as core_receive hands it out. */
static struct core_reply reply_of(struct session *s, struct stream *st)
{
    session_ref(s);
    return (struct core_reply){.kind = CORE_STREAM, .stream = st, .session = s};
}

static void test_reply(void)
{
    struct session *s = new_session("2025-11-25");
    CHECK(s != NULL);
    if (!s)
        return;
    struct stream *st = stream_create(session_id(s), STREAM_REQUEST, NULL);
    append_str(st, "{\"a\":1}", STREAM_ACTIVE);
    struct core_reply r = reply_of(s, st);
    struct follow f = {0};
    follow_reply(&f, &r, 0);
    CHECK(r.stream == NULL); /* taken over */
    core_reply_clear(&r);
    CHECK(f.polling); /* 2025-11-25 knows SSE polling */
    CHECK_INT(f.next, 0);

    /* A copy reads ahead; the original does not move, and a poll notice
     * the copy takes is still there for the original. */
    stream_detach_readers(st);
    struct follow look = f;
    struct stream_chunk ch;
    CHECK_INT(follow_read(&look, 0, &ch), FOLLOW_POLL);
    CHECK_INT(follow_read(&look, 0, &ch), FOLLOW_MESSAGE);
    CHECK_INT(look.next, 1);
    CHECK_INT(f.next, 0);
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_POLL);
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_MESSAGE);
    CHECK_INT(ch.seq, 0);
    CHECK(!ch.is_end);
    CHECK_INT(f.next, 1);

    /* Nothing yet: a look times out at once. */
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_IDLE);
    append_str(st, "{\"end\":1}", STREAM_FINISHED);
    CHECK_INT(follow_read(&f, clock_mono_ms() + 1000, &ch), FOLLOW_MESSAGE);
    CHECK(ch.is_end);
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_STREAM_ENDED);

    /* The follow names what it read: the stream and the last seq. */
    char want[96];
    snprintf(want, sizeof want, "%s:1", stream_id(st));
    CHECK_STR(f.event_id, want);
    CHECK(f.stored);

    /* A follow of the same stream opened later takes it over. */
    struct core_reply r2 = reply_of(s, st);
    stream_ref(st);
    struct follow g = {0};
    follow_reply(&g, &r2, 0);
    core_reply_clear(&r2);
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_DETACHED);
    follow_end(&g);

    /* Its session ended: that is why the stream stops, whatever else. */
    session_end(s);
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_SESSION_ENDED);
    follow_end(&f);
    CHECK(f.stream == NULL && f.session == NULL);
    follow_end(&f); /* a zeroed follow: nothing to do */
    session_unref(s);
}

static void test_standalone(void)
{
    struct session *s = new_session("2025-06-18");
    CHECK(s != NULL);
    if (!s)
        return;
    struct stream *sa = session_standalone(s);
    append_str(sa, "{\"n\":0}", STREAM_ACTIVE);
    append_str(sa, "{\"n\":1}", STREAM_ACTIVE);

    struct follow f = {0};
    struct core_reply refused = {0};
    CHECK_INT(follow_standalone(&f, s, 0, -1, &refused), 0);
    CHECK(f.standalone);
    CHECK(!f.polling);
    CHECK_INT(f.next, 0); /* nothing delivered yet */

    /* One reader at a time. */
    struct follow g = {0};
    CHECK_INT(follow_standalone(&g, s, 0, -1, &refused), -1);
    CHECK_INT(refused.reason, CORE_CONFLICT);
    core_reply_clear(&refused);

    struct stream_chunk ch;
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_MESSAGE);
    CHECK_INT(session_get_cursor(s), 0); /* read is not written */
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_MESSAGE);
    CHECK_INT(session_get_cursor(s), 0); /* nor is a look while bytes are pending */
    follow_unread(&f, &ch);
    /* A read that waits says what came before is written. */
    CHECK_INT(follow_read(&f, clock_mono_ms() + 1000, &ch), FOLLOW_MESSAGE);
    CHECK_INT(session_get_cursor(s), 1);
    /* A message read but not written (its client went away) is the next
     * reader's: the claim is let go before it. */
    CHECK_INT(f.next, 2);
    follow_unread(&f, &ch);
    CHECK_INT(f.next, 1);
    follow_end(&f); /* lets go of the claim where it stopped */

    /* The next reader starts where the last one stopped. */
    CHECK_INT(follow_standalone(&g, s, 0, -1, &refused), 0);
    CHECK_INT(g.next, 1);
    follow_end(&g);

    /* A resumed cursor on the standalone stream, without a claim. */
    char cursor[96];
    snprintf(cursor, sizeof cursor, "%s:1", stream_id(sa));
    struct core_caller c = {.transport = "http", .session_id = session_id(s)};
    CHECK_INT(follow_open(&f, &c, cursor, 0, &refused), 0);
    CHECK(f.stream == sa);
    CHECK(!f.standalone);
    CHECK_INT(f.next, 2);
    follow_end(&f);
    CHECK_INT(follow_open(&f, &c, "no-such-stream:0", 0, &refused), -1);
    CHECK_INT(refused.kind, CORE_REJECTED);
    core_reply_clear(&refused);

    stream_unref(sa);
    session_end(s);
    session_unref(s);
}

struct later {
    struct stream *st;      /* append to it, or */
    struct follow_group *g; /* wake it */
};

static void *later_main(void *arg)
{
    struct later *l = arg;
    usleep(100 * 1000);
    if (l->st)
        append_str(l->st, "{\"late\":1}", STREAM_ACTIVE);
    else
        follow_wake(l->g);
    return NULL;
}

/* Waits on g with a deadline far away, while another thread does l. */
static int64_t wait_for(struct follow_group *g, struct later *l)
{
    pthread_t t;
    int64_t start = clock_mono_ms();
    if (pthread_create(&t, NULL, later_main, l) != 0)
        return -1;
    follow_wait(g, start + 30000);
    pthread_join(t, NULL);
    return clock_mono_ms() - start;
}

static void test_group(void)
{
    struct session *s = new_session("2025-06-18");
    CHECK(s != NULL);
    if (!s)
        return;
    struct stream *a = stream_create(session_id(s), STREAM_REQUEST, NULL);
    struct stream *b = stream_create(session_id(s), STREAM_REQUEST, NULL);
    stream_ref(a); /* the test's own, to append after the follows end */
    stream_ref(b);
    struct follow_group g;
    follow_group_init(&g);
    /* On the heap: after follow_end, a change of its stream must not reach
     * the freed follow (ASan would see it). */
    struct follow *fa = calloc(1, sizeof *fa), fb = {0};
    CHECK(fa != NULL);
    if (!fa)
        return;
    struct core_reply r = reply_of(s, a);
    follow_reply(fa, &r, 0);
    core_reply_clear(&r);
    r = reply_of(s, b);
    follow_reply(&fb, &r, 0);
    core_reply_clear(&r);
    follow_join(fa, &g);
    follow_join(&fb, &g);

    /* A change before the wait is not missed: it returns at once. */
    append_str(a, "{\"a\":0}", STREAM_ACTIVE);
    follow_wait(&g, clock_mono_ms() + 30000);
    struct stream_chunk ch;
    CHECK_INT(follow_read(fa, 0, &ch), FOLLOW_MESSAGE);
    CHECK_INT(follow_read(&fb, 0, &ch), FOLLOW_IDLE);

    /* Nothing changed since: the wait runs to its deadline. */
    follow_wait(&g, clock_mono_ms() + 20);
    CHECK_INT(follow_read(fa, 0, &ch), FOLLOW_IDLE);

    /* A message on any stream of the group wakes the waiter, long before
     * its deadline; so does follow_wake. */
    struct later l = {.st = b};
    CHECK(wait_for(&g, &l) < 20000);
    CHECK_INT(follow_read(&fb, 0, &ch), FOLLOW_MESSAGE);
    l = (struct later){.g = &g};
    CHECK(wait_for(&g, &l) < 20000);

    /* An ended follow leaves the group. */
    follow_end(fa);
    free(fa);
    append_str(a, "{\"a\":1}", STREAM_FINISHED);
    follow_end(&fb);
    append_str(b, "{\"b\":1}", STREAM_FINISHED);
    stream_unref(a);
    stream_unref(b);
    follow_group_destroy(&g);
    session_end(s);
    session_unref(s);
}

/* 1 when the store has stream id's row. */
static int in_store(const char *id)
{
    struct store_stream row;
    int rc = store_stream_get(store, id, &row, NULL, NULL);
    if (rc == 0)
        store_stream_free(&row);
    return rc == 0;
}

/* A follow names its position before it read anything (the priming id) and
 * after each message; a message read back (follow_unread) is named no
 * more. A polling follow's read that finds nothing stores the stream
 * first, so that id names something after a crash; a copy's look does it
 * for the original; a follow that does not poll leaves it in memory. */
static void test_event_ids(void)
{
    struct session *s = new_session("2025-11-25");
    struct session *old = new_session("2025-06-18");
    CHECK(s != NULL && old != NULL);
    if (!s || !old)
        return;
    struct stream *st = stream_create(session_id(s), STREAM_REQUEST, NULL);
    struct core_reply r = reply_of(s, st);
    struct follow f = {0};
    follow_reply(&f, &r, 0);
    core_reply_clear(&r);
    char want[96];
    snprintf(want, sizeof want, "%s:-1", stream_id(st));
    CHECK_STR(f.event_id, want);
    CHECK(!f.stored);
    CHECK(!in_store(stream_id(st)));

    struct follow look = f;
    struct stream_chunk ch;
    CHECK_INT(follow_read(&look, 0, &ch), FOLLOW_IDLE);
    CHECK(look.stored);
    CHECK(in_store(stream_id(st)));
    CHECK_STR(f.event_id, want); /* the original did not move */

    append_str(st, "{\"a\":1}", STREAM_ACTIVE);
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_MESSAGE);
    CHECK(f.stored);
    snprintf(want, sizeof want, "%s:0", stream_id(st));
    CHECK_STR(f.event_id, want);
    follow_unread(&f, &ch);
    snprintf(want, sizeof want, "%s:-1", stream_id(st));
    CHECK_STR(f.event_id, want);
    CHECK_INT(f.next, 0);
    follow_end(&f);

    struct stream *quiet = stream_create(session_id(old), STREAM_REQUEST, NULL);
    r = reply_of(old, quiet);
    follow_reply(&f, &r, 0);
    core_reply_clear(&r);
    CHECK(!f.polling);
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_IDLE);
    CHECK(!f.stored);
    CHECK(!in_store(stream_id(quiet)));
    follow_end(&f);
    session_end(s);
    session_unref(s);
    session_end(old);
    session_unref(old);
}

/* A reply that could not be stored says so (worth a retry), unlike one
 * that ended without a reply (a cancelled request). The store is made to
 * refuse messages from the side, with a trigger. */
static enum follow_event store_failed_read(int final_only)
{
    struct session *s = new_session("2025-11-25");
    CHECK(s != NULL);
    struct stream *st = stream_create(session_id(s), STREAM_REQUEST, NULL);
    struct core_reply r = reply_of(s, st);
    struct follow f = {0};
    follow_reply(&f, &r, final_only);
    core_reply_clear(&r);

    sqlite3 *db = NULL;
    CHECK_INT(sqlite3_open(dbpath, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    CHECK_INT(sqlite3_exec(db,
                           "CREATE TRIGGER refuse BEFORE INSERT ON chunks "
                           "BEGIN SELECT RAISE(ABORT, 'refused'); END",
                           NULL, NULL, NULL),
              SQLITE_OK);
    CHECK(stream_append(st, "{\"end\":1}", 9, STREAM_FINISHED) < 0);
    CHECK(stream_store_failed(st));
    stream_end(st, STREAM_ERROR);
    CHECK_INT(sqlite3_exec(db, "DROP TRIGGER refuse", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);

    struct stream_chunk ch;
    enum follow_event e = follow_read(&f, 0, &ch);
    follow_end(&f);
    session_end(s);
    session_unref(s);
    return e;
}

/* A reply that could not be stored says so (worth a retry), unlike one
 * that ended without a reply (a cancelled request), and so does a JSON
 * reply's wait for its response. The store is made to refuse messages
 * from the side, with a trigger. */
static void test_store_failed(void)
{
    CHECK_INT(store_failed_read(0), FOLLOW_STORE_FAILED);
    CHECK_INT(store_failed_read(1), FOLLOW_STORE_FAILED);
}

struct standalone_reader {
    struct follow *f;
    int got; /* messages it read */
};

/* The client's GET stream: comes after a while, reads the two relayed
 * messages, and says it wrote them. */
static void *read_standalone_late(void *arg)
{
    struct standalone_reader *r = arg;
    usleep(200 * 1000);
    struct stream_chunk ch;
    while (r->got < 2 && follow_read(r->f, clock_mono_ms() + 5000, &ch) == FOLLOW_MESSAGE)
        r->got++;
    follow_read(r->f, clock_mono_ms() + 1, &ch); /* wrote them: waits for more */
    return NULL;
}

/* A follow that reads the response only (a JSON reply): what comes before
 * it goes to the standalone stream, and the response waits for the
 * standalone reader to have written it; a single-message reply (a poll's
 * result) relays nothing. */
static void test_final_only(void)
{
    struct session *s = new_session("2025-11-25");
    CHECK(s != NULL);
    if (!s)
        return;
    struct follow sa = {0};
    struct core_reply refused;
    CHECK_INT(follow_standalone(&sa, s, 0, -1, &refused), 0);

    struct stream *st = stream_create(session_id(s), STREAM_REQUEST, NULL);
    append_str(st, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}", STREAM_ACTIVE);
    append_str(st, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}", STREAM_ACTIVE);
    append_str(st, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", STREAM_FINISHED);
    struct core_reply r = reply_of(s, st);
    struct follow f = {0};
    follow_reply(&f, &r, 1);
    core_reply_clear(&r);
    CHECK(f.relay);

    struct standalone_reader rd = {&sa, 0};
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, read_standalone_late, &rd), 0);
    int64_t t0 = clock_mono_ms();
    struct stream_chunk ch;
    CHECK_INT(follow_read(&f, clock_mono_ms() + 5000, &ch), FOLLOW_MESSAGE);
    int64_t waited = clock_mono_ms() - t0;
    pthread_join(t, NULL);
    CHECK(ch.is_end && strstr(ch.msg, "\"result\"") != NULL);
    CHECK_INT(f.next, 3);
    CHECK_INT(rd.got, 2); /* both relayed, */
    CHECK(waited >= 150); /* and written before the response */
    CHECK(waited < 2000);
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_STREAM_ENDED);
    follow_end(&f);

    struct stream *one = stream_create(session_id(s), STREAM_REQUEST, NULL);
    append_str(one, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}", STREAM_ACTIVE);
    append_str(one, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}", STREAM_FINISHED);
    r = reply_of(s, one);
    r.single = 1;
    follow_reply(&f, &r, 1);
    core_reply_clear(&r);
    CHECK(!f.relay);
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_MESSAGE);
    CHECK(ch.is_end);
    CHECK_INT(follow_read(&sa, 0, &ch), FOLLOW_IDLE); /* nothing relayed */
    follow_end(&f);
    follow_end(&sa);
    session_end(s);
    session_unref(s);
}

static atomic_int woken;

static void count_wake(void)
{
    atomic_fetch_add(&woken, 1);
}

static void *revoke_soon(void *name)
{
    usleep(100 * 1000);
    auth_token_revoked(name);
    return NULL;
}

/* A follow lasts as long as its token. Taken before the follow is opened
 * (legacy /sse, waiting for its initialize), the token reads as idle and
 * is kept by the open. A read waiting when the token is revoked returns
 * at once and says so, as does every later read (before a message that is
 * there, and a copy's), and a JSON reply's wait. An expiry reads as such and
 * calls the wake. After follow_end, nothing is held: a revocation wakes
 * nobody. Without authentication nothing is held at all. */
static void test_token(void)
{
    struct session *s = new_session("2025-11-25");
    CHECK(s != NULL);
    if (!s)
        return;
    struct stream *st = stream_create(session_id(s), STREAM_REQUEST, NULL);
    struct core_reply r = reply_of(s, st);
    struct stream_chunk ch;
    struct follow f = {0};
    struct auth_grant alice = {.principal = "alice"};
    CHECK_INT(follow_token(&f, &alice, NULL), 0);
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_IDLE);
    follow_reply(&f, &r, 0);
    core_reply_clear(&r);
    CHECK(f.token != NULL);
    append_str(st, "{\"a\":1}", STREAM_ACTIVE);
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_MESSAGE);

    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, revoke_soon, "alice"), 0);
    int64_t t0 = clock_mono_ms();
    CHECK_INT(follow_read(&f, clock_mono_ms() + 5000, &ch), FOLLOW_TOKEN_REVOKED);
    CHECK(clock_mono_ms() - t0 < 4000);
    pthread_join(t, NULL);
    append_str(st, "{\"b\":2}", STREAM_FINISHED);
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_TOKEN_REVOKED);
    struct follow look = f;
    CHECK_INT(follow_read(&look, 0, &ch), FOLLOW_TOKEN_REVOKED);
    follow_end(&f);

    struct follow g = {0};
    struct auth_grant bob = {.principal = "bob", .expires_ms = clock_wall_ms() + 60000};
    CHECK_INT(follow_token(&g, &bob, count_wake), 0);
    CHECK_INT(follow_read(&g, 0, &ch), FOLLOW_IDLE);
    auth_expire(clock_wall_ms() + 120000);
    CHECK_INT(atomic_load(&woken), 1);
    CHECK_INT(follow_read(&g, 0, &ch), FOLLOW_TOKEN_EXPIRED);
    follow_end(&g);

    struct follow h = {0};
    struct auth_grant carol = {.principal = "carol"};
    CHECK_INT(follow_token(&h, &carol, count_wake), 0);
    follow_end(&h);
    auth_token_revoked("carol");
    CHECK_INT(atomic_load(&woken), 1);

    /* A JSON reply's final wait relays what comes before its response to
     * the standalone stream and then waits for that stream's reader to have
     * written it; a token that ends meanwhile skips the wait (its 401 goes
     * at once). Here the reader (sa) never writes. */
    struct session *s2 = new_session("2025-11-25");
    CHECK(s2 != NULL);
    struct core_reply refused;
    struct follow sa = {0};
    CHECK_INT(follow_standalone(&sa, s2, 0, -1, &refused), 0);
    struct stream *st2 = stream_create(session_id(s2), STREAM_REQUEST, NULL);
    append_str(st2, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}", STREAM_ACTIVE);
    struct core_reply r2 = reply_of(s2, st2);
    struct follow j = {0};
    struct auth_grant dave = {.principal = "dave"};
    CHECK_INT(follow_token(&j, &dave, NULL), 0);
    follow_reply(&j, &r2, 1);
    core_reply_clear(&r2);
    CHECK_INT(pthread_create(&t, NULL, revoke_soon, "dave"), 0);
    t0 = clock_mono_ms();
    CHECK_INT(follow_read(&j, clock_mono_ms() + 5000, &ch), FOLLOW_TOKEN_REVOKED);
    CHECK(clock_mono_ms() - t0 < 2000);
    pthread_join(t, NULL);
    follow_end(&j);
    follow_end(&sa);
    session_end(s2);
    session_unref(s2);

    struct follow n = {0};
    struct auth_grant none = {0};
    CHECK_INT(follow_token(&n, &none, count_wake), 0);
    CHECK(n.token == NULL);
    session_end(s);
    session_unref(s);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mcpd-test-follow-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(dbpath, sizeof dbpath, "%s/db/mcpd.db", tmpdir);
    char *err = NULL;
    if (store_open(dbpath, &store, &err) != 0) {
        printf("store_open(%s): %s\n", dbpath, err ? err : "?");
        free(err);
        return 2;
    }
    stream_registry_init(store);
    session_registry_init(store, &limits);
    test_reply();
    test_standalone();
    test_group();
    test_event_ids();
    test_store_failed();
    test_final_only();
    test_token();
    stream_registry_shutdown();
    session_registry_shutdown();
    store_close(store);

    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", tmpdir);
    return check_summary();
}
