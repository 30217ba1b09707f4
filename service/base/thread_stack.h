/* thread_stack — the stack attributes of every thread mcpd sizes itself.
 *
 * Threads that mcpd starts with a small stack (the event loop's, the
 * tickers that ask for one) get the same guard below their stack as a
 * fiber: STACK_GUARD_SIZE of address
 * space that faults on any access. glibc's default guard is one page, and a
 * frame of a library built without stack-clash probes can step over one
 * page into the mapping below (mmap places stacks side by side). glibc adds
 * the guard to the stack size rather than carving it out, and it stays one
 * mapping, so it costs address space only. */
#ifndef MCPD_THREAD_STACK_H
#define MCPD_THREAD_STACK_H

#include <pthread.h>
#include <stddef.h>

#define STACK_GUARD_SIZE (64 * 1024)

/* Initializes *attr (the caller destroys it) for a thread of `stack` bytes
 * (0: the default size) with a STACK_GUARD_SIZE guard, detached or not.
 * Returns 0, or an errno value (attr is then destroyed). */
int thread_stack_attr(pthread_attr_t *attr, size_t stack, int detached);

#endif
