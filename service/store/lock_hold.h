/* lock_hold — how long the store's commit lock is held at a time.
 *
 * Every waited write (each reply a client is about to see) queues behind
 * the commit lock, so one long hold is a latency spike for every client at
 * once: a commit whose statements or log writes ran long, a checkpoint that
 * had to copy the log inside a commit, the second phase of one (wal.h), a
 * purge batch. Each holder times its hold and records it here, into a
 * histogram that /metrics shows (mcpd_store_commit_lock_seconds). A hold of
 * LOCK_HOLD_SLOW_MS or more also tells its holder to log why: rare stalls
 * then carry their cause in the log instead of only in a percentile.
 *
 * Lock-free: recorded by each holder as it lets go (a checkpoint's second
 * phase just after, beside the next holder), read by anyone at any time (a
 * reader may see one bucket and the sum a hold apart). Private to the
 * store; store_stats hands the counts out. */
#ifndef MCPD_STORE_LOCK_HOLD_H
#define MCPD_STORE_LOCK_HOLD_H

#include "store.h"

#include <stdatomic.h>
#include <stdint.h>

#define LOCK_HOLD_SLOW_MS 50

struct lock_hold {
    _Atomic uint64_t bucket[STORE_HOLD_BUCKETS + 1];
    _Atomic uint64_t sum_us;
    _Atomic int64_t warned_ms; /* when a slow hold was last logged */
};

/* Counts one hold of `us` microseconds. Returns 1 when the caller should
 * log it: slow, and no slow hold logged in the last second (a disk that
 * stalls every commit must not flood the log). */
int lock_hold_record(struct lock_hold *h, int64_t us);
/* Copies the per-bucket counts (not cumulative) and the sum into out. */
void lock_hold_read(struct lock_hold *h, struct store_stats *out);

#endif
