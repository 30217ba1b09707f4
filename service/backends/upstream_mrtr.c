/* upstream_mrtr — a 2025 child's calls, asking for input mid-call, served
 * to 2026-07-28 clients as input-required results (SEP-2322).
 *
 * A 2025 server asks its client for input with a request of its own
 * (elicitation/create, sampling/createMessage, roots/list) and waits for
 * the answer in the middle of a call. A 2026-07-28 client cannot be asked
 * that way: the server answers the call with an InputRequiredResult, and
 * the client sends the call again with its inputResponses and the
 * requestState it was given. So the gateway holds the child's call:
 *
 *   - the child asks (upstream_mrtr_request): the call ends now with
 *     {resultType: "input_required", inputRequests: {key: the child's
 *     request}, requestState}, and the child's call and its questions are
 *     kept in a hold. The child keeps waiting.
 *   - the client retries (upstream_mrtr_resume): the requestState names
 *     the hold; each answer goes to the child as the result of the request
 *     it answers, and the retry becomes the child's call from then on: its
 *     result, or its next question (another round), answers the retry. A
 *     retry that leaves a question unanswered is asked all of them again,
 *     and the child is told nothing until every one is answered.
 *   - a child that is a 2026-07-28 server itself answers with an
 *     InputRequiredResult of its own (upstream_mrtr_result): its
 *     requestState is sealed inside the gateway's, and the retry goes to
 *     the same child with the child's state put back, since only that
 *     child can open it.
 *
 * The requestState is the core's (call_state_seal, request_state.h): sealed
 * under mcpd's key, bound to the principal, the request (tool and
 * arguments) and the questions it went out with, used once. It carries
 * only the hold's id (and the child's own state). A hold is bounded in
 * time (--upstream-relay-timeout-ms, after which the child's questions are
 * answered with an error and its call cancelled) and in number (one per
 * upstream process allowed, --upstream-max). In per-session mode the hold
 * takes the session's child over, so the session's end does not stop it;
 * the child is stopped when the call ends or the hold expires.
 *
 * A child's request for a capability the client did not declare ends the
 * call with -32021 (the client must not be relied on for it). */
#include "call.h"
#include "child.h"
#include "clock.h"
#include "jsonrpc.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "randid.h"
#include "table.h"
#include "upstream_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STOP_GRACE_MS 2000

struct upstream_hold {
    char id[RANDID_LEN + 1];
    struct link *link; /* a reference */
    uint64_t starts;   /* the child it lives in (link->starts) */
    int running;       /* a round is being served: not to be resumed or swept */
    int64_t expires_ms;
    /* Between rounds, the child's call that waits for answers (its call
     * NULL); NULL while a round runs, or when the child answered with an
     * InputRequiredResult of its own. */
    struct pend *pend;
    /* The child's questions not yet answered: key → {"id", "method",
     * "params"}. */
    json_t *asked;
    unsigned next_key;
};

/* ---- holds ---- */

/* Counted, so that upstream_mrtr_destroy waits for it. A loop fiber,
 * shielded from loop_stop: stopping the child waits for its grace period
 * and its readers, which park it, and it must finish even at shutdown. */
static void retire_main(void *arg)
{
    struct link *l = arg;
    struct upstream *up = l->up;
    upstream_link_stop(l);
    pthread_mutex_lock(&up->hold_mu);
    up->retiring--;
    pthread_cond_broadcast(&up->retired);
    pthread_mutex_unlock(&up->hold_mu);
}

void upstream_link_retire(struct link *l)
{
    struct upstream *up = l->up;
    pthread_mutex_lock(&up->hold_mu);
    up->retiring++;
    pthread_mutex_unlock(&up->hold_mu);
    /* Not here: the caller may be the child's own reader, which stopping
     * it waits for. */
    if (loop_spawn_shielded(retire_main, l) == 0)
        return;
    pthread_mutex_lock(&up->hold_mu);
    up->retiring--;
    pthread_mutex_unlock(&up->hold_mu);
    log_event(LOG_WARN, NULL, "upstream_retire_failed",
              "no fiber to stop a held call's upstream: it runs until mcpd exits");
}

/* Tells the child its call is over: its questions get an error, the call
 * a cancellation. Frees p (whose call is NULL). */
