/* udp_remote — see udp_remote.h.
 *
 * The client's side of the README's "UDP wire rules", driven by main.c's
 * poll loop: one connected datagram socket; the hello until a cookie
 * comes; then mcpd/connect (the token; after a reset the session id and
 * the last event id seen) as seq 1 and the client's messages after it;
 * every datagram numbered, kept until acknowledged and sent again on a
 * backed-off timer (udp_wire's RTO), at most WINDOW unacknowledged; what
 * mcpd sends acknowledged at once, duplicates dropped, order restored in a
 * reorder window, fragments reassembled. A reset (mcpd restarted, or
 * dropped this peer) or a peer given up (no acknowledgement) starts over
 * with a new cookie; requests still unanswered when no contact comes back
 * within response_timeout_ms are answered with an error. */
#include "udp_remote.h"

#include "bridge_log.h"
#include "rpc_message.h"
#include "udp_wire.h"

#include <curl/curl.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WINDOW 64
#define MAX_DATAGRAM 1200
#define MAX_TRIES 8
#define HELLO_MS 200
/* With requests pending and nothing heard for this long, a bare
 * acknowledgement goes out as a probe: a peer mcpd no longer knows (a
 * restart) is answered with a reset. */
#define PROBE_MS 1000
#define CONNECT_ID "mcp-bridge-connect"
/* The most a reassembled message from mcpd may be. */
#define MAX_MESSAGE (64 * 1024 * 1024)

struct out_dgram {
    uint64_t seq; /* 0: free */
    char *buf;
    size_t len;
    int64_t sent_ms, due_ms;
    int tries, acked;
};

struct queued {
    struct queued *next;
    char *text;
    size_t len;
};

struct pending {
    struct pending *next;
    char *key;
    json_t *id;
    int64_t deadline; /* after a start over: answered with an error then */
};

