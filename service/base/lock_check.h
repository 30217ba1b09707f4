/* lock_check — in checked builds, stops a fiber that parks while it holds
 * a pthread mutex.
 *
 * A fiber that parks lets other fibers run on its thread. If it still
 * holds a pthread mutex, the next fiber there that wants the mutex blocks
 * the whole thread, and the holder, which only that thread can resume,
 * never lets go: every pool thread can end up stuck so (session.c's
 * revival lock and listen.c's registry lock did). A wait that may park
 * must hold fmutexes (fcond.h) only.
 *
 * In builds with MCPD_LOCK_CHECK (the AddressSanitizer build), the link
 * wraps pthread_mutex_lock, trylock, timedlock and unlock (ld --wrap) to
 * count the mutexes each thread holds; fiber.c gives each fiber a count of
 * its own (lock_check_swap at every switch), and lock_check_park, called
 * as a fiber parks, prints where and aborts when the count is not 0. Only
 * code linked into the binary is counted, not the shared libraries'
 * (glibc's condition waits unlock and relock inside, uncounted, which is
 * right: the caller holds the mutex before and after). Elsewhere these are
 * empty. */
#ifndef MCPD_LOCK_CHECK_H
#define MCPD_LOCK_CHECK_H

#ifdef MCPD_LOCK_CHECK
/* Exchanges the running code's count with *saved. */
void lock_check_swap(int *saved);
/* Aborts, saying where, when the running fiber holds a pthread mutex. */
void lock_check_park(const char *where);
#else
static inline void lock_check_swap(int *saved)
{
    (void)saved;
}
static inline void lock_check_park(const char *where)
{
    (void)where;
}
#endif

#endif
