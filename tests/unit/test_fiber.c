/* test_fiber — fiber (service/base/fiber.c) and fcond (fcond.c): a fiber
 * runs to its end on its host's thread; a park hands control back and the
 * host suspends it; a wake from another thread, a deadline or a cancel has
 * the host resume it where it stopped; a wake that comes before the park,
 * or while the host is still suspending, is not lost; fcond wakes threads
 * and fibers alike; fibers are reused. The host here plays libmicrohttpd:
 * suspend records, resume posts a semaphore the host loop waits on. */
#include "check.h"
#include "clock.h"
#include "fcond.h"
#include "fiber.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <time.h>

struct host {
    sem_t resumed;
    atomic_int suspends, resumes;
};

static void host_suspend(void *cookie)
{
    struct host *h = cookie;
    atomic_fetch_add(&h->suspends, 1);
}

static void host_resume(void *cookie)
{
    struct host *h = cookie;
    atomic_fetch_add(&h->resumes, 1);
    sem_post(&h->resumed);
}

/* Runs f to its end the way the gate does: run, and after each park wait
 * for the resume. Returns how many times it parked. */
static int drive(struct fiber *f, struct host *h)
{
    int parks = 0;
    while (fiber_run(f) == FIBER_PARKED) {
        parks++;
        while (sem_wait(&h->resumed) != 0)
            ;
    }
    return parks;
}

static struct fiber *make(void (*fn)(void *), struct host *h, void *arg)
{
    struct fiber_host fh = {.suspend = host_suspend, .resume = host_resume, .cookie = h};
    return fiber_new(fn, &fh, arg);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- a fiber that never waits ---- */

static void count_up(void *arg)
{
    int *n = arg;
    (*n)++;
    CHECK(fiber_current() != NULL);
}

/* ---- park and wake from another thread ---- */

struct waiter {
    pthread_mutex_t mu;
    struct fcond cv;
    int ready;
    int seen;
    struct fiber *self;
};

static void wait_ready(void *arg)
{
    struct waiter *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->ready)
        fcond_wait_until(&w->cv, &w->mu, -1);
    w->seen = 1;
    pthread_mutex_unlock(&w->mu);
}

