/* call — see call.h and call_life.h. */
#include "call.h"
#include "call_life.h"
#include "clock.h"
#include "fcond.h"
#include "jsonrpc.h"
#include "log.h"
#include "protocol.h"
#include "request_state.h"
#include "session.h"
#include "stream.h"
#include "strcopy.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct call {
    _Atomic int refs;
    struct session *session;
    struct stream *stream;
    json_t *request;
    json_t *params; /* own reference: the request's, or an empty object */
    char key[96];
    pthread_mutex_t mu;
    struct fcond cv; /* cancellation or the client's answer */
    int ended;
    int channel;                /* a session channel: no request, never ends */
    enum call_cancel cancelled; /* 0 when not cancelled */
    /* The client's answers to this call's server→client requests, by the
     * jsonrpc_id_key of each request: several may be in flight at once. */
    json_t *answers;
    double last_progress;
    /* The requestState this call claimed (call_state_open, on the
     * handler's thread before it ends the call), finished with its final
     * message; nonce empty when none. */
    struct request_state_claim state_claim;
};

struct call *call_new(struct session *s, struct stream *stream, json_t *request, const char *key,
                      enum session_track_rc *why)
{
    *why = SESSION_TRACK_NOMEM;
    struct call *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->refs = 1;
    strcopy(c->key, sizeof c->key, key);
    pthread_mutex_init(&c->mu, NULL);
    fcond_init(&c->cv);
    json_t *params = json_object_get(request, "params");
    c->params = json_is_object(params) ? json_incref(params) : json_object();
    c->last_progress = -1e300;
    c->answers = json_object();
    enum session_track_rc tracked = !c->answers ? SESSION_TRACK_NOMEM
                                    : key       ? session_track(s, key, c)
                                                : SESSION_TRACK_OK;
    if (tracked != SESSION_TRACK_OK) {
        *why = tracked;
        json_decref(c->answers);
        json_decref(c->params);
        pthread_mutex_destroy(&c->mu);
        fcond_destroy(&c->cv);
        free(c);
        return NULL;
    }
    session_ref(s);
    stream_ref(stream);
    c->session = s;
    c->stream = stream;
    c->request = json_incref(request);
    return c;
}

void call_ref(struct call *c)
{
    atomic_fetch_add(&c->refs, 1);
}

void call_unref(struct call *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    json_decref(c->answers);
    json_decref(c->params);
    json_decref(c->request);
    stream_unref(c->stream);
    session_unref(c->session);
    pthread_mutex_destroy(&c->mu);
    fcond_destroy(&c->cv);
    free(c);
}

const char *call_method(const struct call *c)
{
    return json_string_value(json_object_get(c->request, "method"));
}

json_t *call_params(const struct call *c)
{
    return c->params;
}

json_t *call_id(const struct call *c)
{
    return json_object_get(c->request, "id");
}

const char *call_session_id(const struct call *c)
{
    return session_id(c->session);
}

static json_t *no_capabilities;
static pthread_once_t no_capabilities_once = PTHREAD_ONCE_INIT;

static void make_no_capabilities(void)
{
    no_capabilities = json_object();
}

json_t *call_client_init_params(const struct call *c)
{
    return session_init_params(c->session);
}

json_t *call_client_capabilities(const struct call *c)
{
    json_t *caps = session_client_capabilities(c->session);
    if (caps)
        return caps;
    pthread_once(&no_capabilities_once, make_no_capabilities);
    return no_capabilities;
}

int call_client_has(const struct call *c, const char *capability)
{
    return json_object_get(call_client_capabilities(c), capability) != NULL;
}

int call_cancelled(const struct call *c)
{
    struct call *m = (struct call *)c;
    pthread_mutex_lock(&m->mu);
    int v = m->cancelled != 0;
    pthread_mutex_unlock(&m->mu);
    return v;
}

static int call_ended(struct call *c)
{
    pthread_mutex_lock(&c->mu);
    int v = c->ended;
    pthread_mutex_unlock(&c->mu);
    return v;
}

