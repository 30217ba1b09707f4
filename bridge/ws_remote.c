/* ws_remote — see ws_remote.h. */
#include "ws_remote.h"

#include "bridge_log.h"
#include "connection.h"
#include "oauth.h"
#include "oauth_util.h"
#include "remote_error.h"
#include "rpc_message.h"
#include "session.h"

#include "clock.h"
#include "stdio_frame.h"
#include "ws_frame.h"
#include "ws_handshake.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#define MAX_MESSAGE (16u * 1024 * 1024)
#define MAX_HANDSHAKE 16384
#define MSG_CAP 768
/* The id of the bridge's mcpd/connect (raw TCP): a string no client's
 * request is answered under, since mcpd answers it before anything else. */
#define CONNECT_ID "mcp-bridge-connect"

struct frame_out {
    struct frame_out *next;
    unsigned char *data;
    size_t len, off;
    size_t payload; /* the message's size */
    char *key;      /* a request's id key, or NULL */
};

struct pending {
    struct pending *next;
    char *key;
    json_t *id;
    char *body; /* as the client sent it: it goes again after a rebuilt session */
    size_t len;
    char *progress_key; /* its _meta.progressToken's key, or NULL */
    unsigned conn;      /* the connection it went out on, 0 before that */
    /* It went out on a connection that dropped: the server may never have
     * read it, and the connection cannot tell. Answered with an error at
     * this time (monotonic ms) unless its reply or progress comes; 0 if
     * not in doubt. */
    int64_t deadline;
    int retried; /* sent again after a rebuilt session already */
    int waiting; /* until the session is rebuilt */
};

struct ws_remote {
    const struct bridge_options *o;
    struct remote_sink sink;
    CURLM *multi;
    CURL *easy; /* the connection, or NULL */
    curl_socket_t fd;
    int up;
    unsigned conn; /* counts connections made */
    int tcp;       /* mcpd's raw TCP transport: NDJSON and mcpd/connect */
    struct ws_parser parser;
    struct stdio_frame_decoder *dec; /* tcp: the connection's decoder */
    struct frame_out *out, *out_tail;
    struct pending *pending, *pending_tail; /* in the client's order */
    int n_pending;
    struct session s; /* s.id: from _meta "mcpd/session-id" */
    char *last_event_id;
    int session_lost;        /* the handshake said 404 for s.id */
    int64_t reinit_deadline; /* the replayed initialize is answered by then */
    /* the largest message written on this connection, for a 1009 */
    size_t big_len;
    char *big_key;
    char host[256];      /* host[:port], for messages */
    char http_url[2400]; /* the URL with an http(s) scheme, for curl */
    char target[2048];   /* path and query of the handshake */
    /* curl's words on the connection's last failure. curl writes here on
     * any later error of the handle, so it must live as long as w->easy:
     * on open_conn's stack it was written after return (a stack smash). */
    char errbuf[CURL_ERROR_SIZE];
    int64_t retry_at, down_since;
    int attempts;
    int stopping;
    /* OAuth over the WebSocket (not raw TCP): the handshake is an HTTP
     * request like any other. Its options are the run's with the http(s)
     * form of the URL, which the server's metadata names as its resource. */
    struct bridge_options oauth_opts;
    struct oauth *oauth;
};

static void emit(struct ws_remote *w, const char *s, size_t len)
{
    w->sink.emit(w->sink.ud, s, len);
}

static struct pending **pending_find(struct ws_remote *w, const char *key)
{
    struct pending **pp = &w->pending;
    while (*pp && strcmp((*pp)->key, key) != 0)
        pp = &(*pp)->next;
    return pp;
}

/* Unlinks and frees *pp. */
static void pending_remove(struct ws_remote *w, struct pending **pp)
{
    struct pending *p = *pp;
    *pp = p->next;
    if (w->pending_tail == p) {
        struct pending *last = w->pending;
        while (last && last->next)
            last = last->next;
        w->pending_tail = last;
    }
    free(p->key);
    json_decref(p->id);
    free(p->body);
    free(p->progress_key);
    free(p);
    w->n_pending--;
}

/* Answers *pp with a bridge error and forgets it. */
static void answer(struct ws_remote *w, struct pending **pp, const char *why)
{
    bridge_log(LOG_WARN, "request_failed", "id=%s: %s", (*pp)->key, why);
    char *reply = rpc_error_reply((*pp)->id, RPC_BRIDGE_ERROR, why);
    if (reply) {
        emit(w, reply, strlen(reply));
        free(reply);
    }
    pending_remove(w, pp);
}

static struct session_rebuild rebuild_of(struct ws_remote *w);

static void fail_all(struct ws_remote *w, const char *why)
{
    if (w->s.state == SESSION_REINIT) {
        struct session_rebuild rb = rebuild_of(w);
        session_rebuild_end(&w->s, &rb, why);
    }
    while (w->pending)
        answer(w, &w->pending, why);
}

/* ------------------------------------------------------------ output */

static void free_frame(struct frame_out *f)
{
    free(f->data);
    free(f->key);
    free(f);
}

static void discard_out(struct ws_remote *w)
{
    while (w->out) {
        struct frame_out *f = w->out;
        w->out = f->next;
        free_frame(f);
    }
    w->out_tail = NULL;
}

