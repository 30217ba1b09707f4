/*
 * tcp_echo.c — the benchmark's load driver for mcpd's raw TCP transport
 * (--tcp-listen), standing where wrk stands for HTTP: CONNS connections,
 * each greeting (mcpd/connect, with a token if given), initializing its own
 * session, then sending `tools/call echo` and waiting for the reply before
 * the next (pipelining depth 1, like wrk's one request per connection at a
 * time), for SECONDS.
 *
 * How: every connection is set up in turn with blocking reads (bounded by
 * SO_RCVTIMEO), then one thread drives them all with epoll. A reply is the
 * NDJSON line whose "id" is the request's; its latency goes into a
 * histogram of 10 µs buckets. A line without "result" (an error) counts as
 * an error, a closed or failed socket as a socket error. Requests still in
 * flight when the time is up are not counted.
 *
 * Prints what tests/bench/lib.sh's wrk_figures reads from wrk:
 *   Latency Distribution / "50% X.XXms" / "99% X.XXms" / "Requests/sec: N",
 *   "Socket errors: connect A, read B, write C, timeout D" (when any), and
 *   "BENCH responses=N errors=E [first_error=...]" as echo.lua does.
 *
 * Usage: tcp_echo HOST PORT CONNS SECONDS [TOKEN]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUCKET_US 10
#define BUCKETS 100000 /* 1 s of 10-µs buckets; slower replies go in the last */
#define LINE_MAX_BYTES 65536

struct conn {
    int fd;
    long id;        /* of the request in flight */
    double sent_at; /* its send time, seconds */
    size_t len;     /* bytes buffered in buf */
    char buf[LINE_MAX_BYTES];
};

static uint64_t hist[BUCKETS];
static long responses, errors, err_read, err_write;
static char first_error[200];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int send_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Blocking: one line into c->buf (NUL-terminated, without its newline). */
static int read_line(struct conn *c)
{
    c->len = 0;
    for (;;) {
        if (c->len + 1 >= sizeof c->buf)
            return -1;
        ssize_t r = recv(c->fd, c->buf + c->len, 1, 0);
        if (r <= 0)
            return -1;
        if (c->buf[c->len] == '\n') {
            c->buf[c->len] = '\0';
            c->len = 0;
            return 0;
        }
        c->len++;
    }
}

/* Connect, greet, initialize: a session per connection, as a client has. */
static int setup(struct conn *c, const struct sockaddr_in *addr, const char *token)
{
    char msg[1024];
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0 || connect(c->fd, (const struct sockaddr *)addr, sizeof *addr) != 0)
        return -1;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {10, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (token) {
        snprintf(msg, sizeof msg,
                 "{\"jsonrpc\":\"2.0\",\"id\":\"hello\",\"method\":\"mcpd/"
                 "connect\",\"params\":{\"token\":\"%s\"}}\n",
                 token);
        if (send_all(c->fd, msg, strlen(msg)) != 0 || read_line(c) != 0 ||
            !strstr(c->buf, "\"result\""))
            return -1;
    }
    const char *init = "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{"
                       "\"protocolVersion\":"
                       "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"tcp_echo\","
                       "\"version\":\"0\"}}}\n"
                       "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
    if (send_all(c->fd, init, strlen(init)) != 0 || read_line(c) != 0 ||
        !strstr(c->buf, "\"result\""))
        return -1;
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    return 0;
}

static int send_echo(struct conn *c)
{
    char msg[256];
    int n = snprintf(
        msg, sizeof msg,
        "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
        "\"arguments\":{\"message\":\"bench\"}}}\n",
        ++c->id);
    c->sent_at = now();
    return send_all(c->fd, msg, (size_t)n); /* small: fits the socket buffer at depth 1 */
}

static void note_error(const char *what)
{
    errors++;
    if (!first_error[0])
        snprintf(first_error, sizeof first_error, "%.190s", what);
}

/* A line arrived on c: the reply to its request, or something else to skip. */
static int on_line(struct conn *c, const char *line, double t)
{
    char want[32];
    snprintf(want, sizeof want, "\"id\":%ld", c->id);
    const char *at = strstr(line, want);
    if (!at || (at[strlen(want)] >= '0' && at[strlen(want)] <= '9'))
        return 0; /* a notification, or not ours: keep waiting */
    if (strstr(line, "\"result\"")) {
        double us = (t - c->sent_at) * 1e6;
        size_t b = (size_t)(us / BUCKET_US);
        hist[b < BUCKETS ? b : BUCKETS - 1]++;
        responses++;
    } else {
        note_error(line);
    }
    return 1;
}

