/* fuzz_sse — libFuzzer harness for the SSE writer's framing (sse.c).
 *
 * Input: one byte of flags, an event id up to the first NUL, then the data.
 * The harness writes one event and a comment, reads the output back the way
 * a browser's EventSource does (lines end at CRLF, CR or LF; data lines
 * joined with LF; a blank line ends the event) and traps when a promise is
 * broken: exactly one event comes back, its data is the input with every
 * CRLF and CR turned into LF, its id is the id given, and an id that would
 * break the framing (CR or LF in it) is refused instead of written.
 *
 * Build and run like fuzz_ws_frame.c (tests/fuzz/run.sh), with
 * service/transports/sse.c (-I service/transports). */
#include "sse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

struct parsed {
    int events;
    char *data, *id;
    size_t data_len, id_len;
};

static void append(char **buf, size_t *len, const char *s, size_t n)
{
    char *p = realloc(*buf, *len + n + 1);
    REQUIRE(p);
    memcpy(p + *len, s, n);
    *len += n;
    p[*len] = '\0';
    *buf = p;
}

/* The EventSource algorithm, for the fields mcpd writes. */
static void parse(const char *s, size_t n, struct parsed *out)
{
    char *data = NULL;
    size_t data_len = 0;
    int have_data = 0;
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && s[j] != '\r' && s[j] != '\n')
            j++;
        REQUIRE(j < n); /* every line is terminated */
        const char *line = s + i;
        size_t len = j - i;
        i = j + 1 + (s[j] == '\r' && j + 1 < n && s[j + 1] == '\n');
        if (len == 0) {
            if (have_data) {
                out->events++;
                free(out->data);
                out->data = data ? data : calloc(1, 1);
                out->data_len = data ? data_len - 1 : 0; /* the last LF goes */
                data = NULL;
                data_len = 0;
                have_data = 0;
            }
            continue;
        }
        if (line[0] == ':')
            continue;
        const char *colon = memchr(line, ':', len);
        size_t flen = colon ? (size_t)(colon - line) : len;
        const char *v = colon ? colon + 1 : line + len;
        size_t vlen = colon ? len - flen - 1 : 0;
        if (vlen && *v == ' ')
            v++, vlen--;
        if (flen == 4 && memcmp(line, "data", 4) == 0) {
            append(&data, &data_len, v, vlen);
            append(&data, &data_len, "\n", 1);
            have_data = 1;
        } else if (flen == 2 && memcmp(line, "id", 2) == 0) {
            free(out->id);
            out->id = NULL;
            out->id_len = 0;
            append(&out->id, &out->id_len, v, vlen);
        }
    }
    free(data);
}

/* libFuzzer calls this for each input. */
int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
    if (size < 1)
        return 0;
    int with_id = in[0] & 1, with_retry = in[0] & 2;
    const char *rest = (const char *)in + 1;
    size_t rest_len = size - 1;
    const char *nul = memchr(rest, '\0', rest_len);
    size_t id_len = nul ? (size_t)(nul - rest) : 0;
    char *id = with_id && nul ? strndup(rest, id_len) : NULL;
    const char *data = nul ? nul + 1 : rest;
    size_t len = nul ? rest_len - id_len - 1 : rest_len;

    struct sse_buf b = {0};
    int rc = sse_event(&b, id, with_retry ? 1000 : -1, data, len);
    if (id && strpbrk(id, "\r\n")) {
        REQUIRE(rc == -1);
        free(id);
        sse_buf_free(&b);
        return 0;
    }
    REQUIRE(rc == 0);
    REQUIRE(sse_comment(&b, "keepalive") == 0);

    char *expect = malloc(len + 1);
    REQUIRE(expect);
    size_t e = 0;
    for (size_t i = 0; i < len; i++) {
        if (data[i] == '\r') {
            expect[e++] = '\n';
            if (i + 1 < len && data[i + 1] == '\n')
                i++;
        } else {
            expect[e++] = data[i];
        }
    }
    struct parsed p = {0};
    parse(b.data, b.len, &p);
    REQUIRE(p.events == 1);
    REQUIRE(p.data_len == e && memcmp(p.data, expect, e) == 0);
    if (id)
        REQUIRE(p.id && p.id_len == id_len && memcmp(p.id, id, id_len) == 0);
    free(expect);
    free(p.data);
    free(p.id);
    free(id);
    sse_buf_free(&b);
    return 0;
}
