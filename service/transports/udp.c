/* udp — see udp.h. This file owns the socket: it receives, rate-limits,
 * validates addresses (cookies) and keeps the table of peers; udp_peer.c
 * serves each peer.
 *
 * The caps are HTTP's (--max-connections, --max-connections-per-ip),
 * counted as peers apart from HTTP's and TCP's connections: a validated
 * datagram past one is answered with an error (-32013 or -32014, as on TCP)
 * and creates nothing. */
#include "udp.h"
#include "addr_caps.h"
#include "fnv1a.h"
#include "clock.h"
#include "fiber.h"
#include "greeting.h"
#include "jsonrpc.h"
#include "log.h"
#include "sock_bind.h"
#include "loop.h"
#include "token_bucket.h"
#include "udp_peer.h"
#include "udp_wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PEER_BUCKETS 1024
/* Rate buckets: a fixed table indexed by a hash of the address, so a
 * flood of spoofed addresses costs no memory (addresses that collide
 * share a bucket, which only makes the limit stricter for them). */
#define RATE_SLOTS 4096
/* A cookie is valid in the window it was made in and the next one. */
#define COOKIE_WINDOW_MS 30000
/* The anti-amplification bound: before an address is validated, mcpd
 * sends it at most this many times what it received. */
#define AMPLIFICATION 3
#define DROP_LOG_MS 10000
#define STOP_WAIT_MS 3000

struct peer_entry {
    struct udp_peer *p;
    struct sockaddr_storage addr;
    socklen_t len;
    char ip[64];
    struct peer_entry *next;
};

static struct {
    int fd;
    int port;
    struct udp_config cfg;
    uint8_t secret[16];
    pthread_mutex_t mu; /* guards what follows */
    struct fiber *reader;
    int reader_done;
    int stopping;    /* no new peers */
    int reader_stop; /* the reader ends (after the peers) */
    struct peer_entry *peers[PEER_BUCKETS];
    /* the reader's alone */
    struct token_bucket rate[RATE_SLOTS];
    uint64_t rate_dropped;
    int64_t rate_logged_ms;
} L = {.fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

/* Peers per address and in all (taken under L.mu, with the table). */
static struct addr_caps caps = ADDR_CAPS_INIT;

/* ---- addresses ---- */

/* The address bytes (no port) of ss. */
static const void *ip_bytes(const struct sockaddr_storage *ss, size_t *n)
{
    if (ss->ss_family == AF_INET6) {
        *n = 16;
        return &((const struct sockaddr_in6 *)ss)->sin6_addr;
    }
    *n = 4;
    return &((const struct sockaddr_in *)ss)->sin_addr;
}

static unsigned short port_of(const struct sockaddr_storage *ss)
{
    return ntohs(ss->ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)ss)->sin6_port
                                           : ((const struct sockaddr_in *)ss)->sin_port);
}

static unsigned peer_hash(const struct sockaddr_storage *ss)
{
    size_t n;
    const void *a = ip_bytes(ss, &n);
    unsigned short port = port_of(ss);
    return fnv1a(&port, sizeof port, fnv1a(a, n, FNV1A_SEED)) % PEER_BUCKETS;
}

static int same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    size_t na, nb;
    const void *x = ip_bytes(a, &na), *y = ip_bytes(b, &nb);
    return a->ss_family == b->ss_family && port_of(a) == port_of(b) && na == nb &&
           memcmp(x, y, na) == 0;
}

static void ip_name(const struct sockaddr_storage *ss, char *out, size_t cap)
{
    size_t n;
    if (!inet_ntop(ss->ss_family, ip_bytes(ss, &n), out, (socklen_t)cap))
        snprintf(out, cap, "?");
}

/* ---- the table of peers ---- */

/* The peer at addr, with a reference for the caller, or NULL. */
static struct udp_peer *lookup(const struct sockaddr_storage *ss)
{
    pthread_mutex_lock(&L.mu);
    struct peer_entry *e = L.peers[peer_hash(ss)];
    while (e && !same_addr(&e->addr, ss))
        e = e->next;
    struct udp_peer *p = e ? e->p : NULL;
    if (p)
        udp_peer_ref(p);
    pthread_mutex_unlock(&L.mu);
    return p;
}