void call_cancel(struct call *c, enum call_cancel why)
{
    pthread_mutex_lock(&c->mu);
    if (!c->cancelled)
        c->cancelled = why;
    fcond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void call_deliver_answer(struct call *c, json_t *response)
{
    char key[96];
    if (jsonrpc_id_key(json_object_get(response, "id"), key, sizeof key) != 0)
        return;
    pthread_mutex_lock(&c->mu);
    if (!json_object_get(c->answers, key))
        json_object_set(c->answers, key, response);
    fcond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Appends text to the call's stream, charging it to the session. Over
 * the session's cap, a final message becomes the storage error (allowed
 * past the cap, so the client is not left waiting); a non-final one is
 * refused and returns 1, and the caller ends the call. */
static int append(struct call *c, json_t *msg, int final)
{
    enum stream_state end = !final                          ? STREAM_ACTIVE
                            : json_object_get(msg, "error") ? STREAM_ERROR
                                                            : STREAM_FINISHED;
    size_t len;
    char *text = jsonrpc_dump(msg, &len);
    json_decref(msg);
    if (!text) {
        if (final)
            stream_end(c->stream, STREAM_ERROR);
        return -1;
    }
    if (session_charge(c->session, len) != 0) {
        free(text);
        log_event(LOG_WARN, session_id(c->session), "session_storage_full",
                  "stream %s ended: per-session storage cap reached", stream_id(c->stream));
        if (!final)
            return 1;
        json_t *err =
            jsonrpc_error(call_id(c), JSONRPC_SERVER_ERROR, "Session storage limit exceeded", NULL);
        text = jsonrpc_dump(err, &len);
        json_decref(err);
        end = STREAM_ERROR;
        if (!text) {
            stream_end(c->stream, STREAM_ERROR);
            return -1;
        }
        session_charge_always(c->session, len);
    }
    int64_t seq = stream_append(c->stream, text, len, end);
    free(text);
    if (seq < 0 && final)
        stream_end(c->stream, STREAM_ERROR);
    session_touch(c->session);
    return seq < 0 ? -1 : 0;
}

/* Moves the call to ended; 1 if this caller did it (and must finish it). */
static int take_end(struct call *c, enum call_cancel *why)
{
    pthread_mutex_lock(&c->mu);
    int mine = !c->ended;
    c->ended = 1;
    if (why)
        *why = c->cancelled;
    pthread_mutex_unlock(&c->mu);
    return mine;
}

/* Once the call has taken its end, before its final message is stored:
 * a client that reuses the id as soon as it reads that message must not
 * find it still in flight. */
static void forget(struct call *c)
{
    if (c->key[0])
        session_untrack(c->session, c->key);
}

/* The final message (stolen). A cancelled call ends its stream without one
 * (the spec says not to respond), and a call cut short by shutdown ends
 * with an error so the client is never left waiting. */
static int emit_final(struct call *c, json_t *msg)
{
    enum call_cancel why;
    if (c->channel || !take_end(c, &why)) {
        json_decref(msg);
        return -1;
    }
    forget(c);
    /* Before the final message is stored: a retry sent as soon as the
     * client reads it finds the use recorded. A call that ends without a
     * result gives its requestState back. */
    int answered = why != CALL_CANCEL_CLIENT && why != CALL_CANCEL_SESSION_END;
    request_state_finish(&c->state_claim, answered ? json_object_get(msg, "result") : NULL);
    int rc = 0;
    if (!answered) {
        json_decref(msg);
        stream_end(c->stream, STREAM_ERROR);
    } else {
        if (why == CALL_CANCEL_SHUTDOWN && json_object_get(msg, "error")) {
            json_decref(msg);
            msg = jsonrpc_error(call_id(c), JSONRPC_INTERNAL_ERROR,
                                "Request interrupted by server shutdown; retry it", NULL);
        }
        protocol_adapt_final(session_protocol(c->session), call_method(c), msg);
        rc = append(c, msg, 1);
    }
    call_unref(c); /* the reference the call held on itself since call_new */
    return rc;
}

/* A message before the end (stolen). */
static int emit(struct call *c, json_t *msg)
{
    if (call_ended(c)) {
        json_decref(msg);
        return -1;
    }
    int rc = append(c, msg, 0);
    if (rc == 1) {
        /* Over the cap: end the request now, with the storage error. */
        if (!c->channel && take_end(c, NULL)) {
            forget(c);
            request_state_finish(&c->state_claim, NULL);
            append(c,
                   jsonrpc_error(call_id(c), JSONRPC_SERVER_ERROR, "Session storage limit exceeded",
                                 NULL),
                   1);
            call_unref(c);
        }
        return -1;
    }
    return rc;
}

int call_send(struct call *c, json_t *msg)
{
    return emit(c, msg);
}

void call_hold(struct call *c)
{
    call_ref(c);
}

void call_release(struct call *c)
{
    call_unref(c);
}

struct call *call_channel(const char *sid)
{
    struct session *s = session_find(sid);
    struct stream *st = s ? session_standalone(s) : NULL;
    struct call *c = NULL;
    if (st) {
        json_t *req = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", "mcpd/channel");
        enum session_track_rc why;
        c = call_new(s, st, req, NULL, &why);
        json_decref(req);
        if (c)
            c->channel = 1;
    }
    stream_unref(st);
    session_unref(s);
    return c;
}

int call_reply(struct call *c, json_t *result)
{
    if (c->channel) {
        json_decref(result);
        return -1;
    }
    return emit_final(c, jsonrpc_result(call_id(c), result));
}

int call_fail(struct call *c, int code, const char *message, json_t *data)
{
    if (c->channel) {
        json_decref(data);
        return -1;
    }
    return emit_final(c, jsonrpc_error(call_id(c), code, message, data));
}

/* Whole numbers go out as JSON integers: "progress":3, not 3.0. */
static json_t *number(double v)
{
    if (v == (double)(json_int_t)v)
        return json_integer((json_int_t)v);
    return json_real(v);
}

int call_progress(struct call *c, double progress, double total, const char *message)
{
    json_t *meta = json_object_get(c->params, "_meta");
    json_t *token = json_object_get(meta, "progressToken");
    if (!json_is_string(token) && !json_is_integer(token))
        return 0;
    pthread_mutex_lock(&c->mu);
    /* The spec requires progress to increase; drop anything else. */
    int ok = progress > c->last_progress;
    if (ok)
        c->last_progress = progress;
    pthread_mutex_unlock(&c->mu);
    if (!ok)
        return 0;
    json_t *p = json_pack("{s:O, s:o}", "progressToken", token, "progress", number(progress));
    if (total >= 0)
        json_object_set_new(p, "total", number(total));
    if (message)
        json_object_set_new(p, "message", json_string(message));
    return emit(c, jsonrpc_notification("notifications/progress", p));
}

int call_log(struct call *c, const char *level, const char *logger, json_t *data)
{
    int lv = protocol_log_level(level);
    if (lv < 0 || lv < session_log_level(c->session)) {
        json_decref(data);
        return 0;
    }
    json_t *p = json_pack("{s:s, s:o}", "level", level, "data", data ? data : json_null());
    if (logger)
        json_object_set_new(p, "logger", json_string(logger));
    return emit(c, jsonrpc_notification("notifications/message", p));
}

int call_request_client(struct call *c, const char *method, json_t *params, int timeout_ms,
                        json_t **result)
{
    *result = NULL;
    char out_id[64], key[96];
    session_next_request_id(c->session, out_id, sizeof out_id);
    json_t *id = json_string(out_id);
    jsonrpc_id_key(id, key, sizeof key);

    call_ref(c); /* the pending table's reference */
    if (session_pending_add(c->session, key, c) != 0) {
        call_unref(c);
        json_decref(id);
        json_decref(params);
        return -1;
    }
    if (emit(c, jsonrpc_request(id, method, params)) != 0) {
        if (session_pending_take(c->session, key))
            call_unref(c);
        return -1;
    }
    int64_t deadline = clock_mono_ms() + timeout_ms;
    pthread_mutex_lock(&c->mu);
    while (!json_object_get(c->answers, key) && !c->cancelled &&
           fcond_wait_until(&c->cv, &c->mu, deadline) != ETIMEDOUT)
        ;
    json_t *answer = json_incref(json_object_get(c->answers, key));
    json_object_del(c->answers, key);
    pthread_mutex_unlock(&c->mu);
    if (session_pending_take(c->session, key))
        call_unref(c); /* nobody answered: drop the table's reference */
    if (!answer)
        return -1;
    json_t *res = json_object_get(answer, "result");
    int rc = res ? 0 : 1;
    *result = json_incref(res ? res : json_object_get(answer, "error"));
    json_decref(answer);
    return rc;
}

int call_request_client_all(struct call *c, json_t *requests, int timeout_ms, json_t **answers)
{
    *answers = NULL;
    size_t n = json_object_size(requests), i = 0;
    char(*keys)[96] = calloc(n ? n : 1, sizeof *keys);
    const char **names = calloc(n ? n : 1, sizeof *names);
    if (!keys || !names) {
        free(keys);
        free(names);
        return -1;
    }
    const char *name;
    json_t *req;
    int rc = 0;
    json_object_foreach(requests, name, req)
    {
        char out_id[64];
        session_next_request_id(c->session, out_id, sizeof out_id);
        json_t *id = json_string(out_id);
        jsonrpc_id_key(id, keys[i], sizeof keys[i]);
        names[i] = name;
        call_ref(c); /* the pending table's */
        if (session_pending_add(c->session, keys[i], c) != 0) {
            call_unref(c);
            json_decref(id);
            keys[i][0] = '\0';
            rc = -1;
            break;
        }
        i++;
        json_t *params = json_object_get(req, "params");
        if (emit(c, jsonrpc_request(id, json_string_value(json_object_get(req, "method")),
                                    params ? json_incref(params) : json_object())) != 0) {
            rc = -1;
            break;
        }
    }
    size_t sent = i;
    int64_t deadline = clock_mono_ms() + timeout_ms;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        size_t got = 0;
        for (i = 0; i < sent; i++)
            got += json_object_get(c->answers, keys[i]) != NULL;
        if (rc != 0 || got == sent || c->cancelled ||
            fcond_wait_until(&c->cv, &c->mu, deadline) == ETIMEDOUT)
            break;
    }
    json_t *out = json_object();
    for (i = 0; i < sent; i++) {
        json_t *a = json_object_get(c->answers, keys[i]);
        json_t *res = json_object_get(a, "result");
        if (res)
            json_object_set(out, names[i], res);
        json_object_del(c->answers, keys[i]);
    }
    pthread_mutex_unlock(&c->mu);
    for (i = 0; i < sent; i++)
        if (session_pending_take(c->session, keys[i]))
            call_unref(c);
    if (rc == 0 && json_object_size(out) == sent)
        *answers = out;
    else
        json_decref(out);
    free(keys);
    free(names);
    return *answers ? 0 : -1;
}

