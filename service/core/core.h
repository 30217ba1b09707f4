/* core — the MCP protocol engine that every transport feeds.
 *
 * A transport parses a frame into a JSON-RPC message and hands it to the
 * core: core_initialize for an initialize request (which makes a session),
 * core_submit for everything else on an existing session. The core answers
 * the protocol methods itself (ping, logging/setLevel, cancellation, the
 * client's answers to server→client requests) and routes every other request
 * to the backend on a worker thread.
 *
 * The outcome is transport-neutral: ACCEPTED (a notification or response;
 * nothing to send), STREAM (a request; the reply will be appended to this
 * durable stream, which the transport follows), or REJECTED (with a JSON-RPC
 * error and a reason the transport maps to its own status code).
 *
 * core_start also repairs what a previous process left: every request stream
 * still active in the store gets a terminal "interrupted by server restart"
 * error, so no client waits forever on a request that died with the process.
 * The reaper expires idle sessions and ended streams. */
#ifndef MCPD_CORE_H
#define MCPD_CORE_H

#include <jansson.h>
#include <stdint.h>

#include "backend.h"
#include "jsonrpc.h"

struct store;
struct session;
struct stream;

struct core_config {
    int64_t session_idle_ms;
    int64_t stream_retention_ms;
    int64_t session_max_bytes;
    int64_t max_sessions;    /* live sessions at most; 0: no cap */
    int64_t max_init_params; /* bytes of stored initialize params; 0: no cap */
    int64_t log_retention_ms;
    int64_t log_max_rows;               /* 0: no cap */
    int64_t max_inflight;               /* requests in flight per session; 0: no cap */
    int64_t max_sessions_per_principal; /* 0: no cap */
    int max_workers;
    const char *server_name;
    const char *server_version;
};

int core_start(const struct core_config *cfg, struct store *st, const struct backend_ops *ops,
               void *backend, char **err);
/* Graceful stop: refuse new work, ask running handlers to finish, wait up to
 * grace_ms, then release every transport reader. */
void core_stop(int64_t grace_ms);
/* Frees the registries (after transports have stopped). */
void core_cleanup(void);
/* Ready to serve: accepting, store writable, migrations applied. */
int core_ready(void);
/* The /metrics page (Prometheus text); caller frees. */
char *core_metrics(void);

enum core_kind { CORE_ACCEPTED, CORE_STREAM, CORE_REJECTED };
/* AT_CAPACITY: a server-wide limit (HTTP 503 with Retry-After); TOO_LARGE:
 * the message is over a size limit (HTTP 413). */
enum core_reason {
    CORE_BAD_REQUEST = 1,
    CORE_UNAVAILABLE,
    CORE_NOT_FOUND,
    CORE_AT_CAPACITY,
    CORE_TOO_LARGE,
    CORE_TOO_MANY /* a per-session limit (HTTP 429) */
};

struct core_reply {
    enum core_kind kind;
    struct stream *stream;   /* CORE_STREAM: reference owned by the caller */
    json_t *ack;             /* CORE_STREAM, opted in ("stream": true): send this at
                                once; the stream's messages go out as chunks */
    int single;              /* CORE_STREAM: the stream carries one message (a poll
                                result): answer with it whole, never as SSE */
    struct session *session; /* core_initialize: the new session, owned */
    enum core_reason reason; /* CORE_REJECTED */
    json_t *error;           /* CORE_REJECTED: the error message, owned */
};
void core_reply_clear(struct core_reply *r);

/* `msg` is the whole message object (borrowed), `m` its classification,
 * `transport` the transport's name as clients see it ("http", "ws",
 * "stdio"). */
struct session_origin;
/* origin: who asks (principal, transport), recorded with the session. */
void core_initialize(json_t *msg, const struct jsonrpc_msg *m, const struct session_origin *origin,
                     struct core_reply *out);
void core_submit(struct session *s, json_t *msg, const struct jsonrpc_msg *m, const char *transport,
                 struct core_reply *out);
/* For a transport that can carry only a request's response (JSON replies):
 * appends a copy of one of the request's other messages to the session's
 * standalone stream, where the client's GET stream picks it up. Returns
 * its seq on that stream, or -1. */
int64_t core_relay_to_standalone(struct session *s, const char *msg, size_t len);

/* Ends a session (DELETE or expiry): cancels its requests, tells the
 * backend, forgets it. */
void core_end_session(struct session *s);

#endif
