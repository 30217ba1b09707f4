/* stdio_frame — see stdio_frame.h.
 *
 * The decoder is a small state machine over one growable buffer that holds,
 * at any time, only the part of the current unit not yet complete: the
 * first bytes while the framing is being detected, the current NDJSON line,
 * the current header line, or a Content-Length body. A unit that arrives
 * whole inside one input chunk is returned in place, without a copy. */
#include "stdio_frame.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A header line longer than this is not a header a client would send. */
#define HEADER_LINE_MAX 4096

static const char BOM[3] = {'\xEF', '\xBB', '\xBF'};

enum state {
    ST_DETECT,    /* framing unknown: reading the first bytes */
    ST_LINE,      /* NDJSON: reading a line */
    ST_SKIP_LINE, /* dropping the rest of a bad line (then ST_LINE/ST_HEADER) */
    ST_HEADER,    /* Content-Length: reading a header line */
    ST_BODY,      /* Content-Length: reading `length` bytes of body */
    ST_SKIP_BODY, /* Content-Length: dropping `skip` bytes of a rejected body */
};

struct stdio_frame_decoder {
    size_t max;
    enum stdio_framing framing;
    enum state state;
    char *buf;
    size_t len, cap;
    int release; /* buf holds the message last returned: empty it first */
    int bom;     /* the current message began with a byte order mark */
    /* Content-Length framing: the header block being read. */
    int headers; /* header lines seen in this block */
    int have_length;
    uint64_t length; /* saturates at UINT64_MAX */
    uint64_t skip;
};

struct stdio_frame_decoder *stdio_frame_decoder_new(size_t max_message)
{
    struct stdio_frame_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    /* max + 1 must not overflow (a line may carry a '\r' beyond max). */
    d->max = max_message == 0             ? STDIO_FRAME_DEFAULT_MAX
             : max_message > SIZE_MAX / 2 ? SIZE_MAX / 2
                                          : max_message;
    d->state = ST_DETECT;
    return d;
}

void stdio_frame_decoder_free(struct stdio_frame_decoder *d)
{
    if (!d)
        return;
    free(d->buf);
    free(d);
}

enum stdio_framing stdio_frame_framing(const struct stdio_frame_decoder *d)
{
    return d->framing;
}

/* ---- helpers ---- */

static int reserve(struct stdio_frame_decoder *d, size_t need)
{
    if (need <= d->cap)
        return 0;
    size_t cap = d->cap ? d->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *b = realloc(d->buf, cap);
    if (!b)
        return -1;
    d->buf = b;
    d->cap = cap;
    return 0;
}

static int append(struct stdio_frame_decoder *d, const char *p, size_t n)
{
    if (reserve(d, d->len + n) != 0)
        return -1;
    memcpy(d->buf + d->len, p, n);
    d->len += n;
    return 0;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int is_blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!is_space(p[i]))
            return 0;
    return 1;
}

/* An HTTP header name (RFC 9110 token). A JSON line has a colon too, but
 * its name part ('{"id"') is never a token, so it is caught as bad framing
 * instead of being skipped as an unknown header. */
static int is_token(const char *p, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("!#$%&'*+-.^_`|~", c)))
            return 0;
    }
    return 1;
}

static int starts_with_bom(const char *p, size_t n)
{
    return n >= sizeof BOM && memcmp(p, BOM, sizeof BOM) == 0;
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* Case-insensitive: does p[0..n) equal the NUL-terminated word? */
static int equals_word(const char *p, size_t n, const char *word)
{
    if (strlen(word) != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)p[i]) != word[i])
            return 0;
    return 1;
}

/* Detection: 1 when p[0..n) starts with one of the headers that announce
 * Content-Length framing, 0 while it may still become one, -1 when not. */
static int header_prefix(const char *p, size_t n)
{
    static const char *const names[] = {"content-length:", "content-type:"};
    int maybe = 0;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        size_t wl = strlen(names[k]), i;
        for (i = 0; i < n && i < wl; i++)
            if (lower((unsigned char)p[i]) != names[k][i])
                break;
        if (i == wl)
            return 1;
        if (i == n)
            maybe = 1;
    }
    return maybe ? 0 : -1;
}

