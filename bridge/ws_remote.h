/* ws_remote — the server's end of the bridge over mcpd's WebSocket
 * transport (--transport ws): one connection, subprotocol "mcp", one
 * JSON-RPC message per text frame, for networks whose proxies pass
 * WebSockets but buffer SSE. The same code speaks mcpd's raw TCP transport
 * (a tcp:// URL; README "TCP wire rules"): newline-delimited JSON, and
 * instead of the HTTP handshake the greeting mcpd/connect, with the token,
 * and on a reconnect the session id and last event id; mcpd's answer to
 * it plays the handshake's part (an error -32001 with reason "unauthorized"
 * is a 401, another -32001 the 404 of a forgotten session). Only the
 * framing and the greeting differ: everything below holds for both.
 *
 * libcurl makes the connection (TCP and TLS, with the same verification
 * and --cacert as HTTP: CURLOPT_CONNECT_ONLY), the bridge speaks the
 * RFC 6455 handshake and frames over it with mcpd's own codec
 * (service/transports/ws_frame, ws_handshake). mcpd puts each message's
 * event id, and the session id on initialize's reply, in _meta; when the
 * connection drops the bridge reconnects with Mcp-Session-Id and
 * Last-Event-ID (capped exponential backoff with jitter, for up to
 * response_timeout_ms) and gets exactly what it missed. Requests still
 * unanswered when that fails are answered with an error; every request
 * gets one reply:
 *   - a 404 to the handshake for the session (a server restarted without
 *     its store, an expired or killed session) rebuilds the session as
 *     session.h says, on a new connection, and sends the requests again;
 *   - a close with 1009 (message too big) answers the request that was
 *     too big with an error saying so (WebSocket);
 *   - a request that went out on a connection that dropped may never have
 *     been read, and nothing on the connection tells: unless its reply or
 *     its progress comes, it is answered with an error response_timeout_ms
 *     after the drop.
 *
 * Connecting blocks the loop for at most connect_timeout_ms.
 *
 * Ownership: the caller owns the struct (ws_remote_new/_free). */
#ifndef MCP_BRIDGE_WS_REMOTE_H
#define MCP_BRIDGE_WS_REMOTE_H

#include "options.h"
#include "remote.h"

#include <curl/curl.h>
#include <jansson.h>

struct ws_remote;

struct ws_remote *ws_remote_new(const struct bridge_options *o, struct remote_sink sink);
void ws_remote_free(struct ws_remote *w);
/* An empty multi handle, for curl_multi_poll to wait on the socket. */
CURLM *ws_remote_multi(struct ws_remote *w);
/* The connection's socket and the poll events it needs, or -1. */
int ws_remote_fd(struct ws_remote *w, short *events);
void ws_remote_send(struct ws_remote *w, const char *body, size_t len, json_t *m);
void ws_remote_run(struct ws_remote *w);
long ws_remote_timeout_ms(struct ws_remote *w);
int ws_remote_pending(struct ws_remote *w);
void ws_remote_shutdown(struct ws_remote *w, const char *why);

#endif
