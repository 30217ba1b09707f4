/* test_receive — the core's request path (receive.c, call.c, relay.c),
 * driven through core_receive as a transport drives it, on a real SQLite
 * store and the built-in toolset (core_rig.h). The rules it covers:
 *
 * - initialize makes a session (stored, its reply one message); it is
 *   refused with a session id, without params.protocolVersion, and with
 *   params over --max-init-params;
 * - the entry's rules: no session id (400, or the transport's own words),
 *   an unknown session (404, the request's id only on a connection), a
 *   message that is not JSON-RPC, a connection before initialize (ping
 *   answered, requests refused, notifications dropped), batches (2025-03-26
 *   only, never initialize, replies in order);
 * - principals: another principal's session does not exist for it (404 for
 *   requests, notifications, cancellation, responses, resumes and batches;
 *   "" is no principal), and the per-principal session cap (429, -32010)
 *   frees when a session ends, as the server's (503, -32010) does;
 * - caps: requests in flight per session (429, -32015) count only calls on
 *   workers (not pings, not tools that answer at once), refuse a reused id
 *   while it runs, and free when a call ends; the session's storage cap
 *   ends a call with "Session storage limit exceeded", and a final message
 *   over it becomes that error;
 * - a tools/call's reply is a durable stream: its chunks are in the store
 *   in order, and a resumed cursor (core_resume, follow_open) re-reads
 *   from the position after the one it names; bad, foreign and unknown
 *   cursors are refused as stream.h says;
 * - cancellation: notifications/cancelled ends a running call's stream
 *   without a reply (also while it waits on the client, whose late answer
 *   is then refused); unknown, finished, malformed and "7"-for-7 ids are
 *   harmless; ending the session cancels its calls; a shutdown ends a call
 *   with "Request interrupted by server shutdown";
 * - server->client requests (test_sampling): the request goes out on the
 *   call's stream, the client's result or error comes back through
 *   core_receive, a response nobody waits for is refused, and
 *   core_client_gone answers the pending ones for the client;
 * - the legacy relay (core_relay, relay_catch_up): a request's messages
 *   reach the standalone stream in order, refusals and poll handles at
 *   once, the relay's progress is stored, and a past process's uncopied
 *   messages are copied once;
 * - the standalone stream has one reader: a live holder keeps it (409
 *   once the probe's time is up), a vanished one fails the probe and the
 *   claimant takes over;
 * - a call's logs are kept from the session's logging/setLevel up;
 * - 2026-07-28 stateless requests: server/discover, the _meta checks
 *   (-32602, -32022), methods and capabilities it lacks (-32601, -32021),
 *   a request's own session that ends with its reply, and on a connection
 *   before and after initialize;
 * - an id too long to track is refused;
 * - the same request path on a loop fiber, as HTTP runs it. */
#include "core_rig.h"
#include "loop.h"
#include "randid.h"
#include "relay.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

static const struct core_config cfg = {
    .session_idle_ms = 600000,
    .stream_retention_ms = 600000,
    .session_max_bytes = 64 * 1024,
    .max_sessions = 16,
    .max_init_params = 4096,
    .max_inflight = 2,
    .max_sessions_per_principal = 2,
    .max_workers = 8,
    .server_name = "mcpd-unit",
    .server_version = "test",
};

/* A call that runs until it is cancelled (a minute: the most countdown
 * takes between messages). */
#define LONG_MS 60000

static void countdown(const struct core_caller *c, int id, int n, int interval_ms, int progress,
                      struct core_reply *r)
{
    rig_sendf(c, r,
              "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":"
              "\"countdown\",\"arguments\":{\"n\":%d,\"interval_ms\":%d}%s}}",
              id, n, interval_ms, progress ? ",\"_meta\":{\"progressToken\":\"p\"}" : "");
}

/* notifications/cancelled for request `id` (JSON text); the kind core_receive answered. */
static enum core_kind cancel(const struct core_caller *c, const char *id)
{
    struct core_reply r;
    rig_sendf(c, &r,
              "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
              "\"requestId\":%s,\"reason\":\"unit\"}}",
              id);
    enum core_kind k = r.kind;
    CHECK(r.notification);
    core_reply_clear(&r);
    return k;
}

static void ping(const struct core_caller *c, int id, struct core_reply *r)
{
    rig_sendf(c, r, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}", id);
}

/* ---- initialize ---- */

static void test_initialize(void)
{
    struct core_caller c = rig_http(NULL, NULL);
    struct core_reply r;
    rig_send(&c,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
             "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
             "\"clientInfo\":{\"name\":\"unit\",\"version\":\"1\"}}}",
             &r);
    CHECK_INT(r.kind, CORE_STREAM);
    CHECK(!r.notification && !r.ephemeral);
    struct session *s = r.session;
    CHECK(s != NULL);
    if (!s) {
        core_reply_clear(&r);
        return;
    }
    session_ref(s);
    /* The reply names the session it made, for the client. */
    CHECK(r.session_made && strcmp(r.session_made, session_id(s)) == 0);
    json_t *m = rig_one(&r);
    json_t *result = json_object_get(m, "result");
    CHECK_INT(json_integer_value(json_object_get(m, "id")), 1);
    CHECK_STR(json_string_value(json_object_get(result, "protocolVersion")), "2025-06-18");
    CHECK(json_object_get(json_object_get(result, "capabilities"), "logging") != NULL);
    CHECK_STR(json_string_value(json_object_get(json_object_get(result, "serverInfo"), "name")),
              "mcpd-unit");
    json_decref(m);

    /* Stored before its id is handed out, with who opened it. */
    struct store_session row;
    CHECK_INT(store_session_get(rig.store, session_id(s), &row), 0);
    CHECK_STR(row.protocol_version, "2025-06-18");
    CHECK_STR(row.transport, "http");
    store_session_free(&row);

    /* The client names it from now on. */
    struct core_caller in = rig_http(NULL, session_id(s));
    struct core_reply refused;
    struct session *found = core_session_open(&in, &refused);
    CHECK(found == s);
    session_unref(found);
    rig_send(&in, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &r);
    CHECK_INT(r.kind, CORE_ACCEPTED);
    CHECK(r.notification);
    CHECK(r.session == s);
    CHECK(r.session_made == NULL); /* named by the client: made before */
    core_reply_clear(&r);
    CHECK(session_initialized(s));

    /* Not on a session: over HTTP, nor on a connection that has one. */
    rig_send(&in,
             "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{"
             "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{}}}",
             &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_BAD_REQUEST);
    CHECK_INT(rig_code(r.error), JSONRPC_INVALID_REQUEST);
    CHECK_STR(rig_message(r.error),
              "Invalid Request: initialize must be sent without a session id");
    CHECK_INT(json_integer_value(json_object_get(r.error, "id")), 2);
    core_reply_clear(&r);
    in.connection = 1;
    rig_send(&in,
             "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":{"
             "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{}}}",
             &r);
    CHECK_STR(rig_message(r.error), "Invalid Request: this connection already has a session");
    core_reply_clear(&r);

    /* Without params.protocolVersion: no session. */
    rig_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"initialize\",\"params\":{}}", &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_BAD_REQUEST);
    CHECK_INT(rig_code(r.error), JSONRPC_INVALID_PARAMS);
    CHECK(r.session == NULL);
    core_reply_clear(&r);

    /* Params over --max-init-params (4096 here): 413, -32011. */
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    json_t *msg = json_pack("{s:s, s:i, s:s, s:{s:s, s:{}, s:{s:s, s:s}}}", "jsonrpc", "2.0", "id",
                            5, "method", "initialize", "params", "protocolVersion", "2025-06-18",
                            "capabilities", "clientInfo", "name", big, "version", "1");
    core_receive(&c, msg, &r);
    json_decref(msg);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_TOO_LARGE);
    CHECK_INT(rig_code(r.error), JSONRPC_INIT_PARAMS_TOO_LARGE);
    CHECK(r.session == NULL);
    core_reply_clear(&r);

    rig_end(s);
}

/* ---- the entry's rules ---- */