/* key: the request's id key, for a request. */
static void queue_frame(struct ws_remote *w, enum ws_opcode op, const void *payload, size_t len,
                        const char *key)
{
    if (w->tcp && op != WS_OP_TEXT)
        return; /* NDJSON has no control frames */
    unsigned char mask[4];
    if (!w->tcp && getrandom(mask, sizeof mask, 0) != (ssize_t)sizeof mask)
        memset(mask, 0x5a, sizeof mask);
    struct frame_out *f = calloc(1, sizeof *f);
    if (!f ||
        !(f->data = w->tcp ? (unsigned char *)stdio_frame_encode(STDIO_FRAMING_NDJSON, payload, len,
                                                                 &f->len)
                           : ws_frame_client(op, payload, len, mask, &f->len)) ||
        (key && !(f->key = strdup(key)))) {
        if (f)
            free(f->data);
        free(f);
        bridge_log(LOG_ERROR, "out_of_memory", "dropping a frame");
        return;
    }
    f->payload = len;
    if (w->out_tail)
        w->out_tail->next = f;
    else
        w->out = f;
    w->out_tail = f;
}

static void drop(struct ws_remote *w, const char *why);

/* f goes out on this connection now. */
static void writing(struct ws_remote *w, const struct frame_out *f)
{
    if (f->payload > w->big_len) {
        w->big_len = f->payload;
        free(w->big_key);
        w->big_key = f->key ? strdup(f->key) : NULL;
    }
    struct pending *p = f->key ? *pending_find(w, f->key) : NULL;
    if (p) {
        p->conn = w->conn;
        p->deadline = 0;
    }
}

/* Writes what curl takes now; the rest waits for POLLOUT. */
static void flush(struct ws_remote *w)
{
    while (w->up && w->out) {
        struct frame_out *f = w->out;
        if (f->off == 0)
            writing(w, f);
        size_t n = 0;
        CURLcode cc = curl_easy_send(w->easy, f->data + f->off, f->len - f->off, &n);
        if (cc == CURLE_AGAIN)
            return;
        if (cc != CURLE_OK) {
            drop(w, curl_easy_strerror(cc));
            return;
        }
        f->off += n;
        if (f->off < f->len)
            continue;
        w->out = f->next;
        if (!w->out)
            w->out_tail = NULL;
        free_frame(f);
    }
}

/* ------------------------------------------------------------- input */

static void set_str(char **slot, const char *v)
{
    char *copy = v ? strdup(v) : NULL;
    free(*slot);
    *slot = copy;
}

/* Progress for a request in doubt shows the server has it. */
static void heard_progress(struct ws_remote *w, const json_t *m)
{
    const json_t *token = json_object_get(json_object_get(m, "params"), "progressToken");
    char *key = token ? rpc_id_key(token) : NULL;
    for (struct pending *p = w->pending; key && p; p = p->next) {
        if (p->deadline && p->progress_key && strcmp(p->progress_key, key) == 0)
            p->deadline = clock_mono_ms() + w->o->response_timeout_ms;
    }
    free(key);
}

/* mcpd's last word on a TCP connection it ends (an error with id null and
 * data {"transport":"tcp","reason"}): the bridge's to act on (it
 * reconnects), not the client's. Returns 1 when m is one. */
static int goodbye(const json_t *m)
{
    const json_t *id = json_object_get(m, "id");
    const json_t *data = json_object_get(json_object_get(m, "error"), "data");
    const char *reason = json_string_value(json_object_get(data, "reason"));
    if (!json_is_null(id) || !reason)
        return 0;
    bridge_log(LOG_INFO, "tcp_goodbye", "the server ends the connection: %s (%s)", reason,
               json_string_value(json_object_get(json_object_get(m, "error"), "message")));
    return 1;
}

static void incoming(struct ws_remote *w, const char *text, size_t len)
{
    json_t *m = json_loadb(text, len, 0, NULL);
    if (!m) {
        bridge_log(LOG_WARN, "bad_server_json", "a frame that is not JSON; dropped");
        return;
    }
    /* mcpd's resume cursor and, on initialize's reply, the session */
    const json_t *holder = json_object_get(m, "params");
    if (!json_is_object(holder))
        holder = json_object_get(m, "result");
    const json_t *meta = json_object_get(holder, "_meta");
    const char *eid = json_string_value(json_object_get(meta, "mcpd/event-id"));
    const char *sid = json_string_value(json_object_get(meta, "mcpd/session-id"));
    /* Both go into the next handshake's headers, which this file writes
     * itself: a CR or LF in them would write headers of the server's. */
    if (eid && session_header_safe(eid))
        set_str(&w->last_event_id, eid);
    if (w->tcp && goodbye(m)) {
        json_decref(m);
        return;
    }
    enum rpc_kind kind = rpc_classify(m);
    char *key = kind == RPC_RESPONSE ? rpc_id_key(json_object_get(m, "id")) : NULL;
    if (key && session_rebuild_is_reply(&w->s, key)) {
        free(key);
        struct session_rebuild rb = rebuild_of(w);
        session_rebuild_result(&w->s, &rb, m, sid);
        json_decref(m);
        return;
    }
    if (sid && (!w->s.id || strcmp(w->s.id, sid) != 0))
        session_adopt(&w->s, sid);
    if (kind == RPC_RESPONSE) {
        struct pending **pp = key ? pending_find(w, key) : NULL;
        free(key);
        if (!pp || !*pp) {
            bridge_log(LOG_DEBUG, "response_dropped", "a response to no pending request");
            json_decref(m);
            return;
        }
        pending_remove(w, pp);
    } else if (kind == RPC_NOTIFICATION && strcmp(json_string_value(json_object_get(m, "method")),
                                                  "notifications/progress") == 0) {
        heard_progress(w, m);
    }
    if (memchr(text, '\n', len) || memchr(text, '\r', len)) {
        char *s = json_dumps(m, JSON_COMPACT);
        if (s)
            emit(w, s, strlen(s));
        free(s);
    } else {
        emit(w, text, len);
    }
    json_decref(m);
}

