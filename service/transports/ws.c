/* ws — see ws.h. */
#include "ws.h"
#include "clock.h"
#include "jsonrpc.h"
#include "log.h"
#include "origin.h"
#include "push.h"
#include "stream.h"
#include "ws_frame.h"
#include "ws_handshake.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/uio.h>
#include <ulfius.h>

#define WS_TRANSPORT "ws"
#define READ_BUF 16384
/* After a close frame, how long to keep reading (and discarding) for the
 * client's own close or its FIN. Closing with unread data in the receive
 * buffer would make the kernel send a reset, which can destroy the close
 * frame before the client reads it. */
#define LINGER_MS 2000

static struct ws_config ws_cfg = {1048576, 15000, 10000, NULL};

/* Readable once ws_stop is called: every session's read loop polls it too,
 * so all of them say goodbye (1001) at once. */
static int stop_fd = -1;
/* Sessions running, so ws_stop can wait for their close frames to go out
 * before the HTTP server tears the sockets down. */
static atomic_int running_sessions;

/* The connection whose request line this thread parsed last: set by
 * ws_uri_logger, taken by ws_endpoint (same thread, thread-per-connection). */
static _Thread_local struct MHD_Connection *ws_current_con;

void ws_configure(const struct ws_config *cfg)
{
    ws_cfg = *cfg;
    if (ws_cfg.max_message == 0)
        ws_cfg.max_message = 1048576;
    if (ws_cfg.ping_ms <= 0)
        ws_cfg.ping_ms = 15000;
    if (ws_cfg.ping_ms > 86400000) /* keeps 2 * ping_ms and poll()'s int in range */
        ws_cfg.ping_ms = 86400000;
    if (ws_cfg.write_timeout_ms <= 0)
        ws_cfg.write_timeout_ms = 10000;
    if (stop_fd < 0)
        stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

void ws_stop(void)
{
    uint64_t one = 1;
    if (stop_fd < 0 || write(stop_fd, &one, sizeof one) < 0) {
        log_event(LOG_WARN, NULL, "ws_stop_failed", "cannot signal WebSocket sessions");
        return;
    }
    int64_t deadline = clock_mono_ms() + LINGER_MS + 1000;
    while (atomic_load(&running_sessions) > 0 && clock_mono_ms() < deadline) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
}

void *ws_uri_logger(void *cls, const char *uri, struct MHD_Connection *con)
{
    ws_current_con = con;
    return ulfius_uri_logger(cls, uri);
}

/* ---- HTTP answers before the upgrade ---- */

static int fail(struct _u_response *resp, unsigned status, int code, const char *message)
{
    json_t *body = jsonrpc_error(NULL, code, message, NULL);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    ulfius_set_string_body_response(resp, status, text ? text : "{}");
    u_map_put(resp->map_header, "Content-Type", "application/json");
    free(text);
    return U_CALLBACK_COMPLETE;
}

static const char *header(const struct _u_request *req, const char *name)
{
    return u_map_get_case(req->map_header, name);
}

/* 1 if the comma-separated list `value` has `token` (case-insensitive). */
static int has_token(const char *value, const char *token)
{
    size_t tlen = strlen(token);
    const char *p = value;
    while (p && *p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        size_t len = strcspn(p, ",");
        size_t end = len;
        while (end > 0 && (p[end - 1] == ' ' || p[end - 1] == '\t'))
            end--;
        if (end == tlen && strncasecmp(p, token, tlen) == 0)
            return 1;
        p += len;
    }
    return 0;
}

/* The MHD connection of this request, or NULL if this thread's record does
 * not belong to it (not thread-per-connection mode, or no logger wired). */
static struct MHD_Connection *take_connection(const struct _u_request *req)
{
    struct MHD_Connection *con = ws_current_con;
    ws_current_con = NULL;
    if (!con)
        return NULL;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(con, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr || !req->client_address)
        return NULL;
    const struct sockaddr *a = ci->client_addr, *b = req->client_address;
    if (a->sa_family != b->sa_family)
        return NULL;
    size_t len = a->sa_family == AF_INET    ? sizeof(struct sockaddr_in)
                 : a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                            : 0;
    /* ulfius keeps only sizeof(struct sockaddr) bytes of the address (all
     * of an IPv4 one; family, port and half the address for IPv6), which
     * is plenty to tell one connection from another. */
    if (len > sizeof(struct sockaddr))
        len = sizeof(struct sockaddr);
    if (len == 0 || memcmp(a, b, len) != 0)
        return NULL;
    return con;
}

/* ---- the connection ---- */

struct ws_conn {
    int fd;
    pthread_mutex_t wmu; /* one frame at a time on the socket */
    int closing;         /* a close frame went out: no more data frames (under wmu) */
    atomic_int dead;     /* a write failed or timed out: stop */
    struct push *push;
    struct ws_parser parser;
    const char *why;   /* how the session ended, for the log (static text) */
    unsigned why_code; /* the close code sent, 0 if none */
};

/* Marks the connection dead and wakes the reading thread: after
 * shutdown() its poll() sees end of file at once. The descriptor itself
 * stays open (MHD closes it after ws_endpoint returns), so no other
 * connection can reuse the number while push's writer might still use it. */
static void conn_kill(struct ws_conn *c)
{
    atomic_store(&c->dead, 1);
    shutdown(c->fd, SHUT_RDWR);
}

/* Writes the iovecs completely within write_timeout_ms. Caller holds wmu.
 * A client that does not read fills the socket buffer; it gets the
 * timeout, not a thread blocked forever. Returns 0 or -1. */
static int conn_writev(struct ws_conn *c, struct iovec *iov, int n)
{
    if (atomic_load(&c->dead))
        return -1;
    int64_t deadline = clock_mono_ms() + ws_cfg.write_timeout_ms;
    while (n > 0) {
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                conn_kill(c);
                return -1;
            }
            int64_t left = deadline - clock_mono_ms();
            if (left <= 0) {
                log_event(LOG_WARN, push_session_id(c->push), "ws_write_timeout",
                          "the client did not read for %lld ms; closing",
                          (long long)ws_cfg.write_timeout_ms);
                conn_kill(c);
                return -1;
            }
            struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
            poll(&pfd, 1, left > 1000 ? 1000 : (int)left);
            if (atomic_load(&c->dead))
                return -1;
            continue;
        }
        size_t done = (size_t)w;
        while (n > 0 && done >= iov->iov_len) {
            done -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + done;
            iov->iov_len -= done;
        }
    }
    return 0;
}

