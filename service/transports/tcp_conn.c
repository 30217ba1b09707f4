/* tcp_conn — see tcp_conn.h.
 *
 * The reader is a loop fiber: it reads whatever the socket has
 * (MSG_DONTWAIT), decodes it and acts on each event, and parks in
 * loop_wait_fd until more comes, a deadline (handshake, idle) passes or it
 * is woken (a token's end, the session's end, tcp_stop: flags it looks at
 * first). Writes come from push's writer fiber and from the reader
 * (immediate answers, goodbyes), one frame at a time under wmu; a full
 * socket parks the writing fiber until the client reads or the write
 * timeout passes. */
#include "tcp_conn.h"
#include "auth.h"
#include "clock.h"
#include "fcond.h"
#include "first_message.h"
#include "greeting.h"
#include "jsonrpc.h"
#include "log.h"
#include "loop.h"
#include "push.h"
#include "reader_set.h"
#include "sock_io.h"
#include "stdio_frame.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK 16384
/* After a goodbye, how long to read (and discard) for the client's FIN:
 * closing with unread bytes makes the kernel send a reset, which can
 * destroy the goodbye before the client reads it. */
#define LINGER_MS 1000

static struct tcp_config cfg = {.max_message = STDIO_FRAME_DEFAULT_MAX,
                                .idle_ms = 300000,
                                .handshake_ms = 10000,
                                .write_timeout_ms = 30000};

/* Set by tcp_conn_stop_all, which wakes every reader. */
static atomic_int stopping;
static atomic_int running;
/* Readers running, for a wake (stop, token's end, session's end). */
static struct reader_set readers = READER_SET_INIT;

struct tcp_conn {
    int fd;
    char addr[64];
    struct fmutex wmu; /* one frame at a time on the socket (held across a wait) */
    /* Under wmu: the client's framing (decided by its first bytes, before
     * anything is sent), and whether a goodbye went out (nothing after). */
    enum stdio_framing framing;
    int said_goodbye;
    atomic_int dead; /* a write failed or timed out: the socket is shut down */
    struct stdio_frame_decoder *dec;
    struct push *push; /* once served: the reader's */
    int served;        /* the first message was accepted (reader only) */
    /* The end of mcpd/connect's token (push holds it for the connection's
     * life): recorded here, and the reader is woken. */
    _Atomic(const char *) token_why;
    atomic_int session_over;          /* push's writer said the session ended */
    _Atomic(const char *) session_id; /* push_io.session_named's, for the log */
    atomic_int busy;                  /* push_io.busy's: replies still to send */
    int64_t opened_ms, last_in_ms;
    const char *why; /* how it ended, for the log (reader only) */
    struct reader reader;
};

void tcp_conn_configure(const struct tcp_config *c)
{
    cfg = *c;
    if (!cfg.max_message)
        cfg.max_message = STDIO_FRAME_DEFAULT_MAX;
    if (cfg.write_timeout_ms <= 0)
        cfg.write_timeout_ms = 30000;
}

/* Marks the connection dead; after shutdown() the reader's wait and any
 * blocked write end at once. The descriptor stays open until the reader
 * closes it, so its number cannot be reused meanwhile. */
static void conn_kill(struct tcp_conn *c)
{
    atomic_store(&c->dead, 1);
    shutdown(c->fd, SHUT_RDWR);
}

/* ---- writing ---- */

/* One message as one frame in the client's framing. Caller holds wmu. */
static int send_locked(struct tcp_conn *c, const char *msg, size_t len)
{
    if (c->said_goodbye || atomic_load(&c->dead))
        return -1;
    char prefix[STDIO_FRAME_PREFIX_MAX];
    size_t pl = stdio_frame_prefix(c->framing, len, prefix, sizeof prefix);
    const char *suffix = stdio_frame_suffix(c->framing);
    struct iovec iov[3] = {
        {.iov_base = prefix, .iov_len = pl},
        {.iov_base = (void *)msg, .iov_len = len},
        {.iov_base = (void *)suffix, .iov_len = strlen(suffix)},
    };
    int rc = sock_io_write(c->fd, iov, 3, cfg.write_timeout_ms, &c->dead);
    if (rc == 0)
        return 0;
    if (rc == SOCK_IO_TIMEOUT)
        log_event(LOG_WARN, NULL, "tcp_write_timeout",
                  "client %s did not read for %lld ms; closing", c->addr,
                  (long long)cfg.write_timeout_ms);
    conn_kill(c);
    return -1;
}

