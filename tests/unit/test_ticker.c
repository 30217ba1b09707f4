/* test_ticker — the background threads' one way to run (service/base/ticker.c).
 *
 * A ticker's thread is named as asked and ticks again at the deadline its
 * tick returned; a kick runs the next tick long before that deadline, also
 * a kick that comes while a tick runs; stop ends a thread that sleeps for a
 * minute at once, lets no tick start after it, and a second stop does
 * nothing; a thread that sleeps on its own waker is woken through wake by
 * kick and stop; a thread that cannot start leaves the ticker stopped and
 * startable. The bounds are generous (seconds where a tick takes
 * microseconds): they tell a prompt wake from a minute's sleep. */
#include "check.h"
#include "clock.h"
#include "ticker.h"

#include <pthread.h>
#include <string.h>

#define PROMPT_MS 5000 /* "at once", on a busy sanitizer build */
#define LONG_MS 60000  /* a deadline that no check may wait for */

struct job {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* ticks or gate changed */
    int ticks;
    int64_t every_ms; /* each tick's next deadline, from now */
    int hold;         /* ticks wait while set */
    int holding;      /* a tick waits on hold */
    char name[16];    /* the thread's, seen by the first tick */
    /* The custom sleep: an epoch, like a follow_group's. */
    unsigned epoch, seen;
    int sleeps, wakes;
};

static void job_init(struct job *j, int64_t every_ms)
{
    memset(j, 0, sizeof *j);
    pthread_mutex_init(&j->mu, NULL);
    clock_cond_init(&j->cv);
    j->every_ms = every_ms;
}

static void job_destroy(struct job *j)
{
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
}

static int64_t count_tick(void *arg)
{
    struct job *j = arg;
    pthread_mutex_lock(&j->mu);
    if (j->ticks == 0)
        pthread_getname_np(pthread_self(), j->name, sizeof j->name);
    j->holding = j->hold;
    pthread_cond_broadcast(&j->cv);
    while (j->hold)
        pthread_cond_wait(&j->cv, &j->mu);
    j->holding = 0;
    j->ticks++;
    pthread_cond_broadcast(&j->cv);
    int64_t next = clock_mono_ms() + j->every_ms;
    pthread_mutex_unlock(&j->mu);
    return next;
}

/* Waits (bounded) until the job has ticked `n` times; returns the count. */
static int wait_ticks(struct job *j, int n)
{
    int64_t until = clock_mono_ms() + PROMPT_MS;
    pthread_mutex_lock(&j->mu);
    while (j->ticks < n && clock_cond_wait_until(&j->cv, &j->mu, until) == 0)
        ;
    int ticks = j->ticks;
    pthread_mutex_unlock(&j->mu);
    return ticks;
}

/* Waits (bounded) until a tick waits on hold; returns whether one does. */
static int wait_holding(struct job *j)
{
    int64_t until = clock_mono_ms() + PROMPT_MS;
    pthread_mutex_lock(&j->mu);
    while (!j->holding && clock_cond_wait_until(&j->cv, &j->mu, until) == 0)
        ;
    int holding = j->holding;
    pthread_mutex_unlock(&j->mu);
    return holding;
}

