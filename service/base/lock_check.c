/* lock_check — see lock_check.h. Built only with MCPD_LOCK_CHECK. */
#include "lock_check.h"

#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* The mutexes the running thread, or fiber, holds. */
static _Thread_local int held;

int __real_pthread_mutex_lock(pthread_mutex_t *m);
int __real_pthread_mutex_trylock(pthread_mutex_t *m);
int __real_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *at);
int __real_pthread_mutex_unlock(pthread_mutex_t *m);
int __wrap_pthread_mutex_lock(pthread_mutex_t *m);
int __wrap_pthread_mutex_trylock(pthread_mutex_t *m);
int __wrap_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *at);
int __wrap_pthread_mutex_unlock(pthread_mutex_t *m);

int __wrap_pthread_mutex_lock(pthread_mutex_t *m)
{
    int rc = __real_pthread_mutex_lock(m);
    held += rc == 0;
    return rc;
}

int __wrap_pthread_mutex_trylock(pthread_mutex_t *m)
{
    int rc = __real_pthread_mutex_trylock(m);
    held += rc == 0;
    return rc;
}

int __wrap_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *at)
{
    int rc = __real_pthread_mutex_timedlock(m, at);
    held += rc == 0;
    return rc;
}

int __wrap_pthread_mutex_unlock(pthread_mutex_t *m)
{
    int rc = __real_pthread_mutex_unlock(m);
    held -= rc == 0;
    return rc;
}

void lock_check_swap(int *saved)
{
    int mine = held;
    held = *saved;
    *saved = mine;
}

void lock_check_park(const char *where)
{
    if (held <= 0)
        return;
    fprintf(stderr,
            "lock_check: a fiber %s holding %d pthread mutex(es): a fiber on this thread "
            "that wants one would block the thread its holder needs (lock_check.h)\n",
            where, held);
    void *frames[32];
    backtrace_symbols_fd(frames, backtrace(frames, 32), STDERR_FILENO);
    abort();
}
