/* translate — see translate.h. */
#include "translate.h"

#include "bridge_log.h"
#include "modern.h"
#include "protocol.h"
#include "rpc_message.h"
#include "translate_shape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RPC_MISSING_CAPABILITY -32021 /* 2026-07-28's code, with the capability in data */

enum mode {
    T_PASS,    /* messages pass as they are */
    T_PROBING, /* initialize was refused: the bridge's server/discover is out */
    T_ON,      /* translating */
};

/* A client request translated to 2026-07-28. */
struct treq {
    struct treq *next;
    json_t *id;
    char *key;
    json_t *msg;     /* as first sent to the server */
    json_t *asked;   /* questions out: {"<bridge id key>": "<inputRequests key>"} */
    json_t *answers; /* {"<inputRequests key>": result} */
    json_t *state;   /* the requestState to echo, or NULL */
    int rounds;
    int at_remote;
};

struct translate {
    struct remote *rm;
    struct remote_sink client;
    enum mode mode;
    json_t *init;        /* the client's initialize, while the server answers it */
    char *init_key;      /* its id key, while it is at the server */
    json_t *init_error;  /* the server's refusal, relayed if the probe fails */
    char *probe_key;     /* the bridge's server/discover */
    char *client_probe;  /* the client's own server/discover */
    json_t *discovered;  /* a server/discover result */
    json_t *caps, *info; /* the client's, from initialize */
    char log_level[16];  /* set by logging/setLevel, "" when not */
    struct treq *reqs;
    unsigned counter; /* for bridge ids */
    int stdin_closed;
};

/* ------------------------------------------------------------- output */

static void emit(struct translate *t, json_t *m)
{
    char *s = m ? json_dumps(m, JSON_COMPACT) : NULL;
    if (s) {
        t->client.emit(t->client.ud, s, strlen(s));
        free(s);
    } else {
        bridge_log(LOG_ERROR, "out_of_memory", "a message to the client was dropped");
    }
}

static void reply(struct translate *t, const json_t *id, json_t *result)
{
    json_t *m = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
    emit(t, m);
    json_decref(m);
}

static void reply_error(struct translate *t, const json_t *id, int code, const char *message,
                        json_t *data)
{
    json_t *m = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
                          code, "message", message);
    if (m && data)
        json_object_set(json_object_get(m, "error"), "data", data);
    json_decref(data);
    emit(t, m);
    json_decref(m);
}

/* Sends m (a request of the bridge's or a translated one) to the server. */
static void send_remote(struct translate *t, json_t *m)
{
    char *body = json_dumps(m, JSON_COMPACT);
    if (!body) {
        reply_error(t, json_object_get(m, "id"), RPC_INTERNAL_ERROR, "mcp-bridge: out of memory",
                    NULL);
        return;
    }
    remote_send(t->rm, body, strlen(body), m);
    free(body);
}

/* ------------------------------------------------------------ requests */

static struct treq *treq_find(struct translate *t, const char *key)
{
    for (struct treq *q = t->reqs; q; q = q->next)
        if (strcmp(q->key, key) == 0)
            return q;
    return NULL;
}

/* The request that put the question whose bridge id key is key. */
static struct treq *treq_asking(struct translate *t, const char *key)
{
    for (struct treq *q = t->reqs; q; q = q->next)
        if (json_object_get(q->asked, key))
            return q;
    return NULL;
}

static void treq_free(struct translate *t, struct treq *q)
{
    for (struct treq **pp = &t->reqs; *pp; pp = &(*pp)->next) {
        if (*pp == q) {
            *pp = q->next;
            break;
        }
    }
    json_decref(q->id);
    free(q->key);
    json_decref(q->msg);
    json_decref(q->asked);
    json_decref(q->answers);
    json_decref(q->state);
    free(q);
}

/* Takes back the questions q put to the client (it gave up, or another
 * answer ended q). */
