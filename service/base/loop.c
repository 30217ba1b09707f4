/* loop — see loop.h. Each loop thread runs, in rounds, the fibers that
 * became ready since the last round (in the order they were woken), then
 * waits in epoll_wait (without a timeout when nothing is ready: deadlines
 * are fiber.c's timer thread's, which wakes the fiber). Descriptor waits
 * are recorded in a per-thread table indexed by descriptor, touched only by
 * the loop thread itself (its fibers and its dispatch), so it needs no
 * lock; a descriptor is in the epoll set only while a fiber waits on it. */
#include "loop.h"
#include "clock.h"
#include "fiber.h"
#include "log.h"
#include "thread_stack.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* The loop thread's own frames only: fibers run on stacks of their own. */
#define LOOP_STACK (128 * 1024)
#define EVENTS_PER_WAIT 64

struct lthread;

/* One spawned fiber. */
struct task {
    struct fiber *f;
    struct lthread *lt;
    void (*fn)(void *);
    void *arg;
    int started;
    int shielded;                       /* loop_spawn_shielded: loop_stop does not cancel it */
    struct task *next_ready;            /* on lt's ready queue, under lt->mu */
    struct task *next_live, *prev_live; /* lt->live: loop thread only */
};

/* A fiber waiting on a descriptor, on its own stack. */
struct fdwait {
    struct fiber *f;
    int fired; /* set with fiber_wake_set */
};

struct fdslot {
    struct fdwait *in, *out;
    int registered; /* in the epoll set */
};

struct lthread {
    pthread_t thread;
    int epfd, evfd;
    pthread_mutex_t mu; /* guards the ready queue and stopping */
    struct task *ready_head, *ready_tail;
    int stopping;
    struct task *live; /* started, not finished: loop thread only */
    struct fdslot *slots;
    size_t nslots;
};

static struct {
    struct lthread *t;
    int n;
    atomic_uint next;
    atomic_int running;
} lp;

static _Thread_local struct lthread *self;

static void kick(struct lthread *lt)
{
    uint64_t one = 1;
    /* Fails only when the counter is near 2^64: a wake is pending anyway. */
    ssize_t rc = write(lt->evfd, &one, sizeof one);
    (void)rc;
}

static void enqueue_locked(struct lthread *lt, struct task *t)
{
    t->next_ready = NULL;
    if (lt->ready_tail)
        lt->ready_tail->next_ready = t;
    else
        lt->ready_head = t;
    lt->ready_tail = t;
}

/* ---- the fiber host ---- */

static void host_suspend(void *cookie)
{
    (void)cookie; /* a parked fiber is simply not on the ready queue */
}

/* Called under the fiber's lock, from any thread. */
static void host_resume(void *cookie)
{
    struct task *t = cookie;
    pthread_mutex_lock(&t->lt->mu);
    enqueue_locked(t->lt, t);
    pthread_mutex_unlock(&t->lt->mu);
    kick(t->lt);
}

static void task_main(void *arg)
{
    struct task *t = arg;
    t->fn(t->arg);
}

/* ---- descriptor waits ---- */

static int slots_fit(struct lthread *lt, int fd)
{
    if ((size_t)fd < lt->nslots)
        return 0;
    size_t n = lt->nslots ? lt->nslots : 64;
    while (n <= (size_t)fd)
        n *= 2;
    struct fdslot *s = realloc(lt->slots, n * sizeof *s);
    if (!s)
        return -1;
    memset(s + lt->nslots, 0, (n - lt->nslots) * sizeof *s);
    lt->slots = s;
    lt->nslots = n;
    return 0;
}

/* Makes the epoll set match fd's waiters: armed (one-shot) for what they
 * wait for, or out of the set when none waits. Returns 0 or an errno. */
