/* test_task — the tasks extension's rules (service/core/task.c) with the
 * core started (core_start) over a stub backend and a real SQLite store in
 * a temporary folder. Each task is made as receive.c makes one: a session
 * of its own, a request stream, a call tracked in the session (the test
 * plays the handler, ending the call itself or on a thread of its own),
 * then task_created. What the functions answer is read off the core_reply
 * they fill, as a transport would.
 *   - the lifecycle as task_get shows it: working, input_required (with
 *     the pending server→client requests) until tasks/update answers them,
 *     then completed (a tool error too), failed (with the error and its
 *     message), or cancelled (tasks/cancel, then the call ends without a
 *     final message); cancelling a finished task changes nothing;
 *   - task_created's CreateTaskResult, ttlMs as given, createdAt from the
 *     session's mcpd/createdMs, task_snapshot (the same, less resultType);
 *   - principals: another principal's task (and no principal's, when the
 *     task has one) is not found by get, update, cancel or snapshot; NULL
 *     and "" are the same; a standalone stream, an unknown or missing
 *     taskId is no task; a task whose session ended is gone;
 *   - tasks/cancel cancels the task's call only (not another request of
 *     the same session);
 *   - 2025-11-25 tasks (task_legacy_*): created with a ttl capped at the
 *     session idle time, get/list within the session only, result (waits
 *     for the end; the call's result with related-task in _meta, keeping
 *     the result's own _meta, or its error, or none), cancel (the task's
 *     call only), and forget. */
#include "call.h"
#include "call_life.h"
#include "check.h"
#include "clock.h"
#include "core.h"
#include "protocol.h"
#include "session.h"
#include "store.h"
#include "stream.h"
#include "task.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IDLE_MS 3600000 /* the session idle time: what a legacy task's ttl is capped at */
#define CREATED_MS 1700000000123LL
#define CREATED_ISO "2023-11-14T22:13:20.123Z"

static char tmpdir[64];
static char dbpath[128];
static struct store *store;

static json_t *stub_capabilities(void *self)
{
    (void)self;
    return json_pack("{s:{}}", "tools");
}

static void stub_handle(void *self, struct call *c)
{
    (void)self;
    call_fail(c, JSONRPC_METHOD_NOT_FOUND, "Method not found", NULL);
}

static const struct backend_ops stub = {
    .name = "stub", .capabilities = stub_capabilities, .handle = stub_handle};

/* A task being run: its session, stream and call (the test holds one
 * reference on each), and its id. */
struct task {
    struct session *s;
    struct stream *st;
    struct call *c;
    char id[64];
};

/* A session as receive.c makes one for a 2026-07-28 request (a task when
 * `task`), or for a 2025-11-25 client. */
static struct session *new_session_as(const char *principal, const char *protocol, int task)
{
    json_t *params =
        json_pack("{s:s, s:{s:{s:{}}}, s:{s:s}}", "protocolVersion", protocol, "capabilities",
                  "extensions", TASK_EXTENSION, "clientInfo", "name", "unit");
    if (strcmp(protocol, PROTOCOL_STATELESS) == 0) {
        json_object_set_new(params, "mcpd/createdMs", json_integer(CREATED_MS));
        json_object_set_new(params, "mcpd/task", json_boolean(task));
    }
    struct session_origin o = {principal, "http", NULL};
    struct session *s = NULL;
    CHECK_INT(session_create(protocol, params, &o, &s), 0);
    json_decref(params);
    return s;
}

/* A task's session for 2026-07-28; any session for 2025-11-25. */
static struct session *new_session(const char *principal, const char *protocol)
{
    return new_session_as(principal, protocol, strcmp(protocol, PROTOCOL_STATELESS) == 0);
}

