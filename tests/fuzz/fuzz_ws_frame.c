/* fuzz_ws_frame — libFuzzer harness for the WebSocket frame parser.
 *
 * The first input byte picks the message limit (so the 1009 path is hit
 * with both tiny and roomy limits) and the second how the rest is cut into
 * pieces (so every header and payload split is tried); the rest is the
 * byte stream a client would send. After every call the harness checks the
 * parser's promises and traps when one is broken: it consumes no more than
 * it was given, messages are within the limit and valid UTF-8, control
 * payloads are at most 125 bytes, close codes are ones the wire may carry,
 * errors carry a code the server may send, and the parser never asked for
 * more memory than the limit allows. ASan and UBSan catch the rest.
 *
 * Build and run: tests/fuzz/run.sh. */
#include "ws_frame.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

static const size_t LIMITS[] = {1, 2, 7, 64, 125, 126, 300, 4096, 65536, 1048576};

/* libFuzzer calls this for each input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t max = LIMITS[data[0] % (sizeof LIMITS / sizeof LIMITS[0])];
    unsigned cut = data[1];
    data += 2;
    size -= 2;

    struct ws_parser p;
    ws_parser_init(&p, max);
    int finished = 0;
    size_t off = 0;
    unsigned step = 0;
    while (off < size) {
        /* Piece sizes 1..N from the cut byte, varying along the input. */
        size_t piece = cut == 0 ? size - off : 1 + ((cut * (step + 1)) % 37);
        step++;
        if (piece > size - off)
            piece = size - off;
        const uint8_t *buf = data + off;
        size_t len = piece;
        while (len > 0) {
            struct ws_event ev;
            size_t used = ws_parser_feed(&p, buf, len, &ev);
            REQUIRE(used <= len);
            switch (ev.kind) {
            case WS_EV_NONE:
                REQUIRE(used == len);
                break;
            case WS_EV_MESSAGE:
                REQUIRE(!finished);
                REQUIRE(ev.len <= max);
                REQUIRE(ev.data != NULL);
                REQUIRE(ev.data[ev.len] == '\0');
                REQUIRE(utf8_valid(ev.data, ev.len));
                break;
            case WS_EV_PING:
            case WS_EV_PONG:
                REQUIRE(!finished);
                REQUIRE(ev.len <= WS_MAX_CONTROL_PAYLOAD);
                break;
            case WS_EV_CLOSE: {
                REQUIRE(!finished);
                finished = 1;
                REQUIRE(ev.code == WS_CLOSE_NO_STATUS || ws_close_code_valid(ev.code));
                REQUIRE(ev.reason != NULL);
                REQUIRE(utf8_valid(ev.reason, strlen(ev.reason)));
                /* The echo the transport would send must be well formed. */
                unsigned char out[WS_MAX_CONTROL_FRAME];
                size_t n = ws_frame_close(out, ev.code, ev.reason);
                REQUIRE(n >= 2 && n <= WS_MAX_CONTROL_FRAME);
                REQUIRE((size_t)(out[1] & 0x7F) == n - 2);
                break;
            }
            case WS_EV_ERROR:
                REQUIRE(!finished);
                finished = 1;
                REQUIRE(ev.code == WS_CLOSE_PROTOCOL_ERROR ||
                        ev.code == WS_CLOSE_UNSUPPORTED_DATA ||
                        ev.code == WS_CLOSE_INVALID_PAYLOAD || ev.code == WS_CLOSE_TOO_BIG ||
                        ev.code == WS_CLOSE_INTERNAL_ERROR);
                REQUIRE(ev.reason != NULL);
                break;
            }
            REQUIRE(p.largest_alloc <= max + 1);
            REQUIRE(p.msg_len <= max);
            buf += used;
            len -= used;
        }
        off += piece;
    }
    ws_parser_free(&p);
    return 0;
}
