/* test_stdio_frame — the stdio framing codec: framing detection, NDJSON and
 * Content-Length decoding, errors (BOM, oversize, bad headers, truncation)
 * and the encoder.
 *
 * Every decoding case is run with the input split at every byte boundary
 * (and fed one byte at a time), each piece in its own heap buffer freed as
 * soon as it is consumed, so a decoder that keeps a pointer into old input
 * fails under AddressSanitizer; the events must not depend on the split.
 *
 * malloc and realloc are wrapped (-Wl,--wrap) so the test can see the
 * largest block the decoder asks for (an endless line or a huge
 * Content-Length must not grow it past the limit) and make buffer growth
 * fail (the out-of-memory path answers and skips, then decoding goes on). */
#include "check.h"
#include "stdio_frame.h"

#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_realloc(void *p, size_t n);
/* The linker routes malloc/realloc here (-Wl,--wrap). */
void *__wrap_malloc(size_t n);
void *__wrap_realloc(void *p, size_t n);
static size_t largest_alloc;
static int fail_realloc;

void *__wrap_malloc(size_t n)
{
    if (n > largest_alloc)
        largest_alloc = n;
    return __real_malloc(n);
}

void *__wrap_realloc(void *p, size_t n)
{
    if (fail_realloc)
        return NULL;
    if (n > largest_alloc)
        largest_alloc = n;
    return __real_realloc(p, n);
}

/* Events rendered as "M:<payload>" / "E:<error>", joined by '|'. */
struct trace {
    char *s;
    size_t len, cap;
};

static void put(struct trace *t, const char *p, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        while (cap < t->len + n + 1)
            cap *= 2;
        t->s = realloc(t->s, cap);
        t->cap = cap;
    }
    memcpy(t->s + t->len, p, n);
    t->len += n;
    t->s[t->len] = '\0';
}

static const char *error_name(enum stdio_frame_error e)
{
    switch (e) {
    case STDIO_FRAME_ERR_BOM:
        return "bom";
    case STDIO_FRAME_ERR_TOO_LARGE:
        return "large";
    case STDIO_FRAME_ERR_HEADER:
        return "header";
    case STDIO_FRAME_ERR_TRUNCATED:
        return "truncated";
    case STDIO_FRAME_ERR_MEMORY:
        return "memory";
    default:
        return "?";
    }
}

static void record(struct trace *t, const struct stdio_frame_event *ev)
{
    if (t->len)
        put(t, "|", 1);
    if (ev->kind == STDIO_FRAME_MESSAGE) {
        put(t, "M:", 2);
        put(t, ev->data, ev->len);
    } else {
        put(t, "E:", 2);
        put(t, error_name(ev->error), strlen(error_name(ev->error)));
    }
}

/* Feeds one piece (copied to its own heap buffer, freed afterwards). */
static void feed(struct stdio_frame_decoder *d, struct trace *t, const char *p, size_t n)
{
    char *piece = __real_malloc(n ? n : 1); /* not the decoder's: not counted */
    memcpy(piece, p, n);
    size_t off = 0;
    int rounds = 0;
    while (off < n) {
        size_t used = 0;
        struct stdio_frame_event ev;
        int got = stdio_frame_decode(d, piece + off, n - off, &used, &ev);
        if (got)
            record(t, &ev);
        else if (used != n - off)
            put(t, "|!short", 7); /* no event must mean all consumed */
        off += used;
        if (++rounds > 100000) {
            put(t, "|!loop", 6);
            break;
        }
    }
    free(piece);
}

static void finish(struct stdio_frame_decoder *d, struct trace *t)
{
    struct stdio_frame_event ev;
    if (stdio_frame_finish(d, &ev))
        record(t, &ev);
}

/* Decodes in with the given cut points (ascending); returns the trace
 * (caller frees) and the detected framing in *framing. */
static char *decode_cuts(size_t max, const char *in, size_t len, const size_t *cuts, int ncuts,
                         enum stdio_framing *framing)
{
    struct stdio_frame_decoder *d = stdio_frame_decoder_new(max);
    struct trace t = {0};
    put(&t, "", 0);
    size_t from = 0;
    for (int k = 0; k <= ncuts; k++) {
        size_t to = k < ncuts ? cuts[k] : len;
        feed(d, &t, in + from, to - from);
        from = to;
    }
    finish(d, &t);
    if (framing)
        *framing = stdio_frame_framing(d);
    stdio_frame_decoder_free(d);
    return t.s;
}

