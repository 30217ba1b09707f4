/* http_remote — see http_remote.h; the parts it shares with http_xfer.c,
 * http_reinit.c and http_poll.c are in http_remote_int.h. This file holds
 * the requests: sending, pairing responses, and what each completed
 * transfer means for them. */
#include "http_remote_int.h"

#include "bridge_log.h"
#include "connection.h"
#include "modern.h"
#include "oauth.h"
#include "oauth_util.h"
#include "remote_error.h"
#include "rpc_message.h"
#include "session.h"
#include "sse_parser.h"

#include "clock.h"

#define MAX_AUTH_TRIES 2 /* sign-ins for one request: a 401, then a 403 step-up */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------ util */

char *http_remote_dup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

void http_remote_emit(struct http_remote *r, const char *json, size_t len)
{
    r->sink.emit(r->sink.ud, json, len);
}

static void emit_json(struct http_remote *r, const json_t *m)
{
    char *s = json_dumps(m, JSON_COMPACT);
    if (s) {
        http_remote_emit(r, s, strlen(s));
        free(s);
    }
}

/* ------------------------------------------------------------ requests */

static struct req *req_find(struct http_remote *r, const char *key)
{
    for (struct req *q = r->reqs; q; q = q->next) {
        if (!q->answered && strcmp(q->key, key) == 0)
            return q;
    }
    return NULL;
}

void http_remote_req_free(struct http_remote *r, struct req *q)
{
    if (q->prev)
        q->prev->next = q->next;
    else
        r->reqs = q->next;
    if (q->next)
        q->next->prev = q->prev;
    else
        r->reqs_tail = q->prev;
    if (!q->answered)
        r->n_pending--;
    json_decref(q->id);
    json_decref(q->modern);
    free(q->key);
    free(q->body);
    free(q->last_event_id);
    free(q->stream_id);
    free(q);
}

/* Answers q with a bridge error (unless it was answered meanwhile). */
void http_remote_fail(struct http_remote *r, struct req *q, const char *message)
{
    if (q->answered)
        return;
    bridge_log(LOG_WARN, "request_failed", "%s id=%s: %s", q->method, q->key, message);
    char *reply = rpc_error_reply(q->id, RPC_BRIDGE_ERROR, message);
    q->answered = 1;
    r->n_pending--;
    if (reply) {
        http_remote_emit(r, reply, strlen(reply));
        free(reply);
    }
}

/* ----------------------------------------------------------- incoming */

void http_remote_incoming(struct http_remote *r, struct xfer *xf, const json_t *m, const char *raw,
                          size_t raw_len);

/* A legacy server's refusal of a 2026-07-28 probe (server/discover):
 * answers q with "method not found", which a dual-era client takes as its
 * cue to fall back to initialize. status is the HTTP status, or 0 when m
 * (an error response) says why. Returns 1 when q was answered so. */
static int answer_legacy(struct http_remote *r, struct req *q, long status)
{
    char msg[MSG_CAP];
    if (status)
        snprintf(msg, sizeof msg,
                 "Method not found: %s does not serve MCP 2026-07-28 (HTTP %ld to "
                 "server/discover); use initialize",
                 r->host, status);
    else
        snprintf(msg, sizeof msg,
                 "Method not found: %s does not serve MCP 2026-07-28; use initialize", r->host);
    bridge_log(LOG_INFO, "legacy_remote", "server/discover id=%s: %s", q->key, msg);
    char *reply = rpc_error_reply(q->id, RPC_METHOD_NOT_FOUND, msg);
    q->answered = 1;
    r->n_pending--;
    if (reply) {
        http_remote_emit(r, reply, strlen(reply));
        free(reply);
    }
    return 1;
}

/* m answers the probe q: an error that is not a modern server's becomes
 * the legacy "method not found". */
static int refuse_probe(struct http_remote *r, struct req *q, const json_t *m)
{
    json_t *error = json_object_get(m, "error");
    if (!error || modern_error_is_modern(error))
        return 0;
    return answer_legacy(r, q, 0);
}

/* A 2026-07-28 result without resultType is complete: the revision defines
 * a missing one so. The bridge says it, for a client that insists (the SDK
 * v2 client refuses such a result). 1 when it emitted m so amended. */
