/* check — the unit tests' tiny assertion kit.
 *
 * CHECK* macros count a pass or a failure and go on (a failed check prints
 * where and why on stdout). check_summary() prints the last line every test
 * executable ends with, "N passed, N failed", and returns the exit status
 * (non-zero when anything failed). Header-only: each test is one file. */
#ifndef MCPD_TEST_CHECK_H
#define MCPD_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int check_passed, check_failed;

static inline int check_record(int ok, const char *file, int line, const char *what)
{
    if (ok) {
        check_passed++;
    } else {
        check_failed++;
        printf("FAIL %s:%d: %s\n", file, line, what);
        fflush(stdout);
    }
    return ok;
}

#define CHECK(cond) check_record((cond) ? 1 : 0, __FILE__, __LINE__, #cond)

#define CHECK_INT(a, b)                                                                            \
    do {                                                                                           \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                            \
        if (!check_record(check_a_ == check_b_, __FILE__, __LINE__, #a " == " #b))                 \
            printf("     got %lld, want %lld\n", check_a_, check_b_);                              \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *check_a_ = (a), *check_b_ = (b);                                               \
        int check_ok_ = check_a_ && check_b_ && strcmp(check_a_, check_b_) == 0;                   \
        if (!check_record(check_ok_, __FILE__, __LINE__, #a " == " #b))                            \
            printf("     got \"%s\", want \"%s\"\n", check_a_ ? check_a_ : "(null)",               \
                   check_b_ ? check_b_ : "(null)");                                                \
    } while (0)

/* Prints the summary line (always the last line on stdout). */
static inline int check_summary(void)
{
    printf("%d passed, %d failed\n", check_passed, check_failed);
    fflush(stdout);
    return check_failed ? 1 : 0;
}

#endif
