/* test_cursor — the cursors clients hand back: event_id_parse (pure,
 * table-driven, with the int64 edges that once wrapped to a negative chunk
 * index), then stream_resume, stream_cursor_check and stream_read's guard
 * over a real SQLite store, counted as metrics_refused("bad_cursor"). */
#include "check.h"
#include "event_id.h"
#include "metrics.h"
#include "session.h"
#include "store.h"
#include "stream.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct parse_case {
    const char *id;
    int rc;
    const char *stream;
    int64_t next;
};

static const struct parse_case parse_cases[] = {
    {"abc:0", 0, "abc", 1},
    {"abc:-1", 0, "abc", 0}, /* the priming id: before the first message */
    {"abc:41", 0, "abc", 42},
    {"a:b:7", 0, "a:b", 8}, /* the last ':' splits */
    {"abc:9223372036854775806", 0, "abc", INT64_MAX},
    {"abc:9223372036854775807", -1, NULL, 0}, /* INT64_MAX: its next overflows */
    {"abc:9223372036854775808", -1, NULL, 0},
    {"abc:18446744073709551615", -1, NULL, 0},
    {"abc:18446744073709551616", -1, NULL, 0},
    {"abc:99999999999999999999999999999999", -1, NULL, 0},
    {"abc:-2", -1, NULL, 0},
    {"abc:-9223372036854775808", -1, NULL, 0},
    {"abc:-0", -1, NULL, 0},
    {"abc:+1", -1, NULL, 0},
    {"abc: 1", -1, NULL, 0},
    {"abc:1 ", -1, NULL, 0},
    {"abc:01", -1, NULL, 0},
    {"abc:1e3", -1, NULL, 0},
    {"abc:0x10", -1, NULL, 0},
    {"abc:", -1, NULL, 0},
    {":5", -1, NULL, 0},
    {"abc", -1, NULL, 0},
    {"", -1, NULL, 0},
    {":", -1, NULL, 0},
    {"abc:--1", -1, NULL, 0},
    {"abc:1\n", -1, NULL, 0},
    {"0123456789abcdef0123456789abcdef:3", 0, "0123456789abcdef0123456789abcdef", 4},
    {"0123456789abcdef0123456789abcdef0:3", -1, NULL, 0}, /* longer than cap */
};

static void test_parse(void)
{
    for (size_t i = 0; i < sizeof parse_cases / sizeof parse_cases[0]; i++) {
        const struct parse_case *c = &parse_cases[i];
        char stream[33] = "unchanged";
        int64_t next = -99;
        int rc = event_id_parse(c->id, stream, sizeof stream, &next);
        if (!check_record(rc == c->rc, __FILE__, __LINE__, c->id))
            printf("     event_id_parse(\"%s\") = %d, want %d\n", c->id, rc, c->rc);
        if (rc == 0 && c->rc == 0) {
            CHECK_STR(stream, c->stream);
            CHECK_INT(next, c->next);
        }
    }
    char stream[8];
    int64_t next;
    CHECK_INT(event_id_parse(NULL, stream, sizeof stream, &next), -1);
}

/* ---- against real streams ---- */

static void count_bad(const char *reason, uint64_t n, void *arg)
{
    if (strcmp(reason, "bad_cursor") == 0)
        *(uint64_t *)arg = n;
}

static uint64_t refused_now(void)
{
    uint64_t n = 0;
    metrics_refusals_each(count_bad, &n);
    return n;
}

