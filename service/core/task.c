/* task — see task.h. */
#include "task.h"
#include "call.h"
#include "call_life.h"
#include "clock.h"
#include "core_int.h"
#include "jsonrpc.h"
#include "listen.h"
#include "protocol.h"
#include "session.h"
#include "stream.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* How often a client should look (a hint). */
#define POLL_INTERVAL_MS 250

static void iso8601(int64_t ms, char *out, size_t cap)
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, cap, "%s.%03dZ", base, (int)(ms % 1000));
}

static json_t *answer(json_t *id, json_t *result)
{
    return jsonrpc_result(id, result);
}

static void answered(struct core_reply *out, json_t *msg)
{
    memset(out, 0, sizeof *out);
    out->kind = CORE_ANSWERED;
    out->error = msg;
}

/* The task with that id, if it is the principal's: its stream and session
 * (references), or -1. A 2026-07-28 request is a task only if it ran as one
 * (a subscription's stream is not); a 2025-11-25 session's request streams
 * are its tasks, as tasks/get of that revision sees them (a dual-era client
 * may name one). */
static int lookup(const char *principal, const char *task_id, struct stream **st,
                  struct session **s)
{
    *st = task_id ? stream_find(task_id) : NULL;
    *s = *st ? session_find(stream_session(*st)) : NULL;
    if (*s && !session_belongs_to(*s, principal && *principal ? principal : NULL)) {
        session_unref(*s);
        *s = NULL;
    }
    if (!*s || stream_is_standalone(*st) ||
        (strcmp(session_protocol(*s), PROTOCOL_STATELESS) == 0 &&
         !json_is_true(json_object_get(session_init_params(*s), "mcpd/task")))) {
        stream_unref(*st);
        session_unref(*s);
        return -1;
    }
    return 0;
}

/* lookup by params.taskId, or -1 after filling *out with -32602. */
static int find(const char *principal, json_t *id, json_t *params, struct stream **st,
                struct session **s, struct core_reply *out)
{
    if (lookup(principal, json_string_value(json_object_get(params, "taskId")), st, s) == 0)
        return 0;
    core_reject(out, CORE_BAD_REQUEST, id, JSONRPC_INVALID_PARAMS,
                "Failed to retrieve task: Task not found");
    return -1;
}

void task_created(struct session *s, struct stream *st, json_t *id, int64_t ttl_ms,
                  struct core_reply *out)
{
    if (stream_persist(st) != 0) {
        core_reject(out, CORE_UNAVAILABLE, id, JSONRPC_INTERNAL_ERROR, "The store is not writable");
        return;
    }
    char now[40];
    iso8601(session_last_active_ms(s), now, sizeof now);
    answered(out, answer(id, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:i}", "resultType",
                                       "task", "taskId", stream_id(st), "status", "working",
                                       "statusMessage", "The operation is now in progress.",
                                       "createdAt", now, "lastUpdatedAt", now, "ttlMs",
                                       (json_int_t)ttl_ms, "pollIntervalMs", POLL_INTERVAL_MS)));
}

/* What the stream says: its final message (new reference; NULL when it has
 * none yet or ended without one), whether it ended, and the server→client
 * requests on it still awaiting answers ({id: {method, params}}, new). */
static void read_task(struct session *s, struct stream *st, json_t **final, int *ended,
                      json_t **pending)
{
    *final = NULL;
    *ended = 0;
    *pending = json_object();
    struct stream_reader tok;
    stream_observe(st, &tok);
    for (int64_t seq = 0;; seq++) {
        struct stream_chunk ch;
        enum stream_wait w = stream_read(st, &tok, seq, 0, &ch);
        if (w == STREAM_POLL || w == STREAM_PROBE) {
            seq--;
            continue;
        }
        if (w != STREAM_CHUNK) {
            *ended = w == STREAM_ENDED || w == STREAM_REFUSED;
            break;
        }
        json_t *msg = json_loadb(ch.msg, ch.len, 0, NULL);
        const char *method = json_string_value(json_object_get(msg, "method"));
        json_t *rid = json_object_get(msg, "id");
        char key[96];
        if (method && rid && jsonrpc_id_key(rid, key, sizeof key) == 0 &&
            session_pending_has(s, key) && json_is_string(rid))
            json_object_set_new(*pending, json_string_value(rid),
                                json_pack("{s:s, s:O}", "method", method, "params",
                                          json_object_get(msg, "params")
                                              ? json_object_get(msg, "params")
                                              : json_object()));
        if (ch.is_end) {
            *final = msg;
            *ended = 1;
            break;
        }
        json_decref(msg);
    }
}

