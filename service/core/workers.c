/* workers — see workers.h. */
#include "workers.h"
#include "clock.h"
#include "thread_stack.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#define IDLE_EXIT_MS 30000
#define QUEUE_PER_THREAD 4

struct job {
    void (*fn)(void *);
    void *arg;
    struct job *next;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work; /* a job was queued, or stopping */
    pthread_cond_t idle; /* a thread finished a job or exited */
    struct job *head, *tail;
    int queued, threads, idle_threads, busy, max;
    size_t stack;
    int stopping;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *worker_main(void *unused)
{
    pthread_setname_np(pthread_self(), "mcpd-worker");
    (void)unused;
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        pool.idle_threads++;
        int timed_out = 0;
        while (!pool.head && !pool.stopping && !timed_out)
            timed_out = clock_cond_wait_until(&pool.work, &pool.mu,
                                              clock_mono_ms() + IDLE_EXIT_MS) == ETIMEDOUT;
        pool.idle_threads--;
        struct job *j = pool.head;
        if (!j)
            break; /* idle too long, or stopping with nothing left */
        pool.head = j->next;
        if (!pool.head)
            pool.tail = NULL;
        pool.queued--;
        pool.busy++;
        pthread_mutex_unlock(&pool.mu);
        j->fn(j->arg);
        free(j);
        pthread_mutex_lock(&pool.mu);
        pool.busy--;
        pthread_cond_broadcast(&pool.idle);
    }
    pool.threads--;
    pthread_cond_broadcast(&pool.idle);
    pthread_mutex_unlock(&pool.mu);
    return NULL;
}

int workers_start(int max_threads, size_t stack_size)
{
    pthread_mutex_lock(&pool.mu);
    clock_cond_init(&pool.work);
    clock_cond_init(&pool.idle);
    pool.max = max_threads > 0 ? max_threads : 1;
    pool.stack = stack_size;
    pool.stopping = 0;
    pthread_mutex_unlock(&pool.mu);
    return 0;
}

static int spawn_locked(void)
{
    pthread_attr_t attr;
    pthread_t t;
    int rc = thread_stack_attr(&attr, pool.stack, 1);
    if (rc == 0) {
        rc = pthread_create(&t, &attr, worker_main, NULL);
        pthread_attr_destroy(&attr);
    }
    if (rc == 0)
        pool.threads++;
    return rc == 0 ? 0 : -1;
}

int workers_submit(void (*fn)(void *arg), void *arg)
{
    struct job *j = malloc(sizeof *j);
    if (!j)
        return -1;
    j->fn = fn;
    j->arg = arg;
    j->next = NULL;
    pthread_mutex_lock(&pool.mu);
    if (pool.stopping) {
        pthread_mutex_unlock(&pool.mu);
        free(j);
        return -1;
    }
    if (pool.idle_threads <= pool.queued && pool.threads < pool.max)
        spawn_locked();
    if (pool.threads == 0 || pool.queued >= pool.max * QUEUE_PER_THREAD) {
        pthread_mutex_unlock(&pool.mu);
        free(j);
        return -1;
    }
    if (pool.tail)
        pool.tail->next = j;
    else
        pool.head = j;
    pool.tail = j;
    pool.queued++;
    pthread_cond_signal(&pool.work);
    pthread_mutex_unlock(&pool.mu);
    return 0;
}

int workers_stop(int64_t wait_ms)
{
    int64_t deadline = clock_mono_ms() + wait_ms;
    pthread_mutex_lock(&pool.mu);
    pool.stopping = 1;
    pthread_cond_broadcast(&pool.work);
    while ((pool.threads > 0 || pool.head) &&
           clock_cond_wait_until(&pool.idle, &pool.mu, deadline) != ETIMEDOUT)
        ;
    int left = pool.busy + pool.queued;
    pthread_mutex_unlock(&pool.mu);
    return left;
}