int call_sleep(struct call *c, int ms)
{
    int64_t deadline = clock_mono_ms() + ms;
    pthread_mutex_lock(&c->mu);
    while (!c->cancelled && fcond_wait_until(&c->cv, &c->mu, deadline) != ETIMEDOUT)
        ;
    int cancelled = c->cancelled != 0;
    pthread_mutex_unlock(&c->mu);
    return cancelled;
}

void call_detach_readers(struct call *c)
{
    stream_detach_readers(c->stream);
}

char *call_state_seal(struct call *c, json_t *asked, json_t *data)
{
    return request_state_seal(session_principal(c->session), call_method(c), call_params(c), asked,
                              data, REQUEST_STATE_TTL_MS);
}

int call_state_open(struct call *c, const char *state, json_t **data, json_t **answers,
                    const char **why)
{
    *data = *answers = NULL;
    struct request_state s;
    if (request_state_open(state, session_principal(c->session), call_method(c), call_params(c), &s,
                           why) != 0)
        return -1;
    json_t *outcome = NULL;
    int rc = -1;
    if (c->state_claim.nonce[0])
        *why = "Internal error: a call opens one requestState";
    else
        rc = request_state_claim(&s, &c->state_claim, &outcome, why);
    if (rc == 0) {
        *data = json_incref(s.data);
        *answers = json_incref(s.answers);
    } else if (rc == 1)
        *data = outcome;
    request_state_clear(&s);
    return rc;
}

int call_on_stream(const struct call *c, const struct stream *st)
{
    return c->stream == st;
}
