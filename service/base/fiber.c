/* fiber — see fiber.h. Stacks from mmap above a guard; finished
 * fibers kept for reuse; one timer thread for parks with a deadline. On
 * x86-64 a switch saves the callee-saved registers and swaps stack
 * pointers (a few instructions; ucontext's swapcontext also saves the
 * signal mask with a system call, and under AddressSanitizer prints a
 * warning on stderr); elsewhere, ucontext. */
#include "fiber.h"
#include "clock.h"
#include "lock_check.h"
#include "log.h"
#include "thread_stack.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define FIBER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define FIBER_TSAN 1
#endif

/* A handler's deepest path is an inline commit inside SQLite; the
 * sanitizers' frames are several times larger. Untouched pages cost
 * nothing. */
#if defined(FIBER_ASAN) || defined(FIBER_TSAN)
#define STACK_SIZE (1024 * 1024)
#else
#define STACK_SIZE (256 * 1024)
#endif
#define FIBERS_KEPT 64
/* Below each stack, address space that faults on any access. One page
 * would not do: a frame that moves the stack pointer more than a page at
 * once can step over it into whatever lies below (another fiber's stack or
 * a thread's: mmap places them side by side) and write there without a
 * fault. mcpd's own code is built with -fstack-clash-protection, whose
 * probes touch every page of a large frame in order; the libraries it
 * calls may not be, and a frame of theirs smaller than this guard faults
 * in it. It costs no memory, and it is one mapping whatever its size. */
#define GUARD_SIZE STACK_GUARD_SIZE

/* ---- contexts ---- */

#if defined(__x86_64__)
struct context {
    void *sp;
};

/* Pushes rbp, rbx, r12-r15 on the current stack, stores the stack pointer
 * in *from, loads `to` and pops the same registers from there: the System
 * V callee-saved set, so the caller sees a normal call return. */
void mcpd_fiber_swap(void **from, void *to);
__asm__(".text\n"
        ".globl mcpd_fiber_swap\n"
        ".hidden mcpd_fiber_swap\n"
        ".type mcpd_fiber_swap,@function\n"
        "mcpd_fiber_swap:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size mcpd_fiber_swap,.-mcpd_fiber_swap\n");

/* A stack whose first switch "returns" into start, aligned as if start had
 * been called (rsp = 8 mod 16 on entry). */
static int context_make(struct context *c, char *stack, size_t size, void (*start)(void))
{
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    void **sp = (void **)(top - 64);
    for (int i = 0; i < 6; i++)
        sp[i] = NULL; /* r15 .. rbp */
    sp[6] = (void *)(uintptr_t)start;
    sp[7] = NULL;
    c->sp = sp;
    return 0;
}

static void context_swap(struct context *from, struct context *to)
{
    mcpd_fiber_swap(&from->sp, to->sp);
}
#else
struct context {
    ucontext_t uc;
};

/* getcontext returns twice, which would make a caller's locals suspect;
 * here there are none. */
__attribute__((noinline)) static int context_make(struct context *c, char *stack, size_t size,
                                                  void (*start)(void))
{
    if (getcontext(&c->uc) != 0)
        return -1;
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = NULL;
    makecontext(&c->uc, start, 0);
    return 0;
}

static void context_swap(struct context *from, struct context *to)
{
    swapcontext(&from->uc, &to->uc);
}
#endif

struct fiber {
    struct context ctx, host_ctx;
    char *stack; /* STACK_SIZE bytes above the guard */
    void (*fn)(void *);
    void *arg;
    struct fiber_host host;
    pthread_mutex_t mu;
    int woken;     /* a wake no park has consumed yet */
    int parked;    /* suspended by its host: the next wake resumes it */
    int cancelled; /* parks return ECANCELED */
    int outlast;   /* in fiber_park_outlast: suspended even when cancelled */
    int done;      /* fn returned (written and read on the host's thread) */
    int64_t deadline;
    size_t heap_at; /* 1 + its index in the timer heap; 0 when not there */
    int locks;      /* lock_check's count of the side not running */
#ifdef FIBER_ASAN
    void *asan_fake;
    const void *host_bottom;
    size_t host_size;
#endif
#ifdef FIBER_TSAN
    void *tsan_fiber, *tsan_host;
#endif
};

