/* fuzz_media_type — libFuzzer harness for the Accept and Content-Type
 * parsers (media_type.c).
 *
 * The first input byte picks the media type asked about; the rest is the
 * header value. The harness traps when a promise is broken: answers are 0
 * or 1; an empty list element in front (", " + value) changes nothing;
 * neither does case (tokens are case-insensitive and q-values are digits).
 * ASan and UBSan catch the rest (quoted strings, escapes at the very end).
 *
 * Build and run like fuzz_ws_frame.c (tests/fuzz/run.sh), with
 * service/transports/media_type.c (-I service/transports). */
#include "media_type.h"

#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

static const char *const TYPES[] = {"application/json", "text/event-stream", "a/b", "x/*"};

/* libFuzzer calls this for each input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *type = TYPES[data[0] % (sizeof TYPES / sizeof TYPES[0])];
    data++;
    size--;
    char *value = malloc(size + 1), *prefixed = malloc(size + 3), *upper = malloc(size + 1);
    if (!value || !prefixed || !upper)
        goto out;
    memcpy(value, data, size);
    value[size] = '\0';
    memcpy(prefixed, ", ", 2);
    memcpy(prefixed + 2, value, size + 1);
    for (size_t i = 0; i <= size; i++)
        upper[i] = (char)toupper((unsigned char)value[i]);

    int a = media_type_accepts(value, type);
    REQUIRE(a == 0 || a == 1);
    REQUIRE(media_type_accepts(prefixed, type) == a);
    REQUIRE(media_type_accepts(upper, type) == a);
    int is = media_type_is(value, type);
    REQUIRE(is == 0 || is == 1);
    REQUIRE(media_type_is(upper, type) == is);
out:
    free(value);
    free(prefixed);
    free(upper);
    return 0;
}
