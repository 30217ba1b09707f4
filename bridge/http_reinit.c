/* http_reinit — rebuilding a session the server lost, over HTTP: the steps
 * are session.h's; here the replayed messages are POSTed, and the requests
 * that met the 404 wait (q->waiting) until they can be POSTed again. The
 * replayed notifications/initialized must be accepted before they go: the
 * server sees concurrent POSTs in no particular order. */
#include "http_remote_int.h"

#include <stdlib.h>

static void rebuild_send(void *ud, enum session_replay what, const char *body, size_t len)
{
    struct http_remote *r = ud;
    if (what == SESSION_REPLAY_INITIALIZED) {
        http_remote_post_other(r, XF_REINIT_OK, body, len, "notifications/initialized", NULL);
        return;
    }
    /* the standalone stream belonged to the old session */
    r->listen_wanted = 0;
    r->listen_at = 0;
    free(r->listen_last_id);
    r->listen_last_id = NULL;
    http_remote_post_other(r, XF_REINIT, body, len, "initialize", NULL);
}

static void rebuild_end(void *ud, const char *failure)
{
    struct http_remote *r = ud;
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

static struct session_rebuild rebuild_of(struct http_remote *r)
{
    return (struct session_rebuild){rebuild_send, rebuild_end, r, r->host};
}

void http_reinit_result(struct http_remote *r, struct xfer *xf, const json_t *m)
{
    struct session_rebuild rb = rebuild_of(r);
    session_rebuild_result(&r->s, &rb, m, xf->session_hdr);
}

void http_reinit_start(struct http_remote *r)
{
    struct session_rebuild rb = rebuild_of(r);
    session_rebuild_start(&r->s, &rb);
}

void http_reinit_end(struct http_remote *r, const char *failure)
{
    struct session_rebuild rb = rebuild_of(r);
    session_rebuild_end(&r->s, &rb, failure);
}

void http_reinit_session_gone(struct http_remote *r, struct req *q, unsigned generation)
{
    if (q->retried) {
        http_remote_fail(r, q, SESSION_LOST_AGAIN);
        return;
    }
    q->retried = 1;
    q->waiting = 1;
    struct session_rebuild rb = rebuild_of(r);
    session_rebuild_needed(&r->s, &rb, generation);
}
