/* http_remote — the server's end of the bridge over MCP Streamable HTTP,
 * driven by libcurl's multi interface in the caller's single-threaded poll
 * loop.
 *
 * Every message from the client is POSTed at once, so any number of
 * requests are in flight together. A reply is JSON or an SSE stream; SSE is
 * parsed as it arrives, so progress notifications and server→client
 * requests (sampling, elicitation, roots) reach the client while the
 * request runs, and the client's answers to them are POSTed back. After
 * notifications/initialized, a GET stream carries what the server sends
 * outside any request (405 is fine: the server has none).
 *
 * Mcp-Session-Id from the initialize reply goes on every later request,
 * with MCP-Protocol-Version once negotiated. The bridge keeps its promise
 * that every request gets exactly one reply:
 *   - a response stream that drops before the response is resumed by GET
 *     with Last-Event-ID, with capped exponential backoff and jitter, until
 *     response_timeout_ms after the drop;
 *   - a 404 for the session re-initializes (session.h) and sends the
 *     request once more;
 *   - anything else (refused, DNS, TLS, timeout, 5xx, garbage) answers the
 *     request with a JSON-RPC error saying what to check (remote_error.h).
 *
 * Replies, and whatever the server sends, go to sink.emit, one JSON-RPC
 * message (compact JSON, no line breaks) at a time.
 *
 * Ownership: the caller owns the struct (http_remote_new/_free); emitted
 * text is borrowed for the duration of the call. */
#ifndef MCP_BRIDGE_HTTP_REMOTE_H
#define MCP_BRIDGE_HTTP_REMOTE_H

#include "options.h"
#include "remote.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdint.h>

struct http_remote;

struct http_remote *http_remote_new(const struct bridge_options *o, struct remote_sink sink);
void http_remote_free(struct http_remote *r);

/* The multi handle, for curl_multi_poll in the caller's loop. */
CURLM *http_remote_multi(struct http_remote *r);

/* One message from the client: the text as read (body) and parsed (m). */
void http_remote_send(struct http_remote *r, const char *body, size_t len, json_t *m);

/* The client gave up on the request with id: no reply, and the transfer
 * serving it is closed. */
void http_remote_cancel(struct http_remote *r, const json_t *id);

/* Drives transfers and timers after the loop woke up; call it on every
 * iteration. */
void http_remote_run(struct http_remote *r);

/* How long the loop may sleep before http_remote_run has work (ms). */
long http_remote_timeout_ms(struct http_remote *r);

/* Client requests not answered yet. */
int http_remote_pending(struct http_remote *r);

/* Answers every pending request with an error saying why (the bridge is
 * stopping), stops every transfer, and ends the session with DELETE
 * (bounded by a short timeout). */
void http_remote_shutdown(struct http_remote *r, const char *why);

#endif
