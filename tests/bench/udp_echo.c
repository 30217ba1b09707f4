/*
 * udp_echo.c — the benchmark's load driver for mcpd's UDP transport
 * (--udp-listen), standing where wrk stands for HTTP and tcp_echo for TCP:
 * PEERS peers (one socket, so one address:port, each), each getting its
 * cookie, greeting (mcpd/connect, with a token if given), initializing its
 * own session, then sending `tools/call echo` and waiting for the reply
 * before the next (one request in flight per peer), for SECONDS.
 *
 * It speaks README's "UDP wire rules" from the client's side: the hello
 * until a cookie comes (from a new socket after a second of silence), the
 * cookie and "_udp_seq" on every message, cumulative acknowledgements of
 * what mcpd sends (riding on the next request when one goes out at once,
 * else alone), fragments reassembled, and a retransmission timer (200 ms,
 * doubled per try, at most 4 s; a peer is given up after 8 tries and
 * counted as a timeout) so a datagram lost on loopback does not hang a
 * peer. A datagram from mcpd above the next expected number is dropped
 * unacknowledged (mcpd resends it): on loopback with a socket per peer
 * datagrams do not overtake each other, so holding them would buy nothing.
 *
 * Why not udp_wire.c: it decodes with jansson (and pulls in json_text.c);
 * this driver shares the CPUs with mcpd, so it reads mcpd's envelope the
 * way tcp_echo reads replies, from the datagram's head with strtoull and
 * strstr. mcpd writes its envelope members first (udp_wire_encode).
 *
 * How: one thread and epoll, for the setup of every peer (all at once,
 * bounded by 30 s; a peer that does not get through fails the run) and for
 * the run. Latencies go into a histogram of 10 µs buckets. A reply without
 * "result" counts as an error; requests still in flight when the time is
 * up are not counted.
 *
 * Prints what tests/bench/lib.sh's wrk_figures reads from wrk:
 *   Latency Distribution / "50% X.XXms" / "99% X.XXms" / "Requests/sec: N",
 *   "Socket errors: connect A, read B, write C, timeout D" (when any), and
 *   "BENCH responses=N errors=E retransmits=R [first_error=...]".
 *
 * Usage: udp_echo HOST PORT PEERS SECONDS [TOKEN]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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
#define DGRAM_MAX 65536
#define OUT_MAX 2         /* messages a peer has unacknowledged at once */
#define OUT_BYTES 1200    /* a datagram of ours (the README's client limit) */
#define MSG_MAX (1 << 20) /* a reassembled message */
#define RTO_S 0.2         /* first retransmission timeout */
#define RTO_MAX_S 4.0
#define MAX_TRIES 8
#define TICK_S 0.01 /* how often the retransmission timers are looked at */
#define SETUP_S 30.0
#define DRAIN_S 0.2
#define REOPEN_TRIES 5 /* hellos unanswered before a peer takes a new socket */

enum state { HELLO, CONNECTING, INITIALIZING, READY, RUNNING, DEAD };

struct out {
    uint64_t seq; /* 0: the slot is free */
    double due;
    int tries;
    size_t len;
    char buf[OUT_BYTES];
};

struct peer {
    int fd;
    enum state st;
    char cookie[17];
    uint64_t next_seq;  /* ours: the next to assign */
    uint64_t delivered; /* mcpd's: everything up to it arrived */
    uint64_t acked;     /* the cumulative number we last sent */
    int heard;          /* mcpd acknowledged or sent something */
    double hello_due;
    int hello_tries;
    struct out out[OUT_MAX];
    long id;        /* of the echo in flight */
    double sent_at; /* its send time, seconds */
    char *msg;      /* a message being reassembled from fragments */
    size_t msg_len;
};

static uint64_t hist[BUCKETS];
static long responses, errors, err_read, err_write, err_timeout, retransmits;
static char first_error[200];
static char rx[DGRAM_MAX + 1];
static int ep;
static struct sockaddr_in server;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void note_error(const char *what)
{
    errors++;
    if (!first_error[0])
        snprintf(first_error, sizeof first_error, "%.190s", what);
}

