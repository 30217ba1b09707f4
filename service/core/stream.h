/* stream — the durable, ordered log of what the server sends for one client
 * request (a "request" stream) or for a session's standalone channel.
 *
 * Every message appended gets the next seq (0, 1, 2, …) and is committed to
 * the store before stream_append returns, so anything a transport can see is
 * already durable. The chunks also stay in memory while the stream lives, so
 * readers follow it without touching SQLite. A stream not in memory (after a
 * restart) is loaded from the store on first use.
 *
 * Readers are transports following the stream from a cursor: they call
 * stream_read(seq) in a loop, blocking until chunk `seq` exists, the stream
 * ends, a deadline passes, or they are detached. Attaching a new reader
 * detaches the previous ones, so a client that resumes a stream takes it over
 * from a half-dead connection and each message goes to one connection.
 *
 * Streams are reference counted; the registry holds one reference while the
 * stream is being written. An ended stream never changes: it leaves memory
 * when its last reader lets go, and stream_find loads it from the store. */
#ifndef MCPD_STREAM_H
#define MCPD_STREAM_H

#include "fcond.h"

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct store;
struct stream;

enum stream_state { STREAM_ACTIVE = 0, STREAM_FINISHED, STREAM_ERROR, STREAM_EXPIRED };
const char *stream_state_name(enum stream_state st);

void stream_registry_init(struct store *st);
/* Detaches every reader and frees all streams (at exit). */
void stream_registry_shutdown(void);
/* Makes every current and future read that would wait return
 * STREAM_DETACHED (chunks already there are still read), so transports
 * close their connections at shutdown while the streams stay stored. */
void stream_registry_detach_all(void);

enum stream_kind { STREAM_REQUEST, STREAM_STANDALONE, STREAM_EPHEMERAL };

/* A new active stream of the session; request_id (borrowed, may be NULL) is
 * recorded so a restart can end it with an error. An ephemeral stream lives
 * in memory only: it carries replies that are views of durable data (a
 * poll's result), which storing again would only duplicate. Returns a
 * reference the caller owns, or NULL. */
struct stream *stream_create(const char *session_id, enum stream_kind kind,
                             const json_t *request_id);
/* A request stream that another process (run `owner`) writes: this one
 * only follows it (a call handed over, core/replica.h). */
struct stream *stream_create_owned(const char *session_id, const json_t *request_id,
                                   const char *owner);
/* The stream with that id, from memory or the store: a new reference, or
 * NULL if unknown or expired. A stream is stored with its first message
 * (or when stream_persist asks); until then it is only in memory. */
struct stream *stream_find(const char *id);
void stream_ref(struct stream *s);
void stream_unref(struct stream *s);

const char *stream_id(const struct stream *s);
const char *stream_session(const struct stream *s);
int stream_is_standalone(const struct stream *s);
enum stream_state stream_state(struct stream *s);
int64_t stream_next_seq(struct stream *s);

/* Makes the stream's row durable before any message is (a transport is
 * about to hand out an event id for it). Returns 0, or -1. */
int stream_persist(struct stream *s);

/* Appends one message (JSON text, no newline) and waits for its commit.
 * With end_state other than STREAM_ACTIVE this is the stream's last message.
 * Returns its seq, or -1 if the stream has ended or the store failed. */
int64_t stream_append(struct stream *s, const char *msg, size_t len, enum stream_state end_state);
/* The same for a copy of message copied - 1 of stream source_id (the
 * legacy relay, relay.h): the same commit records that source_id's first
 * `copied` messages are copied. */
int64_t stream_append_relayed(struct stream *s, const char *msg, size_t len, const char *source_id,
                              int64_t copied);
/* The run of the process that writes the stream, when it is another's
 * (loaded from the store while active, or stream_create_owned); NULL when
 * this process writes it or it has ended. Borrowed. */
const char *stream_owner(const struct stream *s);
/* 1 when a message of the stream could not be stored (the database was
 * unreachable): a stream that ends without its reply for that reason is
 * answered 503, not as a cancelled request. */
int stream_store_failed(struct stream *s);
/* Ends the stream without a message (e.g. a cancelled request). */
int stream_end(struct stream *s, enum stream_state state);

/* STREAM_POLL: the handler asked readers to close their connection (SSE
 * polling); reported once per request, and a reader that cannot poll may
 * simply read on. STREAM_DETACHED: another reader took the stream over, or
 * the server is shutting down; stop reading. */
/* STREAM_PROBE: someone wants to know whether this reader's client is still
 * there; write something now (twice: a vanished peer fails only the second
 * write). */
/* STREAM_REFUSED: seq is not a position of this stream (negative, or past
 * the end of a stream still being written); nothing was read. Stop. */
enum stream_wait {
    STREAM_CHUNK,
    STREAM_ENDED,
    STREAM_TIMEOUT,
    STREAM_POLL,
    STREAM_PROBE,
    STREAM_DETACHED,
    STREAM_REFUSED
};

/* A reader's token, filled by stream_attach or stream_observe. */
struct stream_reader {
    int passive; /* an observer: never detached by another reader */
    unsigned gen;
    unsigned poll_epoch;
    unsigned probe_epoch;
};

struct stream_chunk {
    int64_t seq;
    const char *msg; /* borrowed: valid while the caller holds a reference */
    size_t len;
    int is_end;
};

/* Becomes the stream's reader. Earlier readers get STREAM_DETACHED from
 * then on. */
