/* fuzz_jsonrpc — libFuzzer harness for JSON-RPC message validation
 * (jsonrpc.c): jsonrpc_parse on any bytes, then jsonrpc_classify on the
 * message or on each element of a batch.
 *
 * The harness traps when a promise is broken: a refused text carries
 * -32700 and a message; a refused message carries -32600 or -32602; a
 * request has a method and a non-null id (keyed when it is short), a
 * notification a method and no id, a response exactly one of result and
 * error; jsonrpc_dump never writes a raw newline (SSE and NDJSON framing
 * depend on it), reads back as the same JSON and is byte for byte what
 * jansson writes. mcpd's reader (json_text.c) and jansson's json_loadb
 * agree on every input: both refuse it, or both read the same value; the
 * only exceptions are the ones json_text.h names (nesting past
 * JSONRPC_MAX_DEPTH, and a NUL byte jansson skips). ASan and UBSan catch
 * the rest.
 *
 * Build and run like fuzz_ws_frame.c (tests/fuzz/run.sh), with
 * service/core/jsonrpc.c and json_text.c (-I service/core) and -ljansson. */
#include "jsonrpc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

static void check_message(json_t *msg)
{
    struct jsonrpc_msg m;
    struct jsonrpc_error err;
    memset(&err, 0, sizeof err);
    if (jsonrpc_classify(msg, &m, &err) != 0) {
        REQUIRE(err.code == JSONRPC_INVALID_REQUEST || err.code == JSONRPC_INVALID_PARAMS);
        REQUIRE(err.message[0] != '\0');
        return;
    }
    char key[96];
    switch (m.kind) {
    case JSONRPC_REQUEST:
        REQUIRE(m.method && m.id && !json_is_null(m.id));
        /* A key for every id that fits: short strings and integers. */
        if (json_is_integer(m.id) || (json_is_string(m.id) && json_string_length(m.id) < 32))
            REQUIRE(jsonrpc_id_key(m.id, key, sizeof key) == 0);
        break;
    case JSONRPC_NOTIFICATION:
        REQUIRE(m.method && !m.id);
        break;
    case JSONRPC_RESPONSE:
        REQUIRE((m.result != NULL) != (m.error != NULL));
        break;
    }
    size_t len;
    char *text = jsonrpc_dump(msg, &len);
    if (!text)
        return;
    REQUIRE(memchr(text, '\n', len) == NULL && memchr(text, '\r', len) == NULL);
    json_t *back = json_loadb(text, len, JSON_ALLOW_NUL, NULL);
    REQUIRE(back && json_equal(back, msg));
    json_decref(back);
    char *theirs = json_dumps(msg, JSON_COMPACT);
    REQUIRE(theirs && strcmp(theirs, text) == 0);
    free(theirs);
    free(text);
}

/* libFuzzer calls this for each input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct jsonrpc_error err;
    memset(&err, 0, sizeof err);
    json_t *root = jsonrpc_parse((const char *)data, size, &err);
    json_t *theirs = json_loadb((const char *)data, size,
                                JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (root) {
        REQUIRE(theirs && json_equal(root, theirs));
    } else if (theirs) {
        REQUIRE(strstr(err.message, "nested too deeply") || memchr(data, '\0', size));
    }
    json_decref(theirs);
    if (!root) {
        REQUIRE(err.code == JSONRPC_PARSE_ERROR && err.message[0] != '\0');
        return 0;
    }
    if (json_is_array(root)) {
        size_t i;
        json_t *el;
        json_array_foreach(root, i, el) check_message(el);
    } else {
        check_message(root);
    }
    json_decref(root);
    return 0;
}