static int emit_error(struct stdio_frame_event *ev, enum stdio_frame_error e)
{
    ev->kind = STDIO_FRAME_ERROR;
    ev->data = NULL;
    ev->len = 0;
    ev->error = e;
    return 1;
}

static int emit_message(struct stdio_frame_event *ev, const char *data, size_t len)
{
    ev->kind = STDIO_FRAME_MESSAGE;
    ev->data = data;
    ev->len = len;
    ev->error = STDIO_FRAME_ERR_NONE;
    return 1;
}

static void reset_block(struct stdio_frame_decoder *d)
{
    d->headers = 0;
    d->have_length = 0;
    d->length = 0;
    d->bom = 0;
}

static enum state line_state(const struct stdio_frame_decoder *d)
{
    return d->framing == STDIO_FRAMING_CONTENT_LENGTH ? ST_HEADER : ST_LINE;
}

/* Drops the rest of the current line (up to its newline). */
static void skip_line(struct stdio_frame_decoder *d)
{
    d->len = 0;
    d->bom = 0;
    d->state = ST_SKIP_LINE;
}

/* ---- states ---- */

/* One byte at a time: detection looks at a handful of bytes, once. */
static int step_detect(struct stdio_frame_decoder *d, const char *in, size_t len, size_t *i,
                       struct stdio_frame_event *ev)
{
    (void)len;
    char c = in[*i];
    if (d->len == 0 && is_space(c)) {
        if (d->bom) {
            /* A BOM then white space: no framing header follows, so this
             * is (the start of) a line; the line reports the BOM. */
            d->framing = STDIO_FRAMING_NDJSON;
            d->state = ST_LINE;
            return 0;
        }
        (*i)++;
        return 0;
    }
    if (c == '\n') {
        /* The first line ended before it could be a header ("Content\n"):
         * a line, and the newline is the line's to see. */
        d->framing = STDIO_FRAMING_NDJSON;
        d->state = ST_LINE;
        return 0;
    }
    if (append(d, &c, 1) != 0) {
        (*i)++;
        d->framing = STDIO_FRAMING_NDJSON;
        skip_line(d);
        return emit_error(ev, STDIO_FRAME_ERR_MEMORY);
    }
    (*i)++;
    unsigned char b0 = (unsigned char)d->buf[0];
    int decided_cl = 0;
    if (b0 == 0xEF && d->len <= sizeof BOM && memcmp(d->buf, BOM, d->len) == 0) {
        if (d->len == sizeof BOM) {
            /* Detection goes on after the mark; the message reports it. */
            d->bom = 1;
            d->len = 0;
        }
        return 0;
    }
    if (b0 != '{' && b0 != '[') {
        int m = header_prefix(d->buf, d->len);
        if (m == 0)
            return 0;
        decided_cl = m == 1;
    }
    d->framing = decided_cl ? STDIO_FRAMING_CONTENT_LENGTH : STDIO_FRAMING_NDJSON;
    d->state = decided_cl ? ST_HEADER : ST_LINE;
    return 0;
}

static int step_skip_line(struct stdio_frame_decoder *d, const char *in, size_t len, size_t *i)
{
    const char *nl = memchr(in + *i, '\n', len - *i);
    if (!nl) {
        *i = len;
        return 0;
    }
    *i = (size_t)(nl - in) + 1;
    d->state = line_state(d);
    return 0;
}

/* The current line of p[0..take) + newline, in place when nothing of it is
 * buffered. Returns -1 when it cannot be buffered. */
static int whole_line(struct stdio_frame_decoder *d, const char *p, size_t take, const char **line,
                      size_t *ll)
{
    if (d->len == 0) {
        *line = p;
        *ll = take;
    } else {
        if (append(d, p, take) != 0)
            return -1;
        *line = d->buf;
        *ll = d->len;
    }
    if (*ll && (*line)[*ll - 1] == '\r')
        (*ll)--;
    return 0;
}