/* A call in s on a new request stream, tracked under its id. */
static int start_call(struct session *s, json_int_t n, struct task *t)
{
    memset(t, 0, sizeof *t);
    json_t *id = json_integer(n);
    json_t *req = json_pack("{s:s, s:O, s:s, s:{s:s}}", "jsonrpc", "2.0", "id", id, "method",
                            "tools/call", "params", "name", "work");
    char key[96];
    jsonrpc_id_key(id, key, sizeof key);
    t->st = s ? stream_create(session_id(s), STREAM_REQUEST, id) : NULL;
    enum session_track_rc why = SESSION_TRACK_NOMEM;
    t->c = t->st ? call_new(s, t->st, req, key, &why) : NULL;
    json_decref(req);
    json_decref(id);
    CHECK(t->c != NULL);
    if (!t->c) {
        stream_unref(t->st);
        t->st = NULL;
        return -1;
    }
    call_ref(t->c); /* the test's, beyond the call's end */
    session_ref(s);
    t->s = s;
    snprintf(t->id, sizeof t->id, "%s", stream_id(t->st));
    return 0;
}

static void task_done(struct task *t)
{
    call_unref(t->c);
    stream_unref(t->st);
    session_unref(t->s);
    memset(t, 0, sizeof *t);
}

/* The answer's result (borrowed from out), or NULL. */
static json_t *result_of(struct core_reply *out)
{
    return out->kind == CORE_ANSWERED ? json_object_get(out->error, "result") : NULL;
}

static json_t *params_for(const char *task_id)
{
    return task_id ? json_pack("{s:s}", "taskId", task_id) : json_object();
}

/* tasks/get's result (new reference), or NULL when refused. */
static json_t *get(const char *principal, const char *task_id, int64_t ttl)
{
    json_t *id = json_integer(7), *params = params_for(task_id);
    struct core_reply out = {0};
    task_get(principal, id, params, ttl, &out);
    json_t *r = json_incref(result_of(&out));
    core_reply_clear(&out);
    json_decref(params);
    json_decref(id);
    return r;
}