static int slot_arm(struct lthread *lt, int fd)
{
    struct fdslot *s = &lt->slots[fd];
    uint32_t mask = (s->in ? EPOLLIN | EPOLLRDHUP : 0) | (s->out ? EPOLLOUT : 0);
    if (!mask) {
        if (s->registered)
            epoll_ctl(lt->epfd, EPOLL_CTL_DEL, fd, NULL);
        s->registered = 0;
        return 0;
    }
    struct epoll_event ev = {.events = mask | EPOLLONESHOT, .data.fd = fd};
    if (s->registered && epoll_ctl(lt->epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
        return 0;
    /* Not registered, or the descriptor was closed and reopened meanwhile
     * (epoll dropped it): add it. */
    if (epoll_ctl(lt->epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ||
        (errno == EEXIST && epoll_ctl(lt->epfd, EPOLL_CTL_MOD, fd, &ev) == 0)) {
        s->registered = 1;
        return 0;
    }
    s->registered = 0;
    return errno;
}

static void dispatch(struct lthread *lt, const struct epoll_event *ev)
{
    int fd = ev->data.fd;
    if (fd == lt->evfd) {
        uint64_t n;
        ssize_t rc = read(lt->evfd, &n, sizeof n);
        (void)rc;
        return;
    }
    if ((size_t)fd >= lt->nslots)
        return;
    struct fdslot *s = &lt->slots[fd];
    uint32_t e = ev->events;
    /* The waiters are parked (their fibers run on this thread, not now):
     * their fdwait stays valid until they run. */
    if (s->in && (e & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))) {
        fiber_wake_set(s->in->f, &s->in->fired);
        s->in = NULL;
    }
    if (s->out && (e & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        if (!s->out->fired)
            fiber_wake_set(s->out->f, &s->out->fired);
        s->out = NULL;
    }
    /* One-shot: still in the set, disarmed. Re-arm for a waiter left (the
     * other direction), or leave the set. */
    slot_arm(lt, fd);
}

int loop_wait_fd(int fd, uint32_t events, int64_t deadline_mono_ms)
{
    struct lthread *lt = self;
    struct fiber *f = fiber_current();
    if (!lt || !f)
        return ENOTSUP;
    if (fd < 0)
        return EBADF;
    if (slots_fit(lt, fd) != 0)
        return ENOMEM;
    struct fdslot *s = &lt->slots[fd];
    int in = (events & EPOLLIN) != 0, out = (events & EPOLLOUT) != 0;
    if ((in && s->in) || (out && s->out))
        return EBUSY;
    struct fdwait w = {.f = f};
    if (in)
        s->in = &w;
    if (out)
        s->out = &w;
    int rc = slot_arm(lt, fd);
    if (rc == 0) {
        int parked = fiber_park(&w.fired, deadline_mono_ms);
        if (parked == 1 || w.fired)
            rc = 0;
        else if (parked == ECANCELED || fiber_cancelled(f))
            rc = ECANCELED;
        else if (deadline_mono_ms >= 0 && clock_mono_ms() >= deadline_mono_ms)
            rc = ETIMEDOUT;
        else
            rc = EINTR;
    }
    /* Other fibers may have grown the table while this one was parked. */
    s = &lt->slots[fd];
    if (s->in == &w)
        s->in = NULL;
    if (s->out == &w)
        s->out = NULL;
    slot_arm(lt, fd);
    return rc;
}

/* ---- the thread ---- */

static void live_add(struct lthread *lt, struct task *t)
{
    t->prev_live = NULL;
    t->next_live = lt->live;
    if (lt->live)
        lt->live->prev_live = t;
    lt->live = t;
}

static void live_remove(struct lthread *lt, struct task *t)
{
    if (t->prev_live)
        t->prev_live->next_live = t->next_live;
    else
        lt->live = t->next_live;
    if (t->next_live)
        t->next_live->prev_live = t->prev_live;
}

/* Runs the fibers that were ready when the round began, in wake order. */
static void run_round(struct lthread *lt, int cancel_new)
{
    pthread_mutex_lock(&lt->mu);
    struct task *t = lt->ready_head;
    lt->ready_head = lt->ready_tail = NULL;
    pthread_mutex_unlock(&lt->mu);
    while (t) {
        struct task *next = t->next_ready;
        if (!t->started) {
            t->started = 1;
            live_add(lt, t);
            if (cancel_new && !t->shielded)
                fiber_cancel(t->f);
        }
        if (fiber_run(t->f) == FIBER_DONE) {
            live_remove(lt, t);
            fiber_free(t->f);
            free(t);
        }
        t = next;
    }
}

static void *loop_main(void *arg)
{
    struct lthread *lt = arg;
    self = lt;
    pthread_setname_np(pthread_self(), "mcpd-loop");
    fiber_thread_nonblocking();
    int cancelled = 0;
    struct epoll_event evs[EVENTS_PER_WAIT];
    for (;;) {
        run_round(lt, cancelled);
        pthread_mutex_lock(&lt->mu);
        int stopping = lt->stopping, idle = lt->ready_head == NULL;
        pthread_mutex_unlock(&lt->mu);
        if (stopping && !cancelled) {
            /* Not under lt->mu: a cancel resumes its fiber, which enqueues. */
            cancelled = 1;
            for (struct task *t = lt->live; t; t = t->next_live)
                if (!t->shielded)
                    fiber_cancel(t->f);
            continue;
        }
        if (stopping && idle && !lt->live)
            break;
        int n = epoll_wait(lt->epfd, evs, EVENTS_PER_WAIT, idle ? -1 : 0);
        if (n < 0 && errno != EINTR) {
            log_event(LOG_ERROR, NULL, "loop_failed", "epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++)
            dispatch(lt, &evs[i]);
    }
    return NULL;
}

static void lthread_close(struct lthread *lt)
{
    if (lt->epfd >= 0)
        close(lt->epfd);
    if (lt->evfd >= 0)
        close(lt->evfd);
    pthread_mutex_destroy(&lt->mu);
    free(lt->slots);
}

static int lthread_open(struct lthread *lt)
{
    memset(lt, 0, sizeof *lt);
    pthread_mutex_init(&lt->mu, NULL);
    lt->epfd = epoll_create1(EPOLL_CLOEXEC);
    lt->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lt->evfd};
    if (lt->epfd < 0 || lt->evfd < 0 || epoll_ctl(lt->epfd, EPOLL_CTL_ADD, lt->evfd, &ev) != 0) {
        int e = errno;
        lthread_close(lt);
        errno = e;
        return -1;
    }
    return 0;
}

static void stop_threads(int n)
{
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&lp.t[i].mu);
        lp.t[i].stopping = 1;
        pthread_mutex_unlock(&lp.t[i].mu);
        kick(&lp.t[i]);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(lp.t[i].thread, NULL);
        lthread_close(&lp.t[i]);
    }
}

int loop_start(int nthreads)
{
    if (atomic_load(&lp.running)) {
        errno = EALREADY;
        return -1;
    }
    if (nthreads < 1)
        nthreads = 1;
    lp.t = calloc((size_t)nthreads, sizeof *lp.t);
    if (!lp.t)
        return -1;
    int started = 0, err = 0;
    for (; started < nthreads; started++) {
        struct lthread *lt = &lp.t[started];
        if (lthread_open(lt) != 0) {
            err = errno;
            break;
        }
        pthread_attr_t attr;
        err = thread_stack_attr(&attr, LOOP_STACK, 0);
        if (err == 0) {
            err = pthread_create(&lt->thread, &attr, loop_main, lt);
            pthread_attr_destroy(&attr);
        }
        if (err != 0) {
            lthread_close(lt);
            break;
        }
    }
    if (err != 0) {
        stop_threads(started);
        free(lp.t);
        lp.t = NULL;
        errno = err;
        return -1;
    }
    lp.n = nthreads;
    atomic_store(&lp.next, 0);
    atomic_store(&lp.running, 1);
    return 0;
}

void loop_stop(void)
{
    if (!atomic_exchange(&lp.running, 0))
        return;
    stop_threads(lp.n);
    free(lp.t);
    lp.t = NULL;
    lp.n = 0;
}

static int spawn(void (*fn)(void *arg), void *arg, int shielded)
{
    if (!atomic_load(&lp.running))
        return -1;
    struct lthread *lt = &lp.t[atomic_fetch_add(&lp.next, 1) % (unsigned)lp.n];
    struct task *t = calloc(1, sizeof *t);
    if (!t)
        return -1;
    t->lt = lt;
    t->fn = fn;
    t->arg = arg;
    t->shielded = shielded;
    struct fiber_host host = {host_suspend, host_resume, t};
    t->f = fiber_new(task_main, &host, t);
    if (!t->f) {
        free(t);
        return -1;
    }
    pthread_mutex_lock(&lt->mu);
    int refused = lt->stopping;
    if (!refused)
        enqueue_locked(lt, t);
    pthread_mutex_unlock(&lt->mu);
    if (refused) {
        fiber_free(t->f);
        free(t);
        return -1;
    }
    kick(lt);
    return 0;
}

int loop_spawn(void (*fn)(void *arg), void *arg)
{
    return spawn(fn, arg, 0);
}

int loop_spawn_shielded(void (*fn)(void *arg), void *arg)
{
    return spawn(fn, arg, 1);
}

int loop_on_fiber(void)
{
    return self && fiber_current();
}

int loop_threads(void)
{
    return atomic_load(&lp.running) ? lp.n : 0;
}
