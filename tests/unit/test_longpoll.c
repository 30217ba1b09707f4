/* test_longpoll — long-polling (longpoll.c), driven through core_receive
 * as a transport drives it, on a real SQLite store and the built-in
 * toolset (core_rig.h). The rules it covers:
 *
 * - "stream": true on a request answers at once with a handle naming the
 *   request's stream (stored before it has a message), also for a request
 *   answered on the spot;
 * - mcpd/poll answers with one message (a reply of kind CORE_STREAM marked
 *   single): the chunks from from_seq on, in seq order and contiguous, at
 *   most max_chunks (0 counts as 1), each with its seq, message and end;
 *   has_more, next_seq and the state ("initializing" before the first
 *   message);
 * - cursors: from_seq defaults to 0; an old cursor reads the same chunks
 *   again; a cursor at or past the end of an ended stream reads nothing
 *   (it is not refused); past the end of a stream still being written, a
 *   negative or non-integer from_seq, or no stream_id, is -32602; an
 *   unknown stream or another session's is -32001 with its stream_id;
 * - parking: a poll that finds nothing waits (wait_ms) and is answered by
 *   the next chunk, by the stream's end, or at its deadline; parked polls
 *   count against the session's in-flight cap (-32015) and give their
 *   place back before their answer is read; core_stop answers every parked
 *   poll at once;
 * - a poll's answer is stored past the session's storage cap;
 * - mcpd/chunk notifications for push transports (poll_chunk_notification). */
#include "call.h"
#include "core_rig.h"
#include "longpoll.h"

static const struct core_config cfg = {
    .session_idle_ms = 600000,
    .stream_retention_ms = 600000,
    .session_max_bytes = 64 * 1024,
    .max_inflight = 2,
    .max_workers = 8,
    .server_name = "mcpd-unit",
    .server_version = "test",
};

/* A call that runs until it is cancelled (a minute: the most countdown
 * takes between messages). */
#define LONG_MS 60000

/* Sends mcpd/poll with `params` (JSON text); *r is the reply. */
static void poll_send(const struct core_caller *c, int id, const char *params, struct core_reply *r)
{
    rig_sendf(c, r, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"mcpd/poll\",\"params\":%s}", id,
              params);
}

