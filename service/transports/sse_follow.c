/* sse_follow — see sse_follow.h. */
#include "sse_follow.h"
#include "request_host.h"
#include "clock.h"
#include "http_shared.h"

#include <ulfius.h>

int sse_follow_take(struct sse_follow *f, const struct stream_chunk *ch)
{
    if ((f->event_type && sse_event_type(&f->buf, f->event_type) != 0) ||
        sse_event(&f->buf, f->follow.event_id, -1, ch->msg, ch->len) != 0)
        return -1;
    f->done = ch->is_end;
    return 0;
}

const char *sse_follow_token_why(enum follow_event e)
{
    if (e == FOLLOW_TOKEN_REVOKED)
        return "token revoked";
    return e == FOLLOW_TOKEN_EXPIRED ? "token expired" : NULL;
}

/* Ends the stream with why, once. */
static void say_token_end(struct sse_follow *f, const char *why)
{
    if (!f->done)
        sse_comment(&f->buf, why);
    f->done = 1;
}

int sse_follow_token_ended(struct sse_follow *f)
{
    struct stream_chunk ch;
    const char *why =
        f->follow.stream ? NULL : sse_follow_token_why(follow_read(&f->follow, 0, &ch));
    if (why)
        say_token_end(f, why);
    return why != NULL;
}

/* Reads the stream once and frames what it finds: the next message, or a
 * keepalive or the reason it ends (its token's end comes first). With
 * wait, waits for it until the next keepalive is due; without, only looks:
 * 1 when nothing is there yet. 0 otherwise, -1 when out of memory. */
static int step(struct sse_follow *f, int wait)
{
    int64_t deadline =
        clock_mono_ms() + (f->probe_writes ? HTTP_PROBE_GAP_MS : http_keepalive_ms());
    if (f->poll_deadline && f->poll_deadline < deadline)
        deadline = f->poll_deadline;
    struct stream_chunk ch;
    enum follow_event e = follow_read(&f->follow, wait ? deadline : 0, &ch);
    switch (e) {
    case FOLLOW_MESSAGE:
        return sse_follow_take(f, &ch);
    case FOLLOW_PROBED:
        f->probe_writes = 2;
        break;
    case FOLLOW_POLL:
        /* Only clients that were told how to come back may be cut off. */
        f->done = f->polling;
        break;
    case FOLLOW_SESSION_ENDED:
        /* A reader told why the stream stops, when its session is gone
         * (a DELETE elsewhere, expiry, mcp-admin session kill). */
        sse_comment(&f->buf, "session ended");
        f->done = 1;
        break;
    case FOLLOW_STREAM_ENDED:
    case FOLLOW_DETACHED:
    case FOLLOW_STORE_FAILED:
        f->done = 1;
        break;
    case FOLLOW_TOKEN_REVOKED:
    case FOLLOW_TOKEN_EXPIRED:
        say_token_end(f, sse_follow_token_why(e));
        break;
    case FOLLOW_IDLE:
        if (!wait)
            return 1;
        if (f->poll_deadline && clock_mono_ms() >= f->poll_deadline) {
            f->done = 1;
        } else {
            /* Keeps proxies from timing out, and a write to a vanished
             * client fails here, which ends the response. */
            sse_comment(&f->buf, "keepalive");
            if (f->probe_writes)
                f->probe_writes--;
        }
        break;
    }
    return 0;
}

/* The block rule (sse_follow.h): 1 to write the pending bytes now; 0 to
 * read more (without waiting, when something is pending, and write on a
 * timeout). fresh: the block started empty and may take more. */
static int block_full(size_t pending, int fresh, size_t max, int done)
{
    return pending && (!fresh || pending >= max || done);
}

/* Brings the buffer to where a block should go out: 0 to write it, 1 at
 * the end, -1 on an error. Runs on the request's fiber (request_host_fill). */
static int fill(void *ud)
{
    struct sse_follow *f = ud;
    const struct sse_lead *lead = f->lead;
    int fresh = !sse_pending(&f->buf);
    for (;;) {
        size_t pending = sse_pending(&f->buf);
        int leading = lead && lead->pending(f->lead_ud);
        if (block_full(pending, fresh && (!leading || lead->shares), f->max, f->done))
            return 0;
        if (!pending && f->done)
            return 1;
        if (leading) {
            lead->step(f->lead_ud);
            continue;
        }
        int rc = step(f, !pending);
        if (rc < 0)
            return -1;
        if (rc == 1) /* nothing more yet: write what there is */
            return 0;
    }
}

ssize_t sse_follow_write(struct sse_follow *f, struct host_req *g, char *out, size_t max)
{
    f->max = max;
    int verdict;
    if (!request_host_fill(g, fill, f, &verdict))
        return 0;
    if (verdict != 0)
        return verdict > 0 ? U_STREAM_END : U_STREAM_ERROR;
    /* The standalone stream's messages count as delivered once written: the
     * next fill's waiting read says so (follow.h). */
    return (ssize_t)sse_drain(&f->buf, out, max);
}
