/* upstream — see upstream.h. */
#include "upstream.h"
#include "upstream_int.h"
#include "backend.h"
#include "call.h"
#include "child.h"
#include "clock.h"
#include "fcond.h"
#include "jsonrpc.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "stdio_frame.h"
#include "protocol.h"
#include "table.h"
#include "token_bucket.h"
#include "upstream_catalog.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STOP_GRACE_MS 2000
#define INIT_ID "mcpd-initialize"
/* The probe's tools/list requests (upstream_probe). */
#define PROBE_ID "mcpd-probe-tools"
/* Pages of tools/list a probe reads at most. */
#define PROBE_PAGES 20
/* No probe starts sooner than this after the last one ended. */
#define PROBE_RETRY_MS 5000
/* Longest stderr line or bad-message text logged whole. */
#define UPSTREAM_LOG_LINE_MAX 1024

/* ---- links ---- */

static struct link *link_new(struct upstream *up, const char *session)
{
    struct link *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->up = up;
    snprintf(l->session, sizeof l->session, "%s", session ? session : "");
    l->refs = 1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->log_mu, NULL);
    token_bucket_init(&l->log_budget, up->cfg.log_rate, up->cfg.log_rate * 10, clock_mono_ms());
    fcond_init(&l->cv);
    l->pending = table_new();
    l->sessions = table_new();
    if (!l->pending || !l->sessions) {
        table_free(l->pending);
        table_free(l->sessions);
        free(l);
        return NULL;
    }
    return l;
}

void upstream_link_ref(struct link *l)
{
    atomic_fetch_add(&l->refs, 1);
}

void upstream_link_unref(struct link *l)
{
    if (!l || atomic_fetch_sub(&l->refs, 1) != 1)
        return;
    child_stop(l->dead, 0);
    json_decref(l->init_answer);
    json_decref(l->probe_answer);
    table_free(l->pending);
    table_free(l->sessions);
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->log_mu);
    fcond_destroy(&l->cv);
    free(l);
}

void upstream_link_stop(struct link *l)
{
    pthread_mutex_lock(&l->mu);
    struct child *c = l->child;
    l->child = NULL;
    l->closed = 1;
    l->state = LINK_DOWN;
    pthread_mutex_unlock(&l->mu);
    child_stop(c, STOP_GRACE_MS);
    upstream_link_unref(l);
}

int upstream_send(struct link *l, json_t *msg)
{
    size_t len;
    char *text = jsonrpc_dump(msg, &len);
    json_decref(msg);
    /* A reference, not the lock, keeps the child alive through the send:
     * child_send may wait seconds on a full pipe, and the child's own reader
     * needs l->mu meanwhile to drain its stdout. */
    pthread_mutex_lock(&l->mu);
    struct child *c = l->child;
    child_hold(c);
    pthread_mutex_unlock(&l->mu);
    int rc = text && c ? child_send(c, text, len) : -1;
    child_release(c);
    free(text);
    return rc;
}

/* ---- what the child says ---- */

/* A pend is done with: its hold, if any, is let go too. */
static void pend_end(struct pend *p)
{
    if (p && p->hold)
        upstream_mrtr_release(p->hold);
    free(p);
}

/* A call of a 2026-07-28 client (its session's params are the ones
 * receive_stateless made from the request's _meta). */
int upstream_stateless_call(struct call *c)
{
    return protocol_is_stateless(
        json_string_value(json_object_get(call_client_init_params(c), "protocolVersion")));
}

struct collect {
    struct pend *one;
    int count;
    const char *token; /* a progress token from the child, token_len bytes */
    size_t token_len;
    struct pend *by_token;
    json_t *client_id;
    struct pend *by_client_id;
};

static void collect_pend(void *arg, const char *key, void *value)
{
    (void)key;
    struct collect *c = arg;
    struct pend *p = value;
    c->count++;
    c->one = p;
    /* Only a call whose client asked for progress has a token of ours;
     * compared whole, so a token with a NUL inside matches nothing. */
    if (c->token && p->token[0] && strlen(p->token) == c->token_len &&
        memcmp(p->token, c->token, c->token_len) == 0)
        c->by_token = p;
    if (c->client_id && json_equal(call_id(p->call), c->client_id))
        c->by_client_id = p;
}

/* The call a child's message without an id of ours belongs to: the only
 * call running, if exactly one is (held; caller releases), else NULL. */
static struct call *only_call(struct link *l)
{
    struct collect c = {0};
    pthread_mutex_lock(&l->mu);
    table_each(l->pending, collect_pend, &c);
    struct call *call = c.count == 1 ? c.one->call : NULL;
    if (call)
        call_hold(call);
    pthread_mutex_unlock(&l->mu);
    return call;
}

/* Logs what the child caused, within its --upstream-log-rate; a line past
 * the rate is counted, and the count goes out with the next line let
 * through (or when the child exits). Long lines are cut. */
static void child_log(struct link *l, enum log_level level, const char *event, const char *text,
                      size_t len)
{
    pthread_mutex_lock(&l->log_mu);
    int ok = token_bucket_take(&l->log_budget, clock_mono_ms());
    uint64_t dropped = ok ? token_bucket_take_dropped(&l->log_budget) : 0;
    pthread_mutex_unlock(&l->log_mu);
    if (!ok) {
        metrics_refused("upstream_log_rate");
        return;
    }
    const char *session = l->session[0] ? l->session : NULL;
    if (dropped)
        log_event(LOG_WARN, session, "upstream_log_dropped",
                  "%llu lines from the upstream dropped (--upstream-log-rate)",
                  (unsigned long long)dropped);
    if (len > UPSTREAM_LOG_LINE_MAX)
        log_event(level, session, event, "%.*s... (%zu bytes)", UPSTREAM_LOG_LINE_MAX, text, len);
    else
        log_event(level, session, event, "%.*s", (int)len, text);
}

/* child_log of a formatted warning (cut at 512 bytes). */
static void child_warnf(struct link *l, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void child_warnf(struct link *l, const char *event, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n >= 0)
        child_log(l, LOG_WARN, event, line, strlen(line));
}

static int is_init_id(const json_t *id)
{
    return json_is_string(id) && strcmp(json_string_value(id), INIT_ID) == 0;
}

