/* udp_peer — see udp_peer.h.
 *
 * Locking: mu guards the reliability state (both windows, the reassembly,
 * the queue of messages for the fiber) and the flags; it is a plain mutex,
 * never held across a park except through fcond_wait_until on cv, which
 * the peer's fiber (messages queued, a retransmission due, an end) and a
 * sender waiting for window space both wait on. wmu (an fmutex) orders
 * whole messages: a fragmented message's datagrams are consecutive, and
 * mcpd/connect's answer goes out before a resumed stream's first message.
 * Datagrams go out with sendto on the shared non-blocking socket, under
 * mu; a full socket buffer is a lost datagram, which retransmission
 * covers. */
#include "udp_peer.h"
#include "auth.h"
#include "clock.h"
#include "fcond.h"
#include "first_message.h"
#include "greeting.h"
#include "jsonrpc.h"
#include "log.h"
#include "loop.h"
#include "push.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* A fiber that waits looks at least this often. */
#define TICK_MS 1000
/* How long a goodbye (or a refusal that ends the peer) waits to be
 * acknowledged. */
#define LINGER_MS 1500
/* Complete messages waiting for the fiber, at most (and --max-body bytes
 * of them); past it, new datagrams are not taken (nor acknowledged): the
 * client retransmits. */
#define QUEUE_MAX 16
/* Bytes held in the reorder window, at most. */
#define REORDER_BYTES_MAX (256 * 1024)

static struct udp_config cfg;
static int sock_fd = -1;

struct out_dgram {
    uint64_t seq; /* 0: slot free */
    char *buf;
    size_t len;
    int64_t sent_ms, due_ms;
    int tries; /* retransmissions so far */
    int acked; /* selectively acknowledged */
    int fast;  /* retransmitted early on selective acks (once) */
};

struct in_dgram {
    int present;
    struct udp_wire_in in;
};

struct queued {
    char *data; /* a message, or NULL: an error to send (message in err) */
    size_t len;
    char err[160];
    struct queued *next;
};

struct udp_peer {
    atomic_int refs;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    char name[80];
    char cookie[UDP_WIRE_COOKIE_LEN + 1];
    pthread_mutex_t mu;
    struct fcond cv;
    struct fmutex wmu;
    /* send side */
    uint64_t next_seq, base; /* base: the lowest seq not yet acknowledged */
    struct out_dgram out[UDP_PEER_SEND_WINDOW];
    struct udp_rto rto;
    /* receive side */
    uint64_t delivered; /* every seq up to it went in order */
    struct in_dgram in[UDP_PEER_RECV_WINDOW];
    size_t reorder_bytes;
    /* reassembly of the fragmented message under way */
    char *asm_buf;
    size_t asm_len;
    uint32_t asm_n, asm_next;
    int asm_skip; /* refused (too large): its fragments are dropped */
    struct queued *qhead, **qtail;
    int qcount;
    size_t qbytes;
    int64_t last_in_ms;
    int64_t opened_ms; /* for the log's "after N ms" */
    /* why the peer ends: set once (under mu) */
    const char *end_why;
    int dead; /* gave up retransmitting, or ended: no more sending */
    atomic_int stop;
    /* the fiber's */
    struct push *push;
    int served;
    _Atomic(const char *) token_why; /* push_io.token_ended's */
    atomic_int session_over;
    _Atomic(const char *) session_id; /* push_io.session_named's, for the log */
    atomic_int busy;                  /* push_io.busy's: replies still to send */
};

void udp_peer_configure(const struct udp_config *c, int fd)
{
    cfg = *c;
    sock_fd = fd;
}

const char *udp_peer_cookie(const struct udp_peer *p)
{
    return p->cookie;
}

void udp_peer_ref(struct udp_peer *p)
{
    atomic_fetch_add(&p->refs, 1);
}