/* push_io.send: one message, one text frame. Called by push's writer
 * thread and, for immediate answers, by the reading thread. */
static int conn_send(void *io, const char *msg, size_t len)
{
    struct ws_conn *c = io;
    unsigned char hdr[WS_MAX_HEADER];
    struct iovec iov[2] = {
        {.iov_base = hdr, .iov_len = ws_frame_header(hdr, WS_OP_TEXT, len)},
        {.iov_base = (void *)msg, .iov_len = len},
    };
    pthread_mutex_lock(&c->wmu);
    int rc = c->closing ? -1 : conn_writev(c, iov, len ? 2 : 1);
    pthread_mutex_unlock(&c->wmu);
    return rc;
}

static int send_control(struct ws_conn *c, enum ws_opcode op, const void *payload, size_t len)
{
    unsigned char f[WS_MAX_CONTROL_FRAME];
    size_t n = ws_frame_control(f, op, payload, len);
    pthread_mutex_lock(&c->wmu);
    int rc = c->closing ? -1 : conn_writev(c, &(struct iovec){.iov_base = f, .iov_len = n}, 1);
    pthread_mutex_unlock(&c->wmu);
    return rc;
}

/* Sends our close frame (code 0: an empty one) and stops data frames, then
 * half-closes and reads what the client still sends until it closes too
 * (or LINGER_MS pass), so the close frame is not lost to a reset. */
