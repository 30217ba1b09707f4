/* ws — see ws.h. */
#include "ws.h"
#include "auth.h"
#include "clock.h"
#include "conn_guard.h"
#include "fcond.h"
#include "jsonrpc.h"
#include "log.h"
#include "loop.h"
#include "origin.h"
#include "reader_set.h"
#include "refusal.h"
#include "push.h"
#include "request_host.h"
#include "request_log.h"
#include "sock_io.h"
#include "stream.h"
#include "ws_frame.h"
#include "ws_handshake.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>
#include <microhttpd.h>

#define WS_TRANSPORT "ws"
#define READ_BUF 16384
/* After a close frame, how long to keep reading (and discarding) for the
 * client's own close or its FIN. Closing with unread data in the receive
 * buffer would make the kernel send a reset, which can destroy the close
 * frame before the client reads it. */
#define LINGER_MS 2000

static struct ws_config ws_cfg = {1048576, 15000, 10000, NULL};

/* Set by ws_stop, which wakes every session's reader (each on the list
 * below), so all of them say goodbye (1001) at once. */
static atomic_int stopping;
/* Sessions running, so ws_stop can wait for their close frames to go out
 * before the HTTP server tears the sockets down. */
static atomic_int running_sessions;
/* The sessions whose reader runs, for ws_stop and a token's end to wake
 * them. */
static struct reader_set readers = READER_SET_INIT;

void ws_configure(const struct ws_config *cfg)
{
    ws_cfg = *cfg;
    if (ws_cfg.max_message == 0)
        ws_cfg.max_message = 1048576;
    if (ws_cfg.ping_ms <= 0)
        ws_cfg.ping_ms = 15000;
    if (ws_cfg.ping_ms > 86400000) /* keeps 2 * ping_ms in range */
        ws_cfg.ping_ms = 86400000;
    if (ws_cfg.write_timeout_ms <= 0)
        ws_cfg.write_timeout_ms = 10000;
}

static void kill_one(void *conn);

static void wait_sessions(int64_t ms)
{
    int64_t deadline = clock_mono_ms() + ms;
    while (atomic_load(&running_sessions) > 0 && clock_mono_ms() < deadline) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
}

void ws_stop(void)
{
    atomic_store(&stopping, 1);
    reader_set_wake_all(&readers);
    wait_sessions(LINGER_MS + 1000);
    /* A session still here is stuck on a client that does not read or
     * close: cut its socket, so that it ends before the HTTP server
     * stops (which no longer knows of the session's socket). */
    reader_set_each(&readers, kill_one);
    wait_sessions(1000);
}

/* ---- HTTP answers before the upgrade ---- */

/* Answers the handshake with a JSON-RPC error (and one extra header, or
 * none). Returns what the access handler returns. */
