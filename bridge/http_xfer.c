/* http_xfer — one HTTP exchange with the server: its curl easy handle, headers and
 * callbacks. Response headers give the status, the content type and the
 * session id; the body is parsed as SSE as it arrives, or kept whole (JSON,
 * or the start of an error body). */
#include "http_remote_int.h"

#include "connection.h"

#include "bridge_log.h"
#include "modern.h"
#include "oauth.h"
#include "rpc_message.h"

#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int on_sse_event(void *ud, const struct sse_event *ev)
{
    struct xfer *xf = ud;
    struct http_remote *r = xf->r;
    /* remember where we are, for Last-Event-ID */
    /* (sent back as Last-Event-ID: an id a header cannot carry is not kept) */
    if (*ev->last_id && session_header_safe(ev->last_id)) {
        char **slot = xf->req                 ? &xf->req->last_event_id
                      : xf->kind == XF_LISTEN ? &r->listen_last_id
                                              : NULL;
        if (slot && (!*slot || strcmp(*slot, ev->last_id) != 0)) {
            free(*slot);
            *slot = strdup(ev->last_id);
        }
    }
    xf->got_event = 1;
    if (xf->kind == XF_LEGACY && strcmp(ev->type, "endpoint") == 0) {
        http_legacy_endpoint(r, ev->data);
        return 0;
    }
    if (strcmp(ev->type, "message") != 0)
        return 0;
    if (ev->len == 0 || (ev->len == 1 && ev->data[0] == ' '))
        return 0; /* a priming event */
    http_remote_incoming_text(r, xf, ev->data, ev->len);
    return 0;
}

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
    struct xfer *xf = ud;
    size_t len = size * n;
    xf->last_activity = clock_mono_ms();
    if (len >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
        /* a new header block (after 1xx): start over */
        xf->headers_done = xf->is_sse = xf->is_json = 0;
        free(xf->session_hdr);
        xf->session_hdr = NULL;
        return len;
    }
    if (len <= 2 && (buf[0] == '\r' || buf[0] == '\n')) {
        curl_easy_getinfo(xf->easy, CURLINFO_RESPONSE_CODE, &xf->status);
        if (xf->status >= 200)
            xf->headers_done = 1;
        /* the session of an initialize is needed before its reply is
         * relayed: the client's next message must carry it */
        if (xf->headers_done && xf->kind == XF_POST && xf->req && xf->req->is_initialize &&
            xf->status / 100 == 2) {
            session_adopt(&xf->r->s, xf->session_hdr);
        }
        return len;
    }
    const char *colon = memchr(buf, ':', len);
    if (!colon)
        return len;
    size_t name_len = (size_t)(colon - buf);
    const char *v = colon + 1;
    size_t vlen = len - name_len - 1;
    while (vlen && (*v == ' ' || *v == '\t'))
        v++, vlen--;
    while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
        vlen--;
    if (name_len == 12 && strncasecmp(buf, "content-type", 12) == 0) {
        xf->is_sse = vlen >= 17 && strncasecmp(v, "text/event-stream", 17) == 0;
        xf->is_json = vlen >= 16 && strncasecmp(v, "application/json", 16) == 0;
    } else if (name_len == 14 && strncasecmp(buf, "mcp-session-id", 14) == 0 && vlen &&
               vlen < 1024) {
        free(xf->session_hdr);
        xf->session_hdr = http_remote_dup(v, vlen);
    } else if (name_len == 10 && strncasecmp(buf, "dpop-nonce", 10) == 0 && vlen < 1024) {
        oauth_dpop_nonce(xf->r->oauth, v, vlen);
    } else if (name_len == 16 && strncasecmp(buf, "www-authenticate", 16) == 0 && vlen < 8192) {
        free(xf->www_auth);
        xf->www_auth = http_remote_dup(v, vlen);
    }
    return len;
}

static size_t on_body(char *buf, size_t size, size_t n, void *ud)
{
    struct xfer *xf = ud;
    size_t len = size * n;
    xf->last_activity = clock_mono_ms();
    if (xf->status / 100 == 2 && xf->is_sse) {
        if (sse_parser_feed(&xf->sse, buf, len, on_sse_event, xf) < 0) {
            xf->too_big = 1;
            return 0; /* aborts the transfer */
        }
        return len;
    }
    size_t cap = xf->status / 100 == 2 ? MAX_BODY : MAX_ERROR_BODY;
    size_t take = xf->acc.len + len > cap ? cap - xf->acc.len : len;
    if (take < len && xf->status / 100 == 2) {
        xf->too_big = 1;
        return 0;
    }
    if (take) {
        char *bigger = realloc(xf->acc.p, xf->acc.len + take + 1);
        if (!bigger)
            return 0;
        xf->acc.p = bigger;
        memcpy(xf->acc.p + xf->acc.len, buf, take);
        xf->acc.len += take;
        xf->acc.p[xf->acc.len] = '\0';
    }
    return len;
}