static double percentile(double p)
{
    uint64_t total = 0, acc = 0;
    for (size_t i = 0; i < BUCKETS; i++)
        total += hist[i];
    if (total == 0)
        return 0;
    for (size_t i = 0; i < BUCKETS; i++) {
        acc += hist[i];
        if ((double)acc >= p * (double)total)
            return ((double)i + 0.5) * BUCKET_US / 1000.0;
    }
    return (double)BUCKETS * BUCKET_US / 1000.0;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: tcp_echo HOST PORT CONNS SECONDS [TOKEN]\n");
        return 2;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
        fprintf(stderr, "tcp_echo: bad address %s\n", argv[1]);
        return 2;
    }
    int n = atoi(argv[3]);
    double secs = atof(argv[4]);
    const char *token = argc > 5 && argv[5][0] ? argv[5] : NULL;
    if (n < 1 || n > 100000 || secs <= 0) {
        fprintf(stderr, "tcp_echo: CONNS 1..100000, SECONDS > 0\n");
        return 2;
    }
    struct conn *conns = calloc((size_t)n, sizeof *conns);
    int ep = epoll_create1(0);
    if (!conns || ep < 0)
        return 1;
    for (int i = 0; i < n; i++) {
        if (setup(&conns[i], &addr, token) != 0) {
            fprintf(stderr, "tcp_echo: connection %d: setup failed (%s) %.200s\n", i,
                    strerror(errno), conns[i].buf);
            return 1;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &conns[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
    }
    int live = n;
    double start = now(), end = start + secs;
    for (int i = 0; i < n; i++)
        if (send_echo(&conns[i]) != 0) {
            err_write++;
            live--;
        }
    struct epoll_event evs[256];
    double t;
    while (live > 0 && (t = now()) < end) {
        int k = epoll_wait(ep, evs, 256, (int)((end - t) * 1000) + 1);
        if (k < 0 && errno != EINTR)
            break;
        for (int e = 0; e < k; e++) {
            struct conn *c = evs[e].data.ptr;
            ssize_t r = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len - 1, 0);
            if (r <= 0) {
                if (r < 0 && (errno == EAGAIN || errno == EINTR))
                    continue;
                err_read++;
                live--;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                continue;
            }
            c->len += (size_t)r;
            c->buf[c->len] = '\0';
            double at = now();
            char *line = c->buf, *nl;
            int replied = 0;
            while ((nl = memchr(line, '\n', c->len - (size_t)(line - c->buf))) != NULL) {
                *nl = '\0';
                replied |= on_line(c, line, at);
                line = nl + 1;
            }
            c->len -= (size_t)(line - c->buf);
            memmove(c->buf, line, c->len);
            if (c->len + 1 >= sizeof c->buf) {
                note_error("a line over 64 KiB");
                c->len = 0;
            }
            if (replied && at < end && send_echo(c) != 0) {
                err_write++;
                live--;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
            }
        }
    }
    double elapsed = now() - start;
    if (elapsed > secs)
        elapsed = secs;
    printf("Running %.0fs test @ tcp://%s:%s\n  1 thread and %d connections\n", secs, argv[1],
           argv[2], n);
    printf("  Latency Distribution\n     50%%  %.2fms\n     75%%  %.2fms\n     90%%  %.2fms\n     "
           "99%%  %.2fms\n",
           percentile(0.50), percentile(0.75), percentile(0.90), percentile(0.99));
    printf("  %ld requests in %.2fs\n", responses + errors, elapsed);
    if (err_read +
        err_write) /* wrk's line; setup fails the run instead of counting connect errors */
        printf("  Socket errors: connect 0, read %ld, write %ld, timeout 0\n", err_read, err_write);
    printf("Requests/sec: %.2f\n", (double)responses / elapsed);
    printf("BENCH responses=%ld errors=%ld%s%s\n", responses, errors,
           first_error[0] ? " first_error=" : "", first_error);
    for (int i = 0; i < n; i++)
        close(conns[i].fd);
    free(conns);
    close(ep);
    return 0;
}
