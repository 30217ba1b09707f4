/* http_poll — --transport poll, for networks whose proxies buffer or cut
 * streams: each request goes with "stream": true, mcpd answers with a handle
 * at once, and the bridge fetches the request's messages with mcpd/poll
 * until its response arrives. */
#include "http_remote_int.h"

#include "bridge_log.h"
#include "rpc_message.h"

#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The reply to a "stream": true request: keeps the stream id. Returns 0
 * when m is not a handle (an error: that is the request's answer). */
int http_poll_handle(struct req *q, const json_t *m)
{
    const json_t *res = json_object_get(m, "result");
    const char *sid = json_string_value(json_object_get(res, "stream_id"));
    if (!sid)
        return 0;
    free(q->stream_id);
    q->stream_id = strdup(sid);
    q->next_seq = 0;
    return q->stream_id != NULL;
}

/* An mcpd/poll result: relay its chunks, remember where to go on. */
void http_poll_result(struct http_remote *r, struct xfer *xf, const json_t *m)
{
    struct req *q = xf->req;
    const json_t *res = json_object_get(m, "result");
    if (!res) {
        const json_t *err = json_object_get(m, "error");
        char msg[MSG_CAP];
        snprintf(msg, sizeof msg, "mcp-bridge: %s lost the request's stream (%s)", r->host,
                 json_string_value(json_object_get(err, "message"))
                     ? json_string_value(json_object_get(err, "message"))
                     : "mcpd/poll failed");
        xf->poll_ended = 1;
        http_remote_fail(r, q, msg);
        return;
    }
    size_t i;
    const json_t *chunk;
    json_array_foreach(json_object_get(res, "chunks"), i, chunk)
    {
        const json_t *msg = json_object_get(chunk, "message");
        if (msg)
            http_remote_incoming(r, xf, msg, NULL, 0);
    }
    const json_t *next = json_object_get(res, "next_seq");
    if (json_is_integer(next))
        q->next_seq = json_integer_value(next);
    const char *state = json_string_value(json_object_get(res, "state"));
    xf->poll_ended = state && (strcmp(state, "finished") == 0 || strcmp(state, "error") == 0 ||
                               strcmp(state, "expired") == 0);
    if (json_is_true(json_object_get(res, "has_more")))
        xf->poll_ended = 0;
}

/* Fetches q's next messages with mcpd/poll. The poll waits at most half
 * the response timeout, so a silent poll is never mistaken for a dead one. */
void http_poll_next(struct http_remote *r, struct req *q)
{
    q->resume_at = 0;
    long wait_ms = r->o->response_timeout_ms / 2;
    if (wait_ms > 20000)
        wait_ms = 20000;
    char id[48];
    snprintf(id, sizeof id, "mcp-bridge-poll-%u", ++r->poll_count);
    json_t *m = json_pack("{s:s, s:s, s:s, s:{s:s, s:I, s:i, s:i}}", "jsonrpc", "2.0", "id", id,
                          "method", "mcpd/poll", "params", "stream_id", q->stream_id, "from_seq",
                          (json_int_t)q->next_seq, "wait_ms", (int)wait_ms, "max_chunks", 100);
    char *body = m ? json_dumps(m, JSON_COMPACT) : NULL;
    json_decref(m);
    struct xfer *xf =
        body ? http_xfer_new(r, XF_POLL, "POST", body, strlen(body), NULL, NULL) : NULL;
    if (!xf) {
        free(body);
        http_remote_fail(r, q, "mcp-bridge: out of memory");
        return;
    }
    xf->body = body;
    snprintf(xf->poll_key, sizeof xf->poll_key, "\"%s\"", id);
    snprintf(xf->method, sizeof xf->method, "mcpd/poll");
    xf->req = q;
    q->xf = xf;
    http_xfer_start(r, xf);
}

/* The request with "stream": true in its params (compact JSON, length in
 * *len), or NULL when out of memory. */
char *http_poll_body(const json_t *m, size_t *len)
{
    json_t *copy = json_deep_copy(m);
    json_t *params = json_object_get(copy, "params");
    if (copy && !json_is_object(params)) {
        params = json_object();
        json_object_set_new(copy, "params", params);
    }
    char *s = NULL;
    if (params && json_object_set_new(params, "stream", json_true()) == 0)
        s = json_dumps(copy, JSON_COMPACT);
    json_decref(copy);
    if (s)
        *len = strlen(s);
    return s;
}