static void queue_free(struct udp_peer *p)
{
    while (p->qhead) {
        struct queued *q = p->qhead;
        p->qhead = q->next;
        free(q->data);
        free(q);
    }
    p->qtail = &p->qhead;
    p->qcount = 0;
    p->qbytes = 0;
}

void udp_peer_unref(struct udp_peer *p)
{
    if (atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    for (size_t i = 0; i < UDP_PEER_SEND_WINDOW; i++)
        free(p->out[i].buf);
    for (size_t i = 0; i < UDP_PEER_RECV_WINDOW; i++)
        udp_wire_in_clear(&p->in[i].in);
    free(p->asm_buf);
    queue_free(p);
    fmutex_destroy(&p->wmu);
    fcond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

struct udp_peer *udp_peer_new(const struct sockaddr *addr, socklen_t len, const char *name,
                              const char *cookie)
{
    struct udp_peer *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (fmutex_init(&p->wmu) != 0 || fcond_init(&p->cv) != 0) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    atomic_init(&p->refs, 2);
    memcpy(&p->addr, addr, len);
    p->addr_len = len;
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->cookie, sizeof p->cookie, "%s", cookie);
    p->next_seq = p->base = 1;
    udp_rto_init(&p->rto, UDP_PEER_RTO_INITIAL_MS, UDP_PEER_RTO_MIN_MS, UDP_PEER_RTO_MAX_MS);
    p->qtail = &p->qhead;
    p->last_in_ms = p->opened_ms = clock_mono_ms();
    return p;
}

/* ---- sending (under mu) ---- */

static void transmit(struct udp_peer *p, const char *buf, size_t len)
{
    /* A full socket buffer or an unreachable peer is a lost datagram. */
    (void)!sendto(sock_fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&p->addr,
                  p->addr_len);
}

static void end_locked(struct udp_peer *p, const char *why)
{
    if (!p->end_why)
        p->end_why = why;
    fcond_broadcast(&p->cv);
}

/* Retransmits what is due. Returns when the next one is due (-1: none). */
static int64_t retransmit_locked(struct udp_peer *p, int64_t now)
{
    int64_t next = -1;
    for (uint64_t s = p->base; s < p->next_seq && !p->dead; s++) {
        struct out_dgram *o = &p->out[s % UDP_PEER_SEND_WINDOW];
        if (o->acked)
            continue;
        if (o->due_ms <= now) {
            if (o->tries >= UDP_PEER_MAX_TRIES) {
                p->dead = 1;
                end_locked(p, "no acknowledgement: the peer is gone");
                return -1;
            }
            o->tries++;
            o->due_ms = now + udp_rto_backoff(&p->rto, o->tries);
            transmit(p, o->buf, o->len);
        }
        if (next < 0 || o->due_ms < next)
            next = o->due_ms;
    }
    return next;
}

/* Frees the datagram s (acknowledged). */
static void acked_locked(struct udp_peer *p, uint64_t s, int64_t now)
{
    struct out_dgram *o = &p->out[s % UDP_PEER_SEND_WINDOW];
    if (o->seq != s || o->acked)
        return;
    if (!o->tries) /* Karn: only a datagram sent once times the path */
        udp_rto_sample(&p->rto, now - o->sent_ms);
    o->acked = 1;
    free(o->buf);
    o->buf = NULL;
}

static void on_ack_locked(struct udp_peer *p, const struct udp_wire_in *in, int64_t now)
{
    uint64_t top = in->ack < p->next_seq ? in->ack : p->next_seq - 1;
    for (uint64_t s = p->base; s <= top; s++)
        acked_locked(p, s, now);
    uint64_t high = 0;
    for (size_t i = 0; i < in->nsack; i++)
        if (in->sack[i] >= p->base && in->sack[i] < p->next_seq) {
            acked_locked(p, in->sack[i], now);
            if (in->sack[i] > high)
                high = in->sack[i];
        }
    while (p->base < p->next_seq && p->out[p->base % UDP_PEER_SEND_WINDOW].acked) {
        p->out[p->base % UDP_PEER_SEND_WINDOW].seq = 0;
        p->base++;
    }
    /* Fast retransmit: three later datagrams arrived, so one not
     * acknowledged below them is most likely lost, not late. */
    for (uint64_t s = p->base; s + 3 <= high; s++) {
        struct out_dgram *o = &p->out[s % UDP_PEER_SEND_WINDOW];
        if (!o->acked && !o->fast) {
            o->fast = 1;
            o->due_ms = now;
        }
    }
    fcond_broadcast(&p->cv);
}

/* One message as its datagrams. Caller holds wmu. */
static int send_message(struct udp_peer *p, const char *msg, size_t len)
{
    size_t n = udp_wire_count(msg, len, cfg.max_datagram);
    size_t sent = 0;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < n; i++) {
        /* Stopping, a peer that does not acknowledge gets no more. */
        while (!p->dead && p->next_seq - p->base >= UDP_PEER_SEND_WINDOW) {
            if (atomic_load(&p->stop))
                break;
            int64_t now = clock_mono_ms();
            int64_t next = retransmit_locked(p, now);
            int64_t until = next >= 0 && next < now + TICK_MS ? next : now + TICK_MS;
            if (!p->dead)
                fcond_wait_until(&p->cv, &p->mu, until);
        }
        if (p->dead || p->next_seq - p->base >= UDP_PEER_SEND_WINDOW)
            break;
        size_t dl;
        char *d = udp_wire_encode(msg, len, i, n, p->next_seq, NULL, cfg.max_datagram, &dl);
        if (!d) {
            p->dead = 1;
            end_locked(p, "out of memory");
            break;
        }
        int64_t now = clock_mono_ms();
        struct out_dgram *o = &p->out[p->next_seq % UDP_PEER_SEND_WINDOW];
        *o = (struct out_dgram){.seq = p->next_seq,
                                .buf = d,
                                .len = dl,
                                .sent_ms = now,
                                .due_ms = now + udp_rto_backoff(&p->rto, 0)};
        p->next_seq++;
        transmit(p, d, dl);
        sent++;
    }
    int rc = n && sent == n ? 0 : -1;
    /* The fiber's next retransmission may be sooner now. */
    fcond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return rc;
}