static void withdraw_questions(struct translate *t, struct treq *q, const char *reason)
{
    const char *key;
    json_t *v;
    json_object_foreach(q->asked, key, v)
    {
        json_t *id = json_loads(key, JSON_DECODE_ANY, NULL);
        json_t *n =
            id ? json_pack("{s:s, s:s, s:{s:o, s:s}}", "jsonrpc", "2.0", "method",
                           "notifications/cancelled", "params", "requestId", id, "reason", reason)
               : NULL;
        emit(t, n);
        json_decref(n);
    }
    json_object_clear(q->asked);
}

/* Ends q, which is not at the server, with an error. */
static void treq_fail(struct translate *t, struct treq *q, int code, const char *message,
                      json_t *data)
{
    bridge_log(LOG_WARN, "request_failed", "id=%s: %s", q->key, message);
    withdraw_questions(t, q, message);
    reply_error(t, q->id, code, message, data);
    treq_free(t, q);
}

/* Sends q again with the answers the client gave and the requestState. */
static void treq_retry(struct translate *t, struct treq *q)
{
    json_t *m = json_deep_copy(q->msg);
    json_t *params = json_object_get(m, "params");
    if (!params) {
        treq_fail(t, q, RPC_INTERNAL_ERROR, "mcp-bridge: out of memory", NULL);
        json_decref(m);
        return;
    }
    json_object_set(params, "inputResponses", q->answers);
    if (q->state)
        json_object_set(params, "requestState", q->state);
    json_decref(q->answers);
    q->answers = json_object();
    q->at_remote = 1;
    send_remote(t, m);
    json_decref(m);
}

/* A client request in the translating mode. */
static void treq_start(struct translate *t, json_t *m)
{
    struct treq *q = calloc(1, sizeof *q);
    if (q) {
        q->key = rpc_id_key(json_object_get(m, "id"));
        q->msg =
            translate_shape_request(m, t->caps, t->info, t->log_level[0] ? t->log_level : NULL);
        q->asked = json_object();
        q->answers = json_object();
    }
    if (!q || !q->key || !q->msg || !q->asked || !q->answers) {
        if (q) {
            free(q->key);
            json_decref(q->msg);
            json_decref(q->asked);
            json_decref(q->answers);
            free(q);
        }
        reply_error(t, json_object_get(m, "id"), RPC_INTERNAL_ERROR, "mcp-bridge: out of memory",
                    NULL);
        return;
    }
    q->id = json_incref(json_object_get(m, "id"));
    q->next = t->reqs;
    t->reqs = q;
    q->at_remote = 1;
    send_remote(t, q->msg);
}

/* {"requiredCapabilities": …} for a capability named as "elicitation" or
 * "elicitation.url". */
static json_t *required(const char *missing)
{
    char top[32];
    const char *dot = strchr(missing, '.');
    snprintf(top, sizeof top, "%.*s", dot ? (int)(dot - missing) : (int)strlen(missing), missing);
    json_t *inner = dot ? json_pack("{s:{}}", dot + 1) : json_object();
    return json_pack("{s:{s:o}}", "requiredCapabilities", top, inner);
}

/* The server asked for input (result: an InputRequiredResult): the
 * questions go to the client, or q fails when it cannot answer them. */
