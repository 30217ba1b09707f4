/* test_fiber — fiber (service/base/fiber.c) and fcond (fcond.c): a fiber
 * runs to its end on its host's thread; a park hands control back and the
 * host suspends it; a wake from another thread, a deadline or a cancel has
 * the host resume it where it stopped; a wake that comes before the park,
 * or while the host is still suspending, is not lost; fcond wakes threads
 * and fibers alike; fibers are reused; a fiber that overflows its stack
 * faults, with a frame of any size, instead of writing below it. The host
 * here plays libmicrohttpd: suspend records, resume posts a semaphore the
 * host loop waits on. */
#include "check.h"
#include "clock.h"
#include "fcond.h"
#include "fiber.h"
#include "unprobed_frame.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* ---- a stack overflow faults, whatever the size of the frame ---- */

/* Mapped on purpose right below a fiber's guard: where a frame that
 * stepped over the guard would write without a fault (mmap puts another
 * fiber's stack, or a thread's, there). */
#define VICTIM_SIZE (256 * 1024)
#define VICTIM_BYTE 0x5a
/* Larger than the fibers' guard: only the stack probes make it fault. */
#define PROBED_FRAME_SIZE (96 * 1024)

/* How the child that overflows its fiber's stack exits when it did not
 * die by the fault. */
enum {
    OVERFLOW_CORRUPTED = 2, /* it wrote below the guard */
    OVERFLOW_NONE,          /* it wrote nothing there */
    OVERFLOW_NO_GUARD,      /* no inaccessible mapping right below the stack */
    OVERFLOW_NO_VICTIM,     /* nothing could be mapped right below the guard */
};

struct overflow {
    int (*frame)(void);
    int result; /* OVERFLOW_*: how it went when it did not fault */
};

/* The first store of a function with a large frame can be at its bottom. */
__attribute__((noinline)) static int probed_frame(void)
{
    volatile char frame[PROBED_FRAME_SIZE];
    frame[0] = 1;
    return frame[0];
}

/* Small frames, each touched, down to `floor`; there, the large frame. */
__attribute__((noinline)) static int descend(uintptr_t floor, int (*frame)(void))
{
    volatile char pad[512];
    pad[0] = 0;
    if ((uintptr_t)__builtin_frame_address(0) > floor)
        return descend(floor, frame) + pad[0];
    return frame() + pad[0];
}

/* The start of the mapping that holds addr (*lo), and of the inaccessible
 * one right below it (*guard). 0, or -1 when there is none. */
static int stack_and_guard(uintptr_t addr, uintptr_t *lo, uintptr_t *guard)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    unsigned long below_lo = 0, below_hi = 0;
    int below_none = 0;
    *guard = 0;
    while (getline(&line, &cap, maps) > 0) {
        unsigned long a, b;
        char perms[5];
        if (sscanf(line, "%lx-%lx %4s", &a, &b, perms) != 3)
            continue;
        if (addr >= a && addr < b) {
            *lo = a;
            if (below_hi == a && below_none)
                *guard = below_lo;
            break;
        }
        below_lo = a;
        below_hi = b;
        below_none = strcmp(perms, "---p") == 0;
    }
    free(line);
    fclose(maps);
    return *guard ? 0 : -1;
}

/* On a fiber: maps the victim below the guard, goes down to 8 KiB above
 * the stack's end and runs the large frame there. */
