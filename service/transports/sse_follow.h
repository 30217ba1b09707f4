/* sse_follow — an event-stream reader of one durable stream, shared by the
 * SSE answers on /mcp (http.c) and the legacy /sse (legacy_sse.c).
 *
 * It frames each stored message as an event whose id names its place in
 * the stream (so that Last-Event-ID resumes right after it), writes a
 * keepalive comment when the stream has been idle for the keepalive
 * interval (a write to a vanished client fails, which ends the response),
 * writes two more at once when another GET probes whether this reader is
 * alive, and says why it stops ("session ended", or "token revoked" and
 * "token expired" when the token the follow holds ends: follow_token).
 *
 * It is also the content reader's fill loop (sse_follow_write): it waits
 * for the stream when there is nothing to write, on the request's fiber
 * (request_host_fill), and writes in blocks: a call whose block started empty
 * takes every message that is ready at once, up to the block's size, so
 * that a resumed or busy stream goes out a block per write instead of an
 * event (and a poll) per write. What a transport writes ahead of the
 * stream's messages (the priming event on /mcp; on /sse the endpoint event
 * and the wait for the session) is its `lead`, which the loop runs first.
 *
 * The transport fills the fields above `probe_writes` (opening `follow`,
 * which it ends); the rest start at zero. */
#ifndef MCPD_SSE_FOLLOW_H
#define MCPD_SSE_FOLLOW_H

#include "sse.h"
#include "follow.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What a transport writes ahead of the stream's messages. */
struct sse_lead {
    /* 1 while it has more to write: the fill loop runs step in place of
     * reading the stream. */
    int (*pending)(void *ud);
    /* Frames the next of it into the follow's buffer, or marks the follow
     * done; it may wait (on the request's fiber). */
    void (*step)(void *ud);
    /* Its frames may share a block with the stream's messages (else each
     * goes out on its own). */
    int shares;
};

struct sse_follow {
    struct follow follow;  /* the stream it frames: the transport opens and ends it */
    int polling;           /* the client was told how to come back: a poll notice ends the stream */
    int64_t poll_deadline; /* monotonic ms, 0 for none: past it the stream ends (polling mode) */
    const char *event_type;      /* each message event's "event:" line, or NULL */
    const struct sse_lead *lead; /* or NULL: nothing ahead of the messages */
    void *lead_ud;               /* lead's argument */
    int probe_writes;            /* quick keepalives still to write for a probe */
    int done;                    /* nothing more will be framed */
    struct sse_buf buf;
    size_t max; /* of the block being filled */
};

/* Frames one message the follow read as an event; -1 when out of
 * memory. */
int sse_follow_take(struct sse_follow *f, const struct stream_chunk *ch);
/* What a read that stopped on the follow's token says ("token revoked",
 * "token expired"; static text), or NULL for any other event. */
const char *sse_follow_token_why(enum follow_event e);
/* While the follow holds only its token (legacy /sse before its session
 * exists): 1 once the token ended, having said why in a final comment and
 * marked the stream done. 0 otherwise, and always once the follow is
 * open (its reads say it). */
int sse_follow_token_ended(struct sse_follow *f);

struct host_req;
/* The content reader's answer (libmicrohttpd's block of max bytes at
 * out): fills the buffer on the request's fiber (request_host_fill), running
 * the lead, then reading the stream, and answers 0 while that waits (the
 * connection is suspended), then the block, U_STREAM_END or
 * U_STREAM_ERROR. */
ssize_t sse_follow_write(struct sse_follow *f, struct host_req *g, char *out, size_t max);

#endif
