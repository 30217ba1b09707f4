/* json_write — compact JSON text for a jansson value: byte for byte what
 * json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) writes, in a fraction of
 * its instructions.
 *
 * Every message mcpd sends is encoded once, to be stored. jansson's encoder
 * guards each object and array against cycles by formatting its address
 * with snprintf and inserting that into a hash table (a malloc), and grows
 * its output from 16 bytes, a malloc and a copy per doubling; for an echo
 * reply that was about 14,000 instructions. This writes into a stack buffer
 * and allocates once, at the end. A cycle cannot recurse forever here
 * either: past JSON_WRITE_MAX_DEPTH levels, and for reals (whose shortest
 * exact text jansson's own formatting decides), it hands the value to
 * jansson. Strings must be valid UTF-8, as for jansson: otherwise the
 * encoding fails. */
#ifndef MCPD_JSON_WRITE_H
#define MCPD_JSON_WRITE_H

#include <jansson.h>
#include <stddef.h>

#define JSON_WRITE_MAX_DEPTH 256

/* The NUL-terminated encoding of v, and its length in *len (len may be
 * NULL). NULL when v cannot be encoded (a string that is not UTF-8, a
 * cycle) or when out of memory. The caller frees the result. */
char *json_write(const json_t *v, size_t *len);

#endif
