/* test_sse — the SSE writer (sse.c, pure): exact bytes for ids, retry
 * hints, empty and multi-line data (LF, CR, CRLF, LFCR, a final break),
 * NUL bytes kept, ids with a line break refused without writing anything,
 * comments, and draining in pieces of every size from 1 byte, with the
 * buffer reused once it is drained. */
#include "check.h"
#include "sse.h"

#include <stdlib.h>
#include <string.h>

/* Drains everything pending into a fresh NUL-terminated string, `piece`
 * bytes at a time; *len gets the byte count (data may hold NULs). */
static char *drain_all(struct sse_buf *b, size_t piece, size_t *len)
{
    size_t want = sse_pending(b), got = 0;
    char *out = malloc(want + 1);
    if (!out)
        return NULL;
    while (got < want) {
        size_t n = sse_drain(b, out + got, piece);
        if (n == 0 || n > piece)
            break;
        got += n;
    }
    out[got] = '\0';
    if (len)
        *len = got;
    return out;
}

struct event_case {
    const char *id;
    int64_t retry_ms;
    const char *data;
    size_t len;
    const char *want;
};

#define D(s) s, sizeof s - 1

static const struct event_case event_cases[] = {
    {NULL, -1, D("{}"), "data: {}\n\n"},
    {"s1:0", -1, D("{}"), "id: s1:0\ndata: {}\n\n"},
    {"s1:-1", 0, D(""), "id: s1:-1\nretry: 0\ndata: \n\n"}, /* the priming event */
    {NULL, 1000, D("x"), "retry: 1000\ndata: x\n\n"},
    {NULL, 9223372036854775807LL, D("x"), "retry: 9223372036854775807\ndata: x\n\n"},
    {NULL, -5, D("x"), "data: x\n\n"}, /* any negative retry: none */
    {"", -1, D("x"), "id: \ndata: x\n\n"},
    {NULL, -1, D(""), "data: \n\n"},
    {NULL, -1, D("a\nb"), "data: a\ndata: b\n\n"},
    {NULL, -1, D("a\rb"), "data: a\ndata: b\n\n"},
    {NULL, -1, D("a\r\nb"), "data: a\ndata: b\n\n"},         /* CRLF is one break */
    {NULL, -1, D("a\n\rb"), "data: a\ndata: \ndata: b\n\n"}, /* LF CR is two */
    {NULL, -1, D("a\r\rb"), "data: a\ndata: \ndata: b\n\n"},
    {NULL, -1, D("a\n\nb"), "data: a\ndata: \ndata: b\n\n"},
    {NULL, -1, D("a\n"), "data: a\ndata: \n\n"}, /* the empty line after a final break */
    {NULL, -1, D("a\r\n"), "data: a\ndata: \n\n"},
    {NULL, -1, D("a\r"), "data: a\ndata: \n\n"},
    {NULL, -1, D("\n"), "data: \ndata: \n\n"},
    {NULL, -1, D("\r\n\r\n"), "data: \ndata: \ndata: \n\n"},
    {NULL, -1, D(" lead"), "data:  lead\n\n"}, /* a reader strips one space only */
    {NULL, -1, D(": not a comment"), "data: : not a comment\n\n"},
    {"a b:7", 5, D("l1\nl2\r\nl3"), "id: a b:7\nretry: 5\ndata: l1\ndata: l2\ndata: l3\n\n"},
};

static void test_events(void)
{
    for (size_t i = 0; i < sizeof event_cases / sizeof event_cases[0]; i++) {
        const struct event_case *c = &event_cases[i];
        struct sse_buf b = {0};
        int rc = sse_event(&b, c->id, c->retry_ms, c->data, c->len);
        CHECK_INT(rc, 0);
        CHECK_INT(sse_pending(&b), strlen(c->want));
        char *got = drain_all(&b, 4096, NULL);
        if (!check_record(got && strcmp(got, c->want) == 0, __FILE__, __LINE__, c->want))
            printf("     case %zu: got \"%s\"\n", i, got ? got : "(null)");
        CHECK_INT(sse_pending(&b), 0);
        free(got);
        sse_buf_free(&b);
    }
}