/* A response of the child's to `id` that mcpd cannot pass on: whatever
 * waits for it ends now, with an error saying why, instead of waiting for
 * an answer that will not come (nothing else would end it before the child
 * exits). Logged within the child's log rate. */
static void invalid_response(struct link *l, json_t *id, const char *why)
{
    char msg[256];
    snprintf(msg, sizeof msg, "The upstream server sent an invalid response: %s", why);
    char key[96];
    struct pend *p = NULL;
    int init = is_init_id(id);
    pthread_mutex_lock(&l->mu);
    if (init) {
        snprintf(l->init_invalid, sizeof l->init_invalid, "%s", why);
        fcond_broadcast(&l->cv);
    } else if (jsonrpc_id_key(id, key, sizeof key) == 0) {
        p = table_del(l->pending, key);
    }
    pthread_mutex_unlock(&l->mu);
    child_warnf(l, "upstream_bad_message", "%s (to %.128s%s)", msg,
                json_is_string(id) ? json_string_value(id) : "an integer id",
                init || p ? "" : ", which nothing waits for");
    if (!p)
        return;
    call_fail(p->call, JSONRPC_INTERNAL_ERROR, msg, NULL);
    call_release(p->call);
    pend_end(p);
}

static void on_response(struct link *l, json_t *msg, const struct jsonrpc_msg *m)
{
    if (m->result && !json_is_object(m->result)) {
        invalid_response(l, m->id, "its result is not an object");
        return;
    }
    if (is_init_id(m->id)) {
        if (m->result)
            upstream_catalog_set_init(l->up->catalog, m->result);
        pthread_mutex_lock(&l->mu);
        json_decref(l->init_answer);
        l->init_answer = json_incref(msg);
        fcond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        return;
    }
    if (json_is_string(m->id) && strcmp(json_string_value(m->id), PROBE_ID) == 0) {
        pthread_mutex_lock(&l->mu);
        json_decref(l->probe_answer);
        l->probe_answer = json_incref(msg);
        fcond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        return;
    }
    char key[96];
    struct pend *p = NULL;
    if (jsonrpc_id_key(m->id, key, sizeof key) == 0) {
        pthread_mutex_lock(&l->mu);
        p = table_del(l->pending, key);
        pthread_mutex_unlock(&l->mu);
    }
    if (!p)
        return; /* an answer to something cancelled or never asked */
    /* Every listing a client gets keeps the catalog current. */
    if (m->result && strcmp(call_method(p->call), "tools/list") == 0 &&
        upstream_stateless_call(p->call))
        upstream_catalog_add_tools(l->up->catalog, m->result,
                                   !json_object_get(call_params(p->call), "cursor"));
    if (m->result && upstream_stateless_call(p->call) && upstream_mrtr_result(l, p, m->result))
        return;
    if (m->result) {
        call_reply(p->call, json_incref(m->result));
    } else {
        json_t *code = json_object_get(m->error, "code");
        json_t *message = json_object_get(m->error, "message");
        json_t *data = json_object_get(m->error, "data");
        call_fail(p->call, (int)json_integer_value(code),
                  json_is_string(message) ? json_string_value(message) : "Upstream error",
                  data ? json_incref(data) : NULL);
    }
    call_release(p->call);
    pend_end(p);
}

/* Sends msg on a session's channel (its standalone stream): a commit,
 * and a store read to find the session, so never under l->mu. */
static void broadcast_one(json_t *msg, const char *sid)
{
    struct call *ch = call_channel(sid);
    if (ch) {
        call_send(ch, json_incref(msg));
        call_release(ch);
    }
}

/* The ids of the sessions a shared link serves, copied under l->mu. */
struct sids {
    char **v;
    size_t n, cap;
};

static void copy_sid(void *arg, const char *key, void *value)
{
    (void)value;
    struct sids *s = arg;
    if (s->n < s->cap && (s->v[s->n] = strdup(key)))
        s->n++;
}

static void on_notification(struct link *l, json_t *msg, const struct jsonrpc_msg *m)
{
    if (strcmp(m->method, "notifications/progress") == 0) {
        /* Tokens the child sees are all strings of ours, given only with
         * requests whose client sent one: anything else is for no one. */
        json_t *token = json_object_get(m->params, "progressToken");
        json_t *progress = json_object_get(m->params, "progress");
        json_t *total = json_object_get(m->params, "total");
        json_t *message = json_object_get(m->params, "message");
        struct collect c = {.token = json_string_value(token),
                            .token_len = json_string_length(token)};
        struct call *call = NULL;
        if (c.token && json_is_number(progress)) {
            pthread_mutex_lock(&l->mu);
            table_each(l->pending, collect_pend, &c);
            if (c.by_token) {
                call = c.by_token->call;
                call_hold(call);
            }
            pthread_mutex_unlock(&l->mu);
        }
        if (!call) {
            log_event(LOG_DEBUG, l->session[0] ? l->session : NULL, "upstream_progress_dropped",
                      "progress for no request that asked for it");
            return;
        }
        /* call_progress puts the client's own token back, and drops progress
         * that does not increase. */
        call_progress(call, json_number_value(progress),
                      json_is_number(total) ? json_number_value(total) : -1,
                      json_string_value(message));
        call_release(call);
        return;
    }
    if (strcmp(m->method, "notifications/message") == 0) {
        /* Through call_log, so the session's logging/setLevel filters it. */
        struct call *call = only_call(l);
        if (!call && l->session[0])
            call = call_channel(l->session);
        if (call) {
            json_t *logger = json_object_get(m->params, "logger");
            call_log(call, json_string_value(json_object_get(m->params, "level")),
                     json_string_value(logger), json_incref(json_object_get(m->params, "data")));
            call_release(call);
        }
        return;
    }
    if (strcmp(m->method, "notifications/cancelled") == 0)
        return; /* the child gave up on a request of its own: nothing to relay */
    if (strcmp(m->method, "notifications/tools/list_changed") == 0)
        upstream_catalog_tools_changed(l->up->catalog);
    /* list_changed, resources/updated, ...: for every session it serves. */
    if (l->session[0]) {
        broadcast_one(msg, l->session);
        return;
    }
    /* Sent after the lock is let go: this reader is a fiber, and a send
     * parks it until its commit, which it must not do holding l->mu (any
     * other fiber of its loop thread that wants the link would wait for
     * it, on that very thread). */
    struct sids s = {0};
    pthread_mutex_lock(&l->mu);
    s.cap = table_count(l->sessions);
    s.v = s.cap ? calloc(s.cap, sizeof *s.v) : NULL;
    if (s.v)
        table_each(l->sessions, copy_sid, &s);
    pthread_mutex_unlock(&l->mu);
    for (size_t i = 0; i < s.n; i++) {
        broadcast_one(msg, s.v[i]);
        free(s.v[i]);
    }
    free(s.v);
}