static void *set_ready_later(void *arg)
{
    struct waiter *w = arg;
    sleep_ms(50);
    pthread_mutex_lock(&w->mu);
    w->ready = 1;
    fcond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* ---- deadlines ---- */

struct timed {
    pthread_mutex_t mu;
    struct fcond cv;
    int rc;
    int64_t waited_ms;
};

static void wait_until_deadline(void *arg)
{
    struct timed *t = arg;
    int64_t start = clock_mono_ms();
    pthread_mutex_lock(&t->mu);
    t->rc = fcond_wait_until(&t->cv, &t->mu, start + 80);
    while (t->rc == 0) /* spurious */
        t->rc = fcond_wait_until(&t->cv, &t->mu, start + 80);
    pthread_mutex_unlock(&t->mu);
    t->waited_ms = clock_mono_ms() - start;
}

/* ---- a flag set with fiber_wake_set ---- */

struct flagged {
    int flag;
    struct fiber *f;
    int parks_until_set;
};

static void wait_flag(void *arg)
{
    struct flagged *x = arg;
    int r;
    while ((r = fiber_park(&x->flag, -1)) != 1)
        x->parks_until_set++;
}

static void *set_flag_later(void *arg)
{
    struct flagged *x = arg;
    sleep_ms(30);
    fiber_wake_set(x->f, &x->flag);
    return NULL;
}

/* ---- cancel ---- */

static void park_forever(void *arg)
{
    int *rc = arg;
    *rc = fiber_park(NULL, -1);
    *rc = fiber_park(NULL, -1); /* ECANCELED at once once cancelled */
}

/* ---- a wake before the park ---- */

static void wake_self_then_park(void *arg)
{
    int *rc = arg;
    fiber_wake(fiber_current());
    *rc = fiber_park(NULL, -1); /* returns at once: the wake is kept */
}

/* ---- sleep ---- */

static void sleep_on_fiber(void *arg)
{
    int64_t *took = arg;
    int64_t start = clock_mono_ms();
    fiber_sleep_ms(60);
    *took = clock_mono_ms() - start;
}

int main(void)
{
    struct host h;
    sem_init(&h.resumed, 0, 0);

    /* A fiber that never waits ends in one run, with no suspend. */
    int n = 0;
    struct fiber *f = make(count_up, &h, &n);
    CHECK(f != NULL);
    CHECK(fiber_current() == NULL);
    CHECK_INT(fiber_run(f), FIBER_DONE);
    CHECK_INT(n, 1);
    CHECK(fiber_current() == NULL);
    fiber_free(f);
    /* And again, on a reused fiber. */
    f = make(count_up, &h, &n);
    CHECK_INT(drive(f, &h), 0);
    CHECK_INT(n, 2);
    fiber_free(f);
    CHECK_INT(atomic_load(&h.suspends), 0);

    /* A fiber waiting on an fcond is suspended, and resumed by a signal
     * from another thread. */
    struct waiter w = {.mu = PTHREAD_MUTEX_INITIALIZER};
    fcond_init(&w.cv);
    f = make(wait_ready, &h, &w);
    pthread_t t;
    pthread_create(&t, NULL, set_ready_later, &w);
    CHECK(drive(f, &h) >= 1);
    CHECK_INT(w.seen, 1);
    pthread_join(t, NULL);
    fiber_free(f);
    CHECK_INT(atomic_load(&h.suspends), atomic_load(&h.resumes));

    /* The same fcond wakes a plain thread. */
    w.ready = 0;
    w.seen = 0;
    pthread_create(&t, NULL, set_ready_later, &w);
    wait_ready(&w);
    CHECK_INT(w.seen, 1);
    pthread_join(t, NULL);
    fcond_destroy(&w.cv);

    /* A deadline resumes the fiber with ETIMEDOUT, not before it. */
    struct timed td = {.mu = PTHREAD_MUTEX_INITIALIZER};
    fcond_init(&td.cv);
    f = make(wait_until_deadline, &h, &td);
    CHECK(drive(f, &h) >= 1);
    CHECK_INT(td.rc, ETIMEDOUT);
    CHECK(td.waited_ms >= 80);
    CHECK(td.waited_ms < 2000);
    fiber_free(f);
    fcond_destroy(&td.cv);

    /* fiber_wake_set: the flag is seen under the fiber's lock. */
    struct flagged fl = {0};
    f = make(wait_flag, &h, &fl);
    fl.f = f;
    pthread_create(&t, NULL, set_flag_later, &fl);
    drive(f, &h);
    CHECK_INT(fl.flag, 1);
    pthread_join(t, NULL);
    fiber_free(f);

    /* A cancel resumes a parked fiber, and later parks return ECANCELED
     * without suspending. */
    int rc = -1;
    f = make(park_forever, &h, &rc);
    int before = atomic_load(&h.suspends);
    CHECK_INT(fiber_run(f), FIBER_PARKED);
    fiber_cancel(f);
    while (sem_wait(&h.resumed) != 0)
        ;
    CHECK(fiber_cancelled(f));
    CHECK_INT(fiber_run(f), FIBER_DONE);
    CHECK_INT(rc, ECANCELED);
    CHECK_INT(atomic_load(&h.suspends), before + 1);
    fiber_free(f);

    /* A wake that came before the park makes it return at once. */
    rc = -1;
    f = make(wake_self_then_park, &h, &rc);
    before = atomic_load(&h.suspends);
    CHECK_INT(fiber_run(f), FIBER_DONE);
    CHECK_INT(rc, 0);
    CHECK_INT(atomic_load(&h.suspends), before);
    fiber_free(f);

    /* fiber_sleep_ms parks for the time asked. */
    int64_t took = 0;
    f = make(sleep_on_fiber, &h, &took);
    CHECK(drive(f, &h) >= 1);
    CHECK(took >= 60);
    fiber_free(f);

    /* Many fibers parked at once, woken in another order than they
     * parked, each resumed once. */
    enum { MANY = 100 };
    static struct waiter ws[MANY];
    static struct fiber *fs[MANY];
    for (int i = 0; i < MANY; i++) {
        pthread_mutex_init(&ws[i].mu, NULL);
        fcond_init(&ws[i].cv);
        ws[i].ready = ws[i].seen = 0;
        fs[i] = make(wait_ready, &h, &ws[i]);
        CHECK_INT(fiber_run(fs[i]), FIBER_PARKED);
    }
    for (int i = MANY - 1; i >= 0; i--) {
        pthread_mutex_lock(&ws[i].mu);
        ws[i].ready = 1;
        fcond_broadcast(&ws[i].cv);
        pthread_mutex_unlock(&ws[i].mu);
    }
    for (int i = 0; i < MANY; i++) {
        while (sem_wait(&h.resumed) != 0)
            ;
    }
    int all_seen = 1;
    for (int i = 0; i < MANY; i++) {
        all_seen &= fiber_run(fs[i]) == FIBER_DONE && ws[i].seen;
        fiber_free(fs[i]);
        fcond_destroy(&ws[i].cv);
    }
    CHECK(all_seen);
    CHECK_INT(atomic_load(&h.suspends), atomic_load(&h.resumes));

    /* More fibers parked with a deadline at once than the timer heap's
     * first size: each made fiber has its slot, and each times out. */
    enum { TIMED = 300 };
    static struct timed tds[TIMED];
    for (int i = 0; i < TIMED; i++) {
        pthread_mutex_init(&tds[i].mu, NULL);
        fcond_init(&tds[i].cv);
    }
    static struct fiber *tfs[TIMED];
    int made = 0;
    for (int i = 0; i < TIMED; i++) {
        tfs[i] = make(wait_until_deadline, &h, &tds[i]);
        made += tfs[i] != NULL;
        if (tfs[i])
            CHECK_INT(fiber_run(tfs[i]), FIBER_PARKED);
    }
    CHECK_INT(made, TIMED);
    for (int i = 0; i < made; i++) {
        while (sem_wait(&h.resumed) != 0)
            ;
    }
    int all_timed_out = 1;
    for (int i = 0; i < TIMED; i++) {
        if (!tfs[i])
            continue;
        all_timed_out &= drive(tfs[i], &h) == 0 && tds[i].rc == ETIMEDOUT && tds[i].waited_ms >= 80;
        fiber_free(tfs[i]);
        fcond_destroy(&tds[i].cv);
    }
    CHECK(all_timed_out);
    CHECK_INT(atomic_load(&h.suspends), atomic_load(&h.resumes));
    sem_destroy(&h.resumed);
    return check_summary();
}
