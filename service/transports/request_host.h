/* request_host — where a request's code meets libmicrohttpd's pool of
 * epoll threads, which must never block.
 *
 * libmicrohttpd calls the host for every request (mhd_interpose.h routes
 * ulfius's daemon here), from its first line to its completion:
 *   - the first call (headers parsed, no body yet): the connection's guard
 *     (conn_guard.h: caps, slow clients), then the gate (body_gate.h), which
 *     may answer at once; GET /mcp/ws goes to the WebSocket handshake
 *     (ws.h), everything else to ulfius;
 *   - body calls: counted by the gate, then ulfius's;
 *   - the final call: ulfius's handler (the endpoints of http.c and
 *     legacy_sse.c), or the handshake, runs on a fiber (fiber.h), and so
 *     does a content reader's fill step (request_host_fill). When the code
 *     waits, the host suspends the connection; the wake-up resumes it, and
 *     libmicrohttpd calls the host (or the reader) again, which switches
 *     back into the fiber;
 *   - the completion: a fiber still waiting is cancelled and finished, a
 *     refused request's socket gets its lingering close, and the request
 *     log's line is written (request_log.h).
 * A request's state is its own (not thread-local), since one pool thread
 * interleaves many requests; the code of a request reaches it through
 * request_host_current while it runs.
 *
 * Field values: libmicrohttpd drops the whitespace before a value but
 * keeps the whitespace after it, which RFC 9110 5.5 says is not part of it
 * ("Mcp-Session-Id: <id> " named no session). The transports read header
 * fields through request_host_header, which trims it, so that
 * libmicrohttpd's read buffer and ulfius's maps stay as their libraries
 * made them. Values are passed on as sent, UTF-8 or not (ulfius's maps
 * drop a value that is not; the transports' checks refuse it, and the log
 * escapes it).
 *
 * Needs MHD_ALLOW_SUSPEND_RESUME. */
#ifndef MCPD_REQUEST_HOST_H
#define MCPD_REQUEST_HOST_H

#include <microhttpd.h>

struct host_req;

/* Routes the next daemon through the host; call before starting ulfius. */
void request_host_install(void);
/* 1 once ulfius's daemon was started through the host: the caller must
 * refuse to serve without it (the body limit would not hold). */
int request_host_installed(void);
/* libmicrohttpd's URI log callback, in place of ulfius's (which it calls):
 * it makes the request's state, and lets the gate see the raw target. */
void *request_host_uri_logger(void *cls, const char *uri);
/* Install as MHD_OPTION_NOTIFY_COMPLETED in place of ulfius's
 * mhd_request_completed, which it calls. */
void request_host_completed(void *cls, struct MHD_Connection *con, void **con_cls,
                            enum MHD_RequestTerminationCode toe);

/* The request whose code runs on this thread: an endpoint passes it to the
 * content reader it makes, for request_host_fill. NULL outside one. */
struct host_req *request_host_current(void);
/* The request's client (conn_guard_client: FORWARDED_ADDR_MAX bytes into
 * out; "" when unknown or g is NULL). */
void request_host_client(const struct host_req *g, char *out);
/* The value of the request's header field `name` (case-insensitive),
 * trailing whitespace cut; a field on several lines is one list, its lines
 * joined with ", " (RFC 9110 5.3, as ulfius's maps hold it), so a
 * singleton field sent twice reads as one invalid value. NULL when absent
 * or g is NULL. Borrowed: lives as long as the request. Runs on the
 * request's thread or fiber only (request_host_current). */
const char *request_host_header(struct host_req *g, const char *name);
/* For a content reader (libmicrohttpd calls it on a pool thread): runs
 * fill(ud), which may wait, on the request's fiber. Returns 1 with fill's
 * result in *verdict (-1 when no fiber could be made), or 0 when fill
 * waits: the connection is then suspended, and the reader returns 0;
 * libmicrohttpd calls the reader again once it is resumed, and this call
 * then goes on with the same fill. g NULL (no host): fill runs here. */
int request_host_fill(struct host_req *g, int (*fill)(void *ud), void *ud, int *verdict);
/* Before stopping the daemon: every wait of every request ends at once
 * (fiber_cancel), now and for requests that start later, so that no
 * connection is still suspended when libmicrohttpd stops. */
void request_host_stop(void);

#endif