struct relay {
    struct link *link;
    struct call *target;
    json_t *child_id, *method, *params;
};

/* Relays one of the child's requests to the client and its answer back. It
 * waits for the client, so it runs on a loop fiber of its own (loop.h): the
 * wait for the answer (fcond) and the write to the child (child_send) park
 * it, and the reader that started it goes on. */
static void relay_main(void *arg)
{
    struct relay *r = arg;
    json_t *answer = NULL;
    int rc = call_request_client(r->target, json_string_value(r->method),
                                 r->params ? json_incref(r->params) : NULL,
                                 (int)r->link->up->cfg.relay_timeout_ms, &answer);
    json_t *reply =
        rc == 0 ? jsonrpc_result(r->child_id, answer)
        : rc == 1
            ? json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", r->child_id, "error", answer)
            : jsonrpc_error(r->child_id, JSONRPC_INTERNAL_ERROR,
                            "The client did not answer (timeout, cancellation or shutdown)", NULL);
    upstream_send(r->link, reply);
    pthread_mutex_lock(&r->link->mu);
    r->link->relays--;
    pthread_mutex_unlock(&r->link->mu);
    call_release(r->target);
    upstream_link_unref(r->link);
    json_decref(r->child_id);
    json_decref(r->method);
    json_decref(r->params);
    free(r);
}

/* The client capability a request of the child's needs, or NULL. */
static const char *needed_capability(const char *method)
{
    static const char *const needs[][2] = {
        {"sampling/createMessage", "sampling"},
        {"elicitation/create", "elicitation"},
        {"roots/list", "roots"},
    };
    for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++)
        if (strcmp(method, needs[i][0]) == 0)
            return needs[i][1];
    return NULL;
}

static void on_request(struct link *l, const struct jsonrpc_msg *m)
{
    if (strcmp(m->method, "ping") == 0) {
        upstream_send(l, jsonrpc_result(m->id, json_object()));
        return;
    }
    if (upstream_mrtr_request(l, m))
        return;
    struct call *target = only_call(l);
    if (!target && l->session[0])
        target = call_channel(l->session);
    if (!target) {
        upstream_send(l, jsonrpc_error(m->id, JSONRPC_INTERNAL_ERROR,
                                       "mcpd cannot tell which client this request is for", NULL));
        return;
    }
    /* The client would not know what to do with it (checked as the
     * built-in tools check, on the capabilities of its initialize). */
    const char *cap = needed_capability(m->method);
    if (cap && !call_client_has(target, cap)) {
        call_release(target);
        char why[160];
        snprintf(why, sizeof why, "Method not found: the client did not declare the %s capability",
                 cap);
        upstream_send(l, jsonrpc_error(m->id, JSONRPC_METHOD_NOT_FOUND, why, NULL));
        return;
    }
    /* Each relay holds a fiber and a call until the client answers, so a
     * child may only have a few waiting; past that it is told so at once. */
    int max = l->up->cfg.max_pending;
    pthread_mutex_lock(&l->mu);
    int admitted = l->relays < max;
    if (admitted)
        l->relays++;
    pthread_mutex_unlock(&l->mu);
    if (!admitted) {
        call_release(target);
        metrics_refused("upstream_requests");
        char why[160];
        snprintf(why, sizeof why,
                 "mcpd refused this request: %d requests from this server are already waiting "
                 "for the client (--upstream-max-pending)",
                 max);
        upstream_send(l, jsonrpc_error(m->id, JSONRPC_UPSTREAM_TOO_MANY_PENDING, why, NULL));
        return;
    }
    struct relay *r = calloc(1, sizeof *r);
    if (r) {
        upstream_link_ref(l);
        r->link = l;
        r->target = target;
        r->child_id = json_incref(m->id);
        r->method = json_string(m->method);
        r->params = m->params ? json_incref(m->params) : NULL;
    }
    if (!r || loop_spawn(relay_main, r) != 0) {
        if (r) {
            upstream_link_unref(l);
            json_decref(r->child_id);
            json_decref(r->method);
            json_decref(r->params);
            free(r);
        }
        pthread_mutex_lock(&l->mu);
        l->relays--;
        pthread_mutex_unlock(&l->mu);
        call_release(target);
        upstream_send(
            l, jsonrpc_error(m->id, JSONRPC_INTERNAL_ERROR, "mcpd is out of resources", NULL));
    }
}

/* A message the reader dropped undecoded, with what could still be read of
 * it (child.h): a response ends its request now, a request of the child's
 * is answered with an error so the child does not wait either, and it is
 * logged. */
static void child_dropped(void *arg, const struct child_dropped *d)
{
    struct link *l = arg;
    char why[160];
    if (d->error == STDIO_FRAME_ERR_TOO_LARGE)
        snprintf(why, sizeof why, "a message larger than %zu bytes (--max-body)",
                 l->up->cfg.max_message);
    else
        snprintf(why, sizeof why, "%s", stdio_frame_error_message(d->error));
    json_t *id = d->id ? json_loadb(d->id, d->id_len, JSON_DECODE_ANY, NULL) : NULL;
    int have_id = json_is_string(id) || json_is_integer(id);
    if (have_id && !d->has_method) {
        invalid_response(l, id, why);
    } else if (have_id) {
        upstream_send(l, jsonrpc_error(id, stdio_frame_error_code(d->error), why, NULL));
        child_log(l, LOG_WARN, "upstream_bad_message", why, strlen(why));
    } else if (d->has_method) {
        child_log(l, LOG_WARN, "upstream_bad_message", why, strlen(why)); /* a notification */
    } else {
        child_warnf(l, "upstream_bad_message",
                    "%s, whose id could not be read: if it answered a request, that request "
                    "waits until the server exits",
                    why);
    }
    json_decref(id);
}

