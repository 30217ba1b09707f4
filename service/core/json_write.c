/* json_write — see json_write.h. */
#include "json_write.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct out {
    char *p; /* the stack buffer, then the heap once it outgrows it */
    size_t len, cap;
    int on_heap, failed;
};

static int grow(struct out *o, size_t need)
{
    size_t cap = o->cap * 2;
    while (cap < o->len + need)
        cap *= 2;
    char *p = o->on_heap ? realloc(o->p, cap) : malloc(cap);
    if (!p) {
        o->failed = 1;
        return -1;
    }
    if (!o->on_heap)
        memcpy(p, o->p, o->len);
    o->p = p;
    o->cap = cap;
    o->on_heap = 1;
    return 0;
}

static void put(struct out *o, const char *s, size_t n)
{
    if (o->failed || (o->len + n > o->cap && grow(o, n) != 0))
        return;
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

/* Length of the UTF-8 sequence at s (at most n bytes) as jansson accepts
 * it (no overlong forms, no surrogates, nothing past U+10FFFF); 0 if it is
 * not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t k = c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
    if (k == 0 || k > n)
        return 0;
    uint32_t cp = c & (0x7F >> k);
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((k == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return k;
}

static void put_string(struct out *o, const char *str, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *s = (const unsigned char *)str;
    size_t run = 0; /* start of the bytes not yet written */
    put(o, "\"", 1);
    for (size_t i = 0; i < len;) {
        unsigned char c = s[i];
        if (c >= 0x80) {
            size_t k = utf8_len(s + i, len - i);
            if (k == 0) {
                o->failed = 1;
                return;
            }
            i += k;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        put(o, str + run, i - run);
        /* jansson's two-character escapes, else \u00XX. */
        static const char from[] = "\"\\\b\f\n\r\t", to[] = "\"\\bfnrt";
        const char *hit = memchr(from, c, sizeof from - 1);
        char esc[6] = {'\\', hit ? to[hit - from] : 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        size_t n = hit ? 2 : 6;
        put(o, esc, n);
        run = ++i;
    }
    put(o, str + run, len - run);
    put(o, "\"", 1);
}

static void put_integer(struct out *o, json_int_t v)
{
    char buf[24], *p = buf + sizeof buf;
    /* Through unsigned, so that the most negative value negates too. */
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do
        *--p = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        *--p = '-';
    put(o, p, (size_t)(buf + sizeof buf - p));
}

/* jansson's own encoding of v: for reals, and for what is nested too deep. */
static void put_by_jansson(struct out *o, const json_t *v)
{
    size_t n = json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
    if (n == 0 || (o->len + n > o->cap && grow(o, n) != 0)) {
        o->failed = 1;
        return;
    }
    if (json_dumpb(v, o->p + o->len, n, JSON_COMPACT | JSON_ENCODE_ANY) != n)
        o->failed = 1;
    else
        o->len += n;
}

static void put_value(struct out *o, const json_t *v, int depth)
{
    if (o->failed)
        return;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if (depth >= JSON_WRITE_MAX_DEPTH) {
            put_by_jansson(o, v);
            break;
        }
        put(o, "{", 1);
        const char *sep = "";
        for (void *it = json_object_iter((json_t *)v); it;
             it = json_object_iter_next((json_t *)v, it)) {
            put(o, sep, *sep != '\0');
            sep = ",";
            put_string(o, json_object_iter_key(it), json_object_iter_key_len(it));
            put(o, ":", 1);
            put_value(o, json_object_iter_value(it), depth + 1);
        }
        put(o, "}", 1);
        break;
    }
    case JSON_ARRAY: {
        if (depth >= JSON_WRITE_MAX_DEPTH) {
            put_by_jansson(o, v);
            break;
        }
        put(o, "[", 1);
        size_t n = json_array_size(v);
        for (size_t i = 0; i < n; i++) {
            if (i)
                put(o, ",", 1);
            put_value(o, json_array_get(v, i), depth + 1);
        }
        put(o, "]", 1);
        break;
    }
    case JSON_STRING:
        put_string(o, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        put_integer(o, json_integer_value(v));
        break;
    case JSON_REAL:
        put_by_jansson(o, v);
        break;
    case JSON_TRUE:
        put(o, "true", 4);
        break;
    case JSON_FALSE:
        put(o, "false", 5);
        break;
    case JSON_NULL:
        put(o, "null", 4);
        break;
    }
}

char *json_write(const json_t *v, size_t *len)
{
    char stack[4096];
    struct out o = {stack, 0, sizeof stack, 0, 0};
    if (v)
        put_value(&o, v, 0);
    else
        o.failed = 1;
    char *s = o.failed ? NULL : o.on_heap ? realloc(o.p, o.len + 1) : malloc(o.len + 1);
    if (!s) {
        if (o.on_heap)
            free(o.p);
        return NULL;
    }
    if (!o.on_heap)
        memcpy(s, stack, o.len);
    s[o.len] = '\0';
    if (len)
        *len = o.len;
    return s;
}
