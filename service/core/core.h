/* core — the MCP protocol engine that every transport feeds.
 *
 * A transport parses a frame into a JSON-RPC message and hands it to the
 * core through one entry, core_receive: an initialize request makes a
 * session, everything else goes to an existing one. The core answers
 * the protocol methods itself (ping, logging/setLevel, cancellation, the
 * client's answers to server→client requests) and routes every other request
 * to the backend: on the caller's own thread or fiber when the backend says
 * it answers at once (backend_ops.may_block), else on a worker fiber of the
 * event loop (workers.h). The caller is a request's fiber on a libmicrohttpd pool
 * thread (HTTP), a fiber on an mcpd-loop thread (WebSocket, raw TCP, UDP)
 * or mcpd --stdio's main thread; a wait there parks the fiber.
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
#include "stream.h"

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
    int64_t replica_lease_ms;           /* several processes on one store: replica.h */
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
/* Whether the server serves, and if not why: CORE_SERVING (accepting, store
 * writable, migrations applied); CORE_STORE_AWAY (the database cannot be
 * reached: requests are answered 503 at once until it is back); or
 * CORE_STOPPING (shutting down, or not started). */
enum core_state { CORE_SERVING, CORE_STORE_AWAY, CORE_STOPPING };
enum core_state core_state(void);
/* The /metrics page (Prometheus text); caller frees. */
char *core_metrics(void);

enum core_kind { CORE_ACCEPTED, CORE_STREAM, CORE_REJECTED, CORE_ANSWERED };
/* AT_CAPACITY: a server-wide limit (HTTP 503 with Retry-After); TOO_LARGE:
 * the message is over a size limit (HTTP 413). */
enum core_reason {
    CORE_BAD_REQUEST = 1,
    CORE_UNAVAILABLE,
    CORE_NOT_FOUND,
    CORE_AT_CAPACITY,
    CORE_TOO_LARGE,
    CORE_TOO_MANY, /* a per-session limit (HTTP 429) */
    CORE_CONFLICT  /* the session's standalone stream is already followed (HTTP 409) */
};

struct core_reply {
    enum core_kind kind;
    struct stream *stream;    /* CORE_STREAM: reference owned by the caller */
    json_t *ack;              /* CORE_STREAM, opted in ("stream": true): send this at
                                 once; the stream's messages go out as chunks */
    int single;               /* CORE_STREAM: the stream carries one message (a poll
                                 result): answer with it whole, never as SSE */
    struct session *session;  /* the session it belongs to (for initialize the
                                 new one), owned; NULL before initialize */
    const char *session_made; /* the id of the session this message made (an
                                 initialize), for the client (HTTP's
                                 Mcp-Session-Id); borrowed from session; else
                                 NULL */
    enum core_reason reason;  /* CORE_REJECTED */
    json_t *error;            /* CORE_REJECTED: the error message, owned;
                                 CORE_ANSWERED: the answer to send as is */
    int notification;         /* the message was a notification: a transport
                                 without status codes sends no error for it */
    int ephemeral;            /* session is the request's own (stateless): end
                                 it with core_end_session once the reply is
                                 written, or the client went away (which
                                 cancels the request) */
};
void core_reply_clear(struct core_reply *r);

/* ---- the one way in ----
 *
 * Every transport describes its client with a core_caller and hands each
 * parsed message, or a JSON array (a batch), to core_receive.
 * The entry classifies the message, finds the session the client names
 * (404 for an unknown one or another principal's), routes initialize to a
 * new session and everything else to the session's handler, and applies the
 * rules that hold on every transport: no initialize on a session, no
 * batches outside 2025-03-26, nothing but ping (and 2026-07-28 requests)
 * before initialize on a connection. The transport owns only its framing
 * and its socket. */

struct core_caller {
    const char *principal;  /* the token's name; NULL or "": no authentication */
    const char *transport;  /* as clients see it: "http", "ws", "stdio" */
    const char *session_id; /* the session the client names, or NULL */
    /* A connection that carries one session (WebSocket, stdio): before
     * initialize a ping is answered and other requests are told to
     * initialize first, except that a 2026-07-28 request (server/discover,
     * or a revision or capabilities in params._meta) is served statelessly,
     * as `stateless` below, with a reply of kind CORE_STREAM marked
     * ephemeral for the connection to follow and end; once the connection
     * has a session, every message is served in it, whatever its _meta.
     * Otherwise a message without a session is refused with
     * `session_required` (400). */
    int connection;
    const char *session_required;
    /* The id an initialize is to give its session, when the transport
     * handed it out before initialize (the legacy /sse endpoint event);
     * NULL: a fresh one. */
    const char *new_session_id;
    /* The request speaks a stateless revision (2026-07-28: the transport
     * saw it in MCP-Protocol-Version or _meta): no session; the core checks
     * params._meta and gives the request a session of its own that lives as
     * long as its reply (core_reply.ephemeral). */
    int stateless;
    /* Takes each reply of a batch (and clears it); NULL: batches are
     * refused, unless relayed. */
    void (*each)(void *each_ud, struct core_reply *r);
    void *each_ud;
    /* The client reads every reply on its session's standalone stream (the
     * legacy /sse): core_receive hands the reply there (core_relay), and a
     * batch's replies one by one, and answers CORE_ACCEPTED; a refusal of
     * the whole message stays CORE_REJECTED for the transport to answer
     * (CORE_UNAVAILABLE when the server is stopping). */
    int relayed;
    /* A relayed caller's initialize may name a session id (legacy /sse
     * hands the id out before initialize, in its endpoint event): a
     * session of that id refuses it, and an id that is no session is not
     * found (404), unless adopt is set and other processes share the
     * store: the /sse connection that handed the id out may be another
     * process's, and the session is created with that id, as
     * new_session_id. */
    int adopt;
    /* The session id was handed out here and not initialized yet (a
     * legacy /sse reservation): a session of it (made by another process)
     * is served, and no session is refused with session_required (400:
     * initialize first), not as not found. With no other process on the
     * store the store is not asked. */
    int reserved;
    /* The request's headers, for a transport that has them (HTTP): look a
     * header up by name (NULL: absent). A stateless request's Mcp-* and
     * Mcp-Param-* headers must then say what its body does (mcp_headers.h:
     * proxies route on them), else it is refused (CORE_BAD_REQUEST,
     * -32020). NULL: the transport carries no headers. */
    const char *(*header)(void *header_ud, const char *name);
    void *header_ud;
};

