/* clock — wall-clock milliseconds (for stored timestamps and expiry) and
 * monotonic deadlines (for waits), plus the one helper that turns a deadline
 * into a pthread_cond_timedwait timespec on a CLOCK_MONOTONIC condvar (which
 * reports, through fiber_warn_if_blocking, a wait that would hold one of
 * libmicrohttpd's pool threads; fibers wait through fcond.h instead). */
#ifndef MCPD_CLOCK_H
#define MCPD_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

int64_t clock_wall_ms(void);
int64_t clock_mono_ms(void);
/* Microseconds, for timing what takes less than a millisecond. */
int64_t clock_mono_us(void);
/* Initialises `cv` to measure timeouts on the monotonic clock. */
int clock_cond_init(pthread_cond_t *cv);
/* Waits on cv until signalled or the monotonic deadline passes. Returns 0
 * when signalled (or spuriously), ETIMEDOUT after the deadline. */
int clock_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_mono_ms);

#endif