static int complete_by_default(struct http_remote *r, const json_t *m)
{
    const json_t *res = json_object_get(m, "result");
    if (!json_is_object(res) || json_object_get(res, "resultType"))
        return 0;
    json_t *copy = json_deep_copy(m);
    if (!copy)
        return 0;
    json_object_set_new(json_object_get(copy, "result"), "resultType", json_string("complete"));
    emit_json(r, copy);
    json_decref(copy);
    return 1;
}

/* One JSON-RPC message from the server (from xf). */
void http_remote_incoming(struct http_remote *r, struct xfer *xf, const json_t *m, const char *raw,
                          size_t raw_len)
{
    enum rpc_kind k = rpc_classify(m);
    if (k == RPC_RESPONSE) {
        char *key = rpc_id_key(json_object_get(m, "id"));
        if (!key)
            return;
        if (http_tools_is_reply(r, key)) {
            free(key);
            http_tools_result(r, m);
            return;
        }
        if (session_rebuild_is_reply(&r->s, key)) {
            http_reinit_result(r, xf, m);
            free(key);
            return;
        }
        if (xf->kind == XF_POLL && strcmp(key, xf->poll_key) == 0) {
            free(key);
            http_poll_result(r, xf, m);
            return;
        }
        struct req *q = req_find(r, key);
        free(key);
        if (!q) {
            bridge_log(LOG_DEBUG, "response_dropped", "a response to no pending request");
            return;
        }
        if (q->streamed && !q->stream_id && http_poll_handle(q, m))
            return; /* the handle is the bridge's business, not the client's */
        if (q->probe && refuse_probe(r, q, m))
            return;
        if (q->modern && strcmp(q->method, "tools/list") == 0) {
            json_t *kept = http_tools_relay(r, m);
            if (kept) {
                q->answered = 1;
                r->n_pending--;
                emit_json(r, kept);
                json_decref(kept);
                return;
            }
        }
        if (q->modern && complete_by_default(r, m)) {
            q->answered = 1;
            r->n_pending--;
            return;
        }
        if (q->is_initialize) {
            const char *v =
                json_string_value(json_object_get(json_object_get(m, "result"), "protocolVersion"));
            if (v)
                session_set_version(&r->s, v);
            r->s.state = SESSION_READY;
        }
        q->answered = 1;
        r->n_pending--;
    } else if (k == RPC_INVALID) {
        bridge_log(LOG_WARN, "bad_server_message",
                   "the server sent a message that is not "
                   "JSON-RPC; dropped");
        return;
    }
    if (raw && !memchr(raw, '\n', raw_len) && !memchr(raw, '\r', raw_len))
        http_remote_emit(r, raw, raw_len);
    else
        emit_json(r, m);
}

/* A JSON text from the server: one message or a batch. Returns -1 when it
 * is not JSON. */
int http_remote_incoming_text(struct http_remote *r, struct xfer *xf, const char *text, size_t len)
{
    json_error_t err;
    json_t *m = json_loadb(text, len, 0, &err);
    if (!m) {
        bridge_log(LOG_WARN, "bad_server_json", "%s", err.text);
        return -1;
    }
    if (json_is_array(m)) {
        size_t i;
        json_t *e;
        json_array_foreach(m, i, e) http_remote_incoming(r, xf, e, NULL, 0);
    } else {
        http_remote_incoming(r, xf, m, text, len);
    }
    json_decref(m);
    return 0;
}

/* ---------------------------------------------------------- transfers */

/* Sends q's body (again). */
void http_remote_post_req(struct http_remote *r, struct req *q)
{
    /* a new POST of a streamed request gets a new stream */
    free(q->stream_id);
    q->stream_id = NULL;
    struct xfer *xf = http_xfer_new(r, XF_POST, "POST", q->body, q->body_len, NULL, q->modern);
    if (!xf) {
        http_remote_fail(r, q, "mcp-bridge: out of memory");
        return;
    }
    xf->req = q;
    q->xf = xf;
    q->waiting = 0;
    http_xfer_start(r, xf);
}