static void close_with(struct ws_conn *c, uint16_t code, const char *reason)
{
    unsigned char f[WS_MAX_CONTROL_FRAME];
    size_t n = ws_frame_close(f, code, reason);
    pthread_mutex_lock(&c->wmu);
    c->closing = 1;
    int rc = conn_writev(c, &(struct iovec){.iov_base = f, .iov_len = n}, 1);
    pthread_mutex_unlock(&c->wmu);
    if (rc != 0)
        return;
    shutdown(c->fd, SHUT_WR);
    int64_t deadline = clock_mono_ms() + LINGER_MS;
    char sink[4096];
    for (;;) {
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0)
            break;
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        ssize_t got = recv(c->fd, sink, sizeof sink, 0);
        if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN))
            break;
    }
}

/* Hands one event to push or answers it. Returns 1 when the connection is
 * to end. */
static int on_event(struct ws_conn *c, const struct ws_event *ev, int64_t *awaiting_pong)
{
    switch (ev->kind) {
    case WS_EV_NONE:
        return 0;
    case WS_EV_MESSAGE:
        push_receive(c->push, ev->data, ev->len);
        return 0;
    case WS_EV_PING:
        return send_control(c, WS_OP_PONG, ev->data, ev->len) != 0;
    case WS_EV_PONG:
        *awaiting_pong = 0;
        return 0;
    case WS_EV_CLOSE:
        log_event(LOG_DEBUG, push_session_id(c->push), "ws_close_received", "code %u",
                  (unsigned)ev->code);
        close_with(c, ev->code, ev->reason); /* the echo */
        c->why = "closed by the client";
        c->why_code = ev->code;
        return 1;
    case WS_EV_ERROR:
        log_event(LOG_INFO, push_session_id(c->push), "ws_bad_frame", "closing with %u: %s",
                  (unsigned)ev->code, ev->reason);
        close_with(c, ev->code, ev->reason);
        c->why = ev->reason;
        c->why_code = ev->code;
        return 1;
    }
    return 0;
}

/* The session: reads frames until the client closes, breaks the protocol,
 * stops answering pings, or a write fails. */
static void conn_run(struct ws_conn *c)
{
    unsigned char *buf = malloc(READ_BUF);
    if (!buf) {
        close_with(c, WS_CLOSE_INTERNAL_ERROR, "out of memory");
        return;
    }
    int64_t next_ping = clock_mono_ms() + ws_cfg.ping_ms;
    int64_t awaiting_pong = 0; /* when the oldest unanswered ping went out */
    for (;;) {
        if (atomic_load(&c->dead))
            break;
        int64_t now = clock_mono_ms();
        if (awaiting_pong && now - awaiting_pong >= 2 * ws_cfg.ping_ms) {
            log_event(LOG_INFO, push_session_id(c->push), "ws_ping_timeout",
                      "no pong for %lld ms; closing", (long long)(now - awaiting_pong));
            close_with(c, WS_CLOSE_GOING_AWAY, "ping timeout");
            c->why = "ping timeout";
            c->why_code = WS_CLOSE_GOING_AWAY;
            break;
        }
        if (now >= next_ping) {
            if (send_control(c, WS_OP_PING, "mcpd", 4) != 0)
                break;
            if (!awaiting_pong)
                awaiting_pong = now;
            next_ping = now + ws_cfg.ping_ms;
        }
        int64_t wait = next_ping - now;
        if (awaiting_pong && awaiting_pong + 2 * ws_cfg.ping_ms - now < wait)
            wait = awaiting_pong + 2 * ws_cfg.ping_ms - now;
        if (wait < 0)
            wait = 0;
        struct pollfd pfd[2] = {{.fd = c->fd, .events = POLLIN}, {.fd = stop_fd, .events = POLLIN}};
        int r = poll(pfd, stop_fd >= 0 ? 2 : 1, wait > 60000 ? 60000 : (int)wait);
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        if (stop_fd >= 0 && (pfd[1].revents & POLLIN)) {
            close_with(c, WS_CLOSE_GOING_AWAY, "server shutting down");
            c->why = "server shutting down";
            c->why_code = WS_CLOSE_GOING_AWAY;
            break;
        }
        ssize_t got = recv(c->fd, buf, READ_BUF, 0);
        if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (got <= 0) {
            /* The client vanished without a close frame, or a writer gave
             * up on it and shut the socket down. */
            c->why = atomic_load(&c->dead) ? "the client stopped reading" : "connection lost";
            break;
        }
        size_t off = 0, len = (size_t)got;
        int end = 0;
        while (off < len && !end) {
            struct ws_event ev;
            off += ws_parser_feed(&c->parser, buf + off, len - off, &ev);
            end = on_event(c, &ev, &awaiting_pong);
        }
        if (end)
            break;
    }
    free(buf);
}