/* The server closed with 1009. mcpd does so as soon as it reads the header
 * of a message over its limit, having read every message before it on the
 * connection: so the largest message written on this connection was too
 * big. Sent again it would only be refused again. */
static void too_big(struct ws_remote *w)
{
    if (!w->big_len)
        return;
    if (w->out && w->out->off > 0 && w->out->payload == w->big_len) {
        struct frame_out *f = w->out;
        w->out = f->next;
        if (!w->out)
            w->out_tail = NULL;
        free_frame(f);
    }
    struct pending **pp = w->big_key ? pending_find(w, w->big_key) : NULL;
    if (!pp || !*pp) {
        bridge_log(LOG_WARN, "message_too_big",
                   "%s refused a message of %zu bytes as too big for one WebSocket message",
                   w->host, w->big_len);
        return;
    }
    char msg[MSG_CAP];
    snprintf(msg, sizeof msg,
             "mcp-bridge: the request is %zu bytes, more than %s accepts in one WebSocket "
             "message (it closed the connection with 1009, message too big); send less, or raise "
             "the server's limit (mcpd: --ws-max-message)",
             w->big_len, w->host);
    answer(w, pp, msg);
}

/* Echoes the server's close (or closes after its bad frame) ahead of what
 * is queued: that goes on the next connection, since nothing written now
 * would be read. Best effort: the connection is going anyway. */
static void answer_close(struct ws_remote *w, unsigned code)
{
    if (w->out && w->out->off > 0)
        return; /* a close now would land inside a frame */
    unsigned char f[WS_MAX_CONTROL_FRAME], mask[4] = {0x5a, 0x5a, 0x5a, 0x5a};
    size_t n = ws_frame_close(f, (uint16_t)code, NULL), len = 0, sent = 0;
    /* the close goes masked, like every client frame */
    unsigned char *frame = ws_frame_client(WS_OP_CLOSE, f + 2, n - 2, mask, &len);
    if (frame)
        curl_easy_send(w->easy, frame, len, &sent);
    free(frame);
}

static void on_lines(struct ws_remote *w, const char *buf, size_t len)
{
    size_t off = 0;
    while (w->up && off < len) {
        size_t used;
        struct stdio_frame_event ev;
        int got = stdio_frame_decode(w->dec, buf + off, len - off, &used, &ev);
        off += used;
        if (got && ev.kind == STDIO_FRAME_MESSAGE)
            incoming(w, ev.data, ev.len);
        else if (got)
            bridge_log(LOG_WARN, "bad_server_message", "%s; dropped",
                       stdio_frame_error_message(ev.error));
    }
}

static void on_bytes(struct ws_remote *w, const char *buf, size_t len)
{
    if (w->tcp) {
        on_lines(w, buf, len);
        return;
    }
    size_t off = 0;
    while (w->up && off < len) {
        struct ws_event ev;
        off += ws_parser_feed(&w->parser, buf + off, len - off, &ev);
        switch (ev.kind) {
        case WS_EV_NONE:
            break;
        case WS_EV_MESSAGE:
            incoming(w, ev.data, ev.len);
            break;
        case WS_EV_PING:
            queue_frame(w, WS_OP_PONG, ev.data, ev.len, NULL);
            break;
        case WS_EV_PONG:
            break;
        case WS_EV_CLOSE:
        case WS_EV_ERROR: {
            char why[200];
            snprintf(why, sizeof why, "%s %u (%s)",
                     ev.kind == WS_EV_CLOSE ? "the server closed with" : "bad frame, close",
                     ev.code, ev.reason ? ev.reason : "");
            if (ev.kind == WS_EV_CLOSE && ev.code == WS_CLOSE_TOO_BIG)
                too_big(w);
            answer_close(w, ev.code);
            drop(w, why);
            return;
        }
        }
    }
}

/* -------------------------------------------------------- connection */

static void drop(struct ws_remote *w, const char *why)
{
    if (!w->easy)
        return;
    bridge_log(w->stopping ? LOG_DEBUG : LOG_INFO, "ws_dropped", "%s", why);
    curl_easy_cleanup(w->easy);
    w->easy = NULL;
    w->up = 0;
    ws_parser_free(&w->parser);
    stdio_frame_decoder_free(w->dec);
    w->dec = NULL;
    /* a frame cut short is sent again whole on the next connection */
    if (w->out)
        w->out->off = 0;
    if (w->stopping)
        return;
    int64_t now = clock_mono_ms();
    for (struct pending *p = w->pending; p; p = p->next) {
        if (p->conn == w->conn && !p->deadline)
            p->deadline = now + w->o->response_timeout_ms;
    }
    if (!w->down_since)
        w->down_since = now;
    w->retry_at = now;
}

