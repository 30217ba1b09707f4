/* receive — the one way into the core (core.h, "the one way in"). */
#include "clock.h"
#include "fiber.h"
#include "core.h"
#include "core_int.h"
#include "event_id.h"
#include "log.h"
#include "mcp_headers.h"
#include "protocol.h"
#include "relay.h"
#include "replica.h"
#include "session.h"
#include "stream.h"
#include "task.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define PROBE_STEP_MS 20

static void refuse(struct core_reply *out, enum core_reason why, json_t *id, int code,
                   const char *message)
{
    memset(out, 0, sizeof *out);
    core_reject(out, why, id, code, message);
}

static void refuse_no_session(const struct core_caller *c, struct core_reply *out)
{
    refuse(out, CORE_BAD_REQUEST, NULL, JSONRPC_SERVER_ERROR,
           c->session_required ? c->session_required : "Bad Request: a session id is required");
}

/* The session the caller names (a new reference), or NULL with *why. */
static struct session *session_named(const struct core_caller *c, enum core_reason *why)
{
    if (!c->session_id || !*c->session_id) {
        *why = CORE_BAD_REQUEST;
        return NULL;
    }
    /* An id handed out here and not initialized: with no other process on
     * the store, no session has it, and the store is not asked (legacy
     * /sse looks for its session every 250 ms while it waits). */
    if (c->reserved && !replica_shared()) {
        *why = CORE_NOT_FOUND;
        return NULL;
    }
    struct session *s = session_find(c->session_id);
    /* Another principal's session does not exist, as far as this one can
     * tell. */
    if (s && !session_belongs_to(s, c->principal && *c->principal ? c->principal : NULL)) {
        session_unref(s);
        s = NULL;
    }
    /* Not found because the store cannot be asked is not "not found". */
    if (!s)
        *why = core_state() == CORE_STORE_AWAY ? CORE_UNAVAILABLE : CORE_NOT_FOUND;
    return s;
}

/* The refusal of a session session_named did not find. */
static void refuse_session(const struct core_caller *c, enum core_reason why,
                           struct core_reply *refused)
{
    if (why == CORE_BAD_REQUEST || (why == CORE_NOT_FOUND && c->reserved))
        refuse_no_session(c, refused);
    else if (why == CORE_UNAVAILABLE)
        refuse(refused, CORE_UNAVAILABLE, NULL, JSONRPC_SERVER_ERROR,
               "Service Unavailable: the database cannot be reached; retry shortly");
    else
        refuse(refused, CORE_NOT_FOUND, NULL, JSONRPC_SESSION_NOT_FOUND, "Session not found");
}

struct session *core_session_open(const struct core_caller *c, struct core_reply *refused)
{
    enum core_reason why;
    struct session *s = session_named(c, &why);
    if (!s)
        refuse_session(c, why, refused);
    return s;
}

int core_delete(const struct core_caller *c, struct core_reply *refused)
{
    struct session *s = core_session_open(c, refused);
    if (!s)
        return -1;
    log_event(LOG_INFO, session_id(s), "session_deleted", "by the client");
    core_end_session(s);
    session_unref(s);
    return 0;
}

/* The id to answer a message that failed classification with, when it has
 * a usable one. */
static json_t *usable_id(json_t *msg)
{
    json_t *id = json_object_get(msg, "id");
    return json_is_string(id) || json_is_integer(id) ? id : NULL;
}

/* Before initialize on a connection: only pings make sense (the spec
 * allows them); notifications are dropped. */
static void before_initialize(const struct jsonrpc_msg *m, struct core_reply *out)
{
    memset(out, 0, sizeof *out);
    if (m->kind == JSONRPC_REQUEST && strcmp(m->method, "ping") == 0) {
        out->kind = CORE_ANSWERED;
        out->error = jsonrpc_result(m->id, json_object());
    } else if (m->kind == JSONRPC_REQUEST) {
        refuse(out, CORE_BAD_REQUEST, m->id, JSONRPC_INVALID_REQUEST,
               "Invalid Request: send initialize first");
    } else {
        out->kind = CORE_ACCEPTED;
    }
}

static int is_initialize(const struct jsonrpc_msg *m)
{
    return m->kind == JSONRPC_REQUEST && strcmp(m->method, "initialize") == 0;
}