/* A poll's answer (new reference), or NULL. */
static json_t *poll_now(const struct core_caller *c, int id, const char *params)
{
    struct core_reply r;
    poll_send(c, id, params, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    CHECK(r.single);
    return rig_one(&r);
}

/* The same, on stream `sid` from from_seq with wait_ms and max_chunks
 * (< 0: left out). */
static json_t *poll_at(const struct core_caller *c, int id, const char *sid, int from, int wait_ms,
                       int max_chunks)
{
    char params[256], extra[64] = "";
    if (max_chunks >= 0)
        snprintf(extra, sizeof extra, ",\"max_chunks\":%d", max_chunks);
    snprintf(params, sizeof params, "{\"stream_id\":\"%s\",\"from_seq\":%d,\"wait_ms\":%d%s}", sid,
             from, wait_ms, extra);
    return poll_now(c, id, params);
}

static json_t *result_of(json_t *m)
{
    return json_object_get(m, "result");
}

static json_int_t int_of(json_t *obj, const char *key)
{
    return json_integer_value(json_object_get(obj, key));
}

static const char *state_of(json_t *m)
{
    return json_string_value(json_object_get(result_of(m), "state"));
}

static size_t nchunks(json_t *m)
{
    return json_array_size(json_object_get(result_of(m), "chunks"));
}

static int has_more(json_t *m)
{
    return json_is_true(json_object_get(result_of(m), "has_more"));
}

static json_t *chunk(json_t *m, size_t i)
{
    return json_array_get(json_object_get(result_of(m), "chunks"), i);
}

static void countdown(const struct core_caller *c, int id, int n, int interval_ms, int progress,
                      int opt_in, struct core_reply *r)
{
    rig_sendf(c, r,
              "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":"
              "\"countdown\",\"arguments\":{\"n\":%d,\"interval_ms\":%d}%s%s}}",
              id, n, interval_ms, progress ? ",\"_meta\":{\"progressToken\":\"p\"}" : "",
              opt_in ? ",\"stream\":true" : "");
}

static void cancel(const struct core_caller *c, int id)
{
    struct core_reply r;
    rig_sendf(c, &r,
              "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
              "\"requestId\":%d}}",
              id);
    CHECK_INT(r.kind, CORE_ACCEPTED);
    core_reply_clear(&r);
}

static void count_chunk(void *arg, int64_t seq, const char *msg, size_t len, int is_end)
{
    (void)seq;
    (void)msg;
    (void)len;
    (void)is_end;
    (*(int *)arg)++;
}

/* The handle of an opted-in request; *sid gets its stream id. */
static void take_handle(struct core_reply *r, int id, char *sid, size_t cap)
{
    CHECK_INT(r->kind, CORE_STREAM);
    CHECK(r->ack != NULL);
    json_t *res = result_of(r->ack);
    CHECK_INT(int_of(r->ack, "id"), id);
    CHECK_STR(json_string_value(json_object_get(res, "status")), "streaming_started");
    CHECK_STR(json_string_value(json_object_get(res, "transport")), "http");
    const char *named = json_string_value(json_object_get(res, "stream_id"));
    CHECK(named && r->stream && strcmp(named, stream_id(r->stream)) == 0);
    snprintf(sid, cap, "%s", named ? named : "");
}

static void test_opt_in(void)
{
    struct session *s;
    struct core_caller c;
    if (rig_open("{}", &s, &c) != 0)
        return;
    struct core_reply r;
    char sid[96];

    countdown(&c, 1, 1, LONG_MS, 0, 1, &r);
    take_handle(&r, 1, sid, sizeof sid);
    core_reply_clear(&r);
    /* The handle names a stream that is stored already, though empty. */
    struct store_stream row;
    int stored = 0;
    CHECK_INT(store_stream_get(rig.store, sid, &row, count_chunk, &stored), 0);
    CHECK_STR(row.state, "active");
    store_stream_free(&row);
    CHECK_INT(stored, 0);

    /* Nothing yet: "initializing", more to come, next_seq 0. */
    char params[160];
    snprintf(params, sizeof params, "{\"stream_id\":\"%s\"}", sid); /* from_seq 0 */
    json_t *m = poll_now(&c, 2, params);
    CHECK_INT(int_of(m, "id"), 2);
    CHECK_STR(json_string_value(json_object_get(result_of(m), "stream_id")), sid);
    CHECK_INT(nchunks(m), 0);
    CHECK(has_more(m));
    CHECK_INT(int_of(result_of(m), "next_seq"), 0);
    CHECK_STR(state_of(m), "initializing");
    json_decref(m);

    /* A poll that waits and gets nothing is answered at its deadline. */
    m = poll_at(&c, 3, sid, 0, 50, -1);
    CHECK_INT(nchunks(m), 0);
    CHECK_STR(state_of(m), "initializing");
    json_decref(m);

    /* Refused cursors and params: -32602. */
    char bad[4][160];
    snprintf(bad[0], sizeof bad[0], "{\"stream_id\":\"%s\",\"from_seq\":1}", sid);
    snprintf(bad[1], sizeof bad[1], "{\"stream_id\":\"%s\",\"from_seq\":-1}", sid);
    snprintf(bad[2], sizeof bad[2], "{\"stream_id\":\"%s\",\"from_seq\":\"0\"}", sid);
    snprintf(bad[3], sizeof bad[3], "{\"from_seq\":0}");
    for (size_t i = 0; i < 4; i++) {
        m = poll_now(&c, 4, bad[i]);
        CHECK_INT(rig_code(m), JSONRPC_INVALID_PARAMS);
        CHECK_INT(int_of(m, "id"), 4);
        json_decref(m);
    }

    /* A request answered on the spot honours the opt-in too. */
    rig_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"params\":{\"stream\":true}}",
             &r);
    char ping_sid[96];
    take_handle(&r, 5, ping_sid, sizeof ping_sid);
    core_reply_clear(&r);
    m = poll_at(&c, 6, ping_sid, 0, 0, -1);
    CHECK_INT(nchunks(m), 1);
    CHECK_INT(int_of(json_object_get(chunk(m, 0), "message"), "id"), 5);
    CHECK_STR(state_of(m), "finished");
    json_decref(m);

    /* The end of a stream answers a waiting poll: cancelled, it ended
     * without a message ("error", nothing more). */
    cancel(&c, 1);
    m = poll_at(&c, 7, sid, 0, 30000, -1);
    CHECK_INT(nchunks(m), 0);
    CHECK(!has_more(m));
    CHECK_STR(state_of(m), "error");
    json_decref(m);
    rig_end(s);
}

