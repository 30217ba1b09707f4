/* test_duration — mcp-admin's durations and sizes (admin/duration.c, pure):
 * units, overflow and garbage refused; relative times past and future;
 * byte sizes. */
#include "check.h"
#include "duration.h"

int main(void)
{
    int64_t ms = 0;
    CHECK_INT(duration_parse("30d", &ms), 0);
    CHECK(ms == 30LL * 86400000);
    CHECK_INT(duration_parse("1h", &ms), 0);
    CHECK(ms == 3600000);
    CHECK_INT(duration_parse("90s", &ms), 0);
    CHECK(ms == 90000);
    CHECK_INT(duration_parse("250ms", &ms), 0);
    CHECK(ms == 250);
    CHECK_INT(duration_parse("2w", &ms), 0);
    CHECK(ms == 14LL * 86400000);
    static const char *const bad[] = {"",
                                      "d",
                                      "0s",
                                      "-1h",
                                      "1",
                                      "1x",
                                      "1 h",
                                      "1hh",
                                      "99999999999999999999d",
                                      "9223372036854775807d",
                                      "h1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!check_record(duration_parse(bad[i], &ms) == -1, __FILE__, __LINE__, bad[i]))
            printf("     accepted \"%s\"\n", bad[i]);
    CHECK_INT(duration_parse(NULL, &ms), -1);

    char out[32];
    const int64_t now = 1800000000000LL;
    duration_relative(0, now, out, sizeof out);
    CHECK_STR(out, "-");
    duration_relative(now - 2000, now, out, sizeof out);
    CHECK_STR(out, "just now");
    duration_relative(now - 42000, now, out, sizeof out);
    CHECK_STR(out, "42s ago");
    duration_relative(now - 3 * 60000 - 5000, now, out, sizeof out);
    CHECK_STR(out, "3m ago");
    duration_relative(now - 5 * 3600000, now, out, sizeof out);
    CHECK_STR(out, "5h ago");
    duration_relative(now + 29LL * 86400000 + 1000, now, out, sizeof out);
    CHECK_STR(out, "in 29d");

    duration_bytes(512, out, sizeof out);
    CHECK_STR(out, "512 B");
    duration_bytes(3482, out, sizeof out);
    CHECK_STR(out, "3.4 KiB");
    duration_bytes(12LL * 1048576, out, sizeof out);
    CHECK_STR(out, "12.0 MiB");
    return check_summary();
}
