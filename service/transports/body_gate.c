/* body_gate — see body_gate.h. */
#include "body_gate.h"
#include "clock.h"
#include "conn_guard.h"
#include "jsonrpc.h"
#include "log.h"
#include "metrics.h"
#include "request_log.h"
#include "ws.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <ulfius.h>
#include <unistd.h>

/* How long a refused connection is drained before it is closed, and how
 * long the chunked refusal may take to write. */
#define LINGER_MS 1000
#define WRITE_MS 2000

static struct {
    size_t max_body;
    MHD_AccessHandlerCallback inner; /* ulfius's access handler */
    void *inner_cls;
} gate;

/* The request on this connection's thread (thread-per-connection), reset
 * when it completes. */
static _Thread_local struct {
    int seen;          /* its first call has come */
    int refused;       /* answered 413: ulfius never sees it again */
    int websocket;     /* GET /mcp/ws: ws_upgrade answers it, not ulfius */
    uint64_t received; /* body bytes so far */
} req;

void body_gate_configure(size_t max_body)
{
    gate.max_body = max_body;
}

int body_gate_installed(void)
{
    return gate.inner != NULL;
}

static void too_large_message(char *msg, size_t cap)
{
    snprintf(msg, cap, "Payload Too Large: the limit is %zu bytes", gate.max_body);
}

/* The same JSON-RPC error the transports send for any refusal. */
static char *too_large_body(size_t *len)
{
    char msg[120];
    too_large_message(msg, sizeof msg);
    json_t *err = jsonrpc_error(NULL, JSONRPC_SERVER_ERROR, msg, NULL);
    char *text = json_dumps(err, JSON_COMPACT);
    json_decref(err);
    *len = text ? strlen(text) : 0;
    return text;
}

static void refused(const char *how)
{
    req.refused = 1;
    metrics_refused("body_too_large");
    log_event(LOG_DEBUG, NULL, "body_too_large", "%s (limit %zu bytes)", how, gate.max_body);
}

/* 413 on the first call, before libmicrohttpd reads any of the body. */
static enum MHD_Result refuse_declared(struct MHD_Connection *con)
{
    char msg[120];
    too_large_message(msg, sizeof msg);
    refused("declared Content-Length over the limit");
    return conn_guard_queue_refusal(con, MHD_HTTP_CONTENT_TOO_LARGE, JSONRPC_SERVER_ERROR, msg, 0);
}

static int wait_fd(int fd, short events, int64_t deadline)
{
    int64_t left = deadline - clock_mono_ms();
    if (left <= 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = events};
    return poll(&p, 1, (int)left) > 0;
}

/* 413 in the middle of a body: libmicrohttpd 0.9.75 accepts a response only
 * before the body or after all of it, so it goes straight to the socket;
 * the caller then has libmicrohttpd drop the connection. */
static void refuse_streamed(struct MHD_Connection *con)
{
    refused("body over the limit while it arrived");
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
    size_t len;
    char *body = too_large_body(&len);
    char *text = NULL;
    int n = body ? asprintf(&text,
                            "HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json\r\n"
                            "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                            len, body)
                 : -1;
    free(body);
    if (!ci || n < 0)
        return;
    int64_t deadline = clock_mono_ms() + WRITE_MS;
    for (size_t off = 0; off < (size_t)n;) {
        ssize_t w = send(ci->connect_fd, text + off, (size_t)n - off, MSG_NOSIGNAL);
        if (w > 0)
            off += (size_t)w;
        else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            break;
        else if (w < 0 && errno != EINTR && !wait_fd(ci->connect_fd, POLLOUT, deadline))
            break;
    }
    free(text);
}

/* A lingering close: no more writes, then discard what the client still
 * sends until it stops or LINGER_MS pass, so that closing with unread
 * bytes does not reset the connection before the 413 is read. */
static void linger(struct MHD_Connection *con)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || ci->connect_fd < 0)
        return;
    int fd = ci->connect_fd;
    shutdown(fd, SHUT_WR);
    char sink[16384];
    int64_t deadline = clock_mono_ms() + LINGER_MS;
    for (;;) {
        ssize_t r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return;
        if (r < 0 && errno != EINTR && !wait_fd(fd, POLLIN, deadline))
            return;
    }
}

static enum MHD_Result gate_access(void *cls, struct MHD_Connection *con, const char *url,
                                   const char *method, const char *version, const char *upload_data,
                                   size_t *upload_data_size, void **con_cls)
{
    (void)cls;
    if (req.refused)
        return MHD_YES;
    if (!req.seen) {
        req.seen = 1;
        request_log_begin(method, url);
        enum MHD_Result rc;
        if (conn_guard_request_begin(con, &rc)) {
            req.refused = 1;
            return rc;
        }
        if (strcmp(method, "GET") == 0 && strcmp(url, "/mcp/ws") == 0) {
            req.websocket = 1;
            return MHD_YES;
        }
        const char *clen =
            MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        /* libmicrohttpd has already refused a malformed Content-Length. */
        if (clen && strtoull(clen, NULL, 10) > gate.max_body)
            return refuse_declared(con);
    } else if (*upload_data_size == 0) {
        conn_guard_request_received(con);
        if (req.websocket)
            return ws_upgrade(con);
    } else if (req.websocket) {
        *upload_data_size = 0; /* a handshake has no body: ignored */
        return MHD_YES;
    } else {
        req.received += *upload_data_size;
        request_log_body(*upload_data_size);
        if (req.received > gate.max_body) {
            refuse_streamed(con);
            linger(con);
            return MHD_NO;
        }
    }
    return gate.inner(gate.inner_cls, con, url, method, version, upload_data, upload_data_size,
                      con_cls);
}

void body_gate_request_completed(void *cls, struct MHD_Connection *con, void **con_cls,
                                 enum MHD_RequestTerminationCode toe)
{
    if (req.refused && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        linger(con);
    conn_guard_request_done(con);
    request_log_end(con);
    if (req.websocket)
        ws_request_completed();
    memset(&req, 0, sizeof req);
    mhd_request_completed(cls, con, con_cls, toe);
}

/* Interposes libmicrohttpd's MHD_start_daemon for ulfius (see body_gate.h).
 * Only thread-per-connection daemons are gated: the request state is per
 * thread. */
struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc,
                                    void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
    va_list ap;
    va_start(ap, dh_cls);
    struct MHD_Daemon *d;
    if (flags & MHD_USE_THREAD_PER_CONNECTION) {
        gate.inner = dh;
        gate.inner_cls = dh_cls;
        d = MHD_start_daemon_va(flags, port, apc, apc_cls, gate_access, NULL, ap);
    } else {
        d = MHD_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
    }
    va_end(ap);
    return d;
}
