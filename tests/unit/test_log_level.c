/* test_log_level — the --log-level names shared by mcpd and mcp-bridge
 * (log_level.c, pure): each name both ways, exact spelling only, and "?"
 * for a level out of range. */
#include "check.h"
#include "log_level.h"

int main(void)
{
    static const struct {
        const char *name;
        enum log_level level;
    } names[] = {
        {"debug", LOG_DEBUG},
        {"info", LOG_INFO},
        {"warn", LOG_WARN},
        {"error", LOG_ERROR},
    };
    for (int i = 0; i < 4; i++) {
        enum log_level got = (enum log_level)99;
        CHECK_INT(log_level_parse(names[i].name, &got), 0);
        CHECK_INT(got, names[i].level);
        CHECK_STR(log_level_name(names[i].level), names[i].name);
    }
    CHECK_INT(LOG_DEBUG < LOG_INFO && LOG_INFO < LOG_WARN && LOG_WARN < LOG_ERROR, 1);

    static const char *const bad[] = {"",       "DEBUG",  "Info",  "warning", "err",
                                      "info ",  " info",  "fatal", "trace",   "debu",
                                      "errors", "info\n", "0",     "1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        enum log_level got = (enum log_level)99;
        if (!check_record(log_level_parse(bad[i], &got) == -1, __FILE__, __LINE__, bad[i]))
            printf("     \"%s\" was accepted\n", bad[i]);
        CHECK_INT(got, 99); /* untouched */
    }
    CHECK_STR(log_level_name((enum log_level)4), "?");
    CHECK_STR(log_level_name((enum log_level)99), "?");
    CHECK_STR(log_level_name((enum log_level) - 1), "?");
    return check_summary();
}