/* The case as a whole, split in two at every boundary, and byte by byte:
 * every run must give `want` and the framing `wantf`. */
static void check_case(const char *name, size_t max, const char *in, size_t len, const char *want,
                       enum stdio_framing wantf)
{
    enum stdio_framing f;
    char *got = decode_cuts(max, in, len, NULL, 0, &f);
    if (!check_record(strcmp(got, want) == 0 && f == wantf, __FILE__, __LINE__, name))
        printf("     whole: got \"%s\" (framing %d), want \"%s\" (framing %d)\n", got, f, want,
               wantf);
    free(got);

    int split_ok = 1;
    for (size_t cut = 0; cut <= len && split_ok; cut++) {
        got = decode_cuts(max, in, len, &cut, 1, &f);
        if (strcmp(got, want) != 0 || f != wantf) {
            printf("     split at %zu: got \"%s\", want \"%s\"\n", cut, got, want);
            split_ok = 0;
        }
        free(got);
    }
    check_record(split_ok, __FILE__, __LINE__, name);

    size_t *cuts = malloc((len ? len : 1) * sizeof *cuts);
    for (size_t i = 0; i < len; i++)
        cuts[i] = i;
    got = decode_cuts(max, in, len, cuts, (int)len, &f);
    if (!check_record(strcmp(got, want) == 0 && f == wantf, __FILE__, __LINE__, name))
        printf("     byte by byte: got \"%s\", want \"%s\"\n", got, want);
    free(got);
    free(cuts);
}

#define CASE(name, max, in, want, f) check_case(name, max, in, sizeof(in) - 1, want, f)

#define ND STDIO_FRAMING_NDJSON
#define CL STDIO_FRAMING_CONTENT_LENGTH

static void test_ndjson(void)
{
    CASE("ndjson: two messages in one chunk", 1024, "{\"a\":1}\n{\"b\":2}\n",
         "M:{\"a\":1}|M:{\"b\":2}", ND);
    CASE("ndjson: a batch array selects NDJSON too", 1024, "[{\"a\":1}]\n", "M:[{\"a\":1}]", ND);
    CASE("ndjson: CRLF line ends and blank lines", 1024,
         "\n\r\n  {\"a\":1}\r\n\r\n\n[1,2]\r\n   \n\t\r\n", "M:{\"a\":1}|M:[1,2]", ND);
    CASE("ndjson: inner leading white space kept (JSON allows it)", 1024, "{}\n  {\"x\":1}\n",
         "M:{}|M:  {\"x\":1}", ND);
    CASE("ndjson: last line without newline is a message at EOF", 1024, "{\"a\":1}\n{\"b\":2}",
         "M:{\"a\":1}|M:{\"b\":2}", ND);
    CASE("ndjson: garbage first line selects NDJSON", 1024, "hello\n{\"a\":1}\n",
         "M:hello|M:{\"a\":1}", ND);
    CASE("ndjson: a short first line that starts like a header", 1024, "Content\n{\"a\":1}\n",
         "M:Content|M:{\"a\":1}", ND);
    CASE("ndjson: header-like line after detection is just a line", 1024,
         "{}\nContent-Length: 2\r\n\r\n{}\n", "M:{}|M:Content-Length: 2|M:{}", ND);
    CASE("ndjson: UTF-8 payload passes unchanged", 1024, "{\"t\":\"\xC3\xA9\xE2\x82\xAC\"}\n",
         "M:{\"t\":\"\xC3\xA9\xE2\x82\xAC\"}", ND);
    CASE("ndjson: nothing but white space", 1024, " \n\r\n\t", "", STDIO_FRAMING_UNKNOWN);
    CASE("empty input", 1024, "", "", STDIO_FRAMING_UNKNOWN);
}