static void abandon(struct link *l, struct pend *p, json_t *asked, const char *why)
{
    const char *key;
    json_t *q;
    json_object_foreach(asked, key, q)
    {
        upstream_send(l,
                      jsonrpc_error(json_object_get(q, "id"), JSONRPC_INTERNAL_ERROR, why, NULL));
    }
    json_t *id = json_loads(p->key, JSON_DECODE_ANY, NULL);
    if (id)
        upstream_send(
            l, jsonrpc_notification("notifications/cancelled",
                                    json_pack("{s:o, s:s}", "requestId", id, "reason", why)));
    free(p);
}

/* Frees a hold already out of the table: its child's waiting call is
 * abandoned, and a child it took over from a session is stopped: here
 * when sync or when it has exited already, else on a fiber of its own
 * (this may be the child's reader). */
static void hold_free(struct upstream_hold *h, int sync, const char *why)
{
    struct link *l = h->link;
    if (h->pend)
        abandon(l, h->pend, h->asked, why);
    json_decref(h->asked);
    pthread_mutex_lock(&l->mu);
    int held = l->held;
    sync = sync || !l->child;
    pthread_mutex_unlock(&l->mu);
    if (held && sync)
        upstream_link_stop(l);
    else if (held)
        upstream_link_retire(l);
    else
        upstream_link_unref(l);
    free(h);
}

static void hold_drop(struct upstream_hold *h, const char *why)
{
    struct upstream *up = h->link->up;
    pthread_mutex_lock(&up->hold_mu);
    if (table_get(up->holds, h->id) == h)
        table_del(up->holds, h->id);
    pthread_mutex_unlock(&up->hold_mu);
    hold_free(h, 0, why);
}

void upstream_mrtr_release(struct upstream_hold *h)
{
    hold_drop(h, "The call ended");
}

/* A new hold on l's child (running), or NULL with *why. In per-session
 * mode it takes the child over from its session. */
static struct upstream_hold *hold_new(struct link *l, const char **why)
{
    struct upstream *up = l->up;
    struct upstream_hold *h = calloc(1, sizeof *h);
    if (!h || !(h->asked = json_object()) || randid_make(h->id) != 0) {
        if (h)
            json_decref(h->asked);
        free(h);
        *why = "Internal error: out of memory";
        return NULL;
    }
    h->running = 1;
    pthread_mutex_lock(&l->mu);
    h->starts = l->starts;
    pthread_mutex_unlock(&l->mu);
    upstream_link_ref(l);
    h->link = l;
    pthread_mutex_lock(&up->hold_mu);
    int room = table_count(up->holds) < (size_t)up->cfg.max_children;
    int ok = room && table_put(up->holds, h->id, h) == 0;
    pthread_mutex_unlock(&up->hold_mu);
    if (!ok) {
        metrics_refused("upstream_holds");
        *why = room ? "Internal error: out of memory"
                    : "mcpd holds too many calls waiting for their clients' input "
                      "(--upstream-max); retry later";
        upstream_link_unref(l);
        json_decref(h->asked);
        free(h);
        return NULL;
    }
    if (!up->cfg.shared) {
        pthread_mutex_lock(&up->mu);
        int mine = table_get(up->links, l->session) == l;
        if (mine)
            table_del(up->links, l->session);
        pthread_mutex_unlock(&up->mu);
        pthread_mutex_lock(&l->mu);
        l->held = l->held || mine;
        pthread_mutex_unlock(&l->mu);
        if (mine)
            upstream_link_unref(l); /* the table's reference */
    }
    return h;
}

/* Takes a waiting hold for a round: the hold, running, or NULL. */
static struct upstream_hold *hold_take(struct upstream *up, const char *id)
{
    pthread_mutex_lock(&up->hold_mu);
    struct upstream_hold *h = id ? table_get(up->holds, id) : NULL;
    if (h && (h->running || clock_mono_ms() >= h->expires_ms))
        h = NULL;
    if (h)
        h->running = 1;
    pthread_mutex_unlock(&up->hold_mu);
    return h;
}

/* The hold now waits for its client, for --upstream-relay-timeout-ms. */
static void hold_wait(struct upstream_hold *h)
{
    struct upstream *up = h->link->up;
    pthread_mutex_lock(&up->hold_mu);
    h->expires_ms = clock_mono_ms() + up->cfg.relay_timeout_ms;
    h->running = 0;
    pthread_mutex_unlock(&up->hold_mu);
}

/* ---- rounds ---- */

/* Ends call c with an InputRequiredResult (result, stolen, gets the
 * requestState) whose state carries data (stolen) for hold h, which then
 * waits. The call's reference is the caller's. */
