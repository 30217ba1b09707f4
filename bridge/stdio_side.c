/* stdio_side — see stdio_side.h. */
#include "stdio_side.h"

#include "stdio_frame.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

struct stdio_side {
    int in_fd, out_fd;
    int out_broken;
    struct stdio_frame_decoder *dec;
    char buf[64 * 1024];
};

struct stdio_side *stdio_side_new(int in_fd, int out_fd, size_t max_message)
{
    struct stdio_side *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->in_fd = in_fd;
    s->out_fd = out_fd;
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

static void deliver(const struct stdio_side_handler *h, const struct stdio_frame_event *ev)
{
    if (ev->kind == STDIO_FRAME_MESSAGE)
        h->message(h->ud, ev->data, ev->len);
    else
        h->frame_error(h->ud, stdio_frame_error_code(ev->error),
                       stdio_frame_error_message(ev->error));
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
        if (stdio_frame_finish(s->dec, &ev))
            deliver(h, &ev);
        return n == 0 ? 1 : -1;
    }
    size_t off = 0, used;
    while (off < (size_t)n) {
        if (!stdio_frame_decode(s->dec, s->buf + off, (size_t)n - off, &used, &ev))
            break;
        off += used;
        deliver(h, &ev);
    }
    return 0;
}

int stdio_side_write(struct stdio_side *s, const char *json, size_t len)
{
    if (s->out_broken)
        return -1;
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