static struct {
    pthread_mutex_t mu;
    json_t *by_session; /* {session id: {task id: {"created": ms, "ttl": ms}}} */
} legacy = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* When 2025-11-25 task st of s was created and how long it is kept: as
 * tasks/get of that revision answered it, or for one this process did not
 * create (another replica, before a restart, a request that did not ask for
 * a task) the session's last activity and its idle time. */
static void legacy_entry(struct session *s, struct stream *st, int64_t *created, int64_t *ttl)
{
    pthread_mutex_lock(&legacy.mu);
    json_t *e = json_object_get(json_object_get(legacy.by_session, session_id(s)), stream_id(st));
    *created =
        e ? (int64_t)json_integer_value(json_object_get(e, "created")) : session_last_active_ms(s);
    *ttl = e ? (int64_t)json_integer_value(json_object_get(e, "ttl")) : core_session_idle_ms();
    pthread_mutex_unlock(&legacy.mu);
}

/* The task st of session s as the wire shows it (new reference). */
static json_t *task_object(struct session *s, struct stream *st, int64_t ttl_ms)
{
    json_t *final, *pending;
    int ended;
    read_task(s, st, &final, &ended, &pending);
    /* A 2026-07-28 task's session was made for it; a 2025-11-25 task (of a
     * dual-era client) has its own time. */
    json_t *made = json_object_get(session_init_params(s), "mcpd/createdMs");
    int64_t created_ms, unused;
    if (json_is_integer(made))
        created_ms = (int64_t)json_integer_value(made);
    else
        legacy_entry(s, st, &created_ms, &unused);
    char created[40], updated[40];
    iso8601(created_ms, created, sizeof created);
    iso8601(session_last_active_ms(s), updated, sizeof updated);
    json_t *r = json_pack("{s:s, s:s, s:s, s:I, s:i}", "taskId", stream_id(st), "createdAt",
                          created, "lastUpdatedAt", updated, "ttlMs", (json_int_t)ttl_ms,
                          "pollIntervalMs", POLL_INTERVAL_MS);
    json_t *result = json_object_get(final, "result");
    if (result) {
        json_t *copy = json_deep_copy(result);
        json_object_del(copy, "resultType");
        json_object_set_new(r, "status", json_string("completed"));
        json_object_set_new(r, "result", copy);
    } else if (final) {
        json_object_set_new(r, "status", json_string("failed"));
        json_object_set(r, "error", json_object_get(final, "error"));
        json_object_set(r, "statusMessage",
                        json_object_get(json_object_get(final, "error"), "message"));
    } else if (ended) {
        json_object_set_new(r, "status", json_string("cancelled"));
    } else if (json_object_size(pending) > 0) {
        json_object_set_new(r, "status", json_string("input_required"));
        json_object_set(r, "inputRequests", pending);
    } else {
        json_object_set_new(r, "status", json_string("working"));
    }
    json_decref(final);
    json_decref(pending);
    return r;
}

json_t *task_snapshot(const char *principal, const char *task_id, int64_t ttl_ms)
{
    struct stream *st;
    struct session *s;
    if (lookup(principal, task_id, &st, &s) != 0)
        return NULL;
    json_t *t = task_object(s, st, ttl_ms);
    stream_unref(st);
    session_unref(s);
    return t;
}

void task_get(const char *principal, json_t *id, json_t *params, int64_t ttl_ms,
              struct core_reply *out)
{
    struct stream *st;
    struct session *s;
    if (find(principal, id, params, &st, &s, out) != 0)
        return;
    json_t *r = json_pack("{s:s}", "resultType", "complete");
    json_t *t = task_object(s, st, ttl_ms);
    json_object_update(r, t);
    json_decref(t);
    stream_unref(st);
    session_unref(s);
    answered(out, answer(id, r));
}

void task_update(const char *principal, json_t *id, json_t *params, struct core_reply *out)
{
    struct stream *st;
    struct session *s;
    if (find(principal, id, params, &st, &s, out) != 0)
        return;
    const char *key;
    json_t *value;
    json_object_foreach(json_object_get(params, "inputResponses"), key, value)
    {
        /* Unknown and already answered keys are ignored. */
        json_t *rid = json_string(key);
        char k[96];
        struct call *c = jsonrpc_id_key(rid, k, sizeof k) == 0 ? session_pending_take(s, k) : NULL;
        if (c) {
            json_t *msg =
                json_pack("{s:s, s:O, s:O}", "jsonrpc", "2.0", "id", rid, "result", value);
            call_deliver_answer(c, msg);
            json_decref(msg);
            call_unref(c);
        }
        json_decref(rid);
    }
    /* Answered requests leave inputRequests with no chunk written. */
    listen_task_changed(stream_id(st));
    stream_unref(st);
    session_unref(s);
    answered(out, answer(id, json_pack("{s:s}", "resultType", "complete")));
}

