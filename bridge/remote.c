/* remote — see remote.h. */
#include "remote.h"

#include "http_remote.h"
#include "options.h"
#include "udp_remote.h"
#include "ws_remote.h"

#include <stdlib.h>
#include <string.h>

int remote_open(struct remote *rm, const struct bridge_options *o, struct remote_sink sink)
{
    rm->http = NULL;
    rm->ws = NULL;
    rm->udp = NULL;
    if (o->transport == TRANSPORT_UDP)
        return (rm->udp = udp_remote_new(o, sink)) ? 0 : -1;
    if (o->transport == TRANSPORT_WS || o->transport == TRANSPORT_TCP)
        rm->ws = ws_remote_new(o, sink);
    else
        rm->http = http_remote_new(o, sink);
    return rm->http || rm->ws ? 0 : -1;
}

void remote_free(struct remote *rm)
{
    if (rm->udp)
        udp_remote_free(rm->udp);
    else if (rm->ws)
        ws_remote_free(rm->ws);
    else
        http_remote_free(rm->http);
}

CURLM *remote_multi(struct remote *rm)
{
    if (rm->udp)
        return udp_remote_multi(rm->udp);
    return rm->ws ? ws_remote_multi(rm->ws) : http_remote_multi(rm->http);
}

int remote_fd(struct remote *rm, short *events)
{
    if (rm->udp)
        return udp_remote_fd(rm->udp, events);
    return rm->ws ? ws_remote_fd(rm->ws, events) : -1;
}

void remote_send(struct remote *rm, const char *body, size_t len, json_t *m)
{
    if (rm->udp)
        udp_remote_send(rm->udp, body, len, m);
    else if (rm->ws)
        ws_remote_send(rm->ws, body, len, m);
    else
        http_remote_send(rm->http, body, len, m);
}

void remote_cancel(struct remote *rm, const json_t *id)
{
    if (rm->http) {
        http_remote_cancel(rm->http, id);
        return;
    }
    /* a connection has no request to close: the server is told */
    json_t *m = json_pack("{s:s, s:s, s:{s:O}}", "jsonrpc", "2.0", "method",
                          "notifications/cancelled", "params", "requestId", id);
    char *body = m ? json_dumps(m, JSON_COMPACT) : NULL;
    if (body)
        remote_send(rm, body, strlen(body), m);
    free(body);
    json_decref(m);
}

void remote_run(struct remote *rm)
{
    if (rm->udp)
        udp_remote_run(rm->udp);
    else if (rm->ws)
        ws_remote_run(rm->ws);
    else
        http_remote_run(rm->http);
}

long remote_timeout_ms(struct remote *rm)
{
    if (rm->udp)
        return udp_remote_timeout_ms(rm->udp);
    return rm->ws ? ws_remote_timeout_ms(rm->ws) : http_remote_timeout_ms(rm->http);
}

int remote_pending(struct remote *rm)
{
    if (rm->udp)
        return udp_remote_pending(rm->udp);
    return rm->ws ? ws_remote_pending(rm->ws) : http_remote_pending(rm->http);
}

void remote_shutdown(struct remote *rm, const char *why)
{
    if (rm->udp)
        udp_remote_shutdown(rm->udp, why);
    else if (rm->ws)
        ws_remote_shutdown(rm->ws, why);
    else
        http_remote_shutdown(rm->http, why);
}