/* ---- the endpoint ---- */

static const char *query(const struct _u_request *req, const char *name)
{
    const char *v = u_map_get(req->map_url, name);
    return v && *v ? v : NULL;
}

/* The handshake's checks. Returns 0, or answers resp and returns -1. */
static int check_handshake(const struct _u_request *req, struct _u_response *resp)
{
    if (!origin_host_allowed(ws_cfg.origins, header(req, "Host"))) {
        fail(resp, 403, JSONRPC_SERVER_ERROR, "Forbidden: Host header not allowed");
        return -1;
    }
    if (!origin_origin_allowed(ws_cfg.origins, header(req, "Origin"))) {
        fail(resp, 403, JSONRPC_SERVER_ERROR, "Forbidden: Origin not allowed");
        return -1;
    }
    const char *upgrade = header(req, "Upgrade");
    if (!upgrade || !has_token(upgrade, "websocket")) {
        u_map_put(resp->map_header, "Upgrade", "websocket");
        fail(resp, 426, JSONRPC_SERVER_ERROR,
             "Upgrade Required: /mcp/ws takes a WebSocket handshake (Upgrade: websocket)");
        return -1;
    }
    const char *connection = header(req, "Connection");
    if (!connection || !has_token(connection, "upgrade")) {
        fail(resp, 400, JSONRPC_SERVER_ERROR, "Bad Request: Connection must include Upgrade");
        return -1;
    }
    const char *version = header(req, "Sec-WebSocket-Version");
    if (!version || strcmp(version, "13") != 0) {
        u_map_put(resp->map_header, "Sec-WebSocket-Version", "13");
        fail(resp, 426, JSONRPC_SERVER_ERROR, "Upgrade Required: Sec-WebSocket-Version must be 13");
        return -1;
    }
    if (!ws_handshake_key_ok(header(req, "Sec-WebSocket-Key"))) {
        fail(resp, 400, JSONRPC_SERVER_ERROR,
             "Bad Request: Sec-WebSocket-Key must be 16 base64-encoded bytes");
        return -1;
    }
    const char *proto = header(req, "Sec-WebSocket-Protocol");
    if (!proto || !has_token(proto, "mcp")) {
        fail(resp, 400, JSONRPC_SERVER_ERROR,
             "Bad Request: the WebSocket subprotocol must be \"mcp\" (Sec-WebSocket-Protocol)");
        return -1;
    }
    return 0;
}

/* What ulfius sends after the session: nothing reaches the client, since
 * the socket is shut down; MHD's write fails and it drops the connection. */
static int done(struct _u_response *resp)
{
    ulfius_set_empty_body_response(resp, 200);
    u_map_put(resp->map_header, "Connection", "close");
    return U_CALLBACK_COMPLETE;
}