static void cancel_if_stream(void *value, void *arg)
{
    if (call_on_stream(value, arg))
        call_cancel(value, CALL_CANCEL_CLIENT);
}

void task_cancel(const char *principal, json_t *id, json_t *params, struct core_reply *out)
{
    struct stream *st;
    struct session *s;
    if (find(principal, id, params, &st, &s, out) != 0)
        return;
    /* The task's call only: a 2025-11-25 task's session carries others
     * (tasks/cancel with its id cancelled them all). A finished task stays
     * as it is (cancel is idempotent). */
    session_each_tracked(s, cancel_if_stream, st);
    stream_unref(st);
    session_unref(s);
    answered(out, answer(id, json_pack("{s:s}", "resultType", "complete")));
}

/* ---- 2025-11-25 experimental tasks ----
 *
 * The same tasks on the older wire, within a session: tools/call with a
 * "task" param answers with {task: Task}; tasks/get, tasks/result (waits
 * for the end and answers with the call's own result), tasks/list (the
 * session's tasks) and tasks/cancel. A session's tasks are remembered in
 * memory (tasks/list); tasks/get finds a task after a restart too. */

static const char *status_of(json_t *final, int ended, json_t *pending)
{
    if (json_object_get(final, "result"))
        return "completed";
    if (final)
        return "failed";
    if (ended)
        return "cancelled";
    return json_object_size(pending) > 0 ? "input_required" : "working";
}

/* The Task object of 2025-11-25 for st (a task of session s). */
static json_t *legacy_task(struct session *s, struct stream *st)
{
    int64_t created, ttl;
    legacy_entry(s, st, &created, &ttl);
    json_t *final, *pending;
    int ended;
    read_task(s, st, &final, &ended, &pending);
    char c[40], u[40];
    iso8601(created, c, sizeof c);
    iso8601(session_last_active_ms(s), u, sizeof u);
    json_t *t = json_pack("{s:s, s:s, s:s, s:s, s:I, s:i}", "taskId", stream_id(st), "status",
                          status_of(final, ended, pending), "createdAt", c, "lastUpdatedAt", u,
                          "ttl", (json_int_t)ttl, "pollInterval", POLL_INTERVAL_MS);
    const char *why =
        json_string_value(json_object_get(json_object_get(final, "error"), "message"));
    if (why)
        json_object_set_new(t, "statusMessage", json_string(why));
    json_decref(final);
    json_decref(pending);
    return t;
}

void task_legacy_created(struct session *s, struct stream *st, json_t *id, json_t *task,
                         struct core_reply *out)
{
    if (stream_persist(st) != 0) {
        core_reject(out, CORE_UNAVAILABLE, id, JSONRPC_INTERNAL_ERROR, "The store is not writable");
        return;
    }
    /* The client may ask for a shorter life than mcpd keeps tasks for. */
    int64_t cap = core_session_idle_ms();
    json_t *asked = json_object_get(task, "ttl");
    int64_t ttl =
        json_is_integer(asked) && json_integer_value(asked) > 0 && json_integer_value(asked) < cap
            ? (int64_t)json_integer_value(asked)
            : cap;
    pthread_mutex_lock(&legacy.mu);
    if (!legacy.by_session)
        legacy.by_session = json_object();
    json_t *mine = json_object_get(legacy.by_session, session_id(s));
    if (!mine) {
        mine = json_object();
        json_object_set_new(legacy.by_session, session_id(s), mine);
    }
    json_object_set_new(mine, stream_id(st),
                        json_pack("{s:I, s:I}", "created", (json_int_t)session_last_active_ms(s),
                                  "ttl", (json_int_t)ttl));
    pthread_mutex_unlock(&legacy.mu);
    answered(out, answer(id, json_pack("{s:o}", "task", legacy_task(s, st))));
}

/* A task of this session by params.taskId: its stream, or NULL after
 * filling *out with -32602. */
static struct stream *legacy_find(struct session *s, json_t *id, json_t *params,
                                  struct core_reply *out)
{
    const char *task_id = json_string_value(json_object_get(params, "taskId"));
    struct stream *st = task_id ? stream_find(task_id) : NULL;
    if (!st || strcmp(stream_session(st), session_id(s)) != 0 || stream_is_standalone(st)) {
        stream_unref(st);
        /* An answer on the session, like any request's error there. */
        answered(out, jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                                    "Failed to retrieve task: Task not found", NULL));
        return NULL;
    }
    return st;
}

