/* token_end — an HTTP response that lasts ends when its token does.
 *
 * An event stream, a long-poll or a JSON reply waiting for its call lasts
 * long after the check that admitted its request. Such a response holds its
 * token (auth_hold) with a token_end for as long as it lasts. When the
 * token is revoked or expires, auth calls back on kill_watch's thread: the
 * callback records why and wakes the response's wait, which is on a fiber
 * and must not be touched from there: the stream it reads gets a probe
 * (stream_probe_readers: its stream_read returns at once), and a wait of
 * its own is woken through the transport's `wake` (legacy /sse's wait for
 * its initialize).
 *
 * The response calls token_end_check before each wait and after it, naming
 * the stream it is about to read; once it returns a reason, the response
 * ends: an event stream with a final comment (": token revoked",
 * ": token expired"), a waiting request with 401. The wake and the check
 * cannot miss each other: each side writes its own word, then reads the
 * other's.
 *
 * The transport owns the struct (zeroed: no token held) and calls
 * token_end_stop before it frees it or lets go of the stream it named. */
#ifndef MCPD_TOKEN_END_H
#define MCPD_TOKEN_END_H

#include "auth.h"

#include <stdatomic.h>

struct stream;

struct token_end {
    struct auth_hold hold;
    _Atomic(const char *) why;      /* static text, once the token ended */
    struct stream *_Atomic reading; /* borrowed: the stream waited on */
    void (*wake)(void);             /* may be NULL */
};

/* Holds the grant's token (nothing when auth is off). */
void token_end_start(struct token_end *t, const struct auth_grant *grant, void (*wake)(void));
/* Why the token ended ("token revoked", "token expired"), or NULL. s is the
 * stream the caller is about to wait on (NULL: none). */
const char *token_end_check(struct token_end *t, struct stream *s);
/* Lets go of the token; afterwards nothing touches t. */
void token_end_stop(struct token_end *t);

#endif
