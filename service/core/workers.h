/* workers — an elastic pool of threads that run request handlers.
 *
 * Handlers may block for a long time (a countdown, a wait for the client's
 * answer to elicitation), so a fixed pool would starve. The pool starts a
 * thread when a job arrives and none is idle, up to a cap, and lets a thread
 * that has been idle for a while exit. Reusing idle threads keeps the cost of
 * quick handlers to a queue hand-off. */
#ifndef MCPD_WORKERS_H
#define MCPD_WORKERS_H

#include <stddef.h>
#include <stdint.h>

int workers_start(int max_threads, size_t stack_size);
/* Queues fn(arg). Returns 0, or -1 when stopping or at the cap with every
 * thread busy (the caller answers "server busy"). */
int workers_submit(void (*fn)(void *arg), void *arg);
/* Refuses new jobs and waits up to wait_ms for running ones to finish.
 * Returns the number still running. */
int workers_stop(int64_t wait_ms);

#endif