static void test_content_length(void)
{
    CASE("cl: two messages back to back", 1024,
         "Content-Length: 7\r\n\r\n{\"a\":1}Content-Length: 5\r\n\r\n[1,2]", "M:{\"a\":1}|M:[1,2]",
         CL);
    CASE("cl: extra headers, any case, Content-Type first", 1024,
         "content-type: application/vscode-jsonrpc; charset=utf-8\r\n"
         "CONTENT-LENGTH:7\r\nX-Other: 1\r\n\r\n{\"a\":1}",
         "M:{\"a\":1}", CL);
    CASE("cl: blank lines between messages, leading white space", 1024,
         "\r\n Content-Length: 2\r\n\r\n{}\r\n\nContent-Length:  2 \r\n\r\n[]\n", "M:{}|M:[]", CL);
    CASE("cl: bare LF line ends in headers", 1024, "Content-Length: 2\n\n{}", "M:{}", CL);
    CASE("cl: body with newlines and header-like text", 1024,
         "Content-Length: 26\r\n\r\n{\"a\":\n\"Content-Length: 3\"}\r\n",
         "M:{\"a\":\n\"Content-Length: 3\"}", CL);
    CASE("cl: length counts UTF-8 bytes", 1024,
         "Content-Length: 13\r\n\r\n{\"t\":\"\xC3\xA9\xE2\x82\xAC\"}",
         "M:{\"t\":\"\xC3\xA9\xE2\x82\xAC\"}", CL);
    CASE("cl: zero length is an (empty) message", 1024, "Content-Length: 0\r\n\r\n", "M:", CL);
    CASE("cl: missing Content-Length", 1024,
         "Content-Type: application/json\r\n\r\nContent-Length: 2\r\n\r\n{}", "E:header|M:{}", CL);
    CASE("cl: bad value, then a good message", 1024,
         "Content-Length: 12x\r\n\r\nContent-Length: 2\r\n\r\n{}", "E:header|M:{}", CL);
    CASE("cl: empty value", 1024, "Content-Length: \r\n\r\nContent-Length: 2\r\n\r\n{}",
         "E:header|M:{}", CL);
    CASE("cl: conflicting duplicate lengths", 1024,
         "Content-Length: 2\r\nContent-Length: 3\r\n\r\nContent-Length: 2\r\n\r\n{}",
         "E:header|M:{}", CL);
    CASE("cl: a JSON line with a colon is not a header", 1024,
         "Content-Length: 2\r\n\r\n{}{\"id\":1}\r\nContent-Length: 2\r\n\r\n[]",
         "M:{}|E:header|M:[]", CL);
    CASE("cl: equal duplicate lengths are fine", 1024,
         "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}", "M:{}", CL);
    CASE("cl: an NDJSON line after detection is a framing error, then resync", 1024,
         "Content-Length: 2\r\n\r\n{}{\"x\":1}\nContent-Length: 2\r\n\r\n[]", "M:{}|E:header|M:[]",
         CL);
    CASE("cl: truncated body at EOF", 1024, "Content-Length: 10\r\n\r\n{\"a\"", "E:truncated", CL);
    CASE("cl: truncated headers at EOF", 1024, "Content-Length: 10\r\n", "E:truncated", CL);
    CASE("cl: detection on a header name cut short at EOF", 1024, "Content-Len", "M:Content-Len",
         ND);
}

static void test_bom(void)
{
    CASE("bom: first NDJSON line rejected, next decoded", 1024,
         "\xEF\xBB\xBF{\"a\":1}\n{\"b\":2}\n", "E:bom|M:{\"b\":2}", ND);
    CASE("bom: on a later NDJSON line", 1024, "{}\n\xEF\xBB\xBF{\"a\":1}\n[]\n", "M:{}|E:bom|M:[]",
         ND);
    CASE("bom: alone on a line", 1024, "\xEF\xBB\xBF\n{}\n", "E:bom|M:{}", ND);
    CASE("bom: alone at EOF", 1024, "\xEF\xBB\xBF", "E:bom", ND);
    CASE("bom: before Content-Length headers (framing still detected)", 1024,
         "\xEF\xBB\xBF"
         "Content-Length: 7\r\n\r\n{\"a\":1}Content-Length: 7\r\n\r\n{\"b\":2}",
         "E:bom|M:{\"b\":2}", CL);
    CASE("bom: at the start of a Content-Length body", 1024,
         "Content-Length: 10\r\n\r\n\xEF\xBB\xBF{\"a\":1}Content-Length: 2\r\n\r\n{}", "E:bom|M:{}",
         CL);
    CASE("bom: before a later header block", 1024,
         "Content-Length: 2\r\n\r\n{}\xEF\xBB\xBF"
         "Content-Length: 2\r\n\r\n[]Content-Length: 2\r\n\r\n{}",
         "M:{}|E:bom|M:{}", CL);
    CASE("not a bom: EF then other bytes is a line that will not parse", 1024, "\xEF\xBB{}\n{}\n",
         "M:\xEF\xBB{}|M:{}", ND);
}