/* Waits (bounded by deadline) until fd is ready for events. */
static int wait_fd(curl_socket_t fd, short events, int64_t deadline)
{
    int64_t left = deadline - clock_mono_ms();
    if (left <= 0)
        return -1;
    struct pollfd p = {fd, events, 0};
    return poll(&p, 1, (int)left) > 0 ? 0 : -1;
}

/* The value of the first header `name` in head (status line and headers,
 * NUL-terminated) into out, cut to cap. 1 when there is one. */
static int header_value(const char *head, const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p; p = strstr(p + 2, "\r\n")) {
        if (strncasecmp(p + 2, name, n) != 0 || p[2 + n] != ':')
            continue;
        const char *v = p + 3 + n;
        v += strspn(v, " \t");
        size_t len = strcspn(v, "\r");
        snprintf(out, cap, "%.*s", (int)len, v);
        return 1;
    }
    return 0;
}

/* The handshake's answer: 101, the right Sec-WebSocket-Accept. Returns 0,
 * 1 when a 401 or 403 made the bridge sign in (or refresh, or step up):
 * the handshake is to be made again; else -1 with msg set. */
static int check_answer(struct ws_remote *w, const char *head, const char *key, char *msg)
{
    long status = 0;
    sscanf(head, "HTTP/%*s %ld", &status);
    if (status != 101) {
        const char *body = strstr(head, "\r\n\r\n");
        remote_error_status(msg, MSG_CAP, w->host, status, body ? body + 4 : NULL);
        if ((status == 401 || status == 403) && w->oauth) {
            char www[2048], nonce[512];
            if (header_value(head, "DPoP-Nonce", nonce, sizeof nonce))
                oauth_dpop_nonce(w->oauth, nonce, strlen(nonce));
            const char *challenge =
                header_value(head, "WWW-Authenticate", www, sizeof www) ? www : NULL;
            return oauth_challenge(w->oauth, status, challenge, msg, MSG_CAP) == 0 ? 1 : -1;
        }
        if (status == 404 && w->s.id && w->s.state != SESSION_REINIT) {
            /* the server forgot the session: it must be rebuilt (the old
             * id stays until then, so a rebuild that fails is tried again
             * on the next 404) */
            w->session_lost = 1;
            set_str(&w->last_event_id, NULL);
        }
        return -1;
    }
    char want[29];
    const char *got = strcasestr(head, "\r\nSec-WebSocket-Accept:");
    if (got)
        got += strlen("\r\nSec-WebSocket-Accept:");
    while (got && *got == ' ')
        got++;
    if (ws_handshake_accept(key, want) != 0 || !got || strncmp(got, want, 28) != 0) {
        snprintf(msg, MSG_CAP,
                 "mcp-bridge: %s answered the WebSocket handshake without the right "
                 "Sec-WebSocket-Accept: is a proxy in between rewriting it?",
                 w->host);
        return -1;
    }
    return 0;
}

/* Connects (TCP, and TLS for wss): *e and *fd. Returns 0, or -1 with msg
 * set. */
static int open_conn(struct ws_remote *w, char *msg, CURL **out, curl_socket_t *fd)
{
    CURL *e = curl_easy_init();
    if (!e) {
        snprintf(msg, MSG_CAP, "mcp-bridge: out of memory");
        return -1;
    }
    w->errbuf[0] = '\0';
    curl_easy_setopt(e, CURLOPT_URL, w->http_url);
    curl_easy_setopt(e, CURLOPT_CONNECT_ONLY, 1L);
    connection_setup(e, w->o, w->errbuf);
    /* the upgrade is HTTP/1.1: no h2 from ALPN */
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    CURLcode cc = curl_easy_perform(e);
    if (cc != CURLE_OK) {
        remote_error_curl(msg, MSG_CAP, w->host, cc, w->errbuf, w->o->connect_timeout_ms);
        curl_easy_cleanup(e);
        return -1;
    }
    curl_easy_getinfo(e, CURLINFO_ACTIVESOCKET, fd);
    *out = e;
    return 0;
}

/* Sends all of req[0..len) by the deadline. Returns 0, or -1 (*cc says). */
static int send_all(CURL *e, curl_socket_t fd, const char *req, size_t len, int64_t deadline,
                    CURLcode *cc)
{
    size_t sent = 0;
    *cc = CURLE_OK;
    while (sent < len) {
        size_t n = 0;
        *cc = curl_easy_send(e, req + sent, len - sent, &n);
        if (*cc == CURLE_AGAIN && wait_fd(fd, POLLOUT, deadline) == 0)
            continue;
        if (*cc != CURLE_OK)
            return -1;
        sent += n;
    }
    return 0;
}

/* A handshake's exchange: sends req (then wipes it: it may hold the token)
 * and reads into head (MAX_HANDSHAKE + 1 bytes, NUL-terminated) until
 * `term` arrives, by deadline. Returns where term starts, or NULL (*sent
 * says whether the request went out, *cc what reading last said). */
