/* test_safe_text — mcp-admin's escaping of text from clients, upstream
 * children and the database before it reaches a terminal (admin/safe_text.c):
 * C0 controls, DEL, C1 controls, bidirectional controls, line separators
 * and bytes that are not UTF-8 come out as visible escapes; printable ASCII,
 * other UTF-8 and backslashes come out unchanged; escaping is idempotent;
 * embedded NUL bytes are escaped; a JSON tree is escaped at every depth;
 * and no output, whatever the input, holds a byte a terminal acts on. */
#include "check.h"
#include "safe_text.h"

#include <stdlib.h>

static void check_escape(const char *in, size_t n, const char *want, int line)
{
    char *got = safe_text_n(in, n);
    if (!check_record(got && strcmp(got, want) == 0, __FILE__, line, want))
        printf("     got \"%s\"\n", got ? got : "(null)");
    free(got);
}
#define ESC(in, want) check_escape(in, sizeof(in) - 1, want, __LINE__)

/* 1 when s holds no byte below 0x20, no DEL, no C1 (C2 80..C2 9F), no
 * bidi control or separator (E2 80 AA..AE, E2 81 A6..A9, E2 80 8E/8F,
 * E2 80 A8/A9, D8 9C) and is valid UTF-8. */
static int terminal_safe(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; p[i]; i++) {
        if (p[i] < 0x20 || p[i] == 0x7f)
            return 0;
        if (p[i] == 0xc2 && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f)
            return 0;
        if (p[i] == 0xd8 && p[i + 1] == 0x9c)
            return 0;
        if (p[i] == 0xe2 && p[i + 1] == 0x80 &&
            ((p[i + 2] >= 0xaa && p[i + 2] <= 0xae) || p[i + 2] == 0x8e || p[i + 2] == 0x8f ||
             p[i + 2] == 0xa8 || p[i + 2] == 0xa9))
            return 0;
        if (p[i] == 0xe2 && p[i + 1] == 0x81 && p[i + 2] >= 0xa6 && p[i + 2] <= 0xa9)
            return 0;
    }
    json_t *j = json_string(s); /* jansson checks UTF-8 */
    int ok = j != NULL;
    json_decref(j);
    return ok;
}

int main(void)
{
    /* Plain text, UTF-8 and backslashes pass unchanged. */
    ESC("admin-sdk 4.5.6", "admin-sdk 4.5.6");
    ESC("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80",
        "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80");
    ESC("{\"text\":\"a\\\"b\\u001b\"}", "{\"text\":\"a\\\"b\\u001b\"}");
    ESC("", "");

    /* The title-setting, screen-clearing name. */
    ESC("\x1b]0;title\x07\x1b[2J", "\\x1b]0;title\\x07\\x1b[2J");
    /* C0 controls, DEL. */
    ESC("a\nb\rc\td", "a\\nb\\rc\\td");
    ESC("\x01\x08\x1f\x7f", "\\x01\\x08\\x1f\\x7f");
    /* An embedded NUL is shown, not a place to stop. */
    ESC("a\0b", "a\\x00b");
    /* C1: NEL, CSI (U+009B, which a UTF-8 terminal may take as ESC [), and
     * the range's ends. */
    ESC("\xc2\x85\xc2\x9b"
        "2J\xc2\x80\xc2\x9f",
        "\\u0085\\u009b2J\\u0080\\u009f");
    /* U+00A0, just past C1, is text. */
    ESC("\xc2\xa0", "\xc2\xa0");
    /* Bidirectional overrides, embeddings, isolates and marks, and line
     * and paragraph separators. */
    ESC("\xe2\x80\xae"
        "evil\xe2\x80\xac",
        "\\u202eevil\\u202c");
    ESC("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xad", "\\u202a\\u202b\\u202d");
    ESC("\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", "\\u2066\\u2067\\u2068\\u2069");
    ESC("\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c", "\\u200e\\u200f\\u061c");
    ESC("\xe2\x80\xa8\xe2\x80\xa9", "\\u2028\\u2029");
    /* Neighbours of the escaped ranges stay text (U+2065 unassigned, U+206A
     * deprecated but inert; U+202F narrow no-break space). */
    ESC("\xe2\x80\xaf\xe2\x81\xa5", "\xe2\x80\xaf\xe2\x81\xa5");
    /* Not UTF-8: a stray continuation, a lone lead byte, an overlong
     * slash, an encoded surrogate, a sequence cut short, 0xff. */
    ESC("\x80", "\\x80");
    ESC("\xc3(", "\\xc3(");
    ESC("\xc0\xaf", "\\xc0\\xaf");
    ESC("\xed\xa0\x80", "\\xed\\xa0\\x80");
    ESC("ok\xe2\x80", "ok\\xe2\\x80");
    ESC("\xff\xfe", "\\xff\\xfe");
    /* An overlong form of ESC must not turn back into ESC. */
    ESC("\xc0\x9b", "\\xc0\\x9b");

    /* Idempotent: escaped text is safe text. */
    const char *hostile = "\x1b[31m\xc2\x9b\xe2\x80\xae\x80\\x1b\x7f";
    char *once = safe_text(hostile), *twice = safe_text(once);
    CHECK_STR(once, twice);
    CHECK(terminal_safe(once));
    free(once);
    free(twice);
    CHECK(safe_text(NULL) == NULL);

    /* Every byte pair, and a few triples around the escaped ranges: the
     * output is always terminal-safe. */
    int all_safe = 1;
    for (int a = 0; a < 256 && all_safe; a++)
        for (int b = 0; b < 256 && all_safe; b++) {
            char in[3] = {(char)a, (char)b, 0};
            char *out = safe_text_n(in, 2);
            all_safe = out && terminal_safe(out);
            free(out);
        }
    for (int b = 0x80; b < 0xc0 && all_safe; b++)
        for (int c = 0x80; c < 0xc0 && all_safe; c++) {
            char in[4] = {(char)0xe2, (char)b, (char)c, 0};
            char *out = safe_text_n(in, 3);
            all_safe = out && terminal_safe(out);
            free(out);
        }
    CHECK(all_safe);

    /* A tree: strings at every depth, other values untouched. */
    json_t *v = json_pack("{s:s, s:[s, i, {s:s}], s:n, s:b}", "name", "\x1b]0;t\x07", "list",
                          "\xc2\x9b", 7, "deep", "a\nb", "none", "flag", 1);
    safe_text_json(v);
    CHECK_STR(json_string_value(json_object_get(v, "name")), "\\x1b]0;t\\x07");
    json_t *list = json_object_get(v, "list");
    CHECK_STR(json_string_value(json_array_get(list, 0)), "\\u009b");
    CHECK_INT(json_integer_value(json_array_get(list, 1)), 7);
    CHECK_STR(json_string_value(json_object_get(json_array_get(list, 2), "deep")), "a\\nb");
    CHECK(json_is_null(json_object_get(v, "none")));
    CHECK(json_is_true(json_object_get(v, "flag")));
    json_decref(v);
    /* A string holding NUL (json_stringn allows one). */
    json_t *nul = json_stringn("a\0\x1b", 3);
    safe_text_json(nul);
    CHECK_STR(json_string_value(nul), "a\\x00\\x1b");
    json_decref(nul);

    return check_summary();
}