/* One classified message; s is the caller's session or NULL. */
static void dispatch(const struct core_caller *c, struct session *s, json_t *msg,
                     const struct jsonrpc_msg *m, struct core_reply *out)
{
    if (is_initialize(m)) {
        if (c->session_id) {
            refuse(out, CORE_BAD_REQUEST, m->id, JSONRPC_INVALID_REQUEST,
                   c->connection ? "Invalid Request: this connection already has a session"
                                 : "Invalid Request: initialize must be sent without a session id");
            return;
        }
        struct session_origin origin = {c->principal && *c->principal ? c->principal : NULL,
                                        c->transport, c->new_session_id};
        core_initialize(msg, m, &origin, out);
        return;
    }
    core_submit(s, msg, m, c->transport, out);
}

/* Classifies msg; on failure fills *out with the error. Over HTTP the
 * error answers the request that carried it, with id null as JSON-RPC asks
 * for an invalid request; a connection has no such request, so the error
 * names the id when there is a usable one. */
static int classify(const struct core_caller *c, json_t *msg, struct jsonrpc_msg *m,
                    struct core_reply *out)
{
    struct jsonrpc_error err;
    if (jsonrpc_classify(msg, m, &err) == 0)
        return 0;
    refuse(out, CORE_BAD_REQUEST, c->connection ? usable_id(msg) : NULL, err.code, err.message);
    return -1;
}

/* ---- stateless requests (2026-07-28) ---- */

static void refuse_data(struct core_reply *out, enum core_reason why, json_t *id, int code,
                        const char *message, json_t *data)
{
    refuse(out, why, id, code, message);
    if (data)
        json_object_set_new(json_object_get(out->error, "error"), "data", data);
}

/* server/discover: what every stateless client may ask first. */
static void discover(const struct jsonrpc_msg *m, struct core_reply *out)
{
    json_t *fields = core_server_fields();
    json_t *caps = json_incref(json_object_get(fields, "capabilities"));
    json_object_del(caps, "logging"); /* logging/setLevel is gone in 2026-07-28 */
    json_t *extensions = core_extensions();
    if (extensions)
        json_object_set_new(caps, "extensions", extensions);
    if (core_tells_list_changes()) {
        json_t *lists[] = {json_object_get(caps, "tools"), json_object_get(caps, "prompts")};
        for (size_t i = 0; i < 2; i++)
            if (json_is_object(lists[i]))
                json_object_set_new(lists[i], "listChanged", json_true());
    }
    json_t *result = json_pack("{s:o, s:o}", "supportedVersions", protocol_versions_json(),
                               "capabilities", caps);
    json_t *info = json_object_get(fields, "serverInfo");
    json_object_set_new(result, "_meta",
                        json_pack("{s:O}", PROTOCOL_META_SERVER_INFO, info ? info : json_null()));
    json_t *instructions = json_object_get(fields, "instructions");
    if (instructions)
        json_object_set(result, "instructions", instructions);
    json_decref(fields);
    json_t *reply = jsonrpc_result(m->id, result);
    protocol_adapt_final(PROTOCOL_STATELESS, m->method, reply);
    memset(out, 0, sizeof *out);
    out->kind = CORE_ANSWERED;
    out->error = reply;
}

/* A request that needs a capability the client did not declare is refused
 * before it runs (SEP-2575: a server must not rely on undeclared ones). */
static int missing_capability(const struct jsonrpc_msg *m, json_t *declared, struct core_reply *out)
{
    json_t *needs = core_requires(m->method, m->params);
    json_t *missing = json_object();
    const char *key;
    json_t *v;
    json_object_foreach(needs, key, v)
    {
        if (!json_object_get(declared, key))
            json_object_set(missing, key, v);
    }
    json_decref(needs);
    if (json_object_size(missing) == 0) {
        json_decref(missing);
        return 0;
    }
    refuse_data(out, CORE_BAD_REQUEST, m->id, JSONRPC_MISSING_CAPABILITY,
                "Missing required client capability",
                json_pack("{s:o}", "requiredCapabilities", missing));
    return 1;
}

/* A message that is served statelessly on a connection (WebSocket,
 * stdio), as a dual-era server does, before the connection has a session:
 * one whose _meta names a revision or declares capabilities (the marks
 * HTTP looks for when a request has no MCP-Protocol-Version header), and
 * the server/discover probe a dual-era client opens with. initialize
 * always picks the legacy era, and once it has, every message is served in
 * the connection's session whatever its _meta says, as a 2025 server
 * serves it: the gateway relays a 2026-07-28 client's requests, _meta and
 * all, to a 2025 child that way. */