static int step_line(struct stdio_frame_decoder *d, const char *in, size_t len, size_t *i,
                     struct stdio_frame_event *ev)
{
    const char *p = in + *i;
    size_t n = len - *i;
    const char *nl = memchr(p, '\n', n);
    size_t take = nl ? (size_t)(nl - p) : n;
    /* max + 1: the line may still end in "\r\n". Checked before buffering,
     * so an endless line costs nothing beyond max. */
    if (d->len + take > d->max + 1) {
        *i += take + (nl ? 1 : 0);
        if (nl) {
            d->len = 0;
            d->bom = 0;
        } else {
            skip_line(d);
        }
        return emit_error(ev, STDIO_FRAME_ERR_TOO_LARGE);
    }
    if (!nl) {
        *i = len;
        if (append(d, p, take) != 0) {
            skip_line(d);
            return emit_error(ev, STDIO_FRAME_ERR_MEMORY);
        }
        return 0;
    }
    *i += take + 1;
    const char *line;
    size_t ll;
    int bom = d->bom;
    d->bom = 0;
    if (whole_line(d, p, take, &line, &ll) != 0) {
        d->len = 0;
        return emit_error(ev, STDIO_FRAME_ERR_MEMORY);
    }
    d->release = d->len > 0;
    bom = bom || starts_with_bom(line, ll);
    if (ll > d->max)
        return emit_error(ev, STDIO_FRAME_ERR_TOO_LARGE);
    if (bom)
        return emit_error(ev, STDIO_FRAME_ERR_BOM);
    if (is_blank(line, ll)) {
        d->len = 0;
        d->release = 0;
        return 0;
    }
    return emit_message(ev, line, ll);
}

/* A complete header line (without its line end). */
static int header_line(struct stdio_frame_decoder *d, const char *line, size_t ll,
                       struct stdio_frame_event *ev)
{
    if (d->headers == 0 && !d->bom && starts_with_bom(line, ll)) {
        d->bom = 1;
        line += sizeof BOM;
        ll -= sizeof BOM;
    }
    if (is_blank(line, ll)) {
        if (d->headers == 0) {
            if (!d->bom)
                return 0; /* a blank line between messages */
            reset_block(d);
            return emit_error(ev, STDIO_FRAME_ERR_BOM);
        }
        if (!d->have_length) {
            reset_block(d);
            return emit_error(ev, STDIO_FRAME_ERR_HEADER);
        }
        if (d->length > d->max) {
            d->skip = d->length;
            reset_block(d);
            d->state = ST_SKIP_BODY;
            return emit_error(ev, STDIO_FRAME_ERR_TOO_LARGE);
        }
        d->state = ST_BODY;
        if (d->length == 0) {
            /* Nothing to wait for: an empty message (it will not parse). */
            int bom = d->bom;
            reset_block(d);
            d->state = ST_HEADER;
            return bom ? emit_error(ev, STDIO_FRAME_ERR_BOM) : emit_message(ev, "", 0);
        }
        return 0;
    }
    d->headers++;
    const char *colon = memchr(line, ':', ll);
    if (!colon) {
        /* Not a header (a client sending NDJSON after all, or garbage):
         * this line is reported and the next one starts a new block, so
         * the decoder resynchronises on the next real header. */
        reset_block(d);
        return emit_error(ev, STDIO_FRAME_ERR_HEADER);
    }
    size_t nl = (size_t)(colon - line);
    while (nl > 0 && (line[nl - 1] == ' ' || line[nl - 1] == '\t'))
        nl--;
    if (!is_token(line, nl)) {
        reset_block(d);
        return emit_error(ev, STDIO_FRAME_ERR_HEADER);
    }
    if (!equals_word(line, nl, "content-length"))
        return 0; /* Content-Type and the like: nothing we need */
    const char *v = colon + 1, *end = line + ll;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    if (v == end) {
        reset_block(d);
        return emit_error(ev, STDIO_FRAME_ERR_HEADER);
    }
    uint64_t value = 0;
    for (; v < end; v++) {
        if (*v < '0' || *v > '9') {
            reset_block(d);
            return emit_error(ev, STDIO_FRAME_ERR_HEADER);
        }
        unsigned digit = (unsigned)(*v - '0');
        /* Saturate: any length this large is simply too large. */
        value = value > (UINT64_MAX - digit) / 10 ? UINT64_MAX : value * 10 + digit;
    }
    if (d->have_length && d->length != value) {
        reset_block(d);
        return emit_error(ev, STDIO_FRAME_ERR_HEADER);
    }
    d->have_length = 1;
    d->length = value;
    return 0;
}

