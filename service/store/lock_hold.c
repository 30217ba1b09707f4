/* lock_hold — see lock_hold.h. */
#include "lock_hold.h"

#include "clock.h"

const int64_t store_hold_bounds_us[STORE_HOLD_BUCKETS] = {500,   1000,  2500,   5000,   10000,
                                                          20000, 50000, 100000, 1000000};

int lock_hold_record(struct lock_hold *h, int64_t us)
{
    if (us < 0)
        us = 0;
    int i = 0;
    while (i < STORE_HOLD_BUCKETS && us > store_hold_bounds_us[i])
        i++;
    atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, (uint64_t)us, memory_order_relaxed);
    if (us < (int64_t)LOCK_HOLD_SLOW_MS * 1000)
        return 0;
    int64_t now = clock_mono_ms(), last = atomic_load(&h->warned_ms);
    return (last == 0 || now - last >= 1000) &&
           atomic_compare_exchange_strong(&h->warned_ms, &last, now);
}

void lock_hold_read(struct lock_hold *h, struct store_stats *out)
{
    for (int i = 0; i <= STORE_HOLD_BUCKETS; i++)
        out->hold[i] = atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
    out->hold_sum_us = atomic_load_explicit(&h->sum_us, memory_order_relaxed);
}
