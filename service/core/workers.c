/* workers — see workers.h. */
#include "workers.h"
#include "clock.h"
#include "loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#define QUEUE_PER_PLACE 4

struct job {
    void (*fn)(void *);
    void *arg;
    struct job *next;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t idle; /* a job finished (workers_stop waits on it) */
    struct job *head, *tail;
    int queued, running, max;
    int stopping;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Runs its job, then the queued ones, until none is left. */
static void worker_main(void *arg)
{
    struct job *j = arg;
    while (j) {
        j->fn(j->arg);
        free(j);
        pthread_mutex_lock(&pool.mu);
        j = pool.head;
        if (j) {
            pool.head = j->next;
            if (!pool.head)
                pool.tail = NULL;
            pool.queued--;
        } else {
            pool.running--;
        }
        pthread_cond_broadcast(&pool.idle);
        pthread_mutex_unlock(&pool.mu);
    }
}

int workers_start(int max_running)
{
    pthread_mutex_lock(&pool.mu);
    int rc = clock_cond_init(&pool.idle);
    pool.max = max_running > 0 ? max_running : 1;
    pool.stopping = 0;
    pthread_mutex_unlock(&pool.mu);
    return rc;
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
    if (!pool.stopping && pool.running < pool.max) {
        pool.running++;
        pthread_mutex_unlock(&pool.mu);
        if (loop_spawn(worker_main, j) == 0)
            return 0;
        pthread_mutex_lock(&pool.mu);
        pool.running--;
        pthread_cond_broadcast(&pool.idle);
        pthread_mutex_unlock(&pool.mu);
        free(j);
        return -1;
    }
    if (pool.stopping || pool.queued >= pool.max * QUEUE_PER_PLACE) {
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
    pthread_mutex_unlock(&pool.mu);
    return 0;
}

int workers_stop(int64_t wait_ms)
{
    int64_t deadline = clock_mono_ms() + wait_ms;
    pthread_mutex_lock(&pool.mu);
    pool.stopping = 1;
    while ((pool.running > 0 || pool.head) &&
           clock_cond_wait_until(&pool.idle, &pool.mu, deadline) != ETIMEDOUT)
        ;
    int left = pool.running + pool.queued;
    pthread_mutex_unlock(&pool.mu);
    return left;
}
