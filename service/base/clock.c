/* clock — see clock.h. */
#include "clock.h"
#include "fiber.h"

#include <errno.h>

int64_t clock_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int clock_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

int clock_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_mono_ms)
{
    if (deadline_mono_ms <= clock_mono_ms())
        return ETIMEDOUT;
    fiber_warn_if_blocking("a timed condition wait");
    struct timespec ts = {.tv_sec = deadline_mono_ms / 1000,
                          .tv_nsec = (deadline_mono_ms % 1000) * 1000000};
    return pthread_cond_timedwait(cv, mu, &ts);
}
