/* fiber — straight-line code that waits, run on a stack of its own so that
 * the thread running it is not held while it waits.
 *
 * libmicrohttpd serves mcpd's HTTP connections from a small pool of epoll
 * threads, and a pool thread must never block: every connection it serves
 * would stall. Yet a request's handler is written as code that waits (for
 * its commit, for a stream's next message, for a reply). The HTTP gate runs
 * each handler on a fiber; a wait inside it (fiber_park, through fcond and
 * the store) switches back to the pool thread, which suspends the
 * connection in libmicrohttpd and goes on with others. Whoever makes the
 * wait's condition true calls fiber_wake, the host's resume callback asks
 * libmicrohttpd to resume the connection, and the pool thread switches back
 * into the fiber where it stopped.
 *
 * A fiber runs only on the thread that created it (a connection stays on
 * its pool thread), and never on two threads at once. Thread-locals are
 * the pool thread's, shared by every fiber it runs: state that must live
 * across a wait belongs to the request, not to the thread.
 *
 * Waking is race-free however it interleaves with parking: a wake that
 * comes before the park (or while the host is still suspending) makes the
 * park return at once, and a wake of a running fiber makes its next park
 * return at once. So, as with a condition variable, a park may return
 * without its condition being true; callers loop. */
#ifndef MCPD_FIBER_H
#define MCPD_FIBER_H

#include <stdint.h>

struct fiber;

/* What the host does to set its fiber aside and to get it run again.
 * suspend is called on the host's thread, right after the fiber parks;
 * resume from any thread, once, when a parked fiber is woken. Both are
 * called with the fiber's lock held: neither may call into this module. */
struct fiber_host {
    void (*suspend)(void *cookie);
    void (*resume)(void *cookie);
    void *cookie;
};

/* A fiber that will run fn(arg), not started. NULL when out of memory (or
 * when the thread that serves parks' deadlines cannot be started).
 * The caller owns it: fiber_free once fiber_run has returned FIBER_DONE
 * (or before it ever ran). */
struct fiber *fiber_new(void (*fn)(void *arg), const struct fiber_host *host, void *arg);
void fiber_free(struct fiber *f);

enum fiber_state { FIBER_DONE, FIBER_PARKED };
/* Runs f on the calling thread until fn returns (FIBER_DONE) or it parks
 * and the host has suspended it (FIBER_PARKED: call fiber_run again after
 * the host's resume). */
enum fiber_state fiber_run(struct fiber *f);

/* The fiber running on this thread, or NULL on a plain thread. */
struct fiber *fiber_current(void);

/* On a fiber: sets it aside until fiber_wake, the deadline (a monotonic
 * ms; -1 for none) or fiber_cancel. Returns 0 then; ECANCELED at once
 * once cancelled; and with until_set, 1 at once when *until_set is
 * non-zero (read under the lock fiber_wake_set writes it under). */
int fiber_park(const int *until_set, int64_t deadline_mono_ms);
/* On a fiber: sets it aside until fiber_wake (or a fiber_cancel, which
 * also wakes it), even once cancelled. For a wait that a cancel must not
 * cut short, yet must not block the thread either: a mutex whose holder
 * may be a fiber of this very thread, which lets go once its own
 * (cancelled) waits return. The caller looks at its condition after. */
void fiber_park_outlast(void);
/* Wakes f if parked (or makes its next park return). Any thread. */
void fiber_wake(struct fiber *f);
/* Sets *flag to 1 and wakes f, under f's lock: a parked fiber waiting for
 * flag may free the memory holding it as soon as it sees it set, and this
 * touches neither flag nor f afterwards. */
void fiber_wake_set(struct fiber *f, int *flag);
/* Every later park of f returns ECANCELED at once: for a host that must
 * finish its fiber now (the connection is going away). Any thread. */
void fiber_cancel(struct fiber *f);

/* Sleeps ms milliseconds: the fiber parks (its thread goes on with
 * others), a plain thread sleeps. A cancelled fiber returns at once. */
void fiber_sleep_ms(int64_t ms);
/* Whether fiber_cancel was called on f. */
int fiber_cancelled(struct fiber *f);

/* Marks the calling thread as one that must not block (a pool thread): a
 * plain wait there is a defect, which fiber_warn_if_blocking reports. */
void fiber_thread_nonblocking(void);
/* Called by blocking waits: logs once per call site kind when a thread
 * marked non-blocking is about to block outside a fiber. */
void fiber_warn_if_blocking(const char *what);

#endif
