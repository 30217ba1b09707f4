/* ticker — see ticker.h. */
#include "ticker.h"
#include "clock.h"
#include "thread_stack.h"

#include <errno.h>

/* With t->mu held: until the deadline, a kick since `seen`, or stop. */
static void sleep_own(struct ticker *t, unsigned seen, int64_t deadline)
{
    while (!t->stopping && t->kicks == seen)
        if (clock_cond_wait_until(&t->cv, &t->mu, deadline) == ETIMEDOUT)
            break;
}

static void *ticker_main(void *arg)
{
    struct ticker *t = arg;
    pthread_setname_np(pthread_self(), t->job.name);
    int64_t deadline = clock_mono_ms() + t->job.first_ms;
    pthread_mutex_lock(&t->mu);
    unsigned seen = t->kicks;
    while (!t->stopping) {
        if (!t->job.sleep) {
            sleep_own(t, seen, deadline);
        } else if (deadline > clock_mono_ms()) {
            pthread_mutex_unlock(&t->mu);
            t->job.sleep(t->job.arg, deadline);
            pthread_mutex_lock(&t->mu);
        }
        if (t->stopping)
            break;
        seen = t->kicks;
        pthread_mutex_unlock(&t->mu);
        deadline = t->job.tick(t->job.arg);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int ticker_start(struct ticker *t, const struct ticker_job *job)
{
    pthread_attr_t attr;
    if (job->stack && thread_stack_attr(&attr, job->stack, 0) != 0)
        return -1;
    pthread_mutex_lock(&t->mu);
    if (!t->cv_ready)
        t->cv_ready = clock_cond_init(&t->cv) == 0;
    t->job = *job;
    t->stopping = 0;
    /* Under the lock, so that a kick or stop meanwhile sees it whole. */
    t->running =
        t->cv_ready && pthread_create(&t->thread, job->stack ? &attr : NULL, ticker_main, t) == 0;
    int rc = t->running ? 0 : -1;
    pthread_mutex_unlock(&t->mu);
    if (job->stack)
        pthread_attr_destroy(&attr);
    return rc;
}

void ticker_kick(struct ticker *t)
{
    pthread_mutex_lock(&t->mu);
    t->kicks++;
    if (t->cv_ready)
        pthread_cond_broadcast(&t->cv);
    void (*wake)(void *) = t->running ? t->job.wake : NULL;
    void *arg = t->job.arg;
    pthread_mutex_unlock(&t->mu);
    if (wake)
        wake(arg);
}

int ticker_stop(struct ticker *t)
{
    pthread_mutex_lock(&t->mu);
    if (!t->running) {
        pthread_mutex_unlock(&t->mu);
        return 0;
    }
    t->stopping = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    /* The thread reads job but never writes it, and only stop clears
     * running: both are steady until the join. */
    if (t->job.wake)
        t->job.wake(t->job.arg);
    pthread_join(t->thread, NULL);
    pthread_mutex_lock(&t->mu);
    t->running = 0;
    pthread_mutex_unlock(&t->mu);
    return 1;
}
