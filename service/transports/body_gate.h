/* body_gate — the requests answered from their headers, before ulfius or
 * libmicrohttpd reads a body: a body over --max-body, a body whose length
 * is ambiguous, a query or path that ulfius would read other than it was
 * sent, and a WebSocket handshake over HTTP/1.0.
 *
 * ulfius 2.7.13 calls an endpoint only after the whole body has arrived
 * (and silently truncates past max_post_body_size), so a client declaring
 * 64 MiB would be read to the end before hearing 413. The request host
 * (request_host.h) asks the gate on a request's first call (headers
 * parsed, no body read yet) and answers a refusal at once with
 * MHD_queue_response; libmicrohttpd then skips the body and closes the
 * connection after the answer:
 *   400 for Content-Length values that differ, or Content-Length with
 *       Transfer-Encoding (RFC 9112 §6.3: the body could end in two
 *       places, and what follows the wrong end is a smuggled request);
 *   501 for a Transfer-Encoding libmicrohttpd cannot frame (anything but
 *       one field "chunked": it would read to the end of the connection);
 *   400 for a path or a query parameter that decodes to a NUL byte (cut
 *       there, "sessionId=<id>%00zz" would name <id>, and "/mcp/ws%00x"
 *       would be "/mcp/ws");
 *   400 for GET /mcp/ws over HTTP/1.0 (RFC 6455 4.1: libmicrohttpd would
 *       refuse the 101 and close without a word);
 *   413 for a Content-Length over the limit.
 * A malformed Content-Length never gets here: libmicrohttpd answers it
 * itself (NOTES.md). A body without a length (chunked) is counted as it
 * arrives; once past the limit, libmicrohttpd no longer accepts a response
 * (0.9.75 queues only before the body or after all of it), so the 413 goes
 * on the socket directly (linger.h) and libmicrohttpd drops the
 * connection.
 *
 * Every refusal is the JSON-RPC error (id null, -32000) the transports
 * send, counted in mcpd_refusals_total and written to the request log. The
 * socket is then shut for writing and drained for a moment (a lingering
 * close, on linger's thread, which the host asks for at completion), so
 * that the client reads the refusal instead of a reset caused by the body
 * bytes it was still sending. Needs plain TCP (the chunked refusal writes
 * to the socket). Thread-safe once configured. */
#ifndef MCPD_BODY_GATE_H
#define MCPD_BODY_GATE_H

#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

/* Sets the limit; call before starting the ulfius framework. */
void body_gate_configure(size_t max_body);

/* 1 when the raw request target's path holds %00 (the access handler gets
 * the path decoded, as a C string, so "/mcp/ws%00x" would be "/mcp/ws"
 * there): the request host looks at the target in the URI log callback,
 * which sees it raw. */
int body_gate_nul_in_path(const char *uri);

/* On a request's first call: 0 to serve it, or queues the refusal and
 * returns 1 with *rc for libmicrohttpd. nul_in_path: as above. */
int body_gate_headers(struct MHD_Connection *con, const char *method, const char *url,
                      const char *version, int nul_in_path, enum MHD_Result *rc);

/* Counts body bytes as they arrive (*received is the request's count so
 * far): 0 while under the limit; past it, writes the 413 on the socket and
 * returns 1, and the caller returns MHD_NO. */
int body_gate_body(struct MHD_Connection *con, uint64_t *received, size_t bytes);

#endif
