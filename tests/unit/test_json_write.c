/* test_json_write — json_write (json_write.c) against jansson's own
 * json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY): the same bytes for every
 * value, including escapes, every control byte, multi-byte UTF-8, NUL
 * inside strings and keys, integer extremes, reals, deep nesting, texts
 * past the stack buffer, and thousands of random trees; the same refusal
 * (NULL) for strings that are not UTF-8 and for cycles. */
#include "check.h"
#include "json_write.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Checks that both encoders give the same text, or both fail; names the
 * caller's line. Consumes v. */
#define same(v, what) same_at(v, what, __LINE__)
static void same_at(json_t *v, const char *what, int line)
{
    char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t len = 12345;
    char *got = json_write(v, &len);
    int ok = (!want && !got) || (want && got && strcmp(want, got) == 0 && len == strlen(want));
    if (!check_record(ok, __FILE__, line, what))
        printf("     jansson: %.200s\n     json_write: %.200s\n", want ? want : "(NULL)",
               got ? got : "(NULL)");
    free(want);
    free(got);
    json_decref(v);
}

static void scalars(void)
{
    same(json_null(), "null");
    same(json_true(), "true");
    same(json_false(), "false");
    same(json_integer(0), "0");
    same(json_integer(-1), "-1");
    same(json_integer(INT64_MAX), "INT64_MAX");
    same(json_integer(INT64_MIN), "INT64_MIN");
    same(json_real(0.1), "0.1");
    same(json_real(-2.5e300), "-2.5e300");
    same(json_real(3.0), "3.0");
    same(json_string(""), "empty string");
    same(json_object(), "empty object");
    same(json_array(), "empty array");
}

static void strings(void)
{
    char all[128];
    for (int i = 0; i < 127; i++)
        all[i] = (char)(i + 1);
    all[127] = '\0';
    same(json_string(all), "every ASCII byte but NUL");
    same(json_stringn("a\0b", 3), "NUL inside a string");
    same(json_string("quote \" backslash \\ slash / tab \t"), "escapes");
    same(json_string("é € 𝄞 \xf4\x8f\xbf\xbf"), "2-, 3- and 4-byte UTF-8, U+10FFFF");
    json_t *o = json_object();
    json_object_setn_new(o, "k\0ey", 4, json_integer(1));
    json_object_set_new(o, "\"\n", json_string("v"));
    same(o, "keys with NUL and escapes");
    /* Not UTF-8 (built unchecked, as a careless caller could): both fail. */
    const char *bad[] = {"\x80",         "\xc0\xaf",         "\xe0\x80\xaf",
                         "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80",
                         "ab\xc3",       "\xe2\x82"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        same(json_stringn_nocheck(bad[i], strlen(bad[i])), "invalid UTF-8 is refused");
}

static void sizes(void)
{
    size_t n = 100000;
    char *big = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        big[i] = i % 97 == 0 ? '\n' : (char)('a' + i % 26);
    big[n] = '\0';
    same(json_string(big), "a string past the stack buffer");
    json_t *a = json_array();
    for (int i = 0; i < 5000; i++)
        json_array_append_new(a, json_pack("{s:i,s:s}", "i", i, "s", "text"));
    same(a, "an array past the stack buffer");
    free(big);

    json_t *deep = json_integer(7);
    for (int i = 0; i < JSON_WRITE_MAX_DEPTH + 50; i++)
        deep = i % 2 ? json_pack("[o]", deep) : json_pack("{s:o}", "k", deep);
    same(deep, "nesting past JSON_WRITE_MAX_DEPTH (handed to jansson there)");

    json_t *loop = json_array();
    json_t *inner = json_object();
    json_object_set(inner, "loop", loop);
    json_array_append_new(loop, inner); /* loop -> inner -> loop */
    char *got = json_write(loop, NULL);
    CHECK(got == NULL); /* a cycle fails, as in jansson, and returns */
    free(got);
    json_object_del(inner, "loop");
    json_decref(loop);
}

/* ---- random trees ---- */

static uint64_t rng = 0x9E3779B97F4A7C15u;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static size_t random_text(char *buf)
{
    static const char *pieces[] = {"a", "Z", " ", "\"", "\\", "/", "\n", "\x01", "\x1f", "\x7f",
                                   "é", "€", "𝄞", "\0", "{",  "}", "[",  "]",    ":",    ","};
    size_t len = 0;
    for (unsigned i = rnd(12); i > 0; i--) {
        const char *p = pieces[rnd(sizeof pieces / sizeof *pieces)];
        size_t n = *p ? strlen(p) : 1;
        memcpy(buf + len, p, n);
        len += n;
    }
    return len;
}

static json_t *random_value(int depth)
{
    char text[64];
    switch (depth > 5 ? 2 + rnd(6) : rnd(8)) {
    case 0: {
        json_t *o = json_object();
        for (unsigned i = rnd(5); i > 0; i--) {
            size_t n = random_text(text);
            json_object_setn_new(o, text, n, random_value(depth + 1));
        }
        return o;
    }
    case 1: {
        json_t *a = json_array();
        for (unsigned i = rnd(5); i > 0; i--)
            json_array_append_new(a, random_value(depth + 1));
        return a;
    }
    case 2:
    case 3: {
        size_t n = random_text(text);
        return json_stringn(text, n);
    }
    case 4:
        return json_integer((json_int_t)((int64_t)rng >> rnd(64)));
    case 5:
        return json_real((double)(int32_t)rnd(1u << 31) / (1 + rnd(1000)));
    case 6:
        return rnd(2) ? json_true() : json_false();
    default:
        return json_null();
    }
}

static void random_trees(void)
{
    int failed_before = check_failed;
    for (int i = 0; i < 5000 && check_failed == failed_before; i++)
        same(random_value(0), "a random tree");
}

int main(void)
{
    scalars();
    strings();
    sizes();
    random_trees();
    return check_summary();
}
