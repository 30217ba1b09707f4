/* fuzz_cursor — libFuzzer harness for event_id_parse, the parser of the
 * cursors clients send back (Last-Event-ID, last_event_id=).
 *
 * The input is the header value. The harness traps when a promise is
 * broken: an accepted id has a non-empty stream part that fits the buffer,
 * a next seq in [0, INT64_MAX], and is the one spelling of that position
 * (printing the stream id and next - 1 gives the input back, so no sign,
 * space, leading zero or wrapped value got through). ASan and UBSan catch
 * the rest (signed overflow included).
 *
 * Build and run like fuzz_ws_frame.c (tests/fuzz/run.sh), with
 * service/core/event_id.c (-I service/core). */
#include "event_id.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

/* libFuzzer calls this for each input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *id = malloc(size + 1);
    if (!id)
        return 0;
    memcpy(id, data, size);
    id[size] = '\0';
    char stream[33];
    int64_t next = -42;
    if (event_id_parse(id, stream, sizeof stream, &next) == 0) {
        REQUIRE(next >= 0);
        size_t len = strlen(stream);
        REQUIRE(len > 0 && len < sizeof stream);
        char again[64];
        snprintf(again, sizeof again, "%s:%lld", stream, (long long)(next - 1));
        REQUIRE(strcmp(again, id) == 0);
    }
    free(id);
    return 0;
}
