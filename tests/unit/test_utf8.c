/* test_utf8 — the UTF-8 validator (service/base/utf8.c): the edge cases by
 * name, every 1- to 3-byte sequence and every 4-byte one's first two bytes
 * against a decoder that works on code points, and text fed in every split
 * gives the answer it gives whole. */
#include "check.h"
#include "utf8.h"

/* The rules stated on code points: decode, then refuse overlong forms,
 * surrogates and anything past U+10FFFF. */
static size_t reference_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t k = c < 0xC0 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 0;
    if (k == 0 || k > n)
        return 0;
    uint32_t cp = c & (0x7F >> k);
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[k] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
        return 0;
    return k;
}

static void test_named_cases(void)
{
    struct {
        const char *bytes;
        int valid;
    } cases[] = {
        {"", 1},
        {"plain ascii", 1},
        {"\xc3\xa9", 1},         /* é */
        {"\xe2\x82\xac", 1},     /* € */
        {"\xf0\x9d\x84\x9e", 1}, /* U+1D11E */
        {"\xf4\x8f\xbf\xbf", 1}, /* U+10FFFF */
        {"\xed\x9f\xbf", 1},     /* U+D7FF, just below the surrogates */
        {"\xee\x80\x80", 1},     /* U+E000, just above */
        {"\xc0\xaf", 0},         /* overlong '/' */
        {"\xc1\xbf", 0},         /* overlong */
        {"\xe0\x80\xaf", 0},     /* overlong 3-byte */
        {"\xf0\x80\x80\xaf", 0}, /* overlong 4-byte */
        {"\xed\xa0\x80", 0},     /* U+D800 surrogate */
        {"\xed\xbf\xbf", 0},     /* U+DFFF surrogate */
        {"\xf4\x90\x80\x80", 0}, /* U+110000 */
        {"\xf5\x80\x80\x80", 0}, /* beyond */
        {"\xff", 0},
        {"\x80", 0},         /* stray continuation */
        {"\xe2\x82", 0},     /* truncated */
        {"\xe2\x28\xa1", 0}, /* bad continuation */
        {"a\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *b = cases[i].bytes;
        size_t len = strlen(b);
        if (!CHECK(utf8_valid(b, len) == cases[i].valid))
            printf("     case %zu\n", i);
        /* Every split in two gives the same answer. */
        for (size_t cut = 0; cut <= len; cut++) {
            struct utf8_check u;
            utf8_check_init(&u);
            int ok = utf8_check_feed(&u, b, cut) == 0 &&
                     utf8_check_feed(&u, b + cut, len - cut) == 0 && utf8_check_complete(&u);
            if (!CHECK(ok == cases[i].valid))
                printf("     case %zu cut at %zu\n", i, cut);
        }
    }
}

static int reference_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0, k; i < n; i += k)
        if ((k = s[i] < 0x80 ? 1 : reference_len(s + i, n - i)) == 0)
            return 0;
    return 1;
}

static int compare(const unsigned char *s, size_t n)
{
    return utf8_seq_len(s, n) == reference_len(s, n) && utf8_valid(s, n) == reference_valid(s, n);
}

static void test_against_reference(void)
{
    unsigned char s[4];
    long bad = 0, seen = 0;
    for (unsigned a = 0x80; a <= 0xFF; a++) {
        s[0] = (unsigned char)a;
        bad += !compare(s, 1);
        for (unsigned b = 0; b <= 0xFF; b++) {
            s[1] = (unsigned char)b;
            bad += !compare(s, 2);
            for (unsigned c = 0; c <= 0xFF; c++) {
                s[2] = (unsigned char)c;
                bad += !compare(s, 3);
                /* the fourth byte: a continuation at each end, and not one */
                static const unsigned char last[] = {0x80, 0xBF, 0x7F, 0xC0};
                for (size_t d = 0; d < sizeof last; d++) {
                    s[3] = last[d];
                    bad += !compare(s, 4);
                    seen++;
                }
            }
        }
    }
    CHECK(seen == 128L * 256 * 256 * 4);
    CHECK_INT(bad, 0);
    /* ASCII is never a multi-byte sequence; nothing is one in 0 bytes */
    CHECK_INT(utf8_seq_len((const unsigned char *)"a", 1), 0);
    CHECK_INT(utf8_seq_len((const unsigned char *)"\xc3\xa9", 0), 0);
}

/* utf8_repair: valid text unchanged; each byte that begins no valid
 * sequence becomes one U+FFFD; a sequence cut at the end is such bytes. */
static void test_repair(void)
{
    struct {
        const char *in;
        size_t n;
        const char *want;
    } cases[] = {
        {"plain \xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e", 17,
         "plain \xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e"},
        {"a\xff\xfe", 3, "a\xef\xbf\xbd\xef\xbf\xbd"},
        {"cut \xe2\x82", 6, "cut \xef\xbf\xbd\xef\xbf\xbd"},
        {"\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd"},                 /* overlong '/' */
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* a surrogate */
        {"\x1b[2J", 4,
         "\x1b[2J"}, /* controls are valid UTF-8: escaping them is the printer's job */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[UTF8_REPAIR_CAP(32)];
        size_t n = utf8_repair(cases[i].in, cases[i].n, out);
        CHECK_STR(out, cases[i].want);
        CHECK_INT(n, strlen(cases[i].want));
        CHECK(utf8_valid(out, n));
    }
    /* NUL is kept: the length says where the text ends */
    char out[UTF8_REPAIR_CAP(3)];
    CHECK_INT(utf8_repair("a\0b", 3, out), 3);
    CHECK(memcmp(out, "a\0b", 4) == 0);
    /* the worst case fills the documented capacity exactly */
    char worst[UTF8_REPAIR_CAP(4)];
    CHECK_INT(utf8_repair("\x80\x80\x80\x80", 4, worst), 12);
}

int main(void)
{
    test_named_cases();
    test_against_reference();
    test_repair();
    return check_summary();
}