/* push_io.send. */
static int peer_send(void *io, const char *msg, size_t len)
{
    struct udp_peer *p = io;
    fmutex_lock(&p->wmu);
    int rc = send_message(p, msg, len);
    fmutex_unlock(&p->wmu);
    return rc;
}

/* Sends msg (stolen); caller holds wmu. */
static void send_json_locked(struct udp_peer *p, json_t *msg)
{
    size_t len;
    char *text = msg ? jsonrpc_dump(msg, &len) : NULL;
    json_decref(msg);
    if (text)
        send_message(p, text, len);
    free(text);
}

static void send_json(struct udp_peer *p, json_t *msg)
{
    fmutex_lock(&p->wmu);
    send_json_locked(p, msg);
    fmutex_unlock(&p->wmu);
}

static void send_error(struct udp_peer *p, json_t *id, int code, const char *message,
                       const char *reason)
{
    send_json(p, greeting_error(id, code, message, UDP_TRANSPORT, reason));
}

/* ---- receiving (under mu, on udp.c's reader) ---- */

static void enqueue_locked(struct udp_peer *p, char *data, size_t len, const char *err)
{
    struct queued *q = calloc(1, sizeof *q);
    if (!q) {
        free(data);
        return;
    }
    q->data = data;
    q->len = len;
    if (err)
        snprintf(q->err, sizeof q->err, "%s", err);
    *p->qtail = q;
    p->qtail = &q->next;
    p->qcount++;
    p->qbytes += len;
    fcond_broadcast(&p->cv);
}

static void asm_reset(struct udp_peer *p)
{
    free(p->asm_buf);
    p->asm_buf = NULL;
    p->asm_len = 0;
    p->asm_n = p->asm_next = 0;
    p->asm_skip = 0;
}

