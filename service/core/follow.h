/* follow — the one way a transport reads what the core sends it.
 *
 * Whatever a client waits for is a durable stream (stream.h): a request's
 * reply, a stream resumed from the client's cursor, or its session's
 * standalone stream. A transport opens a follow on it (follow_reply for
 * a reply, follow_open for what a client asks for), reads it message by
 * message with follow_read, which names each message's position
 * (event_id), and lets go with follow_end. The follow holds what reading
 * needs and a transport never handles itself: the stream and its session
 * (references), the reader slot (opening a follow detaches earlier readers
 * of the stream, so a client that resumes takes the stream over from a
 * half-dead connection), the cursor, and for the standalone stream the
 * session's one-reader claim and its delivery cursor. Reading records the session's
 * activity, so a followed session does not expire (a JSON reply's wait for
 * its response does not: its request was the activity).
 *
 * A follow is the transport's (embedded in its connection state, zeroed
 * when unused; follow_end on a zeroed one does nothing); it is used by one
 * thread or fiber at a time. It is opened zeroed, or holding only its
 * token (follow_token), which it keeps. The fields are read-only outside follow.c. A
 * struct copy of a live follow reads ahead without moving the original:
 * its cursor stays, and a notice the copy reads (a poll, a probe) is still
 * there for the original. A copy is never ended.
 *
 * One waiter may follow many streams at once (a push connection's writer
 * sends every reply of its connection): it puts its follows in a
 * follow_group (follow_join), reads each without waiting (deadline 0),
 * and when none has anything sleeps in follow_wait, which returns as soon
 * as any of them changed (a message, the end, a detach) since the last
 * follow_wait returned, or someone called follow_wake. */
#ifndef MCPD_FOLLOW_H
#define MCPD_FOLLOW_H

#include <stdint.h>

#include "core.h"
#include "stream.h"

struct follow_group {
    struct stream_waker waker;
    unsigned seen; /* the waker's epoch when follow_wait last returned */
};

struct follow_token;
struct auth_grant;

/* An event id's size: "<stream id>:<seq>" (stream.h). */
#define FOLLOW_EVENT_ID_MAX 64

struct follow {
    struct stream *stream;      /* owned */
    struct stream_watch watch;  /* follow_join: linked into the stream */
    struct follow_group *group; /* follow_join; NULL: none */
    struct session *session;    /* owned; NULL: none */
    const char *session_id;     /* session's id (borrowed from it); NULL: none */
    struct stream_reader reader;
    int64_t next;   /* seq of the next message follow_read returns */
    int standalone; /* holds the session's standalone claim (follow_standalone) */
    int polling;    /* the session's revision knows SSE priming events and retry
                       (2025-11-25 on); a push connection's follows clear it */
    /* What the follow has read, as a cursor a client hands back to resume
     * after it: the event id of the last message read, or before any of the
     * position before the first (an SSE priming event's id). */
    char event_id[FOLLOW_EVENT_ID_MAX];
    /* event_id names something after a crash: a message read is stored, and
     * a polling follow's read that finds nothing there yet (the stream goes
     * on: FOLLOW_IDLE, FOLLOW_POLL, FOLLOW_PROBED, FOLLOW_DETACHED) first
     * stores the stream, since its client may be given the cursor with
     * nothing else (a priming event). A look on a copy stores the stream;
     * the original's flag is set by its own read (which then finds the row
     * there at once). 0 after a store error (a later read tries again). */
    int stored;
    int ephemeral;              /* the session is the reply's own (core_reply.ephemeral):
                                   follow_end ends it */
    int final_only;             /* follow_reply: reads return the response only */
    int relay;                  /* final_only: what comes before it goes to the
                                   session's standalone stream */
    struct follow_token *token; /* owned (follow_token); shared by copies */
};

/* Follows a reply of kind CORE_STREAM from its start: takes r's stream
 * (r->stream becomes NULL) and a new reference to r's session. The
 * session of a stateless request (r->ephemeral) is the request's own:
 * the follow ends it when it ends, which cancels the request if its reply
 * was not read to the end (a client that hung up).
 *
 * final_only is for a transport that carries only a request's response
 * (a JSON reply): follow_read then returns the stream's final message and
 * nothing before it. What comes before it (progress, logs, a server
 * request the handler waits on) goes to the session's standalone stream,
 * where the client can get it, and the read that finds the response first
 * waits up to two seconds for the standalone reader to have written those
 * (not for a single-message reply, r->single, nor a stateless request's,
 * which have no other stream to relay to). Poll notices are skipped: a JSON
 * reply has no connection to close. */
void follow_reply(struct follow *f, struct core_reply *r, int final_only);

/* Follows what core_resume resolved (a transport that decides by the
 * stream's kind, as push does): takes res's references; res is zeroed. */
void follow_resumed(struct follow *f, struct core_resume *res);

/* Follows s's standalone stream, taking the session's one-reader claim
 * (core_standalone_claim: probe_ms gives a silent holder that long to
 * fail), from `from`, or with from < 0 from where its last reader stopped.
 * s is borrowed (the follow takes its own reference). 0, or -1 with
 * *refused filled (CORE_CONFLICT: another reader holds it) and f
 * untouched. */
int follow_standalone(struct follow *f, struct session *s, int64_t probe_ms, int64_t from,
                      struct core_reply *refused);

/* Follows what a client asks for with a GET and its Last-Event-ID: with a
 * cursor, the stream of the caller's session it names (core_resume),
 * from the message after it; without one, the session's standalone
 * stream (follow_standalone, from where its last reader stopped). A
 * relayed caller (c->relayed: legacy /sse, whose client reads every reply
 * on the standalone stream) only ever follows that stream: a cursor must
 * be on it (else CORE_BAD_REQUEST), no cursor means the client saw nothing
 * but the endpoint event (from the stream's start), and what a past
 * process's relay had not copied is copied first (relay_catch_up).
 * probe_ms as for follow_standalone. 0, or -1 with *refused filled and f
 * untouched. */