struct udp_remote {
    const struct bridge_options *o;
    struct remote_sink sink;
    CURLM *multi;
    int fd;
    struct sockaddr_storage addr; /* mcpd's */
    socklen_t addr_len;
    char host[300]; /* host:port, for messages */
    char cookie[UDP_WIRE_COOKIE_LEN + 1];
    int ready; /* the cookie came */
    int heard; /* mcpd acknowledged or sent something since */
    int64_t hello_at, last_rx_ms, probe_at;
    /* sending */
    uint64_t next_seq, base;
    struct out_dgram out[WINDOW];
    struct udp_rto rto;
    struct queued *q, **q_tail; /* messages not yet numbered */
    /* receiving */
    uint64_t delivered;
    struct udp_wire_in in[WINDOW];
    int present[WINDOW];
    char *asm_buf;
    size_t asm_len;
    uint32_t asm_n, asm_next;
    /* the session */
    struct pending *pending;
    int n_pending;
    char *session_id, *last_event_id;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void raw(struct udp_remote *u, const char *buf, size_t len)
{
    /* A full buffer or a refused port is a lost datagram: sent again. */
    (void)!send(u->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* ---- pending requests ---- */

static void answer_all(struct udp_remote *u, const char *why)
{
    while (u->pending) {
        struct pending *p = u->pending;
        u->pending = p->next;
        bridge_log(LOG_WARN, "request_failed", "id=%s: %s", p->key, why);
        char *reply = rpc_error_reply(p->id, RPC_BRIDGE_ERROR, why);
        if (reply)
            u->sink.emit(u->sink.ud, reply, strlen(reply));
        free(reply);
        free(p->key);
        json_decref(p->id);
        free(p);
    }
    u->n_pending = 0;
}

static void answered(struct udp_remote *u, const json_t *id)
{
    char *key = rpc_id_key(id);
    for (struct pending **pp = &u->pending; key && *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->key, key) == 0) {
            struct pending *p = *pp;
            *pp = p->next;
            free(p->key);
            json_decref(p->id);
            free(p);
            u->n_pending--;
            break;
        }
    free(key);
}

/* ---- sending ---- */

static void enqueue(struct udp_remote *u, const char *text, size_t len, int front)
{
    struct queued *q = calloc(1, sizeof *q);
    if (!q || !(q->text = malloc(len + 1))) {
        free(q);
        return;
    }
    memcpy(q->text, text, len);
    q->text[len] = '\0';
    q->len = len;
    if (front) {
        q->next = u->q;
        if (!u->q)
            u->q_tail = &q->next;
        u->q = q;
    } else {
        *u->q_tail = q;
        u->q_tail = &q->next;
    }
}

/* Numbers and sends queued messages while the window has room for the
 * whole of the next one. */
static void pump(struct udp_remote *u)
{
    while (u->ready && u->q) {
        struct queued *q = u->q;
        size_t n = udp_wire_count(q->text, q->len, MAX_DATAGRAM);
        if (u->next_seq - u->base + n > WINDOW && u->next_seq != u->base)
            return;
        u->q = q->next;
        if (!u->q)
            u->q_tail = &u->q;
        for (size_t i = 0; i < n; i++) {
            /* A message larger than the window waits for room per datagram
             * (the loop comes back here after each acknowledgement). */
            struct out_dgram *o = &u->out[u->next_seq % WINDOW];
            if (o->seq && !o->acked)
                break;
            free(o->buf);
            size_t dl;
            char *d =
                udp_wire_encode(q->text, q->len, i, n, u->next_seq, u->cookie, MAX_DATAGRAM, &dl);
            if (!d)
                break;
            int64_t now = now_ms();
            *o = (struct out_dgram){.seq = u->next_seq,
                                    .buf = d,
                                    .len = dl,
                                    .sent_ms = now,
                                    .due_ms = now + udp_rto_backoff(&u->rto, 0)};
            u->next_seq++;
            raw(u, d, dl);
        }
        free(q->text);
        free(q);
    }
}

/* ---- starting over ---- */

static void clear_state(struct udp_remote *u)
{
    for (size_t i = 0; i < WINDOW; i++) {
        free(u->out[i].buf);
        u->out[i] = (struct out_dgram){0};
        udp_wire_in_clear(&u->in[i]);
        u->present[i] = 0;
    }
    free(u->asm_buf);
    u->asm_buf = NULL;
    u->asm_len = 0;
    u->asm_n = u->asm_next = 0;
    u->next_seq = u->base = 1;
    u->delivered = 0;
    u->ready = 0;
    u->heard = 0;
    u->cookie[0] = '\0';
    udp_rto_init(&u->rto, 200, 100, 4000);
}

static void hello(struct udp_remote *u)
{
    /* padded: mcpd answers at most 3x what it receives */
    static const char h[] =
        "{\"_udp_hello\":\"mcp-bridge\",\"_udp_pad\":\"........................\"}";
    raw(u, h, sizeof h - 1);
    u->hello_at = now_ms() + HELLO_MS;
}

/* mcpd/connect for the next incarnation: the token, and the session to
 * resume with the last event seen. */
static void queue_connect(struct udp_remote *u)
{
    json_t *params = json_object();
    if (u->o->token)
        json_object_set_new(params, "token", json_string(u->o->token));
    if (u->session_id)
        json_object_set_new(params, "sessionId", json_string(u->session_id));
    if (u->session_id && u->last_event_id)
        json_object_set_new(params, "lastEventId", json_string(u->last_event_id));
    json_t *m = json_pack("{s:s, s:s, s:s, s:o}", "jsonrpc", "2.0", "id", CONNECT_ID, "method",
                          "mcpd/connect", "params", params);
    char *text = m ? json_dumps(m, JSON_COMPACT) : NULL;
    if (text)
        enqueue(u, text, strlen(text), 1);
    free(text);
    json_decref(m);
}

/* The peer is gone at mcpd (reset, or no acknowledgement): a new socket,
 * a new cookie, then mcpd/connect resumes the session from the last event seen. What
 * was not acknowledged is lost; a request still unanswered is answered
 * with an error response_timeout_ms from now unless its reply comes (the
 * resumed stream of the last event carries the replies in flight there). */
static int open_socket(struct udp_remote *u);

static void start_over(struct udp_remote *u, const char *why)
{
    bridge_log(LOG_INFO, "udp_reconnect", "%s: a new socket, a new cookie, then mcpd/connect", why);
    /* A new source port: mcpd may still hold a peer for the old one (it
     * gave up on us less soon than we on it), which would take the new
     * greeting for old datagrams. */
    if (open_socket(u) != 0)
        bridge_log(LOG_WARN, "udp_failed", "no new socket: %s; the old one goes on",
                   strerror(errno));
    int64_t deadline = now_ms() + u->o->response_timeout_ms;
    for (struct pending *p = u->pending; p; p = p->next)
        if (!p->deadline)
            p->deadline = deadline;
    clear_state(u);
    hello(u);
}

/* ---- receiving ---- */

static void deliver(struct udp_remote *u, const char *text, size_t len)
{
    json_t *m = json_loadb(text, len, 0, NULL);
    if (!m)
        return;
    json_t *id = json_object_get(m, "id");
    if (json_is_string(id) && strcmp(json_string_value(id), CONNECT_ID) == 0) {
        json_t *err = json_object_get(m, "error");
        if (err) {
            const char *reason =
                json_string_value(json_object_get(json_object_get(err, "data"), "reason"));
            const char *msg = json_string_value(json_object_get(err, "message"));
            bridge_log(LOG_WARN, "udp_connect_refused", "%s", msg ? msg : "?");
            if (reason && strcmp(reason, "unauthorized") == 0) {
                char why[600];
                snprintf(why, sizeof why, "mcp-bridge: %s refused the token: %s", u->host,
                         msg ? msg : "unauthorized");
                answer_all(u, why);
            } else {
                /* an unknown session: the next initialize makes one */
                free(u->session_id);
                u->session_id = NULL;
            }
        } else {
            bridge_log(LOG_INFO, "udp_connected", "%s",
                       u->last_event_id ? "resumed after the last event" : "connected");
        }
        json_decref(m);
        return;
    }
    json_t *holder = json_object_get(m, "params");
    if (!json_is_object(holder))
        holder = json_object_get(m, "result");
    json_t *meta = json_object_get(holder, "_meta");
    const char *ev = json_string_value(json_object_get(meta, "mcpd/event-id"));
    const char *sid = json_string_value(json_object_get(meta, "mcpd/session-id"));
    if (ev) {
        free(u->last_event_id);
        u->last_event_id = strdup(ev);
    }
    if (sid && (!u->session_id || strcmp(sid, u->session_id) != 0)) {
        free(u->session_id);
        u->session_id = strdup(sid);
    }
    if (id && !json_object_get(m, "method")) {
        if (json_is_null(id) && json_object_get(m, "error")) {
            /* mcpd's own word (a goodbye): the bridge's, not the client's */
            bridge_log(LOG_INFO, "udp_goodbye", "%s",
                       json_string_value(json_object_get(json_object_get(m, "error"), "message")));
            json_decref(m);
            return;
        }
        answered(u, id);
    }
    json_decref(m);
    u->sink.emit(u->sink.ud, text, len);
}

static void in_order(struct udp_remote *u, struct udp_wire_in *in)
{
    if (!in->frag_n) {
        deliver(u, in->data, in->len);
        return;
    }
    if (in->frag_i == 0) {
        free(u->asm_buf);
        u->asm_buf = NULL;
        u->asm_len = 0;
        u->asm_n = in->frag_n;
        u->asm_next = 0;
    }
    if (!u->asm_n || in->frag_i != u->asm_next || in->frag_n != u->asm_n ||
        u->asm_len + in->len > MAX_MESSAGE)
        return;
    char *b = realloc(u->asm_buf, u->asm_len + in->len + 1);
    if (!b)
        return;
    memcpy(b + u->asm_len, in->data, in->len);
    u->asm_buf = b;
    u->asm_len += in->len;
    if (++u->asm_next == u->asm_n) {
        deliver(u, u->asm_buf, u->asm_len);
        free(u->asm_buf);
        u->asm_buf = NULL;
        u->asm_len = 0;
        u->asm_n = 0;
    }
}

static void send_ack(struct udp_remote *u);

static void on_data(struct udp_remote *u, struct udp_wire_in *in)
{
    if (in->seq > u->delivered && in->seq <= u->delivered + WINDOW &&
        !u->present[in->seq % WINDOW]) {
        u->present[in->seq % WINDOW] = 1;
        u->in[in->seq % WINDOW] = *in;
        in->data = NULL;
    }
    while (u->present[(u->delivered + 1) % WINDOW] &&
           u->in[(u->delivered + 1) % WINDOW].seq == u->delivered + 1) {
        struct udp_wire_in *next = &u->in[(u->delivered + 1) % WINDOW];
        u->present[(u->delivered + 1) % WINDOW] = 0;
        u->delivered++;
        in_order(u, next);
        udp_wire_in_clear(next);
        if (!u->ready)
            return; /* a delivery started over */
    }
    send_ack(u);
}

/* {"_udp_cookie":…,"_udp_ack":…,"_udp_sack":[…]} */
static void send_ack(struct udp_remote *u)
{
    uint64_t sack[UDP_WIRE_MAX_SACK];
    size_t n = 0;
    for (uint64_t s = u->delivered + 2; s <= u->delivered + WINDOW && n < UDP_WIRE_MAX_SACK; s++)
        if (u->present[s % WINDOW] && u->in[s % WINDOW].seq == s)
            sack[n++] = s;
    char buf[96 + UDP_WIRE_MAX_SACK * 22];
    int k = snprintf(buf, sizeof buf, "{\"_udp_cookie\":\"%s\",", u->cookie);
    size_t len = udp_wire_ack(u->delivered, sack, n, buf + k - 1, sizeof buf - (size_t)k + 1);
    buf[k - 1] = ',';
    raw(u, buf, (size_t)k - 1 + len);
}

static void on_ack(struct udp_remote *u, const struct udp_wire_in *in)
{
    int64_t now = now_ms();
    for (uint64_t s = u->base; s < u->next_seq; s++) {
        struct out_dgram *o = &u->out[s % WINDOW];
        int hit = s <= in->ack;
        for (size_t i = 0; i < in->nsack && !hit; i++)
            hit = in->sack[i] == s;
        if (hit && !o->acked) {
            if (!o->tries)
                udp_rto_sample(&u->rto, now - o->sent_ms);
            o->acked = 1;
            free(o->buf);
            o->buf = NULL;
        }
    }
    while (u->base < u->next_seq && u->out[u->base % WINDOW].acked)
        u->base++;
}

static void on_datagram(struct udp_remote *u, const char *buf, size_t len)
{
    u->last_rx_ms = now_ms();
    struct udp_wire_in in;
    char why[160];
    if (udp_wire_decode(buf, len, &in, why, sizeof why) != 0) {
        /* mcpd's word outside the sequence (an error about a datagram of
         * ours, a refusal of a peer past a cap) carries no _udp_seq */
        bridge_log(LOG_INFO, "udp_notice", "%.*s", (int)(len > 300 ? 300 : len), buf);
        return;
    }
    if (in.cookie[0]) {
        if (!u->ready) {
            memcpy(u->cookie, in.cookie, sizeof u->cookie);
            u->ready = 1;
            queue_connect(u);
            pump(u);
        } else if (in.reset && u->heard) {
            start_over(u, "mcpd has no state for this peer (restarted, or dropped it)");
        }
    } else if (u->ready) {
        u->heard = 1;
        if (in.has_ack)
            on_ack(u, &in);
        if (in.has_seq)
            on_data(u, &in);
        pump(u);
    }
    udp_wire_in_clear(&in);
}

/* ---- the loop's calls ---- */

void udp_remote_run(struct udp_remote *u)
{
    char buf[UDP_WIRE_MAX_DATAGRAM + 1];
    for (int n = 0; n < 256; n++) {
        ssize_t got = recv(u->fd, buf, sizeof buf - 1, MSG_DONTWAIT);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            continue; /* ECONNREFUSED: mcpd not (yet) there; the timers go on */
        if (got < 0)
            break;
        buf[got] = '\0';
        on_datagram(u, buf, (size_t)got);
    }
    int64_t now = now_ms();
    if (!u->ready) {
        if (now >= u->hello_at)
            hello(u);
    } else {
        for (uint64_t s = u->base; s < u->next_seq; s++) {
            struct out_dgram *o = &u->out[s % WINDOW];
            if (o->acked || o->due_ms > now)
                continue;
            if (o->tries >= MAX_TRIES) {
                start_over(u, "mcpd stopped acknowledging");
                break;
            }
            o->tries++;
            o->due_ms = now + udp_rto_backoff(&u->rto, o->tries);
            raw(u, o->buf, o->len);
        }
        pump(u);
        if (u->ready && u->pending && now - u->last_rx_ms >= PROBE_MS && now >= u->probe_at) {
            send_ack(u);
            u->probe_at = now + PROBE_MS;
        }
    }
    for (struct pending **pp = &u->pending; *pp;) {
        struct pending *p = *pp;
        if (!p->deadline || now < p->deadline) {
            pp = &p->next;
            continue;
        }
        char why[512];
        snprintf(why, sizeof why,
                 "mcp-bridge: no reply from %s over UDP within %ld ms of losing contact (is "
                 "mcpd running with --udp-listen on that port?)",
                 u->host, u->o->response_timeout_ms);
        bridge_log(LOG_WARN, "request_failed", "id=%s: %s", p->key, why);
        char *reply = rpc_error_reply(p->id, RPC_BRIDGE_ERROR, why);
        if (reply)
            u->sink.emit(u->sink.ud, reply, strlen(reply));
        free(reply);
        *pp = p->next;
        free(p->key);
        json_decref(p->id);
        free(p);
        u->n_pending--;
    }
}

long udp_remote_timeout_ms(struct udp_remote *u)
{
    int64_t now = now_ms(), next = now + 1000;
    if (!u->ready && u->hello_at < next)
        next = u->hello_at;
    for (uint64_t s = u->base; u->ready && s < u->next_seq; s++) {
        struct out_dgram *o = &u->out[s % WINDOW];
        if (!o->acked && o->due_ms < next)
            next = o->due_ms;
    }
    for (struct pending *p = u->pending; p; p = p->next)
        if (p->deadline && p->deadline < next)
            next = p->deadline;
    if (u->ready && u->pending && u->probe_at < next)
        next = u->probe_at > now ? u->probe_at : now + PROBE_MS;
    return next > now ? (long)(next - now) : 0;
}

void udp_remote_send(struct udp_remote *u, const char *body, size_t len, json_t *m)
{
    if (rpc_classify(m) == RPC_REQUEST) {
        struct pending *p = calloc(1, sizeof *p);
        if (p && (p->key = rpc_id_key(json_object_get(m, "id")))) {
            p->id = json_incref(json_object_get(m, "id"));
            p->next = u->pending;
            u->pending = p;
            u->n_pending++;
        } else {
            free(p);
        }
    }
    enqueue(u, body, len, 0);
    pump(u);
}

int udp_remote_pending(struct udp_remote *u)
{
    return u->n_pending;
}

int udp_remote_fd(struct udp_remote *u, short *events)
{
    *events = POLLIN;
    return u->fd;
}

CURLM *udp_remote_multi(struct udp_remote *u)
{
    return u->multi;
}

void udp_remote_shutdown(struct udp_remote *u, const char *why)
{
    answer_all(u, why);
}

/* host and port of udp://HOST:PORT */
static int parse_url(const char *url, char *host, size_t hcap, char *port, size_t pcap)
{
    CURLU *cu = curl_url();
    char *h = NULL, *p = NULL;
    int rc = -1;
    if (cu && curl_url_set(cu, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK &&
        curl_url_get(cu, CURLUPART_HOST, &h, 0) == CURLUE_OK &&
        curl_url_get(cu, CURLUPART_PORT, &p, 0) == CURLUE_OK) {
        size_t hl = strlen(h);
        /* [::1] → ::1 */
        if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']')
            snprintf(host, hcap, "%.*s", (int)(hl - 2), h + 1);
        else
            snprintf(host, hcap, "%s", h);
        snprintf(port, pcap, "%s", p);
        rc = 0;
    }
    curl_free(h);
    curl_free(p);
    curl_url_cleanup(cu);
    return rc;
}

/* A new socket (so a new source port) connected to mcpd, in place of the
 * old one. Returns 0, or -1 (the old one stays). */
static int open_socket(struct udp_remote *u)
{
    int fd = socket(u->addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&u->addr, u->addr_len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (u->fd >= 0)
        close(u->fd);
    u->fd = fd;
    return 0;
}

struct udp_remote *udp_remote_new(const struct bridge_options *o, struct remote_sink sink)
{
    struct udp_remote *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->o = o;
    u->sink = sink;
    u->fd = -1;
    u->q_tail = &u->q;
    char host[256], port[16];
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *ai = NULL;
    if (parse_url(o->url, host, sizeof host, port, sizeof port) != 0 ||
        getaddrinfo(host, port, &hints, &ai) != 0) {
        bridge_log(LOG_ERROR, "udp_failed", "cannot resolve %s", o->url);
        free(u);
        return NULL;
    }
    snprintf(u->host, sizeof u->host, "%s:%s", host, port);
    memcpy(&u->addr, ai->ai_addr, ai->ai_addrlen);
    u->addr_len = ai->ai_addrlen;
    if (open_socket(u) != 0 || !(u->multi = curl_multi_init())) {
        bridge_log(LOG_ERROR, "udp_failed", "cannot open a UDP socket to %s", u->host);
        if (u->fd >= 0)
            close(u->fd);
        freeaddrinfo(ai);
        free(u);
        return NULL;
    }
    freeaddrinfo(ai);
    clear_state(u);
    hello(u);
    return u;
}

void udp_remote_free(struct udp_remote *u)
{
    if (!u)
        return;
    clear_state(u);
    while (u->q) {
        struct queued *q = u->q;
        u->q = q->next;
        free(q->text);
        free(q);
    }
    while (u->pending) {
        struct pending *p = u->pending;
        u->pending = p->next;
        free(p->key);
        json_decref(p->id);
        free(p);
    }
    free(u->session_id);
    free(u->last_event_id);
    curl_multi_cleanup(u->multi);
    close(u->fd);
    free(u);
}
