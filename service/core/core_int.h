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
/* Creates a session (persisted) and opens it in the backend: the session
 * (owned), or NULL with *out filled. *fields: what the backend says of
 * itself for this session (a gateway's child), or NULL. */
struct session *core_open_session(const char *version, json_t *params,
                                  const struct session_origin *origin, json_t *id, json_t **fields,
                                  struct core_reply *out);
/* The client capabilities the backend needs for this request (new
 * reference, or NULL). */
json_t *core_requires(const char *method, json_t *params);
/* The Mcp-Param-* headers a request's arguments must come with (2026-07-28
 * x-mcp-header): {"<header name>": "<argument>"} (new reference), or NULL. */
json_t *core_header_params(const char *method, json_t *params);
/* backend_ops.task_support, 0 without it. */
int core_task_support(const char *method, json_t *params);
/* How long an idle session (and so a task) is kept, ms. */
int64_t core_session_idle_ms(void);
/* The backend's extensions for discover (new reference), or NULL. */
json_t *core_extensions(void);
/* The backend tells list changes (backend_ops.tells_list_changes). */
int core_tells_list_changes(void);
/* capabilities, serverInfo, instructions of mcpd's own backend (new). */
json_t *core_server_fields(void);
/* Everything but initialize, on an existing session (borrowed). */
void core_submit(struct session *s, json_t *msg, const struct jsonrpc_msg *m, const char *transport,
                 struct core_reply *out);
/* Appends a copy of one of a request's messages to the session's
 * standalone stream; its seq there, or -1. source_id: for the legacy relay,
 * the request's stream, whose first `copied` messages are then copied (the
 * same commit records it); NULL otherwise. */
int64_t core_relay_to_standalone(struct session *s, const char *msg, size_t len,
                                 const char *source_id, int64_t copied);
/* Asks the other processes to probe the reader of the session's GET
 * stream, if one of them holds it (a no-op with one process). */
void core_probe_elsewhere(struct session *s);
/* With several processes on one store: a tasks/get, tasks/update or
 * tasks/cancel for a task whose call runs in another process is handed to
 * that process (the call's pending requests and the call itself are
 * there). 1 with *out the stream its answer comes on, 0 to answer here. */
int core_task_elsewhere(const char *principal, json_t *msg, const struct jsonrpc_msg *m,
                        struct core_reply *out);
/* A refusal counted in /metrics (also for the entry's own refusals). */
void core_reject(struct core_reply *out, enum core_reason why, json_t *id, int code,
                 const char *message);

#endif
