/* translate_calls — the requests of a 2025 client translated to 2026-07-28
 * (translate.h): each round sent, an input-required result turned into
 * questions to the client, their answers sent back in the next round with
 * the requestState, the final answer under the client's id. */
#include "translate_int.h"

#include "bridge_log.h"
#include "rpc_message.h"
#include "translate_shape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct treq *find(struct translate *t, const char *key)
{
    for (struct treq *q = t->reqs; q; q = q->next)
        if (strcmp(q->key, key) == 0)
            return q;
    return NULL;
}

struct treq *translate_call_at_remote(struct translate *t, const char *rkey)
{
    for (struct treq *q = t->reqs; q; q = q->next)
        if (q->at_remote && strcmp(q->rkey, rkey) == 0)
            return q;
    return NULL;
}

/* The request that put the question whose bridge id key is key. */
static struct treq *asking(struct translate *t, const char *key)
{
    for (struct treq *q = t->reqs; q; q = q->next)
        if (json_object_get(q->asked, key))
            return q;
    return NULL;
}

void translate_call_free(struct translate *t, struct treq *q)
{
    for (struct treq **pp = &t->reqs; *pp; pp = &(*pp)->next) {
        if (*pp == q) {
            *pp = q->next;
            break;
        }
    }
    json_decref(q->id);
    free(q->key);
    json_decref(q->rid);
    free(q->rkey);
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
        translate_emit(t, n);
        json_decref(n);
    }
    json_object_clear(q->asked);
}

/* Ends q, which is not at the server, with an error (data stolen). */
static void fail(struct translate *t, struct treq *q, int code, const char *message, json_t *data)
{
    bridge_log(LOG_WARN, "request_failed", "id=%s: %s", q->key, message);
    withdraw_questions(t, q, message);
    translate_reply_error(t, q->id, code, message, data);
    translate_call_free(t, q);
}

/* Sends the round m (q's message, owned by the caller) under id. */
static void send_round(struct translate *t, struct treq *q, json_t *m, json_t *id)
{
    char *rkey = rpc_id_key(id);
    if (!rkey || json_object_set(m, "id", id) != 0) {
        free(rkey);
        json_decref(id);
        fail(t, q, RPC_INTERNAL_ERROR, "mcp-bridge: out of memory", NULL);
        return;
    }
    json_decref(q->rid);
    free(q->rkey);
    q->rid = id;
    q->rkey = rkey;
    q->at_remote = 1;
    translate_send_remote(t, m);
}

/* Sends q again, under a new id, with the answers the client gave and the
 * requestState. */
static void retry(struct translate *t, struct treq *q)
{
    json_t *m = json_deep_copy(q->msg);
    json_t *params = json_object_get(m, "params");
    if (!params) {
        json_decref(m);
        fail(t, q, RPC_INTERNAL_ERROR, "mcp-bridge: out of memory", NULL);
        return;
    }
    json_object_set(params, "inputResponses", q->answers);
    if (q->state)
        json_object_set(params, "requestState", q->state);
    json_decref(q->answers);
    q->answers = json_object();
    char id[48];
    snprintf(id, sizeof id, "mcp-bridge-retry-%u", ++t->counter);
    send_round(t, q, m, json_string(id));
    json_decref(m);
}

void translate_call_start(struct translate *t, json_t *m)
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
        translate_reply_error(t, json_object_get(m, "id"), RPC_INTERNAL_ERROR,
                              "mcp-bridge: out of memory", NULL);
        return;
    }
    q->id = json_incref(json_object_get(m, "id"));
    q->next = t->reqs;
    t->reqs = q;
    send_round(t, q, q->msg, json_incref(q->id));
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

/* The first input request of requests that the client cannot answer: q
 * fails with -32021 naming it (or as malformed). Returns 1 when it did. */
