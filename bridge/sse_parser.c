/* sse_parser — see sse_parser.h. */
#include "sse_parser.h"

#include <stdlib.h>
#include <string.h>

void sse_parser_init(struct sse_parser *p, size_t max_event)
{
    memset(p, 0, sizeof *p);
    p->max_event = max_event ? max_event : 1;
    p->retry_ms = -1;
}

void sse_parser_free(struct sse_parser *p)
{
    free(p->line.p);
    free(p->data.p);
    free(p->type.p);
    free(p->id.p);
    size_t max = p->max_event;
    sse_parser_init(p, max);
}

/* Appends n bytes and keeps the buffer NUL-terminated. */
static int buf_add(struct sse_buf *b, const char *s, size_t n, size_t max)
{
    if (b->len + n > max)
        return -1;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *bigger = realloc(b->p, cap);
        if (!bigger)
            return -1;
        b->p = bigger;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

static int buf_set(struct sse_buf *b, const char *s, size_t n, size_t max)
{
    b->len = 0;
    return buf_add(b, s, n, max);
}

const char *sse_parser_last_id(const struct sse_parser *p)
{
    return p->id.len ? p->id.p : "";
}

static int dispatch(struct sse_parser *p, sse_event_fn fn, void *ud)
{
    int rc = 0;
    if (p->data.len) {
        /* the data buffer ends with the "\n" of its last data: line */
        p->data.p[--p->data.len] = '\0';
        struct sse_event ev = {
            .data = p->data.p,
            .len = p->data.len,
            .type = p->type.len ? p->type.p : "message",
            .last_id = sse_parser_last_id(p),
        };
        rc = fn(ud, &ev);
    }
    p->data.len = 0;
    p->type.len = 0;
    return rc;
}

static int field(struct sse_parser *p, const char *line, size_t len)
{
    const char *colon = memchr(line, ':', len);
    size_t name_len = colon ? (size_t)(colon - line) : len;
    const char *value = colon ? colon + 1 : line + len;
    size_t value_len = (size_t)(line + len - value);
    if (value_len && value[0] == ' ') {
        value++;
        value_len--;
    }
#define IS(name) (name_len == sizeof name - 1 && memcmp(line, name, name_len) == 0)
    if (IS("data")) {
        if (buf_add(&p->data, value, value_len, p->max_event) < 0 ||
            buf_add(&p->data, "\n", 1, p->max_event) < 0)
            return -1;
    } else if (IS("event")) {
        if (buf_set(&p->type, value, value_len, p->max_event) < 0)
            return -1;
    } else if (IS("id")) {
        if (!memchr(value, '\0', value_len) && buf_set(&p->id, value, value_len, p->max_event) < 0)
            return -1;
    } else if (IS("retry")) {
        long ms = 0;
        size_t i;
        for (i = 0; i < value_len && value[i] >= '0' && value[i] <= '9' && ms < 100000000; i++)
            ms = ms * 10 + (value[i] - '0');
        if (i == value_len && value_len)
            p->retry_ms = ms;
    }
#undef IS
    return 0;
}

/* One complete line (without its end). */
static int line_done(struct sse_parser *p, const char *line, size_t len, sse_event_fn fn, void *ud)
{
    if (len == 0)
        return dispatch(p, fn, ud);
    if (line[0] == ':')
        return 0;
    return field(p, line, len);
}

int sse_parser_feed(struct sse_parser *p, const char *buf, size_t len, sse_event_fn fn, void *ud)
{
    if (p->failed)
        return -1;
    size_t i = 0;
    if (!p->started) {
        /* the BOM may itself arrive in pieces: wait until 3 bytes decide */
        static const char bom[] = "\xEF\xBB\xBF";
        while (i < len && p->line.len < 3 &&
               (unsigned char)buf[i] == (unsigned char)bom[p->line.len]) {
            if (buf_add(&p->line, buf + i++, 1, p->max_event) < 0)
                goto fail;
        }
        if (p->line.len == 3) {
            p->line.len = 0;
            p->started = 1;
        } else if (i < len) {
            p->started = 1; /* not a BOM: what was held is the start of a line */
        } else {
            return 0;
        }
    }
    while (i < len) {
        if (p->skip_lf) {
            p->skip_lf = 0;
            if (buf[i] == '\n') {
                i++;
                continue;
            }
        }
        const char *start = buf + i;
        size_t n = len - i;
        const char *cr = memchr(start, '\r', n), *lf = memchr(start, '\n', n);
        const char *end = cr && (!lf || cr < lf) ? cr : lf;
        if (!end) {
            if (buf_add(&p->line, start, n, p->max_event) < 0)
                goto fail;
            return 0;
        }
        size_t piece = (size_t)(end - start);
        int rc;
        if (p->line.len) {
            if (buf_add(&p->line, start, piece, p->max_event) < 0)
                goto fail;
            size_t full = p->line.len;
            p->line.len = 0; /* the bytes stay in place: nothing adds to line meanwhile */
            rc = line_done(p, p->line.p, full, fn, ud);
        } else {
            rc = line_done(p, start, piece, fn, ud);
        }
        if (rc < 0)
            goto fail;
        p->skip_lf = *end == '\r';
        i += piece + 1;
        if (rc)
            return rc;
    }
    return 0;
fail:
    p->failed = 1;
    return -1;
}