static int connection_stateless(const struct core_caller *c, const struct jsonrpc_msg *m)
{
    if (c->session_id || m->kind == JSONRPC_RESPONSE || is_initialize(m))
        return 0;
    json_t *meta = json_object_get(m->params, "_meta");
    return strcmp(m->method, "server/discover") == 0 ||
           json_object_get(meta, PROTOCOL_META_VERSION) != NULL ||
           json_object_get(meta, PROTOCOL_META_CAPABILITIES) != NULL;
}

static void refuse_tasks_missing(const struct jsonrpc_msg *m, struct core_reply *out)
{
    refuse_data(out, CORE_BAD_REQUEST, m->id, JSONRPC_MISSING_CAPABILITY,
                "Missing required client capability: the tasks extension",
                json_pack("{s:{s:{s:{}}}}", "requiredCapabilities", "extensions", TASK_EXTENSION));
}

/* tasks/get, tasks/update, tasks/cancel: only for a request that declares
 * the extension (checked before the task is looked up). */
static void tasks_method(const struct core_caller *c, json_t *msg, const struct jsonrpc_msg *m,
                         json_t *caps, struct core_reply *out)
{
    if (!json_object_get(json_object_get(caps, "extensions"), TASK_EXTENSION)) {
        refuse_tasks_missing(m, out);
        return;
    }
    if (core_task_elsewhere(c->principal, msg, m, out))
        return;
    memset(out, 0, sizeof *out);
    if (strcmp(m->method, "tasks/get") == 0)
        task_get(c->principal, m->id, m->params, core_session_idle_ms(), out);
    else if (strcmp(m->method, "tasks/update") == 0)
        task_update(c->principal, m->id, m->params, out);
    else
        task_cancel(c->principal, m->id, m->params, out);
}

/* What a stateless request's headers say that its body does not, or NULL:
 * the Mcp-* headers, and the Mcp-Param-* headers of the arguments the tool
 * marks x-mcp-header (mcp_headers.h). */
static const char *headers_mismatch(const struct core_caller *c, json_t *msg,
                                    const struct jsonrpc_msg *m)
{
    const char *why = mcp_headers_check(c->header(c->header_ud, "MCP-Protocol-Version"),
                                        c->header(c->header_ud, "Mcp-Method"),
                                        c->header(c->header_ud, "Mcp-Name"), msg);
    if (why || m->kind != JSONRPC_REQUEST)
        return why;
    json_t *map = core_header_params(m->method, m->params);
    if (map)
        why = mcp_headers_check_params(map, json_object_get(m->params, "arguments"), c->header,
                                       c->header_ud);
    json_decref(map);
    return why;
}

