/* ticker — the one way mcpd runs a background thread: a named pthread that
 * calls a job's tick over and over, sleeps between ticks until the deadline
 * the tick returned or a kick, and stops with a join.
 *
 * The reaper, the kill watcher, the connection watchdog, the replica
 * thread, the long-poll lot, the legacy relay and the lingering-close
 * thread are tickers. Each keeps its own state (and lock); the ticker owns
 * only the thread, the stop flag and the sleep:
 *
 *   loop: sleep until the deadline, a kick or stop; stop? leave;
 *         deadline = tick(arg)
 *
 * A tick runs with no lock of the ticker's held, so it may take its
 * module's locks as it likes. A kick that comes while a tick runs is not
 * lost: the next sleep returns at once. ticker_stop asks the thread to
 * leave, wakes it and joins it: a running tick is finished, no tick starts
 * after. What the thread leaves behind (work still queued, sockets still
 * open) is the module's to clean up after ticker_stop returns, which is
 * ordered after everything the thread did.
 *
 * A thread woken by something else than ticker_kick sets sleep and wake:
 * the long-poll lot and the relay sleep on the follow_group of the streams
 * they follow (follow_wait), and the lingering-close thread waits in poll()
 * inside its tick. The ticker calls sleep(arg, deadline) in place of its
 * own sleep, only for a deadline ahead, and wake(arg) from ticker_kick and
 * ticker_stop. sleep must return once anything it sleeps on changed since
 * it last returned (follow_wait does), or it may sleep through a wake that
 * came while the tick ran; the ticker checks the stop flag between the
 * tick and the sleep, so a stop is never missed.
 *
 * These are plain pthreads, not fibers: a tick may block (on the store, on
 * a lock) and never parks. A struct ticker is static storage, or outlives
 * every call on it; its mutex and condition are never destroyed, so a kick
 * may come before start or after stop (it then wakes nothing). */
#ifndef MCPD_TICKER_H
#define MCPD_TICKER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct ticker_job {
    const char *name; /* the thread's name (pthread_setname_np: 15 chars at most) */
    int64_t first_ms; /* how long after start the first tick runs (0: at once) */
    size_t stack;     /* the thread's stack (thread_stack.h); 0: the default attributes */
    /* One round of the job. Returns the monotonic ms deadline of the next
     * round (a kick brings it forward; a deadline passed: at once). */
    int64_t (*tick)(void *arg);
    void *arg;
    void (*sleep)(void *arg, int64_t deadline_mono_ms); /* optional: see above */
    void (*wake)(void *arg);                            /* optional: see above */
};

struct ticker {
    pthread_mutex_t mu; /* guards what follows */
    pthread_cond_t cv;  /* monotonic clock, once cv_ready */
    int cv_ready;
    unsigned kicks;
    int running, stopping;
    struct ticker_job job;
    pthread_t thread;
};

#define TICKER_INITIALIZER                                                                         \
    {                                                                                              \
        .mu = PTHREAD_MUTEX_INITIALIZER                                                            \
    }

/* Starts the thread (t is not running). Returns 0, or -1 when the thread
 * cannot be started (t is then as before: stop does nothing, start may be
 * tried again). job is copied. */
int ticker_start(struct ticker *t, const struct ticker_job *job);
/* Runs the next tick now (or as soon as the running one ends). */
void ticker_kick(struct ticker *t);
/* Stops and joins the thread. Returns 1, or 0 when it was not running
 * (nothing done: a second stop, or a start that failed). */
int ticker_stop(struct ticker *t);

#endif