static void ask(struct upstream_hold *h, struct call *c, json_t *result, json_t *data)
{
    json_object_set_new(data, "h", json_string(h->id));
    char *sealed = call_state_seal(c, json_object_get(result, "inputRequests"), data);
    json_decref(data);
    if (!sealed) {
        json_decref(result);
        call_fail(c, JSONRPC_INTERNAL_ERROR, "Internal error: cannot seal the requestState", NULL);
        hold_drop(h, "mcpd could not hold the call");
        return;
    }
    json_object_set_new(result, "requestState", json_string(sealed));
    free(sealed);
    hold_wait(h);
    call_reply(c, result);
}

/* Asks the client every question of the child's still open. */
static void ask_questions(struct upstream_hold *h, struct call *c)
{
    json_t *requests = json_object();
    struct upstream *up = h->link->up;
    pthread_mutex_lock(&up->hold_mu);
    const char *key;
    json_t *q;
    json_object_foreach(h->asked, key, q)
    {
        json_t *params = json_object_get(q, "params");
        json_object_set_new(requests, key,
                            json_pack("{s:O, s:O}", "method", json_object_get(q, "method"),
                                      "params", params ? params : json_object()));
    }
    pthread_mutex_unlock(&up->hold_mu);
    ask(h, c, json_pack("{s:s, s:o}", "resultType", "input_required", "inputRequests", requests),
        json_object());
}

int upstream_mrtr_result(struct link *l, struct pend *p, json_t *result)
{
    const char *type = json_string_value(json_object_get(result, "resultType"));
    json_t *state = json_object_get(result, "requestState");
    /* Without a state of the child's, any child can serve the retry. */
    if (!type || strcmp(type, "input_required") != 0 || !json_is_string(state))
        return 0;
    const char *why = NULL;
    struct upstream_hold *h = p->hold ? p->hold : hold_new(l, &why);
    struct call *c = p->call;
    p->hold = NULL;
    free(p);
    if (!h) {
        call_fail(c, JSONRPC_SERVER_ERROR, why, NULL);
    } else {
        json_t *data = json_pack("{s:O}", "s", state);
        ask(h, c, json_deep_copy(result), data);
    }
    call_release(c);
    return 1;
}

/* The client capability a request of the child's needs, or NULL. */
static const char *needed(const char *method, const char **key)
{
    static const char *const needs[][3] = {
        {"sampling/createMessage", "sampling", "sampling"},
        {"elicitation/create", "elicitation", "elicitation"},
        {"roots/list", "roots", "roots"},
    };
    for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++)
        if (strcmp(method, needs[i][0]) == 0) {
            *key = needs[i][2];
            return needs[i][1];
        }
    return NULL;
}

struct find {
    struct link *link;
    char waiting[RANDID_LEN + 1]; /* a hold on link between rounds */
    int n;
    struct pend *one;
};

static void find_waiting(void *arg, const char *key, void *value)
{
    (void)key;
    struct find *f = arg;
    struct upstream_hold *h = value;
    if (h->link == f->link && h->pend) {
        memcpy(f->waiting, h->id, sizeof f->waiting);
        f->n++;
    }
}

static void find_pend(void *arg, const char *key, void *value)
{
    (void)key;
    struct find *f = arg;
    f->one = value;
    f->n++;
}

/* Adds the child's question to h (hold_mu held). */
static void add_question(struct upstream_hold *h, const struct jsonrpc_msg *m, const char *prefix)
{
    char key[48];
    snprintf(key, sizeof key, "%s_%u", prefix, ++h->next_key);
    json_object_set_new(
        h->asked, key,
        json_pack("{s:O, s:s, s:O*}", "id", m->id, "method", m->method, "params", m->params));
}