/* Makes and registers a peer for a validated address. Returns it (a
 * reference for the caller), or NULL with the JSON-RPC code of the cap it
 * is past and *what naming it. */
static struct udp_peer *admit(const struct sockaddr_storage *ss, socklen_t len, const char *cookie,
                              int *code, const char **what)
{
    char ip[64], name[80];
    ip_name(ss, ip, sizeof ip);
    snprintf(name, sizeof name, "%s:%u", ip, port_of(ss));
    pthread_mutex_lock(&L.mu);
    struct udp_peer *p = NULL;
    struct peer_entry *e = NULL;
    if (L.stopping) {
        *code = JSONRPC_SERVER_BUSY;
        *what = "Server busy: shutting down";
    } else if ((*code = addr_caps_take(&caps, ip, what)) != 0) {
        /* past a cap: *code and *what say which */
    } else if (!(e = calloc(1, sizeof *e)) ||
               !(p = udp_peer_new((const struct sockaddr *)ss, len, name, cookie))) {
        addr_caps_release(&caps, ip);
        *code = JSONRPC_SERVER_BUSY;
        *what = "Server busy: out of memory";
        free(e);
    } else {
        e->p = p;
        memcpy(&e->addr, ss, len);
        e->len = len;
        snprintf(e->ip, sizeof e->ip, "%s", ip);
        struct peer_entry **bp = &L.peers[peer_hash(ss)];
        e->next = *bp;
        *bp = e;
        udp_peer_ref(p); /* the caller's */
    }
    pthread_mutex_unlock(&L.mu);
    return p;
}

void udp_peer_gone(struct udp_peer *p)
{
    struct udp_peer *drop = NULL;
    pthread_mutex_lock(&L.mu);
    for (size_t b = 0; b < PEER_BUCKETS && !drop; b++)
        for (struct peer_entry **ep = &L.peers[b]; *ep; ep = &(*ep)->next) {
            if ((*ep)->p != p)
                continue;
            struct peer_entry *e = *ep;
            *ep = e->next;
            addr_caps_release(&caps, e->ip);
            free(e);
            drop = p;
            break;
        }
    pthread_mutex_unlock(&L.mu);
    if (drop)
        udp_peer_unref(drop); /* the table's */
}

/* ---- what goes to an address without a peer ---- */

static uint64_t window_now(void)
{
    return (uint64_t)(clock_mono_ms() / COOKIE_WINDOW_MS);
}

static int cookie_valid(const struct sockaddr_storage *ss, const char *cookie)
{
    uint64_t w = window_now();
    for (uint64_t k = 0; k < 2 && k <= w; k++) {
        char want[UDP_WIRE_COOKIE_LEN + 1];
        udp_wire_cookie(L.secret, (const struct sockaddr *)ss, w - k, want);
        unsigned diff = 0;
        for (size_t i = 0; i < UDP_WIRE_COOKIE_LEN; i++)
            diff |= (unsigned)(want[i] ^ cookie[i]);
        if (!diff)
            return 1;
    }
    return 0;
}

/* Sends what, of len bytes, to ss, if it is within the amplification
 * bound of the `got` bytes received from it. */
static void send_bounded(const struct sockaddr_storage *ss, socklen_t sl, const char *what,
                         size_t len, size_t got)
{
    if (len > AMPLIFICATION * got)
        return;
    (void)!sendto(L.fd, what, len, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)ss, sl);
}

/* A JSON-RPC error with id null, outside the sequence (the datagram it
 * answers has none), within the amplification bound. */
static void notice(const struct sockaddr_storage *ss, socklen_t sl, int code, const char *message,
                   size_t got)
{
    json_t *err = greeting_error(NULL, code, message, UDP_TRANSPORT, NULL);
    size_t len;
    char *text = err ? jsonrpc_dump(err, &len) : NULL;
    json_decref(err);
    if (text)
        send_bounded(ss, sl, text, len, got);
    free(text);
}