static void resume_req(struct http_remote *r, struct req *q)
{
    if (q->stream_id) {
        http_poll_next(r, q);
        return;
    }
    q->resume_at = 0;
    struct xfer *xf = http_xfer_new(r, XF_RESUME, "GET", NULL, 0, q->last_event_id, NULL);
    if (!xf) {
        http_remote_fail(r, q, "mcp-bridge: out of memory");
        return;
    }
    xf->req = q;
    q->xf = xf;
    http_xfer_start(r, xf);
}

struct xfer *http_remote_post_other(struct http_remote *r, enum xfer_kind kind, const char *body,
                                    size_t len, const char *method, const json_t *modern)
{
    char *copy = http_remote_dup(body, len);
    struct xfer *xf = copy ? http_xfer_new(r, kind, "POST", copy, len, NULL, modern) : NULL;
    if (!xf) {
        free(copy);
        bridge_log(LOG_ERROR, "out_of_memory", "dropping %s", method);
        return NULL;
    }
    xf->body = copy;
    snprintf(xf->method, sizeof xf->method, "%s", method);
    http_xfer_start(r, xf);
    return xf;
}

/* A client notification or response goes out, unless the session is
 * opening (then it waits its turn; a 2026-07-28 one, modern, needs no
 * session and never waits). */
static void post_message(struct http_remote *r, const char *body, size_t len, const char *method,
                         const json_t *modern)
{
    if (!modern && http_remote_gated(r)) {
        struct parked *p = calloc(1, sizeof *p);
        if (p && (p->body = http_remote_dup(body, len))) {
            p->len = len;
            snprintf(p->method, sizeof p->method, "%s", method);
            if (r->parked_tail)
                r->parked_tail->next = p;
            else
                r->parked = p;
            r->parked_tail = p;
        } else {
            free(p);
            bridge_log(LOG_ERROR, "out_of_memory", "dropping %s", method);
        }
        return;
    }
    struct xfer *xf = http_remote_post_other(r, XF_POST, body, len, method, modern);
    if (xf && strcmp(method, "notifications/initialized") == 0) {
        xf->opening = 1;
        r->hold++;
    }
}

/* The session is open (or re-opened): what waited goes out, notifications
 * first, in the order the client sent them. */
void http_remote_release(struct http_remote *r)
{
    while (r->parked && !http_remote_gated(r)) {
        struct parked *p = r->parked;
        r->parked = p->next;
        if (!r->parked)
            r->parked_tail = NULL;
        post_message(r, p->body, p->len, p->method, NULL);
        free(p->body);
        free(p);
    }
    if (http_remote_gated(r))
        return;
    for (struct req *q = r->reqs; q; q = q->next) {
        if (q->waiting && !q->answered && !q->waiting_tools)
            http_remote_post_req(r, q);
        q->waiting = 0;
    }
}

int http_remote_gated(struct http_remote *r)
{
    if (r->legacy && !r->legacy_endpoint) {
        http_legacy_open(r);
        return 1;
    }
    return r->hold || r->s.state == SESSION_REINIT;
}

void http_remote_open_listen(struct http_remote *r)
{
    if (r->legacy)
        return; /* the legacy stream is the only one */
    r->listen_at = 0;
    for (struct xfer *xf = r->xfers; xf; xf = xf->next) {
        if (xf->kind == XF_LISTEN)
            return;
    }
    struct xfer *xf = http_xfer_new(r, XF_LISTEN, "GET", NULL, 0, r->listen_last_id, NULL);
    if (xf)
        http_xfer_start(r, xf);
}

/* ------------------------------------------------------ re-initialize */

/* --------------------------------------------------------- completion */

void http_remote_describe_failure(struct http_remote *r, struct xfer *xf, CURLcode cc, char *msg)
{
    if (xf->timed_out)
        remote_error_silent(msg, MSG_CAP, r->host, r->o->response_timeout_ms, xf->headers_done);
    else if (xf->too_big)
        snprintf(msg, MSG_CAP, "mcp-bridge: %s sent a message larger than %u bytes", r->host,
                 MAX_BODY);
    else if (cc == CURLE_OK && xf->status / 100 == 2)
        snprintf(msg, MSG_CAP, "mcp-bridge: %s closed the response stream before answering",
                 r->host);
    else if (cc != CURLE_OK)
        remote_error_curl(msg, MSG_CAP, r->host, cc, xf->errbuf, r->o->connect_timeout_ms);
    else
        remote_error_status(msg, MSG_CAP, r->host, xf->status, xf->acc.p);
}

