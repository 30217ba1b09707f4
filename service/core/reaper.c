/* reaper — see reaper.h. */
#include "reaper.h"
#include "clock.h"

#include <pthread.h>

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int running, stop;
    int64_t interval;
    void (*tick)(void *);
    void *arg;
} r = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *reaper_main(void *unused)
{
    pthread_setname_np(pthread_self(), "mcpd-reaper");
    (void)unused;
    pthread_mutex_lock(&r.mu);
    while (!r.stop) {
        clock_cond_wait_until(&r.cv, &r.mu, clock_mono_ms() + r.interval);
        if (r.stop)
            break;
        pthread_mutex_unlock(&r.mu);
        r.tick(r.arg);
        pthread_mutex_lock(&r.mu);
    }
    pthread_mutex_unlock(&r.mu);
    return NULL;
}

int reaper_start(int64_t interval_ms, void (*tick)(void *arg), void *arg)
{
    clock_cond_init(&r.cv);
    r.interval = interval_ms > 0 ? interval_ms : 1000;
    r.tick = tick;
    r.arg = arg;
    r.stop = 0;
    if (pthread_create(&r.thread, NULL, reaper_main, NULL) != 0)
        return -1;
    r.running = 1;
    return 0;
}

void reaper_stop(void)
{
    if (!r.running)
        return;
    pthread_mutex_lock(&r.mu);
    r.stop = 1;
    pthread_cond_broadcast(&r.cv);
    pthread_mutex_unlock(&r.mu);
    pthread_join(r.thread, NULL);
    r.running = 0;
}