static _Thread_local struct fiber *running;
static _Thread_local int nonblocking;

/* ---- stacks ---- */

/* GUARD_SIZE, whole pages. */
static size_t guard_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    size_t page = p > 0 ? (size_t)p : 4096;
    return (GUARD_SIZE + page - 1) / page * page;
}

static char *stack_new(void)
{
    size_t guard = guard_size();
    char *m = mmap(NULL, STACK_SIZE + guard, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    if (mprotect(m, guard, PROT_NONE) != 0) {
        munmap(m, STACK_SIZE + guard);
        return NULL;
    }
    return m + guard;
}

static void stack_free(char *s)
{
    size_t guard = guard_size();
    munmap(s - guard, STACK_SIZE + guard);
}

/* Finished fibers, stack and all, for the next request: a fiber per
 * request would otherwise cost an mmap, a getcontext (a system call) and
 * a zeroed 2 KiB allocation each time. */
static struct {
    pthread_mutex_t mu;
    struct fiber *kept[FIBERS_KEPT];
    int n;
} spare = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ---- deadlines: a min-heap served by one thread ---- */

/* Every fiber made holds a slot in the heap (cap >= fibers), and the
 * thread is started before the first fiber exists: a park never allocates
 * and never finds no thread to wake it. When either cannot be had, making
 * the fiber fails (its request is refused) instead of a park with a
 * deadline returning at once and its caller spinning until that deadline. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct fiber **heap;
    size_t n, cap, fibers;
    int cv_ready, started;
} timers = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void heap_set(size_t i, struct fiber *f)
{
    timers.heap[i] = f;
    f->heap_at = i + 1;
}

static void heap_up(size_t i)
{
    struct fiber *f = timers.heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (timers.heap[parent]->deadline <= f->deadline)
            break;
        heap_set(i, timers.heap[parent]);
        i = parent;
    }
    heap_set(i, f);
}

static void heap_down(size_t i)
{
    struct fiber *f = timers.heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= timers.n)
            break;
        if (c + 1 < timers.n && timers.heap[c + 1]->deadline < timers.heap[c]->deadline)
            c++;
        if (f->deadline <= timers.heap[c]->deadline)
            break;
        heap_set(i, timers.heap[c]);
        i = c;
    }
    heap_set(i, f);
}

static void heap_remove(struct fiber *f)
{
    size_t i = f->heap_at - 1;
    f->heap_at = 0;
    struct fiber *last = timers.heap[--timers.n];
    if (last == f)
        return;
    heap_set(i, last);
    heap_up(i);
    heap_down(last->heap_at - 1);
}

static void *timer_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "mcpd-fiber-time");
    pthread_mutex_lock(&timers.mu);
    for (;;) {
        if (!timers.n) {
            pthread_cond_wait(&timers.cv, &timers.mu);
            continue;
        }
        struct fiber *f = timers.heap[0];
        if (f->deadline <= clock_mono_ms()) {
            heap_remove(f);
            fiber_wake(f); /* f cannot be freed meanwhile: it leaves the heap under this lock */
            continue;
        }
        clock_cond_wait_until(&timers.cv, &timers.mu, f->deadline);
    }
    return NULL;
}

/* Under timers.mu. 0, or -1 when the thread cannot be started (tried
 * again for the next fiber). */
static int timers_start_locked(void)
{
    if (timers.started)
        return 0;
    if (!timers.cv_ready) {
        clock_cond_init(&timers.cv);
        timers.cv_ready = 1;
    }
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    timers.started = pthread_create(&t, &attr, timer_main, NULL) == 0;
    pthread_attr_destroy(&attr);
    return timers.started ? 0 : -1;
}

/* A new fiber's slot in the heap: 0, or -1 (no memory, or no thread). */
static int timers_reserve(void)
{
    pthread_mutex_lock(&timers.mu);
    int rc = timers_start_locked();
    if (rc == 0 && timers.fibers == timers.cap) {
        size_t cap = timers.cap ? timers.cap * 2 : 64;
        struct fiber **h =
            cap <= SIZE_MAX / sizeof *h ? realloc(timers.heap, cap * sizeof *h) : NULL;
        if (h) {
            timers.heap = h;
            timers.cap = cap;
        } else {
            rc = -1;
        }
    }
    if (rc == 0)
        timers.fibers++;
    pthread_mutex_unlock(&timers.mu);
    return rc;
}

