/* conn_guard — see conn_guard.h. */
#include "conn_guard.h"
#include "clock.h"
#include "jsonrpc.h"
#include "log.h"
#include "metrics.h"
#include "table.h"
#include "ticker.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define WATCH_TICK_MS 250

struct rec {
    struct rec *prev, *next;
    int fd;
    struct sockaddr_storage peer; /* to tell this socket from a later one on the same fd */
    socklen_t peer_len;
    char peer_ip[FORWARDED_ADDR_MAX];
    char client[FORWARDED_ADDR_MAX]; /* the last request's client */
    char key[FORWARDED_ADDR_MAX];    /* the address counted for it, "" if none */
    int64_t deadline;                /* ms (monotonic); 0: none */
    int over_cap, over_ip;           /* accepted past a cap: refuse its requests */
    int detached;                    /* its place moved to a conn_slot */
};

/* A detached socket's place: counted in g.active, and against key. */
struct conn_slot {
    char key[FORWARDED_ADDR_MAX];
};

static struct {
    struct conn_guard_config cfg;
    pthread_mutex_t mu;
    struct rec *head;
    unsigned active;
    struct table *per_ip; /* address -> count, as a pointer-sized integer */
    struct ticker watchdog;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .watchdog = TICKER_INITIALIZER};

#define ACCEPT_RETRY_MS 100
#define ACCEPT_LOG_EVERY_MS 10000

/* Accept failures, seen on libmicrohttpd's one accepting thread. */
static pthread_mutex_t accept_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t accept_logged_at = INT64_MIN / 2;
static unsigned long accept_held;

int conn_guard_accept_failed(const char *line, int *should_log, unsigned long *held)
{
    /* The first line names the errno; the second ("Hit process or system
     * resource limit ...") follows it on the same failure. */
    int accept_error = strncmp(line, "Error accepting connection", 26) == 0 &&
                       (strstr(line, "Too many open files") || strstr(line, "Cannot allocate") ||
                        strstr(line, "No buffer space") || strstr(line, "No file descriptors"));
    int limit_note = strncmp(line, "Hit process or system resource limit", 36) == 0;
    if (!accept_error && !limit_note)
        return 0;
    pthread_mutex_lock(&accept_mu);
    int64_t now = clock_mono_ms();
    *should_log = accept_error && now - accept_logged_at >= ACCEPT_LOG_EVERY_MS;
    *held = accept_held;
    if (*should_log) {
        accept_logged_at = now;
        accept_held = 0;
    } else if (accept_error) {
        accept_held++;
    }
    pthread_mutex_unlock(&accept_mu);
    /* A pool thread with connections stops accepting until one closes
     * (libmicrohttpd's at_limit); one with none retries at once, forever:
     * that one is paced here. It serves nobody meanwhile. */
    if (limit_note && strstr(line, "at FIRST connection")) {
        struct timespec pause = {0, ACCEPT_RETRY_MS * 1000000L};
        nanosleep(&pause, NULL);
    }
    return 1;
}

static unsigned headroom(void)
{
    unsigned h = g.cfg.max_connections / 8;
    return h < 16 ? 16 : h > 1024 ? 1024 : h;
}

unsigned conn_guard_mhd_limit(void)
{
    return g.cfg.max_connections + headroom();
}

/* Counts a connection against addr (under g.mu); returns the new count. */
static uintptr_t count_add(const char *addr, int delta)
{
    uintptr_t n = (uintptr_t)table_get(g.per_ip, addr);
    n = delta > 0 ? n + 1 : n ? n - 1 : 0;
    if (n)
        table_put(g.per_ip, addr, (void *)n);
    else
        table_del(g.per_ip, addr);
    return n;
}

/* Moves r's per-client count to addr (under g.mu). */
static void recount(struct rec *r, const char *addr)
{
    if (strcmp(r->key, addr) == 0)
        return;
    if (r->key[0])
        count_add(r->key, -1);
    snprintf(r->key, sizeof r->key, "%s", addr);
    r->over_ip = 0;
    if (addr[0])
        r->over_ip = g.cfg.max_per_ip && count_add(addr, 1) > g.cfg.max_per_ip;
}

static void peer_text(const struct sockaddr *sa, char *out)
{
    out[0] = '\0';
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, FORWARDED_ADDR_MAX);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, FORWARDED_ADDR_MAX);
    /* One spelling per address, so that an IPv4 client counts once whether
     * the daemon listens on IPv4 or IPv6. */
    if (strncmp(out, "::ffff:", 7) == 0 && strchr(out + 7, '.'))
        memmove(out, out + 7, strlen(out + 7) + 1);
}

