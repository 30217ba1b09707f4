/* core_int — what core.c offers the rest of the core and nothing else.
 *
 * The transports enter through core_receive (receive.c); these are the two
 * steps it dispatches to, kept out of core.h so that no transport can
 * bypass the entry's checks (session lookup, ownership, batch rules). */
#ifndef MCPD_CORE_INT_H
#define MCPD_CORE_INT_H

#include "core.h"

struct session_origin;

/* Makes a session for an initialize request; out->session is the new
 * session (owned) when it succeeds. `msg` is borrowed. */
void core_initialize(json_t *msg, const struct jsonrpc_msg *m, const struct session_origin *origin,
                     struct core_reply *out);
/* Everything but initialize, on an existing session (borrowed). */
void core_submit(struct session *s, json_t *msg, const struct jsonrpc_msg *m, const char *transport,
                 struct core_reply *out);
/* Appends a copy of one of a request's messages to the session's
 * standalone stream; its seq there, or -1. */
int64_t core_relay_to_standalone(struct session *s, const char *msg, size_t len);
/* A refusal counted in /metrics (also for the entry's own refusals). */
void core_reject(struct core_reply *out, enum core_reason why, json_t *id, int code,
                 const char *message);

#endif