/* push_io.send. */
static int conn_send(void *io, const char *msg, size_t len)
{
    struct tcp_conn *c = io;
    fmutex_lock(&c->wmu);
    int rc = send_locked(c, msg, len);
    fmutex_unlock(&c->wmu);
    return rc;
}

/* Sends msg (stolen); caller holds wmu. */
static int send_json_locked(struct tcp_conn *c, json_t *msg)
{
    size_t len;
    char *text = msg ? jsonrpc_dump(msg, &len) : NULL;
    json_decref(msg);
    int rc = text ? send_locked(c, text, len) : -1;
    free(text);
    return rc;
}

/* Sends msg (stolen). */
static void send_msg(struct tcp_conn *c, json_t *msg)
{
    fmutex_lock(&c->wmu);
    send_json_locked(c, msg);
    fmutex_unlock(&c->wmu);
}

static void send_error(struct tcp_conn *c, json_t *id, int code, const char *message,
                       const char *reason)
{
    send_msg(c, greeting_error(id, code, message, TCP_TRANSPORT, reason));
}

/* The last thing mcpd says on the connection (once): an error with id
 * null naming why it ends. */
static void say_goodbye(struct tcp_conn *c, int code, const char *message, const char *reason)
{
    fmutex_lock(&c->wmu);
    if (!c->said_goodbye) {
        send_json_locked(c, greeting_error(NULL, code, message, TCP_TRANSPORT, reason));
        c->said_goodbye = 1;
    }
    fmutex_unlock(&c->wmu);
}

/* After a goodbye: half-closes, and reads until the client closes too or
 * LINGER_MS pass, so the goodbye is not lost to a reset. */
static void linger(struct tcp_conn *c)
{
    if (!atomic_load(&c->dead))
        sock_io_linger(c->fd, LINGER_MS);
}

/* ---- callbacks from elsewhere ---- */

/* push_io.session_named. */
static void conn_session_named(void *io, const char *session_id)
{
    atomic_store(&((struct tcp_conn *)io)->session_id, session_id);
}

/* push_io.busy. */
static void conn_busy(void *io, int busy)
{
    atomic_store(&((struct tcp_conn *)io)->busy, busy);
}

/* push_io.session_ended (on push's writer): the session was deleted,
 * expired or killed elsewhere, or its token ended. The goodbye says so;
 * the reader then ends the connection. */
static void conn_session_ended(void *io)
{
    struct tcp_conn *c = io;
    const char *token_why = atomic_load(&c->token_why);
    if (token_why)
        say_goodbye(c, JSONRPC_SESSION_NOT_FOUND, token_why, "unauthorized");
    else
        say_goodbye(c, JSONRPC_SESSION_NOT_FOUND, "Session ended", "session ended");
    atomic_store(&c->session_over, 1);
    reader_set_wake(&readers, &c->reader);
}

/* auth's callback (watcher's thread, under its lock): record and wake. */
static void conn_token_ended(void *ud, const char *why)
{
    struct tcp_conn *c = ud;
    atomic_store(&c->token_why, why);
    reader_set_wake(&readers, &c->reader);
}

/* ---- the first message ---- */

/* first_message's send_locked. */
static void send_first_locked(void *io, json_t *msg)
{
    send_json_locked(io, msg);
}

/* The first message: mcpd/connect, or (without auth) anything else, which
 * is then served as is (first_message.h). Returns 1 when the connection is
 * to end. */
static int on_first(struct tcp_conn *c, const char *data, size_t len)
{
    struct first_message fm = {.noun = "client",
                               .name = c->addr,
                               .client = c->addr,
                               .auth_required = cfg.auth_required,
                               .log_principal = 1,
                               .io = {.send = conn_send,
                                      .io = c,
                                      .transport = TCP_TRANSPORT,
                                      .event_ids = 1,
                                      .max_inflight = cfg.max_inflight,
                                      .session_named = conn_session_named,
                                      .busy = conn_busy,
                                      .session_ended = conn_session_ended,
                                      .token_ended = conn_token_ended},
                               .wmu = &c->wmu,
                               .send_locked = send_first_locked,
                               .push = &c->push,
                               .served = &c->served};
    return first_message_serve(&fm, data, len);
}

