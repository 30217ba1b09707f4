/* remote — the server's end of the bridge, whatever the transport: the
 * poll loop in main.c drives it through these calls, and they go to
 * http_remote (Streamable HTTP, HTTP+SSE, long-polling), ws_remote
 * (mcpd's WebSocket and raw TCP transports) or udp_remote (mcpd's UDP
 * transport).
 *
 * Whatever the server sends, and every reply, goes to sink.emit one
 * JSON-RPC message at a time (compact JSON, borrowed for the call).
 *
 * Ownership: struct remote is the caller's; remote_open fills it,
 * remote_free releases what it holds. */
#ifndef MCP_BRIDGE_REMOTE_H
#define MCP_BRIDGE_REMOTE_H

#include <curl/curl.h>
#include <jansson.h>
#include <stddef.h>

struct bridge_options;
struct http_remote;
struct ws_remote;
struct udp_remote;

struct remote_sink {
    void (*emit)(void *ud, const char *json, size_t len);
    void *ud;
};

struct remote {
    struct http_remote *http;
    struct ws_remote *ws;
    struct udp_remote *udp;
};

/* Returns 0, or -1 when out of memory. */
int remote_open(struct remote *rm, const struct bridge_options *o, struct remote_sink sink);
void remote_free(struct remote *rm);

/* The multi handle curl_multi_poll waits on, and one more descriptor to
 * watch (-1 if none) with the poll events it wants. */
CURLM *remote_multi(struct remote *rm);
int remote_fd(struct remote *rm, short *events);

/* One message from the client: its text and parsed form. */
void remote_send(struct remote *rm, const char *body, size_t len, json_t *m);
/* The client gave up on the request with id: it gets no reply, and its
 * HTTP request is closed (which is how a 2026-07-28 server learns of it). */
void remote_cancel(struct remote *rm, const json_t *id);
/* Drives transfers and timers after the loop woke up. */
void remote_run(struct remote *rm);
/* How long the loop may sleep (ms). */
long remote_timeout_ms(struct remote *rm);
/* Client requests not answered yet. */
int remote_pending(struct remote *rm);
/* Answers what is pending with why, and ends the session (bounded). */
void remote_shutdown(struct remote *rm, const char *why);

#endif