static void treq_ask(struct translate *t, struct treq *q, const json_t *result)
{
    char msg[512];
    if (++q->rounds > TRANSLATE_MAX_ROUNDS) {
        snprintf(msg, sizeof msg,
                 "mcp-bridge: the server asked for input more than %d times for one request",
                 TRANSLATE_MAX_ROUNDS);
        treq_fail(t, q, RPC_INTERNAL_ERROR, msg, NULL);
        return;
    }
    if (t->stdin_closed) {
        treq_fail(t, q, RPC_BRIDGE_ERROR,
                  "mcp-bridge: the server asked for the client's input after the client closed "
                  "stdin",
                  NULL);
        return;
    }
    json_t *requests = json_object_get(result, "inputRequests");
    const char *key;
    json_t *ir;
    json_object_foreach(requests, key, ir)
    {
        const char *method = json_string_value(json_object_get(ir, "method"));
        const char *missing =
            method
                ? translate_shape_missing_capability(method, json_object_get(ir, "params"), t->caps)
                : "a method";
        if (!missing)
            continue;
        snprintf(msg, sizeof msg,
                 "mcp-bridge: the server needs %s from the client for this request, and the "
                 "client did not declare the %s capability",
                 method ? method : "an answer", missing);
        treq_fail(t, q, RPC_MISSING_CAPABILITY, msg, required(missing));
        return;
    }
    json_decref(q->state);
    q->state = json_incref(json_object_get(result, "requestState"));
    json_object_foreach(requests, key, ir)
    {
        char id[48];
        snprintf(id, sizeof id, "mcp-bridge-input-%u", ++t->counter);
        json_t *params = json_object_get(ir, "params");
        json_t *m = json_pack("{s:s, s:s, s:s, s:o}", "jsonrpc", "2.0", "id", id, "method",
                              json_string_value(json_object_get(ir, "method")), "params",
                              json_is_object(params) ? json_incref(params) : json_object());
        char *id_key = m ? rpc_id_key(json_object_get(m, "id")) : NULL;
        if (!id_key || json_object_set_new(q->asked, id_key, json_string(key)) != 0) {
            free(id_key);
            json_decref(m);
            treq_fail(t, q, RPC_INTERNAL_ERROR, "mcp-bridge: out of memory", NULL);
            return;
        }
        free(id_key);
        emit(t, m);
        json_decref(m);
    }
    if (json_object_size(q->asked) == 0)
        treq_retry(t, q); /* only a requestState: the server wants the call again */
}

/* The server's answer m to q. */
static void treq_reply(struct translate *t, struct treq *q, json_t *m)
{
    q->at_remote = 0;
    json_t *result = json_object_get(m, "result");
    const char *type = json_string_value(json_object_get(result, "resultType"));
    if (type && strcmp(type, "input_required") == 0) {
        treq_ask(t, q, result);
        return;
    }
    json_object_del(result, "resultType"); /* a 2025 result has none */
    emit(t, m);
    treq_free(t, q);
}

/* The client's answer m to a question of the bridge's. Returns 0 when it
 * answers none. */
static int client_answer(struct translate *t, json_t *m)
{
    char *key = rpc_id_key(json_object_get(m, "id"));
    struct treq *q = key ? treq_asking(t, key) : NULL;
    if (!q) {
        free(key);
        return 0;
    }
    const char *input = json_string_value(json_object_get(q->asked, key));
    json_t *result = json_object_get(m, "result");
    if (!result) {
        json_t *error = json_object_get(m, "error");
        char msg[512];
        snprintf(msg, sizeof msg,
                 "mcp-bridge: the client refused the server's request for input: %s",
                 json_string_value(json_object_get(error, "message"))
                     ? json_string_value(json_object_get(error, "message"))
                     : "(no message)");
        json_object_del(q->asked, key);
        free(key);
        json_int_t code = json_integer_value(json_object_get(error, "code"));
        treq_fail(t, q, code ? (int)code : RPC_INTERNAL_ERROR, msg, NULL);
        return 1;
    }
    json_object_set(q->answers, input, result);
    json_object_del(q->asked, key);
    free(key);
    if (json_object_size(q->asked) == 0)
        treq_retry(t, q);
    return 1;
}

/* notifications/cancelled for the request with id. */
static void cancel(struct translate *t, const json_t *id)
{
    char *key = id ? rpc_id_key(id) : NULL;
    struct treq *q = key ? treq_find(t, key) : NULL;
    free(key);
    if (!q)
        return;
    if (q->at_remote)
        remote_cancel(t->rm, q->id);
    withdraw_questions(t, q, "the client cancelled the request");
    treq_free(t, q);
}

/* ---------------------------------------------------------- initialize */