/* ---- reading ---- */

/* Acts on one decoded event. Returns 1 when the connection is to end. */
static int on_event(struct tcp_conn *c, const struct stdio_frame_event *ev)
{
    if (ev->kind == STDIO_FRAME_MESSAGE) {
        if (!c->served)
            return on_first(c, ev->data, ev->len);
        push_receive(c->push, ev->data, ev->len);
        return 0;
    }
    char message[160];
    if (ev->error == STDIO_FRAME_ERR_TOO_LARGE)
        snprintf(message, sizeof message,
                 "Invalid Request: message larger than %zu bytes (--max-body)", cfg.max_message);
    else
        snprintf(message, sizeof message, "%s", stdio_frame_error_message(ev->error));
    log_event(LOG_INFO, atomic_load(&c->session_id), "tcp_bad_frame", "client %s: %s", c->addr,
              message);
    send_error(c, NULL, stdio_frame_error_code(ev->error), message, NULL);
    /* Before a successful mcpd/connect, with auth, nothing is served. */
    return !c->served && cfg.auth_required;
}

/* Decodes what was read. Returns 1 when the connection is to end. */
static int feed(struct tcp_conn *c, const char *buf, size_t n)
{
    size_t off = 0;
    while (off < n) {
        size_t used;
        struct stdio_frame_event ev;
        int got = stdio_frame_decode(c->dec, buf + off, n - off, &used, &ev);
        off += used;
        enum stdio_framing f = stdio_frame_framing(c->dec);
        if (f != c->framing) { /* decided before the first event: once */
            fmutex_lock(&c->wmu);
            c->framing = f;
            fmutex_unlock(&c->wmu);
        }
        if (!got)
            continue;
        /* Idleness counts whole messages: a client that trickles bytes
         * of one it never finishes is idle (slowloris). */
        c->last_in_ms = clock_mono_ms();
        if (on_event(c, &ev))
            return 1;
    }
    return 0;
}

/* Whether the connection's time is up (handshake or idle); says goodbye
 * if so. Sets *deadline to when to look again. */
static int timed_out(struct tcp_conn *c, int64_t now, int64_t *deadline)
{
    if (!c->served) {
        *deadline = c->opened_ms + cfg.handshake_ms;
        if (now < *deadline)
            return 0;
        c->why = "handshake timeout";
        char msg[160];
        snprintf(msg, sizeof msg,
                 "no complete %sfirst message within %lld ms (--tcp-handshake-ms); closing",
                 cfg.auth_required ? "mcpd/connect " : "", (long long)cfg.handshake_ms);
        say_goodbye(c, JSONRPC_SERVER_ERROR, msg, "handshake timeout");
        return 1;
    }
    *deadline = c->last_in_ms + cfg.idle_ms;
    if (now < *deadline)
        return 0;
    if (atomic_load(&c->busy)) { /* a long call is not idleness */
        c->last_in_ms = now;
        *deadline = now + cfg.idle_ms;
        return 0;
    }
    c->why = "idle timeout";
    char msg[160];
    snprintf(msg, sizeof msg,
             "no complete message and nothing in flight for %lld ms (--tcp-idle-ms); closing",
             (long long)cfg.idle_ms);
    say_goodbye(c, JSONRPC_SERVER_ERROR, msg, "idle timeout");
    return 1;
}

/* Looks at the flags others set. Returns 1 when the connection is to end
 * (after a goodbye where one is due). */
static int ended_elsewhere(struct tcp_conn *c)
{
    if (atomic_load(&c->dead)) {
        c->why = "a write failed or timed out";
        return 1;
    }
    const char *token_why = atomic_load(&c->token_why);
    if (token_why) {
        c->why = token_why;
        say_goodbye(c, JSONRPC_SESSION_NOT_FOUND, token_why, "unauthorized");
        return 1;
    }
    if (atomic_load(&c->session_over)) {
        c->why = "session ended";
        return 1;
    }
    if (atomic_load(&stopping)) {
        c->why = "server shutting down";
        say_goodbye(c, JSONRPC_SERVER_ERROR, "server shutting down", "shutting down");
        return 1;
    }
    return 0;
}

