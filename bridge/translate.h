/* translate — a 2025-era client in front of a server that speaks only MCP
 * 2026-07-28 (the stateless revision).
 *
 * Such a client always opens with initialize, which that server does not
 * serve. Over Streamable HTTP the bridge first asks server/discover itself
 * (the client's capabilities and info in _meta), as a dual-era client
 * does: a server that lists 2026-07-28 and no 2025 revision never sees the
 * initialize; any other answer (a 2025 revision listed, a legacy refusal, a
 * failure) sends the client's initialize on as it is. The client's messages
 * wait for that. An initialize refused as a 2026-only server refuses it
 * (HTTP 404 with -32601, -32020 for the missing 2026-07-28 headers, or an
 * unsupported-version error listing only stateless revisions) is probed
 * the same way (again, if the first probe failed on the way). When the server lists 2026-07-28,
 * the bridge answers the initialize from server/discover
 * (translate_shape.h) and translates from then on:
 *   - each request goes to the server as 2026-07-28 (translate_calls.c),
 *     params._meta carrying the revision, the client's capabilities and
 *     info from its initialize, and the level it set with logging/setLevel
 *     (answered by the bridge, as ping is; notifications/initialized and
 *     the client's other notifications have nothing to reach);
 *   - a result that says resultType "input_required" becomes the
 *     server→client requests of its inputRequests (elicitation/create,
 *     sampling/createMessage, roots/list: those the client declared), sent
 *     to the client under bridge ids ("mcp-bridge-input-N"); their answers
 *     go back in a retry of the request under a new id, as
 *     params.inputResponses with the requestState echoed verbatim, for up
 *     to TRANSLATE_MAX_ROUNDS rounds; the final result goes back under the
 *     client's id, without its resultType;
 *   - notifications/cancelled for such a request closes its HTTP request
 *     (remote_cancel), or takes back the questions put to the client.
 * A client's own server/discover whose answer lists only stateless
 * revisions lets the bridge answer a later initialize at once. Against any
 * other server nothing changes: messages pass as they are.
 *
 * The remote's messages come through translate_sink (given to remote_open)
 * and go on to the client's sink.
 *
 * Ownership: the struct is the caller's (translate_new/_free); the remote
 * it sends on is borrowed and must outlive it. */
#ifndef MCP_BRIDGE_TRANSLATE_H
#define MCP_BRIDGE_TRANSLATE_H

#include "remote.h"

#include <jansson.h>

#define TRANSLATE_MAX_ROUNDS 16 /* input-required rounds for one request */

struct translate;

/* probe_first: ask server/discover before the client's initialize goes
 * out (Streamable HTTP; over the other transports the remote serves 2025
 * revisions). */
struct translate *translate_new(struct remote *rm, struct remote_sink client, int probe_first);
void translate_free(struct translate *t);

/* The sink to give remote_open: what the server sends passes through here. */
struct remote_sink translate_sink(struct translate *t);

/* A message from the client. Returns 1 when the bridge took it (answered,
 * translated or dropped), 0 when it goes to the remote as it is. */
int translate_from_client(struct translate *t, json_t *m);

/* The client's requests the bridge holds while the client answers the
 * server's questions (those at the remote count in remote_pending). */
int translate_pending(const struct translate *t);

/* The client will answer no more questions: the requests that wait for its
 * answers, and those that would ask later, fail with why. */
void translate_stdin_closed(struct translate *t, const char *why);

/* The bridge is stopping: the requests it holds fail with why. */
void translate_shutdown(struct translate *t, const char *why);

#endif