static enum MHD_Result fail(struct MHD_Connection *con, unsigned status, int code,
                            const char *message, const char *hname, const char *hvalue)
{
    char *text = refusal_body(code, message);
    struct MHD_Response *r =
        text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (hname)
        MHD_add_response_header(r, hname, hvalue);
    enum MHD_Result rc = MHD_queue_response(con, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* A header field's value as request_host.h reads it (trailing whitespace
 * cut, lines joined): the handshake runs on its request's fiber. Outside
 * the request host, libmicrohttpd's first line as it came. */
static const char *header(struct MHD_Connection *con, const char *name)
{
    struct host_req *g = request_host_current();
    return g ? request_host_header(g, name)
             : MHD_lookup_connection_value(con, MHD_HEADER_KIND, name);
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

struct token_seek {
    const char *name, *token;
    int found;
};

static enum MHD_Result seek_token(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    (void)kind;
    struct token_seek *t = cls;
    t->found = value && strcasecmp(key, t->name) == 0 && has_token(value, t->token);
    return t->found ? MHD_NO : MHD_YES;
}

/* 1 if any field `name` lists `token`: a field on several lines is one
 * list (RFC 9110 5.3), and a lookup sees the first line only. */
static int header_has_token(struct MHD_Connection *con, const char *name, const char *token)
{
    struct token_seek t = {name, token, 0};
    MHD_get_connection_values(con, MHD_HEADER_KIND, seek_token, &t);
    return t.found;
}

/* ---- the connection ---- */

struct ws_conn {
    int fd;
    struct fmutex wmu; /* one frame at a time on the socket (held across a wait) */
    int closing;       /* a close frame went out: no more data frames (under wmu) */
    atomic_int dead;   /* a write failed or timed out: stop */
    struct push *push;
    struct ws_parser parser;
    /* How the connection ended, for the log (static text; the first reason
     * wins), and the close code sent (0 if none). Under wmu: the reader
     * and push's writer both end connections. */
    const char *why;
    unsigned why_code;
    int resumed, from_event; /* for the log */
    int64_t opened_ms;       /* the 101, for the log's "after N ms" */
    /* Until the 101 went out: the request host's pointer to this connection,
     * cleared once it is upgraded (ws_request_completed frees what it
     * still points to). */
    struct ws_conn **pending;
    /* After the 101: fd is a duplicate of the socket and libmicrohttpd's
     * connection is closed (its 32 KiB pool freed), urh NULL, and slot
     * keeps the socket counted (conn_guard.h). Without a descriptor to
     * spare, fd is libmicrohttpd's own and urh closes it at the end. */
    struct MHD_UpgradeResponseHandle *urh;
    struct conn_slot *slot;
    unsigned char *extra; /* read past the handshake, parsed first */
    size_t extra_len;
    /* The handshake's token (push holds it): once it is revoked or
     * expires, token_why says so (static text) and the reader is woken,
     * which closes with 1008. */
    _Atomic(const char *) token_why;
    /* push_io.session_named's: for the log lines (push's writer logs too). */
    _Atomic(const char *) session_id;
    /* On `readers` while the reader runs. */
    struct reader reader;
};

static void set_why(struct ws_conn *c, const char *why, unsigned code)
{
    fmutex_lock(&c->wmu);
    if (!c->why) {
        c->why = why;
        c->why_code = code;
    }
    fmutex_unlock(&c->wmu);
}

/* Marks the connection dead and wakes the reader: after shutdown() its
 * wait sees end of file at once. The descriptor itself
 * stays open (MHD closes it once the upgrade is closed, after push's writer
 * has stopped), so no other connection can reuse the number meanwhile. */
static void conn_kill(struct ws_conn *c)
{
    atomic_store(&c->dead, 1);
    shutdown(c->fd, SHUT_RDWR);
}

/* reader_set_each's, at ws_stop. */
static void kill_one(void *conn)
{
    conn_kill(conn);
}

/* Writes the iovecs completely within write_timeout_ms. Caller holds wmu.
 * A client that does not read fills the socket buffer; it gets the
 * timeout, not a thread blocked forever. Returns 0 or -1. */
static int conn_writev(struct ws_conn *c, struct iovec *iov, int n)
{
    if (atomic_load(&c->dead))
        return -1;
    int rc = sock_io_write(c->fd, iov, n, ws_cfg.write_timeout_ms, &c->dead);
    if (rc == 0)
        return 0;
    if (rc == SOCK_IO_TIMEOUT)
        log_event(LOG_WARN, atomic_load(&c->session_id), "ws_write_timeout",
                  "the client did not read for %lld ms; closing",
                  (long long)ws_cfg.write_timeout_ms);
    conn_kill(c);
    return -1;
}

/* push_io.send: one message, one text frame. Called by push's writer
 * and, for immediate answers, by the reader (both loop fibers). */
static int conn_send(void *io, const char *msg, size_t len)
{
    struct ws_conn *c = io;
    unsigned char hdr[WS_MAX_HEADER];
    struct iovec iov[2] = {
        {.iov_base = hdr, .iov_len = ws_frame_header(hdr, WS_OP_TEXT, len)},
        {.iov_base = (void *)msg, .iov_len = len},
    };
    fmutex_lock(&c->wmu);
    int rc = c->closing ? -1 : conn_writev(c, iov, len ? 2 : 1);
    fmutex_unlock(&c->wmu);
    return rc;
}

static int send_control(struct ws_conn *c, enum ws_opcode op, const void *payload, size_t len)
{
    unsigned char f[WS_MAX_CONTROL_FRAME];
    size_t n = ws_frame_control(f, op, payload, len);
    fmutex_lock(&c->wmu);
    int rc = c->closing ? -1 : conn_writev(c, &(struct iovec){.iov_base = f, .iov_len = n}, 1);
    fmutex_unlock(&c->wmu);
    return rc;
}

/* Sends our close frame (code 0: an empty one) and stops data frames, then
 * half-closes and reads what the client still sends until it closes too
 * (or LINGER_MS pass), so the close frame is not lost to a reset. Nothing
 * when a close frame went out already (RFC 6455 5.5.1: one each way). */
static void close_with(struct ws_conn *c, uint16_t code, const char *reason)
{
    unsigned char f[WS_MAX_CONTROL_FRAME];
    size_t n = ws_frame_close(f, code, reason);
    fmutex_lock(&c->wmu);
    int sent_before = c->closing;
    c->closing = 1;
    int rc = sent_before ? -1 : conn_writev(c, &(struct iovec){.iov_base = f, .iov_len = n}, 1);
    fmutex_unlock(&c->wmu);
    if (rc == 0)
        sock_io_linger(c->fd, LINGER_MS);
}

/* push_io.session_named. */
static void conn_session_named(void *io, const char *session_id)
{
    atomic_store(&((struct ws_conn *)io)->session_id, session_id);
}

/* push_io.session_ended: the session was deleted, expired or killed
 * elsewhere. Says so with a close frame, then ends the read loop (it sees
 * end of file), which tears the connection down. A session ended because
 * its token was revoked says that (kill_watch ends the token's holds
 * before its sessions). */
static void conn_session_ended(void *io)
{
    struct ws_conn *c = io;
    const char *token_why = atomic_load(&c->token_why);
    const char *why = token_why ? token_why : "session ended";
    unsigned code = token_why ? WS_CLOSE_POLICY_VIOLATION : WS_CLOSE_NORMAL;
    unsigned char f[WS_MAX_CONTROL_FRAME];
    size_t n = ws_frame_close(f, (uint16_t)code, why);
    fmutex_lock(&c->wmu);
    if (!c->closing && c->fd >= 0) {
        c->closing = 1;
        conn_writev(c, &(struct iovec){.iov_base = f, .iov_len = n}, 1);
        if (!c->why) { /* set_why's work: wmu is held */
            c->why = why;
            c->why_code = code;
        }
        shutdown(c->fd, SHUT_RD);
    }
    fmutex_unlock(&c->wmu);
}

/* push_io.token_ended: the handshake's token was revoked or expired (on
 * the watcher's thread, under auth's lock): records why and wakes the reader,
 * which sends the close frame. Before the reader runs there is none to
 * wake: its first look sees token_why. */
static void conn_token_ended(void *ud, const char *why)
{
    struct ws_conn *c = ud;
    atomic_store(&c->token_why, why);
    reader_set_wake(&readers, &c->reader);
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
        log_event(LOG_DEBUG, atomic_load(&c->session_id), "ws_close_received", "code %u",
                  (unsigned)ev->code);
        close_with(c, ev->code, ev->reason); /* the echo */
        set_why(c, "closed by the client", ev->code);
        return 1;
    case WS_EV_ERROR:
        log_event(LOG_INFO, atomic_load(&c->session_id), "ws_bad_frame", "closing with %u: %s",
                  (unsigned)ev->code, ev->reason);
        close_with(c, ev->code, ev->reason);
        set_why(c, ev->reason, ev->code);
        return 1;
    }
    return 0;
}

/* Parses bytes from the client and acts on each event. Returns 1 when the
 * connection is to end. */
static int feed(struct ws_conn *c, const unsigned char *buf, size_t len, int64_t *awaiting_pong)
{
    size_t off = 0;
    int end = 0;
    while (off < len && !end) {
        struct ws_event ev;
        off += ws_parser_feed(&c->parser, buf + off, len - off, &ev);
        end = on_event(c, &ev, awaiting_pong);
    }
    return end;
}

/* The session: reads frames until the client closes, breaks the protocol,
 * stops answering pings, or a write fails. `early` holds what the client
 * sent right behind its handshake, which libmicrohttpd had already read. */
static void conn_run(struct ws_conn *c, const unsigned char *early, size_t early_len)
{
    /* Held only while there is something to read: an idle session (most
     * of them) parks without one, which is 8 KiB or more of resident
     * memory per session at 10,000 sessions. */
    unsigned char *buf = NULL;
    int64_t next_ping = clock_mono_ms() + ws_cfg.ping_ms;
    int64_t awaiting_pong = 0; /* when the oldest unanswered ping went out */
    if (early_len && feed(c, early, early_len, &awaiting_pong))
        return;
    for (;;) {
        if (atomic_load(&c->dead))
            break;
        if (atomic_load(&stopping)) {
            close_with(c, WS_CLOSE_GOING_AWAY, "server shutting down");
            set_why(c, "server shutting down", WS_CLOSE_GOING_AWAY);
            break;
        }
        const char *token_why = atomic_load(&c->token_why);
        if (token_why) { /* ws_closed logs it */
            close_with(c, WS_CLOSE_POLICY_VIOLATION, token_why);
            set_why(c, token_why, WS_CLOSE_POLICY_VIOLATION);
            break;
        }
        int64_t now = clock_mono_ms();
        if (awaiting_pong && now - awaiting_pong >= 2 * ws_cfg.ping_ms) {
            log_event(LOG_INFO, atomic_load(&c->session_id), "ws_ping_timeout",
                      "no pong for %lld ms; closing", (long long)(now - awaiting_pong));
            close_with(c, WS_CLOSE_GOING_AWAY, "ping timeout");
            set_why(c, "ping timeout", WS_CLOSE_GOING_AWAY);
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
        if (!buf && !(buf = malloc(READ_BUF))) {
            close_with(c, WS_CLOSE_INTERNAL_ERROR, "out of memory");
            set_why(c, "out of memory", WS_CLOSE_INTERNAL_ERROR);
            break;
        }
        ssize_t got = recv(c->fd, buf, READ_BUF, MSG_DONTWAIT);
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* Nothing to read: park until there is, the next ping, or a
             * wake (a token's end, ws_stop: seen at the top of the loop). */
            free(buf);
            buf = NULL;
            int rc = loop_wait_fd(c->fd, EPOLLIN, now + wait);
            if (rc == ECANCELED) { /* loop_stop's backstop: no close frame */
                set_why(c, "server shutting down", 0);
                break;
            }
            if (rc != 0 && rc != ETIMEDOUT && rc != EINTR) {
                set_why(c, "cannot wait for the socket", 0);
                break;
            }
            continue;
        }
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            /* The client vanished without a close frame, or a writer gave
             * up on it and shut the socket down. */
            set_why(c, atomic_load(&c->dead) ? "the client stopped reading" : "connection lost", 0);
            break;
        }
        if (feed(c, buf, (size_t)got, &awaiting_pong))
            break;
    }
    free(buf);
}

/* ---- the handshake ---- */

static const char *query(struct MHD_Connection *con, const char *name)
{
    const char *v = MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, name);
    return v && *v ? v : NULL;
}

