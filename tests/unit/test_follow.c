/* test_follow — the transports' one way to read the core (follow.c) over
 * the real stream and session registries and a real SQLite store in a
 * temporary folder: a reply read to its end, a copy that reads ahead
 * without moving the original or taking its poll notice, event ids, the
 * standalone stream's one-reader claim and delivery cursor, why a stream
 * stopped, and a resumed cursor. */
#include "check.h"
#include "clock.h"
#include "follow.h"
#include "session.h"
#include "store.h"
#include "stream.h"

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
    struct follow f;
    follow_reply(&f, &r);
    CHECK(r.stream == NULL); /* taken over */
    core_reply_clear(&r);
    CHECK(f.polling); /* 2025-11-25 knows SSE polling */
    CHECK_INT(f.next, 0);

    /* A copy reads ahead; the original does not move, and a poll notice
     * the copy takes is still there for the original. */
    stream_detach_readers(st);
    struct follow look = f;
    struct stream_chunk ch;
    CHECK_INT(follow_read(&look, 0, &ch), STREAM_POLL);
    CHECK_INT(follow_read(&look, 0, &ch), STREAM_CHUNK);
    CHECK_INT(look.next, 1);
    CHECK_INT(f.next, 0);
    CHECK_INT(follow_read(&f, 0, &ch), STREAM_POLL);
    CHECK_INT(follow_read(&f, 0, &ch), STREAM_CHUNK);
    CHECK_INT(ch.seq, 0);
    CHECK(!ch.is_end);
    CHECK_INT(f.next, 1);

    /* Nothing yet: a look times out at once. */
    CHECK_INT(follow_read(&f, 0, &ch), STREAM_TIMEOUT);
    append_str(st, "{\"end\":1}", STREAM_FINISHED);
    CHECK_INT(follow_read(&f, clock_mono_ms() + 1000, &ch), STREAM_CHUNK);
    CHECK(ch.is_end);
    CHECK_INT(follow_read(&f, 0, &ch), STREAM_ENDED);
    CHECK_INT(follow_stopped(&f), FOLLOW_STREAM_ENDED);

    /* Event ids name the stream and the seq; durable ones are stored. */
    char id[96], want[96];
    CHECK_INT(follow_cursor(&f, 1, 1, id, sizeof id), 0);
    snprintf(want, sizeof want, "%s:1", stream_id(st));
    CHECK_STR(id, want);

    /* A follow of the same stream opened later takes it over. */
    struct core_reply r2 = reply_of(s, st);
    stream_ref(st);
    struct follow g;
    follow_reply(&g, &r2);
    core_reply_clear(&r2);
    CHECK_INT(follow_read(&f, 0, &ch), STREAM_DETACHED);
    follow_end(&g);

    /* Its session ended: that is why the stream stops. */
    session_end(s);
    CHECK_INT(follow_stopped(&f), FOLLOW_SESSION_ENDED);
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

    struct follow f;
    struct core_reply refused = {0};
    CHECK_INT(follow_standalone(&f, s, 0, -1, &refused), 0);
    CHECK(f.standalone);
    CHECK(!f.polling);
    CHECK_INT(f.next, 0); /* nothing delivered yet */

    /* One reader at a time. */
    struct follow g;
    CHECK_INT(follow_standalone(&g, s, 0, -1, &refused), -1);
    CHECK_INT(refused.reason, CORE_CONFLICT);
    core_reply_clear(&refused);

    struct stream_chunk ch;
    CHECK_INT(follow_read(&f, 0, &ch), STREAM_CHUNK);
    CHECK_INT(session_get_cursor(s), 0); /* read is not written */
    follow_sent(&f);
    CHECK_INT(session_get_cursor(s), 1);
    follow_end(&f); /* lets go of the claim where it stopped */

    /* The next reader starts where the last one stopped. */
    CHECK_INT(follow_standalone(&g, s, 0, -1, &refused), 0);
    CHECK_INT(g.next, 1);
    follow_end(&g);

    /* A resumed cursor on the standalone stream, without a claim. */
    char cursor[96];
    snprintf(cursor, sizeof cursor, "%s:1", stream_id(sa));
    struct core_caller c = {.transport = "http", .session_id = session_id(s)};
    CHECK_INT(follow_resume(&f, &c, cursor, &refused), 0);
    CHECK(f.resumed_standalone);
    CHECK(!f.standalone);
    CHECK_INT(f.next, 2);
    follow_end(&f);
    CHECK_INT(follow_resume(&f, &c, "no-such-stream:0", &refused), -1);
    CHECK_INT(refused.kind, CORE_REJECTED);
    core_reply_clear(&refused);

    stream_unref(sa);
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
    stream_registry_shutdown();
    session_registry_shutdown();
    store_close(store);

    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", tmpdir);
    return check_summary();
}
