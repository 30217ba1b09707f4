/* test_json_text — json_text.c against jansson itself.
 *
 * Writing: the same bytes as json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)
 * for every value, including escapes, every control byte, multi-byte UTF-8,
 * NUL inside strings and keys, integer extremes, reals, deep nesting, texts
 * past the stack buffer, and thousands of random trees; the same refusal
 * (NULL) for strings that are not UTF-8 and for cycles.
 *
 * Reading: the same verdict as json_loadb(JSON_REJECT_DUPLICATES |
 * JSON_DECODE_ANY | JSON_ALLOW_NUL), and the same value, for fixed texts on
 * every rule (numbers, escapes, surrogates, UTF-8, literals, duplicates, NUL
 * in keys, trailing bytes) and for random texts and random corruptions of
 * them; and the depth limit. */
#include "check.h"
#include "json_text.h"

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
    char *got = json_text_write(v, &len);
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
    for (int i = 0; i < JSON_TEXT_MAX_DEPTH + 50; i++)
        deep = i % 2 ? json_pack("[o]", deep) : json_pack("{s:o}", "k", deep);
    same(deep, "nesting past JSON_TEXT_MAX_DEPTH (handed to jansson there)");

    json_t *loop = json_array();
    json_t *inner = json_object();
    json_object_set(inner, "loop", loop);
    json_array_append_new(loop, inner); /* loop -> inner -> loop */
    char *got = json_text_write(loop, NULL);
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

/* ---- reading ---- */

#define JANSSON_FLAGS (JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL)

/* Checks that json_text_read and json_loadb agree on the len bytes at buf:
 * both refuse them, or both accept them as the same value (compared as
 * jansson's own text of it, so key order counts). Returns 1 if they agree. */