static void child_message(void *arg, const char *text, size_t len)
{
    struct link *l = arg;
    struct jsonrpc_error err;
    json_t *msg = jsonrpc_parse(text, len, &err);
    struct jsonrpc_msg m;
    if (!msg || jsonrpc_classify(msg, &m, &err) != 0) {
        /* Without a method, an id of ours makes it a response to that
         * request, however malformed the rest. */
        json_t *id = json_object_get(msg, "id");
        if (msg && !json_object_get(msg, "method") && (json_is_string(id) || json_is_integer(id))) {
            const char *why = err.message;
            if (strncmp(why, "Invalid Request: ", 17) == 0)
                why += 17;
            invalid_response(l, id, why);
        } else {
            child_log(l, LOG_WARN, "upstream_bad_message", err.message, strlen(err.message));
        }
        json_decref(msg);
        return;
    }
    if (m.kind == JSONRPC_RESPONSE)
        on_response(l, msg, &m);
    else if (m.kind == JSONRPC_NOTIFICATION)
        on_notification(l, msg, &m);
    else
        on_request(l, &m);
    json_decref(msg);
}

static void child_stderr(void *arg, const char *line, size_t len)
{
    child_log(arg, LOG_INFO, "upstream_stderr", line, len);
}

struct drain {
    struct pend **list;
    size_t n, cap;
};

static void take_pend(void *arg, const char *key, void *value)
{
    (void)key;
    struct drain *d = arg;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        struct pend **l = realloc(d->list, cap * sizeof *l);
        if (!l)
            return;
        d->list = l;
        d->cap = cap;
    }
    d->list[d->n++] = value;
}

static void child_exited(void *arg, int status)
{
    struct link *l = arg;
    char how[64];
    child_describe_exit(status, how, sizeof how);
    atomic_fetch_sub(&l->up->slots, 1);
    struct drain d = {0};
    pthread_mutex_lock(&l->mu);
    l->dead = l->child;
    l->child = NULL;
    l->state = LINK_DOWN;
    snprintf(l->last_exit, sizeof l->last_exit, "%s", how);
    table_each(l->pending, take_pend, &d);
    for (size_t i = 0; i < d.n; i++)
        table_del(l->pending, d.list[i]->key);
    fcond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_mutex_lock(&l->log_mu);
    uint64_t dropped = token_bucket_take_dropped(&l->log_budget);
    pthread_mutex_unlock(&l->log_mu);
    log_event(d.n || dropped ? LOG_WARN : LOG_INFO, l->session[0] ? l->session : NULL,
              "upstream_exited", "%s; %zu requests failed; %llu log lines dropped", how, d.n,
              (unsigned long long)dropped);
    char msg[160];
    snprintf(msg, sizeof msg, "Upstream server %s before answering", how);
    for (size_t i = 0; i < d.n; i++) {
        call_fail(d.list[i]->call, JSONRPC_INTERNAL_ERROR, msg,
                  json_pack("{s:s}", "upstream", how));
        call_release(d.list[i]->call);
        pend_end(d.list[i]);
    }
    free(d.list);
}

static const struct child_ops child_ops = {
    .on_message = child_message,
    .on_dropped = child_dropped,
    .on_stderr = child_stderr,
    .on_exit = child_exited,
};

/* A child at the cap may be stopped for another session once it has had
 * nothing to do for this long, or --upstream-idle-ms if shorter (it is
 * started again, and initialized with its client's params, on its session's
 * next request). */
#define RECLAIM_AT_CAP_MS 10000
/* How often requests look for children idle past --upstream-idle-ms. */
#define SWEEP_EVERY_MS 5000

static int take_slot(struct upstream *up)
{
    int n = atomic_load(&up->slots);
    while (n < up->cfg.max_children)
        if (atomic_compare_exchange_weak(&up->slots, &n, n + 1))
            return 1;
    return 0;
}

struct idle_pick {
    int64_t now, idle_ms;
    struct link **list;
    size_t n, cap, max;
};

/* Collects running, idle children, keeping the least recently used (called
 * with up->mu held). */
static void pick_idle(void *arg, const char *key, void *value)
{
    (void)key;
    struct idle_pick *ip = arg;
    struct link *l = value;
    pthread_mutex_lock(&l->mu);
    int idle = l->state == LINK_READY && l->child && !l->closed && table_count(l->pending) == 0 &&
               l->relays == 0 && ip->now - l->used_ms >= ip->idle_ms;
    int64_t used = l->used_ms;
    pthread_mutex_unlock(&l->mu);
    if (!idle)
        return;
    if (ip->n == ip->cap) {
        if (ip->n < ip->max) {
            size_t cap = ip->cap ? ip->cap * 2 : 8;
            struct link **nl = realloc(ip->list, cap * sizeof *nl);
            if (!nl)
                return;
            ip->list = nl;
            ip->cap = cap;
        } else {
            /* Full: replace the most recently used if this one is older. */
            size_t newest = 0;
            for (size_t i = 1; i < ip->n; i++)
                if (ip->list[i]->used_ms > ip->list[newest]->used_ms)
                    newest = i;
            if (ip->list[newest]->used_ms <= used)
                return;
            upstream_link_unref(ip->list[newest]);
            upstream_link_ref(l);
            ip->list[newest] = l;
            return;
        }
    }
    upstream_link_ref(l);
    ip->list[ip->n++] = l;
}

/* Stops up to max children idle for idle_ms or more, least recently used
 * first; their sessions live on. Returns how many were stopped. */
