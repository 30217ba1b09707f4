/* fcond — see fcond.h. */
#include "fcond.h"
#include "clock.h"
#include "fiber.h"

#include <errno.h>

struct fcond_waiter {
    struct fiber *fiber;
    struct fcond_waiter *next, **prev;
};

int fcond_init(struct fcond *c)
{
    c->waiters = NULL;
    if (pthread_mutex_init(&c->lk, NULL) != 0)
        return -1;
    if (clock_cond_init(&c->cv) != 0) {
        pthread_mutex_destroy(&c->lk);
        return -1;
    }
    return 0;
}

void fcond_destroy(struct fcond *c)
{
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->lk);
}

/* Each waiter leaves the list under lk before it goes on, so a fiber woken
 * here is still there to wake. */
static void wake_fibers(struct fcond *c)
{
    pthread_mutex_lock(&c->lk);
    for (struct fcond_waiter *w = c->waiters; w; w = w->next) {
        w->prev = NULL;
        fiber_wake(w->fiber);
    }
    c->waiters = NULL;
    pthread_mutex_unlock(&c->lk);
}

void fcond_signal(struct fcond *c)
{
    wake_fibers(c);
    pthread_cond_signal(&c->cv);
}

void fcond_broadcast(struct fcond *c)
{
    wake_fibers(c);
    pthread_cond_broadcast(&c->cv);
}

static int thread_wait(struct fcond *c, pthread_mutex_t *mu, int64_t deadline_mono_ms)
{
    if (deadline_mono_ms >= 0)
        return clock_cond_wait_until(&c->cv, mu, deadline_mono_ms);
    fiber_warn_if_blocking("a condition wait");
    return pthread_cond_wait(&c->cv, mu);
}

int fcond_wait_until(struct fcond *c, pthread_mutex_t *mu, int64_t deadline_mono_ms)
{
    if (deadline_mono_ms >= 0 && deadline_mono_ms <= clock_mono_ms())
        return ETIMEDOUT;
    struct fiber *f = fiber_current();
    if (!f)
        return thread_wait(c, mu, deadline_mono_ms);
    /* A cancelled fiber gives up a wait with a deadline at once; one
     * without (a mutex) it parks through the cancel: blocking the thread
     * could hold the very fiber that is to let go. */
    int outlast = fiber_cancelled(f);
    if (outlast && deadline_mono_ms >= 0)
        return ETIMEDOUT;
    struct fcond_waiter w = {.fiber = f};
    pthread_mutex_lock(&c->lk);
    w.next = c->waiters;
    if (w.next)
        w.next->prev = &w.next;
    w.prev = &c->waiters;
    c->waiters = &w;
    pthread_mutex_unlock(&c->lk);
    pthread_mutex_unlock(mu);
    int parked = 0;
    if (outlast)
        fiber_park_outlast();
    else
        parked = fiber_park(NULL, deadline_mono_ms);
    pthread_mutex_lock(&c->lk);
    if (w.prev) {
        *w.prev = w.next;
        if (w.next)
            w.next->prev = w.prev;
    }
    pthread_mutex_unlock(&c->lk);
    pthread_mutex_lock(mu);
    if (parked == ECANCELED) /* the caller checks its condition before waiting again */
        return deadline_mono_ms >= 0 ? ETIMEDOUT : 0;
    return deadline_mono_ms >= 0 && clock_mono_ms() >= deadline_mono_ms ? ETIMEDOUT : 0;
}

int fmutex_init(struct fmutex *m)
{
    m->held = 0;
    if (pthread_mutex_init(&m->mu, NULL) != 0)
        return -1;
    if (fcond_init(&m->cv) != 0) {
        pthread_mutex_destroy(&m->mu);
        return -1;
    }
    return 0;
}

void fmutex_destroy(struct fmutex *m)
{
    fcond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
}

void fmutex_lock(struct fmutex *m)
{
    pthread_mutex_lock(&m->mu);
    while (m->held)
        fcond_wait_until(&m->cv, &m->mu, -1);
    m->held = 1;
    pthread_mutex_unlock(&m->mu);
}

void fmutex_unlock(struct fmutex *m)
{
    pthread_mutex_lock(&m->mu);
    m->held = 0;
    fcond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
}
