/* workers — where request handlers that may wait run: fibers on the event
 * loop (loop.h), at most a configured number at once.
 *
 * A handler may wait for a long time (a countdown, the client's answer to
 * an elicitation, an upstream child's reply). Every such wait parks its
 * fiber (fcond, the store's commit wait, loop_wait_fd), so a waiting
 * handler holds a fiber's stack and no thread: a thousand countdowns cost a
 * thousand stacks on the loop's few threads. Past the cap, jobs queue (up
 * to four per place); a fiber that ends a job takes the next one. */
#ifndef MCPD_WORKERS_H
#define MCPD_WORKERS_H

#include <stdint.h>

/* At most max_running handlers at once (at least 1). The loop must be
 * running (loop_start) for jobs to run. */
int workers_start(int max_running);
/* Runs fn(arg) on a loop fiber, now or once a place is free. Returns 0,
 * or -1 when stopping, the loop is not running, or the queue is full (the
 * caller answers "server busy"); fn then never runs. */
int workers_submit(void (*fn)(void *arg), void *arg);
/* Refuses new jobs and waits up to wait_ms (on a plain thread) for the
 * running and queued ones to finish. Returns how many had not. */
int workers_stop(int64_t wait_ms);

#endif
