/* push — the core's side of a client connection that carries framed
 * messages both ways (WebSocket, stdio, raw TCP and UDP): the transport
 * hands in frames and names a sink, and the core drives every reply into
 * that sink. It lives in the core because it is the core's delivery, not
 * framing: a connection transport never follows a stream itself.
 *
 * The transport owns the framing (RFC 6455 frames, NDJSON, Content-Length,
 * datagrams) and its socket. It hands each complete frame to push_receive,
 * which parses it as JSON-RPC and gives it to the one way in, core_receive
 * (an initialize gives the connection its session), answering refusals on
 * the connection. One writer per connection, a fiber on the event loop
 * (loop.h), follows every reply stream and sends each one's messages, in
 * order, through the transport's send function, letting go of a request
 * as soon as its last message is out; a request that opted in with
 * "stream": true gets the handle at once and its messages as mcpd/chunk
 * notifications. Once the connection has a session, its standalone stream
 * is forwarded too. So the transport owns no messages: if the connection
 * drops, the streams are in the store, and a new connection resumes them
 * (push_io.resume_session).
 *
 * A transport's whole life with it: push_open (new, or a reconnect),
 * push_receive per frame, push_close.
 *
 * Threading: push_receive is called from the transport's reader (a loop
 * fiber for every transport); sends come
 * from the connection's writer fiber and, for immediate answers, from the
 * reader; push serialises them with a lock a fiber may hold while the
 * transport's send parks on a full socket. A connection costs a fiber and
 * its in-flight requests, no thread, however long it lives. The event loop
 * must be running (loop_start) before push_open. */
#ifndef MCPD_PUSH_H
#define MCPD_PUSH_H

#include <stddef.h>
#include <stdint.h>

#include "auth.h"

struct push;
struct core_reply;

struct push_io {
    /* Writes one message (compact JSON text, no newline) as one frame.
     * Returns 0, or -1 when the connection is gone (push then stops
     * sending; nothing is lost, the streams are stored). */
    int (*send)(void *io, const char *msg, size_t len);
    void *io;
    const char *transport; /* "ws" or "stdio": the name clients see */
    /* Add "_meta": {"mcpd/event-id": "<stream>:<seq>"} to each message sent
     * (where the message has an object to carry it), so a client can resume
     * after a reconnect. Off for stdio, which cannot reconnect. */
    int event_ids;
    /* Requests this connection may have in flight at once (0: 256). More
     * are refused with an error instead of run: a client that floods
     * requests and never reads must not pile them up without end. */
    int max_inflight;
    /* Called (on the writer's fiber) when the connection's session ends
     * from elsewhere; may be NULL. The transport closes the connection. */
    void (*session_ended)(void *io);
    /* Who authenticated the connection (auth.h; principal "" without
     * authentication): the sessions it may create and adopt are that
     * principal's, and the connection lasts as long as its token, which
     * push holds from push_open until push_close. */
    struct auth_grant grant;
    /* Called when that token is revoked or expires, with why ("token
     * revoked", "token expired"), on the watcher's thread under auth's
     * lock: the transport records why and wakes its reader, which closes
     * the connection; it must not block. Never after push_close began.
     * May be NULL. */
    void (*token_ended)(void *io, const char *why);
    /* Called once the connection serves a session (its initialize, or the
     * reconnect push_open adopts) with the session's id, borrowed until
     * push_close: for the transport's log lines and a reconnect's answer.
     * Runs on the caller of push_open or push_receive while push's writer
     * may be sending: keep the pointer in an atomic. May be NULL. */
    void (*session_named)(void *io, const char *session_id);
    /* Called under push's lock when the connection's requests not yet fully
     * sent go from none to some (busy 1) and back to none (0), from any
     * thread: a transport's idle timeout does not count a connection
     * waiting for its replies. It must only record it. May be NULL. */
    void (*busy)(void *io, int busy);
    /* A reconnect (NULL: a new connection, whose session comes with its
     * initialize): the session to adopt and, with it, the event id
     * ("<stream>:<seq>", may be NULL) of the stream to replay from the
     * message after it and then follow. Read by push_open only. */
    const char *resume_session, *resume_event;
};

/* A new connection, with its writer running on the event loop, holding
 * the grant's token. The io struct is copied. With io->resume_session it
 * first adopts that session (a reconnect): when the core refuses it (the
 * session is unknown, expired or another principal's; the cursor names no
 * stream of it or no position of it), *refused holds the refusal
 * (CORE_REJECTED; the caller clears it) and the connection is open
 * without a session; otherwise refused is zeroed (refused may be NULL:
 * the refusal is then dropped). A resumed stream's messages start going
 * out at once, through io->send from the writer: a transport that must
 * answer first holds its send lock across the call. Resuming may park (a
 * store read, a session's revival), so that lock must be one a fiber may
 * hold across a park (an fmutex); push_open itself never calls io->send.
 * NULL when out of memory or when the loop is not running (*refused then
 * untouched). */
struct push *push_open(const struct push_io *io, struct core_reply *refused);

/* One frame's payload from the client. Never fails: bad input is answered
 * on the connection (-32700, -32600, ...) and the connection goes on. */
void push_receive(struct push *p, const char *buf, size_t len);

/* Ends the connection and frees p. First it lets go of the token (no
 * token_ended runs after that). A connection whose client can still
 * read (stdio at the end of its input, or on a signal) first waits up to
 * drain_ms for every request of it to finish sending; one that is gone
 * passes 0. With gone the client can answer nothing more: the requests
 * the server sent it and still waits on fail now (core_client_gone), and
 * a subscription of it ends (before the wait, which it would otherwise
 * outlast). Then the writer stops. Requests still running go on; their
 * replies stay in their streams. Returns 0 when every request had
 * finished sending, -1 when some had not. p may be NULL. */
int push_close(struct push *p, int gone, int64_t drain_ms);

#endif
