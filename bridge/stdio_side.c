/* stdio_side — see stdio_side.h. */
#include "stdio_side.h"

#include "rpc_message.h"

#include "note_gate.h"
#include "stdio_frame.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Kept of the start of each message, to answer one that is too large
 * with its id: JSON-RPC clients put the id before the params. */
#define HEAD_CAP 4096
/* Messages larger than this are not parsed to see whether they are
 * notifications (note_gate.h; progress and most others are small). */
#define NOTE_MAX 8192

struct stdio_side {
    int in_fd, out_fd;
    int out_broken;
    struct note_gate gate;
    size_t max_message;
    struct stdio_frame_decoder *dec;
    char head[HEAD_CAP];
    size_t head_len;
    /* NDJSON: the rest of a line too long comes first (the decoder skips it) */
    int head_skip_line;
    /* Content-Length: the error for a body too large waits for its start */
    int late_error;
    char buf[64 * 1024];
};

struct stdio_side *stdio_side_new(int in_fd, int out_fd, size_t max_message)
{
    struct stdio_side *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->in_fd = in_fd;
    s->out_fd = out_fd;
    s->max_message = max_message ? max_message : STDIO_FRAME_DEFAULT_MAX;
    note_gate_init(&s->gate, out_fd);
    s->dec = stdio_frame_decoder_new(max_message);
    if (!s->dec) {
        free(s);
        return NULL;
    }
    return s;
}

void stdio_side_free(struct stdio_side *s)
{
    if (!s)
        return;
    stdio_frame_decoder_free(s->dec);
    free(s);
}

static void too_large(struct stdio_side *s, const struct stdio_side_handler *h)
{
    json_t *id = rpc_id_from_prefix(s->head, s->head_len);
    char msg[160];
    snprintf(msg, sizeof msg,
             "mcp-bridge: Invalid Request: message larger than the %zu bytes the bridge accepts "
             "on stdin",
             s->max_message);
    s->head_len = 0;
    s->late_error = 0;
    h->frame_error(h->ud, id, stdio_frame_error_code(STDIO_FRAME_ERR_TOO_LARGE), msg);
    json_decref(id);
}

/* in[0..len) went into the decoder for the message it reads now. */
static void keep_head(struct stdio_side *s, const struct stdio_side_handler *h, const char *in,
                      size_t len)
{
    if (s->head_skip_line) {
        const char *nl = memchr(in, '\n', len);
        if (!nl)
            return;
        s->head_skip_line = 0;
        len -= (size_t)(nl + 1 - in);
        in = nl + 1;
    }
    size_t take = len < HEAD_CAP - s->head_len ? len : HEAD_CAP - s->head_len;
    memcpy(s->head + s->head_len, in, take);
    s->head_len += take;
    if (s->late_error && s->head_len == HEAD_CAP)
        too_large(s, h);
}

/* ended_line: the input the event ended with was a line end. */
static void deliver(struct stdio_side *s, const struct stdio_side_handler *h,
                    const struct stdio_frame_event *ev, int ended_line)
{
    if (s->late_error)
        too_large(s, h); /* a body shorter than the head */
    if (ev->kind == STDIO_FRAME_MESSAGE) {
        s->head_len = 0;
        h->message(h->ud, ev->data, ev->len);
        return;
    }
    if (ev->error == STDIO_FRAME_ERR_TOO_LARGE) {
        if (stdio_frame_framing(s->dec) == STDIO_FRAMING_CONTENT_LENGTH) {
            /* told at the end of the headers: the body comes next */
            s->head_len = 0;
            s->late_error = 1;
            return;
        }
        too_large(s, h);
        s->head_skip_line = !ended_line;
        return;
    }
    s->head_len = 0;
    char msg[160];
    snprintf(msg, sizeof msg, "mcp-bridge: %s", stdio_frame_error_message(ev->error));
    h->frame_error(h->ud, NULL, stdio_frame_error_code(ev->error), msg);
}

int stdio_side_read(struct stdio_side *s, const struct stdio_side_handler *h)
{
    ssize_t n;
    do {
        n = read(s->in_fd, s->buf, sizeof s->buf);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    struct stdio_frame_event ev;
    if (n <= 0) {
        if (s->late_error)
            too_large(s, h);
        if (stdio_frame_finish(s->dec, &ev))
            deliver(s, h, &ev, 1);
        return n == 0 ? 1 : -1;
    }
    size_t off = 0, used;
    while (off < (size_t)n) {
        int got = stdio_frame_decode(s->dec, s->buf + off, (size_t)n - off, &used, &ev);
        keep_head(s, h, s->buf + off, used);
        off += used;
        if (!got)
            break;
        deliver(s, h, &ev, off > 0 && s->buf[off - 1] == '\n');
    }
    return 0;
}

static int is_notification(const char *json, size_t len)
{
    if (len > NOTE_MAX)
        return 0;
    json_t *m = json_loadb(json, len, 0, NULL);
    int note = m && rpc_classify(m) == RPC_NOTIFICATION;
    json_decref(m);
    return note;
}

int stdio_side_write(struct stdio_side *s, const char *json, size_t len)
{
    if (s->out_broken)
        return -1;
    note_gate_before(&s->gate, is_notification(json, len));
    enum stdio_framing f = stdio_frame_framing(s->dec);
    char prefix[STDIO_FRAME_PREFIX_MAX];
    size_t pl = stdio_frame_prefix(f, len, prefix, sizeof prefix);
    const char *suffix = stdio_frame_suffix(f);
    struct iovec iov[3] = {
        {prefix, pl},
        {(void *)json, len},
        {(void *)suffix, 0},
    };
    while (suffix[iov[2].iov_len])
        iov[2].iov_len++;
    int first = 0;
    while (first < 3) {
        ssize_t w = writev(s->out_fd, iov + first, 3 - first);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            s->out_broken = 1;
            return -1;
        }
        while (first < 3 && (size_t)w >= iov[first].iov_len) {
            w -= (ssize_t)iov[first].iov_len;
            first++;
        }
        if (first < 3) {
            iov[first].iov_base = (char *)iov[first].iov_base + w;
            iov[first].iov_len -= (size_t)w;
        }
    }
    return 0;
}