static void test_cursors(void)
{
    struct session *s = rig_session(NULL, "{}");
    struct session *other = rig_session(NULL, "{}");
    CHECK(s && other);
    if (!s || !other)
        return;
    struct core_caller c = rig_http(NULL, session_id(s));
    struct core_reply r;
    char sid[96];

    countdown(&c, 1, 3, 0, 1, 1, &r);
    take_handle(&r, 1, sid, sizeof sid);
    struct follow f = {0};
    follow_reply(&f, &r, 0); /* a reader of its own does not disturb polls */
    core_reply_clear(&r);
    enum follow_event last;
    json_t *msgs = rig_read_follow(&f, &last);
    follow_end(&f);
    CHECK_INT(last, FOLLOW_STREAM_ENDED);
    CHECK_INT(json_array_size(msgs), 4);

    /* Every chunk, in order, the last one the end. */
    json_t *all = poll_at(&c, 2, sid, 0, 0, -1);
    CHECK_INT(nchunks(all), 4);
    int ok = nchunks(all) == 4;
    for (size_t i = 0; ok && i < 4; i++) {
        json_t *ch = chunk(all, i);
        ok = int_of(ch, "seq") == (json_int_t)i &&
             json_is_true(json_object_get(ch, "end")) == (i == 3) &&
             json_equal(json_object_get(ch, "message"), json_array_get(msgs, i));
    }
    CHECK(ok);
    CHECK(!has_more(all));
    CHECK_INT(int_of(result_of(all), "next_seq"), 4);
    CHECK_STR(state_of(all), "finished");
    json_decref(msgs);

    /* An old cursor reads the same again: polls consume nothing. */
    json_t *m = poll_at(&c, 2, sid, 0, 0, -1);
    CHECK(json_equal(m, all));
    json_decref(m);
    json_decref(all);

    /* max_chunks pages through it; next_seq is where to go on. */
    m = poll_at(&c, 3, sid, 0, 0, 2);
    CHECK_INT(nchunks(m), 2);
    CHECK_INT(int_of(chunk(m, 1), "seq"), 1);
    CHECK(has_more(m));
    CHECK_INT(int_of(result_of(m), "next_seq"), 2);
    json_decref(m);
    m = poll_at(&c, 4, sid, 2, 0, 2);
    CHECK_INT(nchunks(m), 2);
    CHECK_INT(int_of(chunk(m, 0), "seq"), 2);
    CHECK(!has_more(m));
    CHECK_INT(int_of(result_of(m), "next_seq"), 4);
    json_decref(m);
    m = poll_at(&c, 5, sid, 1, 0, 0); /* 0 counts as 1 */
    CHECK_INT(nchunks(m), 1);
    CHECK_INT(int_of(chunk(m, 0), "seq"), 1);
    CHECK_INT(int_of(result_of(m), "next_seq"), 2);
    json_decref(m);

    /* At or past the end of an ended stream: nothing, and nothing more. */
    int ends[] = {4, 9};
    for (size_t i = 0; i < 2; i++) {
        m = poll_at(&c, 6, sid, ends[i], 1000, -1);
        CHECK(json_object_get(m, "error") == NULL);
        CHECK_INT(nchunks(m), 0);
        CHECK(!has_more(m));
        CHECK_STR(state_of(m), "finished");
        json_decref(m);
    }

    /* An unknown stream, and another session's: -32001 naming it. */
    const char *unknown = "0123456789abcdef0123456789abcdef";
    m = poll_at(&c, 7, unknown, 0, 0, -1);
    CHECK_INT(rig_code(m), JSONRPC_SESSION_NOT_FOUND);
    CHECK_STR(rig_message(m), "Stream session not found or expired");
    json_t *data = json_object_get(json_object_get(m, "error"), "data");
    CHECK_STR(json_string_value(json_object_get(data, "stream_id")), unknown);
    CHECK_STR(json_string_value(json_object_get(data, "transport")), "http");
    json_decref(m);
    struct core_caller elsewhere = rig_http(NULL, session_id(other));
    m = poll_at(&elsewhere, 8, sid, 0, 0, -1);
    CHECK_INT(rig_code(m), JSONRPC_SESSION_NOT_FOUND);
    json_decref(m);

    rig_end(s);
    rig_end(other);
}