static void kill_peer(struct peer *p, long *counter)
{
    (*counter)++;
    p->st = DEAD;
    epoll_ctl(ep, EPOLL_CTL_DEL, p->fd, NULL);
}

static void transmit(struct peer *p, const char *buf, size_t len)
{
    if (send(p->fd, buf, len, 0) < 0 && errno != EAGAIN && errno != ECONNREFUSED)
        kill_peer(p, &err_write);
}

/* A new socket (so a new port) for p, in place of its old one. */
static int open_socket(struct peer *p)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = p};
    if (fd < 0 || connect(fd, (const struct sockaddr *)&server, sizeof server) != 0 ||
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (p->fd >= 0)
        close(p->fd);
    p->fd = fd;
    return 0;
}

static void send_hello(struct peer *p, double t)
{
    /* At least 40 bytes, or mcpd's 3x rule leaves no room for the cookie. */
    static const char hello[] =
        "{\"_udp_hello\":\"udp_echo\",\"_udp_pad\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}";
    /* Silence for a second: the kernel may have given this socket the port
     * of a peer mcpd still holds from an earlier run, whose datagrams
     * without that peer's cookie it drops unanswered (rule 3). A new
     * socket gets a new port. */
    if (p->hello_tries > 0 && p->hello_tries % REOPEN_TRIES == 0 && open_socket(p) != 0) {
        kill_peer(p, &err_write);
        return;
    }
    transmit(p, hello, sizeof hello - 1);
    p->hello_due = t + 0.2;
    p->hello_tries++;
}

/* Sends msg (a JSON object) in sequence, with the cookie, and an ack when
 * mcpd sent something we have not acknowledged yet. */
static int send_msg(struct peer *p, const char *msg, double t)
{
    struct out *o = NULL;
    for (int i = 0; i < OUT_MAX && !o; i++)
        if (!p->out[i].seq)
            o = &p->out[i];
    if (!o)
        return -1;
    o->seq = p->next_seq++;
    int n = snprintf(o->buf, sizeof o->buf, "{\"_udp_cookie\":\"%s\",\"_udp_seq\":%llu", p->cookie,
                     (unsigned long long)o->seq);
    if (p->delivered > p->acked) {
        n += snprintf(o->buf + n, sizeof o->buf - (size_t)n, ",\"_udp_ack\":%llu",
                      (unsigned long long)p->delivered);
        p->acked = p->delivered;
    }
    n += snprintf(o->buf + n, sizeof o->buf - (size_t)n, ",%s", msg + 1);
    if ((size_t)n >= sizeof o->buf)
        return -1;
    o->len = (size_t)n;
    o->tries = 0;
    o->due = t + RTO_S;
    transmit(p, o->buf, o->len);
    return 0;
}

static void send_ack(struct peer *p)
{
    char buf[96];
    int n = snprintf(buf, sizeof buf, "{\"_udp_cookie\":\"%s\",\"_udp_ack\":%llu}", p->cookie,
                     (unsigned long long)p->delivered);
    p->acked = p->delivered;
    transmit(p, buf, (size_t)n);
}

static int send_echo(struct peer *p, double t)
{
    char msg[256];
    snprintf(msg, sizeof msg,
             "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"echo\",\"arguments\":{\"message\":\"bench\"}}}",
             ++p->id);
    p->sent_at = t;
    return send_msg(p, msg, t);
}

