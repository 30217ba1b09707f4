/* translate — see translate.h; the translated requests are in
 * translate_calls.c. This file holds the client's initialize, the bridge's
 * server/discover, and the dispatch of messages either way. */
#include "translate_int.h"

#include "bridge_log.h"
#include "modern.h"
#include "rpc_message.h"
#include "translate_shape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- output */

void translate_emit(struct translate *t, const json_t *m)
{
    char *s = m ? json_dumps(m, JSON_COMPACT) : NULL;
    if (s) {
        t->client.emit(t->client.ud, s, strlen(s));
        free(s);
    } else {
        bridge_log(LOG_ERROR, "out_of_memory", "a message to the client was dropped");
    }
}

void translate_reply(struct translate *t, const json_t *id, json_t *result)
{
    json_t *m = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
    translate_emit(t, m);
    json_decref(m);
}

void translate_reply_error(struct translate *t, const json_t *id, int code, const char *message,
                           json_t *data)
{
    json_t *m = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
                          code, "message", message);
    if (m && data)
        json_object_set(json_object_get(m, "error"), "data", data);
    json_decref(data);
    translate_emit(t, m);
    json_decref(m);
}

void translate_send_remote(struct translate *t, json_t *m)
{
    char *body = json_dumps(m, JSON_COMPACT);
    if (!body) {
        translate_reply_error(t, json_object_get(m, "id"), RPC_INTERNAL_ERROR,
                              "mcp-bridge: out of memory", NULL);
        return;
    }
    remote_send(t->rm, body, strlen(body), m);
    free(body);
}

/* ---------------------------------------------------------- initialize */

/* The initialize being handled is over. */
static void init_done(struct translate *t)
{
    json_decref(t->init);
    json_decref(t->init_error);
    t->init = t->init_error = NULL;
    free(t->init_key);
    t->init_key = NULL;
}

static void answer_initialize(struct translate *t, const json_t *init)
{
    json_t *result =
        translate_shape_initialize_result(t->discovered, json_object_get(init, "params"));
    if (!result) {
        translate_reply_error(t, json_object_get(init, "id"), RPC_INTERNAL_ERROR,
                              "mcp-bridge: out of memory", NULL);
        return;
    }
    if (t->mode != T_ON)
        bridge_log(LOG_INFO, "translating",
                   "the server speaks only MCP %s: the bridge answers initialize and translates",
                   MODERN_VERSION);
    t->mode = T_ON;
    translate_reply(t, json_object_get(init, "id"), result);
}

/* The client's initialize goes to the server as it is. */
static void pass_initialize(struct translate *t)
{
    free(t->init_key);
    t->init_key = rpc_id_key(json_object_get(t->init, "id"));
    translate_send_remote(t, t->init);
}

/* Asks server/discover, with the _meta the client's initialize gives. */
static void probe(struct translate *t)
{
    char id[48];
    snprintf(id, sizeof id, "mcp-bridge-discover-%u", ++t->counter);
    json_t *m = json_pack("{s:s, s:s, s:s, s:{}}", "jsonrpc", "2.0", "id", id, "method",
                          "server/discover", "params");
    json_t *modern = m ? translate_shape_request(m, t->caps, t->info, NULL) : NULL;
    json_decref(m);
    free(t->probe_key);
    t->probe_key = modern ? rpc_id_key(json_object_get(modern, "id")) : NULL;
    t->probes++;
    if (!t->probe_key) {
        json_decref(modern);
        if (!t->init_error) {
            pass_initialize(t);
            return;
        }
        translate_emit(t, t->init_error); /* the server's word stands */
        init_done(t);
        return;
    }
    t->mode = T_PROBING;
    translate_send_remote(t, modern);
    json_decref(modern);
}

/* The client's messages that waited for the probe go on. */
static void release_waiting(struct translate *t)
{
    json_t *held = t->waiting;
    t->waiting = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(held, i, m)
    {
        if (t->stopping) {
            if (rpc_classify(m) == RPC_REQUEST)
                translate_reply_error(t, json_object_get(m, "id"), RPC_BRIDGE_ERROR,
                                      "mcp-bridge: stopping", NULL);
        } else if (!translate_from_client(t, m)) {
            translate_send_remote(t, m);
        }
    }
    json_decref(held);
}

/* The answer m to the bridge's server/discover. */
static void probe_done(struct translate *t, json_t *m)
{
    free(t->probe_key);
    t->probe_key = NULL;
    json_t *result = json_object_get(m, "result");
    json_t *error = json_object_get(m, "error");
    if (error && modern_error_is_modern(error) && t->probes < 2 && !t->stopping) {
        /* a 2026-07-28 server refused this one request (-32022 naming the
         * revision it supports, which the bridge speaks): asked again, as
         * the revision asks of a client */
        probe(t);
        return;
    }
    if (result) {
        json_decref(t->discovered);
        t->discovered = json_incref(result);
    }
    /* before initialize, only a server without a 2025 revision is
     * translated; after a refusal, any that speaks 2026-07-28 */
    if (result && translate_shape_discover_ok(result, !t->init_error)) {
        answer_initialize(t, t->init);
        init_done(t);
    } else if (t->init_error) {
        t->mode = T_PASS;
        translate_emit(t, t->init_error);
        init_done(t);
    } else if (t->stopping) {
        /* the bridge is stopping: initialize gets the probe's failure */
        const char *why = json_string_value(json_object_get(error, "message"));
        t->mode = T_PASS;
        translate_reply_error(t, json_object_get(t->init, "id"), RPC_BRIDGE_ERROR,
                              why ? why : "mcp-bridge: stopping", NULL);
        init_done(t);
    } else {
        bridge_log(LOG_DEBUG, "not_translating", "server/discover did not say MCP %s only",
                   MODERN_VERSION);
        t->mode = T_PASS;
        pass_initialize(t);
    }
    release_waiting(t);
}