static void run(struct tcp_conn *c, char *buf)
{
    for (;;) {
        if (ended_elsewhere(c))
            return;
        int64_t now = clock_mono_ms(), deadline;
        if (timed_out(c, now, &deadline))
            return;
        ssize_t got = recv(c->fd, buf, READ_CHUNK, MSG_DONTWAIT);
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = loop_wait_fd(c->fd, EPOLLIN, deadline);
            if (rc == ECANCELED) {
                c->why = "server shutting down";
                return;
            }
            if (rc != 0 && rc != ETIMEDOUT && rc != EINTR) {
                c->why = "cannot wait for the socket";
                return;
            }
            continue;
        }
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            c->why = atomic_load(&c->dead) ? "a write failed or timed out" : "connection lost";
            return;
        }
        if (got == 0) {
            /* A last NDJSON line without its newline is a message. */
            struct stdio_frame_event ev;
            if (!atomic_load(&c->dead) && stdio_frame_finish(c->dec, &ev))
                on_event(c, &ev);
            c->why = atomic_load(&c->dead) ? "a write failed or timed out" : "closed by the client";
            return;
        }
        if (feed(c, buf, (size_t)got)) {
            c->why = "refused";
            return;
        }
    }
}

/* ---- lifecycle ---- */

struct tcp_conn *tcp_conn_new(int fd, const char *addr)
{
    struct tcp_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->dec = stdio_frame_decoder_new(cfg.max_message);
    if (!c->dec || fmutex_init(&c->wmu) != 0) {
        stdio_frame_decoder_free(c->dec);
        free(c);
        return NULL;
    }
    c->fd = fd;
    snprintf(c->addr, sizeof c->addr, "%s", addr);
    c->opened_ms = clock_mono_ms();
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* A peer that vanished (no FIN, no RST) while a long call runs is found
     * by the kernel's keepalive probes. */
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    int idle = 60, intvl = 10, cnt = 6;
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    atomic_fetch_add(&running, 1);
    return c;
}

static void conn_free(struct tcp_conn *c)
{
    char addr[sizeof c->addr];
    memcpy(addr, c->addr, sizeof addr);
    close(c->fd);
    stdio_frame_decoder_free(c->dec);
    fmutex_destroy(&c->wmu);
    free(c);
    atomic_fetch_sub(&running, 1);
    tcp_conn_gone(addr);
}

void tcp_conn_discard(struct tcp_conn *c)
{
    conn_free(c);
}

void tcp_conn_main(void *arg)
{
    struct tcp_conn *c = arg;
    reader_set_enter(&readers, &c->reader, c);
    char *buf = malloc(READ_CHUNK);
    if (buf)
        run(c, buf);
    else
        c->why = "out of memory";
    free(buf);
    reader_set_leave(&readers, &c->reader);
    fmutex_lock(&c->wmu);
    int goodbye = c->said_goodbye;
    fmutex_unlock(&c->wmu);
    if (goodbye)
        linger(c);
    char sid[80];
    const char *s = atomic_load(&c->session_id);
    snprintf(sid, sizeof sid, "%s", s ? s : "");
    log_event(LOG_INFO, sid[0] ? sid : NULL, "tcp_closed", "client %s: %s after %lld ms", c->addr,
              c->why ? c->why : "ended", (long long)(clock_mono_ms() - c->opened_ms));
    /* push's writer stops (a write it is blocked in fails once the socket
     * is shut down); no token callback runs after push_close. */
    conn_kill(c);
    push_close(c->push, 0, 0);
    conn_free(c);
}

static void wait_running(int64_t ms)
{
    int64_t deadline = clock_mono_ms() + ms;
    while (atomic_load(&running) > 0 && clock_mono_ms() < deadline) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
}

/* reader_set_each's: cuts a connection stuck at the stop. */
static void kill_one(void *conn)
{
    conn_kill(conn);
}

void tcp_conn_stop_all(void)
{
    atomic_store(&stopping, 1);
    reader_set_wake_all(&readers);
    wait_running(LINGER_MS + 1000);
    /* One still here is stuck on a client that neither reads nor closes. */
    reader_set_each(&readers, kill_one);
    wait_running(1000);
}
