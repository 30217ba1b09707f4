/* call_life — how the core makes, cancels, answers and frees calls.
 *
 * call.h is what a handler sees; this is the other side, used by the core
 * only: creating the call for a routed request (it takes over the request's
 * stream), flagging cancellation, handing a client's answer to the call
 * waiting in call_request_client, and reference counting. */
#ifndef MCPD_CALL_LIFE_H
#define MCPD_CALL_LIFE_H

#include <jansson.h>

#include "session.h"

struct call;
struct session;
struct stream;

enum call_cancel { CALL_CANCEL_CLIENT = 1, CALL_CANCEL_SHUTDOWN, CALL_CANCEL_SESSION_END };

/* A call for `request` (a validated JSON-RPC request, new reference taken)
 * replying on `stream` (reference taken), in session `s` (reference taken),
 * tracked in the session under `key` until it ends, so it can be cancelled
 * (NULL key: not tracked, for a call that ends before anyone could cancel
 * it). NULL with the reason in *why (SESSION_TRACK_NOMEM, _DUP: the id is
 * already in flight, _ENDED, _BUSY: the session has its cap of requests in
 * flight). */
struct call *call_new(struct session *s, struct stream *stream, json_t *request, const char *key,
                      enum session_track_rc *why);
/* The call holds a reference on itself until it ends (call_reply or
 * call_fail); whoever runs it holds another while it does. */
void call_ref(struct call *c);
void call_unref(struct call *c);

void call_cancel(struct call *c, enum call_cancel why);
/* 1 if the call replies on stream st. */
int call_on_stream(const struct call *c, const struct stream *st);
/* The client's response (result or error message; borrowed) to one of the
 * server→client requests this call is waiting on, matched by its id. */
void call_deliver_answer(struct call *c, json_t *response);

#endif
