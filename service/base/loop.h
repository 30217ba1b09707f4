/* loop — a fixed pool of event-loop threads that host fibers: the home of
 * every connection mcpd serves outside libmicrohttpd (a WebSocket after its
 * upgrade, a push connection's writer), so that the number of threads does
 * not grow with the number of connections.
 *
 * Each loop thread has an epoll descriptor, an eventfd that wakes it and a
 * queue of fibers ready to run. loop_spawn puts a new fiber (fiber.h) on
 * one of them, round-robin; the loop thread is its host: a park sets the
 * fiber aside (nothing to do), a wake from any thread puts it back on its
 * thread's ready queue (in wake order) and writes the eventfd. A fiber
 * stays on the loop thread that first ran it, as fiber.h requires.
 *
 * loop_wait_fd is how a fiber waits for a descriptor: it registers the
 * descriptor with its thread's epoll (one-shot) and parks until the
 * descriptor is ready, the deadline passes, the fiber is woken by someone
 * else (fiber_wake: the caller looks at its own flags and waits again) or
 * cancelled. Two fibers of one loop thread may wait on the same descriptor
 * at once, one for reading and one for writing (a WebSocket's reader and its
 * writer).
 *
 * Every other wait on a loop fiber goes through fcond (and the store's
 * commit wait), which park it too. A plain blocking call on a loop fiber
 * holds the loop thread and every fiber on it. */
#ifndef MCPD_LOOP_H
#define MCPD_LOOP_H

#include <stdint.h>

/* Starts nthreads loop threads (at least 1). Returns 0, or -1 with errno
 * (already started: EALREADY). */
int loop_start(int nthreads);

/* Cancels the fibers still running (fiber_cancel: their waits return at
 * once), waits for them to end, and joins the threads. Callers stop their
 * connections first; this is the backstop. Safe when never started. */
void loop_stop(void);

/* Runs fn(arg) on a new fiber on one of the loop threads. Returns 0, or -1
 * (the loop is not started or is stopping, or no memory); fn then never
 * runs and arg stays the caller's. */
int loop_spawn(void (*fn)(void *arg), void *arg);

/* loop_spawn for a fiber that loop_stop does not cancel: it is left to end
 * by itself, and loop_stop waits for it. For work that must be done whole
 * even at shutdown and whose waits all end on their own (stopping an
 * upstream child, whose waits have deadlines: a cancelled fiber's timed
 * waits end at once, so it could only wait for the child's readers by
 * blocking the thread they may run on). */
int loop_spawn_shielded(void (*fn)(void *arg), void *arg);

/* Whether the caller runs on a loop fiber (where loop_wait_fd works). */
int loop_on_fiber(void);

/* On a loop fiber: waits until fd is ready for `events` (EPOLLIN and/or
 * EPOLLOUT; errors and hang-ups count as ready), the monotonic deadline
 * (-1: none) passes, or the fiber is woken or cancelled. Returns 0 when fd
 * is ready; EINTR when woken by someone else; ETIMEDOUT; ECANCELED; EBUSY
 * when another fiber of this thread already waits on fd for the same
 * event; or an epoll_ctl errno (EPERM: fd cannot be polled, a regular
 * file). ENOTSUP off a loop fiber. */
int loop_wait_fd(int fd, uint32_t events, int64_t deadline_mono_ms);

/* Threads started (0 before loop_start): for tests and the log. */
int loop_threads(void);

#endif
