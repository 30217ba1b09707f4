/* json_text — JSON text to and from jansson values, as jansson itself reads
 * and writes it, in a fraction of its instructions.
 *
 * Every message mcpd receives is parsed once and every message it sends is
 * encoded once, to be stored. jansson's reader goes through a byte-at-a-time
 * stream with a saved copy of each token, and its writer guards each object
 * and array against cycles by formatting its address with snprintf into a
 * hash table, and grows its output from 16 bytes by doubling. For an echo
 * request and its reply that was some 40,000 instructions of about 200,000.
 *
 * json_text_read accepts exactly the texts that json_loadb accepts with
 * JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL (UTF-8 only, no
 * duplicate keys, no NUL in keys, integers within int64, finite reals) and
 * builds the same values, in the text's key order, with one exception:
 * jansson skips a NUL byte right after a number or a literal ("[1\0]" is
 * [1] to it), and this refuses it. It also refuses nesting
 * deeper than max_depth, before recursing into it, so a hostile body cannot
 * exhaust a thread's stack.
 *
 * json_text_write writes byte for byte what json_dumps(v, JSON_COMPACT |
 * JSON_ENCODE_ANY) writes. Reals, and values nested deeper than
 * JSON_TEXT_MAX_DEPTH (which is how a cycle shows here), go to jansson's own
 * encoder, so a cycle still fails instead of recursing forever.
 *
 * test_json_text compares both with jansson on fixed cases and random ones,
 * and fuzz_jsonrpc does so on any bytes. */
#ifndef MCPD_JSON_TEXT_H
#define MCPD_JSON_TEXT_H

#include <jansson.h>
#include <stddef.h>

#define JSON_TEXT_MAX_DEPTH 256

/* The value the len bytes at buf hold; NULL when they are not one JSON
 * value (or nest deeper than max_depth, or memory ran out), with why in err
 * (errlen bytes, NUL-terminated). The caller owns the reference. */
json_t *json_text_read(const char *buf, size_t len, int max_depth, char *err, size_t errlen);

/* The NUL-terminated encoding of v, and its length in *len (len may be
 * NULL). NULL when v cannot be encoded (a string that is not UTF-8, a
 * cycle) or when out of memory. The caller frees the result. */
char *json_text_write(const json_t *v, size_t *len);

#endif