int upstream_mrtr_request(struct link *l, const struct jsonrpc_msg *m)
{
    const char *prefix;
    const char *cap = needed(m->method, &prefix);
    if (!cap)
        return 0;
    struct upstream *up = l->up;
    struct find f = {.link = l};
    pthread_mutex_lock(&up->hold_mu);
    table_each(up->holds, find_waiting, &f);
    pthread_mutex_unlock(&up->hold_mu);
    int waiting = f.n;
    f.n = 0;
    pthread_mutex_lock(&l->mu);
    table_each(l->pending, find_pend, &f);
    struct pend *p = f.n == 1 && !waiting ? f.one : NULL;
    /* The only call is a 2026-07-28 client's: the question is its. */
    if (p && upstream_stateless_call(p->call))
        table_del(l->pending, p->key);
    else
        p = NULL;
    pthread_mutex_unlock(&l->mu);
    if (!p) {
        if (waiting != 1 || f.n != 0)
            return 0;
        /* Asked between rounds: it goes out with the next one. */
        pthread_mutex_lock(&up->hold_mu);
        struct upstream_hold *h = table_get(up->holds, f.waiting);
        int still = h && h->link == l && h->pend;
        if (still)
            add_question(h, m, prefix);
        pthread_mutex_unlock(&up->hold_mu);
        return still;
    }
    struct call *c = p->call;
    if (!call_client_has(c, cap)) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "Missing required client capability: the server asked for %s, which the "
                 "request did not declare",
                 cap);
        upstream_send(l, jsonrpc_error(m->id, JSONRPC_METHOD_NOT_FOUND,
                                       "Method not found: the client did not declare the "
                                       "capability",
                                       NULL));
        call_fail(c, JSONRPC_MISSING_CAPABILITY, msg,
                  json_pack("{s:{s:{}}}", "requiredCapabilities", cap));
        p->call = NULL;
        struct upstream_hold *h = p->hold;
        p->hold = NULL;
        abandon(l, p, NULL, "The client cannot answer");
        if (h)
            hold_drop(h, "The client cannot answer");
        call_release(c);
        return 1;
    }
    const char *why = NULL;
    struct upstream_hold *h = p->hold ? p->hold : hold_new(l, &why);
    if (!h) {
        upstream_send(l, jsonrpc_error(m->id, JSONRPC_INTERNAL_ERROR, why, NULL));
        call_fail(c, JSONRPC_SERVER_ERROR, why, NULL);
        p->call = NULL;
        abandon(l, p, NULL, why);
        call_release(c);
        return 1;
    }
    p->hold = NULL;
    p->call = NULL;
    pthread_mutex_lock(&up->hold_mu);
    add_question(h, m, prefix);
    h->pend = p;
    pthread_mutex_unlock(&up->hold_mu);
    ask_questions(h, c);
    call_release(c);
    return 1;
}

int upstream_mrtr_resume(struct upstream *up, struct call *c)
{
    json_t *state = json_object_get(call_params(c), "requestState");
    if (!state)
        return 0;
    if (!json_is_string(state)) {
        call_fail(c, JSONRPC_INVALID_PARAMS, "Invalid params: requestState must be a string", NULL);
        return 1;
    }
    json_t *inputs = json_object_get(call_params(c), "inputResponses");
    if (inputs && !json_is_object(inputs)) {
        call_fail(c, JSONRPC_INVALID_PARAMS, "Invalid params: inputResponses must be an object",
                  NULL);
        return 1;
    }
    json_t *data = NULL, *answers = NULL;
    const char *why = NULL;
    int rc = call_state_open(c, json_string_value(state), &data, &answers, &why);
    if (rc == 1) {
        call_reply(c, data); /* the same retry, sent again */
        return 1;
    }
    if (rc != 0) {
        call_fail(c,
                  strncmp(why, "Internal error", 14) == 0 ? JSONRPC_INTERNAL_ERROR
                                                          : JSONRPC_INVALID_PARAMS,
                  why, NULL);
        return 1;
    }
    struct upstream_hold *h = hold_take(up, json_string_value(json_object_get(data, "h")));
    int same = 0;
    if (h) {
        pthread_mutex_lock(&h->link->mu);
        same = h->link->state == LINK_READY && h->link->starts == h->starts;
        pthread_mutex_unlock(&h->link->mu);
        if (!same)
            hold_drop(h, "Its server exited");
    }
    if (!same) {
        json_decref(data);
        json_decref(answers);
        call_fail(c, JSONRPC_INVALID_PARAMS,
                  "Invalid params: requestState continues a call that is no longer held (its "
                  "time for input ran out, or its upstream server exited); call again without it",
                  NULL);
        return 1;
    }
    struct link *l = h->link;
    if (!h->pend) {
        /* The child's own state goes back to the child that made it. */
        json_t *params = json_deep_copy(call_params(c));
        json_object_set(params, "requestState", json_object_get(data, "s"));
        json_decref(data);
        json_decref(answers);
        upstream_forward(l, c, params, h);
        return 1;
    }
    json_decref(data);
    /* Every question answered, or all asked again. */
    pthread_mutex_lock(&up->hold_mu);
    int all = 1;
    const char *key;
    json_t *q;
    json_object_foreach(h->asked, key, q)
    {
        if (!json_is_object(json_object_get(answers, key)))
            all = 0;
    }
    json_t *replies = json_array();
    if (all) {
        json_object_foreach(h->asked, key, q)
        {
            json_array_append_new(replies,
                                  jsonrpc_result(json_object_get(q, "id"),
                                                 json_incref(json_object_get(answers, key))));
        }
        json_object_clear(h->asked);
    }
    struct pend *p = all ? h->pend : NULL;
    if (all)
        h->pend = NULL;
    pthread_mutex_unlock(&up->hold_mu);
    json_decref(answers);
    if (!p) {
        json_decref(replies);
        ask_questions(h, c);
        return 1;
    }
    /* The retry is the child's call now: in the table before the child
     * hears the answers, so what it says next finds it. */
    call_hold(c);
    p->call = c;
    p->hold = h;
    pthread_mutex_lock(&l->mu);
    int ok = l->state == LINK_READY && table_put(l->pending, p->key, p) == 0;
    pthread_mutex_unlock(&l->mu);
    if (!ok) {
        json_decref(replies);
        call_fail(c, JSONRPC_INTERNAL_ERROR, "Upstream server is not running", NULL);
        call_release(c);
        free(p);
        hold_drop(h, "Its server exited");
        return 1;
    }
    size_t i;
    json_t *r;
    json_array_foreach(replies, i, r)
    {
        upstream_send(l, json_incref(r));
    }
    json_decref(replies);
    return 1;
}