static int undeclared(struct translate *t, struct treq *q, json_t *requests)
{
    const char *key;
    json_t *ir;
    json_object_foreach(requests, key, ir)
    {
        const char *method = json_string_value(json_object_get(ir, "method"));
        if (!method) {
            fail(t, q, RPC_INTERNAL_ERROR,
                 "mcp-bridge: the server asked for input without naming a method", NULL);
            return 1;
        }
        const char *missing =
            translate_shape_missing_capability(method, json_object_get(ir, "params"), t->caps);
        if (!missing)
            continue;
        char msg[512];
        snprintf(msg, sizeof msg,
                 "mcp-bridge: the server needs %s from the client for this request, and the "
                 "client did not declare the %s capability",
                 method, missing);
        fail(t, q, RPC_MISSING_CAPABILITY, msg, required(missing));
        return 1;
    }
    return 0;
}

/* The server asked for input (result: an InputRequiredResult): the
 * questions go to the client, or q fails when it cannot answer them. */
static void ask(struct translate *t, struct treq *q, const json_t *result)
{
    char msg[512];
    if (++q->rounds > TRANSLATE_MAX_ROUNDS) {
        snprintf(msg, sizeof msg,
                 "mcp-bridge: the server asked for input more than %d times for one request",
                 TRANSLATE_MAX_ROUNDS);
        fail(t, q, RPC_INTERNAL_ERROR, msg, NULL);
        return;
    }
    if (t->stdin_closed) {
        fail(t, q, RPC_BRIDGE_ERROR,
             "mcp-bridge: the server asked for the client's input after the client closed stdin",
             NULL);
        return;
    }
    json_t *requests = json_object_get(result, "inputRequests");
    if (undeclared(t, q, requests))
        return;
    json_decref(q->state);
    q->state = json_incref(json_object_get(result, "requestState"));
    const char *key;
    json_t *ir;
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
            fail(t, q, RPC_INTERNAL_ERROR, "mcp-bridge: out of memory", NULL);
            return;
        }
        free(id_key);
        translate_emit(t, m);
        json_decref(m);
    }
    if (json_object_size(q->asked) == 0)
        retry(t, q); /* only a requestState: the server wants the call again */
}

void translate_call_reply(struct translate *t, struct treq *q, json_t *m)
{
    q->at_remote = 0;
    json_t *result = json_object_get(m, "result");
    const char *type = json_string_value(json_object_get(result, "resultType"));
    if (type && strcmp(type, "input_required") == 0) {
        ask(t, q, result);
        return;
    }
    json_object_del(result, "resultType"); /* a 2025 result has none */
    json_object_set(m, "id", q->id);
    translate_emit(t, m);
    translate_call_free(t, q);
}

int translate_call_answer(struct translate *t, json_t *m)
{
    char *key = rpc_id_key(json_object_get(m, "id"));
    struct treq *q = key ? asking(t, key) : NULL;
    if (!q) {
        free(key);
        return 0;
    }
    const char *input = json_string_value(json_object_get(q->asked, key));
    json_t *result = json_object_get(m, "result");
    if (!result) {
        json_t *error = json_object_get(m, "error");
        const char *why = json_string_value(json_object_get(error, "message"));
        char msg[512];
        snprintf(msg, sizeof msg,
                 "mcp-bridge: the client refused the server's request for input: %s",
                 why ? why : "(no message)");
        json_object_del(q->asked, key);
        free(key);
        json_int_t code = json_integer_value(json_object_get(error, "code"));
        fail(t, q, code ? (int)code : RPC_INTERNAL_ERROR, msg, NULL);
        return 1;
    }
    json_object_set(q->answers, input, result);
    json_object_del(q->asked, key);
    free(key);
    if (json_object_size(q->asked) == 0)
        retry(t, q);
    return 1;
}

void translate_call_cancel(struct translate *t, const json_t *id)
{
    char *key = id ? rpc_id_key(id) : NULL;
    struct treq *q = key ? find(t, key) : NULL;
    free(key);
    if (!q)
        return;
    if (q->at_remote)
        remote_cancel(t->rm, q->rid);
    withdraw_questions(t, q, "the client cancelled the request");
    translate_call_free(t, q);
}

void translate_call_fail_held(struct translate *t, const char *why)
{
    for (struct treq *q = t->reqs, *next; q; q = next) {
        next = q->next;
        if (!q->at_remote)
            fail(t, q, RPC_BRIDGE_ERROR, why, NULL);
    }
}