static size_t reclaim_idle(struct upstream *up, int64_t idle_ms, size_t max)
{
    if (up->cfg.shared)
        return 0; /* the pool is sized by --upstream-pool, not by demand */
    struct idle_pick ip = {.now = clock_mono_ms(), .idle_ms = idle_ms, .max = max};
    pthread_mutex_lock(&up->mu);
    table_each(up->links, pick_idle, &ip);
    pthread_mutex_unlock(&up->mu);
    size_t stopped = 0;
    for (size_t i = 0; i < ip.n; i++) {
        struct link *l = ip.list[i];
        pthread_mutex_lock(&l->mu);
        struct child *c = NULL;
        /* Still idle: nothing was sent to it since it was picked. */
        if (l->state == LINK_READY && table_count(l->pending) == 0 && l->relays == 0 &&
            ip.now - l->used_ms >= idle_ms) {
            c = l->child;
            l->child = NULL;
            l->state = LINK_DOWN;
        }
        pthread_mutex_unlock(&l->mu);
        if (c) {
            log_event(LOG_INFO, l->session, "upstream_reclaimed",
                      "idle for %lld ms; started again on the session's next request",
                      (long long)(ip.now - l->used_ms));
            child_stop(c, STOP_GRACE_MS);
            stopped++;
        }
        upstream_link_unref(l);
    }
    free(ip.list);
    return stopped;
}

/* At most every SWEEP_EVERY_MS, on some request's thread: children idle
 * past --upstream-idle-ms give their slot back. */
static void sweep_idle(struct upstream *up)
{
    int64_t now = clock_mono_ms(), last = atomic_load(&up->swept_ms);
    if (up->cfg.idle_ms <= 0 || now - last < SWEEP_EVERY_MS ||
        !atomic_compare_exchange_strong(&up->swept_ms, &last, now))
        return;
    reclaim_idle(up, up->cfg.idle_ms, (size_t)up->cfg.max_children);
}

/* Longest part of the child's own initialize error passed on. */
#define INIT_ERROR_MAX 300

/* The child's refusal of initialize, in its own words: what the operator
 * (and the client) may need to change. Caller frees. */
static char *init_refusal(json_t *error)
{
    const char *text = json_string_value(json_object_get(error, "message"));
    if (!text)
        text = "(no message)";
    size_t len = strlen(text);
    if (len > INIT_ERROR_MAX) {
        /* Cut on a character boundary: the message goes into JSON. */
        len = INIT_ERROR_MAX;
        while (len > 0 && ((unsigned char)text[len] & 0xC0) == 0x80)
            len--;
    }
    char *err;
    if (asprintf(&err, "Upstream server refused initialize: %.*s%s (code %lld)", (int)len, text,
                 len < strlen(text) ? "..." : "",
                 (long long)json_integer_value(json_object_get(error, "code"))) < 0)
        return NULL;
    return err;
}

/* Starts the child if it is not running and initializes it with `params`
 * (the client's initialize params). Returns NULL, or an error message the
 * caller frees. */
static char *link_ready(struct link *l, json_t *params)
{
    struct upstream *up = l->up;
    int64_t deadline = clock_mono_ms() + up->cfg.start_timeout_ms;
    pthread_mutex_lock(&l->mu);
    while (l->state == LINK_STARTING && fcond_wait_until(&l->cv, &l->mu, deadline) != ETIMEDOUT)
        ;
    if (l->state == LINK_READY) {
        pthread_mutex_unlock(&l->mu);
        return NULL;
    }
    if (l->state == LINK_STARTING) {
        pthread_mutex_unlock(&l->mu);
        return strdup("Upstream server is still starting");
    }
    if (l->closed) {
        pthread_mutex_unlock(&l->mu);
        return strdup("Session ended");
    }
    l->state = LINK_STARTING;
    struct child *dead = l->dead;
    l->dead = NULL;
    json_decref(l->init_answer);
    l->init_answer = NULL;
    l->init_invalid[0] = '\0';
    pthread_mutex_unlock(&l->mu);
    child_stop(dead, 0);

    char *err = NULL;
    struct child *c = NULL;
    int64_t at_cap = up->cfg.idle_ms > 0 && up->cfg.idle_ms < RECLAIM_AT_CAP_MS ? up->cfg.idle_ms
                                                                                : RECLAIM_AT_CAP_MS;
    if (!take_slot(up) && !(reclaim_idle(up, at_cap, 1) && take_slot(up))) {
        metrics_refused("upstream_max");
        if (asprintf(&err,
                     "Too many upstream servers running (--upstream-max %d), none of them idle",
                     up->cfg.max_children) < 0)
            err = NULL;
    } else {
        struct child_spec spec = {up->argv, up->env, up->cwd, up->cfg.max_message};
        c = child_spawn(&spec, &child_ops, l, &err);
        pthread_mutex_lock(&l->mu);
        l->starts++;
        pthread_mutex_unlock(&l->mu);
        if (!c)
            atomic_fetch_sub(&up->slots, 1);
    }
    pthread_mutex_lock(&l->mu);
    l->child = c;
    pthread_mutex_unlock(&l->mu);
    if (c) {
        /* Replays the client's own initialize, then waits for the answer. */
        json_t *init = jsonrpc_request(json_string(INIT_ID), "initialize",
                                       json_deep_copy(params ? params : json_object()));
        if (upstream_send(l, init) != 0)
            err = strdup("Upstream server closed its input");
        pthread_mutex_lock(&l->mu);
        while (!err && !l->init_answer && !l->init_invalid[0] && l->child &&
               fcond_wait_until(&l->cv, &l->mu, deadline) != ETIMEDOUT)
            ;
        json_t *answer = l->init_answer ? json_incref(l->init_answer) : NULL;
        int exited = l->child == NULL;
        char how[64], invalid[sizeof l->init_invalid];
        snprintf(how, sizeof how, "%s", l->last_exit);
        snprintf(invalid, sizeof invalid, "%s", l->init_invalid);
        pthread_mutex_unlock(&l->mu);
        if (!err && !answer && invalid[0]) {
            if (asprintf(&err, "Upstream server sent an invalid initialize response: %s", invalid) <
                0)
                err = NULL;
        } else if (!err && !answer && exited) {
            if (asprintf(&err, "Upstream server %s during initialize", how) < 0)
                err = NULL;
        } else if (!err && !answer) {
            err = strdup("Upstream server did not answer initialize in time");
        } else if (!err && !json_is_object(json_object_get(answer, "result"))) {
            err = init_refusal(json_object_get(answer, "error"));
        }
        json_decref(answer);
        if (!err)
            upstream_send(l, jsonrpc_notification("notifications/initialized", NULL));
    }
    pthread_mutex_lock(&l->mu);
    if (err) {
        struct child *gone = l->child ? l->child : l->dead;
        l->child = l->dead = NULL;
        l->state = LINK_DOWN;
        pthread_mutex_unlock(&l->mu);
        child_stop(gone, STOP_GRACE_MS);
        pthread_mutex_lock(&l->mu);
    } else {
        l->state = LINK_READY;
        l->used_ms = clock_mono_ms();
    }
    fcond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    /* Within the child's log rate: the text may be the child's own. */
    if (err)
        child_log(l, LOG_WARN, "upstream_start_failed", err, strlen(err));
    return err;
}