static void test_oversize(void)
{
    /* max 16: "{\"k\":\"0123456789\"}" is 18 bytes. */
    CASE("large: NDJSON line skipped, next decoded", 16, "{\"k\":\"0123456789\"}\n{\"a\":1}\n",
         "E:large|M:{\"a\":1}", ND);
    CASE("large: NDJSON exactly max is fine, CRLF not counted", 16,
         "{\"k\":\"01234567\"}\r\n{\"k\":\"01234567\"}\n",
         "M:{\"k\":\"01234567\"}|M:{\"k\":\"01234567\"}", ND);
    CASE("large: NDJSON max+1", 16, "{\"k\":\"012345678\"}\n{}\n", "E:large|M:{}", ND);
    CASE("large: several in a row", 8, "{\"a\":\"xxxxxxxx\"}\n{\"b\":\"yyyyyyyyy\"}\n{}\n",
         "E:large|E:large|M:{}", ND);
    CASE("large: last NDJSON line over max at EOF", 4, "{}\n{\"a\":1}", "M:{}|E:large", ND);
    CASE("large: Content-Length over max, body skipped", 16,
         "Content-Length: 18\r\n\r\n{\"k\":\"0123456789\"}Content-Length: 7\r\n\r\n{\"a\":1}",
         "E:large|M:{\"a\":1}", CL);
    CASE("large: Content-Length exactly max", 7, "Content-Length: 7\r\n\r\n{\"a\":1}",
         "M:{\"a\":1}", CL);
    CASE("large: absurd Content-Length saturates", 16,
         "Content-Length: 99999999999999999999999999\r\n\r\n{}", "E:large", CL);

    /* Reported when the limit is crossed, not when the line ends: an
     * endless line gets its answer at once and costs nothing. */
    struct stdio_frame_decoder *d = stdio_frame_decoder_new(16);
    struct trace t = {0};
    put(&t, "", 0);
    feed(d, &t, "{\"a\":1}\n", 8);
    char junk[4096];
    memset(junk, 'x', sizeof junk);
    junk[0] = '{';
    for (int i = 0; i < 256; i++)
        feed(d, &t, junk, sizeof junk); /* 1 MiB, no newline */
    CHECK_STR(t.s, "M:{\"a\":1}|E:large");
    feed(d, &t, "\n{}\n", 4);
    CHECK_STR(t.s, "M:{\"a\":1}|E:large|M:{}");
    free(t.s);
    stdio_frame_decoder_free(d);

    /* A Content-Length over the limit is answered as soon as the headers
     * end, before any of the body arrives. */
    d = stdio_frame_decoder_new(16);
    t = (struct trace){0};
    put(&t, "", 0);
    const char *h = "Content-Length: 1000000\r\n\r\n";
    feed(d, &t, h, strlen(h));
    CHECK_STR(t.s, "E:large");
    for (int i = 0; i < 244; i++)
        feed(d, &t, junk, sizeof junk); /* 999424 of the 1000000 bytes */
    feed(d, &t, junk, 1000000 - 244 * 4096);
    const char *next = "Content-Length: 2\r\n\r\n{}";
    feed(d, &t, next, strlen(next));
    CHECK_STR(t.s, "E:large|M:{}");
    free(t.s);
    stdio_frame_decoder_free(d);

    /* A header line past 4 KiB is reported before its end arrives. */
    d = stdio_frame_decoder_new(1024);
    t = (struct trace){0};
    put(&t, "", 0);
    const char *first = "Content-Length: 2\r\n\r\n{}X-Big: ";
    feed(d, &t, first, strlen(first));
    for (int i = 0; i < 4; i++)
        feed(d, &t, junk, sizeof junk);
    CHECK_STR(t.s, "M:{}|E:header");
    feed(d, &t, "\r\nContent-Length: 2\r\n\r\n[]", 25);
    CHECK_STR(t.s, "M:{}|E:header|M:[]");
    free(t.s);
    stdio_frame_decoder_free(d);
}

