/* libFuzzer harness for mcp-bridge's SSE parser (bridge/sse_parser.c), the
 * code that reads whatever a remote server (or anything in between) sends.
 *
 * The first byte picks a chunk size; the rest is fed once whole and once in
 * chunks of that size. Both runs must dispatch the same events (type, data,
 * last id) in the same order and fail or not alike: how TCP splits a stream
 * must never change what the bridge sees. Every event's data must be NUL-
 * terminated at len, and memory stays bounded by max_event (ASan). */
#include "sse_parser.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EVENT 4096
#define MAX_EVENTS 256

struct record {
    int n;
    char *ev[MAX_EVENTS];
};

static int on_event(void *ud, const struct sse_event *ev)
{
    struct record *r = ud;
    if (ev->data[ev->len] != '\0' || ev->len > MAX_EVENT)
        abort();
    if (r->n == MAX_EVENTS)
        return 0;
    size_t tl = strlen(ev->type), il = strlen(ev->last_id);
    char *s = malloc(tl + il + ev->len + 3);
    if (!s)
        abort();
    memcpy(s, ev->type, tl);
    s[tl] = '\x01';
    memcpy(s + tl + 1, ev->last_id, il);
    s[tl + 1 + il] = '\x02';
    memcpy(s + tl + il + 2, ev->data, ev->len);
    s[tl + il + 2 + ev->len] = '\0';
    r->ev[r->n++] = s;
    return 0;
}

static int run(const uint8_t *data, size_t size, size_t chunk, struct record *r)
{
    struct sse_parser p;
    sse_parser_init(&p, MAX_EVENT);
    int rc = 0;
    for (size_t off = 0; off < size && rc == 0; off += chunk) {
        size_t n = size - off < chunk ? size - off : chunk;
        rc = sse_parser_feed(&p, (const char *)data + off, n, on_event, r);
    }
    sse_parser_free(&p);
    return rc;
}

/* libFuzzer calls this for each input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t chunk = (size_t)(data[0] % 16) + 1;
    data++;
    size--;
    struct record whole = {0}, pieces = {0};
    int rc1 = run(data, size, size ? size : 1, &whole);
    int rc2 = run(data, size, chunk, &pieces);
    /* a failure (an over-long line) may come at another event boundary
     * only in the sense that both must fail; events before it must agree */
    if ((rc1 != 0) != (rc2 != 0))
        abort();
    if (rc1 == 0 && whole.n != pieces.n)
        abort();
    int n = whole.n < pieces.n ? whole.n : pieces.n;
    for (int i = 0; i < n; i++) {
        if (strcmp(whole.ev[i], pieces.ev[i]) != 0)
            abort();
    }
    for (int i = 0; i < whole.n; i++)
        free(whole.ev[i]);
    for (int i = 0; i < pieces.n; i++)
        free(pieces.ev[i]);
    return 0;
}