static char *exchange(CURL *e, curl_socket_t fd, char *req, size_t req_len, int64_t deadline,
                      const char *term, char *head, size_t *got, int *sent, CURLcode *cc)
{
    *sent = send_all(e, fd, req, req_len, deadline, cc) == 0;
    memset(req, 0, req_len);
    *got = 0;
    head[0] = '\0';
    while (*sent && *got < MAX_HANDSHAKE) {
        size_t n = 0;
        *cc = curl_easy_recv(e, head + *got, MAX_HANDSHAKE - *got, &n);
        if (*cc == CURLE_AGAIN) {
            if (wait_fd(fd, POLLIN, deadline) != 0)
                break;
            continue;
        }
        if (*cc != CURLE_OK || n == 0)
            break;
        *got += n;
        head[*got] = '\0';
        char *at = memmem(head, *got, term, strlen(term));
        if (at)
            return at;
    }
    return NULL;
}

/* The connection is up; `rest` (what came after the handshake's answer,
 * in the same read) is the first of the server's messages. */
static void up_with(struct ws_remote *w, CURL *e, curl_socket_t fd, const char *rest,
                    size_t rest_len)
{
    w->easy = e;
    w->fd = fd;
    w->up = 1;
    w->conn++;
    w->big_len = 0;
    free(w->big_key);
    w->big_key = NULL;
    if (!w->tcp)
        ws_parser_init_client(&w->parser, MAX_MESSAGE);
    if (w->down_since)
        bridge_log(LOG_INFO, "ws_resumed", "reconnected%s",
                   w->last_event_id ? " and resumed after the last event" : "");
    if (rest_len)
        on_bytes(w, rest, rest_len);
}

/* mcpd's answer to mcpd/connect (the first line it sends). Returns 0, or
 * -1 with msg set (and, for a session it does not know, session_lost). */
static int check_connect_answer(struct ws_remote *w, const char *line, size_t len, int resume,
                                char *msg)
{
    json_t *m = json_loadb(line, len, 0, NULL);
    const json_t *err = json_object_get(m, "error");
    const char *why = json_string_value(json_object_get(err, "message"));
    const char *reason = json_string_value(json_object_get(json_object_get(err, "data"), "reason"));
    int rc = -1;
    if (json_is_object(json_object_get(m, "result"))) {
        rc = 0;
    } else if (!json_is_object(err)) {
        snprintf(msg, MSG_CAP,
                 "mcp-bridge: %s did not answer mcpd/connect with JSON-RPC: is it mcpd's "
                 "--tcp-listen port?",
                 w->host);
    } else if (reason && strcmp(reason, "unauthorized") == 0) {
        snprintf(msg, MSG_CAP,
                 "mcp-bridge: %s refused the connection: %s (check the token: --token-env or "
                 "--token-file)",
                 w->host, why ? why : "unauthorized");
    } else if (resume && json_integer_value(json_object_get(err, "code")) == -32001) {
        snprintf(msg, MSG_CAP, "mcp-bridge: %s no longer knows the session: %s", w->host,
                 why ? why : "Session not found");
        if (w->s.state != SESSION_REINIT) {
            w->session_lost = 1;
            set_str(&w->last_event_id, NULL);
        }
    } else {
        snprintf(msg, MSG_CAP, "mcp-bridge: %s refused the connection: %s", w->host,
                 why ? why : "(no message)");
    }
    json_decref(m);
    return rc;
}

/* Raw TCP: connects and greets with mcpd/connect (the token; on a
 * reconnect the session and the last event id). Returns 0, or -1 with msg
 * set. */
static int connect_tcp(struct ws_remote *w, char *msg)
{
    CURL *e;
    curl_socket_t fd;
    if (open_conn(w, msg, &e, &fd) != 0)
        return -1;
    int resume = w->s.id && w->s.state != SESSION_REINIT;
    json_t *params = json_object();
    if (w->o->token)
        json_object_set_new(params, "token", json_string(w->o->token));
    if (resume)
        json_object_set_new(params, "sessionId", json_string(w->s.id));
    if (resume && w->last_event_id)
        json_object_set_new(params, "lastEventId", json_string(w->last_event_id));
    json_t *req = json_pack("{s:s, s:s, s:s, s:o}", "jsonrpc", "2.0", "id", CONNECT_ID, "method",
                            "mcpd/connect", "params", params);
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    size_t len = text ? strlen(text) : 0;
    char *line = text ? malloc(len + 1) : NULL;
    if (line) {
        memcpy(line, text, len);
        line[len] = '\n';
    }
    if (text) {
        memset(text, 0, len); /* the token was in there */
        free(text);
    }
    if (!line) {
        snprintf(msg, MSG_CAP, "mcp-bridge: out of memory");
        curl_easy_cleanup(e);
        return -1;
    }
    int64_t deadline = clock_mono_ms() + w->o->connect_timeout_ms;
    CURLcode cc = CURLE_OK;
    char head[MAX_HANDSHAKE + 1];
    size_t got;
    int sent;
    char *nl = exchange(e, fd, line, len + 1, deadline, "\n", head, &got, &sent, &cc);
    free(line);
    int rc = -1;
    if (!nl) {
        if (!sent || cc != CURLE_OK)
            remote_error_curl(msg, MSG_CAP, w->host, cc == CURLE_OK ? CURLE_RECV_ERROR : cc,
                              w->errbuf, w->o->connect_timeout_ms);
        else if (got)
            snprintf(msg, MSG_CAP,
                     "mcp-bridge: %s closed the connection without answering mcpd/connect",
                     w->host);
        else
            remote_error_silent(msg, MSG_CAP, w->host, w->o->connect_timeout_ms, 0);
    } else {
        rc = check_connect_answer(w, head, (size_t)(nl - head), resume, msg);
    }
    if (rc == 0 && !(w->dec = stdio_frame_decoder_new(MAX_MESSAGE))) {
        snprintf(msg, MSG_CAP, "mcp-bridge: out of memory");
        rc = -1;
    }
    if (rc != 0) {
        curl_easy_cleanup(e);
        return -1;
    }
    size_t line_len = (size_t)(nl + 1 - head);
    up_with(w, e, fd, head + line_len, got - line_len);
    return 0;
}

