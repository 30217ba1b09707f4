/* call — one client request while a handler serves it.
 *
 * The core creates a call for every JSON-RPC request it routes to a handler
 * (built-in or backend). The call owns the request's durable stream: each
 * function below that emits something (progress, log, a server→client
 * request, the final reply) appends one message to that stream, and the
 * append has been committed to the store before the function returns. The
 * transports only ever read the stream, so a handler never knows or cares
 * which transport, or whether any client at all, is listening.
 *
 * A handler that may wait (call_sleep, call_request_client) runs on a
 * worker fiber (workers.h); one that answers at once may run on the caller's thread
 * or fiber (backend_ops.may_block). Exactly one of call_reply / call_fail
 * must end the call, during handle() or later from another thread (the
 * call stays alive until it ends); later emits are ignored. A cancelled
 * call (notifications/cancelled) makes call_sleep and call_request_client
 * return early, and its reply is dropped as the spec asks. */
#ifndef MCPD_CALL_H
#define MCPD_CALL_H

#include <jansson.h>

struct call;

/* The request. Borrowed: valid for the life of the call. params is never
 * NULL (an empty object when the request had none). */
const char *call_method(const struct call *c);
json_t *call_params(const struct call *c);
json_t *call_id(const struct call *c);
const char *call_session_id(const struct call *c);

/* The client's capabilities from its initialize request (borrowed, may be an
 * empty object), e.g. to check for "elicitation" before asking. */
json_t *call_client_capabilities(const struct call *c);
/* 1 when the client declared `capability` ("sampling", "elicitation",
 * "roots") in its initialize: nothing may ask it for what it did not. */
int call_client_has(const struct call *c, const char *capability);
/* The client's whole initialize params (borrowed), e.g. to start an
 * upstream server for a session revived after a restart. */
json_t *call_client_init_params(const struct call *c);

/* 2026-07-28 input-required results (request_state.h): a requestState for
 * this call (caller frees; NULL on failure) carrying data (borrowed), sealed
 * for the call's principal and request (method, name, arguments, uri) and
 * the inputRequests `asked` (borrowed; its keys) it goes out with. Opening
 * one also claims it for this call, until the call ends: 0 with *data (what
 * was sealed) and *answers (the inputResponses to what it asked), both new
 * references; 1 with *data the result an earlier use of it with the same
 * answers ended with, to answer with again (call_reply); or -1 with *why. A
 * call opens at most one. */
char *call_state_seal(struct call *c, json_t *asked, json_t *data);
int call_state_open(struct call *c, const char *state, json_t **data, json_t **answers,
                    const char **why);

/* A backend that uses a call from another thread, or after it may have
 * ended, holds a reference for that long. */
void call_hold(struct call *c);
void call_release(struct call *c);

/* A call-shaped handle on a session's standalone stream, for messages tied
 * to no request (an upstream's list_changed, its sampling request while no
 * call is running): call_send, call_log and call_request_client work on
 * it; call_reply and call_fail do nothing. NULL if the session is gone.
 * Release it with call_release. */
struct call *call_channel(const char *session_id);

/* Appends a message the backend built itself (a notification relayed from
 * an upstream server), as is. Steals msg. Returns 0, or -1 if the call
 * already ended. */
int call_send(struct call *c, json_t *msg);

/* notifications/progress for this request's _meta.progressToken. A no-op
 * (returns 0) when the request carried no token. total < 0 means none;
 * message may be NULL. Returns 0, or -1 if the call already ended. */
int call_progress(struct call *c, double progress, double total, const char *message);

/* notifications/message at `level` (RFC 5424 name: "debug" … "emergency"),
 * dropped when below the session's logging/setLevel. logger may be NULL.
 * Steals `data`. */
int call_log(struct call *c, const char *level, const char *logger, json_t *data);

/* Sends a server→client request (e.g. "sampling/createMessage",
 * "elicitation/create") on this call's stream and waits for the client to
 * answer it. On success returns 0 and *result is a new reference to the
 * client's "result" object (caller owns). When the client answers with a
 * JSON-RPC error, returns 1 and *result is a new reference to that "error"
 * object. Returns -1 on timeout, cancellation or shutdown (*result NULL).
 * Steals `params`. */
int call_request_client(struct call *c, const char *method, json_t *params, int timeout_ms,
                        json_t **result);

/* Sleeps up to ms milliseconds. Returns 1 early if the call was cancelled
 * (or the server is shutting down), 0 otherwise. */
/* Several server→client requests at once (requests: {key: {method,
 * params}}, borrowed): each is sent with its own id, and the call waits
 * until every one is answered, or the timeout, or cancellation. Returns 0
 * with *answers {key: result} (new reference), or -1. A task's client
 * answers them one by one with tasks/update. */
int call_request_client_all(struct call *c, json_t *requests, int timeout_ms, json_t **answers);
int call_sleep(struct call *c, int ms);
int call_cancelled(const struct call *c);

/* SSE polling (SEP-1699): asks every transport currently reading this call's
 * stream to close its connection now, after telling the client to retry.
 * The stream itself goes on; the client resumes it with Last-Event-ID. */
void call_detach_readers(struct call *c);

/* End the call with a result (stolen) or a JSON-RPC error (data stolen, may
 * be NULL). Returns 0, or -1 if the call had already ended. */
int call_reply(struct call *c, json_t *result);
int call_fail(struct call *c, int code, const char *message, json_t *data);

#endif