int ws_endpoint(const struct _u_request *req, struct _u_response *resp, void *user_data)
{
    (void)user_data;
    if (check_handshake(req, resp) != 0)
        return U_CALLBACK_COMPLETE;
    struct MHD_Connection *con = take_connection(req);
    const union MHD_ConnectionInfo *ci =
        con ? MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD) : NULL;
    if (!ci || ci->connect_fd < 0) {
        log_event(LOG_ERROR, NULL, "ws_unavailable",
                  "no socket for the WebSocket upgrade (is ws_uri_logger installed?)");
        return fail(resp, 503, JSONRPC_INTERNAL_ERROR, "WebSocket unavailable");
    }
    char accept[29];
    if (ws_handshake_accept(header(req, "Sec-WebSocket-Key"), accept) != 0)
        return fail(resp, 503, JSONRPC_INTERNAL_ERROR, "WebSocket unavailable");

    struct ws_conn *c = calloc(1, sizeof *c);
    if (!c)
        return fail(resp, 503, JSONRPC_INTERNAL_ERROR, "Out of memory");
    c->fd = ci->connect_fd;
    pthread_mutex_init(&c->wmu, NULL);
    ws_parser_init(&c->parser, ws_cfg.max_message);
    struct push_io io = {.send = conn_send, .io = c, .transport = WS_TRANSPORT, .event_ids = 1};
    c->push = push_open(&io);
    if (!c->push) {
        pthread_mutex_destroy(&c->wmu);
        free(c);
        return fail(resp, 503, JSONRPC_INTERNAL_ERROR, "Out of memory");
    }

    /* Resuming hands streams to push's writer at once; holding the write mutex keeps
     * their first frames behind the 101, and lets a refusal still be an
     * ordinary HTTP answer. */
    const char *sid = header(req, "Mcp-Session-Id");
    const char *last = header(req, "Last-Event-ID");
    if (!sid) {
        sid = query(req, "session");
        if (!last)
            last = query(req, "last_event_id");
    }
    pthread_mutex_lock(&c->wmu);
    int rc = sid ? push_resume(c->push, sid, last) : 0;
    if (rc != 0) {
        pthread_mutex_unlock(&c->wmu);
        push_close(c->push);
        ws_parser_free(&c->parser);
        pthread_mutex_destroy(&c->wmu);
        free(c);
        if (rc == -1)
            return fail(resp, 404, JSONRPC_SESSION_NOT_FOUND, "Session not found");
        enum stream_cursor why = rc == -3 ? STREAM_CURSOR_BAD : STREAM_CURSOR_UNKNOWN;
        return fail(resp, 400, stream_cursor_code(why), stream_cursor_message(why));
    }
    int fl = fcntl(c->fd, F_GETFL);
    if (fl >= 0)
        fcntl(c->fd, F_SETFL, fl | O_NONBLOCK);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char head[256];
    int hlen = snprintf(head, sizeof head,
                        "HTTP/1.1 101 Switching Protocols\r\n"
                        "Upgrade: websocket\r\n"
                        "Connection: Upgrade\r\n"
                        "Sec-WebSocket-Accept: %s\r\n"
                        "Sec-WebSocket-Protocol: mcp\r\n"
                        "%s%s%s\r\n",
                        accept, sid ? "Mcp-Session-Id: " : "", sid ? push_session_id(c->push) : "",
                        sid ? "\r\n" : "");
    struct iovec iov = {.iov_base = head, .iov_len = (size_t)hlen};
    int ok = hlen > 0 && (size_t)hlen < sizeof head && conn_writev(c, &iov, 1) == 0;
    pthread_mutex_unlock(&c->wmu);

    if (ok) {
        log_event(LOG_INFO, push_session_id(c->push), "ws_open", "%s%s",
                  sid ? "resumed" : "new connection", last ? " from an event id" : "");
        atomic_fetch_add(&running_sessions, 1);
        conn_run(c);
    }
    /* Stop push's writer first (a write they are blocked in fails once
     * the socket is shut down), then let go of everything. */
    char sid_copy[80];
    snprintf(sid_copy, sizeof sid_copy, "%s",
             push_session_id(c->push) ? push_session_id(c->push) : "");
    conn_kill(c);
    push_close(c->push);
    log_event(LOG_INFO, sid_copy[0] ? sid_copy : NULL, "ws_closed", "%s (close code %u)",
              c->why ? c->why : "a write failed or timed out", c->why_code);
    ws_parser_free(&c->parser);
    pthread_mutex_destroy(&c->wmu);
    free(c);
    if (ok)
        atomic_fetch_sub(&running_sessions, 1);
    return done(resp);
}