static void receive_stateless(const struct core_caller *c, json_t *msg, const struct jsonrpc_msg *m,
                              struct core_reply *out)
{
    const char *mismatch = c->header ? headers_mismatch(c, msg, m) : NULL;
    if (mismatch) {
        refuse(out, CORE_BAD_REQUEST, m->id, JSONRPC_HEADER_MISMATCH, mismatch);
        return;
    }
    if (m->kind != JSONRPC_REQUEST) {
        /* Nothing to answer: a stateless server has no requests of its
         * own outstanding, and a request is cancelled by closing its
         * stream (over HTTP) or by a notifications/cancelled that the
         * connection carrying it acts on (push.c). */
        memset(out, 0, sizeof *out);
        out->kind = CORE_ACCEPTED;
        return;
    }
    json_t *meta = json_object_get(m->params, "_meta");
    json_t *version = json_object_get(meta, PROTOCOL_META_VERSION);
    json_t *caps = json_object_get(meta, PROTOCOL_META_CAPABILITIES);
    if (!json_is_object(meta) || !version || !caps) {
        char why[200];
        snprintf(why, sizeof why, "Invalid params: missing _meta keys:%s%s",
                 version ? "" : " " PROTOCOL_META_VERSION,
                 caps      ? ""
                 : version ? " " PROTOCOL_META_CAPABILITIES
                           : ", " PROTOCOL_META_CAPABILITIES);
        refuse(out, CORE_BAD_REQUEST, m->id, JSONRPC_INVALID_PARAMS, why);
        return;
    }
    if (!json_is_string(version) || !protocol_is_stateless(json_string_value(version))) {
        refuse_data(out, CORE_BAD_REQUEST, m->id, JSONRPC_UNSUPPORTED_VERSION,
                    "Unsupported protocol version",
                    json_pack("{s:o, s:s}", "supported", protocol_versions_json(), "requested",
                              json_is_string(version) ? json_string_value(version) : ""));
        return;
    }
    if (!json_is_object(caps)) {
        refuse(out, CORE_BAD_REQUEST, m->id, JSONRPC_INVALID_PARAMS,
               "Invalid params: " PROTOCOL_META_CAPABILITIES " must be an object");
        return;
    }
    if (strcmp(m->method, "server/discover") == 0) {
        discover(m, out);
        return;
    }
    if (strncmp(m->method, "tasks/", 6) == 0 && protocol_stateless_method(m->method)) {
        tasks_method(c, msg, m, caps, out);
        return;
    }
    if (!protocol_stateless_method(m->method)) {
        char why[160];
        snprintf(why, sizeof why, "Method not found: %.100s", m->method);
        refuse(out, CORE_NOT_FOUND, m->id, JSONRPC_METHOD_NOT_FOUND, why);
        return;
    }
    if (json_is_true(json_object_get(m->params, "stream"))) {
        /* mcpd's long-polling opt-in lives in sessions; a stateless client
         * reads its response stream, or asks for a task. */
        refuse(out, CORE_BAD_REQUEST, m->id, JSONRPC_INVALID_PARAMS,
               "Invalid params: \"stream\": true (mcpd/poll) is not served to 2026-07-28 "
               "requests; read the response stream, or run the call as a task");
        return;
    }
    if (missing_capability(m, caps, out))
        return;
    int support = core_task_support(m->method, m->params);
    int has_tasks = json_object_get(json_object_get(caps, "extensions"), TASK_EXTENSION) != NULL;
    if (support == 2 && !has_tasks) {
        refuse_tasks_missing(m, out);
        return;
    }
    int as_task = support && has_tasks;
    /* The request's own session: the store keeps its stream like any
     * other, and the backend sees the capabilities this request declared. */
    json_t *info = json_object_get(meta, PROTOCOL_META_CLIENT_INFO);
    /* "mcpd/task" marks the session of a task for tasks/get, tasks/update
     * and tasks/cancel, on any replica and after a restart: no other
     * request's stream is a task. */
    json_t *params =
        json_pack("{s:O, s:O, s:o, s:I, s:b}", "protocolVersion", version, "capabilities", caps,
                  "clientInfo", info ? json_incref(info) : json_object(), "mcpd/createdMs",
                  (json_int_t)clock_wall_ms(), "mcpd/task", as_task);
    struct session_origin origin = {c->principal && *c->principal ? c->principal : NULL,
                                    c->transport, NULL};
    json_t *fields;
    struct session *s =
        params ? core_open_session(PROTOCOL_STATELESS, params, &origin, m->id, &fields, out) : NULL;
    json_decref(params);
    if (!s)
        return;
    json_decref(fields);
    /* Logs only for a request that asked for them. */
    int level =
        protocol_log_level(json_string_value(json_object_get(meta, PROTOCOL_META_LOG_LEVEL)));
    session_set_log_level(s, level >= 0 ? level : PROTOCOL_LOG_OFF);
    core_submit(s, msg, m, c->transport, out);
    if (as_task && out->kind == CORE_STREAM) {
        /* The session outlives this request: the task is read and updated
         * by later ones, until it idles out. */
        struct stream *st = out->stream;
        out->stream = NULL;
        core_reply_clear(out);
        task_created(s, st, m->id, core_session_idle_ms(), out);
        stream_unref(st);
        session_unref(s);
        return;
    }
    out->session = s;
    out->ephemeral = 1;
    if (out->kind != CORE_STREAM) {
        core_end_session(s);
        out->ephemeral = 0;
    }
}

/* A batch (2025-03-26 only): refused as a whole (empty, no session, a
 * revision without batches, a caller that takes no batches) into *refused,
 * or each element's reply to c->each, in order, and *refused is
 * CORE_ACCEPTED. */
