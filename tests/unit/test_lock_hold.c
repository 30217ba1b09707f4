/* test_lock_hold — the commit lock's hold histogram (service/store/
 * lock_hold.c): each hold lands in the bucket whose bound is the first at
 * or above it, the sum adds up, and a slow hold asks to be logged at most
 * once a second. */
#include "check.h"
#include "lock_hold.h"

#include <unistd.h>

static uint64_t bucket(struct lock_hold *h, int i)
{
    struct store_stats s;
    lock_hold_read(h, &s);
    return s.hold[i];
}

int main(void)
{
    const int64_t *bounds = store_hold_bounds_us;
    struct lock_hold h = {0};
    /* Only the first slow one (bounds[6], 50 ms) asks to be logged. */
    for (int i = 0; i < STORE_HOLD_BUCKETS; i++) {
        CHECK_INT(lock_hold_record(&h, bounds[i]), i == 6);
        CHECK_INT(lock_hold_record(&h, bounds[i] + 1), 0);
    }
    /* bounds[i] in bucket i, bounds[i] + 1 in bucket i + 1. */
    CHECK_INT(bucket(&h, 0), 1);
    for (int i = 1; i < STORE_HOLD_BUCKETS; i++)
        CHECK_INT(bucket(&h, i), 2);
    CHECK_INT(bucket(&h, STORE_HOLD_BUCKETS), 1);
    lock_hold_record(&h, -5); /* a clock step back counts as no time */
    CHECK_INT(bucket(&h, 0), 2);
    struct store_stats s;
    lock_hold_read(&h, &s);
    uint64_t sum = 0;
    for (int i = 0; i < STORE_HOLD_BUCKETS; i++)
        sum += (uint64_t)(2 * bounds[i] + 1);
    CHECK_INT(s.hold_sum_us, sum);

    /* The first slow hold above was at bounds[6] (50 ms); within the same
     * second no other asks to be logged, a second later one does. */
    CHECK_INT(lock_hold_record(&h, 200000), 0);
    CHECK_INT(lock_hold_record(&h, LOCK_HOLD_SLOW_MS * 1000 - 1), 0);
    usleep(1100 * 1000);
    CHECK_INT(lock_hold_record(&h, LOCK_HOLD_SLOW_MS * 1000 - 1), 0);
    CHECK_INT(lock_hold_record(&h, LOCK_HOLD_SLOW_MS * 1000), 1);
    CHECK_INT(lock_hold_record(&h, LOCK_HOLD_SLOW_MS * 1000), 0);
    return check_summary();
}
