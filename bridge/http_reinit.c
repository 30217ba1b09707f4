/* http_reinit — rebuilding a session the server lost. A 404 for the
 * session replays the client's initialize (under a bridge id, so the reply
 * never reaches the client), adopts the new session, replays
 * notifications/initialized, then sends what waited once more. */
#include "http_remote_int.h"

#include "bridge_log.h"
#include "rpc_message.h"

#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The result of the replayed initialize: adopt it, then send the replayed
 * notifications/initialized. */
void http_reinit_result(struct http_remote *r, struct xfer *xf, const json_t *m)
{
    if (!json_object_get(m, "result")) {
        char msg[512];
        snprintf(msg, sizeof msg,
                 "mcp-bridge: the session with %s was lost and the server refused to start a "
                 "new one",
                 r->host);
        http_reinit_end(r, msg);
        return;
    }
    session_adopt(&r->s, xf->session_hdr);
    bridge_log(LOG_INFO, "session_reinitialized", "new session adopted");
    if (r->s.initialized_body)
        http_remote_post_other(r, XF_REINIT_OK, r->s.initialized_body,
                               strlen(r->s.initialized_body), "notifications/initialized");
    else
        http_reinit_end(r, NULL);
}

void http_reinit_start(struct http_remote *r)
{
    char *body = session_replay_initialize(&r->s, r->reinit_key, sizeof r->reinit_key);
    if (!body) {
        http_reinit_end(r, "mcp-bridge: the server lost the session, and without the client's "
                           "initialize the bridge cannot start a new one; restart the client");
        return;
    }
    bridge_log(LOG_INFO, "session_lost",
               "the server no longer knows the session; "
               "re-initializing");
    r->s.state = SESSION_REINIT;
    r->listen_wanted = 0;
    r->listen_at = 0;
    free(r->listen_last_id);
    r->listen_last_id = NULL;
    http_remote_post_other(r, XF_REINIT, body, strlen(body), "initialize");
    free(body);
}

/* Re-initialization ended: send the parked requests (again), or fail them. */
void http_reinit_end(struct http_remote *r, const char *failure)
{
    /* after a failure the old session id stays: the next 404 tries again */
    r->s.state = SESSION_READY;
    if (!failure) {
        http_remote_release(r);
        r->listen_wanted = 1;
        http_remote_open_listen(r);
        return;
    }
    for (struct req *q = r->reqs, *next; q; q = next) {
        next = q->next;
        if (!q->waiting)
            continue;
        q->waiting = 0;
        http_remote_fail(r, q, failure);
        if (!q->xf)
            http_remote_req_free(r, q);
    }
}

/* A request met a 404 for its session. */
void http_reinit_session_gone(struct http_remote *r, struct req *q, unsigned generation)
{
    if (q->retried) {
        http_remote_fail(r, q,
                         "mcp-bridge: the server lost the session again right after the bridge "
                         "re-initialized it; it may be restarting in a loop (check its logs)");
        return;
    }
    q->retried = 1;
    q->waiting = 1;
    if (r->s.state == SESSION_REINIT)
        return;
    if (generation != r->s.generation) {
        http_reinit_end(r, NULL); /* already re-initialized since: just send again */
        return;
    }
    http_reinit_start(r);
}