/* Memory stays bounded by the limit whatever the client sends. */
static void test_bounded_memory(void)
{
    const size_t max = 64 * 1024;
    char *junk = malloc(1 << 20);
    memset(junk, 'x', 1 << 20);
    junk[0] = '{';
    struct stdio_frame_decoder *d = stdio_frame_decoder_new(max);
    struct trace t = {0};
    put(&t, "", 0);
    feed(d, &t, "{}\n", 3);
    largest_alloc = 0;
    for (int i = 0; i < 16; i++) /* a 16 MiB line */
        feed(d, &t, junk, 1 << 20);
    feed(d, &t, "\n", 1);
    size_t line_peak = largest_alloc;
    CHECK_STR(t.s, "M:{}|E:large");
    /* A line just under the limit is buffered, in at most twice its size
     * (the buffer doubles). */
    largest_alloc = 0;
    feed(d, &t, junk, max - 1);
    feed(d, &t, "\n", 1);
    CHECK(largest_alloc <= 2 * (max + 1));
    CHECK(line_peak <= 2 * (max + 1));
    free(t.s);
    stdio_frame_decoder_free(d);

    d = stdio_frame_decoder_new(max);
    t = (struct trace){0};
    put(&t, "", 0);
    const char *h = "Content-Length: 16777216\r\n\r\n";
    largest_alloc = 0;
    feed(d, &t, h, strlen(h));
    for (int i = 0; i < 16; i++)
        feed(d, &t, junk, 1 << 20);
    const char *next = "Content-Length: 2\r\n\r\n{}";
    feed(d, &t, next, strlen(next));
    CHECK_STR(t.s, "E:large|M:{}");
    /* The skipped body was never buffered: header lines only. */
    CHECK(largest_alloc <= 256);
    free(t.s);
    stdio_frame_decoder_free(d);
    free(junk);
}

/* Out of memory while buffering: that message is answered and skipped,
 * and the decoder goes on. Each case primes the decoder (framing detected,
 * a 256-byte buffer), then sends a part that must be buffered beyond that
 * while growth fails, then the rest. */
static void test_out_of_memory(void)
{
    char pad[301];
    memset(pad, 'p', 300);
    pad[300] = '\0';
    char a[3][400];
    snprintf(a[0], sizeof a[0], "{\"a\":\"%s", pad); /* NDJSON line */
    snprintf(a[1], sizeof a[1], "Content-Length: 310\r\n\r\n{\"a\":\"%.100s", pad); /* body */
    snprintf(a[2], sizeof a[2], "X-Pad: %s", pad); /* header line */
    const char *prime[] = {"{}\n", "Content-Length: 2\r\n\r\n[]", "Content-Length: 2\r\n\r\n[]"};
    char rest[3][400];
    snprintf(rest[0], sizeof rest[0], "\"}\n{}\n");
    snprintf(rest[1], sizeof rest[1], "%.*s\"}Content-Length: 2\r\n\r\n{}", 310 - 6 - 100 - 2, pad);
    snprintf(rest[2], sizeof rest[2], "\r\nContent-Length: 2\r\n\r\n{}");
    const char *want[] = {"M:{}|E:memory|M:{}", "M:[]|E:memory|M:{}", "M:[]|E:memory|M:{}"};
    for (size_t k = 0; k < 3; k++) {
        struct stdio_frame_decoder *d = stdio_frame_decoder_new(1024);
        struct trace t = {0};
        put(&t, "", 0);
        feed(d, &t, prime[k], strlen(prime[k]));
        size_t off = 0, len = strlen(a[k]);
        while (off < len) {
            size_t used;
            struct stdio_frame_event ev;
            fail_realloc = 1;
            int got = stdio_frame_decode(d, a[k] + off, len - off, &used, &ev);
            fail_realloc = 0;
            if (got)
                record(&t, &ev);
            off += used;
        }
        feed(d, &t, rest[k], strlen(rest[k]));
        finish(d, &t);
        if (!CHECK(strcmp(t.s, want[k]) == 0))
            printf("     case %zu: got \"%s\", want \"%s\"\n", k, t.s, want[k]);
        free(t.s);
        stdio_frame_decoder_free(d);
    }
}

/* The returned payload is the input itself when a unit arrives whole: no
 * copy on the common path. */
static void test_zero_copy(void)
{
    struct stdio_frame_decoder *d = stdio_frame_decoder_new(1024);
    const char *in = "{\"a\":1}\n{\"b\":2}\n";
    size_t used;
    struct stdio_frame_event ev;
    /* Detection buffers the first bytes; after it, lines come in place. */
    CHECK_INT(stdio_frame_decode(d, "{}\n", 3, &used, &ev), 1);
    CHECK_INT(stdio_frame_decode(d, in, strlen(in), &used, &ev), 1);
    CHECK(ev.kind == STDIO_FRAME_MESSAGE && ev.data == in && ev.len == 7);
    CHECK_INT(used, 8);
    CHECK_INT(stdio_frame_decode(d, in + 8, strlen(in) - 8, &used, &ev), 1);
    CHECK(ev.data == in + 8);
    CHECK_INT(used, 8);
    CHECK_INT(stdio_frame_decode(d, in, 0, &used, &ev), 0);
    CHECK_INT(used, 0);
    stdio_frame_decoder_free(d);
}