int follow_open(struct follow *f, const struct core_caller *c, const char *cursor, int64_t probe_ms,
                struct core_reply *refused);

/* The follow lasts as long as the grant's token (auth.h; nothing is held
 * when auth is off): once the token is revoked or expires, reads return
 * FOLLOW_TOKEN_REVOKED or FOLLOW_TOKEN_EXPIRED, and a read waiting at that
 * moment returns at once. A check grants access for a moment; whatever
 * lasts (an event stream, a reply waited for) holds its token this way.
 * May come before the follow is opened (legacy /sse holds its token while
 * it waits for its initialize): until then a read only looks at the token
 * (FOLLOW_IDLE, at once, while it is valid). wake (may be NULL) is called
 * when the token ends, from the watcher's thread under auth's lock, for a
 * transport that also waits on something of its own: it must only wake.
 * Once per follow. 0, or -1 when out of memory. */
int follow_token(struct follow *f, const struct auth_grant *grant, void (*wake)(void));

/* What a read found. A transport answers each event as its medium can and
 * never asks the core anything more: the ways a stream stops are already
 * told apart, since each is answered differently (a JSON reply: an empty
 * 202, a 404, a 503 with Retry-After, a 503 that says to resume; SSE: a
 * "session ended" comment or just the end). */
enum follow_event {
    /* *ch is the message: borrowed while the follow lives. */
    FOLLOW_MESSAGE,
    /* The deadline passed with nothing new: a keepalive is due (with
     * deadline 0: nothing is there yet, look again later). */
    FOLLOW_IDLE,
    /* Another reader asks whether this one's client is still there (the
     * session's one-reader claim): write something now, twice, since a
     * vanished peer fails only the second write. */
    FOLLOW_PROBED,
    /* The handler asked readers to close their connection (SSE polling):
     * a client told how to come back may be cut off; any other reader
     * simply reads on. Reported once. */
    FOLLOW_POLL,
    /* This reader stops, the stream does not: another reader took it over
     * (a client resumed elsewhere), the server is shutting down (what is
     * stored can be resumed from the next process), or f->next is no
     * position of the stream. Nothing tells the client it is over. */
    FOLLOW_DETACHED,
    /* The stream has nothing more: its end was read, or it ended without
     * a reply (a cancelled request: the spec says to send nothing). */
    FOLLOW_STREAM_ENDED,
    /* It stopped because its session is gone (a DELETE elsewhere, expiry,
     * mcp-admin session kill): a client is told so, since its next request
     * would be refused anyway. Wins over the other ways to stop. */
    FOLLOW_SESSION_ENDED,
    /* Its reply could not be stored (the database is away): worth a retry,
     * unlike a cancelled request. Wins over an end or a detach. */
    FOLLOW_STORE_FAILED,
    /* The token the follow lasts as long as (follow_token) was revoked, or
     * has expired: the client is told so (SSE: a final comment; a JSON
     * reply still waiting: 401). Wins over everything, and is read again
     * on every later read. */
    FOLLOW_TOKEN_REVOKED,
    FOLLOW_TOKEN_EXPIRED
};

/* Reads message f->next (stream_read: waits until the monotonic deadline;
 * 0 only looks); a final_only follow reads on to the response. On
 * FOLLOW_MESSAGE f->next moves past *ch.
 *
 * A read that waits (deadline > 0) says the transport has written every
 * message it read before, so it waits only once nothing of its own is
 * left to write (an SSE writer looks without waiting while it has bytes
 * pending): on the standalone stream that is the session's delivery
 * cursor, which a JSON reply may wait for. Delivery is thus marked when
 * the bytes have left, not when a message was framed; a client that
 * vanishes with framed bytes unsent has them marked only by follow_end
 * (unless follow_unread gave them back). A message, or a wait that ran to
 * its deadline (a keepalive is due), counts as the session's activity
 * (not on a final_only follow). */
enum follow_event follow_read(struct follow *f, int64_t deadline, struct stream_chunk *ch);

/* For a reader that never waits in follow_read (push's writer waits in
 * follow_wait): it wrote everything before f->next, which on the
 * standalone stream is the session's delivery cursor. */
void follow_sent(struct follow *f);

/* The transport could not write *ch, the message follow_read just gave
 * (its client is gone): f->next (and event_id) go back to it, so that the
 * standalone stream's next reader gets it. */
void follow_unread(struct follow *f, const struct stream_chunk *ch);

/* Lets go: the token (no wake runs after it), the group (follow_join), the standalone claim (the
 * delivery cursor at f->next), the stream and the session, which it ends if it is the request's own
 * (follow_reply). Ending a session waits for its tombstone's commit, so off a fiber (libmicrohttpd
 * frees a response on its pool thread) a worker does that part. f is zeroed. */
void follow_end(struct follow *f);

/* ---- following many streams with one waiter ---- */

void follow_group_init(struct follow_group *g);
/* After every follow in g has ended. */
void follow_group_destroy(struct follow_group *g);
/* Every change of f's stream wakes g's waiter, until follow_end. f must
 * not move (nor be copied back over) while it is in g. */
void follow_join(struct follow *f, struct follow_group *g);
/* Wakes g's waiter (new work for it that no stream announces); any
 * thread. */
void follow_wake(struct follow_group *g);
/* For g's one waiter: returns once anything changed since the last
 * follow_wait returned (or since follow_group_init), or at the monotonic
 * deadline. A fiber parks. */
void follow_wait(struct follow_group *g, int64_t deadline);

#endif
