/* fuzz_stdio_frame — libFuzzer harness for the stdio framing decoder.
 *
 * The first input byte picks the message limit, the second how the rest is
 * cut into pieces; the rest is what a client writes to mcpd's stdin. The
 * stream is decoded twice, whole and in pieces (each piece in its own heap
 * buffer, freed once consumed, so a decoder keeping a pointer into old
 * input trips ASan), and the harness traps when a promise is broken: a call
 * consumes no more than it was given and all of it when it reports
 * nothing, messages are within the limit and never start with a BOM,
 * NDJSON messages hold no newline, and the events do not depend on how the
 * input was cut. ASan and UBSan catch the rest.
 *
 * Build and run like fuzz_ws_frame.c (tests/fuzz/run.sh), with
 * service/base/stdio_frame.c (-I service/base). */
#include "stdio_frame.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

static const size_t LIMITS[] = {1, 2, 7, 16, 64, 300, 4096, 65536};

/* The event sequence folded into a hash (FNV-1a), plus a count. */
struct trace {
    uint64_t h;
    size_t n;
};

static void mix(struct trace *t, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        t->h = (t->h ^ b[i]) * 1099511628211u;
}

static void check_event(const struct stdio_frame_decoder *d, const struct stdio_frame_event *ev,
                        size_t max, struct trace *t)
{
    if (ev->kind == STDIO_FRAME_MESSAGE) {
        REQUIRE(ev->len <= max);
        REQUIRE(ev->len == 0 || ev->data != NULL);
        REQUIRE(!(ev->len >= 3 && memcmp(ev->data, "\xEF\xBB\xBF", 3) == 0));
        if (stdio_frame_framing(d) == STDIO_FRAMING_NDJSON)
            REQUIRE(memchr(ev->data, '\n', ev->len) == NULL);
        mix(t, "M", 1);
        mix(t, &ev->len, sizeof ev->len);
        mix(t, ev->data, ev->len);
    } else {
        REQUIRE(ev->kind == STDIO_FRAME_ERROR);
        REQUIRE(ev->error >= STDIO_FRAME_ERR_BOM && ev->error <= STDIO_FRAME_ERR_MEMORY);
        int code = stdio_frame_error_code(ev->error);
        REQUIRE(code == -32700 || code == -32600 || code == -32603);
        REQUIRE(stdio_frame_error_message(ev->error) != NULL);
        mix(t, "E", 1);
        mix(t, &ev->error, sizeof ev->error);
    }
    t->n++;
}

static void feed(struct stdio_frame_decoder *d, const uint8_t *p, size_t n, size_t max,
                 struct trace *t)
{
    char *piece = malloc(n ? n : 1);
    REQUIRE(piece != NULL);
    memcpy(piece, p, n);
    size_t off = 0;
    while (off < n) {
        size_t used = (size_t)-1;
        struct stdio_frame_event ev;
        int got = stdio_frame_decode(d, piece + off, n - off, &used, &ev);
        REQUIRE(got == 0 || got == 1);
        REQUIRE(used <= n - off);
        if (!got)
            REQUIRE(used == n - off);
        else
            check_event(d, &ev, max, t);
        off += used;
    }
    free(piece);
}

static struct trace run(const uint8_t *data, size_t size, size_t max, unsigned cut,
                        enum stdio_framing *framing)
{
    struct stdio_frame_decoder *d = stdio_frame_decoder_new(max);
    REQUIRE(d != NULL);
    struct trace t = {14695981039346656037u, 0};
    /* cut 0: whole; otherwise pieces of 1..cut bytes, varying. */
    size_t off = 0, k = 0;
    while (off < size) {
        size_t n = cut ? 1 + (k++ * 7 + cut) % cut : size;
        if (n > size - off)
            n = size - off;
        feed(d, data + off, n, max, &t);
        off += n;
    }
    struct stdio_frame_event ev;
    if (stdio_frame_finish(d, &ev))
        check_event(d, &ev, max, &t);
    *framing = stdio_frame_framing(d);
    stdio_frame_decoder_free(d);
    return t;
}

/* libFuzzer calls this for each input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t max = LIMITS[data[0] % (sizeof LIMITS / sizeof LIMITS[0])];
    unsigned cut = data[1] % 32;
    data += 2;
    size -= 2;
    enum stdio_framing f1, f2;
    struct trace whole = run(data, size, max, 0, &f1);
    struct trace pieces = run(data, size, max, cut ? cut : 1, &f2);
    REQUIRE(whole.h == pieces.h && whole.n == pieces.n);
    REQUIRE(f1 == f2);
    return 0;
}