/* The handshake's checks. Returns 0, or queues the refusal in *rc and
 * returns -1. */
static int check_handshake(struct MHD_Connection *con, enum MHD_Result *rc)
{
    const char *version = header(con, "Sec-WebSocket-Version");
    const char *forbidden =
        origin_refusal(ws_cfg.origins, header(con, "Host"), header(con, "Origin"));
    if (forbidden)
        *rc = fail(con, 403, JSONRPC_SERVER_ERROR, forbidden, NULL, NULL);
    else if (!header_has_token(con, "Upgrade", "websocket"))
        *rc = fail(con, 426, JSONRPC_SERVER_ERROR,
                   "Upgrade Required: /mcp/ws takes a WebSocket handshake (Upgrade: websocket)",
                   "Upgrade", "websocket");
    else if (!header_has_token(con, "Connection", "upgrade"))
        *rc = fail(con, 400, JSONRPC_SERVER_ERROR, "Bad Request: Connection must include Upgrade",
                   NULL, NULL);
    else if (!version || strcmp(version, "13") != 0)
        *rc = fail(con, 426, JSONRPC_SERVER_ERROR,
                   "Upgrade Required: Sec-WebSocket-Version must be 13", "Sec-WebSocket-Version",
                   "13");
    else if (!ws_handshake_key_ok(header(con, "Sec-WebSocket-Key")))
        *rc = fail(con, 400, JSONRPC_SERVER_ERROR,
                   "Bad Request: Sec-WebSocket-Key must be 16 base64-encoded bytes", NULL, NULL);
    else if (!header_has_token(con, "Sec-WebSocket-Protocol", "mcp"))
        *rc =
            fail(con, 400, JSONRPC_SERVER_ERROR,
                 "Bad Request: the WebSocket subprotocol must be \"mcp\" (Sec-WebSocket-Protocol)",
                 NULL, NULL);
    else
        return 0;
    return -1;
}