static void receive_batch(const struct core_caller *c, json_t *batch, struct core_reply *refused)
{
    memset(refused, 0, sizeof *refused);
    if (!c->each && !c->relayed) {
        refuse(refused, CORE_BAD_REQUEST, NULL, JSONRPC_INVALID_REQUEST,
               "Invalid Request: batches are not accepted here");
        return;
    }
    if (json_array_size(batch) == 0) {
        refuse(refused, CORE_BAD_REQUEST, NULL, JSONRPC_INVALID_REQUEST,
               "Invalid Request: empty batch");
        return;
    }
    if (c->stateless) {
        refuse(refused, CORE_BAD_REQUEST, NULL, JSONRPC_INVALID_REQUEST,
               "Invalid Request: 2026-07-28 has no batches");
        return;
    }
    struct session *s = core_session_open(c, refused);
    if (!s)
        return;
    if (!protocol_allows_batch(session_protocol(s))) {
        session_unref(s);
        refuse(refused, CORE_BAD_REQUEST, NULL, JSONRPC_INVALID_REQUEST,
               "Invalid Request: batches are only accepted on 2025-03-26 sessions");
        return;
    }
    size_t i;
    json_t *msg;
    json_array_foreach(batch, i, msg)
    {
        struct core_reply r;
        struct jsonrpc_msg m;
        if (classify(c, msg, &m, &r) == 0) {
            if (is_initialize(&m))
                refuse(&r, CORE_BAD_REQUEST, m.id, JSONRPC_INVALID_REQUEST,
                       "Invalid Request: initialize must not be batched");
            else
                core_submit(s, msg, &m, c->transport, &r);
            r.notification = m.kind == JSONRPC_NOTIFICATION;
        }
        session_ref(s);
        r.session = s;
        if (c->relayed)
            core_relay(&r);
        else
            c->each(c->each_ud, &r);
    }
    session_unref(s);
    refused->kind = CORE_ACCEPTED;
}

/* A relayed caller's initialize that names a session id (core_caller.adopt). */
static void initialize_named(const struct core_caller *c, json_t *msg, const struct jsonrpc_msg *m,
                             struct core_reply *out)
{
    enum core_reason why;
    struct session *s = session_named(c, &why);
    if (s) {
        session_unref(s);
        dispatch(c, NULL, msg, m, out); /* which refuses a second initialize */
        return;
    }
    if (!c->adopt || why != CORE_NOT_FOUND || !replica_shared()) {
        refuse_session(c, why, out);
        return;
    }
    struct core_caller k = *c;
    k.new_session_id = c->session_id;
    k.session_id = NULL;
    dispatch(&k, NULL, msg, m, out);
}

static void receive_one(const struct core_caller *c, json_t *msg, struct core_reply *out)
{
    struct jsonrpc_msg m;
    if (classify(c, msg, &m, out) != 0)
        return;
    if (c->stateless) {
        receive_stateless(c, msg, &m, out);
        return;
    }
    if (c->connection && connection_stateless(c, &m)) {
        receive_stateless(c, msg, &m, out);
        out->notification = m.kind == JSONRPC_NOTIFICATION;
        return;
    }
    if (is_initialize(&m) && c->relayed && c->session_id) {
        initialize_named(c, msg, &m, out);
        return;
    }
    if (is_initialize(&m) || (!c->session_id && c->connection)) {
        if (is_initialize(&m)) {
            dispatch(c, NULL, msg, &m, out);
            /* Only here is a session made for the client to name (a
             * stateless request's, or a task's read elsewhere, is not). */
            if (out->kind != CORE_REJECTED && out->session)
                out->session_made = session_id(out->session);
        } else {
            before_initialize(&m, out);
        }
        out->notification = m.kind == JSONRPC_NOTIFICATION;
        return;
    }
    struct session *s = core_session_open(c, out);
    if (s) {
        dispatch(c, s, msg, &m, out);
        out->session = s; /* the reply's session, owned by the reply */
    } else if (c->connection && out->error && m.kind == JSONRPC_REQUEST) {
        /* On a connection the refusal is the request's only answer (HTTP
         * carries it as the status of this very request). */
        json_object_set(out->error, "id", m.id);
    }
    out->notification = m.kind == JSONRPC_NOTIFICATION;
}

