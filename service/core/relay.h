/* relay — copies request streams onto their session's standalone stream,
 * for a transport whose client reads every server message on one stream
 * (the legacy /sse of 2024-11-05).
 *
 * One thread follows every relayed stream with one waker (as push.c's
 * writer does) and appends each message, as it is committed, to the
 * standalone stream of the request's session, in each stream's order; it
 * lets go of a stream when its last message is copied. What it appends is
 * committed before any reader of the standalone stream can send it, so one
 * cursor on that stream says exactly what the client has seen.
 *
 * Its progress on each stream is stored with each copy, in the same commit
 * (streams.relayed), so that what a past process did not copy, and the
 * "interrupted by server restart" error a restart ends a request with,
 * reach the client when it resumes its /sse stream (relay_catch_up),
 * neither repeated nor lost. */
#ifndef MCPD_RELAY_H
#define MCPD_RELAY_H

#include <jansson.h>

struct session;
struct stream;

struct store;

/* st: the store the progress goes to (borrowed). */
int relay_start(struct store *st);
/* Stops the thread and drops what it still followed. */
void relay_stop(void);

/* Follows st (reference taken) for session s (borrowed; a reference is
 * kept). 0, or -1 when the relay is not running. */
int relay_follow(struct session *s, struct stream *st);
/* For a legacy session resumed after a restart: follows, from where a past
 * process left off, each of its request streams that has messages the
 * relay had not copied. Streams already followed are left as they are. */
void relay_catch_up(struct session *s);
/* Appends one message (stolen) at once: an answer with no stream of its
 * own. 0, or -1. */
int relay_message(struct session *s, json_t *msg);

#endif