void task_legacy_get(struct session *s, json_t *id, json_t *params, struct core_reply *out)
{
    struct stream *st = legacy_find(s, id, params, out);
    if (st) {
        answered(out, answer(id, legacy_task(s, st)));
        stream_unref(st);
    }
}

void task_legacy_result(struct session *s, json_t *id, json_t *params, int64_t wait_ms,
                        struct core_reply *out)
{
    struct stream *st = legacy_find(s, id, params, out);
    if (!st)
        return;
    /* Waits for the end, then answers as the call itself would have. */
    struct stream_reader tok;
    stream_observe(st, &tok);
    int64_t deadline = clock_mono_ms() + wait_ms;
    json_t *final = NULL;
    for (int64_t seq = 0;;) {
        struct stream_chunk ch;
        enum stream_wait w = stream_read(st, &tok, seq, deadline, &ch);
        if (w == STREAM_POLL || w == STREAM_PROBE)
            continue;
        if (w != STREAM_CHUNK)
            break;
        if (ch.is_end) {
            final = json_loadb(ch.msg, ch.len, 0, NULL);
            break;
        }
        seq = ch.seq + 1;
    }
    json_t *related =
        json_pack("{s:{s:s}}", "io.modelcontextprotocol/related-task", "taskId", stream_id(st));
    json_t *result = json_object_get(final, "result");
    if (result) {
        /* The call's result as it was, its own _meta too. */
        json_t *copy = json_deep_copy(result);
        json_t *meta = json_object_get(copy, "_meta");
        if (json_is_object(meta))
            json_object_update(meta, related);
        else
            json_object_set(copy, "_meta", related);
        json_decref(related);
        answered(out, answer(id, copy));
    } else if (final) {
        json_t *err = json_object_get(final, "error");
        answered(out, jsonrpc_error(id, (int)json_integer_value(json_object_get(err, "code")),
                                    json_string_value(json_object_get(err, "message")),
                                    json_incref(json_object_get(err, "data"))));
        json_decref(related);
    } else {
        json_decref(related);
        answered(out, jsonrpc_error(id, JSONRPC_SERVER_ERROR,
                                    "The task has no result: it was cancelled, or is still running",
                                    NULL));
    }
    json_decref(final);
    stream_unref(st);
}

void task_legacy_list(struct session *s, json_t *id, struct core_reply *out)
{
    json_t *ids = json_array();
    pthread_mutex_lock(&legacy.mu);
    const char *tid;
    json_t *v;
    json_object_foreach(json_object_get(legacy.by_session, session_id(s)), tid, v)
        json_array_append_new(ids, json_string(tid));
    pthread_mutex_unlock(&legacy.mu);
    json_t *tasks = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(ids, i, t)
    {
        struct stream *st = stream_find(json_string_value(t));
        if (st)
            json_array_append_new(tasks, legacy_task(s, st));
        stream_unref(st);
    }
    json_decref(ids);
    answered(out, answer(id, json_pack("{s:o}", "tasks", tasks)));
}

void task_legacy_cancel(struct session *s, json_t *id, json_t *params, struct core_reply *out)
{
    struct stream *st = legacy_find(s, id, params, out);
    if (!st)
        return;
    /* The call whose stream this is: the tracked call with its request id. */
    session_each_tracked(s, cancel_if_stream, st);
    /* Give it a moment to stop, so the answer can say cancelled. */
    struct stream_reader tok;
    stream_observe(st, &tok);
    int64_t deadline = clock_mono_ms() + 1000;
    for (int64_t seq = stream_next_seq(st);;) {
        struct stream_chunk ch;
        enum stream_wait w = stream_read(st, &tok, seq, deadline, &ch);
        if (w == STREAM_CHUNK && !ch.is_end) {
            seq = ch.seq + 1;
            continue;
        }
        if (w == STREAM_POLL || w == STREAM_PROBE)
            continue;
        break;
    }
    answered(out, answer(id, legacy_task(s, st)));
    stream_unref(st);
}

void task_legacy_forget(const char *session)
{
    pthread_mutex_lock(&legacy.mu);
    json_object_del(legacy.by_session, session);
    if (legacy.by_session && json_object_size(legacy.by_session) == 0) {
        json_decref(legacy.by_session);
        legacy.by_session = NULL;
    }
    pthread_mutex_unlock(&legacy.mu);
}
