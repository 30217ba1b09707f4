/* http_tools — what the bridge knows of a 2026-07-28 server's tools, for
 * the Mcp-Param-* headers of tools/call (tool_headers.h).
 *
 * It learns from the tools/list results it relays to the client (and
 * drops the invalid tools from them, as the specification requires of the
 * client side). A client that calls a tool the bridge has not seen listed
 * (it kept the list from an earlier run) makes the bridge list the tools
 * itself first, with the call's own _meta, page by page; the call waits
 * for that, then goes with whatever was learned. A tool still unknown
 * after that is remembered as having no headers, so that it costs one
 * listing, not one per call. */
#include "http_remote_int.h"

#include "bridge_log.h"
#include "modern.h"
#include "rpc_message.h"
#include "tool_headers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PAGES 20 /* a server that pages forever does not hold calls forever */

/* POSTs the bridge's tools/list (cursor may be NULL) with meta as _meta. */
static int fetch_page(struct http_remote *r, json_t *meta, const char *cursor)
{
    json_t *params = json_pack("{s:O}", "_meta", meta);
    if (params && cursor)
        json_object_set_new(params, "cursor", json_string(cursor));
    char id[48];
    snprintf(id, sizeof id, "mcp-bridge-tools-%u", ++r->tools_count);
    json_t *m = params ? json_pack("{s:s,s:s,s:s,s:o}", "jsonrpc", "2.0", "id", id, "method",
                                   "tools/list", "params", params)
                       : NULL;
    char *body = m ? json_dumps(m, JSON_COMPACT) : NULL;
    char *key = m ? rpc_id_key(json_object_get(m, "id")) : NULL;
    struct xfer *xf = body && key ? http_remote_post_other(r, XF_TOOLS, body, strlen(body),
                                                           "tools/list (mcp-bridge)", m)
                                  : NULL;
    if (xf)
        snprintf(r->tools_key, sizeof r->tools_key, "%s", key);
    free(body);
    free(key);
    json_decref(m);
    return xf ? 0 : -1;
}

/* The listing is over: the calls that waited go, with what was learned. */
static void fetch_end(struct http_remote *r)
{
    r->tools_key[0] = '\0';
    for (struct req *q = r->reqs; q; q = q->next) {
        if (!q->waiting_tools)
            continue;
        q->waiting_tools = 0;
        const char *tool =
            json_string_value(json_object_get(json_object_get(q->modern, "params"), "name"));
        if (tool && !json_object_get(r->tool_maps, tool)) {
            bridge_log(LOG_WARN, "tool_unknown",
                       "tools/list did not list the tool called (id=%s): it goes without "
                       "Mcp-Param headers",
                       q->key);
            json_object_set_new(r->tool_maps, tool, json_object());
        }
        if (!q->answered)
            http_remote_post_req(r, q);
    }
}

int http_tools_wait(struct http_remote *r, struct req *q)
{
    if (strcmp(q->method, "tools/call") != 0)
        return 0;
    json_t *params = json_object_get(q->modern, "params");
    const char *tool = json_string_value(json_object_get(params, "name"));
    if (!tool || json_object_get(r->tool_maps, tool))
        return 0;
    if (!r->tools_key[0]) {
        r->tools_pages = 0;
        if (fetch_page(r, json_object_get(params, "_meta"), NULL) != 0)
            return 0; /* out of memory: the call goes without its headers */
    }
    q->waiting_tools = 1;
    return 1;
}

int http_tools_is_reply(struct http_remote *r, const char *key)
{
    return r->tools_key[0] && strcmp(key, r->tools_key) == 0;
}

void http_tools_result(struct http_remote *r, const json_t *m)
{
    json_t *result = json_object_get(m, "result");
    if (result) {
        json_t *copy = json_deep_copy(result);
        if (copy)
            tool_headers_learn(r->tool_maps, copy);
        json_decref(copy);
    }
    const char *cursor = json_string_value(json_object_get(result, "nextCursor"));
    if (cursor && *cursor && ++r->tools_pages < MAX_PAGES) {
        for (struct req *q = r->reqs; q; q = q->next) {
            if (q->waiting_tools &&
                fetch_page(r, json_object_get(json_object_get(q->modern, "params"), "_meta"),
                           cursor) == 0)
                return;
        }
    }
    fetch_end(r);
}

void http_tools_done(struct http_remote *r, struct xfer *xf, int ok)
{
    /* the answer, if any, was seen: only a transfer that brought none (or a
     * page whose successor is under way) ends here */
    if (!r->tools_key[0])
        return;
    char *key = NULL;
    json_t *m = json_loadb(xf->body, strlen(xf->body), 0, NULL);
    if (m)
        key = rpc_id_key(json_object_get(m, "id"));
    json_decref(m);
    if (key && strcmp(key, r->tools_key) == 0) {
        if (!ok)
            bridge_log(LOG_WARN, "tools_list_failed",
                       "the bridge could not list the tools (HTTP %ld)", xf->status);
        fetch_end(r);
    }
    free(key);
}

json_t *http_tools_relay(struct http_remote *r, const json_t *m)
{
    json_t *result = json_object_get(m, "result");
    if (!json_is_array(json_object_get(result, "tools")))
        return NULL;
    json_t *copy = json_deep_copy(m);
    if (!copy)
        return NULL;
    if (tool_headers_learn(r->tool_maps, json_object_get(copy, "result")) <= 0) {
        json_decref(copy);
        return NULL; /* nothing left out: relay the server's own text */
    }
    return copy;
}