static void test_streams(const char *dbpath)
{
    struct store *store = NULL;
    char *err = NULL;
    if (store_open(dbpath, &store, &err) != 0) {
        printf("store_open(%s): %s\n", dbpath, err ? err : "?");
        free(err);
        exit(2);
    }
    static const struct session_limits limits = {.idle_ms = 60000, .max_bytes = 1000};
    stream_registry_init(store);
    session_registry_init(store, &limits);
    json_t *params = json_object();
    struct session *s = NULL;
    CHECK_INT(session_create("2025-11-25", params, NULL, &s), 0);
    json_decref(params);
    CHECK(s != NULL);
    if (!s)
        exit(2);
    struct stream *active = stream_create(session_id(s), STREAM_REQUEST, NULL);
    struct stream *done = stream_create(session_id(s), STREAM_REQUEST, NULL);
    CHECK_INT(stream_append(active, "{\"n\":0}", 7, STREAM_ACTIVE), 0);
    CHECK_INT(stream_append(active, "{\"n\":1}", 7, STREAM_ACTIVE), 1);
    CHECK_INT(stream_append(done, "{\"result\":{}}", 13, STREAM_FINISHED), 0);

    char id[128];
    struct stream *st;
    int64_t next;
    uint64_t refused = refused_now();

    /* Every position that exists or comes next resumes. */
    for (int64_t seq = -1; seq <= 1; seq++) {
        stream_event_id(active, seq, id, sizeof id);
        CHECK_INT(stream_resume(id, session_id(s), &st, &next), STREAM_CURSOR_OK);
        CHECK(st == active);
        CHECK_INT(next, seq + 1);
        stream_unref(st);
    }
    CHECK_INT(refused_now(), refused);

    /* Past the end of an active stream, and the int64 edges: refused, no
     * reference left behind. */
    const char *tails[] = {
        "2",  "1000", "9223372036854775806", "9223372036854775807", "9223372036854775808",
        "-2", "x"};
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        snprintf(id, sizeof id, "%s:%s", stream_id(active), tails[i]);
        st = (struct stream *)1;
        CHECK_INT(stream_resume(id, session_id(s), &st, &next), STREAM_CURSOR_BAD);
        CHECK(st == NULL);
    }
    CHECK_INT(refused_now(), refused + 7);

    /* Past the end of an ended stream: nothing to read, ever; the reader
     * sees the end. */
    snprintf(id, sizeof id, "%s:9223372036854775806", stream_id(done));
    CHECK_INT(stream_resume(id, session_id(s), &st, &next), STREAM_CURSOR_OK);
    if (st) {
        struct stream_reader r;
        struct stream_chunk c;
        stream_attach(st, &r);
        CHECK_INT(stream_read(st, &r, next, 0, &c), STREAM_ENDED);
        stream_unref(st);
    }

    /* Another session's stream, or none: unknown, not counted as a bad
     * cursor. */
    stream_event_id(active, 0, id, sizeof id);
    CHECK_INT(stream_resume(id, "0123456789abcdef0123456789abcdef", &st, &next),
              STREAM_CURSOR_UNKNOWN);
    CHECK_INT(stream_resume("00000000000000000000000000000000:0", session_id(s), &st, &next),
              STREAM_CURSOR_UNKNOWN);
    CHECK_INT(refused_now(), refused + 7);

    /* The poll cursor (an integer already). */
    CHECK_INT(stream_cursor_check(active, 0), STREAM_CURSOR_OK);
    CHECK_INT(stream_cursor_check(active, 2), STREAM_CURSOR_OK);
    CHECK_INT(stream_cursor_check(active, 3), STREAM_CURSOR_BAD);
    CHECK_INT(stream_cursor_check(active, -1), STREAM_CURSOR_BAD);
    CHECK_INT(stream_cursor_check(active, INT64_MIN), STREAM_CURSOR_BAD);
    CHECK_INT(stream_cursor_check(active, INT64_MAX), STREAM_CURSOR_BAD);
    CHECK_INT(stream_cursor_check(done, INT64_MAX), STREAM_CURSOR_OK);

    /* stream_read's own guard, whatever a caller passes: never an index
     * outside the chunks. */
    struct stream_reader r;
    struct stream_chunk c;
    stream_attach(active, &r);
    CHECK_INT(stream_read(active, &r, -1, 0, &c), STREAM_REFUSED);
    CHECK_INT(stream_read(active, &r, INT64_MIN, 0, &c), STREAM_REFUSED);
    CHECK_INT(stream_read(active, &r, 3, 0, &c), STREAM_REFUSED);
    CHECK_INT(stream_read(active, &r, INT64_MAX, 0, &c), STREAM_REFUSED);
    CHECK_INT(stream_read(active, &r, 2, 0, &c), STREAM_TIMEOUT);
    CHECK_INT(stream_read(active, &r, 1, 0, &c), STREAM_CHUNK);
    CHECK_INT(c.seq, 1);

    stream_unref(active);
    stream_unref(done);
    session_unref(s);
    stream_registry_shutdown();
    session_registry_shutdown();
    store_close(store);
}

int main(void)
{
    test_parse();
    char tmpdir[64], dbpath[128];
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mcpd-test-cursor-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(dbpath, sizeof dbpath, "%s/db/mcpd.db", tmpdir);
    test_streams(dbpath);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", tmpdir);
    return check_summary();
}