/* An error body that is the JSON-RPC answer to q: relay it. */
static int relay_error_body(struct http_remote *r, struct xfer *xf)
{
    if (!xf->acc.p)
        return 0;
    json_t *m = json_loadb(xf->acc.p, xf->acc.len, 0, NULL);
    int ok = m && rpc_classify(m) == RPC_RESPONSE;
    if (ok)
        http_remote_incoming(r, xf, m, NULL, 0);
    json_decref(m);
    return ok;
}

/* The request's stream ended before its response: resume it, or fail. */
static void stream_dropped(struct http_remote *r, struct req *q, struct xfer *xf, CURLcode cc)
{
    int64_t now = clock_mono_ms();
    char msg[MSG_CAP];
    if (!q->last_event_id && !q->stream_id) {
        char cause[MSG_CAP];
        http_remote_describe_failure(r, xf, cc, cause);
        snprintf(msg, sizeof msg,
                 "mcp-bridge: %s closed the response stream before answering, without event "
                 "ids to resume it; the request may or may not have run (%.300s)",
                 r->host, cause + strlen("mcp-bridge: "));
        http_remote_fail(r, q, msg);
        return;
    }
    if (!q->drop_deadline)
        q->drop_deadline = now + r->o->response_timeout_ms;
    if (now >= q->drop_deadline) {
        http_remote_describe_failure(r, xf, cc, msg);
        char full[MSG_CAP + 512];
        snprintf(full, sizeof full,
                 "mcp-bridge: the response stream from %s dropped and could not be resumed "
                 "within %ld ms (last: %.400s)",
                 r->host, r->o->response_timeout_ms, msg + strlen("mcp-bridge: "));
        http_remote_fail(r, q, full);
        return;
    }
    if (xf->sse.retry_ms >= 0)
        q->retry_ms = xf->sse.retry_ms; /* the latest the server said */
    q->resume_at = now + connection_backoff_ms(q->resume_attempts++, q->retry_ms);
    bridge_log(LOG_INFO, "stream_dropped", "%s id=%s: resuming after %s", q->method, q->key,
               q->stream_id ? "a failed poll" : q->last_event_id);
}

/* Sends q again after a sign-in or with a new DPoP nonce; a retried
 * initialize still holds the rest back. */
static void resend(struct http_remote *r, struct xfer *xf, struct req *q)
{
    q->auth_tries++;
    http_remote_post_req(r, q);
    if (xf->opening && q->xf) {
        q->xf->opening = 1;
        r->hold++;
    }
}

/* The server wants a sign-in (401), more scope (403 insufficient_scope) or
 * a DPoP proof with its nonce: sign in (oauth.h) and send q again. 1 when q
 * was sent again or failed, 0 when the answer is to be handled as any
 * other. */
static int http_oauth_retry(struct http_remote *r, struct xfer *xf, struct req *q)
{
    char msg[MSG_CAP];
    if (xf->status == 403) {
        char *e = oauth_challenge_param(xf->www_auth, "error");
        int step_up = e && strcmp(e, "insufficient_scope") == 0;
        free(e);
        if (!step_up)
            return 0;
    }
    if (q->auth_tries >= MAX_AUTH_TRIES)
        return 0;
    if (xf->status == 401 && xf->www_auth && strstr(xf->www_auth, "use_dpop_nonce")) {
        resend(r, xf, q); /* the DPoP-Nonce came with the answer */
        return 1;
    }
    if (oauth_challenge(r->oauth, xf->status, xf->www_auth, msg, sizeof msg) < 0) {
        http_remote_fail(r, q, msg);
        return 1;
    }
    resend(r, xf, q);
    return 1;
}

