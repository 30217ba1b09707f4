/* first_message — the first message on a raw connection (TCP, UDP), one
 * home for what both transports do with it.
 *
 * It is mcpd/connect (greeting.h): the token is checked, the connection
 * opened (push_open, which holds the token for the connection's life) and, with a sessionId,
 * the session resumed; the answer (or the refusal) goes out under the
 * connection's write mutex before anything of a resumed stream. Without
 * auth any other first message opens the connection too and is served as
 * is; with auth it is refused. Each outcome is logged as
 * "<transport>_connected", "_connect_refused", "_resume_refused" or
 * "_unauthorized", naming the peer as "<noun> <name>".
 *
 * The transport keeps its socket and framing: it hands in how to send a
 * message (send_locked, called with *wmu held; it takes the message), what
 * it ends the connection on (io.session_ended, io.token_ended), and where
 * the connection's push and served flag live. Everything in
 * struct first_message is borrowed for the call. */
#ifndef MCPD_FIRST_MESSAGE_H
#define MCPD_FIRST_MESSAGE_H

#include "auth.h"
#include "fcond.h"
#include "push.h"

#include <jansson.h>
#include <stddef.h>

struct first_message {
    const char *noun; /* "client", "peer": for the log */
    const char *name; /* the peer's address */
    /* The client's address, for its share of the introspection budget
     * (auth_request.client); NULL: only everyone's (UDP gives none). */
    const char *client;
    int auth_required;
    /* Log the principal on connect (behind a TLS proxy every client's
     * address is the proxy's). */
    int log_principal;
    struct push_io io; /* for push_open; its grant is filled here */
    struct fmutex *wmu;
    void (*send_locked)(void *io, json_t *msg);
    /* Set once the connection is opened: */
    struct push **push;
    int *served;
};

/* Serves the first message data[0..len). Returns 1 when the connection is
 * to end, else 0. */
int first_message_serve(struct first_message *fm, const char *data, size_t len);

#endif