/* ---- time and shutdown ---- */

struct expired {
    int64_t now;
    int all; /* every hold between rounds, expired or not */
    struct upstream_hold **list;
    size_t n, cap;
};

static void pick_expired(void *arg, const char *key, void *value)
{
    (void)key;
    struct expired *e = arg;
    struct upstream_hold *h = value;
    if (h->running || (!e->all && e->now < h->expires_ms))
        return;
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 8;
        struct upstream_hold **nl = realloc(e->list, cap * sizeof *nl);
        if (!nl)
            return;
        e->list = nl;
        e->cap = cap;
    }
    e->list[e->n++] = h;
}

static void drop_picked(struct upstream *up, struct expired *e, int sync, const char *why)
{
    pthread_mutex_lock(&up->hold_mu);
    table_each(up->holds, pick_expired, e);
    for (size_t i = 0; i < e->n; i++)
        table_del(up->holds, e->list[i]->id);
    pthread_mutex_unlock(&up->hold_mu);
    for (size_t i = 0; i < e->n; i++)
        hold_free(e->list[i], sync, why);
    free(e->list);
}

void upstream_mrtr_sweep(struct upstream *up)
{
    struct expired e = {.now = clock_mono_ms()};
    drop_picked(up, &e, 0, "The client did not answer in time (--upstream-relay-timeout-ms)");
}

struct running {
    struct link **list;
    size_t n, cap;
};

/* The links of holds whose round runs (called with hold_mu held). */
static void pick_running(void *arg, const char *key, void *value)
{
    (void)key;
    struct running *r = arg;
    struct upstream_hold *h = value;
    if (!h->running || r->n == r->cap)
        return;
    upstream_link_ref(h->link);
    r->list[r->n++] = h->link;
}

void upstream_mrtr_destroy(struct upstream *up)
{
    if (!up->holds)
        return;
    struct expired e = {.all = 1};
    drop_picked(up, &e, 1, "mcpd is shutting down");
    /* A hold whose round runs goes when its call ends: its child is
     * stopped here, which ends the call, and so the hold. */
    pthread_mutex_lock(&up->hold_mu);
    size_t n = table_count(up->holds);
    struct running r = {.list = n ? calloc(n, sizeof *r.list) : NULL};
    r.cap = r.list ? n : 0;
    table_each(up->holds, pick_running, &r);
    pthread_mutex_unlock(&up->hold_mu);
    for (size_t i = 0; i < r.n; i++) {
        struct link *l = r.list[i];
        pthread_mutex_lock(&l->mu);
        struct child *c = l->child;
        l->child = NULL;
        pthread_mutex_unlock(&l->mu);
        child_stop(c, STOP_GRACE_MS);
        upstream_link_unref(l);
    }
    free(r.list);
    pthread_mutex_lock(&up->hold_mu);
    while (up->retiring > 0)
        pthread_cond_wait(&up->retired, &up->hold_mu);
    pthread_mutex_unlock(&up->hold_mu);
}