static void done_request(struct http_remote *r, struct xfer *xf, CURLcode cc)
{
    struct req *q = xf->req;
    long st = xf->status;
    char msg[MSG_CAP];
    if (q->answered)
        return;
    if (r->legacy && xf->kind == XF_POST && cc == CURLE_OK && !xf->timed_out && st / 100 == 2)
        return; /* accepted: the response comes on the legacy stream */
    if (r->oauth && cc == CURLE_OK && (st == 401 || st == 403) && http_oauth_retry(r, xf, q))
        return;
    if (q->is_initialize && !r->legacy && r->o->transport == TRANSPORT_HTTP && cc == CURLE_OK &&
        (st == 404 || st == 405)) {
        /* a JSON-RPC answer is a Streamable HTTP server's word (a 2026-07-28
         * server has no initialize: translate.h), relayed */
        if (relay_error_body(r, xf) && q->answered)
            return;
        /* an older server: try the 2024-11-05 transport on the same URL */
        q->waiting = 1;
        http_legacy_enter(r);
        http_remote_gated(r);
        return;
    }
    if (cc == CURLE_OK && !xf->timed_out && st / 100 == 2 && xf->is_json && xf->acc.p) {
        if (http_remote_incoming_text(r, xf, xf->acc.p, xf->acc.len) < 0) {
            snprintf(msg, sizeof msg,
                     "mcp-bridge: %s answered with a body that is not JSON: is the URL an MCP "
                     "endpoint?",
                     r->host);
            http_remote_fail(r, q, msg);
        }
    }
    if (q->answered)
        return;
    if (q->stream_id && (xf->kind == XF_POST || xf->kind == XF_POLL) && cc == CURLE_OK &&
        !xf->timed_out && st / 100 == 2) {
        /* a streamed request: its handle, or a poll that brought what there was */
        if (xf->poll_ended)
            http_remote_fail(r, q, "mcp-bridge: the request's stream ended without a response");
        else
            http_poll_next(r, q);
        return;
    }
    if (xf->kind == XF_POLL && st != 404 && (cc != CURLE_OK || xf->timed_out || st >= 500)) {
        stream_dropped(r, q, xf, cc); /* the server is away: poll again later */
        return;
    }
    if (cc == CURLE_OK && !xf->timed_out && st / 100 == 2 && xf->is_json) {
        http_remote_fail(r, q, "mcp-bridge: the server's JSON reply did not answer this request");
        return;
    }
    if (st == 404 && r->s.id && !q->is_initialize && !q->modern && !xf->timed_out) {
        /* the session died (for a resume: while the stream was down) */
        http_reinit_session_gone(r, q, xf->generation);
        return;
    }
    if (xf->kind == XF_RESUME && (st == 405 || st == 400)) {
        snprintf(msg, sizeof msg,
                 "mcp-bridge: the response stream from %s dropped and the server cannot "
                 "resume it (HTTP %ld to GET with Last-Event-ID)",
                 r->host, st);
        http_remote_fail(r, q, msg);
        return;
    }
    if (st / 100 == 2 && xf->is_sse && !xf->too_big) {
        stream_dropped(r, q, xf, cc);
        return;
    }
    if (xf->timed_out && xf->headers_done && xf->is_sse) {
        stream_dropped(r, q, xf, cc);
        return;
    }
    if (xf->kind == XF_RESUME && (cc != CURLE_OK || st >= 500) && !xf->timed_out) {
        stream_dropped(r, q, xf, cc); /* the server is restarting: keep trying */
        return;
    }
    if (cc == CURLE_OK && !xf->timed_out && st / 100 == 2) {
        snprintf(msg, sizeof msg,
                 st == 202 ? "mcp-bridge: %s accepted the request (HTTP 202) but will not "
                             "answer it"
                           : "mcp-bridge: %s answered with a body that is neither JSON nor an "
                             "event stream: is the URL an MCP endpoint?",
                 r->host);
        http_remote_fail(r, q, msg);
        return;
    }
    if (cc == CURLE_OK && !xf->timed_out && relay_error_body(r, xf) && q->answered)
        return;
    /* a legacy server refused the probe without a JSON-RPC answer (a 2025
     * server without a session, the 2024-11-05 transport's 404 or 405):
     * the client falls back; auth and server failures are no fall-back */
    if (q->probe && cc == CURLE_OK && !xf->timed_out && st >= 400 && st < 500 && st != 401 &&
        st != 403 && st != 407 && st != 408 && st != 429 && answer_legacy(r, q, st))
        return;
    http_remote_describe_failure(r, xf, cc, msg);
    http_remote_fail(r, q, msg);
}