/* Connects and does the handshake. Returns 0, 1 to try again at once (a
 * new token), or -1 with msg set. */
static int handshake(struct ws_remote *w, char *msg)
{
    const struct bridge_options *o = w->o;
    CURL *e;
    curl_socket_t fd;
    if (open_conn(w, msg, &e, &fd) != 0)
        return -1;
    CURLcode cc;
    char key[25];
    if (ws_handshake_new_key(key) != 0) {
        snprintf(msg, MSG_CAP, "mcp-bridge: no randomness for the WebSocket key");
        curl_easy_cleanup(e);
        return -1;
    }
    char *req = NULL;
    size_t req_len = 0;
    FILE *f = open_memstream(&req, &req_len);
    if (!f) {
        curl_easy_cleanup(e);
        snprintf(msg, MSG_CAP, "mcp-bridge: out of memory");
        return -1;
    }
    fprintf(f,
            "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n"
            "Sec-WebSocket-Protocol: mcp\r\n",
            w->target, w->host, key);
    if (o->token)
        fprintf(f, "Authorization: Bearer %s\r\n", o->token);
    struct curl_slist *auth = NULL;
    if (w->oauth && oauth_headers(w->oauth, "GET", w->http_url, &auth) == 0)
        for (const struct curl_slist *h = auth; h; h = h->next)
            fprintf(f, "%s\r\n", h->data);
    curl_slist_free_all(auth);
    for (int i = 0; i < o->n_headers; i++)
        fprintf(f, "%s\r\n", o->headers[i]);
    /* while rebuilding, the connection is for a new session */
    int resume = w->s.id && w->s.state != SESSION_REINIT;
    if (resume)
        fprintf(f, "Mcp-Session-Id: %s\r\n", w->s.id);
    if (resume && w->last_event_id)
        fprintf(f, "Last-Event-ID: %s\r\n", w->last_event_id);
    fputs("\r\n", f);
    fclose(f);

    int64_t deadline = clock_mono_ms() + o->connect_timeout_ms;
    int rc = -1;
    char head[MAX_HANDSHAKE + 1];
    size_t got;
    int sent;
    char *end = exchange(e, fd, req, req_len, deadline, "\r\n\r\n", head, &got, &sent, &cc);
    free(req);
    if (!end) {
        if (!sent || cc != CURLE_OK)
            remote_error_curl(msg, MSG_CAP, w->host, cc == CURLE_OK ? CURLE_RECV_ERROR : cc,
                              w->errbuf, o->connect_timeout_ms);
        else
            remote_error_silent(msg, MSG_CAP, w->host, o->connect_timeout_ms, 0);
    } else {
        end[2] = '\0'; /* the status line and headers, without the blank line */
        rc = check_answer(w, head, key, msg);
        end[2] = '\r';
    }
    if (rc != 0) {
        curl_easy_cleanup(e);
        return rc;
    }
    /* frames may follow the handshake in the same read */
    size_t head_len = (size_t)(end + 4 - head);
    up_with(w, e, fd, head + head_len, got - head_len);
    return 0;
}

/* Connects and does the handshake, again after a sign-in (a bounded
 * number of times: a step-up is at most two). Returns 0, or -1 with msg
 * set. */
static int connect_ws(struct ws_remote *w, char *msg)
{
    if (w->tcp)
        return connect_tcp(w, msg);
    for (int i = 0; i < 4; i++) {
        int rc = handshake(w, msg);
        if (rc != 1)
            return rc;
    }
    return -1;
}

/* Up again: the next failure starts counting afresh. */
static void connected(struct ws_remote *w)
{
    w->down_since = 0;
    w->retry_at = 0;
    w->attempts = 0;
}

/* --------------------------------------------- rebuilding the session */

/* One connection keeps the order of messages, so unlike over HTTP what
 * waited may follow the replayed notifications/initialized at once. */
