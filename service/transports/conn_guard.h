/* conn_guard — no client may hold more than its share of the HTTP server's
 * connections, nor hold one without sending a request.
 *
 * A connection that never finishes its request holds a slot under
 * --max-connections (slowloris). The guard keeps a record per connection (from
 * MHD_OPTION_NOTIFY_CONNECTION) and enforces three limits:
 *
 *   - Request timeout. From accept, and again from the end of each
 *     response (an idle keep-alive connection), the next request must have
 *     arrived whole, headers and body, within --request-timeout-ms. A
 *     watchdog thread shuts down the sockets of the late ones. While a
 *     request is being handled (an SSE stream, a long-poll, a WebSocket
 *     taken over by ws.c) there is no deadline.
 *   - Connection cap. libmicrohttpd's own limit is set a little above
 *     --max-connections, so that the connections past the cap can still be
 *     answered: 503 with Retry-After and Connection: close, not a reset.
 *   - Per-client cap: --max-connections-per-ip connections per client
 *     address; past it, 429. Behind a trusted proxy (forwarded.h) the client
 *     is the forwarded address, counted per request rather than per socket.
 *   - Out of descriptors. If accept() fails anyway (the open-files limit
 *     lowered under a running process, descriptors held elsewhere),
 *     libmicrohttpd retries at once, forever, logging each failure: a
 *     core at 100% and some 200,000 log lines a second. Its logger hands
 *     those lines here; the guard holds the accepting thread 100 ms per
 *     failure and lets one line through per 10 s, with the count it held
 *     back. Clients in the accept queue are served as connections close.
 *
 * The request host (request_host.h) calls the request hooks from its access
 * handler (the only code in front of ulfius's), and its completion
 * callback. Thread-safe. */
#ifndef MCPD_CONN_GUARD_H
#define MCPD_CONN_GUARD_H

#include <stdint.h>

#include <microhttpd.h>

#include "forwarded.h"

struct conn_guard_config {
    int64_t request_timeout_ms; /* 0: no timeout */
    unsigned max_connections;
    unsigned max_per_ip;             /* 0: no per-client cap */
    const struct forwarded *trusted; /* borrowed for the guard's life; may be NULL */
};

/* Starts the watchdog. Returns 0, or -1 with a message in err. */
int conn_guard_start(const struct conn_guard_config *cfg, char *err, size_t errcap);
/* Stops the watchdog; call after libmicrohttpd has stopped. */
void conn_guard_stop(void);
/* The limit to give libmicrohttpd (MHD_OPTION_CONNECTION_LIMIT). */
unsigned conn_guard_mhd_limit(void);
/* MHD_OPTION_NOTIFY_CONNECTION. */
void conn_guard_notify(void *cls, struct MHD_Connection *con, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);

/* From libmicrohttpd's logger: if line reports accept() failing for lack
 * of descriptors or memory, waits before the retry (on the accepting
 * thread) and returns 1, with *should_log set when this line is the one to
 * log in its window (then `held` is how many were held back before it);
 * otherwise returns 0. */
int conn_guard_accept_failed(const char *line, int *should_log, unsigned long *held);

/* A request's headers have arrived. Returns 0 to go on; otherwise the
 * refusal is queued on con, *rc holds what the access handler returns, and
 * libmicrohttpd closes the connection after it. */
int conn_guard_request_begin(struct MHD_Connection *con, enum MHD_Result *rc);
/* The whole request (body included) has arrived: no deadline until it is
 * answered. */
void conn_guard_request_received(struct MHD_Connection *con);
/* The response is done: the next request's deadline starts. */
void conn_guard_request_done(struct MHD_Connection *con);
/* The client's address (FORWARDED_ADDR_MAX bytes): the peer, or the
 * forwarded client behind a trusted proxy; "" if unknown. */
void conn_guard_client(struct MHD_Connection *con, char *out);

/* A WebSocket's socket outlives libmicrohttpd's connection: ws.c closes the
 * connection right after the upgrade, which frees its memory, and goes on
 * with a duplicate of its socket. Detaching keeps that socket counted
 * against --max-connections and its client's share until
 * conn_guard_release, after the connection's record is gone. Returns the
 * slot (the caller's, for conn_guard_release), or NULL when con has no
 * record (nothing is counted then). */
struct conn_slot *conn_guard_detach(struct MHD_Connection *con);
/* The detached socket is closed: its place is free. NULL does nothing. */
void conn_guard_release(struct conn_slot *slot);

/* Queues a JSON-RPC error response with Connection: close on a request's
 * first call; retry_after_s > 0 adds Retry-After. Returns MHD's result. */
enum MHD_Result conn_guard_queue_refusal(struct MHD_Connection *con, unsigned status, int code,
                                         const char *message, int retry_after_s);

#endif