static void done_other(struct http_remote *r, struct xfer *xf, CURLcode cc)
{
    char msg[MSG_CAP];
    int ok = cc == CURLE_OK && !xf->timed_out && xf->status / 100 == 2;
    switch (xf->kind) {
    case XF_POST:
        if (ok) {
            if (xf->is_json && xf->acc.p)
                http_remote_incoming_text(r, xf, xf->acc.p, xf->acc.len);
            if (strcmp(xf->method, "notifications/initialized") == 0) {
                r->listen_wanted = 1;
                http_remote_open_listen(r);
            }
            return;
        }
        if (xf->status == 404 && r->s.id && xf->generation == r->s.generation &&
            r->s.state == SESSION_READY)
            http_reinit_start(r);
        http_remote_describe_failure(r, xf, cc, msg);
        bridge_log(LOG_WARN, "notification_failed", "%s: %s", xf->method, msg);
        return;
    case XF_LISTEN:
        if (r->stopping)
            return;
        if (xf->status == 405 || xf->status == 404 || xf->status == 400 ||
            (xf->status / 100 == 2 && !xf->is_sse)) {
            bridge_log(LOG_DEBUG, "no_listen_stream", "the server has no GET stream (HTTP %ld)",
                       xf->status);
            r->listen_wanted = 0;
            return;
        }
        if (!r->listen_wanted || xf->generation != r->s.generation)
            return;
        if (xf->status / 100 == 2 && xf->got_event)
            r->listen_attempts = 0;
        r->listen_at =
            clock_mono_ms() + connection_backoff_ms(r->listen_attempts++, xf->sse.retry_ms);
        return;
    case XF_REINIT:
        if (ok && xf->is_json && xf->acc.p)
            http_remote_incoming_text(r, xf, xf->acc.p, xf->acc.len);
        if (r->s.state != SESSION_REINIT || r->s.generation != xf->generation)
            return; /* its result was seen */
        if (ok && r->legacy)
            return; /* the result comes on the SSE stream */
        http_remote_describe_failure(r, xf, cc, msg);
        if (ok)
            snprintf(msg, sizeof msg,
                     "mcp-bridge: the session with %s was lost and the server refused to "
                     "start a new one",
                     r->host);
        http_reinit_end(r, msg);
        return;
    case XF_REINIT_OK:
        if (!ok) {
            http_remote_describe_failure(r, xf, cc, msg);
            bridge_log(LOG_WARN, "notification_failed", "notifications/initialized: %s", msg);
        }
        http_reinit_end(r, NULL);
        return;
    case XF_LEGACY:
        http_legacy_done(r, xf, cc);
        return;
    case XF_TOOLS:
        if (ok && xf->is_json && xf->acc.p)
            http_remote_incoming_text(r, xf, xf->acc.p, xf->acc.len);
        http_tools_done(r, xf, ok);
        return;
    case XF_RESUME:
    case XF_POLL:
        return; /* they always serve a request: done_request */
    }
}

static void xfer_done(struct http_remote *r, struct xfer *xf, CURLcode cc)
{
    struct req *q = xf->req;
    int opening = xf->opening;
    static const char *const kinds[] = {"post",      "resume", "listen",        "reinit",
                                        "reinit-ok", "poll",   "legacy-stream", "tools"};
    bridge_log(LOG_DEBUG, "transfer_done", "%s %s: HTTP %ld, %s%s", kinds[xf->kind],
               q ? q->method : xf->method, xf->status, curl_easy_strerror(cc),
               xf->timed_out ? " (timed out)" : "");
    if (q)
        done_request(r, xf, cc);
    else
        done_other(r, xf, cc);
    http_xfer_free(r, xf);
    if (opening && --r->hold == 0)
        http_remote_release(r);
    if (q && q->answered && !q->xf && !q->resume_at)
        http_remote_req_free(r, q);
}

/* ----------------------------------------------------------- public */