static void conn_free(struct ws_conn *c)
{
    push_close(c->push, 0, 0); /* no token callback runs after it */
    ws_parser_free(&c->parser);
    fmutex_destroy(&c->wmu);
    free(c);
}

/* The last of an upgraded session: everything it held, then its socket
 * (only now, so that its number cannot be reused while push's writer
 * might still write to it), and its place among the connections. */
static void conn_end(struct ws_conn *c)
{
    int fd = c->fd;
    struct MHD_UpgradeResponseHandle *urh = c->urh;
    struct conn_slot *slot = c->slot;
    conn_free(c);
    atomic_fetch_sub(&running_sessions, 1);
    if (urh) {
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
    } else {
        close(fd);
        conn_guard_release(slot);
    }
}

/* The session's reader, a fiber on the event loop: the pool thread that
 * upgraded the connection serves others, and no thread is the session's. */
static void session_main(void *arg)
{
    struct ws_conn *c = arg;
    reader_set_enter(&readers, &c->reader, c);
    conn_run(c, c->extra, c->extra_len);
    reader_set_leave(&readers, &c->reader);
    free(c->extra);
    c->extra = NULL;
    /* Stop push's writer first (a write it is blocked in fails once the
     * socket is shut down), then let go of everything. */
    char sid[80];
    const char *named = atomic_load(&c->session_id);
    snprintf(sid, sizeof sid, "%s", named ? named : "");
    conn_kill(c);
    fmutex_lock(&c->wmu);
    const char *why = c->why;
    unsigned code = c->why_code;
    fmutex_unlock(&c->wmu);
    log_event(LOG_INFO, sid[0] ? sid : NULL, "ws_closed", "%s (close code %u) after %lld ms",
              why ? why : "a write failed or timed out", code,
              (long long)(clock_mono_ms() - c->opened_ms));
    conn_end(c);
}