static void rebuild_send(void *ud, enum session_replay what, const char *body, size_t len)
{
    struct ws_remote *w = ud;
    struct session_rebuild rb = rebuild_of(w);
    queue_frame(w, WS_OP_TEXT, body, len, NULL);
    if (what == SESSION_REPLAY_INITIALIZED) {
        flush(w);
        session_rebuild_end(&w->s, &rb, NULL);
        return;
    }
    w->reinit_deadline = clock_mono_ms() + w->o->response_timeout_ms;
    char msg[MSG_CAP];
    if (!w->up && connect_ws(w, msg) != 0) {
        discard_out(w);
        connected(w); /* nothing is left to resume */
        session_rebuild_end(&w->s, &rb, msg);
        return;
    }
    connected(w);
    flush(w);
}

static void rebuild_end(void *ud, const char *failure)
{
    struct ws_remote *w = ud;
    w->reinit_deadline = 0;
    for (struct pending **pp = &w->pending; *pp;) {
        struct pending *p = *pp;
        if (!p->waiting) {
            pp = &p->next;
            continue;
        }
        p->waiting = 0;
        if (failure) {
            answer(w, pp, failure);
            continue;
        }
        queue_frame(w, WS_OP_TEXT, p->body, p->len, p->key);
        pp = &p->next;
    }
    flush(w);
}

static struct session_rebuild rebuild_of(struct ws_remote *w)
{
    return (struct session_rebuild){rebuild_send, rebuild_end, w, w->host};
}

/* The handshake said 404 for the session: nothing sent under it will be
 * answered, and what is queued was meant for it. The requests go again
 * on the rebuilt session, once. */
static void session_gone(struct ws_remote *w)
{
    discard_out(w);
    for (struct pending **pp = &w->pending; *pp;) {
        struct pending *p = *pp;
        if (p->retried && !p->waiting) {
            answer(w, pp, SESSION_LOST_AGAIN);
            continue;
        }
        p->retried = 1;
        p->waiting = 1;
        p->deadline = 0;
        pp = &p->next;
    }
    struct session_rebuild rb = rebuild_of(w);
    session_rebuild_needed(&w->s, &rb, w->s.generation);
}

/* Connects now if down; on failure answers or schedules per the rules in
 * ws_remote.h. */
static void ensure_up(struct ws_remote *w)
{
    if (w->up || w->stopping)
        return;
    char msg[MSG_CAP];
    if (connect_ws(w, msg) == 0) {
        connected(w);
        flush(w);
        return;
    }
    if (w->session_lost) {
        w->session_lost = 0;
        session_gone(w);
        /* No rebuild started (no initialize to replay): the old id would
         * be refused again at once, so not before a backoff. */
        if (w->s.state != SESSION_REINIT)
            w->retry_at = clock_mono_ms() + connection_backoff_ms(w->attempts++, 0);
        return;
    }
    int64_t now = clock_mono_ms();
    if (!w->s.id || !w->down_since || now - w->down_since >= w->o->response_timeout_ms) {
        /* never connected, the session is gone, or it stayed down too long */
        fail_all(w, msg);
        w->retry_at = 0;
        w->down_since = 0;
        discard_out(w);
        return;
    }
    w->retry_at = now + connection_backoff_ms(w->attempts++, 0);
    bridge_log(LOG_INFO, "ws_reconnect_failed", "%s; trying again", msg);
}

/* ------------------------------------------------------------ public */