/* The next datagram in order (its data taken): a whole message or a
 * fragment of one. */
static void deliver_locked(struct udp_peer *p, struct udp_wire_in *in)
{
    if (p->asm_n && (!in->frag_n || in->frag_i != p->asm_next || in->frag_n != p->asm_n)) {
        /* The client broke its own fragment sequence. */
        enqueue_locked(p, NULL, 0,
                       "Invalid Request: fragments of a message must be consecutive "
                       "(_udp_frag [0,n] .. [n-1,n]); the incomplete message was dropped");
        asm_reset(p);
    }
    if (!in->frag_n) {
        enqueue_locked(p, in->data, in->len, NULL);
        in->data = NULL;
        return;
    }
    if (!p->asm_n) {
        if (in->frag_i != 0) {
            enqueue_locked(p, NULL, 0,
                           "Invalid Request: a fragment (_udp_frag) without fragment 0 "
                           "before it; dropped");
            return;
        }
        p->asm_n = in->frag_n;
    }
    if (!p->asm_skip && p->asm_len + in->len > cfg.max_message) {
        char msg[160];
        snprintf(msg, sizeof msg, "Invalid Request: message larger than %zu bytes (--max-body)",
                 cfg.max_message);
        enqueue_locked(p, NULL, 0, msg);
        free(p->asm_buf);
        p->asm_buf = NULL;
        p->asm_skip = 1;
    }
    if (!p->asm_skip) {
        char *b = realloc(p->asm_buf, p->asm_len + in->len + 1);
        if (!b) {
            enqueue_locked(p, NULL, 0, "Server busy: out of memory reassembling a message");
            free(p->asm_buf);
            p->asm_buf = NULL;
            p->asm_skip = 1;
        } else {
            memcpy(b + p->asm_len, in->data, in->len);
            p->asm_buf = b;
            p->asm_len += in->len;
        }
    }
    if (++p->asm_next == p->asm_n) {
        if (!p->asm_skip) {
            enqueue_locked(p, p->asm_buf, p->asm_len, NULL);
            p->asm_buf = NULL;
        }
        asm_reset(p);
    }
}

/* Takes a sequenced datagram. Returns 0, or -1 when it was not taken (no
 * room: the client sends it again). */
static int take_locked(struct udp_peer *p, struct udp_wire_in *in)
{
    if (in->seq <= p->delivered)
        return 0; /* a duplicate */
    if (in->seq > p->delivered + UDP_PEER_RECV_WINDOW || p->qcount >= QUEUE_MAX ||
        p->qbytes >= cfg.max_message)
        return -1;
    struct in_dgram *slot = &p->in[in->seq % UDP_PEER_RECV_WINDOW];
    if (slot->present)
        return 0; /* a duplicate */
    if (in->seq != p->delivered + 1) {
        if (p->reorder_bytes + in->len > REORDER_BYTES_MAX)
            return -1;
        p->reorder_bytes += in->len;
    }
    slot->present = 1;
    slot->in = *in;
    in->data = NULL;
    for (;;) {
        struct in_dgram *next = &p->in[(p->delivered + 1) % UDP_PEER_RECV_WINDOW];
        if (!next->present || next->in.seq != p->delivered + 1)
            break;
        if (next->in.seq != in->seq)
            p->reorder_bytes -= next->in.len;
        p->delivered++;
        next->present = 0;
        deliver_locked(p, &next->in);
        udp_wire_in_clear(&next->in);
    }
    return 0;
}

static void send_ack_locked(struct udp_peer *p)
{
    uint64_t sack[UDP_WIRE_MAX_SACK];
    size_t n = 0;
    for (uint64_t s = p->delivered + 2; s <= p->delivered + UDP_PEER_RECV_WINDOW; s++) {
        struct in_dgram *d = &p->in[s % UDP_PEER_RECV_WINDOW];
        if (d->present && d->in.seq == s && n < UDP_WIRE_MAX_SACK)
            sack[n++] = s;
    }
    char buf[64 + UDP_WIRE_MAX_SACK * 22];
    size_t len = udp_wire_ack(p->delivered, sack, n, buf, sizeof buf);
    transmit(p, buf, len);
}

