/* tcp — see tcp.h. This file listens, accepts and counts; tcp_conn.c
 * serves each connection.
 *
 * The caps are HTTP's (--max-connections, --max-connections-per-ip),
 * counted apart from HTTP's connections: a connection past one is told so
 * (a JSON-RPC error line with id null, -32013 or -32014 as HTTP's 503 and
 * 429 carry) and closed at once, before it costs a fiber. */
#include "tcp.h"
#include "addr_caps.h"
#include "clock.h"
#include "fiber.h"
#include "greeting.h"
#include "jsonrpc.h"
#include "log.h"
#include "sock_bind.h"
#include "loop.h"
#include "tcp_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* After accept() fails for want of descriptors or memory, wait this long
 * before the next try (the failure would repeat at once), and log one line
 * per ACCEPT_LOG_MS. */
#define ACCEPT_BACKOFF_MS 100
#define ACCEPT_LOG_MS 10000

static struct {
    int fd;
    int port;
    pthread_mutex_t mu; /* guards what follows */
    struct fiber *acceptor;
    int acceptor_done;
    int stopping;
} L = {.fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

static struct addr_caps caps = ADDR_CAPS_INIT;

void tcp_conn_gone(const char *addr)
{
    addr_caps_release(&caps, addr);
}

/* Tells a connection past a cap why (best effort: the socket is new, its
 * buffer empty) and closes it. */
static void refuse(int fd, const char *addr, int code, const char *what)
{
    json_t *err = greeting_error(NULL, code, what, TCP_TRANSPORT, NULL);
    size_t len;
    char *text = err ? jsonrpc_dump(err, &len) : NULL;
    json_decref(err);
    if (text) {
        struct iovec iov[2] = {{.iov_base = text, .iov_len = len},
                               {.iov_base = "\n", .iov_len = 1}};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
        (void)!sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    free(text);
    close(fd);
    log_event(LOG_INFO, NULL, "tcp_refused", "client %s: %s", addr, what);
}

static void peer_name(const struct sockaddr_storage *ss, char *out, size_t cap)
{
    const void *a = ss->ss_family == AF_INET6
                        ? (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr
                        : (const void *)&((const struct sockaddr_in *)ss)->sin_addr;
    if (!inet_ntop(ss->ss_family, a, out, (socklen_t)cap))
        snprintf(out, cap, "?");
}

static int stopping(void)
{
    pthread_mutex_lock(&L.mu);
    int s = L.stopping;
    pthread_mutex_unlock(&L.mu);
    return s;
}

/* The accept fiber: until tcp_stop wakes it, or the loop stops. */
static void accept_main(void *arg)
{
    (void)arg;
    int64_t last_log = 0;
    unsigned long held = 0;
    while (!stopping()) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(L.fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            if (e == EAGAIN || e == EWOULDBLOCK) {
                int rc = loop_wait_fd(L.fd, EPOLLIN, -1);
                if (rc == ECANCELED)
                    break;
                if (rc != 0 && rc != EINTR && rc != ETIMEDOUT) {
                    log_event(LOG_ERROR, NULL, "tcp_accept_failed", "cannot wait: %s",
                              strerror(rc));
                    fiber_sleep_ms(ACCEPT_BACKOFF_MS);
                }
                continue;
            }
            if (e == EINTR || e == ECONNABORTED || e == EPROTO)
                continue;
            /* Out of descriptors or memory: the client waits in the
             * backlog until a connection closes. */
            int64_t now = clock_mono_ms();
            if (now - last_log >= ACCEPT_LOG_MS) {
                log_event(LOG_WARN, NULL, "tcp_accept_failed", "%s (%lu more held back)",
                          strerror(e), held);
                last_log = now;
                held = 0;
            } else {
                held++;
            }
            fiber_sleep_ms(ACCEPT_BACKOFF_MS);
            continue;
        }
        char addr[64];
        peer_name(&ss, addr, sizeof addr);
        const char *what = NULL;
        int refused = addr_caps_take(&caps, addr, &what);
        if (refused) {
            refuse(fd, addr, refused, what);
            continue;
        }
        struct tcp_conn *c = tcp_conn_new(fd, addr);
        if (!c) {
            tcp_conn_gone(addr);
            refuse(fd, addr, JSONRPC_SERVER_BUSY, "Server busy: out of memory");
        } else if (loop_spawn(tcp_conn_main, c) != 0) {
            log_event(LOG_WARN, NULL, "tcp_refused", "client %s: no fiber for it", addr);
            tcp_conn_discard(c); /* closes fd, frees the slot */
        }
    }
    close(L.fd);
    pthread_mutex_lock(&L.mu);
    L.fd = -1;
    L.acceptor = NULL;
    L.acceptor_done = 1;
    pthread_mutex_unlock(&L.mu);
}

/* The accept fiber names itself, so tcp_stop can wake it. */
static void accept_entry(void *arg)
{
    pthread_mutex_lock(&L.mu);
    L.acceptor = fiber_current();
    pthread_mutex_unlock(&L.mu);
    accept_main(arg);
}

int tcp_start(const struct tcp_config *cfg, char **err)
{
    int fd = sock_bind("--tcp-listen", cfg->host, cfg->port, SOCK_STREAM, &L.port, err);
    if (fd < 0)
        return -1;
    L.fd = fd;
    addr_caps_configure(&caps, cfg->max_connections, cfg->max_per_ip);
    tcp_conn_configure(cfg);
    if (loop_spawn(accept_entry, NULL) != 0) {
        close(fd);
        L.fd = -1;
        *err = strdup("--tcp-listen: cannot start the accept fiber");
        return -1;
    }
    log_event(LOG_INFO, NULL, "listening", "tcp://%s:%d", cfg->host, L.port);
    return 0;
}

int tcp_port(void)
{
    return L.port;
}

void tcp_stop(void)
{
    pthread_mutex_lock(&L.mu);
    int started = L.port != 0 && !L.stopping;
    L.stopping = 1;
    if (L.acceptor)
        fiber_wake(L.acceptor);
    pthread_mutex_unlock(&L.mu);
    if (!started)
        return;
    /* The acceptor closes the listening socket; then no connection comes. */
    int64_t deadline = clock_mono_ms() + 2000;
    for (;;) {
        pthread_mutex_lock(&L.mu);
        int done = L.acceptor_done;
        pthread_mutex_unlock(&L.mu);
        if (done || clock_mono_ms() >= deadline)
            break;
        struct timespec ts = {0, 5 * 1000000};
        nanosleep(&ts, NULL);
    }
    tcp_conn_stop_all();
}