#define read_same(buf, len, what) read_same_at(buf, len, what, __LINE__)
static int read_same_at(const char *buf, size_t len, const char *what, int line)
{
    json_error_t je;
    char why[128];
    json_t *want = json_loadb(buf, len, JANSSON_FLAGS, &je);
    json_t *got = json_text_read(buf, len, 2048, why, sizeof why);
    char *a = want ? json_dumps(want, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    char *b = got ? json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    int ok = (!want && !got && why[0] != '\0') || (a && b && strcmp(a, b) == 0);
    if (!check_record(ok, __FILE__, line, what))
        printf("     text: %.*s\n     jansson: %s (%s)\n     json_text_read: %s (%s)\n",
               (int)(len < 200 ? len : 200), buf, a ? a : "refused", want ? "" : je.text,
               b ? b : "refused", got ? "" : why);
    free(a);
    free(b);
    json_decref(want);
    json_decref(got);
    return ok;
}

static void fixed_texts(void)
{
    static const char *texts[] = {
        /* numbers */
        "0",
        "-0",
        "7",
        "-12",
        "1.5",
        "-0.0",
        "1e5",
        "1E+5",
        "2e-3",
        "0e0",
        "0.0001",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "-9223372036854775809",
        "99999999999999999999999",
        "1e308",
        "1e309",
        "-1e309",
        "1e-400",
        "01",
        "-01",
        "00",
        "-",
        "--1",
        "+1",
        ".5",
        "1.",
        "1.e5",
        "1e",
        "1e+",
        "0x10",
        "1.5.2",
        "123456789012345678901234567890.123456789012345678901234567890e-10",
        "NaN",
        "Infinity",
        /* literals */
        "true",
        "false",
        "null",
        "True",
        "nul",
        "nulll",
        "truefalse",
        "true false",
        "null1",
        /* strings and escapes */
        "\"\"",
        "\"a\"",
        "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"",
        "\"\\u0041\\u00e9\\u20AC\"",
        "\"\\uD834\\uDD1E\"",
        "\"\\uD834\"",
        "\"\\uDD1E\"",
        "\"\\uD834\\u0041\"",
        "\"\\uD834x\"",
        "\"\\u12\"",
        "\"\\u12G4\"",
        "\"\\x\"",
        "\"\\\"",
        "\"abc",
        "\"\\u0000\"",
        "\"a\tb\"",
        "\"a\nb\"",
        "\"\x7f\"",
        "\"é€𝄞\"",
        "\"\xc3\"",
        "\"\xc0\xaf\"",
        "\"\xed\xa0\x80\"",
        "\"\xf4\x90\x80\x80\"",
        "\"\xff\"",
        "\"\xe2\x82\"",
        /* containers */
        "[]",
        "{}",
        "[1,2,3]",
        " [ 1 , [ ] , { } ] ",
        "[1,]",
        "[,1]",
        "[1 2]",
        "[",
        "]",
        "{\"a\":1}",
        "{\"a\":1,}",
        "{\"a\" 1}",
        "{\"a\":}",
        "{1:2}",
        "{\"a\":1,\"a\":2}",
        "{\"a\":1,\"b\":{\"a\":2}}",
        "{\"\\u0000\":1}",
        "{\"a\\u0000b\":1}",
        "{\"b\":1,\"a\":2,\"c\":3}",
        "{\"\\u0041\":1,\"A\":2}",
        "{\"a\":[{\"b\":[null,true,false,\"x\",-1.25e-3]}]}",
        "[\"a\"]x",
        "[] []",
        "{}}",
        "{\"a\"",
        "{\"a\":",
        /* whitespace and stray bytes */
        "",
        " ",
        " \t\r\n 1 \t\r\n ",
        "\v1",
        "\f1",
        "1\f",
        "\xef\xbb\xbf"
        "1",
        "/*c*/1",
        "'a'",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        read_same(texts[i], strlen(texts[i]), texts[i]);
    read_same("\"a\0b\"", 5, "a raw NUL inside a string");
    read_same("[1]\0", 4, "a NUL after an array");
    /* The one difference: jansson's lexer skips a NUL byte right after a
     * number or a literal (it reads one byte ahead and takes a pushed-back
     * NUL for an empty buffer), so it reads "[1\0]" as [1]. A NUL byte is
     * never valid JSON outside a string; json_text_read refuses it. */
    static const char *nul_after[] = {"1\0", "[1\0]", "true\0", "[null\0]"};
    for (size_t i = 0; i < sizeof nul_after / sizeof *nul_after; i++) {
        char why[128];
        size_t n = strlen(nul_after[i]) + 1 + (nul_after[i][0] == '[');
        json_t *jv = json_loadb(nul_after[i], n, JANSSON_FLAGS, NULL);
        json_t *v = json_text_read(nul_after[i], n, 64, why, sizeof why);
        CHECK(jv != NULL && v == NULL);
        json_decref(jv);
        json_decref(v);
    }
}

static void depth(void)
{
    char buf[300];
    char why[128];
    for (int n = 62; n <= 66; n++) {
        memset(buf, '[', (size_t)n);
        memset(buf + n, ']', (size_t)n);
        json_t *v = json_text_read(buf, 2 * (size_t)n, 64, why, sizeof why);
        CHECK((v != NULL) == (n <= 64));
        CHECK(v || strstr(why, "nested too deeply"));
        json_decref(v);
    }
}

static void random_texts(void)
{
    static const char palette[] = "{}[]\":,\\-+.eE0159 \nutfalsnx\x01\x7f\x80\xc3\xa9\xed\xf0";
    char *text = NULL;
    int failed_before = check_failed;
    for (int i = 0; i < 20000 && check_failed == failed_before; i++) {
        json_t *v = random_value(0);
        free(text);
        text = json_dumps(v, JSON_ENCODE_ANY | (rnd(2) ? JSON_COMPACT : JSON_INDENT(rnd(3))));
        json_decref(v);
        size_t len = strlen(text);
        if (!read_same(text, len, "a random text"))
            break;
        /* Corruptions: a byte replaced, dropped or doubled, or the text cut. */
        for (int k = 0; k < 4 && len > 0; k++) {
            size_t at = rnd((unsigned)len);
            char *t = malloc(len + 2);
            memcpy(t, text, len);
            size_t n = len;
            switch (rnd(4)) {
            case 0:
                t[at] = palette[rnd(sizeof palette - 1)];
                break;
            case 1:
                memmove(t + at, t + at + 1, len - at - 1);
                n--;
                break;
            case 2:
                memmove(t + at + 1, t + at, len - at);
                n++;
                break;
            default:
                n = at;
            }
            int ok = read_same(t, n, "a corrupted text");
            free(t);
            if (!ok)
                break;
        }
    }
    free(text);
}

int main(void)
{
    scalars();
    strings();
    sizes();
    random_trees();
    fixed_texts();
    depth();
    random_texts();
    return check_summary();
}