/* The link serving a session (a new reference), created on demand. */
static struct link *link_for(struct upstream *up, const char *sid)
{
    struct link *l = NULL;
    pthread_mutex_lock(&up->mu);
    if (up->cfg.shared) {
        unsigned h = 0;
        for (const char *p = sid; *p; p++)
            h = h * 31 + (unsigned char)*p;
        l = up->pool[h % (unsigned)up->cfg.pool];
    } else {
        l = table_get(up->links, sid);
        if (!l && (l = link_new(up, sid)) && table_put(up->links, sid, l) != 0) {
            upstream_link_unref(l);
            l = NULL;
        }
    }
    if (l)
        upstream_link_ref(l);
    pthread_mutex_unlock(&up->mu);
    if (l && up->cfg.shared) {
        pthread_mutex_lock(&l->mu);
        table_put(l->sessions, sid, l);
        pthread_mutex_unlock(&l->mu);
    }
    return l;
}

/* ---- the catalog's probe ---- */

/* The answer to one tools/list sent to a probe link (new reference), or
 * NULL when none came within --upstream-start-timeout-ms. Steals cursor. */
static json_t *probe_list(struct link *l, json_t *cursor)
{
    pthread_mutex_lock(&l->mu);
    json_decref(l->probe_answer);
    l->probe_answer = NULL;
    pthread_mutex_unlock(&l->mu);
    json_t *params = cursor ? json_pack("{s:o}", "cursor", cursor) : NULL;
    if (upstream_send(l, jsonrpc_request(json_string(PROBE_ID), "tools/list", params)) != 0)
        return NULL;
    int64_t deadline = clock_mono_ms() + l->up->cfg.start_timeout_ms;
    pthread_mutex_lock(&l->mu);
    while (!l->probe_answer && l->child && fcond_wait_until(&l->cv, &l->mu, deadline) != ETIMEDOUT)
        ;
    json_t *answer = l->probe_answer ? json_incref(l->probe_answer) : NULL;
    pthread_mutex_unlock(&l->mu);
    return answer;
}

/* Fills the catalog when it is not current: a child of its own, started
 * and initialized as a 2026-07-28 client's child is, lists its tools, and
 * is stopped. Blocks for as long as that takes (each step is bounded by
 * --upstream-start-timeout-ms); one probe at a time, and none for a while
 * after the last, so neither a broken command nor a child that keeps
 * saying its tools changed gets a child started for every request. */
static void upstream_probe(struct upstream *up)
{
    if (upstream_catalog_known(up->catalog))
        return;
    fmutex_lock(&up->probe_mu);
    int64_t now = clock_mono_ms();
    if (upstream_catalog_known(up->catalog) ||
        (up->probed_ms && now - up->probed_ms < PROBE_RETRY_MS)) {
        fmutex_unlock(&up->probe_mu);
        return;
    }
    struct link *l = link_new(up, NULL);
    json_t *params =
        json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion", PROTOCOL_STATELESS,
                  "capabilities", "clientInfo", "name", "mcpd-gateway-probe", "version", "1");
    char *err = l && params ? link_ready(l, params) : strdup("Out of memory");
    json_decref(params);
    int ok = err == NULL;
    free(err);
    json_t *cursor = NULL;
    for (int page = 0; ok && page < PROBE_PAGES; page++) {
        json_t *answer = probe_list(l, cursor);
        json_t *result = json_object_get(answer, "result");
        if (json_is_object(result)) {
            upstream_catalog_add_tools(up->catalog, result, page == 0);
            json_t *next = json_object_get(result, "nextCursor");
            cursor = json_is_string(next) ? json_incref(next) : NULL;
        } else if (answer && page == 0) {
            /* An error: a child without tools has none to check. */
            json_t *none = json_pack("{s:[]}", "tools");
            upstream_catalog_add_tools(up->catalog, none, 1);
            json_decref(none);
        }
        ok = answer != NULL;
        json_decref(answer);
        if (!cursor)
            break;
    }
    json_decref(cursor);
    if (l)
        upstream_link_stop(l);
    up->probed_ms = clock_mono_ms();
    if (!ok)
        log_event(LOG_WARN, NULL, "upstream_probe_failed",
                  "the upstream server's capabilities and tools could not be read; "
                  "server/discover and Mcp-Param checks go without them");
    fmutex_unlock(&up->probe_mu);
}

/* ---- backend_ops ---- */

/* Asked for server/discover (2025 sessions get the child's own from
 * session_open). */
static json_t *upstream_capabilities(void *self)
{
    struct upstream *up = self;
    upstream_probe(up);
    return upstream_catalog_capabilities(up->catalog);
}

static json_t *upstream_header_params(void *self, const char *method, json_t *params)
{
    struct upstream *up = self;
    const char *name = json_string_value(json_object_get(params, "name"));
    if (!method || strcmp(method, "tools/call") != 0 || !name)
        return NULL;
    upstream_probe(up);
    return upstream_catalog_header_params(up->catalog, name);
}

/* What a 2026-07-28 request needs of its client, checked before it runs. */
static json_t *upstream_requires(void *self, const char *method, json_t *params)
{
    struct upstream *up = self;
    const char *name = json_string_value(json_object_get(params, "name"));
    if (!method || strcmp(method, "tools/call") != 0 || !name)
        return NULL;
    upstream_probe(up);
    return upstream_catalog_requires(up->catalog, name);
}