static void send_setup(struct peer *p, const char *token, double t)
{
    char msg[512];
    if (p->st == CONNECTING) {
        snprintf(msg, sizeof msg,
                 "{\"jsonrpc\":\"2.0\",\"id\":\"hello\",\"method\":\"mcpd/"
                 "connect\",\"params\":{%s%s%s}}",
                 token ? "\"token\":\"" : "", token ? token : "", token ? "\"" : "");
        send_msg(p, msg, t);
    } else {
        send_msg(p,
                 "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{"
                 "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{"
                 "\"name\":\"udp_echo\",\"version\":\"0\"}}}",
                 t);
        send_msg(p, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", t);
    }
}

/* The number after "key": in d, or 0. */
static uint64_t member(const char *d, const char *key)
{
    const char *at = strstr(d, key);
    return at ? strtoull(at + strlen(key), NULL, 10) : 0;
}

/* Frees our datagrams up to ack, and those in "_udp_sack". */
static void on_ack(struct peer *p, const char *d)
{
    uint64_t ack = member(d, "\"_udp_ack\":");
    const char *sack = strstr(d, "\"_udp_sack\":[");
    for (int i = 0; i < OUT_MAX; i++) {
        uint64_t s = p->out[i].seq;
        if (!s)
            continue;
        int done = s <= ack;
        for (const char *q = sack ? sack + 13 : NULL; q && !done && *q && *q != ']'; q++) {
            char *e;
            uint64_t v = strtoull(q, &e, 10);
            done = v == s;
            q = e;
            if (*q == ']')
                break;
        }
        if (done)
            p->out[i].seq = 0;
    }
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Appends the base64 text s (up to its closing quote) to p->msg. */
static int append_b64(struct peer *p, const char *s)
{
    const char *end = strchr(s, '"');
    if (!end || (end - s) % 4 != 0)
        return -1;
    size_t need = p->msg_len + (size_t)(end - s) / 4 * 3 + 1;
    if (need > MSG_MAX)
        return -1;
    char *m = realloc(p->msg, need);
    if (!m)
        return -1;
    p->msg = m;
    for (; s < end; s += 4) {
        uint32_t w = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            const char *c = s[k] == '=' ? NULL : strchr(b64, s[k]);
            if (s[k] == '=')
                pad++;
            else if (!c || !s[k] || pad)
                return -1;
            w = w << 6 | (uint32_t)(c ? c - b64 : 0);
        }
        m[p->msg_len++] = (char)(w >> 16);
        if (pad < 2)
            m[p->msg_len++] = (char)(w >> 8);
        if (pad < 1)
            m[p->msg_len++] = (char)w;
    }
    m[p->msg_len] = '\0';
    return 0;
}

static void record(double seconds)
{
    size_t b = (size_t)(seconds * 1e6 / BUCKET_US);
    hist[b < BUCKETS ? b : BUCKETS - 1]++;
    responses++;
}

/* A whole message from mcpd. Returns 1 when it answered what the peer
 * waits for and the peer sent its next request. */
static int on_message(struct peer *p, const char *m, const char *token, double t, double end)
{
    char want[32];
    if (p->st == CONNECTING || p->st == INITIALIZING)
        snprintf(want, sizeof want, "\"id\":\"%s\"", p->st == CONNECTING ? "hello" : "init");
    else
        snprintf(want, sizeof want, "\"id\":%ld", p->id);
    const char *at = strstr(m, want);
    if (!at || (at[strlen(want)] >= '0' && at[strlen(want)] <= '9'))
        return 0; /* a notification, or not ours: keep waiting */
    int ok = strstr(m, "\"result\"") != NULL;
    if (p->st == RUNNING) {
        if (t >= end)
            return 0; /* late: not counted, as tcp_echo does not read it */
        if (ok)
            record(t - p->sent_at);
        else
            note_error(m);
        if (send_echo(p, t) != 0)
            kill_peer(p, &err_write);
        return 1;
    }
    if (!ok) {
        note_error(m);
        kill_peer(p, &err_read);
        return 0;
    }
    if (p->st == CONNECTING) {
        p->st = INITIALIZING;
        send_setup(p, token, t);
        return 1;
    }
    if (p->st == INITIALIZING)
        p->st = READY;
    return 0;
}

/* One datagram d (NUL-terminated) from mcpd to p. */
static void on_datagram(struct peer *p, char *d, const char *token, double t, double end)
{
    if (strncmp(d, "{\"_udp_cookie\":\"", 16) == 0) {
        if (strstr(d, "\"_udp_reset\"")) {
            /* Before mcpd heard us it only means our _udp_seq 1 was lost. */
            if (p->heard) {
                note_error("mcpd reset the peer");
                kill_peer(p, &err_read);
            }
            return;
        }
        if (p->st == HELLO && strlen(d) >= 16 + 16) {
            memcpy(p->cookie, d + 16, 16);
            p->cookie[16] = '\0';
            p->st = CONNECTING;
            send_setup(p, token, t);
        }
        return;
    }
    if (p->st == HELLO)
        return; /* for a peer mcpd holds from before on this port: not ours */
    if (strncmp(d, "{\"_udp_ack\":", 12) == 0) {
        p->heard = 1;
        on_ack(p, d);
        return;
    }
    if (strncmp(d, "{\"_udp_seq\":", 12) != 0) {
        note_error(d); /* an error outside the sequence */
        return;
    }
    p->heard = 1;
    uint64_t seq = member(d, "{\"_udp_seq\":");
    if (strstr(d, "\"_udp_ack\":"))
        on_ack(p, d);
    if (seq != p->delivered + 1) {
        if (seq <= p->delivered)
            send_ack(p); /* a duplicate: our ack was lost */
        return;
    }
    p->delivered = seq;
    int replied = 0;
    const char *frag = strstr(d, "\"_udp_frag\":[");
    if (frag) {
        char *e;
        unsigned long i = strtoul(frag + 13, &e, 10);
        unsigned long n = strtoul(e + 1, NULL, 10);
        const char *data = strstr(d, "\"_udp_data\":\"");
        if (i == 0)
            p->msg_len = 0;
        if (!data || append_b64(p, data + 13) != 0) {
            note_error("a broken fragment");
            kill_peer(p, &err_read);
            return;
        }
        if (i + 1 == n) {
            replied = on_message(p, p->msg, token, t, end);
            p->msg_len = 0;
        }
    } else {
        replied = on_message(p, d, token, t, end);
    }
    if (!replied && p->st != DEAD)
        send_ack(p); /* else the ack rode on the request */
}

/* Resends what is due; gives a peer up after MAX_TRIES. */
static void timers(struct peer *peers, int n, double t)
{
    for (int k = 0; k < n; k++) {
        struct peer *p = &peers[k];
        if (p->st == HELLO && t >= p->hello_due) {
            if (p->hello_tries >= MAX_TRIES * 4)
                kill_peer(p, &err_timeout);
            else
                send_hello(p, t);
        }
        for (int i = 0; i < OUT_MAX && p->st != DEAD; i++) {
            struct out *o = &p->out[i];
            if (!o->seq || t < o->due)
                continue;
            if (++o->tries > MAX_TRIES) {
                kill_peer(p, &err_timeout);
                break;
            }
            double rto = RTO_S * (double)(1 << o->tries);
            o->due = t + (rto < RTO_MAX_S ? rto : RTO_MAX_S);
            retransmits++;
            transmit(p, o->buf, o->len);
        }
    }
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

/* Serves every peer's datagrams and timers until `until` or (setup) every
 * peer is set up or dead. */
static void pump(struct peer *peers, int n, const char *token, double until, double end, int setup)
{
    struct epoll_event evs[256];
    double t, next_tick = now() + TICK_S;
    for (;;) {
        t = now();
        if (t >= until)
            return;
        if (setup) {
            int pending = 0;
            for (int k = 0; k < n; k++)
                pending += peers[k].st != READY && peers[k].st != DEAD;
            if (!pending)
                return;
        }
        double wait = next_tick - t < until - t ? next_tick - t : until - t;
        int k = epoll_wait(ep, evs, 256, (int)(wait * 1000) + 1);
        if (k < 0 && errno != EINTR)
            return;
        for (int e = 0; e < k; e++) {
            struct peer *p = evs[e].data.ptr;
            for (int reads = 0; reads < 16 && p->st != DEAD; reads++) {
                ssize_t r = recv(p->fd, rx, DGRAM_MAX, MSG_DONTWAIT);
                if (r < 0) {
                    /* ECONNREFUSED: an ICMP for a datagram of ours; the
                     * retransmission timer covers it. */
                    if (errno != EAGAIN && errno != EINTR && errno != ECONNREFUSED)
                        kill_peer(p, &err_read);
                    break;
                }
                rx[r] = '\0';
                on_datagram(p, rx, token, now(), end);
            }
        }
        t = now();
        if (t >= next_tick) {
            timers(peers, n, t);
            next_tick = t + TICK_S;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: udp_echo HOST PORT PEERS SECONDS [TOKEN]\n");
        return 2;
    }
    server.sin_family = AF_INET;
    server.sin_port = htons((uint16_t)atoi(argv[2]));
    if (inet_pton(AF_INET, argv[1], &server.sin_addr) != 1) {
        fprintf(stderr, "udp_echo: bad address %s\n", argv[1]);
        return 2;
    }
    int n = atoi(argv[3]);
    double secs = atof(argv[4]);
    const char *token = argc > 5 && argv[5][0] ? argv[5] : NULL;
    if (n < 1 || n > 10000 || secs <= 0) {
        fprintf(stderr, "udp_echo: PEERS 1..10000, SECONDS > 0\n");
        return 2;
    }
    if (token && strpbrk(token, "\"\\")) {
        fprintf(stderr, "udp_echo: a token holds no quote or backslash\n");
        return 2;
    }
    struct peer *peers = calloc((size_t)n, sizeof *peers);
    ep = epoll_create1(0);
    if (!peers || ep < 0)
        return 1;
    double t = now();
    for (int i = 0; i < n; i++) {
        struct peer *p = &peers[i];
        p->next_seq = 1;
        p->fd = -1;
        if (open_socket(p) != 0) {
            fprintf(stderr, "udp_echo: peer %d: %s\n", i, strerror(errno));
            return 1;
        }
        send_hello(p, t);
    }
    pump(peers, n, token, now() + SETUP_S, 0, 1);
    for (int i = 0; i < n; i++)
        if (peers[i].st != READY) {
            fprintf(stderr,
                    "udp_echo: peer %d: setup failed (state %d; read %ld, write %ld, timeout %ld "
                    "errors) %s\n",
                    i, (int)peers[i].st, err_read, err_write, err_timeout, first_error);
            return 1;
        }
    /* The run: every peer's first echo, then the replies drive the next. */
    double start = now(), end = start + secs;
    for (int i = 0; i < n; i++) {
        peers[i].st = RUNNING;
        if (send_echo(&peers[i], start) != 0)
            kill_peer(&peers[i], &err_write);
    }
    pump(peers, n, token, end, end, 0);
    double elapsed = now() - start;
    if (elapsed > secs)
        elapsed = secs;
    /* The replies in flight, read and acknowledged (not counted), so that
     * mcpd does not resend them to closed ports during the next run. */
    pump(peers, n, token, now() + DRAIN_S, end, 0);
    for (int i = 0; i < n; i++)
        if (peers[i].st != DEAD && peers[i].delivered > peers[i].acked)
            send_ack(&peers[i]);
    printf("Running %.0fs test @ udp://%s:%s\n  1 thread and %d connections\n", secs, argv[1],
           argv[2], n);
    printf("  Latency Distribution\n     50%%  %.2fms\n     75%%  %.2fms\n     90%%  %.2fms\n     "
           "99%%  %.2fms\n",
           percentile(0.50), percentile(0.75), percentile(0.90), percentile(0.99));
    printf("  %ld requests in %.2fs\n", responses + errors, elapsed);
    if (err_read + err_write + err_timeout) /* wrk's line; failed setup fails the run */
        printf("  Socket errors: connect 0, read %ld, write %ld, timeout %ld\n", err_read,
               err_write, err_timeout);
    printf("Requests/sec: %.2f\n", (double)responses / elapsed);
    printf("BENCH responses=%ld errors=%ld retransmits=%ld%s%s\n", responses, errors, retransmits,
           first_error[0] ? " first_error=" : "", first_error);
    for (int i = 0; i < n; i++) {
        close(peers[i].fd);
        free(peers[i].msg);
    }
    free(peers);
    close(ep);
    return 0;
}