struct http_remote *http_remote_new(const struct bridge_options *o, struct remote_sink sink)
{
    struct http_remote *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->o = o;
    r->sink = sink;
    r->legacy = o->transport == TRANSPORT_SSE;
    r->multi = curl_multi_init();
    r->tool_maps = json_object();
    r->oauth = oauth_new(o);
    if (!r->multi || !r->tool_maps) {
        if (r->multi)
            curl_multi_cleanup(r->multi);
        json_decref(r->tool_maps);
        oauth_free(r->oauth);
        free(r);
        return NULL;
    }
    curl_multi_setopt(r->multi, CURLMOPT_MAXCONNECTS, 64L);
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL;
    if (u && curl_url_set(u, CURLUPART_URL, o->url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
        curl_url_get(u, CURLUPART_PORT, &port, 0);
        snprintf(r->host, sizeof r->host, "%s%s%s", host, port ? ":" : "", port ? port : "");
    } else {
        snprintf(r->host, sizeof r->host, "the server");
    }
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return r;
}

void http_remote_free(struct http_remote *r)
{
    if (!r)
        return;
    while (r->xfers)
        http_xfer_free(r, r->xfers);
    while (r->reqs)
        http_remote_req_free(r, r->reqs);
    while (r->parked) {
        struct parked *p = r->parked;
        r->parked = p->next;
        free(p->body);
        free(p);
    }
    while (r->n_spare)
        curl_easy_cleanup(r->spare[--r->n_spare]);
    curl_multi_cleanup(r->multi);
    free(r->listen_last_id);
    free(r->legacy_endpoint);
    json_decref(r->tool_maps);
    oauth_free(r->oauth);
    session_free(&r->s);
    free(r);
}

CURLM *http_remote_multi(struct http_remote *r)
{
    return r->multi;
}

int http_remote_pending(struct http_remote *r)
{
    return r->n_pending;
}

/* The client gave up on a request: it expects no reply any more. */
static void forget_cancelled(struct http_remote *r, const json_t *id)
{
    char *key = id ? rpc_id_key(id) : NULL;
    struct req *q = key ? req_find(r, key) : NULL;
    free(key);
    if (q) {
        q->answered = 1;
        r->n_pending--;
        q->resume_at = 0;
    }
}

void http_remote_cancel(struct http_remote *r, const json_t *id)
{
    char *key = id ? rpc_id_key(id) : NULL;
    struct req *q = key ? req_find(r, key) : NULL;
    free(key);
    if (!q)
        return;
    forget_cancelled(r, id);
    if (q->xf)
        http_xfer_free(r, q->xf); /* frees q at the next http_remote_run */
}

void http_remote_send(struct http_remote *r, const char *body, size_t len, json_t *m)
{
    enum rpc_kind k = rpc_classify(m);
    const char *method = json_string_value(json_object_get(m, "method"));
    if (k != RPC_REQUEST) {
        if (method && strcmp(method, "notifications/initialized") == 0)
            session_remember_initialized(&r->s, body, len);
        if (method && strcmp(method, "notifications/cancelled") == 0)
            forget_cancelled(r, json_object_get(json_object_get(m, "params"), "requestId"));
        int modern = modern_is(m);
        if (r->s.state == SESSION_REINIT && !modern)
            return; /* it was meant for the old session: the new one would not know it */
        post_message(r, body, len, method ? method : "response", modern ? m : NULL);
        return;
    }
    int modern = modern_is(m);
    /* --transport poll: every request but initialize asks for a handle (a
     * 2026-07-28 request has no session to hold a stream) */
    int streamed =
        r->o->transport == TRANSPORT_POLL && strcmp(method, "initialize") != 0 && !modern;
    char *own_body = streamed ? http_poll_body(m, &len) : http_remote_dup(body, len);
    struct req *q = own_body ? calloc(1, sizeof *q) : NULL;
    if (!q || !(q->key = rpc_id_key(json_object_get(m, "id")))) {
        free(own_body);
        free(q);
        char *reply = rpc_error_reply(json_object_get(m, "id"), RPC_INTERNAL_ERROR,
                                      "mcp-bridge: out of memory");
        if (reply)
            http_remote_emit(r, reply, strlen(reply));
        free(reply);
        return;
    }
    q->body = own_body;
    q->body_len = len;
    q->streamed = streamed;
    q->id = json_incref(json_object_get(m, "id"));
    q->retry_ms = -1;
    snprintf(q->method, sizeof q->method, "%s", method);
    q->is_initialize = strcmp(method, "initialize") == 0;
    q->modern = modern ? json_incref(m) : NULL;
    q->probe = strcmp(method, "server/discover") == 0;
    q->prev = r->reqs_tail;
    if (r->reqs_tail)
        r->reqs_tail->next = q;
    else
        r->reqs = q;
    r->reqs_tail = q;
    r->n_pending++;
    if (q->is_initialize) {
        session_remember_initialize(&r->s, body, len);
        r->s.state = SESSION_NONE;
        if (r->legacy && !r->legacy_endpoint) {
            q->waiting = 1;
            http_remote_gated(r); /* opens the stream that says where to POST */
            return;
        }
        http_remote_post_req(r, q);
        if (q->xf) {
            q->xf->opening = 1;
            r->hold++;
        }
        return;
    }
    if (modern) {
        /* no session to wait for; maybe the tool's headers to learn */
        if (!http_tools_wait(r, q))
            http_remote_post_req(r, q);
        return;
    }
    if (http_remote_gated(r)) {
        q->waiting = 1;
        return;
    }
    http_remote_post_req(r, q);
}

void http_remote_run(struct http_remote *r)
{
    int running;
    curl_multi_perform(r->multi, &running);
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(r->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct xfer *xf = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&xf);
        CURLcode cc = msg->data.result;
        if (!xf->status)
            curl_easy_getinfo(xf->easy, CURLINFO_RESPONSE_CODE, &xf->status);
        xfer_done(r, xf, cc);
    }
    /* silent servers: our own deadlines (curl has no time-to-first-byte) */
    int64_t now = clock_mono_ms();
    long limit = r->o->response_timeout_ms;
    for (struct xfer *xf = r->xfers, *next; xf; xf = next) {
        next = xf->next;
        if ((xf->kind == XF_LISTEN || xf->kind == XF_LEGACY) && xf->headers_done)
            continue; /* idle by nature; TCP keepalive watches it */
        if (now - xf->last_activity < limit)
            continue;
        bridge_log(LOG_DEBUG, "transfer_timeout", "no bytes for %ld ms", limit);
        xf->timed_out = 1;
        curl_multi_remove_handle(r->multi, xf->easy);
        xfer_done(r, xf, CURLE_OPERATION_TIMEDOUT);
    }
    /* scheduled resumes and reconnects */
    for (struct req *q = r->reqs, *next; q; q = next) {
        next = q->next;
        if (q->resume_at && now >= q->resume_at && !q->answered)
            resume_req(r, q);
        else if (q->answered && !q->xf)
            http_remote_req_free(r, q);
    }
    if (r->listen_wanted && r->listen_at && now >= r->listen_at && !r->stopping)
        http_remote_open_listen(r);
    http_xfer_start_pending(r);
}

