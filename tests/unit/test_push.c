/* test_push — the push-transport glue against a real core, store and the
 * built-in toolset: what a WebSocket or stdio connection would see, captured
 * from push's send function. */
#include "builtin.h"
#include "check.h"
#include "clock.h"
#include "core.h"
#include "core_int.h"
#include "loop.h"
#include "push.h"
#include "refusal.h"
#include "session.h"
#include "store.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every message push sent, in order. */
struct capture {
    pthread_mutex_t mu;
    json_t *msgs;
    int fail_sends;
    int attempts;                     /* sends tried, failed ones too */
    _Atomic(const char *) session_id; /* push_io.session_named's */
    atomic_int busy;                  /* push_io.busy's */
};

static int capture_send(void *io, const char *msg, size_t len)
{
    struct capture *c = io;
    pthread_mutex_lock(&c->mu);
    int fail = c->fail_sends;
    c->attempts++;
    if (!fail)
        json_array_append_new(c->msgs, json_loadb(msg, len, 0, NULL));
    pthread_mutex_unlock(&c->mu);
    return fail ? -1 : 0;
}

static void capture_named(void *io, const char *session_id)
{
    atomic_store(&((struct capture *)io)->session_id, session_id);
}

static void capture_busy(void *io, int busy)
{
    atomic_store(&((struct capture *)io)->busy, busy);
}

/* A connection of transport ws (event ids) or stdio that c records. */
static struct push_io capture_io(struct capture *c, const char *transport)
{
    return (struct push_io){.send = capture_send,
                            .io = c,
                            .transport = transport,
                            .event_ids = strcmp(transport, "ws") == 0,
                            .session_named = capture_named,
                            .busy = capture_busy};
}

/* Waits until a message matching (id, or method when id < 0) arrives;
 * returns a new reference or NULL after 5 s. */