static const char *str(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* The status tasks/get shows (into buf), or "(none)" when not found. */
static const char *status(const char *principal, const char *task_id, char *buf, size_t cap)
{
    json_t *r = get(principal, task_id, 0);
    snprintf(buf, cap, "%s", r ? (str(r, "status") ? str(r, "status") : "(no status)") : "(none)");
    json_decref(r);
    return buf;
}

/* 1 if out is the refusal of a task that is not there (tasks/get,
 * tasks/update, tasks/cancel of the 2026-07-28 extension). */
static int not_found(struct core_reply *out)
{
    json_t *err = json_object_get(out->error, "error");
    return out->kind == CORE_REJECTED && out->reason == CORE_BAD_REQUEST &&
           json_integer_value(json_object_get(err, "code")) == JSONRPC_INVALID_PARAMS &&
           str(err, "message") &&
           strcmp(str(err, "message"), "Failed to retrieve task: Task not found") == 0;
}

static int cancel(const char *principal, const char *task_id)
{
    json_t *id = json_integer(8), *params = params_for(task_id);
    struct core_reply out = {0};
    task_cancel(principal, id, params, &out);
    int rc = not_found(&out) ? -1 : str(result_of(&out), "resultType") ? 0 : -2;
    core_reply_clear(&out);
    json_decref(params);
    json_decref(id);
    return rc;
}

static int update(const char *principal, const char *task_id, json_t *responses)
{
    json_t *id = json_integer(9), *params = params_for(task_id);
    json_object_set(params, "inputResponses", responses);
    struct core_reply out = {0};
    task_update(principal, id, params, &out);
    const char *rt = str(result_of(&out), "resultType");
    int rc = not_found(&out) ? -1 : rt && strcmp(rt, "complete") == 0 ? 0 : -2;
    core_reply_clear(&out);
    json_decref(params);
    json_decref(id);
    return rc;
}

static void test_created(void)
{
    struct session *s = new_session("alice", PROTOCOL_STATELESS);
    struct task t;
    if (!s || start_call(s, 1, &t) != 0)
        return;
    json_t *id = json_integer(1);
    struct core_reply out = {0};
    task_created(s, t.st, id, 5000, &out);
    json_decref(id);
    CHECK_INT(out.kind, CORE_ANSWERED);
    CHECK_INT(json_integer_value(json_object_get(out.error, "id")), 1);
    json_t *r = result_of(&out);
    CHECK_STR(str(r, "resultType"), "task");
    CHECK_STR(str(r, "taskId"), t.id);
    CHECK_STR(str(r, "status"), "working");
    CHECK(str(r, "statusMessage") != NULL);
    CHECK(str(r, "createdAt") && strlen(str(r, "createdAt")) == 24);
    CHECK_STR(str(r, "lastUpdatedAt"), str(r, "createdAt"));
    CHECK_INT(json_integer_value(json_object_get(r, "ttlMs")), 5000);
    CHECK_INT(json_integer_value(json_object_get(r, "pollIntervalMs")), 250);
    core_reply_clear(&out);

    /* Found at once, working; ttlMs is the caller's, createdAt the
     * session's mcpd/createdMs. */
    json_t *g = get("alice", t.id, 1234);
    CHECK(g != NULL);
    CHECK_STR(str(g, "resultType"), "complete");
    CHECK_STR(str(g, "taskId"), t.id);
    CHECK_STR(str(g, "status"), "working");
    CHECK_STR(str(g, "createdAt"), CREATED_ISO);
    CHECK(str(g, "lastUpdatedAt") != NULL);
    CHECK_INT(json_integer_value(json_object_get(g, "ttlMs")), 1234);
    CHECK(json_object_get(g, "result") == NULL);
    CHECK(json_object_get(g, "inputRequests") == NULL);
    /* The snapshot: the same, less resultType. */
    json_t *snap = task_snapshot("alice", t.id, 1234);
    CHECK(snap != NULL);
    CHECK(json_object_get(snap, "resultType") == NULL);
    json_object_del(g, "resultType");
    CHECK(json_equal(snap, g));
    json_decref(snap);
    json_decref(g);

    call_reply(t.c, json_pack("{s:[]}", "content"));
    task_done(&t);
    session_unref(s);
}

/* A 2026-07-28 request is a task only if it ran as one: a plain request's
 * stream (a subscription's) is not found. A 2025-11-25 session's request
 * is its task for a dual-era client too, with its own createdAt (it was
 * 1970: the 2026 session's mcpd/createdMs, which it has not). */
static void test_only_tasks(void)
{
    struct session *plain = new_session_as("alice", PROTOCOL_STATELESS, 0);
    struct session *old = new_session("alice", "2025-11-25");
    struct task p, o;
    if (!plain || !old || start_call(plain, 1, &p) != 0 || start_call(old, 1, &o) != 0)
        return;
    char b[32];
    CHECK_STR(status("alice", p.id, b, sizeof b), "(none)");
    CHECK(task_snapshot("alice", p.id, 0) == NULL);
    CHECK_INT(cancel("alice", p.id), -1);
    json_t *none = json_object();
    CHECK_INT(update("alice", p.id, none), -1);
    json_decref(none);
    json_t *g = get("alice", o.id, 0);
    CHECK_STR(str(g, "status"), "working");
    CHECK(str(g, "createdAt") && strncmp(str(g, "createdAt"), "1970", 4) != 0);
    json_decref(g);
    call_reply(p.c, json_pack("{s:[]}", "content"));
    call_reply(o.c, json_pack("{s:[]}", "content"));
    task_done(&p);
    task_done(&o);
    session_unref(plain);
    session_unref(old);
}

static void test_principals(void)
{
    struct session *s = new_session("alice", PROTOCOL_STATELESS);
    struct session *anon = new_session(NULL, PROTOCOL_STATELESS);
    struct task t, u;
    if (!s || !anon || start_call(s, 1, &t) != 0 || start_call(anon, 1, &u) != 0)
        return;
    char b[32];
    CHECK_STR(status("alice", t.id, b, sizeof b), "working");
    /* Another principal's, or no principal's, is not there. */
    CHECK_STR(status("bob", t.id, b, sizeof b), "(none)");
    CHECK_STR(status(NULL, t.id, b, sizeof b), "(none)");
    CHECK_STR(status("", t.id, b, sizeof b), "(none)");
    CHECK_STR(status("alic", t.id, b, sizeof b), "(none)");
    CHECK(task_snapshot("bob", t.id, 0) == NULL);
    json_t *id = json_integer(3), *params = params_for(t.id);
    struct core_reply out = {0};
    task_get("bob", id, params, 0, &out);
    CHECK(not_found(&out));
    core_reply_clear(&out);
    json_decref(params);
    json_decref(id);
    /* Nor can it be cancelled or updated by them. */
    CHECK_INT(cancel("bob", t.id), -1);
    CHECK_INT(cancel(NULL, t.id), -1);
    CHECK_INT(call_cancelled(t.c), 0);
    json_t *resp = json_object();
    CHECK_INT(update("bob", t.id, resp), -1);

    /* A task without a principal: NULL and "" are the same, a principal
     * is not. */
    CHECK_STR(status(NULL, u.id, b, sizeof b), "working");
    CHECK_STR(status("", u.id, b, sizeof b), "working");
    CHECK_STR(status("alice", u.id, b, sizeof b), "(none)");
    CHECK_INT(update("", u.id, resp), 0);
    json_decref(resp);

    /* No task: unknown, missing, not a string, a standalone stream. */
    CHECK_STR(status("alice", "00000000000000000000000000000000", b, sizeof b), "(none)");
    CHECK_STR(status("alice", NULL, b, sizeof b), "(none)");
    id = json_integer(4);
    params = json_pack("{s:i}", "taskId", 5);
    task_get("alice", id, params, 0, &out);
    CHECK(not_found(&out));
    core_reply_clear(&out);
    json_decref(params);
    json_decref(id);
    struct stream *sa = session_standalone(s);
    CHECK_STR(status("alice", sa ? stream_id(sa) : NULL, b, sizeof b), "(none)");
    CHECK(task_snapshot("alice", sa ? stream_id(sa) : NULL, 0) == NULL);
    stream_unref(sa);

    call_reply(t.c, json_pack("{s:[]}", "content"));
    call_reply(u.c, json_pack("{s:[]}", "content"));
    /* A task whose session ended is gone. */
    CHECK_STR(status("alice", t.id, b, sizeof b), "completed");
    core_end_session(s);
    CHECK_STR(status("alice", t.id, b, sizeof b), "(none)");
    CHECK(task_snapshot("alice", t.id, 0) == NULL);
    task_done(&t);
    task_done(&u);
    session_unref(s);
    session_unref(anon);
}

struct asker {
    struct task *t;
    int rc;
};

/* The handler: asks the client two things at once, then replies with
 * what it answered. */
static void *ask_main(void *arg)
{
    struct asker *a = arg;
    json_t *reqs = json_pack("{s:{s:s, s:{s:s}}, s:{s:s, s:{s:s}}}", "confirm", "method",
                             "elicitation/create", "params", "message", "Sure?", "pick", "method",
                             "elicitation/create", "params", "message", "Which?");
    json_t *answers = NULL;
    a->rc = call_request_client_all(a->t->c, reqs, 60000, &answers);
    json_decref(reqs);
    if (a->rc == 0)
        call_reply(a->t->c, json_pack("{s:[], s:O}", "content", "answers", answers));
    else
        call_fail(a->t->c, JSONRPC_INTERNAL_ERROR, "no answer", NULL);
    json_decref(answers);
    return NULL;
}

/* Waits (up to a minute: a failure, not a timing) until the task asks for
 * n inputs. */
static json_t *await_inputs(const char *principal, const char *task_id, size_t n)
{
    int64_t deadline = clock_mono_ms() + 60000;
    while (clock_mono_ms() < deadline) {
        json_t *r = get(principal, task_id, 0);
        if (r && str(r, "status") && strcmp(str(r, "status"), "input_required") == 0 &&
            json_object_size(json_object_get(r, "inputRequests")) == n)
            return r;
        json_decref(r);
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void test_input_required(void)
{
    struct session *s = new_session("alice", PROTOCOL_STATELESS);
    struct task t;
    if (!s || start_call(s, 1, &t) != 0)
        return;
    struct asker a = {&t, -9};
    pthread_t th;
    CHECK_INT(pthread_create(&th, NULL, ask_main, &a), 0);
    json_t *r = await_inputs("alice", t.id, 2);
    CHECK(r != NULL);
    /* Keyed by the ids of the server's requests, with what they ask. */
    char sure[64] = "", which[64] = "";
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(r, "inputRequests"), k, v)
    {
        const char *msg = str(json_object_get(v, "params"), "message");
        CHECK(strncmp(k, "mcpd-", 5) == 0);
        CHECK_STR(str(v, "method"), "elicitation/create");
        snprintf(msg && strcmp(msg, "Sure?") == 0 ? sure : which, sizeof sure, "%s", k);
    }
    CHECK(sure[0] && which[0]);
    json_decref(r);

    /* Answers by another principal, and to unknown requests, change
     * nothing. */
    json_t *resp = json_pack("{s:{s:s}}", sure, "action", "accept");
    CHECK_INT(update("bob", t.id, resp), -1);
    json_t *stray = json_pack("{s:{s:s}}", "mcpd-999-00000000", "action", "accept");
    CHECK_INT(update("alice", t.id, stray), 0);
    json_decref(stray);
    r = get("alice", t.id, 0);
    CHECK_STR(str(r, "status"), "input_required");
    CHECK_INT(json_object_size(json_object_get(r, "inputRequests")), 2);
    json_decref(r);

    /* An answered request is no longer asked for... */
    CHECK_INT(update("alice", t.id, resp), 0);
    r = get("alice", t.id, 0);
    CHECK_STR(str(r, "status"), "input_required");
    CHECK_INT(json_object_size(json_object_get(r, "inputRequests")), 1);
    CHECK(json_object_get(json_object_get(r, "inputRequests"), which) != NULL);
    json_decref(r);
    /* ... and once all are answered, the call completes with them. */
    json_t *resp2 = json_pack("{s:{s:s}}", which, "action", "decline");
    CHECK_INT(update("alice", t.id, resp2), 0);
    json_decref(resp2);
    pthread_join(th, NULL);
    CHECK_INT(a.rc, 0);
    r = get("alice", t.id, 0);
    CHECK_STR(str(r, "status"), "completed");
    json_t *result = json_object_get(r, "result");
    CHECK(result != NULL);
    CHECK(json_object_get(result, "resultType") == NULL);
    CHECK_STR(str(json_object_get(json_object_get(result, "answers"), "confirm"), "action"),
              "accept");
    CHECK_STR(str(json_object_get(json_object_get(result, "answers"), "pick"), "action"),
              "decline");
    CHECK(json_object_get(r, "inputRequests") == NULL);
    CHECK(json_object_get(r, "error") == NULL);
    json_decref(r);
    /* Answered twice: ignored. */
    CHECK_INT(update("alice", t.id, resp), 0);
    json_decref(resp);
    /* Cancelling a finished task leaves it as it is. */
    char b[32];
    CHECK_INT(cancel("alice", t.id), 0);
    CHECK_STR(status("alice", t.id, b, sizeof b), "completed");
    task_done(&t);
    session_unref(s);
}

static void test_endings(void)
{
    char b[32];
    struct session *s1 = new_session("alice", PROTOCOL_STATELESS);
    struct session *s2 = new_session("alice", PROTOCOL_STATELESS);
    struct session *s3 = new_session("alice", PROTOCOL_STATELESS);
    struct task f, e, c;
    if (!s1 || !s2 || !s3 || start_call(s1, 1, &f) != 0 || start_call(s2, 1, &e) != 0 ||
        start_call(s3, 1, &c) != 0)
        return;

    /* A protocol error: failed, with the error and its message. */
    call_fail(f.c, JSONRPC_INTERNAL_ERROR, "boom", json_pack("{s:s}", "why", "test"));
    json_t *r = get("alice", f.id, 0);
    CHECK_STR(str(r, "status"), "failed");
    CHECK_STR(str(r, "statusMessage"), "boom");
    json_t *err = json_object_get(r, "error");
    CHECK_INT(json_integer_value(json_object_get(err, "code")), JSONRPC_INTERNAL_ERROR);
    CHECK_STR(str(json_object_get(err, "data"), "why"), "test");
    CHECK(json_object_get(r, "result") == NULL);
    json_decref(r);

    /* A tool's error is a result: completed. */
    call_reply(e.c, json_pack("{s:[], s:b}", "content", "isError", 1));
    r = get("alice", e.id, 0);
    CHECK_STR(str(r, "status"), "completed");
    CHECK(json_is_true(json_object_get(json_object_get(r, "result"), "isError")));
    json_decref(r);

    /* Cancelled: the call is told, and once it ends (its reply dropped),
     * the task is cancelled, with no result. */
    CHECK_INT(cancel("alice", c.id), 0);
    CHECK_INT(call_cancelled(c.c), 1);
    CHECK_STR(status("alice", c.id, b, sizeof b), "working");
    call_reply(c.c, json_pack("{s:[]}", "content"));
    r = get("alice", c.id, 0);
    CHECK_STR(str(r, "status"), "cancelled");
    CHECK(json_object_get(r, "result") == NULL);
    CHECK(json_object_get(r, "error") == NULL);
    json_decref(r);
    CHECK_INT(cancel("alice", c.id), 0); /* idempotent */
    CHECK_STR(status("alice", c.id, b, sizeof b), "cancelled");

    task_done(&f);
    task_done(&e);
    task_done(&c);
    session_unref(s1);
    session_unref(s2);
    session_unref(s3);
}

/* ---- 2025-11-25 tasks ---- */

static json_t *legacy_created(struct session *s, struct task *t, json_t *task_param)
{
    json_t *id = json_integer(1);
    struct core_reply out = {0};
    task_legacy_created(s, t->st, id, task_param, &out);
    json_t *task = json_incref(json_object_get(result_of(&out), "task"));
    core_reply_clear(&out);
    json_decref(id);
    json_decref(task_param);
    return task;
}

/* The message a legacy call answered with (new reference). */
static json_t *legacy(struct session *s, const char *what, const char *task_id, int64_t wait_ms)
{
    json_t *id = json_integer(2), *params = params_for(task_id);
    struct core_reply out = {0};
    if (strcmp(what, "get") == 0)
        task_legacy_get(s, id, params, &out);
    else if (strcmp(what, "result") == 0)
        task_legacy_result(s, id, params, wait_ms, &out);
    else if (strcmp(what, "cancel") == 0)
        task_legacy_cancel(s, id, params, &out);
    else
        task_legacy_list(s, id, &out);
    /* Answered on the session, even a refusal. */
    CHECK_INT(out.kind, CORE_ANSWERED);
    json_t *msg = json_incref(out.error);
    core_reply_clear(&out);
    json_decref(params);
    json_decref(id);
    return msg;
}

static int legacy_not_found(json_t *msg)
{
    json_t *err = json_object_get(msg, "error");
    return json_integer_value(json_object_get(err, "code")) == JSONRPC_INVALID_PARAMS &&
           str(err, "message") &&
           strcmp(str(err, "message"), "Failed to retrieve task: Task not found") == 0;
}

static const char *legacy_status(struct session *s, const char *task_id, char *buf, size_t cap)
{
    json_t *m = legacy(s, "get", task_id, 0);
    const char *st = str(json_object_get(m, "result"), "status");
    snprintf(buf, cap, "%s", st ? st : legacy_not_found(m) ? "(none)" : "(?)");
    json_decref(m);
    return buf;
}

static void *sleeper_main(void *arg)
{
    struct task *t = arg;
    /* A handler that waits for cancellation, then replies anyway. */
    call_sleep(t->c, 60000);
    call_reply(t->c, json_pack("{s:[]}", "content"));
    return NULL;
}

static void *replier_main(void *arg)
{
    struct task *t = arg;
    call_reply(t->c, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", "late"));
    return NULL;
}

static void test_legacy(void)
{
    char b[32];
    struct session *s = new_session("alice", "2025-11-25");
    struct session *other = new_session("alice", "2025-11-25");
    struct task t1, t2, t3, t4, t5;
    if (!s || !other || start_call(s, 1, &t1) != 0 || start_call(s, 2, &t2) != 0 ||
        start_call(s, 3, &t3) != 0 || start_call(s, 4, &t4) != 0 || start_call(s, 5, &t5) != 0)
        return;

    /* ttl: what the client asks, when shorter than the idle time. */
    json_t *task = legacy_created(s, &t1, json_pack("{s:i}", "ttl", 5000));
    CHECK_STR(str(task, "taskId"), t1.id);
    CHECK_STR(str(task, "status"), "working");
    CHECK_INT(json_integer_value(json_object_get(task, "ttl")), 5000);
    CHECK_INT(json_integer_value(json_object_get(task, "pollInterval")), 250);
    CHECK(str(task, "createdAt") != NULL);
    json_decref(task);
    task = legacy_created(s, &t2, json_pack("{s:I}", "ttl", (json_int_t)IDLE_MS * 10));
    CHECK_INT(json_integer_value(json_object_get(task, "ttl")), IDLE_MS);
    json_decref(task);
    task = legacy_created(s, &t3, json_pack("{s:i}", "ttl", 0));
    CHECK_INT(json_integer_value(json_object_get(task, "ttl")), IDLE_MS);
    json_decref(task);
    task = legacy_created(s, &t4, json_pack("{s:s}", "ttl", "5"));
    CHECK_INT(json_integer_value(json_object_get(task, "ttl")), IDLE_MS);
    json_decref(task);
    task = legacy_created(s, &t5, json_object());
    CHECK_INT(json_integer_value(json_object_get(task, "ttl")), IDLE_MS);
    json_decref(task);

    /* get: within its session only. */
    json_t *m = legacy(s, "get", t1.id, 0);
    CHECK_STR(str(json_object_get(m, "result"), "taskId"), t1.id);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(m, "result"), "ttl")), 5000);
    json_decref(m);
    CHECK_STR(legacy_status(other, t1.id, b, sizeof b), "(none)");
    CHECK_STR(legacy_status(s, NULL, b, sizeof b), "(none)");
    CHECK_STR(legacy_status(s, "00000000000000000000000000000000", b, sizeof b), "(none)");
    struct stream *sa = session_standalone(s);
    CHECK_STR(legacy_status(s, sa ? stream_id(sa) : NULL, b, sizeof b), "(none)");
    stream_unref(sa);

    /* list: the session's tasks. */
    m = legacy(s, "list", NULL, 0);
    json_t *tasks = json_object_get(json_object_get(m, "result"), "tasks");
    CHECK_INT(json_array_size(tasks), 5);
    size_t i;
    json_t *v;
    int has1 = 0, has5 = 0;
    json_array_foreach(tasks, i, v)
    {
        has1 |= str(v, "taskId") && strcmp(str(v, "taskId"), t1.id) == 0;
        has5 |= str(v, "taskId") && strcmp(str(v, "taskId"), t5.id) == 0;
    }
    CHECK(has1 && has5);
    json_decref(m);
    m = legacy(other, "list", NULL, 0);
    CHECK_INT(json_array_size(json_object_get(json_object_get(m, "result"), "tasks")), 0);
    json_decref(m);

    /* result: none yet (no wait); then the call's own result, with the
     * related task in _meta beside what the result's _meta had. */
    m = legacy(s, "result", t1.id, 0);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(m, "error"), "code")),
              JSONRPC_SERVER_ERROR);
    json_decref(m);
    call_reply(t1.c, json_pack("{s:[], s:{s:i}}", "content", "_meta", "x", 1));
    m = legacy(s, "result", t1.id, 0);
    json_t *res = json_object_get(m, "result");
    CHECK(json_is_array(json_object_get(res, "content")));
    json_t *meta = json_object_get(res, "_meta");
    CHECK_STR(str(json_object_get(meta, "io.modelcontextprotocol/related-task"), "taskId"), t1.id);
    CHECK_INT(json_integer_value(json_object_get(meta, "x")), 1);
    json_decref(m);
    CHECK_STR(legacy_status(s, t1.id, b, sizeof b), "completed");
    /* It waits for the end. */
    pthread_t th;
    CHECK_INT(pthread_create(&th, NULL, replier_main, &t5), 0);
    m = legacy(s, "result", t5.id, 60000);
    pthread_join(th, NULL);
    CHECK_STR(
        str(json_array_get(json_object_get(json_object_get(m, "result"), "content"), 0), "text"),
        "late");
    json_decref(m);

    /* A failed call: its error, as the call would have answered. */
    call_fail(t2.c, 42, "bad", json_pack("{s:s}", "why", "test"));
    m = legacy(s, "result", t2.id, 0);
    json_t *err = json_object_get(m, "error");
    CHECK_INT(json_integer_value(json_object_get(err, "code")), 42);
    CHECK_STR(str(err, "message"), "bad");
    CHECK_STR(str(json_object_get(err, "data"), "why"), "test");
    json_decref(m);
    m = legacy(s, "get", t2.id, 0);
    CHECK_STR(str(json_object_get(m, "result"), "status"), "failed");
    CHECK_STR(str(json_object_get(m, "result"), "statusMessage"), "bad");
    json_decref(m);

    /* cancel: the task's call, no other of the session. */
    CHECK_INT(pthread_create(&th, NULL, sleeper_main, &t3), 0);
    m = legacy(s, "cancel", t3.id, 0);
    CHECK_STR(str(json_object_get(m, "result"), "taskId"), t3.id);
    json_decref(m);
    pthread_join(th, NULL);
    CHECK_INT(call_cancelled(t3.c), 1);
    CHECK_INT(call_cancelled(t4.c), 0);
    CHECK_STR(legacy_status(s, t3.id, b, sizeof b), "cancelled");
    m = legacy(s, "result", t3.id, 0);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(m, "error"), "code")),
              JSONRPC_SERVER_ERROR);
    json_decref(m);
    /* The same through tasks/cancel of 2026-07-28 (a dual-era client with
     * a 2025-11-25 task's id): t4's call only. */
    struct task t6;
    if (start_call(s, 6, &t6) == 0) {
        CHECK_INT(cancel("alice", t4.id), 0);
        CHECK_INT(call_cancelled(t4.c), 1);
        CHECK_INT(call_cancelled(t6.c), 0);
        call_reply(t6.c, json_pack("{s:[]}", "content"));
        task_done(&t6);
    }
    call_reply(t4.c, json_pack("{s:[]}", "content"));
    CHECK_STR(legacy_status(s, t4.id, b, sizeof b), "cancelled");

    /* forget: off the list; get still finds it, with the default ttl. */
    task_legacy_forget(session_id(s));
    m = legacy(s, "list", NULL, 0);
    CHECK_INT(json_array_size(json_object_get(json_object_get(m, "result"), "tasks")), 0);
    json_decref(m);
    m = legacy(s, "get", t1.id, 0);
    CHECK_STR(str(json_object_get(m, "result"), "status"), "completed");
    CHECK_INT(json_integer_value(json_object_get(json_object_get(m, "result"), "ttl")), IDLE_MS);
    json_decref(m);

    task_done(&t1);
    task_done(&t2);
    task_done(&t3);
    task_done(&t4);
    task_done(&t5);
    core_end_session(s);
    session_unref(s);
    session_unref(other);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mcpd-test-task-XXXXXX");
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
    struct core_config cfg = {
        .session_idle_ms = IDLE_MS,
        .stream_retention_ms = IDLE_MS,
        .session_max_bytes = 1 << 20,
        .log_retention_ms = IDLE_MS,
        .max_workers = 2,
        .server_name = "unit",
        .server_version = "1",
    };
    if (core_start(&cfg, store, &stub, NULL, &err) != 0) {
        printf("core_start: %s\n", err ? err : "?");
        free(err);
        return 2;
    }
    test_created();
    test_only_tasks();
    test_principals();
    test_input_required();
    test_endings();
    test_legacy();
    core_stop(1000);
    core_cleanup();
    store_close(store);

    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", tmpdir);
    return check_summary();
}