/* An id with a CR or LF is refused and nothing at all is written. */
static void test_bad_ids(void)
{
    static const char *const bad[] = {"a\nb", "a\rb", "\n", "\r", "s:1\r\n", "\r\nid: x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct sse_buf b = {0};
        CHECK_INT(sse_event(&b, bad[i], 10, "x", 1), -1);
        CHECK_INT(sse_pending(&b), 0);
        CHECK(b.data == NULL);
        /* Nor is anything already pending disturbed. */
        CHECK_INT(sse_comment(&b, "k"), 0);
        CHECK_INT(sse_event(&b, bad[i], -1, "x", 1), -1);
        size_t len = 0;
        char *got = drain_all(&b, 100, &len);
        CHECK_STR(got, ": k\n\n");
        free(got);
        sse_buf_free(&b);
    }
}

static void test_nul_bytes(void)
{
    struct sse_buf b = {0};
    static const char data[] = {'a', '\0', 'b', '\n', '\0'};
    CHECK_INT(sse_event(&b, NULL, -1, data, sizeof data), 0);
    static const char want[] = "data: a\0b\ndata: \0\n\n";
    size_t len = 0;
    char *got = drain_all(&b, 3, &len);
    CHECK_INT(len, sizeof want - 1);
    CHECK(got && memcmp(got, want, sizeof want - 1) == 0);
    free(got);
    sse_buf_free(&b);
}

static void test_comments(void)
{
    struct sse_buf b = {0};
    CHECK_INT(sse_comment(&b, "keepalive"), 0);
    CHECK_INT(sse_comment(&b, ""), 0);
    CHECK_INT(sse_event(&b, "s:3", -1, "m", 1), 0);
    CHECK_INT(sse_comment(&b, "session ended"), 0);
    char *got = drain_all(&b, 1, NULL);
    CHECK_STR(got, ": keepalive\n\n: \n\nid: s:3\ndata: m\n\n: session ended\n\n");
    free(got);
    sse_buf_free(&b);
}

/* The same stream of events comes out byte for byte whatever the piece size
 * the server drains with, and drain never hands out more than asked. */
static void test_drain_pieces(void)
{
    static const char want[] = "id: s:0\ndata: one\n\n"
                               ": keepalive\n\n"
                               "id: s:1\nretry: 250\ndata: two\ndata: lines\n\n";
    const size_t total = sizeof want - 1;
    for (size_t piece = 1; piece <= total + 3; piece++) {
        struct sse_buf b = {0};
        int ok = sse_event(&b, "s:0", -1, "one", 3) == 0 && sse_comment(&b, "keepalive") == 0 &&
                 sse_event(&b, "s:1", 250, "two\nlines", 9) == 0;
        char out[256];
        size_t got = 0, calls = 0;
        while (ok && sse_pending(&b) > 0 && calls++ < 1000) {
            size_t before = sse_pending(&b);
            size_t n = sse_drain(&b, out + got, piece);
            ok &= n == (before < piece ? before : piece);
            ok &= sse_pending(&b) == before - n;
            got += n;
        }
        ok &= got == total && memcmp(out, want, total) == 0;
        if (!check_record(ok, __FILE__, __LINE__, "drain in pieces"))
            printf("     piece size %zu\n", piece);
        sse_buf_free(&b);
    }
}

