/* ws_remote — see ws_remote.h. */
#include "ws_remote.h"

#include "bridge_log.h"
#include "connection.h"
#include "remote_error.h"
#include "rpc_message.h"

#include "clock.h"
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

struct frame_out {
    struct frame_out *next;
    unsigned char *data;
    size_t len, off;
};

struct pending {
    struct pending *next;
    char *key;
    json_t *id;
};

struct ws_remote {
    const struct bridge_options *o;
    struct remote_sink sink;
    CURLM *multi;
    CURL *easy; /* the connection, or NULL */
    curl_socket_t fd;
    int up;
    struct ws_parser parser;
    struct frame_out *out, *out_tail;
    struct pending *pending;
    int n_pending;
    char *session_id, *last_event_id;
    char host[256];      /* host[:port], for messages */
    char http_url[2400]; /* the URL with an http(s) scheme, for curl */
    char target[2048];   /* path and query of the handshake */
    int64_t retry_at, down_since;
    int attempts;
    int stopping;
};

static void emit(struct ws_remote *w, const char *s, size_t len)
{
    w->sink.emit(w->sink.ud, s, len);
}

static void fail_all(struct ws_remote *w, const char *why)
{
    while (w->pending) {
        struct pending *p = w->pending;
        w->pending = p->next;
        bridge_log(LOG_WARN, "request_failed", "id=%s: %s", p->key, why);
        char *reply = rpc_error_reply(p->id, RPC_BRIDGE_ERROR, why);
        if (reply) {
            emit(w, reply, strlen(reply));
            free(reply);
        }
        free(p->key);
        json_decref(p->id);
        free(p);
    }
    w->n_pending = 0;
}

/* ------------------------------------------------------------ output */

static void queue_frame(struct ws_remote *w, enum ws_opcode op, const void *payload, size_t len)
{
    unsigned char key[4];
    if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key)
        memset(key, 0x5a, sizeof key);
    struct frame_out *f = calloc(1, sizeof *f);
    if (!f || !(f->data = ws_frame_client(op, payload, len, key, &f->len))) {
        free(f);
        bridge_log(LOG_ERROR, "out_of_memory", "dropping a frame");
        return;
    }
    if (w->out_tail)
        w->out_tail->next = f;
    else
        w->out = f;
    w->out_tail = f;
}

static void drop(struct ws_remote *w, const char *why);

/* Writes what curl takes now; the rest waits for POLLOUT. */
static void flush(struct ws_remote *w)
{
    while (w->up && w->out) {
        struct frame_out *f = w->out;
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
        free(f->data);
        free(f);
    }
}

/* ------------------------------------------------------------- input */

