/* strcopy — a bounded string copy without printf's machinery.
 *
 * snprintf(dst, cap, "%s", src) parses its format and goes through stdio's
 * string sink: several hundred instructions to copy an id, several times
 * per request (stream and call records, the request log, schema paths).
 * strcopy does the same copy with strnlen and memcpy. */
#ifndef MCPD_STRCOPY_H
#define MCPD_STRCOPY_H

#include <stddef.h>

/* Copies as much of src as fits in dst (cap > 0 bytes, always
 * NUL-terminated; NULL src copies ""). Returns the bytes written, without
 * the NUL: less than strlen(src) when src was cut short. */
size_t strcopy(char *dst, size_t cap, const char *src);

#endif
