/* http_legacy — the 2024-11-05 HTTP+SSE transport, for servers that predate
 * Streamable HTTP: the bridge opens a GET stream on the URL, the server's
 * first event ("endpoint") says where to POST, every POST is merely
 * accepted, and all replies come on that one stream.
 *
 * The bridge falls back to it when the server answers the POST of
 * initialize with 404 or 405, and uses it from the start with
 * --transport sse. The transport has no resumption: when the stream ends,
 * the requests sent on it are answered with an error; the next client
 * message opens a new stream, on which the bridge replays the client's
 * initialize before anything else. */
#include "http_remote_int.h"

#include "bridge_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void http_legacy_enter(struct http_remote *r)
{
    bridge_log(LOG_INFO, "legacy_transport",
               "the server has no Streamable HTTP at this URL; trying HTTP+SSE (2024-11-05)");
    r->legacy = 1;
    r->listen_wanted = 0;
}

void http_legacy_open(struct http_remote *r)
{
    for (struct xfer *xf = r->xfers; xf; xf = xf->next) {
        if (xf->kind == XF_LEGACY)
            return;
    }
    if (r->stopping)
        return;
    struct xfer *xf = http_xfer_new(r, XF_LEGACY, "GET", NULL, 0, NULL, NULL);
    if (xf)
        http_xfer_start(r, xf);
}

/* The same scheme, host and port as the URL the user gave: the token must
 * not follow an endpoint to another origin. */
static char *resolve_endpoint(const char *base, const char *ref)
{
    CURLU *u = curl_url(), *b = curl_url();
    char *url = NULL, *out = NULL;
    char *parts[2][3] = {{NULL}};
    const CURLUPart which[3] = {CURLUPART_SCHEME, CURLUPART_HOST, CURLUPART_PORT};
    if (!u || !b || curl_url_set(u, CURLUPART_URL, base, 0) != CURLUE_OK ||
        curl_url_set(b, CURLUPART_URL, base, 0) != CURLUE_OK ||
        curl_url_set(u, CURLUPART_URL, ref, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_URL, &url, 0) != CURLUE_OK)
        goto out;
    for (int i = 0; i < 3; i++) {
        curl_url_get(u, which[i], &parts[0][i], CURLU_DEFAULT_PORT);
        curl_url_get(b, which[i], &parts[1][i], CURLU_DEFAULT_PORT);
        if (!parts[0][i] || !parts[1][i] || strcasecmp(parts[0][i], parts[1][i]) != 0)
            goto out;
    }
    out = strdup(url);
out:
    for (int i = 0; i < 3; i++) {
        curl_free(parts[0][i]);
        curl_free(parts[1][i]);
    }
    curl_free(url);
    curl_url_cleanup(u);
    curl_url_cleanup(b);
    return out;
}

void http_legacy_endpoint(struct http_remote *r, const char *data)
{
    char *url = resolve_endpoint(r->o->url, data);
    if (!url) {
        bridge_log(LOG_ERROR, "legacy_bad_endpoint",
                   "the server's endpoint event points to another origin or is not a URL; "
                   "ignored");
        return;
    }
    free(r->legacy_endpoint);
    r->legacy_endpoint = url;
    bridge_log(LOG_DEBUG, "legacy_endpoint", "posting to the endpoint the stream announced");
    if (r->legacy_had_session && r->s.init_body)
        http_reinit_start(r); /* a new stream is a new session */
    else
        http_remote_release(r);
}

void http_legacy_done(struct http_remote *r, struct xfer *xf, CURLcode cc)
{
    char cause[MSG_CAP], msg[MSG_CAP + 160];
    int had_endpoint = r->legacy_endpoint != NULL;
    if (r->s.state == SESSION_READY)
        r->legacy_had_session = 1;
    free(r->legacy_endpoint);
    r->legacy_endpoint = NULL;
    if (r->stopping)
        return;
    http_remote_describe_failure(r, xf, cc, cause);
    if (cc == CURLE_OK && !xf->timed_out && xf->status / 100 == 2 && !xf->is_sse)
        snprintf(cause, sizeof cause,
                 "mcp-bridge: %s has neither Streamable HTTP nor an HTTP+SSE stream at this URL "
                 "(check the URL: often /mcp or /sse)",
                 r->host);
    snprintf(msg, sizeof msg, "%s%s", cause,
             had_endpoint ? " (the HTTP+SSE stream ended; the request may or may not have run)"
                          : "");
    bridge_log(LOG_WARN, "legacy_stream_ended", "%s", msg);
    /* nothing sent on this stream can be answered now, and what waited for
     * its endpoint will not get one */
    if (r->s.state == SESSION_REINIT)
        r->s.state = SESSION_READY;
    for (struct req *q = r->reqs, *next; q; q = next) {
        next = q->next;
        if (q->answered || q->xf)
            continue;
        q->waiting = 0;
        http_remote_fail(r, q, msg);
        http_remote_req_free(r, q);
    }
}