static void test_drain_edges(void)
{
    struct sse_buf b = {0};
    char out[64];
    memset(out, '#', sizeof out);
    CHECK_INT(sse_pending(&b), 0);
    CHECK_INT(sse_comment(&b, "x"), 0);
    CHECK_INT(sse_drain(&b, out, 0), 0); /* max 0 moves nothing */
    CHECK_INT(sse_pending(&b), 5);
    CHECK(out[0] == '#');
    CHECK_INT(sse_drain(&b, out, 2), 2);
    CHECK(memcmp(out, ": ", 2) == 0 && out[2] == '#');
    /* Writing while partly drained appends after what is still pending. */
    CHECK_INT(sse_comment(&b, "y"), 0);
    CHECK_INT(sse_pending(&b), 8);
    CHECK_INT(sse_drain(&b, out, sizeof out), 8);
    CHECK(memcmp(out, "x\n\n: y\n\n", 8) == 0);
    CHECK_INT(sse_drain(&b, out, sizeof out), 0); /* nothing left */
    CHECK_INT(sse_pending(&b), 0);

    /* Drained buffers are reused from the start: a long run of small events
     * written and drained one by one never grows the buffer. */
    size_t cap = b.cap;
    int ok = 1;
    for (int i = 0; i < 10000 && ok; i++) {
        ok &= sse_event(&b, "s:1", -1, "0123456789", 10) == 0;
        ok &= sse_drain(&b, out, sizeof out) == 26;
    }
    CHECK(ok);
    CHECK_INT(b.cap, cap);
    CHECK(memcmp(out, "id: s:1\ndata: 0123456789\n\n", 26) == 0);

    sse_buf_free(&b);
    CHECK(b.data == NULL && b.len == 0 && b.off == 0 && b.cap == 0);
    sse_buf_free(&b); /* freeing twice is harmless */
}

/* One large event (1 MiB of data, a line break every 1000 bytes) grows the
 * buffer and comes back intact. */
static void test_large(void)
{
    const size_t n = 1 << 20;
    char *data = malloc(n);
    if (!CHECK(data != NULL))
        return;
    for (size_t i = 0; i < n; i++)
        data[i] = i % 1000 == 999 ? '\n' : (char)('a' + i % 26);
    struct sse_buf b = {0};
    CHECK_INT(sse_event(&b, "big:0", -1, data, n), 0);
    size_t lines = n / 1000 + 1; /* 1048 breaks, 1049 lines */
    size_t want_len = strlen("id: big:0\n") + lines * strlen("data: ") + n + 1 + 1;
    CHECK_INT(sse_pending(&b), want_len);
    size_t len = 0;
    char *got = drain_all(&b, 65536, &len);
    CHECK_INT(len, want_len);
    /* Rebuild the data from the data: lines and compare. */
    int ok = got != NULL && strncmp(got, "id: big:0\n", 10) == 0;
    size_t at = 10, o = 0;
    while (ok && at < len && got[at] != '\n') {
        ok = strncmp(got + at, "data: ", 6) == 0;
        at += 6;
        char *nl = memchr(got + at, '\n', len - at);
        ok &= nl != NULL;
        if (!ok)
            break;
        size_t l = (size_t)(nl - (got + at));
        ok &= o + l <= n && memcmp(data + o, got + at, l) == 0;
        o += l;
        at += l + 1;
        if (o < n)
            ok &= data[o++] == '\n';
    }
    ok &= o == n && at == len - 1 && got[at] == '\n';
    CHECK(ok);
    free(got);
    free(data);
    sse_buf_free(&b);
}

/* A comment cannot carry a line break (it would inject fields). */
static void test_comment_breaks(void)
{
    struct sse_buf b = {0};
    CHECK_INT(sse_comment(&b, "a\nevent: x"), -1);
    CHECK_INT(sse_comment(&b, "a\rb"), -1);
    CHECK_INT((long long)sse_pending(&b), 0);
    CHECK_INT(sse_comment(&b, "ok"), 0);
    sse_buf_free(&b);
}

int main(void)
{
    test_comment_breaks();
    test_events();
    test_bad_ids();
    test_nul_bytes();
    test_comments();
    test_drain_pieces();
    test_drain_edges();
    test_large();
    return check_summary();
}
