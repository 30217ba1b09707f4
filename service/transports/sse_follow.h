/* sse_follow — an event-stream reader of one durable stream, shared by the
 * SSE answers on /mcp (http.c) and the legacy /sse (legacy_sse.c).
 *
 * It frames each stored message as an event whose id names its place in
 * the stream (so that Last-Event-ID resumes right after it), writes a
 * keepalive comment when the stream has been idle for the keepalive
 * interval (a write to a vanished client fails, which ends the response),
 * writes two more at once when another GET probes whether this reader is
 * alive, and says why it stops ("session ended", or "token revoked" and
 * "token expired" when the token that opened it ends: `end`, token_end.h,
 * which the transport starts and stops). The transport keeps the
 * HTTP side: its content-reader callback decides when to wait and drains
 * the buffer in blocks (sse_follow_block_full).
 *
 * The transport fills the fields above `probe_writes` (opening `follow`,
 * which it ends); the rest start at zero. */
#ifndef MCPD_SSE_FOLLOW_H
#define MCPD_SSE_FOLLOW_H

#include "sse.h"
#include "token_end.h"
#include "follow.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sse_follow {
    struct follow follow;  /* the stream it frames: the transport opens and ends it */
    int polling;           /* the client was told how to come back: a poll notice ends the stream */
    int64_t poll_deadline; /* monotonic ms, 0 for none: past it the stream ends (polling mode) */
    const char *event_type; /* each message event's "event:" line, or NULL */
    int probe_writes;       /* quick keepalives still to write for a probe */
    int done;               /* nothing more will be framed */
    struct token_end end;   /* the token this stream lasts as long as */
    struct sse_buf buf;
};

/* Frames one message the follow read as an event; -1 when out of
 * memory. */
int sse_follow_take(struct sse_follow *f, const struct stream_chunk *ch);
/* Reads the stream once and frames what it finds: the next message, or a
 * keepalive or the reason it ends (its token's end comes first). With wait, waits for it until the
 * next keepalive is due; without, only looks: 1 when nothing is there yet. 0 otherwise, -1 when out
 * of memory. */
int sse_follow_step(struct sse_follow *f, int wait);
/* 1 when the stream's token ended: says why in a final comment (once) and
 * marks the stream done. s: the stream about to be waited on, or NULL. */
int sse_follow_token_ended(struct sse_follow *f, struct stream *s);
/* Moves up to max framed bytes into out; returns how many. */
ssize_t sse_follow_drain(struct sse_follow *f, char *out, size_t max);

struct gate_req;
/* A content reader's answer around its fill step: runs fill(ud) on the
 * request's fiber (body_gate_fill; 0 means drain the buffer, 1 the end,
 * -1 an error) and answers libmicrohttpd: 0 while fill waits (the
 * connection is suspended), then the drained block, U_STREAM_END or
 * U_STREAM_ERROR. */
ssize_t sse_follow_write(struct sse_follow *f, struct gate_req *g, int (*fill)(void *ud), void *ud,
                         char *out, size_t max);
/* The writers' block rule. A content-reader call whose block started empty
 * (fresh) takes every message that is ready at once, up to the block's
 * size, so that a resumed or busy stream goes out a block per write instead
 * of an event (and a poll) per write; a block holding leftovers goes
 * alone. 1: write the pending bytes now; 0: read more (without waiting,
 * when something is pending, and write on a timeout). */
int sse_follow_block_full(size_t pending, int fresh, size_t max, int done);

#endif
