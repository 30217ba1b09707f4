/* greeting — mcpd/connect, the first message of a raw connection (the TCP
 * transport; built to serve a datagram transport the same way): it
 * authenticates the connection and names the session and stream to resume.
 *
 *   {"jsonrpc":"2.0","id":…,"method":"mcpd/connect",
 *    "params":{"token":"…","sessionId":"…","lastEventId":"…"}}
 *
 * Every param is optional and a string; lastEventId needs sessionId. The
 * answer is {"transport":T,"sessionId":S|null}. A refusal is a JSON-RPC
 * error whose data is {"transport":T,"reason":…}: "unauthorized" (-32001;
 * the connection is not served), "bad connect" (-32602). The transport
 * resumes (push_io.resume_session) and sends; this module only parses, checks the
 * token (auth.h) and builds the messages, so it has no state and no I/O.
 *
 * Ownership: struct greeting borrows from the message it was parsed from;
 * every json_t returned is a new reference, the caller's. Thread-safe. */
#ifndef MCPD_GREETING_H
#define MCPD_GREETING_H

#include "auth.h"

#include <jansson.h>

#define GREETING_METHOD "mcpd/connect"

struct greeting {
    json_t *id;                                     /* the request's id */
    const char *token, *session_id, *last_event_id; /* NULL when absent */
};

/* 1 if msg is a JSON-RPC message with method mcpd/connect. */
int greeting_is(const json_t *msg);

/* Parses the greeting msg and checks its token. Returns 0 with *g and
 * *grant filled (grant's principal "" when auth is off); or -1 with
 * *refusal, the error to send (with the greeting's id), and *fatal set
 * when the connection is not to be served on (a refused token). A bad
 * greeting is fatal too where the transport requires one (with auth: its
 * own setting, so that this module needs nothing of the core's). client:
 * the peer's address when it is known to be its own (auth_request.client:
 * its share of the introspection budget), or NULL. */
int greeting_accept(json_t *msg, const char *transport, const char *client, struct greeting *g,
                    struct auth_grant *grant, json_t **refusal, int *fatal);

/* The answer to an accepted greeting. */
json_t *greeting_answer(json_t *id, const char *transport, const char *session_id);

/* A JSON-RPC error (id may be NULL: null) with data {"transport":T} and,
 * when reason is not NULL, "reason". */
json_t *greeting_error(json_t *id, int code, const char *message, const char *transport,
                       const char *reason);

#endif