static void answer_initialize(struct translate *t, const json_t *init)
{
    json_t *result =
        translate_shape_initialize_result(t->discovered, json_object_get(init, "params"));
    if (!result) {
        reply_error(t, json_object_get(init, "id"), RPC_INTERNAL_ERROR, "mcp-bridge: out of memory",
                    NULL);
        return;
    }
    bridge_log(LOG_INFO, "translating",
               "the server speaks only MCP %s: the bridge answers initialize and translates",
               MODERN_VERSION);
    t->mode = T_ON;
    reply(t, json_object_get(init, "id"), result);
}

/* The server refused initialize: ask server/discover. */
static void probe(struct translate *t)
{
    char id[48];
    snprintf(id, sizeof id, "mcp-bridge-discover-%u", ++t->counter);
    json_t *m = json_pack("{s:s, s:s, s:s, s:{}}", "jsonrpc", "2.0", "id", id, "method",
                          "server/discover", "params");
    json_t *modern = m ? translate_shape_request(m, t->caps, t->info, NULL) : NULL;
    free(t->probe_key);
    t->probe_key = modern ? rpc_id_key(json_object_get(modern, "id")) : NULL;
    json_decref(m);
    if (!t->probe_key) {
        json_decref(modern);
        emit(t, t->init_error); /* the server's word stands */
        return;
    }
    t->mode = T_PROBING;
    send_remote(t, modern);
    json_decref(modern);
}

/* The answer m to the bridge's server/discover. */
static void probe_done(struct translate *t, json_t *m)
{
    free(t->probe_key);
    t->probe_key = NULL;
    json_t *result = json_object_get(m, "result");
    if (result && translate_shape_discover_ok(result, 0)) {
        json_decref(t->discovered);
        t->discovered = json_incref(result);
        answer_initialize(t, t->init);
    } else {
        bridge_log(LOG_DEBUG, "not_translating", "server/discover did not list MCP %s",
                   MODERN_VERSION);
        t->mode = T_PASS;
        emit(t, t->init_error);
    }
    json_decref(t->init);
    json_decref(t->init_error);
    t->init = t->init_error = NULL;
}

static int client_initialize(struct translate *t, json_t *m)
{
    json_t *params = json_object_get(m, "params");
    json_decref(t->caps);
    json_decref(t->info);
    t->caps = json_deep_copy(json_object_get(params, "capabilities"));
    t->info = json_deep_copy(json_object_get(params, "clientInfo"));
    if (t->mode == T_ON || (t->discovered && translate_shape_discover_ok(t->discovered, 1))) {
        answer_initialize(t, m);
        return 1;
    }
    char *key = rpc_id_key(json_object_get(m, "id"));
    if (!key)
        return 0;
    free(t->init_key);
    t->init_key = key;
    json_decref(t->init);
    t->init = json_incref(m);
    return 0;
}

/* -------------------------------------------------------------- public */

/* One message from the server, on its way to the client. */
static void from_remote(void *ud, const char *json, size_t len)
{
    struct translate *t = ud;
    json_t *m = t->init_key || t->probe_key || t->client_probe || t->reqs
                    ? json_loadb(json, len, 0, NULL)
                    : NULL;
    char *key = m && rpc_classify(m) == RPC_RESPONSE ? rpc_id_key(json_object_get(m, "id")) : NULL;
    if (!key) {
        json_decref(m);
        t->client.emit(t->client.ud, json, len);
        return;
    }
    struct treq *q;
    if (t->init_key && strcmp(key, t->init_key) == 0) {
        free(t->init_key);
        t->init_key = NULL;
        json_t *error = json_object_get(m, "error");
        if (error && translate_shape_refusal(error)) {
            json_decref(t->init_error);
            t->init_error = json_incref(m);
            probe(t);
        } else {
            t->client.emit(t->client.ud, json, len);
        }
    } else if (t->probe_key && strcmp(key, t->probe_key) == 0) {
        probe_done(t, m);
    } else if (t->mode == T_ON && (q = treq_find(t, key)) && q->at_remote) {
        treq_reply(t, q, m);
    } else {
        if (t->client_probe && strcmp(key, t->client_probe) == 0) {
            free(t->client_probe);
            t->client_probe = NULL;
            json_t *result = json_object_get(m, "result");
            if (result) {
                json_decref(t->discovered);
                t->discovered = json_incref(result);
            }
        }
        t->client.emit(t->client.ud, json, len);
    }
    free(key);
    json_decref(m);
}

