/* body_gate — answers a request from its headers, before ulfius or
 * libmicrohttpd reads its body: a body over --max-body, a body whose length
 * is ambiguous, and a query that ulfius would read other than it was sent.
 *
 * ulfius 2.7.13 calls an endpoint only after the whole body has arrived
 * (and silently truncates past max_post_body_size), so a client declaring
 * 64 MiB would be read to the end before hearing 413. ulfius hands its own
 * access handler to libmicrohttpd and offers no hook between the headers
 * and the body, so this module puts one in front of it:
 *
 *   - It defines MHD_start_daemon. The executable's definition takes
 *     precedence over libmicrohttpd's for the call inside
 *     ulfius_start_framework_with_mhd_options (ELF symbol interposition),
 *     so the gate sees ulfius's access handler, starts the daemon through
 *     MHD_start_daemon_va with body_gate's handler instead, and passes
 *     every call on to ulfius's, except a refused request's.
 *   - On a request's first call (headers parsed, no body read yet) it
 *     answers at once with MHD_queue_response, and libmicrohttpd then skips
 *     the body and closes the connection after the answer:
 *       400 for Content-Length values that differ, or Content-Length with
 *           Transfer-Encoding (RFC 9112 §6.3: the body could end in two
 *           places, and what follows the wrong end is a smuggled request);
 *       501 for a Transfer-Encoding libmicrohttpd cannot frame (anything
 *           but one field "chunked": it would read to the end of the
 *           connection);
 *       400 for a path or a query parameter that decodes to a NUL byte
 *           (cut there, "sessionId=<id>%00zz" would name <id>, and
 *           "/mcp/ws%00x" would be "/mcp/ws");
 *       413 for a Content-Length over the limit.
 *     A malformed Content-Length never gets here: libmicrohttpd answers it
 *     itself (NOTES.md). The same walk over the fields cuts the trailing
 *     whitespace off every other field's value, which libmicrohttpd keeps
 *     (RFC 9110 5.5), before ulfius copies them.
 *   - A body without a length (chunked) is counted as it arrives; once past
 *     the limit, libmicrohttpd no longer accepts a response (0.9.75 queues
 *     only before the body or after all of it), so the 413 goes on the
 *     socket directly (linger.h) and libmicrohttpd drops the connection.
 *
 * Every refusal is the JSON-RPC error (id null, -32000) the transports send,
 * counted in mcpd_refusals_total and written to the request log. The socket
 * is then shut for writing and drained for a moment (a lingering close, on
 * linger's thread), so that the client reads the refusal instead of a
 * reset caused by the body bytes it was still sending. See NOTES.md.
 *
 * The gate is also where a request's code meets libmicrohttpd's pool of
 * epoll threads, which must never block: it runs ulfius's handler for the
 * request's final call, and the fill step of a content reader that waits
 * (body_gate_fill), on a fiber (fiber.h). When the code waits, the gate
 * suspends the connection; the wake-up resumes it, and libmicrohttpd calls
 * the gate (or the reader) again, which switches back into the fiber. A
 * request's state is its own (not thread-local), since one pool thread
 * interleaves many requests.
 *
 * Needs MHD_ALLOW_SUSPEND_RESUME and plain TCP (the chunked refusal writes
 * to the socket). */
#ifndef MCPD_BODY_GATE_H
#define MCPD_BODY_GATE_H

#include <stddef.h>

#include <microhttpd.h>

struct gate_req;

/* Sets the limit; call before starting the ulfius framework. */
void body_gate_configure(size_t max_body);
/* 1 once ulfius's daemon was started through the gate: the caller must
 * refuse to serve without it (the limit would not hold). */
int body_gate_installed(void);
/* libmicrohttpd's URI log callback, in place of ulfius's (which it calls):
 * it sees the raw request target. The access handler gets the path
 * decoded, as a C string, so "/mcp/ws%00x" would be "/mcp/ws" there; a
 * path with %00 is refused (400) before anything else reads it. */
void *body_gate_uri_logger(void *cls, const char *uri);
/* Install as MHD_OPTION_NOTIFY_COMPLETED in place of ulfius's
 * mhd_request_completed, which it calls. */
void body_gate_request_completed(void *cls, struct MHD_Connection *con, void **con_cls,
                                 enum MHD_RequestTerminationCode toe);

/* The request whose handler runs on this thread: an endpoint passes it to
 * the content reader it makes, for body_gate_fill. NULL outside one. */
struct gate_req *body_gate_request(void);
/* The request's client (conn_guard_client: FORWARDED_ADDR_MAX bytes into
 * out; "" when unknown or g is NULL). */
void body_gate_client(const struct gate_req *g, char *out);
/* For a content reader (libmicrohttpd calls it on a pool thread): runs
 * fill(ud), which may wait, on the request's fiber. Returns 1 with fill's
 * result in *verdict (-1 when no fiber could be made), or 0 when fill
 * waits: the connection is then suspended, and the reader returns 0;
 * libmicrohttpd calls the reader again once it is resumed, and this call
 * then goes on with the same fill. g NULL (no gate): fill runs here. */
int body_gate_fill(struct gate_req *g, int (*fill)(void *ud), void *ud, int *verdict);
/* Before stopping the daemon: every wait of every request ends at once
 * (fiber_cancel), now and for requests that start later, so that no
 * connection is still suspended when libmicrohttpd stops. */
void body_gate_stop(void);

#endif