/* A parked poll is answered by the chunk it waits for. */
static void test_wake(void)
{
    struct session *s;
    struct core_caller c;
    if (rig_open("{\"sampling\":{}}", &s, &c) != 0)
        return;
    struct core_reply r;
    char sid[96];
    rig_send(&c,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"test_sampling\",\"arguments\":{\"prompt\":\"hi\"},\"stream\":true}}",
             &r);
    take_handle(&r, 1, sid, sizeof sid);
    core_reply_clear(&r);

    /* The server's request (at once, or as soon as it is written). */
    json_t *m = poll_at(&c, 2, sid, 0, 30000, -1);
    CHECK_INT(nchunks(m), 1);
    json_t *req = json_object_get(chunk(m, 0), "message");
    CHECK_STR(json_string_value(json_object_get(req, "method")), "sampling/createMessage");
    CHECK(!json_is_true(json_object_get(chunk(m, 0), "end")));
    CHECK(has_more(m));
    CHECK_STR(state_of(m), "active");
    CHECK_INT(int_of(result_of(m), "next_seq"), 1);
    char *rid = json_dumps(json_object_get(req, "id"), JSON_ENCODE_ANY);
    json_decref(m);

    /* Nothing after it until the client answers: the next poll waits. */
    char params[160];
    snprintf(params, sizeof params, "{\"stream_id\":\"%s\",\"from_seq\":1,\"wait_ms\":30000}", sid);
    poll_send(&c, 3, params, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    struct follow f = {0};
    follow_reply(&f, &r, 0);
    core_reply_clear(&r);
    struct stream_chunk ch;
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_IDLE);
    rig_sendf(&c, &r,
              "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"role\":\"assistant\",\"content\":{"
              "\"type\":\"text\",\"text\":\"hello\"},\"model\":\"unit\"}}",
              rid ? rid : "null");
    free(rid);
    CHECK_INT(r.kind, CORE_ACCEPTED);
    core_reply_clear(&r);
    m = rig_next(&f);
    follow_end(&f);
    CHECK_INT(int_of(m, "id"), 3);
    CHECK_INT(nchunks(m), 1);
    CHECK_INT(int_of(chunk(m, 0), "seq"), 1);
    CHECK(json_is_true(json_object_get(chunk(m, 0), "end")));
    CHECK_STR(rig_text(json_object_get(chunk(m, 0), "message")), "LLM response: hello");
    CHECK(!has_more(m));
    CHECK_INT(int_of(result_of(m), "next_seq"), 2);
    CHECK_STR(state_of(m), "finished");
    json_decref(m);
    rig_end(s);
}

