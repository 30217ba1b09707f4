/* fuzz_forwarded — libFuzzer harness for --trusted-proxies lists and
 * X-Forwarded-For walks (forwarded.c).
 *
 * Input: a trusted list, a NUL byte, then an X-Forwarded-For value. The
 * harness traps when a promise is broken: a parsed list always answers;
 * the client written is NUL-terminated within FORWARDED_ADDR_MAX; with an
 * empty trusted set the header is ignored (the client is the peer). ASan
 * and UBSan catch the rest.
 *
 * Build and run like fuzz_ws_frame.c (tests/fuzz/run.sh), with
 * service/transports/forwarded.c (-I service/transports). */
#include "forwarded.h"

#include <stdint.h>
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
    char *text = malloc(size + 2);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = text[size + 1] = '\0';
    const char *list = text, *xff = text + strlen(text) + 1;
    char err[200], out[FORWARDED_ADDR_MAX + 1];
    struct forwarded *f = NULL;
    if (forwarded_parse(list, &f, err, sizeof err) == 0) {
        memset(out, 'x', sizeof out);
        forwarded_client(f, "127.0.0.1", xff, out);
        REQUIRE(memchr(out, '\0', FORWARDED_ADDR_MAX) != NULL);
        forwarded_free(f);
    }
    struct forwarded *none = NULL;
    REQUIRE(forwarded_parse("", &none, err, sizeof err) == 0);
    forwarded_client(none, "192.0.2.1", xff, out);
    REQUIRE(strcmp(out, "192.0.2.1") == 0);
    forwarded_free(none);
    free(text);
    return 0;
}