static int upstream_session_open(void *self, const char *sid, json_t *params, json_t **result,
                                 char **err)
{
    /* A 2026-07-28 request's session: its child starts when it is served
     * (a resumed call goes to the child that holds it, and starts none). */
    if (protocol_is_stateless(json_string_value(json_object_get(params, "protocolVersion")))) {
        *err = NULL;
        *result = NULL;
        return 0;
    }
    struct link *l = link_for(self, sid);
    if (!l) {
        *err = strdup("Out of memory");
        return -1;
    }
    *err = link_ready(l, params);
    if (!*err) {
        pthread_mutex_lock(&l->mu);
        json_t *r = json_object_get(l->init_answer, "result");
        *result = json_pack("{s:O*, s:O*}", "capabilities", json_object_get(r, "capabilities"),
                            "serverInfo", json_object_get(r, "serverInfo"));
        json_t *instructions = json_object_get(r, "instructions");
        if (*result && json_is_string(instructions))
            json_object_set(*result, "instructions", instructions);
        pthread_mutex_unlock(&l->mu);
    }
    upstream_link_unref(l);
    return *err ? -1 : 0;
}

/* How long a closed session's tombstone is kept. */
#define TOMBSTONE_MS 60000

struct sweep_tombs {
    int64_t now;
    struct link **list;
    size_t n, cap;
};

/* Collects tombstones old enough to drop (called with up->mu held). */
static void pick_tombs(void *arg, const char *key, void *value)
{
    (void)key;
    struct sweep_tombs *sw = arg;
    struct link *l = value;
    pthread_mutex_lock(&l->mu);
    int old = l->closed && sw->now - l->closed_ms > TOMBSTONE_MS;
    pthread_mutex_unlock(&l->mu);
    if (!old)
        return;
    if (sw->n == sw->cap) {
        size_t cap = sw->cap ? sw->cap * 2 : 8;
        struct link **nl = realloc(sw->list, cap * sizeof *nl);
        if (!nl)
            return;
        sw->list = nl;
        sw->cap = cap;
    }
    sw->list[sw->n++] = l;
}

static void upstream_session_close(void *self, const char *sid)
{
    struct upstream *up = self;
    upstream_mrtr_sweep(up);
    if (up->cfg.shared) {
        struct link *l = link_for(up, sid);
        if (l) {
            pthread_mutex_lock(&l->mu);
            table_del(l->sessions, sid);
            pthread_mutex_unlock(&l->mu);
            upstream_link_unref(l);
        }
        return;
    }
    /* The link stays as a tombstone for a while, so a request racing the
     * close cannot start a new child for the ended session. */
    struct sweep_tombs sw = {.now = clock_mono_ms()};
    pthread_mutex_lock(&up->mu);
    struct link *l = table_get(up->links, sid);
    if (l)
        upstream_link_ref(l);
    table_each(up->links, pick_tombs, &sw);
    for (size_t i = 0; i < sw.n; i++)
        table_del(up->links, sw.list[i]->session);
    pthread_mutex_unlock(&up->mu);
    for (size_t i = 0; i < sw.n; i++)
        upstream_link_unref(sw.list[i]);
    free(sw.list);
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    struct child *c = l->child;
    l->child = NULL;
    l->closed = 1;
    l->closed_ms = clock_mono_ms();
    l->state = LINK_DOWN;
    pthread_mutex_unlock(&l->mu);
    child_stop(c, STOP_GRACE_MS); /* its exit fails what was still pending */
    upstream_link_unref(l);
}

/* The request as the child should see it: our id, and our progress token. */
static json_t *rewrite(struct call *c, struct pend *p, json_t *id, json_t *params)
{
    if (!params)
        params = json_deep_copy(call_params(c));
    json_t *meta = json_object_get(params, "_meta");
    json_t *token = json_object_get(meta, "progressToken");
    /* A progress token is a string or an integer; any other value asks for
     * no progress (call_progress would send none). */
    if (json_is_string(token) || json_is_integer(token)) {
        json_object_set_new(meta, "progressToken", json_string(p->token));
    } else {
        p->token[0] = '\0';
    }
    return jsonrpc_request(id, call_method(c), params);
}

void upstream_forward(struct link *l, struct call *c, json_t *params, struct upstream_hold *hold)
{
    struct pend *p = calloc(1, sizeof *p);
    if (!p) {
        json_decref(params);
        call_fail(c, JSONRPC_INTERNAL_ERROR, "Out of memory", NULL);
        if (hold)
            upstream_mrtr_release(hold);
        return;
    }
    p->hold = hold;
    pthread_mutex_lock(&l->mu);
    uint64_t n = ++l->next_id;
    l->used_ms = clock_mono_ms();
    pthread_mutex_unlock(&l->mu);
    char id[32];
    snprintf(id, sizeof id, "mcpd-%llu", (unsigned long long)n);
    snprintf(p->token, sizeof p->token, "mcpd-progress-%llu", (unsigned long long)n);
    json_t *jid = json_string(id);
    jsonrpc_id_key(jid, p->key, sizeof p->key);
    json_t *req = rewrite(c, p, jid, params);
    call_hold(c);
    p->call = c;
    /* Once p is in the table, the child's exit may fail and free it. */
    char key[sizeof p->key];
    memcpy(key, p->key, sizeof key);
    pthread_mutex_lock(&l->mu);
    int ok = l->state == LINK_READY && table_put(l->pending, key, p) == 0;
    int down = l->state != LINK_READY;
    pthread_mutex_unlock(&l->mu);
    /* Its child was reclaimed as idle between link_ready and here: start
     * it again, once (never for a held call: it lived in that child). */
    char *err = NULL;
    if (!ok && down && !hold && !(err = link_ready(l, call_client_init_params(c)))) {
        pthread_mutex_lock(&l->mu);
        ok = l->state == LINK_READY && table_put(l->pending, key, p) == 0;
        pthread_mutex_unlock(&l->mu);
    }
    free(err);
    if (!ok || upstream_send(l, req) != 0) {
        if (!ok)
            json_decref(req);
        pthread_mutex_lock(&l->mu);
        struct pend *still = ok ? table_del(l->pending, key) : p;
        pthread_mutex_unlock(&l->mu);
        if (still) {
            call_fail(c, JSONRPC_INTERNAL_ERROR, "Upstream server is not running", NULL);
            call_release(c);
            pend_end(still);
        }
    }
}