/* The server's answer m (raw text json) to the client's initialize. */
static void initialize_answered(struct translate *t, json_t *m, const char *json, size_t len)
{
    free(t->init_key);
    t->init_key = NULL;
    json_t *error = json_object_get(m, "error");
    if (!error || !translate_shape_refusal(error)) {
        t->client.emit(t->client.ud, json, len);
        init_done(t);
    } else if (t->discovered && translate_shape_discover_ok(t->discovered, 0)) {
        answer_initialize(t, t->init);
        init_done(t);
    } else if (t->probes < 2) { /* the first may have failed on the way */
        t->init_error = json_incref(m);
        probe(t);
    } else {
        t->client.emit(t->client.ud, json, len);
        init_done(t);
    }
}

static void client_initialize(struct translate *t, json_t *m)
{
    json_t *params = json_object_get(m, "params");
    json_decref(t->caps);
    json_decref(t->info);
    t->caps = json_deep_copy(json_object_get(params, "capabilities"));
    t->info = json_deep_copy(json_object_get(params, "clientInfo"));
    if (t->mode == T_ON || (t->discovered && translate_shape_discover_ok(t->discovered, 1))) {
        answer_initialize(t, m);
        return;
    }
    init_done(t);
    t->init = json_incref(m);
    t->probes = 0;
    if (t->probe_first)
        probe(t);
    else
        pass_initialize(t);
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
    struct treq *q;
    if (!key) {
        t->client.emit(t->client.ud, json, len);
    } else if (t->init_key && strcmp(key, t->init_key) == 0) {
        initialize_answered(t, m, json, len);
    } else if (t->probe_key && strcmp(key, t->probe_key) == 0) {
        probe_done(t, m);
    } else if (t->mode == T_ON && (q = translate_call_at_remote(t, key))) {
        translate_call_reply(t, q, m);
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

struct translate *translate_new(struct remote *rm, struct remote_sink client, int probe_first)
{
    struct translate *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->rm = rm;
    t->client = client;
    t->probe_first = probe_first;
    t->waiting = json_array();
    if (!t->waiting) {
        free(t);
        return NULL;
    }
    return t;
}

void translate_free(struct translate *t)
{
    if (!t)
        return;
    while (t->reqs)
        translate_call_free(t, t->reqs);
    init_done(t);
    json_decref(t->discovered);
    json_decref(t->caps);
    json_decref(t->info);
    json_decref(t->waiting);
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
            translate_reply(t, json_object_get(m, "id"), json_object());
            return;
        }
    }
    translate_reply_error(t, json_object_get(m, "id"), -32602,
                          "Invalid params: unknown logging level", NULL);
}

int translate_from_client(struct translate *t, json_t *m)
{
    enum rpc_kind k = rpc_classify(m);
    const char *method = json_string_value(json_object_get(m, "method"));
    if (t->mode == T_PROBING) {
        /* after the initialize, in the order the client sent them */
        if (json_array_append(t->waiting, m) != 0)
            bridge_log(LOG_ERROR, "out_of_memory", "a client message was dropped");
        return 1;
    }
    if (k == RPC_RESPONSE) {
        if (translate_call_answer(t, m))
            return 1;
        if (t->mode != T_ON)
            return 0;
        bridge_log(LOG_DEBUG, "response_dropped", "a client response to no question");
        return 1;
    }
    if (k == RPC_REQUEST && strcmp(method, "initialize") == 0) {
        client_initialize(t, m);
        return 1;
    }
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
            translate_call_cancel(t, json_object_get(json_object_get(m, "params"), "requestId"));
        return 1;
    }
    if (strcmp(method, "ping") == 0)
        translate_reply(t, json_object_get(m, "id"), json_object());
    else if (strcmp(method, "logging/setLevel") == 0)
        set_level(t, m);
    else
        translate_call_start(t, m);
    return 1;
}

int translate_pending(const struct translate *t)
{
    int n = 0;
    for (const struct treq *q = t->reqs; q; q = q->next)
        n += !q->at_remote;
    return n;
}

void translate_stdin_closed(struct translate *t, const char *why)
{
    t->stdin_closed = 1;
    translate_call_fail_held(t, why);
}

void translate_shutdown(struct translate *t, const char *why)
{
    t->stopping = 1;
    translate_call_fail_held(t, why);
}