static int step_header(struct stdio_frame_decoder *d, const char *in, size_t len, size_t *i,
                       struct stdio_frame_event *ev)
{
    const char *p = in + *i;
    size_t n = len - *i;
    const char *nl = memchr(p, '\n', n);
    size_t take = nl ? (size_t)(nl - p) : n;
    if (d->len + take > HEADER_LINE_MAX) {
        *i += take + (nl ? 1 : 0);
        if (nl) {
            d->len = 0;
            reset_block(d);
        } else {
            reset_block(d);
            skip_line(d);
        }
        return emit_error(ev, STDIO_FRAME_ERR_HEADER);
    }
    if (!nl) {
        *i = len;
        if (append(d, p, take) != 0) {
            reset_block(d);
            skip_line(d);
            return emit_error(ev, STDIO_FRAME_ERR_MEMORY);
        }
        return 0;
    }
    *i += take + 1;
    const char *line;
    size_t ll;
    if (whole_line(d, p, take, &line, &ll) != 0) {
        d->len = 0;
        reset_block(d);
        return emit_error(ev, STDIO_FRAME_ERR_MEMORY);
    }
    int got = header_line(d, line, ll, ev);
    d->len = 0; /* header lines are never returned: no need to keep them */
    return got;
}

static int finish_body(struct stdio_frame_decoder *d, const char *body, size_t len,
                       struct stdio_frame_event *ev)
{
    int bom = d->bom || starts_with_bom(body, len);
    reset_block(d);
    d->state = ST_HEADER;
    return bom ? emit_error(ev, STDIO_FRAME_ERR_BOM) : emit_message(ev, body, len);
}

static int step_body(struct stdio_frame_decoder *d, const char *in, size_t len, size_t *i,
                     struct stdio_frame_event *ev)
{
    size_t need = (size_t)d->length - d->len; /* length <= max: fits */
    size_t n = len - *i;
    size_t take = n < need ? n : need;
    const char *p = in + *i;
    *i += take;
    if (d->len == 0 && take == need)
        return finish_body(d, p, take, ev);
    /* Reserved whole on first use: the size is known, so grow once. */
    if (reserve(d, (size_t)d->length) != 0) {
        d->skip = need - take;
        d->len = 0;
        reset_block(d);
        d->state = d->skip ? ST_SKIP_BODY : ST_HEADER;
        return emit_error(ev, STDIO_FRAME_ERR_MEMORY);
    }
    memcpy(d->buf + d->len, p, take);
    d->len += take;
    if (d->len < d->length)
        return 0;
    d->release = 1;
    return finish_body(d, d->buf, d->len, ev);
}

static int step_skip_body(struct stdio_frame_decoder *d, size_t len, size_t *i)
{
    uint64_t n = len - *i;
    uint64_t take = n < d->skip ? n : d->skip;
    *i += (size_t)take;
    d->skip -= take;
    if (d->skip == 0)
        d->state = ST_HEADER;
    return 0;
}

int stdio_frame_decode(struct stdio_frame_decoder *d, const char *in, size_t len, size_t *used,
                       struct stdio_frame_event *ev)
{
    if (d->release) {
        d->len = 0;
        d->release = 0;
    }
    size_t i = 0;
    int got = 0;
    while (i < len && !got) {
        switch (d->state) {
        case ST_DETECT:
            got = step_detect(d, in, len, &i, ev);
            break;
        case ST_LINE:
            got = step_line(d, in, len, &i, ev);
            break;
        case ST_SKIP_LINE:
            got = step_skip_line(d, in, len, &i);
            break;
        case ST_HEADER:
            got = step_header(d, in, len, &i, ev);
            break;
        case ST_BODY:
            got = step_body(d, in, len, &i, ev);
            break;
        case ST_SKIP_BODY:
            got = step_skip_body(d, len, &i);
            break;
        }
    }
    /* A zero-length body is complete the moment its headers end, so a
     * decoder left in ST_BODY with nothing to read cannot happen. */
    *used = i;
    return got;
}