static void send_cookie(const struct sockaddr_storage *ss, socklen_t sl, int reset, size_t got)
{
    char cookie[UDP_WIRE_COOKIE_LEN + 1], buf[96];
    udp_wire_cookie(L.secret, (const struct sockaddr *)ss, window_now(), cookie);
    size_t len = udp_wire_cookie_reply(cookie, reset, buf, sizeof buf);
    send_bounded(ss, sl, buf, len, got);
}

/* ---- receiving ---- */

static int rate_ok(const struct sockaddr_storage *ss, int64_t now)
{
    if (L.cfg.rate_per_ip <= 0)
        return 1;
    size_t n;
    const void *a = ip_bytes(ss, &n);
    struct token_bucket *b = &L.rate[fnv1a(a, n, FNV1A_SEED) % RATE_SLOTS];
    if (b->rate <= 0)
        token_bucket_init(b, L.cfg.rate_per_ip, L.cfg.rate_per_ip, now);
    if (token_bucket_take(b, now))
        return 1;
    L.rate_dropped++;
    if (now - L.rate_logged_ms >= DROP_LOG_MS) {
        char ip[64];
        ip_name(ss, ip, sizeof ip);
        log_event(LOG_WARN, NULL, "udp_rate_limited",
                  "%llu datagrams dropped over --udp-rate-per-ip (the latest from %s)",
                  (unsigned long long)L.rate_dropped, ip);
        L.rate_dropped = 0;
        L.rate_logged_ms = now;
    }
    return 0;
}

/* A datagram from an address:port without a peer. */
static void from_stranger(const struct sockaddr_storage *ss, socklen_t sl, struct udp_wire_in *in,
                          int decoded, size_t got)
{
    int valid = decoded && in->cookie[0] && cookie_valid(ss, in->cookie);
    if (valid && in->has_seq && in->seq == 1) {
        int code;
        const char *what = NULL;
        struct udp_peer *p = admit(ss, sl, in->cookie, &code, &what);
        if (!p) {
            char ip[64];
            ip_name(ss, ip, sizeof ip);
            log_event(LOG_INFO, NULL, "udp_refused", "peer %s: %s", ip, what);
            notice(ss, sl, code, what, got);
            return;
        }
        udp_peer_input(p, in);
        if (udp_peer_start(p) != 0) {
            log_event(LOG_WARN, NULL, "udp_refused", "no fiber for a peer");
            udp_peer_gone(p);
        }
        udp_peer_unref(p);
        return;
    }
    /* A client that believes it has state here (it sends a cookie or
     * sequence numbers) learns that it has none: mcpd restarted, or the
     * peer ended. (A client whose seq 1 was lost, so that its seq 2 comes
     * first, ignores this: nothing of it was acknowledged yet.) */
    int reset = decoded && (in->cookie[0] || in->has_seq || in->has_ack);
    send_cookie(ss, sl, reset, got);
}

static void dispatch(const char *buf, size_t n, const struct sockaddr_storage *ss, socklen_t sl)
{
    if (!rate_ok(ss, clock_mono_ms()))
        return;
    struct udp_wire_in in;
    char why[160];
    int decoded = udp_wire_decode(buf, n, &in, why, sizeof why) == 0;
    struct udp_peer *p = lookup(ss);
    if (!p) {
        from_stranger(ss, sl, &in, decoded, n);
    } else if (!decoded) {
        char msg[200];
        snprintf(msg, sizeof msg, "Parse error: %s", why);
        notice(ss, sl, JSONRPC_PARSE_ERROR, msg, n);
    } else if (strcmp(in.cookie, udp_peer_cookie(p)) == 0) {
        udp_peer_input(p, &in);
    }
    /* else: not from the peer (no cookie, or another): dropped */
    udp_wire_in_clear(&in);
    if (p)
        udp_peer_unref(p);
}