static void on_start(struct MHD_Connection *con, void **socket_context)
{
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *addr =
        MHD_get_connection_info(con, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    struct rec *r = calloc(1, sizeof *r);
    if (!r || !fd || !addr || !addr->client_addr) {
        free(r);
        return;
    }
    r->fd = fd->connect_fd;
    r->peer_len = addr->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                           : sizeof(struct sockaddr_in);
    memcpy(&r->peer, addr->client_addr, r->peer_len);
    peer_text(addr->client_addr, r->peer_ip);
    snprintf(r->client, sizeof r->client, "%s", r->peer_ip);
    pthread_mutex_lock(&g.mu);
    r->over_cap = ++g.active > g.cfg.max_connections;
    /* A trusted proxy's sockets carry many clients: those are counted per
     * request, from the forwarded address. */
    if (!forwarded_trusts(g.cfg.trusted, r->peer_ip))
        recount(r, r->peer_ip);
    if (g.cfg.request_timeout_ms > 0)
        r->deadline = clock_mono_ms() + g.cfg.request_timeout_ms;
    r->next = g.head;
    if (g.head)
        g.head->prev = r;
    g.head = r;
    pthread_mutex_unlock(&g.mu);
    *socket_context = r;
}

static void on_close(void **socket_context)
{
    struct rec *r = *socket_context;
    if (!r)
        return;
    pthread_mutex_lock(&g.mu);
    if (r->prev)
        r->prev->next = r->next;
    else
        g.head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    if (!r->detached)
        g.active--;
    recount(r, "");
    pthread_mutex_unlock(&g.mu);
    *socket_context = NULL;
    free(r);
}

void conn_guard_notify(void *cls, struct MHD_Connection *con, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
    (void)cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        on_start(con, socket_context);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        on_close(socket_context);
}

static struct rec *rec_of(struct MHD_Connection *con)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(con, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

struct conn_slot *conn_guard_detach(struct MHD_Connection *con)
{
    struct rec *r = rec_of(con);
    struct conn_slot *slot = r ? calloc(1, sizeof *slot) : NULL;
    if (!slot)
        return NULL;
    pthread_mutex_lock(&g.mu);
    /* The record's count moves to the slot, which its socket's owner
     * releases; the record, freed with the connection, counts nothing. */
    memcpy(slot->key, r->key, sizeof slot->key);
    r->key[0] = '\0';
    r->detached = 1;
    r->deadline = 0;
    pthread_mutex_unlock(&g.mu);
    return slot;
}

void conn_guard_release(struct conn_slot *slot)
{
    if (!slot)
        return;
    pthread_mutex_lock(&g.mu);
    if (g.per_ip) { /* else the guard has stopped: nothing is counted */
        g.active--;
        if (slot->key[0])
            count_add(slot->key, -1);
    }
    pthread_mutex_unlock(&g.mu);
    free(slot);
}

enum MHD_Result conn_guard_queue_refusal(struct MHD_Connection *con, unsigned status, int code,
                                         const char *message, int retry_after_s)
{
    json_t *err = jsonrpc_error(NULL, code, message, NULL);
    char *text = err ? json_dumps(err, JSON_COMPACT) : NULL;
    json_decref(err);
    struct MHD_Response *resp =
        text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    MHD_add_response_header(resp, "Connection", "close");
    if (retry_after_s > 0) {
        char secs[16];
        snprintf(secs, sizeof secs, "%d", retry_after_s);
        MHD_add_response_header(resp, "Retry-After", secs);
    }
    enum MHD_Result rc = MHD_queue_response(con, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

int conn_guard_request_begin(struct MHD_Connection *con, enum MHD_Result *rc)
{
    struct rec *r = rec_of(con);
    if (!r)
        return 0;
    char client[FORWARDED_ADDR_MAX];
    int behind_proxy = forwarded_trusts(g.cfg.trusted, r->peer_ip);
    if (behind_proxy)
        forwarded_client(g.cfg.trusted, r->peer_ip,
                         MHD_lookup_connection_value(con, MHD_HEADER_KIND, "X-Forwarded-For"),
                         client);
    pthread_mutex_lock(&g.mu);
    if (behind_proxy) {
        memcpy(r->client, client, sizeof client);
        recount(r, client);
    }
    int over_cap = r->over_cap, over_ip = r->over_ip;
    pthread_mutex_unlock(&g.mu);
    if (!over_cap && !over_ip)
        return 0;
    char msg[160];
    if (over_cap) {
        snprintf(msg, sizeof msg, "Server busy: %u connections are open (--max-connections)",
                 g.cfg.max_connections);
        metrics_refused("max_connections");
        *rc = conn_guard_queue_refusal(con, MHD_HTTP_SERVICE_UNAVAILABLE, JSONRPC_SERVER_BUSY, msg,
                                       5);
    } else {
        snprintf(msg, sizeof msg,
                 "Too many connections from %s: the limit is %u (--max-connections-per-ip)",
                 client[0] && behind_proxy ? client : r->peer_ip, g.cfg.max_per_ip);
        metrics_refused("max_connections_per_ip");
        *rc = conn_guard_queue_refusal(con, MHD_HTTP_TOO_MANY_REQUESTS,
                                       JSONRPC_TOO_MANY_CONNECTIONS, msg, 5);
    }
    log_event(LOG_DEBUG, NULL, over_cap ? "max_connections" : "max_connections_per_ip", "%s", msg);
    return 1;
}

static void set_deadline(struct MHD_Connection *con, int64_t deadline)
{
    struct rec *r = rec_of(con);
    if (!r)
        return;
    pthread_mutex_lock(&g.mu);
    /* A detached record's socket number is being closed by libmicrohttpd
     * while the socket lives on under another: never cut it. */
    if (!r->detached)
        r->deadline = deadline;
    pthread_mutex_unlock(&g.mu);
}

void conn_guard_request_received(struct MHD_Connection *con)
{
    set_deadline(con, 0);
}

void conn_guard_request_done(struct MHD_Connection *con)
{
    if (g.cfg.request_timeout_ms > 0)
        set_deadline(con, clock_mono_ms() + g.cfg.request_timeout_ms);
}

void conn_guard_client(struct MHD_Connection *con, char *out)
{
    struct rec *r = rec_of(con);
    out[0] = '\0';
    if (!r)
        return;
    pthread_mutex_lock(&g.mu);
    memcpy(out, r->client, FORWARDED_ADDR_MAX);
    pthread_mutex_unlock(&g.mu);
}

/* The fd is still this connection's socket (not one accepted later on a
 * reused descriptor). Records leave the list before libmicrohttpd closes
 * their socket, so this is a second line of defence. */
static int same_socket(const struct rec *r)
{
    struct sockaddr_storage now;
    socklen_t len = sizeof now;
    return getpeername(r->fd, (struct sockaddr *)&now, &len) == 0 && len >= r->peer_len &&
           memcmp(&now, &r->peer, r->peer_len) == 0;
}

/* Cuts the connections past their deadline, under g.mu; says so after. */
static int64_t watch_tick(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g.mu);
    int64_t now = clock_mono_ms();
    unsigned cut = 0;
    for (struct rec *r = g.head; r; r = r->next) {
        if (!r->deadline || now < r->deadline)
            continue;
        r->deadline = 0;
        if (!same_socket(r))
            continue;
        /* Counted before the cut: a client that sees its socket close
         * and then reads /metrics must find itself there. */
        metrics_refused("request_timeout");
        /* Its thread, blocked reading the request, sees the end of
         * the stream and closes the connection. */
        shutdown(r->fd, SHUT_RDWR);
        cut++;
    }
    pthread_mutex_unlock(&g.mu);
    if (cut)
        log_event(LOG_DEBUG, NULL, "request_timeout",
                  "%u connection(s) closed: no complete request within %lld ms", cut,
                  (long long)g.cfg.request_timeout_ms);
    return clock_mono_ms() + WATCH_TICK_MS;
}

int conn_guard_start(const struct conn_guard_config *cfg, char *err, size_t errcap)
{
    g.cfg = *cfg;
    g.per_ip = table_new();
    if (!g.per_ip || ticker_start(&g.watchdog, &(struct ticker_job){.name = "mcpd-conn-guard",
                                                                    .first_ms = WATCH_TICK_MS,
                                                                    .tick = watch_tick}) != 0) {
        snprintf(err, errcap, "cannot start the connection watchdog");
        table_free(g.per_ip);
        g.per_ip = NULL;
        return -1;
    }
    return 0;
}

void conn_guard_stop(void)
{
    ticker_stop(&g.watchdog);
    /* Under the lock: a WebSocket session, which may outlive the HTTP
     * server, can still release its place (conn_guard_release). */
    pthread_mutex_lock(&g.mu);
    table_free(g.per_ip);
    g.per_ip = NULL;
    pthread_mutex_unlock(&g.mu);
}