static void test_entry(void)
{
    struct core_caller c = rig_http(NULL, NULL);
    struct core_reply r;
    const char *list = "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\"}";

    /* No session id: 400 with id null over HTTP, in the transport's words
     * when it has some. */
    rig_send(&c, list, &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_BAD_REQUEST);
    CHECK_INT(rig_code(r.error), JSONRPC_SERVER_ERROR);
    CHECK_STR(rig_message(r.error), "Bad Request: a session id is required");
    CHECK(json_is_null(json_object_get(r.error, "id")));
    core_reply_clear(&r);
    c.session_required = "Bad Request: say which session";
    rig_send(&c, list, &r);
    CHECK_STR(rig_message(r.error), "Bad Request: say which session");
    core_reply_clear(&r);
    c.session_required = NULL;

    /* An unknown session: 404, -32001; only a connection names the id. */
    c.session_id = "0123456789abcdef0123456789abcdef";
    rig_send(&c, list, &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_NOT_FOUND);
    CHECK_INT(rig_code(r.error), JSONRPC_SESSION_NOT_FOUND);
    CHECK(json_is_null(json_object_get(r.error, "id")));
    CHECK(r.session == NULL);
    core_reply_clear(&r);
    rig_send(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &r);
    CHECK_INT(r.reason, CORE_NOT_FOUND);
    CHECK(r.notification);
    core_reply_clear(&r);
    c.connection = 1;
    rig_send(&c, list, &r);
    CHECK_INT(r.reason, CORE_NOT_FOUND);
    CHECK_INT(json_integer_value(json_object_get(r.error, "id")), 5);
    core_reply_clear(&r);

    /* Not JSON-RPC: 400; the id is named on a connection only. */
    const char *bad = "{\"jsonrpc\":\"1.0\",\"id\":6,\"method\":\"ping\"}";
    rig_send(&c, bad, &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_BAD_REQUEST);
    CHECK(rig_code(r.error) != 0);
    CHECK_INT(json_integer_value(json_object_get(r.error, "id")), 6);
    core_reply_clear(&r);
    c.connection = 0;
    rig_send(&c, bad, &r);
    CHECK(json_is_null(json_object_get(r.error, "id")));
    core_reply_clear(&r);

    /* A request id too long to track: 400, id null. */
    struct session *s = rig_session(NULL, "{}");
    struct core_caller in = rig_http(NULL, s ? session_id(s) : "-");
    char longid[200];
    memset(longid, 'i', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    rig_sendf(&in, &r,
              "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":\"tools/call\",\"params\":{"
              "\"name\":\"echo\",\"arguments\":{\"message\":\"x\"}}}",
              longid);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_BAD_REQUEST);
    CHECK_STR(rig_message(r.error), "Invalid Request: id is too long");
    core_reply_clear(&r);
    rig_end(s);

    /* A connection before initialize: ping is answered, other requests
     * are told to initialize, notifications are dropped. */
    struct core_caller conn = {.transport = "ws", .connection = 1};
    ping(&conn, 7, &r);
    CHECK_INT(r.kind, CORE_ANSWERED);
    CHECK(json_is_object(json_object_get(r.error, "result")));
    CHECK_INT(json_integer_value(json_object_get(r.error, "id")), 7);
    core_reply_clear(&r);
    rig_send(&conn, list, &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(rig_code(r.error), JSONRPC_INVALID_REQUEST);
    CHECK_STR(rig_message(r.error), "Invalid Request: send initialize first");
    core_reply_clear(&r);
    rig_send(&conn, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &r);
    CHECK_INT(r.kind, CORE_ACCEPTED);
    CHECK(r.notification);
    core_reply_clear(&r);
}

struct batch_seen {
    int n;
    enum core_kind kinds[4];
    int notification[4];
    int with_session;
    json_t *errors; /* the refusals' errors, in order */
};

static void batch_each(void *ud, struct core_reply *r)
{
    struct batch_seen *b = ud;
    if (b->n < 4) {
        b->kinds[b->n] = r->kind;
        b->notification[b->n] = r->notification;
    }
    b->n++;
    b->with_session += r->session != NULL;
    if (r->kind == CORE_REJECTED)
        json_array_append(b->errors, r->error);
    core_reply_clear(r);
}

static void test_batch(void)
{
    struct session *s = rig_session_on(NULL, "2025-03-26", "{}", "http");
    struct session *newer = rig_session(NULL, "{}");
    CHECK(s && newer);
    if (!s || !newer)
        return;
    struct core_caller c = rig_http(NULL, session_id(s));
    struct core_reply refused;
    struct batch_seen b = {.errors = json_array()};
    c.each = batch_each;
    c.each_ud = &b;

    json_t *empty = json_array();
    core_receive(&c, empty, &refused);
    CHECK_INT(refused.kind, CORE_REJECTED);
    CHECK_INT(refused.reason, CORE_BAD_REQUEST);
    CHECK_STR(rig_message(refused.error), "Invalid Request: empty batch");
    core_reply_clear(&refused);

    json_t *batch =
        json_loads("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},"
                   "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{"
                   "\"protocolVersion\":\"2025-03-26\",\"capabilities\":{}}},"
                   "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}]",
                   0, NULL);
    /* Only 2025-03-26 has batches. */
    struct core_caller other = c;
    other.session_id = session_id(newer);
    core_receive(&other, batch, &refused);
    CHECK_INT(refused.kind, CORE_REJECTED);
    CHECK_STR(rig_message(refused.error),
              "Invalid Request: batches are only accepted on 2025-03-26 sessions");
    core_reply_clear(&refused);
    CHECK_INT(b.n, 0);

    /* One reply per element, in order, each with its session; initialize
     * is never batched. */
    core_receive(&c, batch, &refused);
    CHECK_INT(refused.kind, CORE_ACCEPTED);
    CHECK(refused.error == NULL && refused.session == NULL);
    CHECK_INT(b.n, 3);
    CHECK_INT(b.kinds[0], CORE_STREAM);
    CHECK_INT(b.kinds[1], CORE_REJECTED);
    CHECK_INT(b.kinds[2], CORE_ACCEPTED);
    CHECK(!b.notification[0] && !b.notification[1] && b.notification[2]);
    CHECK_INT(b.with_session, 3);
    CHECK_STR(rig_message(json_array_get(b.errors, 0)),
              "Invalid Request: initialize must not be batched");

    /* Another principal's session refuses the whole batch. */
    struct core_caller stranger = c;
    stranger.principal = "mallory";
    core_receive(&stranger, batch, &refused);
    CHECK_INT(refused.kind, CORE_REJECTED);
    CHECK_INT(refused.reason, CORE_NOT_FOUND);
    core_reply_clear(&refused);
    CHECK_INT(b.n, 3);

    /* A caller that takes no batches refuses them. */
    struct core_caller single = rig_http(NULL, session_id(s));
    core_receive(&single, batch, &refused);
    CHECK_INT(refused.kind, CORE_REJECTED);
    CHECK_STR(rig_message(refused.error), "Invalid Request: batches are not accepted here");
    core_reply_clear(&refused);
    CHECK_INT(b.n, 3);

    json_decref(batch);
    json_decref(empty);
    json_decref(b.errors);
    rig_end(s);
    rig_end(newer);
}

/* ---- principals ---- */

static void test_principals(void)
{
    struct session *a = rig_session("alice", "{}");
    struct session *anon = rig_session(NULL, "{}");
    CHECK(a && anon);
    if (!a || !anon)
        return;
    const char *sid = session_id(a);
    struct core_reply r;

    /* Another principal's session, or a session with a principal when
     * there is none, does not exist for the caller. */
    const char *strangers[] = {"bob", NULL, ""};
    for (size_t i = 0; i < 3; i++) {
        struct core_caller c = rig_http(strangers[i], sid);
        ping(&c, 1, &r);
        CHECK_INT(r.kind, CORE_REJECTED);
        CHECK_INT(r.reason, CORE_NOT_FOUND);
        CHECK_INT(rig_code(r.error), JSONRPC_SESSION_NOT_FOUND);
        CHECK(r.session == NULL);
        core_reply_clear(&r);
    }
    struct core_caller alice = rig_http("alice", sid);
    ping(&alice, 1, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    CHECK(r.session == a);
    json_t *m = rig_one(&r);
    CHECK(json_is_object(json_object_get(m, "result")));
    json_decref(m);

    /* A session opened without a principal is not alice's; "" is none. */
    struct core_caller c = rig_http("alice", session_id(anon));
    ping(&c, 2, &r);
    CHECK_INT(r.reason, CORE_NOT_FOUND);
    core_reply_clear(&r);
    c.principal = "";
    ping(&c, 2, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    core_reply_clear(&r);

    /* Bob cannot cancel alice's call, nor answer for her client. */
    struct core_reply call;
    countdown(&alice, 3, 1, LONG_MS, 0, &call);
    CHECK_INT(call.kind, CORE_STREAM);
    struct core_caller bob = rig_http("bob", sid);
    CHECK_INT(cancel(&bob, "3"), CORE_REJECTED);
    rig_send(&bob, "{\"jsonrpc\":\"2.0\",\"id\":\"mcpd-1\",\"result\":{}}", &r);
    CHECK_INT(r.reason, CORE_NOT_FOUND);
    core_reply_clear(&r);
    struct follow f = {0};
    follow_reply(&f, &call, 0);
    core_reply_clear(&call);
    struct stream_chunk ch;
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_IDLE); /* still running */
    CHECK_INT(stream_state(f.stream), STREAM_ACTIVE);
    CHECK_INT(cancel(&alice, "3"), CORE_ACCEPTED);
    enum follow_event last;
    json_t *msgs = rig_read_follow(&f, &last);
    CHECK_INT(last, FOLLOW_STREAM_ENDED);
    CHECK_INT(json_array_size(msgs), 0);
    json_decref(msgs);

    /* Nor open, resume or follow it. */
    char cursor[FOLLOW_EVENT_ID_MAX];
    snprintf(cursor, sizeof cursor, "%s", f.event_id); /* before its first message */
    follow_end(&f);
    struct core_reply refused;
    CHECK(core_session_open(&bob, &refused) == NULL);
    CHECK_INT(refused.reason, CORE_NOT_FOUND);
    core_reply_clear(&refused);
    struct core_resume res;
    struct core_caller bob_by_cursor = rig_http("bob", NULL);
    CHECK_INT(core_resume(&bob_by_cursor, cursor, &res, &refused), -1);
    CHECK_INT(refused.reason, CORE_NOT_FOUND);
    core_reply_clear(&refused);
    CHECK_INT(follow_open(&f, &bob, cursor, 0, &refused), -1);
    CHECK_INT(refused.reason, CORE_NOT_FOUND);
    core_reply_clear(&refused);
    struct core_caller alice_by_cursor = rig_http("alice", NULL);
    CHECK_INT(core_resume(&alice_by_cursor, cursor, &res, &refused), 0);
    CHECK(res.session == a);
    CHECK_INT(res.next, 0);
    core_resume_clear(&res);

    /* --max-sessions-per-principal (2 here): 429, -32010, for that
     * principal only, and a place frees when a session ends. */
    struct session *c1 = rig_session("carol", "{}");
    struct session *c2 = rig_session("carol", "{}");
    CHECK(c1 && c2);
    struct core_caller carol = rig_http("carol", NULL);
    const char *init = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"initialize\",\"params\":{"
                       "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{}}}";
    rig_send(&carol, init, &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_TOO_MANY);
    CHECK_INT(rig_code(r.error), JSONRPC_TOO_MANY_SESSIONS);
    CHECK_INT(json_integer_value(json_object_get(r.error, "id")), 9);
    CHECK(r.session == NULL);
    core_reply_clear(&r);
    struct session *d = rig_session("dave", "{}");
    CHECK(d != NULL);
    rig_end(c1);
    struct session *c3 = rig_session("carol", "{}");
    CHECK(c3 != NULL);

    rig_end(c2);
    rig_end(c3);
    rig_end(d);
    rig_end(a);
    rig_end(anon);
}

/* --max-sessions (16 here): past it initialize is refused with 503
 * (CORE_AT_CAPACITY, -32010), until a session ends. */
static void test_session_cap(void)
{
    struct session *open[17] = {0};
    struct core_caller c = rig_http(NULL, NULL);
    const char *init = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                       "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{}}}";
    struct core_reply r = {0};
    size_t n = 0;
    for (; n < 17; n++) {
        rig_send(&c, init, &r);
        if (r.kind != CORE_STREAM)
            break;
        open[n] = r.session;
        r.session = NULL;
        core_reply_clear(&r);
    }
    CHECK(n > 0 && n < 17);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_AT_CAPACITY);
    CHECK_INT(rig_code(r.error), JSONRPC_TOO_MANY_SESSIONS);
    CHECK(r.session == NULL);
    core_reply_clear(&r);
    if (n > 0) {
        rig_end(open[--n]);
        open[n] = rig_session(NULL, "{}");
        CHECK(open[n] != NULL);
        n++;
    }
    while (n > 0)
        rig_end(open[--n]);
}

/* ---- caps ---- */

/* Waits for the stream of f to end; its messages are dropped. */
static enum follow_event drain(struct follow *f)
{
    enum follow_event last;
    json_decref(rig_read_follow(f, &last));
    return last;
}

static void test_inflight_cap(void)
{
    struct session *s;
    struct core_caller c;
    if (rig_open("{}", &s, &c) != 0)
        return;
    struct core_reply r1, r2, r;

    countdown(&c, 11, 1, LONG_MS, 0, &r1);
    countdown(&c, 12, 1, LONG_MS, 0, &r2);
    CHECK_INT(r1.kind, CORE_STREAM);
    CHECK_INT(r2.kind, CORE_STREAM);
    struct follow f1 = {0}, f2 = {0};
    follow_reply(&f1, &r1, 0);
    follow_reply(&f2, &r2, 0);
    core_reply_clear(&r1);
    core_reply_clear(&r2);

    /* At the cap (2 here): 429, -32015, with the request's id. */
    countdown(&c, 13, 1, 0, 0, &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_TOO_MANY);
    CHECK_INT(rig_code(r.error), JSONRPC_TOO_MANY_IN_FLIGHT);
    CHECK_INT(json_integer_value(json_object_get(r.error, "id")), 13);
    core_reply_clear(&r);

    /* What is answered at once is not in flight: a ping, a tool that
     * never blocks. */
    ping(&c, 14, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    core_reply_clear(&r);
    rig_send(&c,
             "{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"echo\",\"arguments\":{\"message\":\"at the cap\"}}}",
             &r);
    json_t *m = rig_one(&r);
    CHECK_STR(rig_text(m), "at the cap");
    json_decref(m);

    /* An id in flight is not reused, by any request. */
    countdown(&c, 11, 1, 0, 0, &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_BAD_REQUEST);
    CHECK_STR(rig_message(r.error), "Invalid Request: a request with this id is already in flight");
    core_reply_clear(&r);
    ping(&c, 12, &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    core_reply_clear(&r);

    /* A call that ends frees its place and its id. */
    CHECK_INT(cancel(&c, "11"), CORE_ACCEPTED);
    CHECK_INT(drain(&f1), FOLLOW_STREAM_ENDED);
    follow_end(&f1);
    countdown(&c, 13, 1, 0, 0, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    enum follow_event last;
    json_t *msgs = rig_read_reply(&r, &last);
    CHECK_INT(json_array_size(msgs), 1);
    CHECK_STR(rig_text(json_array_get(msgs, 0)), "countdown finished");
    json_decref(msgs);
    countdown(&c, 11, 1, 0, 0, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    json_decref(rig_read_reply(&r, NULL));

    CHECK_INT(cancel(&c, "12"), CORE_ACCEPTED);
    CHECK_INT(drain(&f2), FOLLOW_STREAM_ENDED);
    follow_end(&f2);
    rig_end(s);
}

static void test_storage_cap(void)
{
    struct session *s;
    struct core_caller c;
    if (rig_open("{}", &s, &c) != 0)
        return;
    struct core_reply r;

    /* Progress past the session's 64 KiB: the call ends with the storage
     * error, after every message that fitted, in order. */
    countdown(&c, 21, 10000, 0, 1, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    struct stream *st = r.stream;
    stream_ref(st);
    enum follow_event last;
    json_t *msgs = rig_read_reply(&r, &last);
    CHECK_INT(last, FOLLOW_STREAM_ENDED);
    size_t n = json_array_size(msgs);
    CHECK(n > 100 && n < 10000);
    int in_order = 1;
    for (size_t i = 0; i + 1 < n; i++) {
        json_t *p = json_object_get(json_array_get(msgs, i), "params");
        in_order &= json_integer_value(json_object_get(p, "progress")) == (json_int_t)i + 1;
    }
    CHECK(in_order);
    json_t *final = json_array_get(msgs, n - 1);
    CHECK_INT(json_integer_value(json_object_get(final, "id")), 21);
    CHECK_INT(rig_code(final), JSONRPC_SERVER_ERROR);
    CHECK_STR(rig_message(final), "Session storage limit exceeded");
    CHECK_INT(stream_state(st), STREAM_ERROR);
    stream_unref(st);
    json_decref(msgs);

    /* Over the cap a final reply becomes that error (the client is not
     * left waiting); a ping's quick answer is stored anyway. */
    rig_send(&c,
             "{\"jsonrpc\":\"2.0\",\"id\":22,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"echo\",\"arguments\":{\"message\":\"too late\"}}}",
             &r);
    json_t *m = rig_one(&r);
    CHECK_INT(json_integer_value(json_object_get(m, "id")), 22);
    CHECK_STR(rig_message(m), "Session storage limit exceeded");
    json_decref(m);
    ping(&c, 23, &r);
    m = rig_one(&r);
    CHECK(json_is_object(json_object_get(m, "result")));
    json_decref(m);
    rig_end(s);
}

/* ---- the reply is a durable stream ---- */

static void collect_chunk(void *arg, int64_t seq, const char *msg, size_t len, int is_end)
{
    json_t *chunk = json_pack("{s:I, s:o, s:b}", "seq", (json_int_t)seq, "message",
                              json_loadb(msg, len, 0, NULL), "end", is_end);
    json_array_append_new(arg, chunk);
}

static void test_durable_reply(void)
{
    struct session *s = rig_session(NULL, "{}");
    struct session *other = rig_session(NULL, "{}");
    CHECK(s && other);
    if (!s || !other)
        return;
    struct core_caller c = rig_http(NULL, session_id(s));
    struct core_reply r;
    countdown(&c, 31, 3, 1, 1, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    char sid[96];
    snprintf(sid, sizeof sid, "%s", r.stream ? stream_id(r.stream) : "");
    struct follow f = {0};
    follow_reply(&f, &r, 0);
    core_reply_clear(&r);
    enum follow_event last;
    json_t *msgs = rig_read_follow(&f, &last);
    CHECK_INT(last, FOLLOW_STREAM_ENDED);
    CHECK_INT(json_array_size(msgs), 4);
    CHECK_STR(rig_text(json_array_get(msgs, 3)), "countdown finished");
    char want[128], cursor[128];
    snprintf(want, sizeof want, "%s:3", sid); /* the last message read */
    CHECK_STR(f.event_id, want);
    CHECK(f.stored);
    follow_end(&f);
    snprintf(cursor, sizeof cursor, "%s:1", sid); /* a client that saw two */

    /* Every message is in the store, in order, the last one the end. */
    json_t *stored = json_array();
    struct store_stream row;
    CHECK_INT(store_stream_get(rig.store, sid, &row, collect_chunk, stored), 0);
    CHECK_STR(row.session_id, session_id(s));
    CHECK_STR(row.kind, "request");
    CHECK_STR(row.request_id, "31");
    CHECK_STR(row.state, "finished");
    store_stream_free(&row);
    CHECK_INT(json_array_size(stored), 4);
    int same = json_array_size(stored) == 4;
    for (size_t i = 0; same && i < 4; i++) {
        json_t *ch = json_array_get(stored, i);
        same = json_integer_value(json_object_get(ch, "seq")) == (json_int_t)i &&
               json_is_true(json_object_get(ch, "end")) == (i == 3) &&
               json_equal(json_object_get(ch, "message"), json_array_get(msgs, i));
    }
    CHECK(same);
    json_decref(stored);

    /* A cursor names the last message seen: reading resumes after it. */
    struct core_reply refused;
    CHECK_INT(follow_open(&f, &c, cursor, 0, &refused), 0);
    CHECK_INT(f.next, 2);
    json_t *again = rig_read_follow(&f, &last);
    follow_end(&f);
    CHECK_INT(last, FOLLOW_STREAM_ENDED);
    CHECK_INT(json_array_size(again), 2);
    CHECK(json_equal(json_array_get(again, 0), json_array_get(msgs, 2)));
    CHECK(json_equal(json_array_get(again, 1), json_array_get(msgs, 3)));
    json_decref(again);

    /* The cursor alone finds its session; -1 is before the first message;
     * past the end of an ended stream there is only the end. */
    struct core_caller by_cursor = rig_http(NULL, NULL);
    struct core_resume res;
    snprintf(want, sizeof want, "%s:-1", sid);
    CHECK_INT(core_resume(&by_cursor, want, &res, &refused), 0);
    CHECK(res.session == s);
    CHECK_INT(res.next, 0);
    CHECK(!res.standalone);
    follow_resumed(&f, &res);
    again = rig_read_follow(&f, &last);
    CHECK_INT(json_array_size(again), 4);
    json_decref(again);
    follow_end(&f);
    snprintf(want, sizeof want, "%s:9", sid);
    CHECK_INT(follow_open(&f, &c, want, 0, &refused), 0);
    again = rig_read_follow(&f, &last);
    CHECK_INT(last, FOLLOW_STREAM_ENDED);
    CHECK_INT(json_array_size(again), 0);
    json_decref(again);
    follow_end(&f);
    json_decref(msgs);

    /* Refused: a malformed cursor (-32602), a cursor past the end of a
     * stream still being written (-32602), another session's stream
     * (-32000), and, by the cursor alone, an unknown stream (404). */
    CHECK_INT(follow_open(&f, &c, "not a cursor", 0, &refused), -1);
    CHECK_INT(refused.reason, CORE_BAD_REQUEST);
    CHECK_INT(rig_code(refused.error), JSONRPC_INVALID_PARAMS);
    core_reply_clear(&refused);
    countdown(&c, 32, 1, LONG_MS, 0, &r);
    char active[128];
    snprintf(active, sizeof active, "%s:0", r.stream ? stream_id(r.stream) : "");
    core_reply_clear(&r);
    CHECK_INT(core_resume(&c, active, &res, &refused), -1);
    CHECK_INT(refused.reason, CORE_BAD_REQUEST);
    CHECK_INT(rig_code(refused.error), JSONRPC_INVALID_PARAMS);
    core_reply_clear(&refused);
    CHECK_INT(cancel(&c, "32"), CORE_ACCEPTED);
    struct core_caller elsewhere = rig_http(NULL, session_id(other));
    CHECK_INT(core_resume(&elsewhere, cursor, &res, &refused), -1);
    CHECK_INT(refused.reason, CORE_BAD_REQUEST);
    CHECK_INT(rig_code(refused.error), JSONRPC_SERVER_ERROR);
    core_reply_clear(&refused);
    CHECK_INT(core_resume(&by_cursor, "0123456789abcdef0123456789abcdef:0", &res, &refused), -1);
    CHECK_INT(refused.reason, CORE_NOT_FOUND);
    core_reply_clear(&refused);

    rig_end(s);
    rig_end(other);
}

/* ---- cancellation ---- */

static void test_cancel(void)
{
    struct session *s;
    struct core_caller c;
    if (rig_open("{}", &s, &c) != 0)
        return;
    struct core_reply r;

    /* A finished call, then one that runs. */
    countdown(&c, 40, 1, 0, 0, &r);
    json_decref(rig_read_reply(&r, NULL));
    countdown(&c, 41, 1, LONG_MS, 0, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    struct stream *st = r.stream;
    stream_ref(st);
    struct follow f = {0};
    follow_reply(&f, &r, 0);
    core_reply_clear(&r);

    /* Harmless: an unknown id, a finished one, the same number as a
     * string, an id of no JSON-RPC type, no params at all. */
    CHECK_INT(cancel(&c, "999"), CORE_ACCEPTED);
    CHECK_INT(cancel(&c, "40"), CORE_ACCEPTED);
    CHECK_INT(cancel(&c, "\"41\""), CORE_ACCEPTED);
    CHECK_INT(cancel(&c, "{\"id\":41}"), CORE_ACCEPTED);
    rig_send(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\"}", &r);
    CHECK_INT(r.kind, CORE_ACCEPTED);
    core_reply_clear(&r);
    struct stream_chunk ch;
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_IDLE);
    CHECK_INT(stream_state(st), STREAM_ACTIVE);

    /* Its own id ends it, without a reply (the spec: do not respond). */
    CHECK_INT(cancel(&c, "41"), CORE_ACCEPTED);
    enum follow_event last;
    json_t *msgs = rig_read_follow(&f, &last);
    CHECK_INT(last, FOLLOW_STREAM_ENDED);
    CHECK_INT(json_array_size(msgs), 0);
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_STREAM_ENDED); /* and says so again */
    CHECK_INT(stream_state(st), STREAM_ERROR);
    json_decref(msgs);
    follow_end(&f);
    stream_unref(st);
    CHECK_INT(cancel(&c, "41"), CORE_ACCEPTED); /* again: finished now */

    /* A string id is cancelled by the same string. */
    rig_send(&c,
             "{\"jsonrpc\":\"2.0\",\"id\":\"job-1\",\"method\":\"tools/call\",\"params\":{"
             "\"name\":\"countdown\",\"arguments\":{\"n\":1,\"interval_ms\":60000}}}",
             &r);
    CHECK_INT(r.kind, CORE_STREAM);
    CHECK_INT(cancel(&c, "\"job-1\""), CORE_ACCEPTED);
    msgs = rig_read_reply(&r, &last);
    CHECK_INT(last, FOLLOW_STREAM_ENDED);
    CHECK_INT(json_array_size(msgs), 0);
    json_decref(msgs);

    /* A call whose stream ends under it (a session's end ends its streams
     * before it cancels its calls; a store that failed) still ends, by its
     * reply here: its id is not held in flight for the session's life. */
    countdown(&c, 44, 50, 20, 1, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    CHECK_INT(session_with_tracked(s, "44", NULL, NULL), 0);
    stream_end(r.stream, STREAM_ERROR);
    core_reply_clear(&r);
    int64_t deadline = clock_mono_ms() + 5000;
    while (session_with_tracked(s, "44", NULL, NULL) == 0 && clock_mono_ms() < deadline)
        usleep(5000);
    CHECK_INT(session_with_tracked(s, "44", NULL, NULL), -1);

    /* Ending the session cancels what runs in it; then it is gone. */
    countdown(&c, 42, 1, LONG_MS, 0, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    follow_reply(&f, &r, 0);
    core_reply_clear(&r);
    core_end_session(s);
    msgs = rig_read_follow(&f, &last);
    CHECK_INT(last, FOLLOW_SESSION_ENDED); /* that is why it stopped */
    CHECK_INT(json_array_size(msgs), 0);
    CHECK_INT(follow_read(&f, 0, &ch), FOLLOW_SESSION_ENDED); /* and says so again */
    json_decref(msgs);
    follow_end(&f);
    ping(&c, 43, &r);
    CHECK_INT(r.reason, CORE_NOT_FOUND);
    core_reply_clear(&r);
    session_unref(s);
}

/* ---- server->client requests ---- */

/* Starts test_sampling on c and reads its sampling/createMessage request:
 * the follow is left on the call's stream and *rid gets the request's id
 * (JSON text). */
static json_t *start_sampling(const struct core_caller *c, int id, struct follow *f, char *rid,
                              size_t cap)
{
    struct core_reply r;
    rig_sendf(c, &r,
              "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":"
              "\"test_sampling\",\"arguments\":{\"prompt\":\"hello\"}}}",
              id);
    CHECK_INT(r.kind, CORE_STREAM);
    follow_reply(f, &r, 0);
    core_reply_clear(&r);
    json_t *req = rig_next(f);
    char *text = json_dumps(json_object_get(req, "id"), JSON_ENCODE_ANY);
    snprintf(rid, cap, "%s", text ? text : "null");
    free(text);
    return req;
}

static void test_server_requests(void)
{
    struct session *s;
    struct core_caller c;
    if (rig_open("{\"sampling\":{}}", &s, &c) != 0)
        return;
    struct core_reply r;
    struct follow f = {0};
    char rid[128];

    /* The request goes out on the call's stream, with an id of the
     * server's; the client's result comes back through core_receive. */
    json_t *req = start_sampling(&c, 51, &f, rid, sizeof rid);
    CHECK_STR(json_string_value(json_object_get(req, "method")), "sampling/createMessage");
    CHECK(json_is_string(json_object_get(req, "id")));
    json_t *content = json_object_get(
        json_array_get(json_object_get(json_object_get(req, "params"), "messages"), 0), "content");
    CHECK_STR(json_string_value(json_object_get(content, "text")), "hello");
    json_decref(req);
    rig_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":\"mcpd-nobody\",\"result\":{}}", &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_BAD_REQUEST);
    CHECK_STR(rig_message(r.error),
              "Invalid Request: no server request is waiting for a response with this id");
    core_reply_clear(&r);
    rig_sendf(&c, &r,
              "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"role\":\"assistant\",\"content\":{"
              "\"type\":\"text\",\"text\":\"hi there\"},\"model\":\"unit\"}}",
              rid);
    CHECK_INT(r.kind, CORE_ACCEPTED);
    CHECK(!r.notification);
    core_reply_clear(&r);
    json_t *m = rig_next(&f);
    CHECK_INT(json_integer_value(json_object_get(m, "id")), 51);
    CHECK_STR(rig_text(m), "LLM response: hi there");
    json_decref(m);
    CHECK(rig_next(&f) == NULL);
    follow_end(&f);
    /* Answered once: a second answer has nobody waiting. */
    rig_sendf(&c, &r, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}", rid);
    CHECK_INT(r.kind, CORE_REJECTED);
    core_reply_clear(&r);

    /* The client's error reaches the tool. */
    json_decref(start_sampling(&c, 52, &f, rid, sizeof rid));
    rig_sendf(&c, &r,
              "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-1,\"message\":\"declined\"}}",
              rid);
    CHECK_INT(r.kind, CORE_ACCEPTED);
    core_reply_clear(&r);
    m = rig_next(&f);
    CHECK_STR(rig_text(m), "Sampling failed: the client answered with error -1: declined");
    CHECK(json_is_true(json_object_get(json_object_get(m, "result"), "isError")));
    json_decref(m);
    follow_end(&f);

    /* Cancelled while it waits on the client: no reply, and the client's
     * late answer has nobody waiting. */
    json_decref(start_sampling(&c, 53, &f, rid, sizeof rid));
    CHECK_INT(cancel(&c, "53"), CORE_ACCEPTED);
    enum follow_event last;
    json_t *msgs = rig_read_follow(&f, &last);
    CHECK_INT(last, FOLLOW_STREAM_ENDED);
    CHECK_INT(json_array_size(msgs), 0);
    json_decref(msgs);
    follow_end(&f);
    rig_sendf(&c, &r, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}", rid);
    CHECK_INT(r.kind, CORE_REJECTED);
    core_reply_clear(&r);

    /* The client can answer nothing more (core_client_gone): what waits is
     * answered with an error for it, and nothing new is asked. */
    json_decref(start_sampling(&c, 54, &f, rid, sizeof rid));
    core_client_gone(s);
    m = rig_next(&f);
    CHECK_STR(rig_text(m), "Sampling failed: the client answered with error -32603: The client "
                           "closed its input before answering");
    json_decref(m);
    follow_end(&f);
    rig_sendf(&c, &r,
              "{\"jsonrpc\":\"2.0\",\"id\":55,\"method\":\"tools/call\",\"params\":{\"name\":"
              "\"test_sampling\",\"arguments\":{\"prompt\":\"again\"}}}");
    msgs = rig_read_reply(&r, &last);
    CHECK_INT(json_array_size(msgs), 1);
    CHECK(json_is_true(
        json_object_get(json_object_get(json_array_get(msgs, 0), "result"), "isError")));
    json_decref(msgs);
    rig_end(s);

    /* A client that did not declare sampling is not asked. */
    s = rig_session(NULL, "{}");
    c = rig_http(NULL, s ? session_id(s) : "-");
    rig_sendf(&c, &r,
              "{\"jsonrpc\":\"2.0\",\"id\":56,\"method\":\"tools/call\",\"params\":{\"name\":"
              "\"test_sampling\",\"arguments\":{\"prompt\":\"x\"}}}");
    msgs = rig_read_reply(&r, &last);
    CHECK_INT(json_array_size(msgs), 1);
    CHECK_STR(rig_text(json_array_get(msgs, 0)),
              "Sampling not supported: the client did not declare the sampling capability");
    json_decref(msgs);
    rig_end(s);
}

/* ---- the standalone stream's one reader ---- */

struct holder {
    struct follow f;
    int probed;
};

/* A reader of the standalone stream whose client is gone: the probe's
 * write fails, so it lets go. */
static void *holder_main(void *arg)
{
    struct holder *h = arg;
    int64_t deadline = clock_mono_ms() + RIG_WAIT_MS;
    for (;;) {
        struct stream_chunk ch;
        enum follow_event w = follow_read(&h->f, deadline, &ch);
        if (w == FOLLOW_PROBED)
            h->probed = 1;
        if (w != FOLLOW_MESSAGE && w != FOLLOW_POLL)
            break;
    }
    follow_end(&h->f);
    return NULL;
}

static void test_standalone_claim(void)
{
    struct session *s = rig_session(NULL, "{}");
    CHECK(s != NULL);
    if (!s)
        return;
    struct core_reply refused;
    struct follow g = {0};

    /* A holder that goes on living keeps the stream: a claimant that
     * probes it gets 409 once the probe's time is up. */
    struct holder h = {0};
    CHECK_INT(follow_standalone(&h.f, s, 0, -1, &refused), 0);
    CHECK_INT(follow_standalone(&g, s, 0, -1, &refused), -1);
    CHECK_INT(refused.reason, CORE_CONFLICT);
    core_reply_clear(&refused);
    CHECK_INT(follow_standalone(&g, s, 100, -1, &refused), -1);
    CHECK_INT(refused.reason, CORE_CONFLICT);
    CHECK_STR(rig_message(refused.error), "Conflict: this session already has an open GET stream");
    core_reply_clear(&refused);

    /* A holder whose client vanished fails the probe and lets go: the
     * claimant takes the stream over. */
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, holder_main, &h), 0);
    CHECK_INT(follow_standalone(&g, s, RIG_WAIT_MS, -1, &refused), 0);
    pthread_join(t, NULL);
    CHECK(h.probed);
    CHECK(g.standalone);
    follow_end(&g);
    rig_end(s);
}

/* ---- logging/setLevel and the call's logs ---- */

static void test_log_level(void)
{
    struct session *s;
    struct core_caller c;
    if (rig_open("{}", &s, &c) != 0)
        return;
    struct core_reply r;
    const char *levels[] = {"error", "info"};
    size_t logs_at[] = {0, 3};
    for (size_t i = 0; i < 2; i++) {
        rig_sendf(&c, &r,
                  "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"logging/setLevel\",\"params\":{"
                  "\"level\":\"%s\"}}",
                  levels[i]);
        json_t *m = rig_one(&r);
        CHECK(json_is_object(json_object_get(m, "result")));
        json_decref(m);
        /* Three info lines, then the result: kept from "info" up only. */
        rig_send(&c,
                 "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"test_tool_with_logging\",\"arguments\":{}}}",
                 &r);
        enum follow_event last;
        json_t *msgs = rig_read_reply(&r, &last);
        CHECK_INT(json_array_size(msgs), logs_at[i] + 1);
        size_t logs = 0, j;
        json_t *msg;
        json_array_foreach(msgs, j, msg)
        {
            const char *method = json_string_value(json_object_get(msg, "method"));
            logs += method && strcmp(method, "notifications/message") == 0;
        }
        CHECK_INT(logs, logs_at[i]);
        json_decref(msgs);
    }
    rig_send(&c,
             "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"logging/setLevel\",\"params\":{"
             "\"level\":\"loud\"}}",
             &r);
    json_t *m = rig_one(&r);
    CHECK_INT(rig_code(m), JSONRPC_INVALID_PARAMS);
    json_decref(m);
    rig_end(s);
}

/* ---- stateless requests (2026-07-28) ---- */

#define META_VERSION "\"io.modelcontextprotocol/protocolVersion\""
#define META_CAPS "\"io.modelcontextprotocol/clientCapabilities\""
#define META_2026 "\"_meta\":{" META_VERSION ":\"2026-07-28\"," META_CAPS ":{}}"

/* A stateless request (params is the JSON text inside "params": {...},
 * without braces); the reply in *r. */
static void stateless(const struct core_caller *c, int id, const char *method, const char *params,
                      struct core_reply *r)
{
    rig_sendf(c, r, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\",\"params\":{%s}}", id, method,
              params);
}

/* The refusal of a stateless request: checks reason and code, returns
 * its error message (new reference) for the caller to look into. */
static json_t *refusal(struct core_reply *r, enum core_reason reason, int code)
{
    CHECK_INT(r->kind, CORE_REJECTED);
    CHECK_INT(r->reason, reason);
    CHECK_INT(rig_code(r->error), code);
    CHECK(r->session == NULL);
    json_t *e = json_incref(r->error);
    core_reply_clear(r);
    return e;
}

static void test_stateless(void)
{
    struct core_caller c = {.transport = "http", .stateless = 1};
    struct core_reply r;

    /* server/discover: answered at once, without logging. */
    stateless(&c, 1, "server/discover", META_2026, &r);
    CHECK_INT(r.kind, CORE_ANSWERED);
    json_t *result = json_object_get(r.error, "result");
    int listed = 0;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(result, "supportedVersions"), i, v) listed |=
        strcmp(json_string_value(v), "2026-07-28") == 0;
    CHECK(listed);
    json_t *caps = json_object_get(result, "capabilities");
    CHECK(json_object_get(caps, "logging") == NULL);
    CHECK(json_is_true(json_object_get(json_object_get(caps, "tools"), "listChanged")));
    core_reply_clear(&r);

    /* _meta must name the revision and the capabilities, as it should. */
    stateless(&c, 2, "tools/list", "", &r);
    json_t *e = refusal(&r, CORE_BAD_REQUEST, JSONRPC_INVALID_PARAMS);
    CHECK_STR(rig_message(e), "Invalid params: missing _meta keys: "
                              "io.modelcontextprotocol/protocolVersion, "
                              "io.modelcontextprotocol/clientCapabilities");
    json_decref(e);
    stateless(&c, 3, "tools/list", "\"_meta\":{" META_VERSION ":\"2026-07-28\"}", &r);
    e = refusal(&r, CORE_BAD_REQUEST, JSONRPC_INVALID_PARAMS);
    CHECK_STR(rig_message(e),
              "Invalid params: missing _meta keys: io.modelcontextprotocol/clientCapabilities");
    json_decref(e);
    stateless(&c, 4, "tools/list", "\"_meta\":{" META_VERSION ":\"2025-06-18\"," META_CAPS ":{}}",
              &r);
    e = refusal(&r, CORE_BAD_REQUEST, JSONRPC_UNSUPPORTED_VERSION);
    json_t *data = json_object_get(json_object_get(e, "error"), "data");
    CHECK_STR(json_string_value(json_object_get(data, "requested")), "2025-06-18");
    CHECK(json_array_size(json_object_get(data, "supported")) > 0);
    json_decref(e);
    stateless(&c, 5, "tools/list", "\"_meta\":{" META_VERSION ":\"2026-07-28\"," META_CAPS ":1}",
              &r);
    json_decref(refusal(&r, CORE_BAD_REQUEST, JSONRPC_INVALID_PARAMS));

    /* What 2026-07-28 does not have, or the client cannot take. */
    stateless(&c, 6, "nope/nope", META_2026, &r);
    e = refusal(&r, CORE_NOT_FOUND, JSONRPC_METHOD_NOT_FOUND);
    CHECK_STR(rig_message(e), "Method not found: nope/nope");
    json_decref(e);
    stateless(&c, 7, "tools/call",
              "\"name\":\"echo\",\"arguments\":{\"message\":\"x\"},\"stream\":true," META_2026, &r);
    json_decref(refusal(&r, CORE_BAD_REQUEST, JSONRPC_INVALID_PARAMS));
    stateless(&c, 8, "tools/call",
              "\"name\":\"test_missing_capability\",\"arguments\":{}," META_2026, &r);
    e = refusal(&r, CORE_BAD_REQUEST, JSONRPC_MISSING_CAPABILITY);
    data = json_object_get(json_object_get(e, "error"), "data");
    CHECK(json_object_get(json_object_get(data, "requiredCapabilities"), "sampling") != NULL);
    json_decref(e);
    stateless(&c, 9, "tasks/get", "\"taskId\":\"x\"," META_2026, &r);
    e = refusal(&r, CORE_BAD_REQUEST, JSONRPC_MISSING_CAPABILITY);
    CHECK_STR(rig_message(e), "Missing required client capability: the tasks extension");
    json_decref(e);

    /* A request gets a session of its own that lives as long as its
     * reply: the follow that read the reply ends it (off a fiber, as here
     * and on libmicrohttpd's pool threads, a worker does). */
    stateless(&c, 10, "tools/call",
              "\"name\":\"echo\",\"arguments\":{\"message\":\"alone\"}," META_2026, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    CHECK(r.ephemeral);
    CHECK(r.session_made == NULL); /* its own: no id for the client */
    struct session *own = r.session;
    CHECK(own != NULL);
    if (own)
        session_ref(own);
    json_t *m = rig_one(&r);
    CHECK_STR(rig_text(m), "alone");
    json_decref(m);
    if (own) {
        char id[96];
        snprintf(id, sizeof id, "%s", session_id(own));
        session_unref(own);
        /* Until its tombstone is written an ended session is still found. */
        struct core_caller later = rig_http(NULL, id);
        struct core_reply refused;
        struct session *found;
        int64_t until = clock_mono_ms() + 5000;
        while ((found = core_session_open(&later, &refused)) && clock_mono_ms() < until) {
            session_unref(found);
            usleep(1000);
        }
        CHECK(found == NULL);
        if (found) {
            session_unref(found);
        } else {
            CHECK_INT(refused.reason, CORE_NOT_FOUND);
            core_reply_clear(&refused);
        }
    }
    rig_send(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{}}", &r);
    CHECK_INT(r.kind, CORE_ACCEPTED);
    core_reply_clear(&r);

    /* On a connection: statelessly before initialize when _meta names a
     * revision, in the connection's session once it has one. */
    struct core_caller conn = {.transport = "ws", .connection = 1};
    stateless(&conn, 11, "tools/call",
              "\"name\":\"echo\",\"arguments\":{\"message\":\"conn\"}," META_2026, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    CHECK(r.ephemeral);
    own = r.session;
    r.session = NULL;
    json_decref(rig_read_reply(&r, NULL));
    rig_end(own);
    struct session *s = rig_session(NULL, "{}");
    conn.session_id = s ? session_id(s) : "-";
    stateless(&conn, 12, "tools/call",
              "\"name\":\"echo\",\"arguments\":{\"message\":\"conn\"}," META_2026, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    CHECK(!r.ephemeral);
    CHECK(r.session == s);
    core_reply_clear(&r);
    rig_end(s);
}

/* ---- the legacy relay ---- */

struct relayed {
    char id[96];
    int64_t copied;
    int listed;
};

static void find_relayed(void *arg, const char *stream_id, int64_t copied)
{
    struct relayed *x = arg;
    if (strcmp(stream_id, x->id) == 0) {
        x->listed = 1;
        x->copied = copied;
    }
}

static void test_legacy_relay(void)
{
    struct session *s = rig_session_on(NULL, "2024-11-05", "{}", "sse");
    CHECK(s != NULL);
    if (!s)
        return;
    struct core_caller c = rig_http(NULL, session_id(s));
    c.transport = "sse";
    struct core_reply r, refused;
    struct follow sa = {0};
    CHECK_INT(follow_standalone(&sa, s, 0, -1, &refused), 0);

    /* A request's messages reach the standalone stream in order. */
    countdown(&c, 1, 2, 1, 1, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    struct relayed copied = {.copied = -1};
    snprintf(copied.id, sizeof copied.id, "%s", r.stream ? stream_id(r.stream) : "");
    CHECK_INT(core_relay(&r), 0);
    CHECK(r.stream == NULL && r.session == NULL && r.error == NULL);
    json_t *m = rig_next(&sa);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(m, "params"), "progress")), 1);
    json_decref(m);
    m = rig_next(&sa);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(m, "params"), "progress")), 2);
    json_decref(m);
    m = rig_next(&sa);
    CHECK_INT(json_integer_value(json_object_get(m, "id")), 1);
    CHECK_STR(rig_text(m), "countdown finished");
    json_decref(m);

    /* A refusal goes there at once; a cancelled call adds nothing. */
    countdown(&c, 2, 1, LONG_MS, 0, &r);
    CHECK_INT(core_relay(&r), 0);
    countdown(&c, 2, 1, LONG_MS, 0, &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(core_relay(&r), 0);
    m = rig_next(&sa);
    CHECK_INT(json_integer_value(json_object_get(m, "id")), 2);
    CHECK_INT(rig_code(m), JSONRPC_INVALID_REQUEST);
    json_decref(m);
    CHECK_INT(cancel(&c, "2"), CORE_ACCEPTED);
    ping(&c, 3, &r);
    CHECK_INT(core_relay(&r), 0);
    m = rig_next(&sa);
    CHECK_INT(json_integer_value(json_object_get(m, "id")), 3);
    CHECK(json_is_object(json_object_get(m, "result")));
    json_decref(m);

    /* Opted in to long-polling: only the handle goes there. */
    rig_send(&c,
             "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"echo\",\"arguments\":{\"message\":\"by poll\"},\"stream\":true}}",
             &r);
    struct relayed by_poll = {.copied = -1};
    snprintf(by_poll.id, sizeof by_poll.id, "%s", r.stream ? stream_id(r.stream) : "");
    CHECK(r.ack != NULL);
    CHECK_INT(core_relay(&r), 0);
    m = rig_next(&sa);
    CHECK_INT(json_integer_value(json_object_get(m, "id")), 4);
    CHECK_STR(json_string_value(json_object_get(json_object_get(m, "result"), "status")),
              "streaming_started");
    CHECK_STR(json_string_value(json_object_get(json_object_get(m, "result"), "transport")), "sse");
    json_decref(m);
    ping(&c, 5, &r);
    CHECK_INT(core_relay(&r), 0);
    m = rig_next(&sa);
    CHECK_INT(json_integer_value(json_object_get(m, "id")), 5);
    json_decref(m);
    rig_send(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &r);
    CHECK_INT(core_relay(&r), 0);

    /* The relay's progress is stored with each copy: the countdown's
     * stream is copied whole, the polled one not at all. */
    CHECK_INT(store_streams_relayed(rig.store, session_id(s), clock_wall_ms() + 60000, find_relayed,
                                    &copied),
              0);
    CHECK(!copied.listed);
    CHECK_INT(store_streams_relayed(rig.store, session_id(s), clock_wall_ms() + 60000, find_relayed,
                                    &by_poll),
              0);
    CHECK(by_poll.listed);
    CHECK_INT(by_poll.copied, 0);

    /* A past process's stream (made before the relay started) whose
     * messages were never copied: a resume copies them, in order, once. */
    int64_t past = clock_wall_ms() - 60000;
    char id[RANDID_LEN + 1];
    snprintf(id, sizeof id, "%012llx%020d", (unsigned long long)past, 7);
    const char *msg0 = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
                       "\"params\":{\"level\":\"info\",\"data\":\"past\"}}";
    const char *msg1 = "{\"jsonrpc\":\"2.0\",\"id\":77,\"result\":{}}";
    struct store_stream_new row = {
        .session_id = session_id(s), .kind = "request", .request_id = "77"};
    CHECK_INT(store_stream_write(rig.store, id, &row, 0, msg0, strlen(msg0), NULL, past), 0);
    CHECK_INT(store_stream_write(rig.store, id, NULL, 1, msg1, strlen(msg1), "finished", past), 0);
    relay_catch_up(s);
    m = rig_next(&sa);
    CHECK_STR(json_string_value(json_object_get(json_object_get(m, "params"), "data")), "past");
    json_decref(m);
    m = rig_next(&sa);
    CHECK_INT(json_integer_value(json_object_get(m, "id")), 77);
    json_decref(m);
    relay_catch_up(s);
    ping(&c, 6, &r);
    CHECK_INT(core_relay(&r), 0);
    m = rig_next(&sa);
    CHECK_INT(json_integer_value(json_object_get(m, "id")), 6);
    json_decref(m);

    /* A transport whose client reads everything there says so (relayed):
     * core_receive hands the reply over itself; a refusal of the message
     * stays the transport's to answer. */
    struct core_caller rel = c;
    rel.relayed = 1;
    ping(&rel, 7, &r);
    CHECK_INT(r.kind, CORE_ACCEPTED);
    CHECK(r.session == NULL && r.stream == NULL && r.error == NULL);
    core_reply_clear(&r);
    m = rig_next(&sa);
    CHECK_INT(json_integer_value(json_object_get(m, "id")), 7);
    json_decref(m);
    struct core_caller lost = rel;
    lost.session_id = "no-such-session";
    ping(&lost, 8, &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_NOT_FOUND);
    core_reply_clear(&r);

    /* An initialize naming its session id (legacy /sse's endpoint id): a
     * session of that id refuses a second one; an id that is no session is
     * not found, even with adopt, since no other process shares this store
     * to have handed it out (with one that does, replicas.test.mjs). */
    const char *init = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"initialize\",\"params\":{"
                       "\"protocolVersion\":\"2024-11-05\",\"capabilities\":{},"
                       "\"clientInfo\":{\"name\":\"legacy\",\"version\":\"1\"}}}";
    rig_send(&rel, init, &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_BAD_REQUEST);
    core_reply_clear(&r);
    lost.adopt = 1;
    rig_send(&lost, init, &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_NOT_FOUND);
    core_reply_clear(&r);
    /* A message for an id handed out and not initialized yet (reserved):
     * no session of it says to initialize first (400), not 404. */
    lost.reserved = 1;
    lost.session_required = "Invalid Request: send initialize first";
    ping(&lost, 10, &r);
    CHECK_INT(r.kind, CORE_REJECTED);
    CHECK_INT(r.reason, CORE_BAD_REQUEST);
    CHECK_STR(json_string_value(json_object_get(json_object_get(r.error, "error"), "message")),
              "Invalid Request: send initialize first");
    core_reply_clear(&r);

    /* A client resuming its /sse stream (follow_open, relayed): the
     * session it names, read from the start (it saw nothing but the
     * endpoint event), or the session of its cursor, which must be on the
     * standalone stream, read from after it; another past stream is caught
     * up first, and the one-reader claim is taken. */
    char standalone_cursor[128];
    snprintf(standalone_cursor, sizeof standalone_cursor, "%s:%lld", stream_id(sa.stream),
             (long long)sa.next - 1);
    struct follow again = {0};
    CHECK_INT(follow_open(&again, &rel, NULL, 0, &refused), -1);
    CHECK_INT(refused.reason, CORE_CONFLICT); /* sa holds it */
    core_reply_clear(&refused);
    follow_end(&sa);
    snprintf(id, sizeof id, "%012llx%020d", (unsigned long long)past, 8);
    const char *msg2 = "{\"jsonrpc\":\"2.0\",\"id\":88,\"result\":{}}";
    row.request_id = "88";
    CHECK_INT(store_stream_write(rig.store, id, &row, 0, msg2, strlen(msg2), "finished", past), 0);
    CHECK_INT(follow_open(&again, &rel, NULL, 0, &refused), 0);
    CHECK(again.standalone);
    CHECK_INT(again.next, 0);
    /* Everything sa read comes again (ping 7's reply last), then the
     * caught-up 88. */
    int64_t seen = 0;
    for (m = rig_next(&again); m && json_integer_value(json_object_get(m, "id")) != 7;
         m = rig_next(&again)) {
        json_decref(m);
        seen++;
    }
    CHECK(m != NULL && seen > 0);
    json_decref(m);
    m = rig_next(&again);
    CHECK_INT(json_integer_value(json_object_get(m, "id")), 88);
    json_decref(m);
    follow_end(&again);
    char request_cursor[128];
    snprintf(request_cursor, sizeof request_cursor, "%s:0", copied.id);
    struct core_caller by_cursor = rel;
    by_cursor.session_id = NULL; /* an EventSource has nothing but the id */
    CHECK_INT(follow_open(&again, &by_cursor, request_cursor, 0, &refused), -1);
    CHECK_INT(refused.reason, CORE_BAD_REQUEST);
    CHECK_STR(rig_message(refused.error),
              "Bad Request: Last-Event-ID names no event of an /sse stream");
    core_reply_clear(&refused);
    CHECK_INT(follow_open(&again, &by_cursor, standalone_cursor, 0, &refused), 0);
    CHECK(again.standalone && again.session == s);
    m = rig_next(&again); /* the one after the cursor (ping 7's reply) */
    CHECK_INT(json_integer_value(json_object_get(m, "id")), 88);
    json_decref(m);
    follow_end(&again);

    rig_end(s);
}

/* ---- on a loop fiber, as HTTP runs a request ---- */

struct fiber_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int on_fiber;
    enum follow_event last;
    json_t *msgs;
};

static void fiber_main(void *arg)
{
    struct fiber_job *j = arg;
    int on_fiber = loop_on_fiber();
    /* initialize waits for the store's commit; the countdown's reply is
     * followed while its worker runs: both park this fiber. */
    struct session *s = rig_session(NULL, "{}");
    struct core_caller c = rig_http(NULL, s ? session_id(s) : "-");
    struct core_reply r;
    countdown(&c, 1, 3, 1, 1, &r);
    enum follow_event last;
    json_t *msgs = rig_read_reply(&r, &last);
    rig_end(s);
    pthread_mutex_lock(&j->mu);
    j->on_fiber = on_fiber;
    j->last = last;
    j->msgs = msgs;
    j->done = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static void test_on_fiber(void)
{
    struct fiber_job j = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    CHECK_INT(loop_spawn(fiber_main, &j), 0); /* the rig's loop */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += RIG_WAIT_MS / 1000;
    pthread_mutex_lock(&j.mu);
    while (!j.done && pthread_cond_timedwait(&j.cv, &j.mu, &until) == 0)
        ;
    int done = j.done;
    pthread_mutex_unlock(&j.mu);
    CHECK(done);
    if (done) {
        CHECK(j.on_fiber);
        CHECK_INT(j.last, FOLLOW_STREAM_ENDED);
        CHECK_INT(json_array_size(j.msgs), 4);
        CHECK_STR(rig_text(json_array_get(j.msgs, 3)), "countdown finished");
        json_decref(j.msgs);
    }
}

int main(void)
{
    if (rig_start("test-receive", &cfg) != 0)
        return 2;
    CHECK_INT(core_state(), CORE_SERVING);
    test_initialize();
    test_entry();
    test_batch();
    test_principals();
    test_session_cap();
    test_inflight_cap();
    test_storage_cap();
    test_durable_reply();
    test_cancel();
    test_server_requests();
    test_legacy_relay();
    test_standalone_claim();
    test_log_level();
    test_stateless();
    test_on_fiber();

    /* A shutdown ends a running call with an error that says so (never
     * without a reply), once the handler has stopped. */
    struct session *s = rig_session(NULL, "{}");
    struct core_caller c = rig_http(NULL, s ? session_id(s) : "-");
    struct core_reply r;
    countdown(&c, 1, 1, LONG_MS, 0, &r);
    CHECK_INT(r.kind, CORE_STREAM);
    core_stop(5000);
    CHECK_INT(core_state(), CORE_STOPPING);
    json_t *m = rig_one(&r);
    CHECK_INT(rig_code(m), JSONRPC_INTERNAL_ERROR);
    CHECK_STR(rig_message(m), "Request interrupted by server shutdown; retry it");
    json_decref(m);
    session_unref(s);
    rig_cleanup();
    return check_summary();
}