static void timers_release(void)
{
    pthread_mutex_lock(&timers.mu);
    timers.fibers--;
    pthread_mutex_unlock(&timers.mu);
}

/* f is in the heap at most once, and has its slot: no allocation here. */
static void timer_add(struct fiber *f, int64_t deadline)
{
    pthread_mutex_lock(&timers.mu);
    f->deadline = deadline;
    heap_set(timers.n++, f);
    heap_up(timers.n - 1);
    if (timers.heap[0] == f)
        pthread_cond_signal(&timers.cv);
    pthread_mutex_unlock(&timers.mu);
}

static void timer_remove(struct fiber *f)
{
    pthread_mutex_lock(&timers.mu);
    if (f->heap_at)
        heap_remove(f);
    pthread_mutex_unlock(&timers.mu);
}

/* ---- switching ---- */

static void switch_to_fiber(struct fiber *f)
{
    lock_check_swap(&f->locks);
#ifdef FIBER_TSAN
    f->tsan_host = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(f->tsan_fiber, 0);
#endif
#ifdef FIBER_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, f->stack, STACK_SIZE);
#endif
    context_swap(&f->host_ctx, &f->ctx);
#ifdef FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

static void switch_to_host(struct fiber *f)
{
    lock_check_park(f->done ? "ends" : "parks");
    lock_check_swap(&f->locks);
#ifdef FIBER_TSAN
    __tsan_switch_to_fiber(f->tsan_host, 0);
#endif
#ifdef FIBER_ASAN
    /* A finished fiber's fake stack goes with it. */
    __sanitizer_start_switch_fiber(f->done ? NULL : &f->asan_fake, f->host_bottom, f->host_size);
#endif
    context_swap(&f->ctx, &f->host_ctx);
#ifdef FIBER_ASAN
    __sanitizer_finish_switch_fiber(f->asan_fake, &f->host_bottom, &f->host_size);
#endif
}

/* A fiber's first frame: fiber_run has set `running` to it. */
static void entry(void)
{
    struct fiber *f = running;
#ifdef FIBER_ASAN
    __sanitizer_finish_switch_fiber(NULL, &f->host_bottom, &f->host_size);
#endif
    f->fn(f->arg);
    f->done = 1;
    switch_to_host(f);
}

/* ---- the API ---- */

static struct fiber *fiber_make(void)
{
    struct fiber *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->stack = stack_new();
    if (!f->stack) {
        free(f);
        return NULL;
    }
    if (timers_reserve() != 0) {
        stack_free(f->stack);
        free(f);
        return NULL;
    }
    pthread_mutex_init(&f->mu, NULL);
#ifdef FIBER_TSAN
    f->tsan_fiber = __tsan_create_fiber(0);
#endif
    return f;
}

static void fiber_destroy(struct fiber *f)
{
#ifdef FIBER_TSAN
    __tsan_destroy_fiber(f->tsan_fiber);
#endif
    pthread_mutex_destroy(&f->mu);
    stack_free(f->stack);
    free(f);
    timers_release();
}

struct fiber *fiber_new(void (*fn)(void *arg), const struct fiber_host *host, void *arg)
{
    pthread_mutex_lock(&spare.mu);
    struct fiber *f = spare.n ? spare.kept[--spare.n] : NULL;
    pthread_mutex_unlock(&spare.mu);
    if (!f && !(f = fiber_make()))
        return NULL;
    f->fn = fn;
    f->arg = arg;
    f->host = *host;
    f->woken = f->parked = f->cancelled = f->done = 0;
    f->heap_at = 0;
    if (context_make(&f->ctx, f->stack, STACK_SIZE, entry) != 0) {
        fiber_destroy(f);
        return NULL;
    }
    return f;
}

void fiber_free(struct fiber *f)
{
    if (!f)
        return;
    /* A waker still inside fiber_wake holds the lock. */
    pthread_mutex_lock(&f->mu);
    pthread_mutex_unlock(&f->mu);
    timer_remove(f);
    pthread_mutex_lock(&spare.mu);
    int kept = spare.n < FIBERS_KEPT;
    if (kept)
        spare.kept[spare.n++] = f;
    pthread_mutex_unlock(&spare.mu);
    if (!kept)
        fiber_destroy(f);
}

enum fiber_state fiber_run(struct fiber *f)
{
    for (;;) {
        struct fiber *outer = running;
        running = f;
        switch_to_fiber(f);
        running = outer;
        if (f->done)
            return FIBER_DONE;
        pthread_mutex_lock(&f->mu);
        if (f->woken || (f->cancelled && !f->outlast)) {
            /* Woken while it was switching out: straight back in. */
            pthread_mutex_unlock(&f->mu);
            continue;
        }
        f->parked = 1;
        f->host.suspend(f->host.cookie);
        pthread_mutex_unlock(&f->mu);
        return FIBER_PARKED;
    }
}

struct fiber *fiber_current(void)
{
    return running;
}

int fiber_park(const int *until_set, int64_t deadline_mono_ms)
{
    struct fiber *f = running;
    pthread_mutex_lock(&f->mu);
    if (until_set && *until_set) {
        pthread_mutex_unlock(&f->mu);
        return 1;
    }
    if (f->cancelled) {
        pthread_mutex_unlock(&f->mu);
        return ECANCELED;
    }
    if (f->woken) {
        f->woken = 0;
        pthread_mutex_unlock(&f->mu);
        return 0;
    }
    pthread_mutex_unlock(&f->mu);
    if (deadline_mono_ms >= 0)
        timer_add(f, deadline_mono_ms);
    switch_to_host(f);
    if (deadline_mono_ms >= 0)
        timer_remove(f);
    pthread_mutex_lock(&f->mu);
    f->woken = 0;
    pthread_mutex_unlock(&f->mu);
    return 0;
}

void fiber_park_outlast(void)
{
    struct fiber *f = running;
    pthread_mutex_lock(&f->mu);
    if (f->woken) {
        f->woken = 0;
        pthread_mutex_unlock(&f->mu);
        return;
    }
    f->outlast = 1;
    pthread_mutex_unlock(&f->mu);
    switch_to_host(f);
    pthread_mutex_lock(&f->mu);
    f->woken = 0;
    f->outlast = 0;
    pthread_mutex_unlock(&f->mu);
}

/* Under f->mu. */
static void wake_locked(struct fiber *f)
{
    if (f->parked) {
        f->parked = 0;
        f->host.resume(f->host.cookie);
    } else {
        f->woken = 1;
    }
}

void fiber_wake(struct fiber *f)
{
    pthread_mutex_lock(&f->mu);
    wake_locked(f);
    pthread_mutex_unlock(&f->mu);
}

void fiber_wake_set(struct fiber *f, int *flag)
{
    pthread_mutex_lock(&f->mu);
    *flag = 1;
    wake_locked(f);
    pthread_mutex_unlock(&f->mu);
}

void fiber_cancel(struct fiber *f)
{
    pthread_mutex_lock(&f->mu);
    f->cancelled = 1;
    wake_locked(f);
    pthread_mutex_unlock(&f->mu);
}

void fiber_sleep_ms(int64_t ms)
{
    int64_t deadline = clock_mono_ms() + ms;
    if (!running) {
        fiber_warn_if_blocking("a sleep");
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        return;
    }
    while (clock_mono_ms() < deadline && fiber_park(NULL, deadline) == 0)
        ;
}

int fiber_cancelled(struct fiber *f)
{
    pthread_mutex_lock(&f->mu);
    int c = f->cancelled;
    pthread_mutex_unlock(&f->mu);
    return c;
}

void fiber_thread_nonblocking(void)
{
    nonblocking = 1;
}

void fiber_warn_if_blocking(const char *what)
{
    static atomic_int warned;
    if (!nonblocking || running || atomic_fetch_add(&warned, 1) >= 8)
        return;
    log_event(LOG_WARN, NULL, "blocking_wait",
              "%s would block a connection pool thread; every connection it serves waits", what);
}