static void set_str(char **slot, const char *v)
{
    char *copy = v ? strdup(v) : NULL;
    free(*slot);
    *slot = copy;
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
    if (eid)
        set_str(&w->last_event_id, eid);
    if (sid)
        set_str(&w->session_id, sid);
    if (rpc_classify(m) == RPC_RESPONSE) {
        char *key = rpc_id_key(json_object_get(m, "id"));
        struct pending **pp = &w->pending;
        while (*pp && (!key || strcmp((*pp)->key, key) != 0))
            pp = &(*pp)->next;
        free(key);
        if (!*pp) {
            bridge_log(LOG_DEBUG, "response_dropped", "a response to no pending request");
            json_decref(m);
            return;
        }
        struct pending *p = *pp;
        *pp = p->next;
        free(p->key);
        json_decref(p->id);
        free(p);
        w->n_pending--;
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

static void on_bytes(struct ws_remote *w, const char *buf, size_t len)
{
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
            queue_frame(w, WS_OP_PONG, ev.data, ev.len);
            break;
        case WS_EV_PONG:
            break;
        case WS_EV_CLOSE:
        case WS_EV_ERROR: {
            char why[200];
            snprintf(why, sizeof why, "%s %u (%s)",
                     ev.kind == WS_EV_CLOSE ? "the server closed with" : "bad frame, close",
                     ev.code, ev.reason ? ev.reason : "");
            unsigned char f[WS_MAX_CONTROL_FRAME];
            size_t n = ws_frame_close(f, ev.code, NULL);
            /* the close goes masked, like every client frame */
            queue_frame(w, WS_OP_CLOSE, f + 2, n - 2);
            flush(w);
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
    /* a frame cut short is sent again whole on the next connection */
    if (w->out)
        w->out->off = 0;
    if (w->stopping)
        return;
    int64_t now = clock_mono_ms();
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

/* The handshake's answer: 101, the right Sec-WebSocket-Accept. Returns 0,
 * or -1 with msg set. */
static int check_answer(struct ws_remote *w, const char *head, const char *key, char *msg)
{
    long status = 0;
    sscanf(head, "HTTP/%*s %ld", &status);
    if (status != 101) {
        const char *body = strstr(head, "\r\n\r\n");
        remote_error_status(msg, MSG_CAP, w->host, status, body ? body + 4 : NULL);
        if (status == 404 && w->session_id) {
            /* the server forgot the session: what was pending is lost */
            set_str(&w->session_id, NULL);
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

/* Connects and does the handshake. Returns 0, or -1 with msg set. */
static int connect_ws(struct ws_remote *w, char *msg)
{
    const struct bridge_options *o = w->o;
    CURL *e = curl_easy_init();
    if (!e) {
        snprintf(msg, MSG_CAP, "mcp-bridge: out of memory");
        return -1;
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(e, CURLOPT_URL, w->http_url);
    curl_easy_setopt(e, CURLOPT_CONNECT_ONLY, 1L);
    connection_setup(e, o, errbuf);
    /* the upgrade is HTTP/1.1: no h2 from ALPN */
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    CURLcode cc = curl_easy_perform(e);
    if (cc != CURLE_OK) {
        remote_error_curl(msg, MSG_CAP, w->host, cc, errbuf, o->connect_timeout_ms);
        curl_easy_cleanup(e);
        return -1;
    }
    curl_socket_t fd;
    curl_easy_getinfo(e, CURLINFO_ACTIVESOCKET, &fd);
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
    for (int i = 0; i < o->n_headers; i++)
        fprintf(f, "%s\r\n", o->headers[i]);
    if (w->session_id)
        fprintf(f, "Mcp-Session-Id: %s\r\n", w->session_id);
    if (w->session_id && w->last_event_id)
        fprintf(f, "Last-Event-ID: %s\r\n", w->last_event_id);
    fputs("\r\n", f);
    fclose(f);

    int64_t deadline = clock_mono_ms() + o->connect_timeout_ms;
    size_t sent = 0;
    int rc = -1;
    while (sent < req_len) {
        size_t n = 0;
        cc = curl_easy_send(e, req + sent, req_len - sent, &n);
        if (cc == CURLE_AGAIN && wait_fd(fd, POLLOUT, deadline) == 0)
            continue;
        if (cc != CURLE_OK)
            break;
        sent += n;
    }
    /* the token was in there */
    memset(req, 0, req_len);
    free(req);
    char head[MAX_HANDSHAKE + 1];
    size_t got = 0;
    char *end = NULL;
    while (sent == req_len && got < MAX_HANDSHAKE) {
        size_t n = 0;
        cc = curl_easy_recv(e, head + got, MAX_HANDSHAKE - got, &n);
        if (cc == CURLE_AGAIN) {
            if (wait_fd(fd, POLLIN, deadline) != 0)
                break;
            continue;
        }
        if (cc != CURLE_OK || n == 0)
            break;
        got += n;
        head[got] = '\0';
        if ((end = strstr(head, "\r\n\r\n")) != NULL)
            break;
    }
    if (!end) {
        if (sent < req_len || cc != CURLE_OK)
            remote_error_curl(msg, MSG_CAP, w->host, cc == CURLE_OK ? CURLE_RECV_ERROR : cc, "",
                              o->connect_timeout_ms);
        else
            remote_error_silent(msg, MSG_CAP, w->host, o->connect_timeout_ms, 0);
    } else {
        end[2] = '\0'; /* the status line and headers, without the blank line */
        rc = check_answer(w, head, key, msg);
        end[2] = '\r';
    }
    if (rc != 0) {
        curl_easy_cleanup(e);
        return -1;
    }
    w->easy = e;
    w->fd = fd;
    w->up = 1;
    ws_parser_init_client(&w->parser, MAX_MESSAGE);
    if (w->down_since)
        bridge_log(LOG_INFO, "ws_resumed", "reconnected%s",
                   w->last_event_id ? " and resumed after the last event" : "");
    /* frames may follow the handshake in the same read */
    size_t head_len = (size_t)(end + 4 - head);
    if (got > head_len)
        on_bytes(w, head + head_len, got - head_len);
    return 0;
}

/* Connects now if down; on failure answers or schedules per the rules in
 * ws_remote.h. */
static void ensure_up(struct ws_remote *w)
{
    if (w->up || w->stopping)
        return;
    char msg[MSG_CAP];
    if (connect_ws(w, msg) == 0) {
        w->down_since = 0;
        w->retry_at = 0;
        w->attempts = 0;
        flush(w);
        return;
    }
    int64_t now = clock_mono_ms();
    if (!w->session_id || !w->down_since || now - w->down_since >= w->o->response_timeout_ms) {
        /* never connected, the session is gone, or it stayed down too long */
        fail_all(w, msg);
        w->retry_at = 0;
        w->down_since = 0;
        while (w->out) {
            struct frame_out *f = w->out;
            w->out = f->next;
            free(f->data);
            free(f);
        }
        w->out_tail = NULL;
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
    int tls = strcmp(scheme, "wss") == 0 || strcmp(scheme, "https") == 0;
    snprintf(w->host, sizeof w->host, "%s%s%s", host, port ? ":" : "", port ? port : "");
    snprintf(w->target, sizeof w->target, "%s%s%s", path ? path : "/", query ? "?" : "",
             query ? query : "");
    snprintf(w->http_url, sizeof w->http_url, "%s://%s%s", tls ? "https" : "http", w->host,
             w->target);
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_free(query);
    curl_url_cleanup(u);
    return w;
}

void ws_remote_free(struct ws_remote *w)
{
    if (!w)
        return;
    w->stopping = 1;
    drop(w, "closing");
    while (w->out) {
        struct frame_out *f = w->out;
        w->out = f->next;
        free(f->data);
        free(f);
    }
    while (w->pending) {
        struct pending *p = w->pending;
        w->pending = p->next;
        free(p->key);
        json_decref(p->id);
        free(p);
    }
    free(w->session_id);
    free(w->last_event_id);
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

void ws_remote_send(struct ws_remote *w, const char *body, size_t len, json_t *m)
{
    if (rpc_classify(m) == RPC_REQUEST) {
        struct pending *p = calloc(1, sizeof *p);
        if (!p || !(p->key = rpc_id_key(json_object_get(m, "id")))) {
            free(p);
            return;
        }
        p->id = json_incref(json_object_get(m, "id"));
        p->next = w->pending;
        w->pending = p;
        w->n_pending++;
    }
    queue_frame(w, WS_OP_TEXT, body, len);
    if (!w->up && !w->retry_at)
        ensure_up(w);
    flush(w);
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
}

long ws_remote_timeout_ms(struct ws_remote *w)
{
    if (!w->retry_at)
        return 1000;
    int64_t left = w->retry_at - clock_mono_ms();
    return left < 0 ? 0 : left > 1000 ? 1000 : (long)left;
}

int ws_remote_pending(struct ws_remote *w)
{
    return w->n_pending;
}

void ws_remote_shutdown(struct ws_remote *w, const char *why)
{
    fail_all(w, why);
    if (w->up) {
        unsigned char f[WS_MAX_CONTROL_FRAME];
        size_t n = ws_frame_close(f, WS_CLOSE_NORMAL, "mcp-bridge stopping");
        queue_frame(w, WS_OP_CLOSE, f + 2, n - 2);
        flush(w);
    }
    w->stopping = 1;
    drop(w, "stopping");
}