static void test_encode(void)
{
    size_t n = 0;
    char *s = stdio_frame_encode(STDIO_FRAMING_NDJSON, "{\"a\":1}", 7, &n);
    CHECK_STR(s, "{\"a\":1}\n");
    CHECK_INT(n, 8);
    free(s);
    s = stdio_frame_encode(STDIO_FRAMING_UNKNOWN, "{}", 2, &n);
    CHECK_STR(s, "{}\n");
    free(s);
    const char *utf = "{\"t\":\"\xC3\xA9\"}"; /* 10 bytes, 9 characters */
    s = stdio_frame_encode(STDIO_FRAMING_CONTENT_LENGTH, utf, strlen(utf), &n);
    CHECK_STR(s, "Content-Length: 10\r\n\r\n{\"t\":\"\xC3\xA9\"}");
    CHECK_INT(n, 22 + 10);
    free(s);

    char prefix[STDIO_FRAME_PREFIX_MAX];
    CHECK_INT(stdio_frame_prefix(STDIO_FRAMING_CONTENT_LENGTH, (size_t)-1, prefix, sizeof prefix),
              strlen(prefix));
    CHECK(strlen(prefix) < sizeof prefix);
    CHECK_INT(stdio_frame_prefix(STDIO_FRAMING_NDJSON, 5, prefix, sizeof prefix), 0);
    CHECK_STR(stdio_frame_suffix(STDIO_FRAMING_NDJSON), "\n");
    CHECK_STR(stdio_frame_suffix(STDIO_FRAMING_CONTENT_LENGTH), "");

    /* Round trip: what the encoder writes, the decoder reads back. */
    const char *msgs[] = {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", "[1,2,3]", utf};
    for (int f = STDIO_FRAMING_NDJSON; f <= STDIO_FRAMING_CONTENT_LENGTH; f++) {
        struct trace all = {0};
        put(&all, "", 0);
        for (size_t i = 0; i < 3; i++) {
            char *e = stdio_frame_encode((enum stdio_framing)f, msgs[i], strlen(msgs[i]), &n);
            put(&all, e, n);
            free(e);
        }
        enum stdio_framing got_f;
        char *got = decode_cuts(1024, all.s, all.len, NULL, 0, &got_f);
        char want[256];
        snprintf(want, sizeof want, "M:%s|M:%s|M:%s", msgs[0], msgs[1], msgs[2]);
        CHECK_STR(got, want);
        CHECK_INT(got_f, f);
        free(got);
        free(all.s);
    }
}

static void test_errors(void)
{
    CHECK_INT(stdio_frame_error_code(STDIO_FRAME_ERR_BOM), -32700);
    CHECK_INT(stdio_frame_error_code(STDIO_FRAME_ERR_HEADER), -32700);
    CHECK_INT(stdio_frame_error_code(STDIO_FRAME_ERR_TRUNCATED), -32700);
    CHECK_INT(stdio_frame_error_code(STDIO_FRAME_ERR_TOO_LARGE), -32600);
    CHECK_INT(stdio_frame_error_code(STDIO_FRAME_ERR_MEMORY), -32603);
    CHECK(strstr(stdio_frame_error_message(STDIO_FRAME_ERR_BOM), "byte order mark") != NULL);
    CHECK(strncmp(stdio_frame_error_message(STDIO_FRAME_ERR_TOO_LARGE), "Invalid Request", 15) ==
          0);
}

/* The decoder is reusable after finish (a new stream, same framing). */
static void test_finish_resets(void)
{
    struct stdio_frame_decoder *d = stdio_frame_decoder_new(1024);
    struct trace t = {0};
    put(&t, "", 0);
    const char *a = "Content-Length: 5\r\n\r\n{\"a\"";
    feed(d, &t, a, strlen(a));
    finish(d, &t);
    const char *b = "Content-Length: 2\r\n\r\n{}";
    feed(d, &t, b, strlen(b));
    finish(d, &t);
    CHECK_STR(t.s, "E:truncated|M:{}");
    CHECK_INT(stdio_frame_framing(d), STDIO_FRAMING_CONTENT_LENGTH);
    free(t.s);
    stdio_frame_decoder_free(d);
}

int main(void)
{
    test_ndjson();
    test_content_length();
    test_bom();
    test_oversize();
    test_bounded_memory();
    test_out_of_memory();
    test_zero_copy();
    test_encode();
    test_errors();
    test_finish_resets();
    return check_summary();
}
