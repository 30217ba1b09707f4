/* fcond — a condition variable that threads and fibers can both wait on.
 *
 * A thread waits on the pthread condition inside; a fiber adds itself to
 * a list and parks (fiber.h), so the pool thread running it is free until
 * a signal wakes it. Signals wake the waiting threads as pthread does and
 * every waiting fiber, which, as with any condition variable, may find its
 * condition still false and wait again. The usual rule holds: change the
 * condition under the mutex the waiters pass, then signal.
 *
 * A cancelled fiber (fiber_cancel: its connection is going away) waits no
 * longer with a deadline: such a wait returns ETIMEDOUT at once. A wait
 * without one (fmutex_lock) still parks until it is signalled, so that it
 * never holds the thread that may run the mutex's holder. */
#ifndef MCPD_FCOND_H
#define MCPD_FCOND_H

#include <pthread.h>
#include <stdint.h>

struct fcond_waiter;

struct fcond {
    pthread_cond_t cv;  /* threads: monotonic clock */
    pthread_mutex_t lk; /* guards waiters */
    struct fcond_waiter *waiters;
};

int fcond_init(struct fcond *c);
void fcond_destroy(struct fcond *c);
void fcond_signal(struct fcond *c);
void fcond_broadcast(struct fcond *c);
/* Called with mu held, returns with it held. deadline is a monotonic ms,
 * or -1 for none. Returns 0 when woken (or spuriously), ETIMEDOUT once the
 * deadline has passed. */
int fcond_wait_until(struct fcond *c, pthread_mutex_t *mu, int64_t deadline_mono_ms);

/* A mutex that a fiber may hold across a park (a write that waits for its
 * socket to drain): a fiber that wants it parks instead of blocking its
 * thread, which may be the very thread that must run the holder. Not
 * recursive; it may be unlocked from another thread than the one that
 * locked it. */
struct fmutex {
    pthread_mutex_t mu; /* guards held */
    struct fcond cv;
    int held;
};

/* For a mutex with static storage, in place of fmutex_init: its condition
 * keeps the default clock, which fmutex_lock's wait (no deadline) never
 * reads. */
#define FMUTEX_INITIALIZER                                                                         \
    {                                                                                              \
        .mu = PTHREAD_MUTEX_INITIALIZER, .cv = {                                                   \
            .cv = PTHREAD_COND_INITIALIZER,                                                        \
            .lk = PTHREAD_MUTEX_INITIALIZER                                                        \
        }                                                                                          \
    }

int fmutex_init(struct fmutex *m);
void fmutex_destroy(struct fmutex *m);
void fmutex_lock(struct fmutex *m);
void fmutex_unlock(struct fmutex *m);

#endif
