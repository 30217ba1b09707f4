/* ws — MCP over WebSocket at GET /mcp/ws (subprotocol "mcp", one JSON-RPC
 * message per text frame), on top of the ulfius/libmicrohttpd server.
 *
 * ulfius 2.7.13's own WebSocket code cannot limit frame sizes or choose
 * close codes (see design.md), so this transport takes the socket over and
 * speaks RFC 6455 itself, with the ws_frame codec:
 *
 *   1. ws_uri_logger, installed as MHD's URI-log callback in place of
 *      ulfius_uri_logger (which it calls), remembers the MHD_Connection of
 *      the request being parsed in a thread-local. With
 *      MHD_USE_THREAD_PER_CONNECTION the endpoint callback runs later on
 *      that same thread, so ws_endpoint finds its connection there (and
 *      checks that the client address matches before trusting it).
 *   2. ws_endpoint checks Host/Origin (403) and the handshake (426/400),
 *      then gets the socket with MHD_CONNECTION_INFO_CONNECTION_FD, writes
 *      the 101 response itself and runs the whole WebSocket session on the
 *      socket inside the callback, in the connection's own thread.
 *   3. When the session ends it shuts the socket down and returns; MHD's
 *      attempt to send ulfius's response then fails and MHD closes the
 *      connection as it would any broken one.
 *
 * Messages go through push (push.h): each complete text message is handed
 * to push_receive; replies are sent by push's writer thread through
 * ws's send function, which writes one text frame under the connection's
 * write mutex, waiting at most write_timeout_ms for a client that does not
 * read before giving up on the connection (its streams stay stored). Every
 * message carries "_meta": {"mcpd/event-id": "<stream>:<seq>"}.
 *
 * Resuming: a handshake with Mcp-Session-Id (and optionally Last-Event-ID)
 * headers, or ?session=ID&last_event_id=EID (browsers cannot set headers
 * on a WebSocket), adopts that session and replays the named stream from
 * the message after that id. An unknown or expired session is answered
 * 404 (-32001 "Session not found") and a Last-Event-ID that names no
 * stream of the session 400, both before the upgrade, so a client learns
 * it from the handshake instead of from a close code.
 *
 * Keepalive: the server pings every ping_ms and closes (1001) a
 * connection whose pong has not come within 2 * ping_ms. Bad frames close
 * with 1002 (protocol), 1003 (binary), 1007 (invalid UTF-8) or 1009 (over
 * max_message, decided from the frame header before any allocation).
 *
 * Limits of the socket takeover: it needs thread-per-connection mode and
 * plain TCP (no TLS inside MHD: a proxy terminates TLS), and bytes a
 * client sends after its handshake but before the 101 arrives would be in
 * MHD's buffer, not the socket (clients wait for the 101). */
#ifndef MCPD_WS_H
#define MCPD_WS_H

#include <stddef.h>
#include <stdint.h>

struct MHD_Connection;
struct _u_request;
struct _u_response;
struct origin_policy;

struct ws_config {
    size_t max_message;                  /* bytes, after reassembly; 0: 1 MiB */
    int64_t ping_ms;                     /* 0: 15000 */
    int64_t write_timeout_ms;            /* 0: 10000 */
    const struct origin_policy *origins; /* borrowed for the server's life */
};

/* Sets the configuration; call before the server starts. */
void ws_configure(const struct ws_config *cfg);

/* MHD_OPTION_URI_LOG_CALLBACK: calls ulfius_uri_logger(cls, uri) and
 * remembers con for ws_endpoint. */
void *ws_uri_logger(void *cls, const char *uri, struct MHD_Connection *con);

/* The ulfius callback for GET /mcp/ws. */
/* Tells every open WebSocket session to close with 1001 "going away"
 * (server shutdown); call before stopping the HTTP server. */
void ws_stop(void);

int ws_endpoint(const struct _u_request *req, struct _u_response *resp, void *user_data);

#endif
