/* backend — what answers the tools/, resources/, prompts/ and completion/ methods.
 *
 * The core owns the protocol (initialize, ping, logging/setLevel,
 * cancellation, sessions, streams) and hands every other request to exactly
 * one backend through this table. The built-in toolset is one backend; a
 * stdio upstream child is another. A backend never sees a transport: it gets
 * a struct call (call.h) and emits into it.
 *
 * Threading: handle() runs on a worker, a fiber on the event loop
 * (workers.h), where it may wait as long as it needs, unless may_block()
 * says it answers at once: then it runs on the caller's own thread or fiber
 * (core.h). Either way its waits must park (fcond, call_sleep), never block
 * the thread. The other hooks always run there,
 * and must not hold that thread: a wait goes through fcond (base/fcond.h),
 * which parks a fiber and lets its thread serve other connections. */
#ifndef MCPD_BACKEND_H
#define MCPD_BACKEND_H

#include <jansson.h>

struct call;

struct backend_ops {
    const char *name;

    /* Server capabilities to advertise in InitializeResult, as a new
     * reference the caller owns (e.g. {"tools":{}, "resources":{...}}). The
     * core adds "logging" itself. */
    json_t *(*capabilities)(void *self);

    /* Optional: InitializeResult.instructions, or NULL. Borrowed. */
    const char *(*instructions)(void *self);

    /* Optional: a session was initialized with the client's initialize
     * params (borrowed). Returns 0, or -1 with a message in *err (caller
     * frees) to refuse the session. It may set *result to the fields of the
     * InitializeResult the client should see (capabilities, serverInfo,
     * instructions: an upstream server's own), as a new reference the core
     * takes; the core keeps the negotiated protocolVersion and adds
     * logging. A session revived after a restart is not opened again: its
     * first call carries its init params (call_client_init_params). */
    int (*session_open)(void *self, const char *session_id, json_t *init_params, json_t **result,
                        char **err);

    /* Optional: the session ended (DELETE, expiry, shutdown). */
    void (*session_close)(void *self, const char *session_id);

    /* Serve one request. Must end the call with call_reply or call_fail
     * before returning or later from another thread; unknown methods end
     * with -32601. */
    void (*handle)(void *self, struct call *c);

    /* Optional: 0 when serving this request can neither block nor emit
     * anything before its reply, so the core may run handle() on the
     * caller's thread and save two thread hand-offs. NULL, or 1, means it
     * runs on a worker. params is borrowed and may be NULL. */
    int (*may_block)(void *self, const char *method, json_t *params);

    /* Optional: a client notification other than notifications/initialized
     * (e.g. notifications/cancelled, notifications/roots/list_changed).
     * `msg` is borrowed. */
    void (*notify)(void *self, const char *session_id, json_t *msg);

    /* Optional: the client capabilities serving this request needs (a
     * ClientCapabilities object, new reference), or NULL for none. For a
     * stateless request the core refuses it up front (HTTP 400, -32021)
     * when the request's _meta does not declare them all. */
    json_t *(*requires)(void *self, const char *method, json_t *params);

    /* Optional: for a request whose arguments travel in headers too
     * (2026-07-28 x-mcp-header), {"<header name>": "<argument>"} as a new
     * reference, or NULL. */
    json_t *(*header_params)(void *self, const char *method, json_t *params);

    /* 1 if the backend calls core_list_changed when its tool or prompt
     * lists change, and core_resource_updated when a resource changes:
     * 2026-07-28 clients are then told listChanged, and get the
     * notifications on subscriptions/listen (resourceSubscriptions too, if
     * it advertises resources.subscribe). (2025 sessions are never sent
     * list changes, so their capabilities say what the backend says.) */
    int tells_list_changes;

    /* Optional: the protocol extensions it serves to 2026-07-28 clients,
     * {"<extension id>": {settings}} (new reference), advertised in
     * server/discover's capabilities.extensions. */
    json_t *(*extensions)(void *self);

    /* Optional: whether this request may run as a task (2026-07-28 tasks
     * extension): 0 never, 1 when the client's request declares the
     * extension, 2 only as a task (a client without the extension is
     * refused with -32021). */
    int (*task_support)(void *self, const char *method, json_t *params);

    /* Optional: 1 when what serves a session lives in one process (an
     * upstream child of its own): with several processes on one store,
     * the session's requests and notifications are then handed to the
     * process that holds it (core/replica.h), which another takes over
     * once that one dies. NULL or 0: any process serves any request. */
    int (*session_bound)(void *self);

    void (*destroy)(void *self);
};

#endif