static struct curl_slist *add_header(struct curl_slist *l, const char *name, const char *value)
{
    char line[2048];
    snprintf(line, sizeof line, "%s: %s", name, value);
    struct curl_slist *more = curl_slist_append(l, line);
    return more ? more : l;
}

struct xfer *http_xfer_new(struct http_remote *r, enum xfer_kind kind, const char *method_http,
                           const char *body, size_t body_len, const char *last_event_id,
                           const json_t *modern)
{
    struct xfer *xf = calloc(1, sizeof *xf);
    if (!xf)
        return NULL;
    xf->r = r;
    xf->kind = kind;
    xf->generation = r->s.generation;
    xf->started = xf->last_activity = clock_mono_ms();
    sse_parser_init(&xf->sse, MAX_BODY);
    /* a used handle is cheaper than a new one: requests come by thousands */
    if (r->n_spare) {
        xf->easy = r->spare[--r->n_spare];
        curl_easy_reset(xf->easy);
    } else {
        xf->easy = curl_easy_init();
    }
    if (!xf->easy) {
        free(xf);
        return NULL;
    }
    const struct bridge_options *o = r->o;
    CURL *e = xf->easy;
    int to_endpoint = r->legacy && r->legacy_endpoint && kind != XF_LEGACY;
    curl_easy_setopt(e, CURLOPT_URL, to_endpoint ? r->legacy_endpoint : o->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, xf);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, xf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, xf);
    connection_setup(e, o, xf->errbuf);
    /* a proxy must not see a compressed stream it would buffer */
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, NULL);

    struct curl_slist *h = NULL;
    if (body) {
        h = add_header(h, "Content-Type", "application/json");
        h = add_header(h, "Accept", "application/json, text/event-stream");
        h = curl_slist_append(h, "Expect:");
    } else {
        h = add_header(h, "Accept", "text/event-stream");
    }
    /* a replayed initialize starts a session: the old id must not go with it;
     * a 2026-07-28 message belongs to no session and names its revision */
    if (r->s.id && kind != XF_REINIT && !modern)
        h = add_header(h, "Mcp-Session-Id", r->s.id);
    if (r->s.protocol_version && kind != XF_REINIT && !modern)
        h = add_header(h, "MCP-Protocol-Version", r->s.protocol_version);
    if (modern) {
        const char *tool =
            json_string_value(json_object_get(json_object_get(modern, "params"), "name"));
        const json_t *map = tool ? json_object_get(r->tool_maps, tool) : NULL;
        if (modern_headers(modern, map, &h) != 0)
            bridge_log(LOG_ERROR, "out_of_memory", "the request goes without all its headers");
    }
    if (last_event_id)
        h = add_header(h, "Last-Event-ID", last_event_id);
    if (o->token) {
        char auth[1024 + 64];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->token);
        h = curl_slist_append(h, auth);
    } else if (r->oauth && oauth_headers(r->oauth, method_http,
                                         to_endpoint ? r->legacy_endpoint : o->url, &h) < 0) {
        bridge_log(LOG_ERROR, "out_of_memory", "the request goes without its token");
    }
    for (int i = 0; i < o->n_headers; i++)
        h = curl_slist_append(h, o->headers[i]);
    xf->hdrs = h;
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);

    if (strcmp(method_http, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    } else if (strcmp(method_http, "GET") != 0) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method_http);
    }
    return xf;
}

void http_xfer_start(struct http_remote *r, struct xfer *xf)
{
    xf->next = r->xfers;
    if (r->xfers)
        r->xfers->prev = xf;
    r->xfers = xf;
    /* curl refuses new handles from inside its callbacks, where many
     * transfers are born (an SSE event that ends a wait): added later */
    xf->unstarted = 1;
}

void http_xfer_start_pending(struct http_remote *r)
{
    for (struct xfer *xf = r->xfers; xf; xf = xf->next) {
        if (xf->unstarted) {
            xf->unstarted = 0;
            curl_multi_add_handle(r->multi, xf->easy);
        }
    }
}

void http_xfer_free(struct http_remote *r, struct xfer *xf)
{
    if (xf->prev)
        xf->prev->next = xf->next;
    else if (r->xfers == xf)
        r->xfers = xf->next;
    if (xf->next)
        xf->next->prev = xf->prev;
    curl_multi_remove_handle(r->multi, xf->easy);
    if (r->n_spare < SPARE_HANDLES)
        r->spare[r->n_spare++] = xf->easy;
    else
        curl_easy_cleanup(xf->easy);
    curl_slist_free_all(xf->hdrs);
    sse_parser_free(&xf->sse);
    free(xf->acc.p);
    free(xf->body);
    free(xf->session_hdr);
    free(xf->www_auth);
    if (xf->req && xf->req->xf == xf)
        xf->req->xf = NULL;
    free(xf);
}
