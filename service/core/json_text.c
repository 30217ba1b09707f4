/* json_text — see json_text.h. */
#include "json_text.h"

#include "utf8.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading ---- */

struct reader {
    const unsigned char *p, *end, *start;
    int depth, max_depth;
    char *err;
    size_t errlen;
};

static json_t *fail(struct reader *r, const char *what)
{
    if (r->err[0] == '\0')
        snprintf(r->err, r->errlen, "%s at byte %zu", what, (size_t)(r->p - r->start));
    return NULL;
}

static void skip_space(struct reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
        r->p++;
}

/* Steps over c after any whitespace; 0, having moved nothing but the
 * whitespace, when the next byte is not c. */
static int eat(struct reader *r, unsigned char c)
{
    skip_space(r);
    if (r->p >= r->end || *r->p != c)
        return 0;
    r->p++;
    return 1;
}

static int hex4(const unsigned char *s)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int c = s[i], d = c >= '0' && c <= '9'   ? c - '0'
                          : c >= 'a' && c <= 'f' ? c - 'a' + 10
                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                 : -1;
        if (d < 0)
            return -1;
        v = v << 4 | d;
    }
    return v;
}

static size_t put_utf8(unsigned char *t, uint32_t cp)
{
    if (cp < 0x80) {
        t[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        t[0] = (unsigned char)(0xC0 | cp >> 6);
        t[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        t[0] = (unsigned char)(0xE0 | cp >> 12);
        t[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        t[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    t[0] = (unsigned char)(0xF0 | cp >> 18);
    t[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    t[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    t[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes the escapes of the string text [s, e) (checked by read_string)
 * into t, which has room for e - s bytes; returns the decoded length, or -1
 * for a \u escape that is not a whole UTF-16 character. */
static long unescape(const unsigned char *s, const unsigned char *e, unsigned char *t)
{
    unsigned char *t0 = t;
    while (s < e) {
        if (*s != '\\') {
            *t++ = *s++;
            continue;
        }
        s++;
        if (*s != 'u') {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            *t++ = (unsigned char)to[strchr(from, *s) - from];
            s++;
            continue;
        }
        uint32_t cp = (uint32_t)hex4(s + 1);
        s += 5;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            int lo = e - s >= 6 && s[0] == '\\' && s[1] == 'u' ? hex4(s + 2) : -1;
            if (lo < 0xDC00 || lo > 0xDFFF)
                return -1;
            cp = ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00) + 0x10000;
            s += 6;
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return -1;
        }
        t += put_utf8(t, cp);
    }
    return t - t0;
}

/* A string token (r->p at its opening quote): its decoded bytes in *out,
 * either pointing into the text (no escapes) or into a malloc'd copy that
 * *copy owns. Returns the length, or -1 after fail(). */
static long read_string(struct reader *r, const char **out, char **copy)
{
    const unsigned char *s = ++r->p;
    int escaped = 0;
    *copy = NULL;
    for (;;) {
        if (r->p >= r->end)
            return fail(r, "unterminated string"), -1;
        unsigned char c = *r->p;
        if (c == '"')
            break;
        if (c < 0x20)
            return fail(r, "control character in string"), -1;
        if (c == '\\') {
            unsigned char e = r->p + 1 < r->end ? r->p[1] : 0;
            if (e == 'u') {
                if (r->end - r->p < 6 || hex4(r->p + 2) < 0)
                    return fail(r, "invalid escape"), -1;
                r->p += 6;
            } else if (e && strchr("\"\\/bfnrt", e)) {
                r->p += 2;
            } else {
                return fail(r, "invalid escape"), -1;
            }
            escaped = 1;
        } else if (c >= 0x80) {
            size_t k = utf8_seq_len(r->p, (size_t)(r->end - r->p));
            if (k == 0)
                return fail(r, "invalid UTF-8"), -1;
            r->p += k;
        } else {
            r->p++;
        }
    }
    const unsigned char *e = r->p++;
    if (!escaped) {
        *out = (const char *)s;
        return e - s;
    }
    if (!(*copy = malloc((size_t)(e - s) + 1)))
        return fail(r, "out of memory"), -1;
    long n = unescape(s, e, (unsigned char *)*copy);
    if (n < 0) {
        free(*copy);
        *copy = NULL;
        return fail(r, "invalid Unicode escape"), -1;
    }
    *out = *copy;
    return n;
}

static json_t *read_number(struct reader *r)
{
    const unsigned char *s = r->p, *e = r->end, *p = s;
    int real = 0;
    if (p < e && *p == '-')
        p++;
    if (p < e && *p == '0') {
        p++;
        if (p < e && *p >= '0' && *p <= '9')
            return fail(r, "invalid number");
    } else if (p < e && *p >= '1' && *p <= '9') {
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    } else {
        return fail(r, "invalid number");
    }
    if (p < e && *p == '.') {
        if (++p >= e || *p < '0' || *p > '9')
            return fail(r, "invalid number");
        while (p < e && *p >= '0' && *p <= '9')
            p++;
        real = 1;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        if (++p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || *p < '0' || *p > '9')
            return fail(r, "invalid number");
        while (p < e && *p >= '0' && *p <= '9')
            p++;
        real = 1;
    }
    r->p = p;
    if (!real) {
        /* Accumulated negative: INT64_MIN has no positive twin. */
        int neg = *s == '-';
        int64_t v = 0;
        for (const unsigned char *d = s + neg; d < p; d++) {
            int digit = *d - '0';
            if (v < (INT64_MIN + digit) / 10)
                return fail(r, "integer out of range");
            v = v * 10 - digit;
        }
        if (!neg && v == INT64_MIN)
            return fail(r, "integer out of range");
        return json_integer(neg ? v : -v);
    }
    char buf[64], *text = (size_t)(p - s) < sizeof buf ? buf : malloc((size_t)(p - s) + 1);
    if (!text)
        return fail(r, "out of memory");
    memcpy(text, s, (size_t)(p - s));
    text[p - s] = '\0';
    errno = 0;
    double d = strtod(text, NULL);
    int overflow = errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL);
    if (text != buf)
        free(text);
    return overflow ? fail(r, "real number out of range") : json_real(d);
}

static json_t *read_value(struct reader *r);

static json_t *read_object(struct reader *r)
{
    json_t *o = json_object();
    if (!o)
        return fail(r, "out of memory");
    r->p++;
    if (eat(r, '}'))
        return o;
    do {
        skip_space(r);
        if (r->p >= r->end || *r->p != '"') {
            fail(r, "string expected");
            break;
        }
        const char *key;
        char *copy;
        long n = read_string(r, &key, &copy);
        if (n < 0)
            break;
        json_t *v = NULL;
        if (memchr(key, '\0', (size_t)n))
            fail(r, "NUL in object key");
        else if (!eat(r, ':'))
            fail(r, "':' expected");
        else
            v = read_value(r);
        size_t before = json_object_size(o);
        /* A duplicate replaces its first value instead of adding a key. */
        int bad = !v || json_object_setn_new_nocheck(o, key, (size_t)n, v) != 0 ||
                  json_object_size(o) == before;
        free(copy);
        if (bad) {
            if (v)
                fail(r, "duplicate object key");
            break;
        }
        if (eat(r, '}'))
            return o;
    } while (eat(r, ','));
    fail(r, "',' or '}' expected");
    json_decref(o);
    return NULL;
}

static json_t *read_array(struct reader *r)
{
    json_t *a = json_array();
    if (!a)
        return fail(r, "out of memory");
    r->p++;
    if (eat(r, ']'))
        return a;
    do {
        json_t *v = read_value(r);
        if (!v || json_array_append_new(a, v) != 0)
            break;
        if (eat(r, ']'))
            return a;
    } while (eat(r, ','));
    fail(r, "',' or ']' expected");
    json_decref(a);
    return NULL;
}

/* A literal: the whole run of letters must be the word, as in jansson. */
static json_t *read_word(struct reader *r)
{
    const unsigned char *s = r->p;
    while (r->p < r->end && ((*r->p >= 'a' && *r->p <= 'z') || (*r->p >= 'A' && *r->p <= 'Z')))
        r->p++;
    size_t n = (size_t)(r->p - s);
    if (n == 4 && memcmp(s, "true", 4) == 0)
        return json_true();
    if (n == 5 && memcmp(s, "false", 5) == 0)
        return json_false();
    if (n == 4 && memcmp(s, "null", 4) == 0)
        return json_null();
    r->p = s;
    return fail(r, "invalid token");
}

static json_t *read_value(struct reader *r)
{
    skip_space(r);
    if (r->p >= r->end)
        return fail(r, "premature end of input");
    switch (*r->p) {
    case '{':
    case '[': {
        if (++r->depth > r->max_depth)
            return fail(r, "JSON nested too deeply");
        json_t *v = *r->p == '{' ? read_object(r) : read_array(r);
        r->depth--;
        return v;
    }
    case '"': {
        const char *s;
        char *copy;
        long n = read_string(r, &s, &copy);
        json_t *v = n < 0 ? NULL : json_stringn_nocheck(s, (size_t)n);
        free(copy);
        return n < 0 || v ? v : fail(r, "out of memory");
    }
    default:
        if (*r->p == '-' || (*r->p >= '0' && *r->p <= '9'))
            return read_number(r);
        return read_word(r);
    }
}

json_t *json_text_read(const char *buf, size_t len, int max_depth, char *err, size_t errlen)
{
    const unsigned char *s = (const unsigned char *)buf;
    struct reader r = {s, s + len, s, 0, max_depth, err, errlen};
    err[0] = '\0';
    json_t *v = read_value(&r);
    skip_space(&r);
    if (v && r.p != r.end) {
        json_decref(v);
        return fail(&r, "end of input expected");
    }
    if (!v && err[0] == '\0')
        fail(&r, "out of memory");
    return v;
}

/* ---- writing ---- */

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

static void put_string(struct out *o, const char *str, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *s = (const unsigned char *)str;
    size_t run = 0; /* start of the bytes not yet written */
    put(o, "\"", 1);
    for (size_t i = 0; i < len;) {
        unsigned char c = s[i];
        if (c >= 0x80) {
            size_t k = utf8_seq_len(s + i, len - i);
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
        if (depth >= JSON_TEXT_MAX_DEPTH) {
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
        if (depth >= JSON_TEXT_MAX_DEPTH) {
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

char *json_text_write(const json_t *v, size_t *len)
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