struct ws_remote *ws_remote_new(const struct bridge_options *o, struct remote_sink sink)
{
    struct ws_remote *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->o = o;
    w->sink = sink;
    w->fd = CURL_SOCKET_BAD;
    w->multi = curl_multi_init();
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *query = NULL;
    if (!w->multi || !u ||
        curl_url_set(u, CURLUPART_URL, o->url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        curl_url_cleanup(u);
        curl_multi_cleanup(w->multi);
        free(w);
        return NULL;
    }
    curl_url_get(u, CURLUPART_PORT, &port, 0);
    curl_url_get(u, CURLUPART_PATH, &path, 0);
    curl_url_get(u, CURLUPART_QUERY, &query, 0);
    /* curl connects a raw TCP socket for an http:// URL with CONNECT_ONLY */
    w->tcp = o->transport == TRANSPORT_TCP;
    snprintf(w->host, sizeof w->host, "%s%s%s", host, port ? ":" : "", port ? port : "");
    snprintf(w->target, sizeof w->target, "%s%s%s", path ? path : "/", query ? "?" : "",
             query ? query : "");
    char *http_url = oauth_http_url(o->url);
    snprintf(w->http_url, sizeof w->http_url, "%s", http_url ? http_url : "");
    free(http_url);
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_free(query);
    curl_url_cleanup(u);
    if (!w->tcp) {
        w->oauth_opts = *o;
        w->oauth_opts.url = w->http_url;
        w->oauth = oauth_new(&w->oauth_opts);
    }
    return w;
}

void ws_remote_free(struct ws_remote *w)
{
    if (!w)
        return;
    w->stopping = 1;
    drop(w, "closing");
    discard_out(w);
    while (w->pending)
        pending_remove(w, &w->pending);
    session_free(&w->s);
    free(w->last_event_id);
    free(w->big_key);
    oauth_free(w->oauth);
    curl_multi_cleanup(w->multi);
    free(w);
}

CURLM *ws_remote_multi(struct ws_remote *w)
{
    return w->multi;
}

int ws_remote_fd(struct ws_remote *w, short *events)
{
    if (!w->up)
        return -1;
    *events = CURL_WAIT_POLLIN | (w->out ? CURL_WAIT_POLLOUT : 0);
    return (int)w->fd;
}

static struct pending *pending_new(const json_t *m, const char *body, size_t len)
{
    struct pending *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    const json_t *token =
        json_object_get(json_object_get(json_object_get(m, "params"), "_meta"), "progressToken");
    p->key = rpc_id_key(json_object_get(m, "id"));
    p->body = malloc(len + 1);
    p->progress_key = json_is_string(token) || json_is_integer(token) ? rpc_id_key(token) : NULL;
    if (!p->key || !p->body ||
        ((json_is_string(token) || json_is_integer(token)) && !p->progress_key)) {
        free(p->key);
        free(p->body);
        free(p->progress_key);
        free(p);
        return NULL;
    }
    memcpy(p->body, body, len);
    p->body[len] = '\0';
    p->len = len;
    p->id = json_incref(json_object_get(m, "id"));
    return p;
}

void ws_remote_send(struct ws_remote *w, const char *body, size_t len, json_t *m)
{
    const char *method = json_string_value(json_object_get(m, "method"));
    const char *key = NULL;
    if (rpc_classify(m) == RPC_REQUEST) {
        struct pending *p = pending_new(m, body, len);
        if (!p) {
            char *reply = rpc_error_reply(json_object_get(m, "id"), RPC_INTERNAL_ERROR,
                                          "mcp-bridge: out of memory");
            if (reply)
                emit(w, reply, strlen(reply));
            free(reply);
            return;
        }
        if (w->pending_tail)
            w->pending_tail->next = p;
        else
            w->pending = p;
        w->pending_tail = p;
        w->n_pending++;
        key = p->key;
        if (strcmp(method, "initialize") == 0)
            session_remember_initialize(&w->s, body, len);
        if (w->s.state == SESSION_REINIT) {
            p->waiting = 1;
            return;
        }
    } else {
        if (method && strcmp(method, "notifications/initialized") == 0)
            session_remember_initialized(&w->s, body, len);
        if (w->s.state == SESSION_REINIT)
            return; /* it was meant for the old session: the new one would not know it */
    }
    queue_frame(w, WS_OP_TEXT, body, len, key);
    if (!w->up && !w->retry_at)
        ensure_up(w);
    flush(w);
}

/* Requests in doubt, and a replayed initialize, get their answer in time. */
static void deadlines(struct ws_remote *w)
{
    int64_t now = clock_mono_ms();
    char msg[MSG_CAP];
    for (struct pending **pp = &w->pending; *pp;) {
        if (!(*pp)->deadline || now < (*pp)->deadline || (*pp)->waiting) {
            pp = &(*pp)->next;
            continue;
        }
        snprintf(msg, sizeof msg,
                 "mcp-bridge: the connection to %s dropped after the request was sent, and "
                 "nothing came for it within %ld ms (--response-timeout-ms); it may or may not "
                 "have run",
                 w->host, w->o->response_timeout_ms);
        answer(w, pp, msg);
    }
    if (w->reinit_deadline && now >= w->reinit_deadline) {
        snprintf(msg, sizeof msg,
                 "mcp-bridge: the server lost the session, and %s did not answer the bridge's "
                 "new initialize within %ld ms (--response-timeout-ms)",
                 w->host, w->o->response_timeout_ms);
        struct session_rebuild rb = rebuild_of(w);
        session_rebuild_end(&w->s, &rb, msg);
    }
}

void ws_remote_run(struct ws_remote *w)
{
    char buf[64 * 1024];
    while (w->up) {
        size_t n = 0;
        CURLcode cc = curl_easy_recv(w->easy, buf, sizeof buf, &n);
        if (cc == CURLE_AGAIN)
            break;
        if (cc != CURLE_OK || n == 0) {
            drop(w, cc != CURLE_OK ? curl_easy_strerror(cc) : "the server closed the connection");
            break;
        }
        on_bytes(w, buf, n);
    }
    flush(w);
    if (!w->up && w->retry_at && clock_mono_ms() >= w->retry_at)
        ensure_up(w);
    deadlines(w);
}

long ws_remote_timeout_ms(struct ws_remote *w)
{
    int64_t now = clock_mono_ms(), next = now + 1000;
    if (w->retry_at && w->retry_at < next)
        next = w->retry_at;
    if (w->reinit_deadline && w->reinit_deadline < next)
        next = w->reinit_deadline;
    for (const struct pending *p = w->pending; p; p = p->next) {
        if (p->deadline && p->deadline < next)
            next = p->deadline;
    }
    return next < now ? 0 : (long)(next - now);
}

int ws_remote_pending(struct ws_remote *w)
{
    return w->n_pending;
}

void ws_remote_shutdown(struct ws_remote *w, const char *why)
{
    fail_all(w, why);
    if (w->up && !w->tcp) {
        unsigned char f[WS_MAX_CONTROL_FRAME];
        size_t n = ws_frame_close(f, WS_CLOSE_NORMAL, "mcp-bridge stopping");
        queue_frame(w, WS_OP_CLOSE, f + 2, n - 2, NULL);
        flush(w);
    }
    w->stopping = 1;
    drop(w, "stopping");
}