/* libmicrohttpd has sent the 101: the socket, and the bytes it read past
 * the handshake, are ours. */
static void upgraded(void *cls, struct MHD_Connection *con, void *req_cls, const char *extra_in,
                     size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
    (void)req_cls;
    struct ws_conn *c = cls;
    c->opened_ms = clock_mono_ms();
    if (c->pending)
        *c->pending = NULL;
    c->pending = NULL;
    if (extra_in_size) {
        c->extra = malloc(extra_in_size);
        if (c->extra) {
            memcpy(c->extra, extra_in, extra_in_size);
            c->extra_len = extra_in_size;
        }
    }
    /* A duplicate (close-on-exec, like the socket: upstream children must
     * not inherit it) lets libmicrohttpd close its connection now, which
     * only closes its own descriptor: no shutdown, and its pool is freed.
     * con, extra_in and urh are not to be touched after that. */
    c->fd = fcntl(sock, F_DUPFD_CLOEXEC, 0);
    if (c->fd >= 0) {
        c->slot = conn_guard_detach(con);
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
    } else {
        c->fd = sock;
        c->urh = urh;
    }
    int fl = fcntl(c->fd, F_GETFL);
    if (fl >= 0)
        fcntl(c->fd, F_SETFL, fl | O_NONBLOCK);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    log_event(LOG_INFO, atomic_load(&c->session_id), "ws_open", "%s%s",
              c->resumed ? "resumed" : "new connection", c->from_event ? " from an event id" : "");
    atomic_fetch_add(&running_sessions, 1);
    /* Frames for a resumed stream may go out now, after the 101. */
    fmutex_unlock(&c->wmu);
    int started = (!extra_in_size || c->extra) && loop_spawn(session_main, c) == 0;
    if (!started) {
        log_event(LOG_WARN, atomic_load(&c->session_id), "ws_closed",
                  "no fiber for the session: closed");
        conn_kill(c);
        free(c->extra);
        c->extra = NULL;
        conn_end(c);
    }
}

void ws_request_completed(struct ws_conn **pending)
{
    struct ws_conn *c = *pending;
    if (!c)
        return;
    *pending = NULL;
    conn_kill(c);
    fmutex_unlock(&c->wmu);
    conn_free(c);
}