struct remote_sink translate_sink(struct translate *t)
{
    return (struct remote_sink){from_remote, t};
}

struct translate *translate_new(struct remote *rm, struct remote_sink client)
{
    struct translate *t = calloc(1, sizeof *t);
    if (t) {
        t->rm = rm;
        t->client = client;
    }
    return t;
}

void translate_free(struct translate *t)
{
    if (!t)
        return;
    while (t->reqs)
        treq_free(t, t->reqs);
    json_decref(t->init);
    json_decref(t->init_error);
    json_decref(t->discovered);
    json_decref(t->caps);
    json_decref(t->info);
    free(t->init_key);
    free(t->probe_key);
    free(t->client_probe);
    free(t);
}

/* logging/setLevel: the level goes in the _meta of later requests. */
static void set_level(struct translate *t, json_t *m)
{
    static const char *const levels[] = {"debug", "info",     "notice", "warning",
                                         "error", "critical", "alert",  "emergency"};
    const char *level = json_string_value(json_object_get(json_object_get(m, "params"), "level"));
    for (size_t i = 0; level && i < sizeof levels / sizeof *levels; i++) {
        if (strcmp(level, levels[i]) == 0) {
            snprintf(t->log_level, sizeof t->log_level, "%s", levels[i]);
            reply(t, json_object_get(m, "id"), json_object());
            return;
        }
    }
    reply_error(t, json_object_get(m, "id"), -32602, "Invalid params: unknown logging level", NULL);
}

int translate_from_client(struct translate *t, json_t *m)
{
    enum rpc_kind k = rpc_classify(m);
    const char *method = json_string_value(json_object_get(m, "method"));
    if (k == RPC_RESPONSE) {
        if (client_answer(t, m))
            return 1;
        if (t->mode != T_ON)
            return 0;
        bridge_log(LOG_DEBUG, "response_dropped", "a client response to no question");
        return 1;
    }
    if (k == RPC_REQUEST && strcmp(method, "initialize") == 0)
        return client_initialize(t, m);
    if (t->mode != T_ON) {
        if (k == RPC_REQUEST && strcmp(method, "server/discover") == 0) {
            free(t->client_probe);
            t->client_probe = rpc_id_key(json_object_get(m, "id"));
        }
        return 0;
    }
    if (k == RPC_NOTIFICATION) {
        /* the stateless server has no session to tell of the client's
         * initialized, progress or roots changes; a cancel is the bridge's */
        if (strcmp(method, "notifications/cancelled") == 0)
            cancel(t, json_object_get(json_object_get(m, "params"), "requestId"));
        return 1;
    }
    if (strcmp(method, "ping") == 0)
        reply(t, json_object_get(m, "id"), json_object());
    else if (strcmp(method, "logging/setLevel") == 0)
        set_level(t, m);
    else
        treq_start(t, m);
    return 1;
}

int translate_pending(const struct translate *t)
{
    int n = 0;
    for (const struct treq *q = t->reqs; q; q = q->next)
        n += !q->at_remote;
    return n;
}

static void fail_held(struct translate *t, const char *why)
{
    for (struct treq *q = t->reqs, *next; q; q = next) {
        next = q->next;
        if (!q->at_remote)
            treq_fail(t, q, RPC_BRIDGE_ERROR, why, NULL);
    }
}

void translate_stdin_closed(struct translate *t, const char *why)
{
    t->stdin_closed = 1;
    fail_held(t, why);
}

void translate_shutdown(struct translate *t, const char *why)
{
    fail_held(t, why);
}