static json_t *wait_for(struct capture *c, long long id, const char *method)
{
    int64_t deadline = clock_mono_ms() + 5000;
    while (clock_mono_ms() < deadline) {
        pthread_mutex_lock(&c->mu);
        size_t i;
        json_t *m;
        json_array_foreach(c->msgs, i, m)
        {
            json_t *mid = json_object_get(m, "id");
            const char *mm = json_string_value(json_object_get(m, "method"));
            if ((id >= 0 && json_is_integer(mid) && json_integer_value(mid) == id &&
                 !json_object_get(m, "method")) ||
                (id < 0 && mm && strcmp(mm, method) == 0)) {
                json_incref(m);
                pthread_mutex_unlock(&c->mu);
                return m;
            }
        }
        pthread_mutex_unlock(&c->mu);
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Waits up to ms for every request of c's connection to finish sending (as
 * push_io.busy says): 1 when they did. */
static int drained(struct capture *c, int64_t ms)
{
    int64_t deadline = clock_mono_ms() + ms;
    while (atomic_load(&c->busy) && clock_mono_ms() < deadline) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return !atomic_load(&c->busy);
}

static size_t count_method(struct capture *c, const char *method)
{
    size_t n = 0, i;
    json_t *m;
    pthread_mutex_lock(&c->mu);
    json_array_foreach(c->msgs, i, m)
    {
        const char *mm = json_string_value(json_object_get(m, "method"));
        n += mm && strcmp(mm, method) == 0;
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

static void feed(struct push *p, const char *text)
{
    push_receive(p, text, strlen(text));
}

int main(void)
{
    struct store *st;
    char *err = NULL;
    if (store_open(":memory:", &st, &err) != 0) {
        printf("store_open: %s\n", err);
        return 1;
    }
    void *backend = builtin_backend_new();
    struct core_config cc = {.session_idle_ms = 60000,
                             .stream_retention_ms = 60000,
                             .session_max_bytes = 1 << 24,
                             .max_workers = 16,
                             .server_name = "mcpd",
                             .server_version = "test"};
    CHECK_INT(core_start(&cc, st, builtin_backend_ops(), backend, &err), 0);
    CHECK_INT(loop_start(2), 0); /* push's writers run there */

    struct capture cap = {.msgs = json_array()};
    pthread_mutex_init(&cap.mu, NULL);
    struct push_io io = capture_io(&cap, "ws");
    struct push *p = push_open(&io, NULL);

    /* Before initialize: ping is answered, other requests are refused. */
    feed(p, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
    json_t *m = wait_for(&cap, 1, NULL);
    CHECK(m && json_is_object(json_object_get(m, "result")));
    json_decref(m);
    feed(p, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
    m = wait_for(&cap, 2, NULL);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(m, "error"), "code")), -32600);
    json_decref(m);

    /* Bad input is answered and the connection goes on. */
    feed(p, "{not json");
    feed(p, "[]");
    CHECK(atomic_load(&cap.session_id) == NULL);

    /* 2026-07-28 before initialize: served statelessly, the reply on the
     * connection without an event id (its session ends with it); a
     * subscription stays in flight until notifications/cancelled names it. */
#define META_2026                                                                                  \
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                       \
    "\"io.modelcontextprotocol/clientCapabilities\":{}}"
    feed(p, "{\"jsonrpc\":\"2.0\",\"id\":20,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"echo\",\"arguments\":{\"message\":\"modern\"}," META_2026 "}}");
    m = wait_for(&cap, 20, NULL);
    CHECK_STR(json_string_value(json_object_get(json_object_get(m, "result"), "resultType")),
              "complete");
    CHECK(json_object_get(json_object_get(m, "result"), "_meta") == NULL);
    json_decref(m);
    feed(p, "{\"jsonrpc\":\"2.0\",\"id\":21,\"method\":\"subscriptions/listen\",\"params\":{"
            "\"notifications\":{\"toolsListChanged\":true}," META_2026 "}}");
    m = wait_for(&cap, -1, "notifications/subscriptions/acknowledged");
    CHECK(m != NULL);
    json_decref(m);
    CHECK(!drained(&cap, 50)); /* the subscription never ends by itself */
    feed(p, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
            "\"requestId\":21}}");
    CHECK(drained(&cap, 5000));
    CHECK(atomic_load(&cap.session_id) == NULL);
    /* Closing a connection whose client can send no more (stdio at EOF)
     * ends its subscriptions, so the drain does not wait for them; a
     * plain close leaves one running and says so. */
    for (int gone = 0; gone <= 1; gone++) {
        struct capture capg = {.msgs = json_array()};
        pthread_mutex_init(&capg.mu, NULL);
        struct push_io iog = capture_io(&capg, "stdio");
        struct push *pg = push_open(&iog, NULL);
        feed(pg, "{\"jsonrpc\":\"2.0\",\"id\":22,\"method\":\"subscriptions/listen\","
                 "\"params\":{\"notifications\":{\"toolsListChanged\":true}," META_2026 "}}");
        m = wait_for(&capg, -1, "notifications/subscriptions/acknowledged");
        CHECK(m != NULL);
        json_decref(m);
        CHECK_INT(push_close(pg, gone, gone ? 5000 : 50), gone ? 0 : -1);
        json_decref(capg.msgs);
        pthread_mutex_destroy(&capg.mu);
    }

    feed(p, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":{"
            "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
            "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
    m = wait_for(&cap, 3, NULL);
    CHECK_STR(json_string_value(json_object_get(json_object_get(m, "result"), "protocolVersion")),
              "2025-06-18");
    /* Responses carry their event id for resumption. */
    const char *eid = json_string_value(
        json_object_get(json_object_get(json_object_get(m, "result"), "_meta"), "mcpd/event-id"));
    CHECK(eid && strstr(eid, ":0"));
    json_decref(m);
    CHECK(atomic_load(&cap.session_id) != NULL);

    feed(p, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
            "\"arguments\":{\"message\":\"hi\"}}}");
    m = wait_for(&cap, 4, NULL);
    json_t *content = json_object_get(json_object_get(m, "result"), "content");
    CHECK_STR(json_string_value(json_object_get(json_array_get(content, 0), "text")), "hi");
    json_decref(m);

    /* A countdown with progress: all progress arrives before the result. */
    feed(p, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"countdown\",\"arguments\":{\"n\":3,\"interval_ms\":5},"
            "\"_meta\":{\"progressToken\":\"t\"}}}");
    m = wait_for(&cap, 5, NULL);
    CHECK(m != NULL);
    CHECK_INT(count_method(&cap, "notifications/progress"), 3);
    json_decref(m);

    /* Opted in: the handle at once, then the messages as mcpd/chunk. */
    feed(p, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"countdown\",\"arguments\":{\"n\":2,\"interval_ms\":5},\"stream\":true}}");
    m = wait_for(&cap, 6, NULL);
    CHECK_STR(json_string_value(json_object_get(json_object_get(m, "result"), "status")),
              "streaming_started");
    CHECK_STR(json_string_value(json_object_get(json_object_get(m, "result"), "transport")), "ws");
    json_decref(m);
    CHECK(drained(&cap, 5000));
    CHECK_INT(count_method(&cap, "mcpd/chunk"), 1); /* countdown without a token: the result */

    /* A batch outside 2025-03-26 is refused. */
    size_t before = json_array_size(cap.msgs);
    feed(p, "[{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}]");
    CHECK(json_array_size(cap.msgs) == before + 1);

    /* A second connection resumes the session from an event id. */
    char sid[64];
    snprintf(sid, sizeof sid, "%s", atomic_load(&cap.session_id));
    push_close(p, 0, 0);
    struct capture cap2 = {.msgs = json_array()};
    pthread_mutex_init(&cap2.mu, NULL);
    struct push_io io2 = capture_io(&cap2, "ws");
    io2.resume_session = "0123456789abcdef0123456789abcdef";
    /* A reconnect the core refuses: the refusal, and a connection without
     * a session (it may still initialize). */
    struct core_reply refused;
    struct push *p2 = push_open(&io2, &refused);
    CHECK(p2 != NULL);
    CHECK_INT(refused.kind, CORE_REJECTED);
    CHECK_INT(refused.reason, CORE_NOT_FOUND);
    CHECK_INT(refusal_code(refused.error), -32001);
    core_reply_clear(&refused);
    feed(p2, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\"}");
    m = wait_for(&cap2, 7, NULL);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(m, "error"), "code")), -32600);
    json_decref(m);
    push_close(p2, 0, 0);
    io2.resume_session = sid;
    io2.resume_event = "nosuchstream:1";
    p2 = push_open(&io2, &refused);
    CHECK(p2 != NULL);
    CHECK_INT(refused.kind, CORE_REJECTED);
    CHECK_INT(refused.reason, CORE_BAD_REQUEST);
    core_reply_clear(&refused);
    push_close(p2, 0, 0);
    io2.resume_event = NULL;
    p2 = push_open(&io2, &refused);
    CHECK(p2 != NULL);
    CHECK_INT(refused.kind, CORE_ACCEPTED); /* zeroed: resumed */
    feed(p2,
         "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
         "\"arguments\":{\"message\":\"again\"}}}");
    m = wait_for(&cap2, 8, NULL);
    CHECK(m != NULL);
    json_decref(m);

    /* Past its in-flight cap a connection refuses requests instead of
     * running them. */
    struct capture cap3 = {.msgs = json_array()};
    pthread_mutex_init(&cap3.mu, NULL);
    struct push_io io3 = capture_io(&cap3, "stdio");
    io3.max_inflight = 2;
    io3.resume_session = sid;
    struct push *p3 = push_open(&io3, &refused);
    CHECK_INT(refused.kind, CORE_ACCEPTED);
    CHECK(atomic_load(&cap3.session_id) && strcmp(atomic_load(&cap3.session_id), sid) == 0);
    for (int i = 0; i < 3; i++) {
        char req[200];
        snprintf(req, sizeof req,
                 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{"
                 "\"name\":\"countdown\",\"arguments\":{\"n\":1,\"interval_ms\":300}}}",
                 20 + i);
        feed(p3, req);
    }
    m = wait_for(&cap3, 22, NULL);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(m, "error"), "code")), -32000);
    json_decref(m);
    CHECK(drained(&cap3, 5000));
    m = wait_for(&cap3, 20, NULL);
    CHECK(m && json_object_get(m, "result"));
    json_decref(m);
    push_close(p3, 0, 0);
    json_decref(cap3.msgs);

    /* A connection whose sends fail stops sending; the request still ends. */
    cap2.fail_sends = 1;
    feed(p2, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"countdown\",\"arguments\":{\"n\":2,\"interval_ms\":1}}}");
    CHECK(drained(&cap2, 5000));
    push_close(p2, 0, 0);

    /* A standalone message a connection read but could not send is the
     * next connection's: the session's delivery cursor stays before it. */
    struct capture cap4 = {.msgs = json_array(), .fail_sends = 1};
    pthread_mutex_init(&cap4.mu, NULL);
    struct push_io io4 = capture_io(&cap4, "ws");
    io4.resume_session = sid;
    struct push *p4 = push_open(&io4, &refused);
    CHECK_INT(refused.kind, CORE_ACCEPTED);
    struct core_caller by_sid = {.transport = "ws", .session_id = sid, .connection = 1};
    struct session *s = core_session_open(&by_sid, &refused);
    CHECK(s != NULL);
    const char *note = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
                       "\"params\":{\"level\":\"info\",\"data\":\"kept\"}}";
    CHECK(s && core_relay_to_standalone(s, note, strlen(note), NULL, 0) >= 0);
    session_unref(s);
    int64_t deadline = clock_mono_ms() + 5000;
    for (int tried = 0; !tried && clock_mono_ms() < deadline;) {
        pthread_mutex_lock(&cap4.mu);
        tried = cap4.attempts > 0;
        pthread_mutex_unlock(&cap4.mu);
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    push_close(p4, 0, 0); /* lets go of the standalone stream */
    json_decref(cap4.msgs);
    struct capture cap5 = {.msgs = json_array()};
    pthread_mutex_init(&cap5.mu, NULL);
    struct push_io io5 = capture_io(&cap5, "ws");
    io5.resume_session = sid;
    struct push *p5 = push_open(&io5, &refused);
    CHECK_INT(refused.kind, CORE_ACCEPTED);
    m = wait_for(&cap5, -1, "notifications/message");
    CHECK_STR(json_string_value(json_object_get(json_object_get(m, "params"), "data")), "kept");
    json_decref(m);
    push_close(p5, 0, 0);
    json_decref(cap5.msgs);

    loop_stop();
    core_stop(1000);
    core_cleanup();
    builtin_backend_ops()->destroy(backend);
    store_close(st);
    json_decref(cap.msgs);
    json_decref(cap2.msgs);
    return check_summary();
}
