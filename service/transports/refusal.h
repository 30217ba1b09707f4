/* refusal — how a refusal looks over HTTP, for every endpoint that answers
 * one (the /mcp handlers in http.c, the WebSocket handshake in ws.c).
 *
 * The core says why it refuses (enum core_reason) with a JSON-RPC error;
 * this maps the reason to the status code mcpd documents, and renders the
 * JSON-RPC error body that goes with a status the transport picks itself
 * (403, 406, 415, ...). One table, so the status of a refusal cannot differ
 * between transports. */
#ifndef MCPD_REFUSAL_H
#define MCPD_REFUSAL_H

#include "core.h"

/* Retry-After on a 503 for a server-wide cap, in seconds: a place frees
 * when a session is deleted or idles out, no sooner than a client could
 * usefully come back. */
#define REFUSAL_RETRY_AFTER_S "60"

unsigned refusal_status(enum core_reason why);
/* The JSON-RPC error object (id null) as compact JSON; caller frees. NULL
 * when out of memory. */
char *refusal_body(int code, const char *message);
/* The error code carried by a core refusal's message. */
int refusal_code(const json_t *error);
/* Its message (borrowed from error; "" if none). */
const char *refusal_message(const json_t *error);

#endif
