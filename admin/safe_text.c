/* safe_text — see safe_text.h. */
#include "safe_text.h"
#include "utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The code point of a valid sequence of len (2..4) bytes. */
static uint32_t decode(const unsigned char *p, size_t len)
{
    uint32_t cp = p[0] & (0xffu >> (len + 1));
    for (size_t i = 1; i < len; i++)
        cp = (cp << 6) | (p[i] & 0x3fu);
    return cp;
}

/* Code points that can move the cursor, reorder what follows or act as
 * terminal controls: shown as \uXXXX. */
static int hidden_effect(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
           cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

char *safe_text_n(const char *s, size_t n)
{
    /* The most any input byte grows to: \xNN (4), a 2-byte C1 \u0085 (3
     * each), a 3-byte bidi control \u202e (2 each). */
    if (n > (SIZE_MAX - 1) / 4)
        return NULL;
    char *out = malloc(4 * n + 1);
    if (!out)
        return NULL;
    char *o = out;
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        unsigned c = *p;
        if (c >= 0x20 && c < 0x7f) {
            *o++ = (char)c;
            p++;
            continue;
        }
        size_t len = c >= 0x80 ? utf8_seq_len(p, (size_t)(end - p)) : 0;
        if (len) {
            uint32_t cp = decode(p, len);
            if (hidden_effect(cp)) {
                o += sprintf(o, "\\u%04x", (unsigned)cp);
            } else {
                memcpy(o, p, len);
                o += len;
            }
            p += len;
            continue;
        }
        if (c == '\n' || c == '\r' || c == '\t') {
            *o++ = '\\';
            *o++ = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        } else {
            o += sprintf(o, "\\x%02x", c);
        }
        p++;
    }
    *o = '\0';
    return out;
}

char *safe_text(const char *s)
{
    return s ? safe_text_n(s, strlen(s)) : NULL;
}

void safe_text_json(json_t *v)
{
    size_t i;
    const char *key;
    json_t *item;
    if (json_is_string(v)) {
        char *safe = safe_text_n(json_string_value(v), json_string_length(v));
        /* Out of memory: no text at all is still safe to print. */
        json_string_set(v, safe ? safe : "");
        free(safe);
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, item) safe_text_json(item);
    } else if (json_is_object(v)) {
        json_object_foreach(v, key, item) safe_text_json(item);
    }
}