static int reader_stopping(void)
{
    pthread_mutex_lock(&L.mu);
    int s = L.reader_stop;
    pthread_mutex_unlock(&L.mu);
    return s;
}

static void reader_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&L.mu);
    L.reader = fiber_current();
    pthread_mutex_unlock(&L.mu);
    char *buf = malloc(UDP_WIRE_MAX_DATAGRAM + 1);
    while (buf && !reader_stopping()) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        ssize_t got = recvfrom(L.fd, buf, UDP_WIRE_MAX_DATAGRAM + 1, MSG_DONTWAIT,
                               (struct sockaddr *)&ss, &sl);
        if (got < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                int rc = loop_wait_fd(L.fd, EPOLLIN, -1);
                if (rc == ECANCELED)
                    break;
                if (rc != 0 && rc != EINTR && rc != ETIMEDOUT)
                    fiber_sleep_ms(100);
            }
            /* Others (an ICMP error of an earlier send) concern one peer. */
            continue;
        }
        if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)
            continue;
        dispatch(buf, (size_t)got, &ss, sl);
    }
    free(buf);
    pthread_mutex_lock(&L.mu);
    L.reader = NULL;
    L.reader_done = 1;
    pthread_mutex_unlock(&L.mu);
}

/* ---- lifecycle ---- */

static int bind_on(const struct udp_config *cfg, char **err)
{
    int fd = sock_bind("--udp-listen", cfg->host, cfg->port, SOCK_DGRAM, &L.port, err);
    if (fd < 0)
        return -1;
    /* Room for bursts of many peers between two reads. */
    int sz = 4 * 1024 * 1024;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    return fd;
}

int udp_start(const struct udp_config *cfg, char **err)
{
    if (getrandom(L.secret, sizeof L.secret, 0) != (ssize_t)sizeof L.secret) {
        *err = strdup("--udp-listen: no randomness for the cookie secret");
        return -1;
    }
    int fd = bind_on(cfg, err);
    if (fd < 0)
        return -1;
    L.fd = fd;
    L.cfg = *cfg;
    addr_caps_configure(&caps, L.cfg.max_peers, L.cfg.max_per_ip);
    udp_peer_configure(&L.cfg, fd);
    if (loop_spawn(reader_main, NULL) != 0) {
        close(fd);
        L.fd = -1;
        *err = strdup("--udp-listen: cannot start the reader fiber");
        return -1;
    }
    log_event(LOG_INFO, NULL, "listening", "udp://%s:%d", cfg->host, L.port);
    return 0;
}

int udp_port(void)
{
    return L.port;
}

static int reader_finished(void)
{
    pthread_mutex_lock(&L.mu);
    int done = L.reader_done;
    pthread_mutex_unlock(&L.mu);
    return done;
}

/* Waits (the main thread) until done() or the deadline. */
static void wait_for(int (*done)(void), int64_t deadline)
{
    struct timespec ts = {0, 5 * 1000000};
    while (!done() && clock_mono_ms() < deadline)
        nanosleep(&ts, NULL);
}

static int no_peers(void)
{
    return addr_caps_total(&caps) == 0;
}

void udp_stop(void)
{
    pthread_mutex_lock(&L.mu);
    int started = L.fd >= 0 && !L.stopping;
    L.stopping = 1; /* no new peer */
    /* Each peer says goodbye and waits (bounded) for its acknowledgement,
     * which the reader, still running, takes. */
    for (size_t b = 0; b < PEER_BUCKETS; b++)
        for (struct peer_entry *e = L.peers[b]; e; e = e->next)
            udp_peer_stop(e->p);
    pthread_mutex_unlock(&L.mu);
    if (!started)
        return;
    wait_for(no_peers, clock_mono_ms() + STOP_WAIT_MS);
    pthread_mutex_lock(&L.mu);
    L.reader_stop = 1;
    if (L.reader)
        fiber_wake(L.reader);
    pthread_mutex_unlock(&L.mu);
    wait_for(reader_finished, clock_mono_ms() + 2000);
    if (reader_finished()) {
        close(L.fd);
        L.fd = -1;
    }
}