enum MHD_Result ws_upgrade(struct MHD_Connection *con, const char *url, struct ws_conn **pending)
{
    enum MHD_Result rc;
    if (check_handshake(con, &rc) != 0)
        return rc;
    struct auth_grant grant;
    const char *why;
    char client[FORWARDED_ADDR_MAX];
    conn_guard_client(con, client);
    struct auth_request req = {.dpop = header(con, "DPoP"),
                               .method = "GET",
                               .path = url,
                               .resource_path = "/mcp",
                               .client = client};
    int denied = auth_check(header(con, "Authorization"), header(con, "Sec-WebSocket-Protocol"),
                            &req, &grant, &why);
    request_log_principal(grant.principal);
    if (denied) {
        char challenge[768];
        int status = auth_challenge(&grant, why, challenge, sizeof challenge);
        if (status == 503)
            return fail(con, 503, JSONRPC_SERVER_ERROR, why, "Retry-After", "1");
        return fail(con, (unsigned)status, JSONRPC_SERVER_ERROR, why, "WWW-Authenticate",
                    challenge);
    }
    char accept[29];
    if (ws_handshake_accept(header(con, "Sec-WebSocket-Key"), accept) != 0)
        return fail(con, 503, JSONRPC_INTERNAL_ERROR, "WebSocket unavailable", NULL, NULL);
    struct ws_conn *c = calloc(1, sizeof *c);
    if (!c)
        return fail(con, 503, JSONRPC_INTERNAL_ERROR, "Out of memory", NULL, NULL);
    c->fd = -1;
    if (fmutex_init(&c->wmu) != 0) {
        free(c);
        return fail(con, 503, JSONRPC_INTERNAL_ERROR, "WebSocket unavailable", NULL, NULL);
    }
    ws_parser_init(&c->parser, ws_cfg.max_message);
    const char *sid = header(con, "Mcp-Session-Id");
    const char *last = header(con, "Last-Event-ID");
    if (!sid) {
        sid = query(con, "session");
        if (!last)
            last = query(con, "last_event_id");
    }
    struct push_io io = {.send = conn_send,
                         .io = c,
                         .transport = WS_TRANSPORT,
                         .event_ids = 1,
                         .session_named = conn_session_named,
                         .session_ended = conn_session_ended,
                         .grant = grant,
                         /* From here, before the 101: a revocation that
                          * comes before the session's reader starts is
                          * seen by its first look. */
                         .token_ended = conn_token_ended,
                         .resume_session = sid,
                         .resume_event = last};
    /* Resuming hands streams to push's writer at once; the write mutex,
     * held until upgraded(), keeps their frames behind the 101, and lets a
     * refusal still be an ordinary HTTP answer. */
    fmutex_lock(&c->wmu);
    struct core_reply refused;
    c->push = push_open(&io, &refused);
    if (!c->push) {
        fmutex_unlock(&c->wmu);
        ws_parser_free(&c->parser);
        fmutex_destroy(&c->wmu);
        free(c);
        return fail(con, 503, JSONRPC_INTERNAL_ERROR, "Out of memory", NULL, NULL);
    }
    int resumed = refused.kind == CORE_REJECTED ? -1 : 0;
    struct MHD_Response *r = resumed == 0 ? MHD_create_response_for_upgrade(upgraded, c) : NULL;
    if (!r) {
        fmutex_unlock(&c->wmu);
        conn_free(c);
        if (resumed == 0)
            return fail(con, 503, JSONRPC_INTERNAL_ERROR, "WebSocket unavailable", NULL, NULL);
        enum MHD_Result sent =
            fail(con, refusal_status(refused.reason), refusal_code(refused.error),
                 refusal_message(refused.error), NULL, NULL);
        core_reply_clear(&refused);
        return sent;
    }
    c->resumed = sid != NULL;
    c->from_event = last != NULL;
    MHD_add_response_header(r, "Upgrade", "websocket");
    MHD_add_response_header(r, "Sec-WebSocket-Accept", accept);
    MHD_add_response_header(r, "Sec-WebSocket-Protocol", "mcp");
    if (sid)
        MHD_add_response_header(r, "Mcp-Session-Id", sid); /* the session it adopted */
    *pending = c;
    c->pending = pending;
    rc = MHD_queue_response(con, MHD_HTTP_SWITCHING_PROTOCOLS, r);
    MHD_destroy_response(r);
    if (rc != MHD_YES)
        ws_request_completed(pending);
    return rc;
}
