/* ws — MCP over WebSocket at GET /mcp/ws (subprotocol "mcp", one JSON-RPC
 * message per text frame), on top of the ulfius/libmicrohttpd server.
 *
 * ulfius 2.7.13's own WebSocket code cannot limit frame sizes or choose
 * close codes (see ../shared/design.md's pitfalls), so this transport speaks
 * RFC 6455 itself, with the ws_frame codec, on libmicrohttpd's upgrade API:
 *
 *   1. The request host (request_host.h), in front of ulfius's handler, hands every
 *      GET /mcp/ws to ws_upgrade once its headers are in (ulfius never
 *      sees it), on the request's fiber: a resume's waits park it.
 *   2. ws_upgrade checks Host/Origin (403) and the handshake (426/400),
 *      adopts a session to resume (404/400), and queues a 101 made with
 *      MHD_create_response_for_upgrade.
 *   3. Once libmicrohttpd has sent the 101 it calls back with the socket
 *      and the bytes it had already read past the handshake (a client may
 *      send its first frames in the same packet); those are parsed first.
 *      The session's reader then runs as a fiber on the event loop
 *      (loop.h; libmicrohttpd's pool thread goes back to its other
 *      connections, and no thread is the session's) over a duplicate
 *      of the socket: libmicrohttpd's connection is closed at once, which
 *      frees its memory (transports/NOTES.md), while conn_guard keeps the
 *      socket counted until the session closes it.
 *
 * Messages go through push (push.h): each complete text message is handed
 * to push_receive; replies are sent by push's writer (a loop fiber) through
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
 * The handshake's token (auth.h) is held for as long as the connection
 * lasts: when it is revoked or expires, the connection closes with 1008
 * and the reason "token revoked" or "token expired", session or not.
 *
 * Keepalive: the server pings every ping_ms and closes (1001) a
 * connection whose pong has not come within 2 * ping_ms. Bad frames close
 * with 1002 (protocol), 1003 (binary), 1007 (invalid UTF-8) or 1009 (over
 * max_message, decided from the frame header before any allocation).
 *
 * Needs MHD_ALLOW_UPGRADE and plain TCP (no TLS inside libmicrohttpd: a
 * proxy terminates TLS). */
#ifndef MCPD_WS_H
#define MCPD_WS_H

#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

struct origin_policy;

struct ws_config {
    size_t max_message;                  /* bytes, after reassembly; 0: 1 MiB */
    int64_t ping_ms;                     /* 0: 15000 */
    int64_t write_timeout_ms;            /* 0: 10000 */
    const struct origin_policy *origins; /* borrowed for the server's life */
};

/* Sets the configuration; call before the server starts. */
void ws_configure(const struct ws_config *cfg);

struct ws_conn;

/* Answers GET /mcp/ws (url: the path it came to) from its headers: a
 * refusal, or the 101 that hands the connection to the WebSocket session.
 * Call from the access handler on the request's final call; returns what
 * the handler returns. Until the 101 has gone out, *pending (the
 * request's, kept by the caller) points to the session. */
enum MHD_Result ws_upgrade(struct MHD_Connection *con, const char *url, struct ws_conn **pending);
/* From MHD_OPTION_NOTIFY_COMPLETED: frees a session whose 101 never went
 * out (*pending still set). */
void ws_request_completed(struct ws_conn **pending);

/* Tells every open WebSocket session to close with 1001 "going away"
 * (server shutdown); call before stopping the HTTP server. */
void ws_stop(void);

#endif