static void overflow_stack(void *arg)
{
    struct overflow *o = arg;
    uintptr_t lo, guard;
    if (stack_and_guard((uintptr_t)__builtin_frame_address(0), &lo, &guard) != 0) {
        o->result = OVERFLOW_NO_GUARD;
        return;
    }
    char *want = (char *)(guard - VICTIM_SIZE);
    char *victim = mmap(want, VICTIM_SIZE, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (victim != want) {
        if (victim != MAP_FAILED) /* a kernel without MAP_FIXED_NOREPLACE */
            munmap(victim, VICTIM_SIZE);
        o->result = OVERFLOW_NO_VICTIM;
        return;
    }
    memset(victim, VICTIM_BYTE, VICTIM_SIZE);
    descend(lo + 8 * 1024, o->frame);
    o->result = OVERFLOW_NONE;
    for (size_t i = 0; i < VICTIM_SIZE; i++) {
        if (victim[i] != VICTIM_BYTE)
            o->result = OVERFLOW_CORRUPTED;
    }
}

/* Runs overflow_stack with `frame` in a child process, where the fault
 * kills (no handler, no core file), and checks that it did. Another
 * mapping may lie right below a fiber's guard (the stack of the thread
 * that serves deadlines is made with the first fiber): the child keeps
 * each fiber it made and tries a new one, lower down. */
static void check_overflow_faults(const char *what, int (*frame)(void))
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        struct host h = {0};
        struct overflow o = {frame, OVERFLOW_NO_VICTIM};
        for (int i = 0; i < 8 && o.result == OVERFLOW_NO_VICTIM; i++) {
            struct fiber *f = make(overflow_stack, &h, &o);
            if (!f || fiber_run(f) != FIBER_DONE)
                _exit(1);
        }
        _exit(o.result);
    }
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    int faulted = pid > 0 && WIFSIGNALED(status) &&
                  (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS);
    if (!check_record(faulted, __FILE__, __LINE__, what)) {
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        printf("     the child %s\n",
               pid <= 0                     ? "could not be started"
               : WIFSIGNALED(status)        ? strsignal(WTERMSIG(status))
               : code == OVERFLOW_CORRUPTED ? "wrote below the guard without a fault"
               : code == OVERFLOW_NONE      ? "returned without writing below the guard"
               : code == OVERFLOW_NO_GUARD  ? "found no guard below its stack"
               : code == OVERFLOW_NO_VICTIM ? "could not map below the guard"
                                            : "failed to run its fiber");
    }
}

/* ---- lock_check (the AddressSanitizer build) ---- */

static pthread_mutex_t plain_mu = PTHREAD_MUTEX_INITIALIZER;

static void park_holding_plain_mutex(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&plain_mu);
    fiber_park(NULL, clock_mono_ms() + 10);
    pthread_mutex_unlock(&plain_mu);
}

/* A fiber that waits with only a lock released by the wait, and a host that
 * holds a mutex across running it: neither is the fiber's holding. */
static void park_after_unlock(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&plain_mu);
    pthread_mutex_unlock(&plain_mu);
    fiber_park(NULL, clock_mono_ms() + 10);
}

/* Runs fn on a fiber in a child; 1 when the child aborted. */
static int child_aborts(void (*fn)(void *), int host_holds)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        signal(SIGABRT, SIG_DFL);
        /* the report is expected: not for the test's output */
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, STDERR_FILENO);
        struct host h = {0};
        sem_init(&h.resumed, 0, 0);
        pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
        if (host_holds)
            pthread_mutex_lock(&host_mu);
        struct fiber *f = make(fn, &h, NULL);
        int rc = f ? drive(f, &h) : -1;
        if (host_holds)
            pthread_mutex_unlock(&host_mu);
        _exit(rc < 0 ? 1 : 0);
    }
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return pid > 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static void check_lock_check(void)
{
#ifdef MCPD_LOCK_CHECK
    CHECK(child_aborts(park_holding_plain_mutex, 0));
    CHECK(!child_aborts(park_after_unlock, 1));
#else
    (void)park_after_unlock;
    (void)park_holding_plain_mutex;
    (void)child_aborts;
    printf("skipped: lock_check (built without MCPD_LOCK_CHECK)\n");
#endif
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
    /* First, while this is the only thread: the children fork from it.
     * A frame larger than the guard faults at its first page past the
     * stack, where the stack probes touch it (mcpd's own code is built
     * with them). One larger than a page but smaller than the guard faults
     * without the probes (a library may be built without them). Neither
     * writes below the guard. */
#ifdef MCPD_TEST_STACK_PROBES
    check_overflow_faults("a probed frame larger than the guard faults", probed_frame);
#else
    (void)probed_frame;
    printf("skipped: a probed frame larger than the guard (built without stack probes)\n");
#endif
    check_overflow_faults("an unprobed frame smaller than the guard faults", unprobed_frame);
    check_lock_check();

    struct host h = {0};
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
