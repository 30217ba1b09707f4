/* http — the Streamable HTTP transport on ulfius/libmicrohttpd.
 *
 * Serves /mcp (POST, GET, DELETE), /healthz and /readyz. A body over
 * max_body is refused (413) by body_gate before it is read. A POST is checked
 * (Host/Origin, Accept, Content-Type, protocol version, session),
 * parsed, and handed to the core; the reply is then read from the request's
 * durable stream and written either as one JSON body or as an SSE stream.
 * A GET follows the session's standalone stream, or, with Last-Event-ID,
 * resumes any stream of the session exactly after that event. The transport
 * owns no messages: a dropped connection loses nothing, since the stream is
 * in the store and the client can resume it. A response that lasts (an SSE
 * stream, a long-poll, a JSON reply still waiting) holds its request's
 * token (follow_token) and ends when the token is revoked or expires: an
 * SSE stream with a final comment, a waiting request with 401.
 *
 * libmicrohttpd runs a pool of epoll threads (one per CPU, at least two)
 * under a connection cap; no connection holds a thread. A request's
 * handler, and an SSE writer waiting for its stream, run on fibers
 * (request_host.h): a wait suspends the connection and frees the thread, and
 * the stream's wake-up (a new chunk, or the keepalive deadline, whose
 * comment is also how a vanished client is noticed) resumes it. A
 * WebSocket session, once upgraded, runs as fibers on the event loop
 * (ws.h). */
#ifndef MCPD_HTTP_H
#define MCPD_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct origin_policy;

enum http_reply_mode { HTTP_REPLY_AUTO, HTTP_REPLY_JSON, HTTP_REPLY_SSE };

struct http_config {
    const char *host; /* numeric IPv4 or IPv6 address */
    int port;
    size_t max_body;
    enum http_reply_mode reply_mode;
    int64_t sse_poll_ms;  /* 0: keep SSE connections open */
    int64_t keepalive_ms; /* SSE comment interval */
    int64_t retry_ms;     /* the retry: hint sent to polling clients */
    unsigned connection_limit;
    unsigned connection_limit_per_ip;    /* 0: none */
    int64_t request_timeout_ms;          /* 0: none */
    const char *trusted_proxies;         /* forwarded.h's list; NULL: none */
    const struct origin_policy *origins; /* borrowed for the server's life */
    size_t ws_max_message;
    int64_t ws_ping_ms;
    /* RFC 9728's protected resource metadata (JSON text, borrowed for the
     * server's life), served at /.well-known/oauth-protected-resource[/mcp];
     * NULL without OAuth (those paths are then unknown). */
    const char *resource_metadata;
};

/* Starts listening. Returns 0, or -1 with *err (caller frees). */
int http_start(const struct http_config *cfg, char **err);
/* Ends every waiting request (request_host_stop), stops accepting and waits
 * for libmicrohttpd's pool threads and the lingering closes (readers must
 * have been released first: see core_stop). */
void http_stop(void);

#endif