void udp_peer_input(struct udp_peer *p, struct udp_wire_in *in)
{
    int64_t now = clock_mono_ms();
    pthread_mutex_lock(&p->mu);
    p->last_in_ms = now;
    if (in->has_ack)
        on_ack_locked(p, in, now);
    if (in->has_seq && !p->end_why) {
        take_locked(p, in);
        /* Every sequenced datagram is acknowledged, a duplicate too: the
         * ack it answers may be what was lost. */
        send_ack_locked(p);
    }
    pthread_mutex_unlock(&p->mu);
    udp_wire_in_clear(in);
}

/* ---- callbacks from elsewhere ---- */

static void peer_session_ended(void *io)
{
    struct udp_peer *p = io;
    atomic_store(&p->session_over, 1);
    pthread_mutex_lock(&p->mu);
    fcond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void peer_token_ended(void *ud, const char *why)
{
    struct udp_peer *p = ud;
    atomic_store(&p->token_why, why);
    pthread_mutex_lock(&p->mu);
    fcond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void udp_peer_stop(struct udp_peer *p)
{
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    fcond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* ---- the first message (first_message.h) ---- */

static void send_first_locked(void *io, json_t *msg)
{
    send_json_locked(io, msg);
}

/* push_io.session_named. */
static void peer_session_named(void *io, const char *session_id)
{
    atomic_store(&((struct udp_peer *)io)->session_id, session_id);
}

/* push_io.busy. */
static void peer_busy(void *io, int busy)
{
    atomic_store(&((struct udp_peer *)io)->busy, busy);
}

static int on_first(struct udp_peer *p, const char *data, size_t len)
{
    struct first_message fm = {.noun = "peer",
                               .name = p->name,
                               .auth_required = cfg.auth_required,
                               .io = {.send = peer_send,
                                      .io = p,
                                      .transport = UDP_TRANSPORT,
                                      .event_ids = 1,
                                      .max_inflight = cfg.max_inflight,
                                      .session_named = peer_session_named,
                                      .busy = peer_busy,
                                      .session_ended = peer_session_ended,
                                      .token_ended = peer_token_ended},
                               .wmu = &p->wmu,
                               .send_locked = send_first_locked,
                               .push = &p->push,
                               .served = &p->served};
    return first_message_serve(&fm, data, len);
}

/* One queued item. Returns 1 when the peer is to end. */
static int on_item(struct udp_peer *p, struct queued *q)
{
    if (!q->data) {
        log_event(LOG_INFO, atomic_load(&p->session_id), "udp_bad_message", "peer %s: %s", p->name,
                  q->err);
        send_error(p, NULL, JSONRPC_INVALID_REQUEST, q->err, NULL);
        return !p->served && cfg.auth_required;
    }
    if (!p->served)
        return on_first(p, q->data, q->len);
    push_receive(p->push, q->data, q->len);
    return 0;
}

/* ---- the fiber ---- */

/* Why the peer is to end now, or NULL; says goodbye where one is due. */
static const char *ended(struct udp_peer *p, int *goodbye_code, const char **reason)
{
    const char *token_why = atomic_load(&p->token_why);
    if (token_why) {
        *goodbye_code = JSONRPC_SESSION_NOT_FOUND;
        *reason = "unauthorized";
        return token_why;
    }
    if (atomic_load(&p->session_over)) {
        *goodbye_code = JSONRPC_SESSION_NOT_FOUND;
        *reason = "session ended";
        return "Session ended";
    }
    if (atomic_load(&p->stop)) {
        *goodbye_code = JSONRPC_SERVER_ERROR;
        *reason = "shutting down";
        return "server shutting down";
    }
    return NULL;
}

/* Waits (bounded) until everything sent is acknowledged, retransmitting. */
static void linger(struct udp_peer *p)
{
    int64_t deadline = clock_mono_ms() + LINGER_MS;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        int64_t now = clock_mono_ms();
        if (p->dead || p->base == p->next_seq || now >= deadline)
            break;
        int64_t next = retransmit_locked(p, now);
        fcond_wait_until(&p->cv, &p->mu, next >= 0 && next < deadline ? next : deadline);
    }
    pthread_mutex_unlock(&p->mu);
}

static void goodbye(struct udp_peer *p, int code, const char *message, const char *reason)
{
    send_error(p, NULL, code, message, reason);
    linger(p);
}

static void run(struct udp_peer *p)
{
    for (;;) {
        int code;
        const char *reason, *why = ended(p, &code, &reason);
        if (why) {
            goodbye(p, code, why, reason);
            pthread_mutex_lock(&p->mu);
            end_locked(p, why);
            pthread_mutex_unlock(&p->mu);
            return;
        }
        pthread_mutex_lock(&p->mu);
        if (p->end_why) {
            pthread_mutex_unlock(&p->mu);
            return;
        }
        int64_t now = clock_mono_ms();
        int64_t next = retransmit_locked(p, now);
        struct queued *q = p->qhead;
        if (q) {
            p->qhead = q->next;
            if (!p->qhead)
                p->qtail = &p->qhead;
            p->qcount--;
            p->qbytes -= q->len;
            pthread_mutex_unlock(&p->mu);
            int stop = on_item(p, q);
            free(q->data);
            free(q);
            if (stop) {
                linger(p);
                pthread_mutex_lock(&p->mu);
                end_locked(p, "refused");
                pthread_mutex_unlock(&p->mu);
                return;
            }
            continue;
        }
        int64_t idle_at = p->last_in_ms + cfg.idle_ms;
        int idle = now >= idle_at && p->base == p->next_seq;
        pthread_mutex_unlock(&p->mu);
        if (idle && atomic_load(&p->busy)) {
            /* A long call is not idleness. */
            pthread_mutex_lock(&p->mu);
            p->last_in_ms = now;
            pthread_mutex_unlock(&p->mu);
            continue;
        }
        if (idle) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "no datagram and nothing in flight for %lld ms (--udp-idle-ms); closing",
                     (long long)cfg.idle_ms);
            goodbye(p, JSONRPC_SERVER_ERROR, msg, "idle timeout");
            pthread_mutex_lock(&p->mu);
            end_locked(p, "idle timeout");
            pthread_mutex_unlock(&p->mu);
            return;
        }
        pthread_mutex_lock(&p->mu);
        int64_t until = now + TICK_MS;
        if (next >= 0 && next < until)
            until = next;
        if (idle_at > now && idle_at < until)
            until = idle_at;
        if (!p->qhead && !p->end_why && !atomic_load(&p->stop))
            fcond_wait_until(&p->cv, &p->mu, until);
        pthread_mutex_unlock(&p->mu);
    }
}

static void peer_main(void *arg)
{
    struct udp_peer *p = arg;
    run(p);
    char sid[80];
    const char *s = atomic_load(&p->session_id);
    snprintf(sid, sizeof sid, "%s", s ? s : "");
    pthread_mutex_lock(&p->mu);
    const char *why = p->end_why ? p->end_why : "ended";
    p->dead = 1; /* a sender waiting for the window gives up */
    fcond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    log_event(LOG_INFO, sid[0] ? sid : NULL, "udp_closed", "peer %s: %s after %lld ms", p->name,
              why, (long long)(clock_mono_ms() - p->opened_ms));
    udp_peer_gone(p);
    push_close(p->push, 0, 0); /* no token callback runs after it */
    udp_peer_unref(p);
}

int udp_peer_start(struct udp_peer *p)
{
    if (loop_spawn(peer_main, p) == 0)
        return 0;
    udp_peer_unref(p);
    return -1;
}