void stream_attach(struct stream *s, struct stream_reader *r);
/* Reads without taking the stream over (a long poll peeking at it). */
void stream_observe(struct stream *s, struct stream_reader *r);
/* SSE polling: tells current readers (STREAM_POLL) to close their
 * connections; the stream goes on. Readers attaching later are not told. */
void stream_detach_readers(struct stream *s);
/* Asks current readers to prove their client is alive (STREAM_PROBE). */
void stream_probe_readers(struct stream *s);
/* Waits until chunk `seq` exists (STREAM_CHUNK, *out filled), the stream has
 * ended with no chunk at seq (STREAM_ENDED), the monotonic deadline passes
 * (STREAM_TIMEOUT) or this reader was detached (STREAM_DETACHED). A seq
 * outside [0, stream_next_seq] of an active stream is STREAM_REFUSED at
 * once; see stream_cursor_check. */
enum stream_wait stream_read(struct stream *s, struct stream_reader *reader, int64_t seq,
                             int64_t deadline_mono_ms, struct stream_chunk *out);

/* A waker lets one thread follow many streams (a push connection's single
 * writer): it watches each of them with a node it owns, and sleeps on the
 * waker until any of them changes in a way stream_read would report (a
 * chunk, the end, a detach, a poll or probe request). Others may signal it
 * too. The epoch only grows: the follower notes it, checks its streams,
 * then waits for it to move, so no change between the check and the wait
 * is missed. Lock order: a stream's lock, then the waker's. A fiber
 * waiting on it parks (fcond.h), so a loop fiber can follow streams. */
struct stream_waker {
    pthread_mutex_t mu;
    struct fcond cv;
    unsigned epoch;
};
void stream_waker_init(struct stream_waker *w);
void stream_waker_destroy(struct stream_waker *w);
void stream_waker_signal(struct stream_waker *w);
unsigned stream_waker_epoch(struct stream_waker *w);
/* Waits until the epoch is no longer `seen` or the monotonic deadline. */
void stream_waker_wait(struct stream_waker *w, unsigned seen, int64_t deadline_mono_ms);

/* A watch: owned by the follower, linked into the stream while watching. */
struct stream_watch {
    struct stream_waker *waker;
    struct stream_watch *next;
};
/* Signals w whenever s changes, until stream_unwatch (which must come
 * before the node or the waker is freed). */
void stream_watch(struct stream *s, struct stream_watch *node, struct stream_waker *w);
void stream_unwatch(struct stream *s, struct stream_watch *node);

/* Event ids name a position in a stream: "<stream id>:<seq>", unique
 * across a session's streams. SSE ids, WebSocket resume ids and poll
 * cursors all use it. seq may be -1 ("before the first message"). */
void stream_event_id(const struct stream *s, int64_t seq, char *out, size_t cap);

/* Cursors a client hands back (Last-Event-ID, last_event_id=, a poll's
 * from_seq) are checked here and nowhere else. A cursor is the seq to read
 * next. Valid: 0 <= next <= stream_next_seq, the positions that exist or
 * come next. Past the end of a stream that has ended there is nothing to
 * read, ever: the reader simply sees the end (STREAM_ENDED), as if it were
 * at the end. Past the end of a stream still being written it is refused
 * (STREAM_CURSOR_BAD): mcpd never handed out such a position, and waiting
 * there would silently skip the messages in between. Malformed ids and
 * refused positions are counted as metrics_refused("bad_cursor"). */
enum stream_cursor {
    STREAM_CURSOR_OK,
    STREAM_CURSOR_BAD,    /* malformed, negative, overflowing or past the end */
    STREAM_CURSOR_UNKNOWN /* names no stream of this session (or it expired) */
};
/* Checks that `next` may be read from s. */
enum stream_cursor stream_cursor_check(struct stream *s, int64_t next);
/* Resolves an event id (may be NULL: malformed) a client of session
 * session_id sent back. On STREAM_CURSOR_OK, *out is a new reference the
 * caller owns and *next the seq to read next; otherwise *out is NULL. */
enum stream_cursor stream_resume(const char *event_id, const char *session_id, struct stream **out,
                                 int64_t *next);
/* The JSON-RPC error code and message (static) a refused event id gets, the
 * same on every transport (HTTP answers them with 400). */
int stream_cursor_code(enum stream_cursor c);
const char *stream_cursor_message(enum stream_cursor c);

/* Several processes on one store (core/replica.h). Another process may
 * write a stream this one holds in memory: the request stream a reader
 * here follows, or a session's standalone stream, which every replica
 * appends to. stream_registry_shared says the store is shared (appends
 * that lose a race for a seq then take in the other's messages and retry).
 * stream_refresh re-reads stream `id` if it is in memory and the store
 * may hold more (next_seq, the count another process signalled, or -1:
 * unknown; ended: it signalled the end), adds what is new and wakes its
 * readers. stream_refresh_all does so for every stream in memory that
 * others write, after signals may have been lost. Both call the store. */
void stream_registry_shared(int shared);
void stream_refresh(const char *id, int64_t next_seq, int ended);
void stream_refresh_all(void);
/* fn(id) after each change to a request stream (a chunk, its end, what a
 * refresh took in from another process), on the thread that changed it and
 * with none of the stream's locks held: for a follower that keeps no
 * reader (listen's task status notifications). Set before serving. */
void stream_on_change(void (*fn)(const char *stream_id));

/* The session ended: its streams expire, readers see the end. */
void stream_drop_session(const char *session_id);
/* How many streams are being written (in memory). */
size_t stream_count(void);

#endif