/* One message or a batch (borrowed). Fills *out; the caller clears it.
 * A batch (2025-03-26 only) is refused as a whole (empty, no session, a
 * revision without batches, a caller without `each`) with *out
 * CORE_REJECTED; otherwise each element's reply goes to c->each, in order,
 * and *out is CORE_ACCEPTED. */
void core_receive(const struct core_caller *c, json_t *msg, struct core_reply *out);

/* The session the caller names, for requests without a message (GET,
 * DELETE, a resumed connection): a new reference, or NULL with *refused
 * filled (400 without an id, 404 unknown, 503 while the store is away).
 * The core's own: transports follow (follow.h) or end (core_delete) a
 * session, and never hold one. */
struct session *core_session_open(const struct core_caller *c, struct core_reply *refused);
/* The client ends the session it names (HTTP DELETE): logged, and ended
 * as core_end_session does. 0, or -1 with *refused filled as
 * core_session_open does. */
int core_delete(const struct core_caller *c, struct core_reply *refused);

/* Resumes a stream of the caller's session from a client's cursor
 * (Last-Event-ID and its equivalents): 0 with out filled (references
 * owned), or -1 with *refused filled. Without c->session_id the session is
 * the one the cursor's stream belongs to (a client that reconnects with
 * nothing but its last event id). A cursor on the session's standalone
 * stream sets out->standalone; its stream then continues from there.
 * An HTTP transport follows what a cursor names with follow_open
 * (follow.h), built on this; push.c resolves the cursor first and claims
 * the standalone stream after (it follows a request's stream with
 * follow_resumed). */
struct core_resume {
    struct session *session;
    struct stream *stream;
    int64_t next;
    int standalone;
};
int core_resume(const struct core_caller *c, const char *cursor, struct core_resume *out,
                struct core_reply *refused);
void core_resume_clear(struct core_resume *r);

/* ---- the standalone stream ----
 *
 * A session has one standalone stream (server requests and notifications
 * outside any request) and one reader of it at a time, which advances the
 * session's delivery cursor as it writes. A transport follows it with
 * follow_open (follow.h), which is built on these. */

/* Takes the reader slot: 0 with the stream (owned) and where to start, or
 * -1 with *refused filled (CORE_CONFLICT when it is taken). A holder may be
 * a client that vanished without a word (seen only when a write fails), so
 * with probe_ms > 0 the holder is probed and given that long to fail. */
int core_standalone_claim(struct session *s, int64_t probe_ms, struct stream **st, int64_t *from,
                          struct core_reply *refused);
/* The reader lets go of the slot, having written everything before next
 * (-1: unknown). */
void core_standalone_release(struct session *s, int64_t next);

/* For a transport whose client reads every server message on the
 * session's standalone stream (the legacy /sse): the reply goes there, in
 * order, as it is committed (relay.h): a stream followed, an immediate
 * message (an error, a poll handle) at once. Takes what r holds and clears
 * it. 0, or -1 when it could not (the server is stopping). */
int core_relay(struct core_reply *r);
/* The client can no longer answer anything (stdio at the end of its
 * input): every request the server sent it and still waits on is answered
 * with an error now, so the calls behind them finish instead of waiting. */
void core_client_gone(struct session *s);

/* For backends: a list the clients see changed ("tools", "prompts",
 * "resources"); subscribed stateless clients are told. */
void core_list_changed(const char *what);
/* For backends: the resource at uri changed; the stateless clients whose
 * subscriptions/listen follows it are told (notifications/resources/
 * updated). 2025 sessions that used resources/subscribe are the backend's
 * to tell. */
void core_resource_updated(const char *uri);

/* Ends a session (DELETE or expiry): cancels its requests, tells the
 * backend, forgets it. A session already ended is left as it is. A
 * stateless request's own session ends with its follow (follow_end). */
void core_end_session(struct session *s);

#endif
