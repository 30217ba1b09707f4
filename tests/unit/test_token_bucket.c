/* test_token_bucket — the rate limiter for upstream stderr and malformed
 * messages (token_bucket.c, pure): a full bucket to start, refill by
 * elapsed time at exactly the rate, capped at the burst, a clock that steps
 * back neither refills nor loses time, burst below 1 raised to 1, rate <= 0
 * letting everything through, the dropped count reported once, and a token given back. Rates
 * are chosen so every refill is exact in binary floating point. */
#include "check.h"
#include "token_bucket.h"

static void test_basic(void)
{
    struct token_bucket b;
    token_bucket_init(&b, 2, 4, 1000); /* 2 a second: one per 500 ms */
    for (int i = 0; i < 4; i++)
        CHECK_INT(token_bucket_take(&b, 1000), 1);
    CHECK_INT(token_bucket_take(&b, 1000), 0);
    CHECK_INT(token_bucket_take(&b, 1250), 0); /* half a token */
    CHECK_INT(token_bucket_take(&b, 1499), 0);
    CHECK_INT(token_bucket_take(&b, 1500), 1); /* the second half */
    CHECK_INT(token_bucket_take(&b, 1500), 0);
    CHECK_INT(token_bucket_take_dropped(&b), 4);
    CHECK_INT(token_bucket_take_dropped(&b), 0); /* reset by reading */

    /* A long quiet spell refills up to the burst, no more. */
    for (int i = 0; i < 4; i++)
        CHECK_INT(token_bucket_take(&b, 1000000), 1);
    CHECK_INT(token_bucket_take(&b, 1000000), 0);
    CHECK_INT(token_bucket_take_dropped(&b), 1);

    /* The clock stepping back neither refills nor drains the bucket, nor
     * moves the refill point: 500 ms after the last real refill gives
     * exactly one more token. */
    CHECK_INT(token_bucket_take(&b, 2000000), 1); /* full again: 3 left */
    CHECK_INT(token_bucket_take(&b, 0), 1);
    CHECK_INT(token_bucket_take(&b, 1999999), 1);
    CHECK_INT(token_bucket_take(&b, 2000000), 1);
    CHECK_INT(token_bucket_take(&b, 1500000), 0);
    CHECK_INT(token_bucket_take(&b, 2000000), 0);
    CHECK_INT(token_bucket_take(&b, 2000500), 1);
    CHECK_INT(token_bucket_take(&b, 2000500), 0);
    CHECK_INT(token_bucket_take_dropped(&b), 3);
}

static void test_init(void)
{
    struct token_bucket b;
    token_bucket_init(&b, 1, 0.5, 0); /* a burst below 1 is raised to 1 */
    CHECK(b.burst == 1.0 && b.tokens == 1.0);
    CHECK_INT(token_bucket_take(&b, 0), 1);
    CHECK_INT(token_bucket_take(&b, 0), 0);
    CHECK_INT(token_bucket_take(&b, 999), 0);
    CHECK_INT(token_bucket_take(&b, 1000), 1);
    token_bucket_init(&b, 1, -3, 0);
    CHECK(b.burst == 1.0);
    token_bucket_init(&b, 1, 0, 0);
    CHECK(b.burst == 1.0);
    /* init resets everything, the dropped count too. */
    CHECK_INT(token_bucket_take(&b, 0), 1);
    CHECK_INT(token_bucket_take(&b, 0), 0);
    token_bucket_init(&b, 1, 2, 50);
    CHECK_INT(b.dropped, 0);
    CHECK(b.tokens == 2.0 && b.last_ms == 50);
}

static void test_unlimited(void)
{
    static const double rates[] = {0, -1, -0.001};
    for (int r = 0; r < 3; r++) {
        struct token_bucket b;
        token_bucket_init(&b, rates[r], 1, 0);
        int all = 1;
        for (int i = 0; i < 10000; i++)
            all &= token_bucket_take(&b, 0);
        CHECK(all);
        CHECK_INT(token_bucket_take_dropped(&b), 0);
    }
}

/* Steady overload: 1000 a second (one per ms), burst 10, three attempts
 * every ms for 10 s. Exactly the burst plus one per elapsed ms get
 * through. */
static void test_steady(void)
{
    struct token_bucket b;
    token_bucket_init(&b, 1000, 10, 0);
    long passed = 0, tries = 0;
    for (int64_t t = 0; t < 10000; t++)
        for (int k = 0; k < 3; k++, tries++)
            passed += token_bucket_take(&b, t);
    CHECK_INT(passed, 10 + 9999);
    CHECK_INT(token_bucket_take_dropped(&b), tries - passed);

    /* Fractional rates add up: 0.5 a second is one per 2000 ms. */
    token_bucket_init(&b, 0.5, 1, 0);
    passed = 0;
    for (int64_t t = 0; t <= 20000; t += 250)
        passed += token_bucket_take(&b, t);
    CHECK_INT(passed, 1 + 10);
}

/* A token given back is there for the next take, as if never taken; never
 * above the burst; nothing for an unlimited bucket. */
static void test_give(void)
{
    struct token_bucket b;
    token_bucket_init(&b, 2, 2, 0);
    CHECK_INT(token_bucket_take(&b, 0), 1);
    CHECK_INT(token_bucket_take(&b, 0), 1);
    CHECK_INT(token_bucket_take(&b, 0), 0);
    token_bucket_give(&b, 0);
    CHECK_INT(token_bucket_take(&b, 0), 1);
    CHECK_INT(token_bucket_take(&b, 0), 0);
    /* Given back after a refill: the refill counts first, then the burst
     * caps the sum. 250 ms is half a token. */
    token_bucket_give(&b, 250);
    CHECK(b.tokens == 1.5 && b.last_ms == 250);
    token_bucket_give(&b, 10000);
    CHECK(b.tokens == 2.0);
    token_bucket_give(&b, 10000);
    CHECK(b.tokens == 2.0);
    CHECK_INT(token_bucket_take_dropped(&b), 2); /* giving drops nothing */
    token_bucket_init(&b, 0, 1, 0);
    token_bucket_give(&b, 5);
    CHECK(b.tokens == 1.0 && b.last_ms == 0);
}

int main(void)
{
    test_give();
    test_basic();
    test_init();
    test_unlimited();
    test_steady();
    return check_summary();
}