static int ticks_of(struct job *j)
{
    pthread_mutex_lock(&j->mu);
    int n = j->ticks;
    pthread_mutex_unlock(&j->mu);
    return n;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Starts t on count_tick over j, its first tick first_ms after. */
static int start_counting(struct ticker *t, struct job *j, const char *name, int64_t first_ms)
{
    return ticker_start(
        t, &(struct ticker_job){.name = name, .first_ms = first_ms, .tick = count_tick, .arg = j});
}

/* Ticks come again and again at the deadline each returns, on a thread of
 * the name asked for. */
static void test_ticks(void)
{
    struct job j;
    job_init(&j, 10);
    struct ticker t = TICKER_INITIALIZER;
    CHECK_INT(start_counting(&t, &j, "test-ticker", 0), 0);
    CHECK(wait_ticks(&j, 5) >= 5);
    CHECK_INT(ticker_stop(&t), 1);
    CHECK_STR(j.name, "test-ticker");
    job_destroy(&j);
}

/* first_ms a minute away: a kick runs the first tick now; its deadline a
 * minute away again: a second kick runs the next. */
static void test_kick(void)
{
    struct job j;
    job_init(&j, LONG_MS);
    struct ticker t = TICKER_INITIALIZER;
    CHECK_INT(start_counting(&t, &j, "test-kick", LONG_MS), 0);
    pause_ms(50);
    CHECK_INT(ticks_of(&j), 0);
    int64_t t0 = clock_mono_ms();
    ticker_kick(&t);
    CHECK_INT(wait_ticks(&j, 1), 1);
    ticker_kick(&t);
    CHECK_INT(wait_ticks(&j, 2), 2);
    CHECK(clock_mono_ms() - t0 < PROMPT_MS);
    CHECK_INT(ticker_stop(&t), 1);
    job_destroy(&j);
}

/* A kick while a tick runs is not lost: the next tick follows at once,
 * though the running one returns a deadline a minute away. */
static void test_kick_during_tick(void)
{
    struct job j;
    job_init(&j, LONG_MS);
    j.hold = 1;
    struct ticker t = TICKER_INITIALIZER;
    CHECK_INT(start_counting(&t, &j, "test-kick2", 0), 0);
    CHECK(wait_holding(&j));
    ticker_kick(&t);
    pthread_mutex_lock(&j.mu);
    j.hold = 0;
    pthread_cond_broadcast(&j.cv);
    pthread_mutex_unlock(&j.mu);
    CHECK_INT(wait_ticks(&j, 2), 2);
    CHECK_INT(ticker_stop(&t), 1);
    job_destroy(&j);
}

/* Stop ends a minute's sleep at once and joins; no tick starts after it;
 * a second stop, and a kick after it, do nothing; the ticker starts again. */
static void test_stop(void)
{
    struct job j;
    job_init(&j, LONG_MS);
    struct ticker t = TICKER_INITIALIZER;
    CHECK_INT(ticker_stop(&t), 0); /* never started */
    ticker_kick(&t);               /* nor this: nothing to wake */
    CHECK_INT(start_counting(&t, &j, "test-stop", 0), 0);
    CHECK_INT(wait_ticks(&j, 1), 1);
    int64_t t0 = clock_mono_ms();
    CHECK_INT(ticker_stop(&t), 1);
    CHECK(clock_mono_ms() - t0 < PROMPT_MS);
    ticker_kick(&t);
    pause_ms(50);
    CHECK_INT(ticks_of(&j), 1);
    CHECK_INT(ticker_stop(&t), 0);

    /* Stopped before its first tick: it never ticks. */
    CHECK_INT(start_counting(&t, &j, "test-stop", LONG_MS), 0);
    t0 = clock_mono_ms();
    CHECK_INT(ticker_stop(&t), 1);
    CHECK(clock_mono_ms() - t0 < PROMPT_MS);
    CHECK_INT(ticks_of(&j), 1);
    job_destroy(&j);
}

static void *release_later(void *arg)
{
    struct job *j = arg;
    pause_ms(100);
    pthread_mutex_lock(&j->mu);
    j->hold = 0;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* A stop while a tick runs waits for that tick to end, and no tick
 * follows, though each asks for the next at once. */
static void test_stop_during_tick(void)
{
    struct job j;
    job_init(&j, 0);
    j.hold = 1;
    struct ticker t = TICKER_INITIALIZER;
    CHECK_INT(start_counting(&t, &j, "test-stop2", 0), 0);
    CHECK(wait_holding(&j));
    pthread_t releaser;
    CHECK_INT(pthread_create(&releaser, NULL, release_later, &j), 0);
    CHECK_INT(ticker_stop(&t), 1);
    CHECK_INT(ticks_of(&j), 1); /* the held tick ended before the join */
    pthread_join(releaser, NULL);
    pause_ms(50);
    CHECK_INT(ticks_of(&j), 1);
    job_destroy(&j);
}

/* The custom sleep: returns once the epoch moved since it last returned,
 * as follow_wait does. */
static void epoch_sleep(void *arg, int64_t deadline)
{
    struct job *j = arg;
    pthread_mutex_lock(&j->mu);
    j->sleeps++;
    while (j->epoch == j->seen && clock_cond_wait_until(&j->cv, &j->mu, deadline) == 0)
        ;
    j->seen = j->epoch;
    pthread_mutex_unlock(&j->mu);
}

static void epoch_wake(void *arg)
{
    struct job *j = arg;
    pthread_mutex_lock(&j->mu);
    j->epoch++;
    j->wakes++;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* A thread that sleeps on its own waker: kick and stop reach it through
 * wake, and it sleeps there, not on the ticker's condition. */
static void test_custom_sleep(void)
{
    struct job j;
    job_init(&j, LONG_MS);
    struct ticker t = TICKER_INITIALIZER;
    CHECK_INT(ticker_start(&t, &(struct ticker_job){.name = "test-sleep",
                                                    .tick = count_tick,
                                                    .arg = &j,
                                                    .sleep = epoch_sleep,
                                                    .wake = epoch_wake}),
              0);
    CHECK_INT(wait_ticks(&j, 1), 1);
    ticker_kick(&t);
    CHECK_INT(wait_ticks(&j, 2), 2);
    /* Woken by the epoch alone (the ticker's condition is not its sleep). */
    epoch_wake(&j);
    CHECK_INT(wait_ticks(&j, 3), 3);
    int64_t t0 = clock_mono_ms();
    CHECK_INT(ticker_stop(&t), 1);
    CHECK(clock_mono_ms() - t0 < PROMPT_MS);
    pthread_mutex_lock(&j.mu);
    CHECK(j.sleeps >= 2); /* after the first tick and the second */
    CHECK(j.wakes >= 3);  /* the kick, the test's, the stop's */
    pthread_mutex_unlock(&j.mu);
    job_destroy(&j);
}

/* A thread that cannot start: its attributes are refused (a stack below
 * the minimum), or pthread_create is (a stack of a petabyte, more than the
 * address space holds): -1, the ticker stays stopped, kicks and stops do
 * nothing, no tick runs, and it starts afterwards. */
static void test_start_failure(void)
{
    struct job j;
    job_init(&j, 10);
    struct ticker t = TICKER_INITIALIZER;
    const size_t stacks[] = {1, (size_t)1 << 50};
    for (size_t i = 0; i < sizeof stacks / sizeof stacks[0]; i++) {
        CHECK_INT(ticker_start(&t, &(struct ticker_job){.name = "test-fail",
                                                        .stack = stacks[i],
                                                        .tick = count_tick,
                                                        .arg = &j}),
                  -1);
        ticker_kick(&t);
        CHECK_INT(ticker_stop(&t), 0);
    }
    pause_ms(50);
    CHECK_INT(ticks_of(&j), 0);
    CHECK_INT(ticker_start(&t, &(struct ticker_job){.name = "test-fail",
                                                    .stack = 256 * 1024,
                                                    .tick = count_tick,
                                                    .arg = &j}),
              0);
    CHECK(wait_ticks(&j, 2) >= 2);
    CHECK_INT(ticker_stop(&t), 1);
    job_destroy(&j);
}

int main(void)
{
    test_ticks();
    test_kick();
    test_kick_during_tick();
    test_stop();
    test_stop_during_tick();
    test_custom_sleep();
    test_start_failure();
    return check_summary();
}