void core_receive(const struct core_caller *c, json_t *msg, struct core_reply *out)
{
    if (json_is_array(msg)) {
        receive_batch(c, msg, out);
        return;
    }
    receive_one(c, msg, out);
    /* A refusal of the message is the transport's to answer (a status);
     * anything else its client reads on the standalone stream. */
    if (c->relayed && out->kind != CORE_REJECTED && core_relay(out) != 0) {
        memset(out, 0, sizeof *out);
        core_reject(out, CORE_UNAVAILABLE, NULL, JSONRPC_INTERNAL_ERROR, "The server is stopping");
    }
}

/* The session a cursor's stream belongs to ("" when there is none), or
 * -1 when the cursor is malformed. */
static int session_of_cursor(const char *cursor, char *sid, size_t cap)
{
    char stream[96];
    int64_t next;
    sid[0] = '\0';
    if (event_id_parse(cursor, stream, sizeof stream, &next) != 0)
        return -1;
    struct stream *st = stream_find(stream);
    if (st)
        snprintf(sid, cap, "%s", stream_session(st));
    stream_unref(st);
    return 0;
}

int core_resume(const struct core_caller *c, const char *cursor, struct core_resume *out,
                struct core_reply *refused)
{
    memset(out, 0, sizeof *out);
    char owner[96];
    struct core_caller by_cursor;
    if (!c->session_id) {
        if (session_of_cursor(cursor, owner, sizeof owner) != 0) {
            refuse(refused, CORE_BAD_REQUEST, NULL, stream_cursor_code(STREAM_CURSOR_BAD),
                   stream_cursor_message(STREAM_CURSOR_BAD));
            return -1;
        }
        by_cursor = *c;
        by_cursor.session_id = owner[0] ? owner : "-"; /* "-": none, so 404 */
        c = &by_cursor;
    }
    struct session *s = core_session_open(c, refused);
    if (!s)
        return -1;
    enum stream_cursor rc = stream_resume(cursor, session_id(s), &out->stream, &out->next);
    if (rc != STREAM_CURSOR_OK) {
        session_unref(s);
        refuse(refused, CORE_BAD_REQUEST, NULL, stream_cursor_code(rc), stream_cursor_message(rc));
        return -1;
    }
    session_touch(s);
    out->session = s;
    out->standalone = stream_is_standalone(out->stream);
    return 0;
}

void core_resume_clear(struct core_resume *r)
{
    stream_unref(r->stream);
    session_unref(r->session);
    memset(r, 0, sizeof *r);
}

/* ---- the standalone stream ---- */

int core_standalone_claim(struct session *s, int64_t probe_ms, struct stream **st, int64_t *from,
                          struct core_reply *refused)
{
    int claimed = session_get_claim(s) == 0;
    if (!claimed && probe_ms > 0) {
        struct stream *held = session_standalone(s);
        if (held) {
            /* The holder may be another process: it probes its own. */
            core_probe_elsewhere(s);
            stream_probe_readers(held);
            stream_unref(held);
            int64_t deadline = clock_mono_ms() + probe_ms;
            while (!claimed && clock_mono_ms() < deadline) {
                fiber_sleep_ms(PROBE_STEP_MS);
                claimed = session_get_claim(s) == 0;
            }
        }
    }
    if (!claimed) {
        refuse(refused, CORE_CONFLICT, NULL, JSONRPC_SERVER_ERROR,
               "Conflict: this session already has an open GET stream");
        return -1;
    }
    *st = session_standalone(s);
    if (!*st) {
        session_get_release(s);
        refuse(refused, CORE_UNAVAILABLE, NULL, JSONRPC_INTERNAL_ERROR,
               "The session has no stream");
        return -1;
    }
    *from = session_get_cursor(s);
    return 0;
}

void core_standalone_release(struct session *s, int64_t next)
{
    if (next >= 0)
        session_set_get_cursor(s, next);
    session_get_release(s);
}

int core_relay(struct core_reply *r)
{
    int rc = -1;
    if (r->session && (r->kind == CORE_REJECTED || r->kind == CORE_ANSWERED)) {
        rc = relay_message(r->session, r->error);
        r->error = NULL;
    } else if (r->session && r->kind == CORE_STREAM && r->ack) {
        /* Opted in to long-polling: the handle now, the messages by poll. */
        rc = relay_message(r->session, r->ack);
        r->ack = NULL;
    } else if (r->session && r->kind == CORE_STREAM) {
        rc = relay_follow(r->session, r->stream);
        r->stream = NULL;
    } else if (r->kind == CORE_ACCEPTED) {
        rc = 0;
    }
    core_reply_clear(r);
    return rc;
}