long http_remote_timeout_ms(struct http_remote *r)
{
    int64_t now = clock_mono_ms(), next = now + 1000;
    for (struct req *q = r->reqs; q; q = q->next) {
        if (q->resume_at && q->resume_at < next)
            next = q->resume_at;
    }
    if (r->listen_at && r->listen_at < next)
        next = r->listen_at;
    long curl_ms = -1;
    curl_multi_timeout(r->multi, &curl_ms);
    long ms = (long)(next - now);
    if (curl_ms >= 0 && curl_ms < ms)
        ms = curl_ms;
    return ms < 0 ? 0 : ms;
}

void http_remote_shutdown(struct http_remote *r, const char *why)
{
    r->stopping = 1;
    for (struct req *q = r->reqs; q; q = q->next)
        http_remote_fail(r, q, why);
    while (r->xfers)
        http_xfer_free(r, r->xfers);
    if (!r->s.id)
        return;
    /* end the session on the server: it frees what it holds for us */
    struct xfer *xf = http_xfer_new(r, XF_POST, "DELETE", NULL, 0, NULL, NULL);
    if (!xf)
        return;
    curl_easy_setopt(xf->easy, CURLOPT_TIMEOUT_MS, (long)DELETE_TIMEOUT_MS);
    CURLcode cc = curl_easy_perform(xf->easy);
    curl_easy_getinfo(xf->easy, CURLINFO_RESPONSE_CODE, &xf->status);
    bridge_log(LOG_DEBUG, "session_deleted", "DELETE: %s, HTTP %ld", curl_easy_strerror(cc),
               xf->status);
    curl_easy_cleanup(xf->easy);
    curl_slist_free_all(xf->hdrs);
    sse_parser_free(&xf->sse);
    free(xf->acc.p);
    free(xf);
}
