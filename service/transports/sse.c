/* sse — see sse.h. */
#include "sse.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sse_buf_free(struct sse_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

static int put(struct sse_buf *b, const char *s, size_t n)
{
    if (b->off == b->len)
        b->off = b->len = 0; /* drained: reuse from the start */
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

static int put_str(struct sse_buf *b, const char *s)
{
    return put(b, s, strlen(s));
}

int sse_event(struct sse_buf *b, const char *id, int64_t retry_ms, const char *data, size_t len)
{
    /* A line break in the id would end the field early and let the rest
     * of it be read as fields of its own. */
    if (id && strpbrk(id, "\r\n"))
        return -1;
    if (id && (put_str(b, "id: ") || put_str(b, id) || put_str(b, "\n")))
        return -1;
    if (retry_ms >= 0) {
        char line[40];
        snprintf(line, sizeof line, "retry: %" PRId64 "\n", retry_ms);
        if (put_str(b, line))
            return -1;
    }
    /* One data: line per line of data, including the empty one after a
     * final line break. */
    for (size_t i = 0;;) {
        size_t j = i;
        while (j < len && data[j] != '\n' && data[j] != '\r')
            j++;
        if (put_str(b, "data: ") || put(b, data + i, j - i) || put_str(b, "\n"))
            return -1;
        if (j >= len)
            break;
        if (data[j] == '\r' && j + 1 < len && data[j + 1] == '\n')
            j++;
        i = j + 1;
    }
    return put_str(b, "\n");
}

int sse_event_type(struct sse_buf *b, const char *type)
{
    if (strpbrk(type, "\r\n"))
        return -1;
    return put_str(b, "event: ") || put_str(b, type) || put_str(b, "\n") ? -1 : 0;
}

int sse_comment(struct sse_buf *b, const char *text)
{
    /* A line break would end the comment and start fields of its own. */
    if (strpbrk(text, "\r\n"))
        return -1;
    return put_str(b, ": ") || put_str(b, text) || put_str(b, "\n\n") ? -1 : 0;
}

size_t sse_drain(struct sse_buf *b, char *out, size_t max)
{
    size_t n = b->len - b->off;
    if (n > max)
        n = max;
    memcpy(out, b->data + b->off, n);
    b->off += n;
    return n;
}

size_t sse_pending(const struct sse_buf *b)
{
    return b->len - b->off;
}