/* Parked polls count against the session's in-flight cap (2 here). */
static void test_cap(void)
{
    struct session *s;
    struct core_caller c;
    if (rig_open("{}", &s, &c) != 0)
        return;
    struct core_reply r, parked;
    char sid[96];
    countdown(&c, 1, 1, LONG_MS, 0, 1, &r);
    take_handle(&r, 1, sid, sizeof sid);
    core_reply_clear(&r);
    char params[160];
    snprintf(params, sizeof params, "{\"stream_id\":\"%s\",\"from_seq\":0,\"wait_ms\":30000}", sid);
    poll_send(&c, 2, params, &parked);
    CHECK_INT(parked.kind, CORE_STREAM);

    /* At the cap: a call, and a poll that would wait, are refused; a poll
     * that does not wait is answered. */
    countdown(&c, 3, 1, 0, 0, 0, &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_TOO_MANY);
    CHECK_INT(rig_code(r.error), JSONRPC_TOO_MANY_IN_FLIGHT);
    core_reply_clear(&r);
    poll_send(&c, 4, params, &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_TOO_MANY);
    CHECK_INT(rig_code(r.error), JSONRPC_TOO_MANY_IN_FLIGHT);
    CHECK_INT(int_of(r.error, "id"), 4);
    core_reply_clear(&r);
    json_t *m = poll_at(&c, 5, sid, 0, 0, -1);
    CHECK_INT(nchunks(m), 0);
    json_decref(m);

    /* The call ends: the parked poll is answered with the end (not at its
     * deadline), and both places are free once that answer is read. */
    cancel(&c, 1);
    m = rig_one(&parked);
    CHECK_STR(state_of(m), "error");
    json_decref(m);
    countdown(&c, 6, 1, LONG_MS, 0, 0, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    core_reply_clear(&r);
    countdown(&c, 7, 1, LONG_MS, 0, 0, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    core_reply_clear(&r);
    cancel(&c, 6);
    cancel(&c, 7);
    rig_end(s);
}

/* A parked poll gives its place back before its answer can be read: a
 * client at the cap that polls again as soon as it has the answer is not
 * refused. Longpoll once answered first and gave the place back after, so
 * such a poll was refused (429) now and then: the rounds make that likely
 * enough to be seen in every run. */
#define ROUNDS 128

static void test_place_freed_first(void)
{
    struct session *s;
    struct core_caller c;
    if (rig_open("{}", &s, &c) != 0)
        return;
    struct core_reply r, parked;
    countdown(&c, 1, 1, LONG_MS, 0, 0, &r); /* holds one of the two places */
    CHECK_INT(r.kind, CORE_STREAM);
    core_reply_clear(&r);
    struct stream *sa = session_standalone(s);
    struct call *channel = call_channel(session_id(s));
    CHECK(sa && channel);
    if (!sa || !channel) {
        stream_unref(sa);
        rig_end(s);
        return;
    }
    char params[160];
    snprintf(params, sizeof params, "{\"stream_id\":\"%s\",\"from_seq\":0,\"wait_ms\":30000}",
             stream_id(sa));
    poll_send(&c, 100, params, &parked);
    int answered = 0, refused = 0;
    for (int i = 0; i < ROUNDS && parked.kind == CORE_STREAM; i++) {
        call_send(channel, json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", "unit/round"));
        json_t *m = rig_one(&parked);
        answered += nchunks(m) == 1 && int_of(chunk(m, 0), "seq") == i;
        json_decref(m);
        snprintf(params, sizeof params, "{\"stream_id\":\"%s\",\"from_seq\":%d,\"wait_ms\":30000}",
                 stream_id(sa), i + 1);
        poll_send(&c, 101 + i, params, &parked);
        refused += parked.kind != CORE_STREAM;
    }
    CHECK_INT(answered, ROUNDS);
    CHECK_INT(refused, 0);
    core_reply_clear(&parked);
    call_release(channel);
    stream_unref(sa);
    cancel(&c, 1);
    rig_end(s);
}

/* Over the session's storage cap a poll is still answered. */
static void test_past_storage_cap(void)
{
    struct session *s;
    struct core_caller c;
    if (rig_open("{}", &s, &c) != 0)
        return;
    struct core_reply r;
    char sid[96];
    countdown(&c, 1, 10000, 0, 1, 1, &r);
    take_handle(&r, 1, sid, sizeof sid);
    enum follow_event last;
    json_t *msgs = rig_read_reply(&r, &last);
    json_t *final = json_array_get(msgs, json_array_size(msgs) - 1);
    CHECK_STR(rig_message(final), "Session storage limit exceeded");
    json_decref(msgs);
    json_t *m = poll_at(&c, 2, sid, 0, 0, 1);
    CHECK_INT(nchunks(m), 1);
    CHECK_STR(state_of(m), "error");
    json_decref(m);
    rig_end(s);
}

static void test_chunk_notification(void)
{
    struct session *s = rig_session(NULL, "{}");
    CHECK(s != NULL);
    if (!s)
        return;
    struct stream *st = session_standalone(s);
    json_t *n = poll_chunk_notification(st, 3, "{\"a\":1}", 7, 1);
    CHECK_STR(json_string_value(json_object_get(n, "method")), "mcpd/chunk");
    json_t *p = json_object_get(n, "params");
    CHECK_STR(json_string_value(json_object_get(p, "stream_id")), stream_id(st));
    CHECK_INT(int_of(p, "seq"), 3);
    CHECK_INT(int_of(json_object_get(p, "message"), "a"), 1);
    CHECK(json_is_true(json_object_get(p, "end")));
    json_decref(n);
    CHECK(poll_chunk_notification(st, 0, "{not json", 9, 0) == NULL);
    stream_unref(st);
    rig_end(s);
}

int main(void)
{
    if (rig_start("test-longpoll", &cfg) != 0)
        return 2;
    test_opt_in();
    test_cursors();
    test_wake();
    test_cap();
    test_place_freed_first();
    test_past_storage_cap();
    test_chunk_notification();

    /* A poll on a stream that never ends (the session's standalone one),
     * woken by a message there; then one parked at core_stop is answered
     * at once, with what the stream holds. */
    struct session *s = rig_session(NULL, "{}");
    struct core_caller c = rig_http(NULL, s ? session_id(s) : "-");
    struct stream *st = s ? session_standalone(s) : NULL;
    char params[160];
    snprintf(params, sizeof params, "{\"stream_id\":\"%s\",\"from_seq\":0,\"wait_ms\":30000}",
             st ? stream_id(st) : "");
    struct core_reply r;
    poll_send(&c, 1, params, &r);
    struct call *channel = call_channel(s ? session_id(s) : "-");
    CHECK(channel != NULL);
    if (channel) {
        CHECK_INT(call_send(channel, json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method",
                                               "notifications/tools/list_changed")),
                  0);
        call_release(channel);
    }
    json_t *m = rig_one(&r);
    CHECK_INT(nchunks(m), 1);
    CHECK(has_more(m));
    CHECK_STR(state_of(m), "active");
    json_decref(m);
    snprintf(params, sizeof params, "{\"stream_id\":\"%s\",\"from_seq\":1,\"wait_ms\":30000}",
             st ? stream_id(st) : "");
    poll_send(&c, 2, params, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    core_stop(5000);
    m = rig_one(&r);
    CHECK_INT(int_of(m, "id"), 2);
    CHECK_INT(nchunks(m), 0);
    CHECK(has_more(m));
    CHECK_INT(int_of(result_of(m), "next_seq"), 1);
    json_decref(m);
    stream_unref(st);
    session_unref(s);
    rig_cleanup();
    return check_summary();
}
