/* libFuzzer harness for the WebSocket side mcp-bridge reads and writes:
 * ws_frame's client mode (ws_parser_init_client, fed what a server, or
 * anything in between, sends) and ws_frame_client (the masked frames the
 * bridge sends).
 *
 * The first byte picks the message limit, the second the piece size; the
 * rest is the server's byte stream. Promises checked: the parser consumes
 * no more than it is given; a message is within the limit, NUL-terminated
 * and valid UTF-8; control payloads are at most 125 bytes; and each message
 * re-sent as a client frame, masked with a key taken from the input, parses
 * back to the same bytes on the server's side (a server-mode parser). ASan
 * and UBSan catch the rest. */
#include "ws_frame.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

static const size_t LIMITS[] = {1, 7, 125, 126, 300, 4096, 65536};

/* msg sent by the bridge (masked) must reach a server unchanged. */
static void round_trip(const char *msg, size_t len, const unsigned char key[4])
{
    size_t flen = 0;
    unsigned char *f = ws_frame_client(WS_OP_TEXT, msg, len, key, &flen);
    REQUIRE(f != NULL);
    REQUIRE(flen >= len + 6 && (f[1] & 0x80));
    struct ws_parser server;
    ws_parser_init(&server, len ? len : 1);
    struct ws_event ev;
    size_t used = ws_parser_feed(&server, f, flen, &ev);
    REQUIRE(used == flen);
    REQUIRE(ev.kind == WS_EV_MESSAGE && ev.len == len && memcmp(ev.data, msg, len) == 0);
    ws_parser_free(&server);
    free(f);
}

/* libFuzzer calls this for each input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t max = LIMITS[data[0] % (sizeof LIMITS / sizeof LIMITS[0])];
    size_t piece = 1 + data[1] % 23;
    data += 2;
    size -= 2;
    unsigned char key[4] = {0x12, 0x34, 0x56, 0x78};
    if (size >= 4)
        memcpy(key, data, 4);

    struct ws_parser p;
    ws_parser_init_client(&p, max);
    for (size_t off = 0; off < size;) {
        size_t n = size - off < piece ? size - off : piece;
        const uint8_t *buf = data + off;
        off += n;
        while (n > 0) {
            struct ws_event ev;
            size_t used = ws_parser_feed(&p, buf, n, &ev);
            REQUIRE(used <= n);
            buf += used;
            n -= used;
            if (ev.kind == WS_EV_MESSAGE) {
                REQUIRE(ev.len <= max && ev.data[ev.len] == '\0');
                REQUIRE(utf8_valid(ev.data, ev.len));
                round_trip(ev.data, ev.len, key);
            } else if (ev.kind == WS_EV_PING || ev.kind == WS_EV_PONG) {
                REQUIRE(ev.len <= WS_MAX_CONTROL_PAYLOAD);
            } else if (ev.kind == WS_EV_NONE) {
                REQUIRE(n == 0);
            }
        }
    }
    REQUIRE(p.largest_alloc <= max + 1);
    ws_parser_free(&p);
    return 0;
}
