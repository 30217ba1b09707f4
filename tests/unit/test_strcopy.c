/* test_strcopy — strcopy (service/base/strcopy.c) copies what fits, always
 * terminates, returns what it wrote, and treats NULL as "". */
#include "check.h"
#include "strcopy.h"

int main(void)
{
    char buf[6];
    memset(buf, 'x', sizeof buf);
    CHECK_INT(strcopy(buf, sizeof buf, "abc"), 3);
    CHECK_STR(buf, "abc");
    CHECK_INT(strcopy(buf, sizeof buf, "abcde"), 5); /* exactly fits */
    CHECK_STR(buf, "abcde");
    CHECK_INT(strcopy(buf, sizeof buf, "abcdefgh"), 5); /* cut short */
    CHECK_STR(buf, "abcde");
    CHECK_INT(strcopy(buf, sizeof buf, NULL), 0);
    CHECK_STR(buf, "");
    CHECK_INT(strcopy(buf, 1, "abc"), 0); /* room for the NUL only */
    CHECK_STR(buf, "");
    /* Reads no further than it may write: src need not be terminated. */
    const char unterminated[4] = {'w', 'x', 'y', 'z'};
    CHECK_INT(strcopy(buf, 4, unterminated), 3);
    CHECK_STR(buf, "wxy");
    return check_summary();
}
