/* tcp — MCP over a raw TCP socket (--tcp-listen HOST:PORT): the stdio
 * contract (newline-delimited JSON, or Content-Length frames when the client
 * starts with them, answered in the client's framing) on a network socket,
 * with every reply pushed down the connection as on WebSocket (push.h).
 *
 * Wire rules (README "TCP wire rules"): the client's first message may be
 * the request mcpd/connect {token, sessionId, lastEventId}, answered with
 * {"transport":"tcp","sessionId":...}; with --auth token it must be, and
 * anything else first is refused and the connection closed. A connect with
 * a sessionId resumes that session (and with lastEventId the stream it
 * names, from the message after it); every pushed message carries its
 * "mcpd/event-id" in _meta. What mcpd says on its own (a framing error, the
 * end of the connection: idle, token revoked, shutting down) is a JSON-RPC
 * error with id null and data {"transport":"tcp","reason":...}.
 *
 * How it works: one accept fiber on the event loop (loop.h) waits for the
 * non-blocking listening socket with loop_wait_fd, counts connections (in
 * all and per client address) and hands each accepted socket to a reader
 * fiber of its own (tcp_conn.c), which decodes frames (stdio_frame.h) and
 * feeds push; push's writer fiber sends. No thread is started: a connection
 * costs two fibers and its socket.
 *
 * Timeouts: a connection must complete its first message (and with auth a
 * successful mcpd/connect) within handshake_ms of its accept; afterwards a
 * connection with no complete message received and no request in flight
 * for idle_ms is
 * closed (bytes of a message never finished are no activity); a client
 * that stops reading is cut after write_timeout_ms.
 *
 * tcp_start and tcp_stop run on the main thread, after loop_start and
 * before loop_stop. */
#ifndef MCPD_TCP_H
#define MCPD_TCP_H

#include <stddef.h>
#include <stdint.h>

#define TCP_TRANSPORT "tcp"

struct tcp_config {
    const char *host; /* numeric address */
    int port;         /* 0: any free port (tcp_port tells which) */
    size_t max_message;
    unsigned max_connections;
    unsigned max_per_ip; /* 0: no per-address cap */
    int64_t idle_ms;
    int64_t handshake_ms;
    int64_t write_timeout_ms; /* 0: 30 s */
    int max_inflight;         /* per connection; 0: push's default */
    int auth_required;        /* a connection greets with a token before anything */
};

/* Binds, listens and starts accepting. Returns 0, or -1 with a message
 * in *err (caller frees). */
int tcp_start(const struct tcp_config *cfg, char **err);
/* The port listened on (0 before tcp_start). */
int tcp_port(void);
/* Stops accepting, says goodbye to every connection and ends them; their
 * sessions and streams stay stored. Safe when never started. */
void tcp_stop(void);

#endif