static void upstream_handle(void *self, struct call *c)
{
    struct upstream *up = self;
    sweep_idle(up);
    upstream_mrtr_sweep(up);
    if (upstream_stateless_call(c) && upstream_mrtr_resume(up, c))
        return;
    struct link *l = link_for(up, call_session_id(c));
    char *err = l ? link_ready(l, call_client_init_params(c)) : strdup("Out of memory");
    if (err) {
        call_fail(c, JSONRPC_INTERNAL_ERROR, err, NULL);
        free(err);
        upstream_link_unref(l);
        return;
    }
    upstream_forward(l, c, NULL, NULL);
    upstream_link_unref(l);
}

static void upstream_notify(void *self, const char *sid, json_t *msg)
{
    struct upstream *up = self;
    const char *method = json_string_value(json_object_get(msg, "method"));
    struct link *l = link_for(up, sid);
    if (!l || !method) {
        upstream_link_unref(l);
        return;
    }
    if (strcmp(method, "notifications/cancelled") == 0) {
        /* Tell the child, in its own ids, and end the call now: a cancelled
         * request gets no answer, so nothing else would end it. */
        json_t *params = json_object_get(msg, "params");
        struct collect c = {.client_id = json_object_get(params, "requestId")};
        pthread_mutex_lock(&l->mu);
        table_each(l->pending, collect_pend, &c);
        struct pend *p = c.by_client_id;
        if (p)
            table_del(l->pending, p->key);
        pthread_mutex_unlock(&l->mu);
        if (p) {
            json_t *id = json_loads(p->key, JSON_DECODE_ANY, NULL);
            json_t *fwd = json_pack("{s:o}", "requestId", id ? id : json_null());
            json_t *reason = json_object_get(params, "reason");
            if (reason)
                json_object_set(fwd, "reason", reason);
            upstream_send(l, jsonrpc_notification("notifications/cancelled", fwd));
            call_fail(p->call, JSONRPC_REQUEST_CANCELLED, "Request cancelled", NULL);
            call_release(p->call);
            pend_end(p);
        }
    } else {
        upstream_send(l, json_incref(msg));
    }
    upstream_link_unref(l);
}

static void stop_link(void *arg, const char *key, void *value)
{
    (void)arg;
    (void)key;
    struct link *l = value;
    pthread_mutex_lock(&l->mu);
    struct child *c = l->child;
    l->child = NULL;
    pthread_mutex_unlock(&l->mu);
    child_stop(c, STOP_GRACE_MS);
    upstream_link_unref(l);
}

static void upstream_destroy(void *self)
{
    struct upstream *up = self;
    if (!up)
        return;
    upstream_mrtr_destroy(up);
    if (up->links) {
        table_each(up->links, stop_link, NULL);
        table_free(up->links);
    }
    for (int i = 0; up->pool && i < up->cfg.pool; i++)
        if (up->pool[i])
            stop_link(NULL, NULL, up->pool[i]);
    free(up->pool);
    for (char **a = up->argv; a && *a; a++)
        free(*a);
    free(up->argv);
    for (char **e = up->env; e && *e; e++)
        free(*e);
    free(up->env);
    free(up->cwd);
    upstream_catalog_free(up->catalog);
    table_free(up->holds);
    pthread_cond_destroy(&up->retired);
    pthread_mutex_destroy(&up->hold_mu);
    fmutex_destroy(&up->probe_mu);
    pthread_mutex_destroy(&up->mu);
    free(up);
}

static int upstream_may_block(void *self, const char *method, json_t *params)
{
    (void)self;
    (void)method;
    (void)params;
    return 1; /* everything waits on the child */
}

/* A per-session child lives in one process; a shared pool serves any. */
static int upstream_session_bound(void *self)
{
    struct upstream *u = self;
    return !u->cfg.shared;
}

static const struct backend_ops ops = {
    .name = "upstream",
    .capabilities = upstream_capabilities,
    .session_open = upstream_session_open,
    .session_close = upstream_session_close,
    .handle = upstream_handle,
    .may_block = upstream_may_block,
    .notify = upstream_notify,
    .header_params = upstream_header_params,
    .requires = upstream_requires,
    .session_bound = upstream_session_bound,
    .destroy = upstream_destroy,
};

const struct backend_ops *upstream_backend_ops(void)
{
    return &ops;
}

static char **copy_strv(char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    char **out = calloc(n + 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        if (!(out[i] = strdup(v[i]))) {
            for (size_t j = 0; j < i; j++)
                free(out[j]);
            free(out);
            return NULL;
        }
    return out;
}

void *upstream_backend_new(const struct upstream_config *cfg, char **err)
{
    *err = NULL;
    struct upstream *up = calloc(1, sizeof *up);
    if (!up || !cfg->argv || !cfg->argv[0]) {
        *err = strdup(up ? "the upstream command is empty" : "out of memory");
        free(up);
        return NULL;
    }
    up->cfg = *cfg;
    if (up->cfg.pool < 1)
        up->cfg.pool = 1;
    pthread_mutex_init(&up->mu, NULL);
    fmutex_init(&up->probe_mu);
    pthread_mutex_init(&up->hold_mu, NULL);
    pthread_cond_init(&up->retired, NULL);
    up->catalog = upstream_catalog_new();
    up->holds = table_new();
    up->argv = copy_strv(cfg->argv);
    up->env = copy_strv(cfg->env);
    up->cwd = cfg->cwd ? strdup(cfg->cwd) : NULL;
    up->cfg.argv = up->argv;
    up->cfg.env = up->env;
    up->cfg.cwd = up->cwd;
    up->links = table_new();
    if (cfg->shared) {
        up->pool = calloc((size_t)up->cfg.pool, sizeof *up->pool);
        for (int i = 0; up->pool && i < up->cfg.pool; i++)
            up->pool[i] = link_new(up, NULL);
    }
    if (!up->argv || !up->env || !up->links || !up->catalog || !up->holds ||
        (cfg->shared && !up->pool)) {
        upstream_destroy(up);
        *err = strdup("out of memory");
        return NULL;
    }
    return up;
}