int stdio_frame_finish(struct stdio_frame_decoder *d, struct stdio_frame_event *ev)
{
    if (d->release) {
        d->len = 0;
        d->release = 0;
    }
    int got = 0;
    switch (d->state) {
    case ST_DETECT:
        if (d->len == 0 && !d->bom)
            break;
        /* Too short to be a header: whatever it is, it is a last line. */
        d->framing = STDIO_FRAMING_NDJSON;
        /* fall through */
    case ST_LINE: {
        size_t ll = d->len;
        if (ll && d->buf[ll - 1] == '\r')
            ll--;
        if (d->bom || starts_with_bom(d->buf, ll)) {
            got = emit_error(ev, STDIO_FRAME_ERR_BOM);
        } else if (ll > d->max) {
            got = emit_error(ev, STDIO_FRAME_ERR_TOO_LARGE);
        } else if (!is_blank(d->buf, ll)) {
            got = emit_message(ev, d->buf, ll);
            d->release = 1;
        }
        if (!got || ev->kind != STDIO_FRAME_MESSAGE)
            d->len = 0;
        break;
    }
    case ST_HEADER:
        if (d->len > 0 || d->headers > 0 || d->bom)
            got = emit_error(ev, STDIO_FRAME_ERR_TRUNCATED);
        d->len = 0;
        break;
    case ST_BODY:
        got = emit_error(ev, STDIO_FRAME_ERR_TRUNCATED);
        d->len = 0;
        break;
    case ST_SKIP_LINE:
    case ST_SKIP_BODY:
        d->len = 0;
        break;
    }
    reset_block(d);
    d->skip = 0;
    d->state = d->framing == STDIO_FRAMING_UNKNOWN ? ST_DETECT : line_state(d);
    return got;
}

/* ---- errors ---- */

int stdio_frame_error_code(enum stdio_frame_error e)
{
    switch (e) {
    case STDIO_FRAME_ERR_TOO_LARGE:
        return -32600;
    case STDIO_FRAME_ERR_MEMORY:
        return -32603;
    default:
        return -32700;
    }
}

const char *stdio_frame_error_message(enum stdio_frame_error e)
{
    switch (e) {
    case STDIO_FRAME_ERR_BOM:
        return "Parse error: a UTF-8 byte order mark is not allowed";
    case STDIO_FRAME_ERR_TOO_LARGE:
        return "Invalid Request: message larger than the server accepts";
    case STDIO_FRAME_ERR_HEADER:
        return "Parse error: bad Content-Length framing";
    case STDIO_FRAME_ERR_TRUNCATED:
        return "Parse error: input ended inside a message";
    case STDIO_FRAME_ERR_MEMORY:
        return "Internal error: out of memory";
    default:
        return "Parse error";
    }
}

/* ---- encoding ---- */

size_t stdio_frame_prefix(enum stdio_framing f, size_t len, char *out, size_t cap)
{
    if (cap == 0)
        return 0;
    if (f != STDIO_FRAMING_CONTENT_LENGTH) {
        out[0] = '\0';
        return 0;
    }
    int n = snprintf(out, cap, "Content-Length: %zu\r\n\r\n", len);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

const char *stdio_frame_suffix(enum stdio_framing f)
{
    return f == STDIO_FRAMING_CONTENT_LENGTH ? "" : "\n";
}

char *stdio_frame_encode(enum stdio_framing f, const char *msg, size_t len, size_t *out_len)
{
    char prefix[STDIO_FRAME_PREFIX_MAX];
    size_t pl = stdio_frame_prefix(f, len, prefix, sizeof prefix);
    const char *suffix = stdio_frame_suffix(f);
    size_t sl = strlen(suffix);
    if (len > SIZE_MAX - pl - sl - 1)
        return NULL;
    char *out = malloc(pl + len + sl + 1);
    if (!out)
        return NULL;
    memcpy(out, prefix, pl);
    if (len)
        memcpy(out + pl, msg, len);
    memcpy(out + pl + len, suffix, sl);
    out[pl + len + sl] = '\0';
    *out_len = pl + len + sl;
    return out;
}
