/* test_loop — the event-loop threads (service/base/loop.c): spawned fibers
 * run, in spawn order on one thread; woken fibers run in wake order; a
 * fiber waits on a socketpair for reading and another on the same socket
 * for writing, on the same thread; deadlines, wakes by others and
 * loop_stop's cancel end waits with what they are, but a mutex wait parks
 * through it (its holder may be a fiber of the same thread); a regular file
 * cannot be waited on; many fibers share two threads. */
#include "check.h"
#include "clock.h"
#include "fcond.h"
#include "fiber.h"
#include "loop.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits (bounded) until *v reaches want. */
static int wait_count(atomic_int *v, int want, int ms)
{
    int64_t deadline = clock_mono_ms() + ms;
    while (atomic_load(v) < want && clock_mono_ms() < deadline)
        sleep_ms(2);
    return atomic_load(v);
}

/* ---- order ---- */

#define N_ORDER 8

static struct {
    pthread_mutex_t mu;
    struct fcond cv;
    int go[N_ORDER];
    int log[2 * N_ORDER], n;
    atomic_int parked, done;
} ord = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void ord_note(int i)
{
    pthread_mutex_lock(&ord.mu);
    ord.log[ord.n++] = i;
    pthread_mutex_unlock(&ord.mu);
}

static void ord_fiber(void *arg)
{
    int i = (int)(intptr_t)arg;
    ord_note(i);
    pthread_mutex_lock(&ord.mu);
    atomic_fetch_add(&ord.parked, 1);
    while (!ord.go[i])
        fcond_wait_until(&ord.cv, &ord.mu, -1);
    pthread_mutex_unlock(&ord.mu);
    ord_note(i);
    atomic_fetch_add(&ord.done, 1);
}

/* One fiber per waiter, each with its own condition, so each wake is one
 * resume: the order of resumes is the order of wakes. */
static struct {
    pthread_mutex_t mu;
    struct fcond cv[N_ORDER];
} own = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void own_fiber(void *arg)
{
    int i = (int)(intptr_t)arg;
    ord_note(i);
    pthread_mutex_lock(&own.mu);
    atomic_fetch_add(&ord.parked, 1);
    while (!ord.go[i])
        fcond_wait_until(&own.cv[i], &own.mu, -1);
    pthread_mutex_unlock(&own.mu);
    ord_note(i);
    atomic_fetch_add(&ord.done, 1);
}

static void test_order(void)
{
    CHECK_INT(loop_start(1), 0);
    CHECK_INT(loop_threads(), 1);
    for (int i = 0; i < N_ORDER; i++)
        fcond_init(&own.cv[i]);
    for (int i = 0; i < N_ORDER; i++)
        CHECK_INT(loop_spawn(own_fiber, (void *)(intptr_t)i), 0);
    CHECK_INT(wait_count(&ord.parked, N_ORDER, 5000), N_ORDER);
    /* Spawned fibers first ran in spawn order. */
    for (int i = 0; i < N_ORDER; i++)
        CHECK_INT(ord.log[i], i);
    /* Woken in this order, one at a time, they resume in it. */
    const int wake[N_ORDER] = {5, 2, 7, 0, 3, 6, 1, 4};
    pthread_mutex_lock(&own.mu);
    for (int k = 0; k < N_ORDER; k++) {
        ord.go[wake[k]] = 1;
        fcond_signal(&own.cv[wake[k]]);
    }
    pthread_mutex_unlock(&own.mu);
    CHECK_INT(wait_count(&ord.done, N_ORDER, 5000), N_ORDER);
    for (int k = 0; k < N_ORDER; k++)
        CHECK_INT(ord.log[N_ORDER + k], wake[k]);
    loop_stop();
    CHECK_INT(loop_threads(), 0);
    for (int i = 0; i < N_ORDER; i++)
        fcond_destroy(&own.cv[i]);
}

/* ---- descriptors ---- */

static struct {
    int fd;
    atomic_int reader_rc, writer_rc, read_bytes, filled, done;
    struct fiber *_Atomic waiter;
} io;

static void reader_fiber(void *arg)
{
    (void)arg;
    char buf[64];
    int rc = loop_wait_fd(io.fd, EPOLLIN, clock_mono_ms() + 10000);
    atomic_store(&io.reader_rc, rc);
    ssize_t n = read(io.fd, buf, sizeof buf);
    atomic_store(&io.read_bytes, (int)n);
    atomic_fetch_add(&io.done, 1);
}

/* Fills the socket until it would block, then waits to write. */
static void writer_fiber(void *arg)
{
    (void)arg;
    static char chunk[4096];
    while (write(io.fd, chunk, sizeof chunk) > 0)
        ;
    atomic_store(&io.filled, errno == EAGAIN || errno == EWOULDBLOCK);
    int rc = loop_wait_fd(io.fd, EPOLLOUT, clock_mono_ms() + 10000);
    atomic_store(&io.writer_rc, rc);
    atomic_fetch_add(&io.done, 1);
}

static void test_fd_wait(void)
{
    int sv[2];
    CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    io.fd = sv[0];
    atomic_store(&io.reader_rc, -1);
    atomic_store(&io.writer_rc, -1);
    atomic_store(&io.done, 0);
    CHECK_INT(loop_start(1), 0); /* both fibers on one thread, one descriptor */
    CHECK_INT(loop_spawn(reader_fiber, NULL), 0);
    CHECK_INT(loop_spawn(writer_fiber, NULL), 0);
    CHECK_INT(wait_count(&io.filled, 1, 5000), 1);
    sleep_ms(50);
    CHECK_INT(atomic_load(&io.done), 0); /* both wait */
    /* Draining the peer wakes the writer only. */
    char sink[65536];
    int drained = 0;
    while (read(sv[1], sink, sizeof sink) > 0)
        drained = 1;
    CHECK(drained);
    CHECK_INT(wait_count(&io.done, 1, 5000), 1);
    CHECK_INT(atomic_load(&io.writer_rc), 0);
    CHECK_INT(atomic_load(&io.reader_rc), -1);
    /* Writing to it wakes the reader, which reads what was written. */
    CHECK_INT((int)write(sv[1], "hello", 5), 5);
    CHECK_INT(wait_count(&io.done, 2, 5000), 2);
    CHECK_INT(atomic_load(&io.reader_rc), 0);
    CHECK_INT(atomic_load(&io.read_bytes), 5);
    loop_stop();
    close(sv[0]);
    close(sv[1]);
}

static void deadline_fiber(void *arg)
{
    int64_t *elapsed = arg;
    int64_t t0 = clock_mono_ms();
    int rc = loop_wait_fd(io.fd, EPOLLIN, t0 + 100);
    *elapsed = clock_mono_ms() - t0;
    atomic_store(&io.reader_rc, rc);
    atomic_fetch_add(&io.done, 1);
}

static void woken_fiber(void *arg)
{
    (void)arg;
    atomic_store(&io.waiter, fiber_current());
    int rc = loop_wait_fd(io.fd, EPOLLIN, -1);
    atomic_store(&io.waiter, NULL);
    atomic_store(&io.reader_rc, rc);
    atomic_fetch_add(&io.done, 1);
}

static void file_fiber(void *arg)
{
    atomic_store(&io.reader_rc, loop_wait_fd(*(int *)arg, EPOLLIN, -1));
    atomic_fetch_add(&io.done, 1);
}

static void test_deadline_wake_cancel(void)
{
    int sv[2];
    CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    io.fd = sv[0];
    CHECK_INT(loop_start(2), 0);

    /* A deadline. */
    int64_t elapsed = 0;
    atomic_store(&io.done, 0);
    CHECK_INT(loop_spawn(deadline_fiber, &elapsed), 0);
    CHECK_INT(wait_count(&io.done, 1, 5000), 1);
    CHECK_INT(atomic_load(&io.reader_rc), ETIMEDOUT);
    CHECK(elapsed >= 100);

    /* A wake by someone else: EINTR, and the descriptor is let go (a
     * second wait on it works). */
    for (int round = 0; round < 2; round++) {
        atomic_store(&io.done, 0);
        CHECK_INT(loop_spawn(woken_fiber, NULL), 0);
        int64_t deadline = clock_mono_ms() + 5000;
        while (!atomic_load(&io.waiter) && clock_mono_ms() < deadline)
            sleep_ms(2);
        sleep_ms(20);
        struct fiber *f = atomic_load(&io.waiter);
        CHECK(f != NULL);
        if (f)
            fiber_wake(f);
        CHECK_INT(wait_count(&io.done, 1, 5000), 1);
        CHECK_INT(atomic_load(&io.reader_rc), EINTR);
    }

    /* A regular file cannot be polled. */
    char path[] = "/tmp/test_loop_XXXXXX";
    int file = mkstemp(path);
    CHECK(file >= 0);
    unlink(path);
    atomic_store(&io.done, 0);
    CHECK_INT(loop_spawn(file_fiber, &file), 0);
    CHECK_INT(wait_count(&io.done, 1, 5000), 1);
    CHECK_INT(atomic_load(&io.reader_rc), EPERM);
    close(file);

    /* Off a loop fiber. */
    CHECK_INT(loop_wait_fd(sv[0], EPOLLIN, -1), ENOTSUP);
    CHECK(!loop_on_fiber());

    /* loop_stop cancels a fiber that waits without a deadline. */
    atomic_store(&io.done, 0);
    atomic_store(&io.reader_rc, -1);
    CHECK_INT(loop_spawn(woken_fiber, NULL), 0);
    int64_t deadline = clock_mono_ms() + 5000;
    while (!atomic_load(&io.waiter) && clock_mono_ms() < deadline)
        sleep_ms(2);
    loop_stop();
    CHECK_INT(atomic_load(&io.done), 1);
    CHECK_INT(atomic_load(&io.reader_rc), ECANCELED);
    CHECK_INT(loop_spawn(woken_fiber, NULL), -1); /* stopped */
    close(sv[0]);
    close(sv[1]);
}

/* ---- many fibers, two threads ---- */

#define N_MANY 300

static atomic_int many_done, many_on_fiber;

static void many_fiber(void *arg)
{
    int *fds = arg;
    if (loop_on_fiber())
        atomic_fetch_add(&many_on_fiber, 1);
    /* Each waits for its own socket, then sleeps a little: parks of both
     * kinds, interleaved over two threads. */
    char c;
    if (loop_wait_fd(fds[0], EPOLLIN, clock_mono_ms() + 20000) == 0 && read(fds[0], &c, 1) == 1)
        fiber_sleep_ms(5);
    if (write(fds[0], "y", 1) == 1)
        atomic_fetch_add(&many_done, 1);
}

static void test_many(void)
{
    static int pairs[N_MANY][2];
    CHECK_INT(loop_start(2), 0);
    int made = 0;
    for (int i = 0; i < N_MANY; i++) {
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pairs[i]) != 0)
            break;
        made++;
        CHECK_INT(loop_spawn(many_fiber, pairs[i]), 0);
    }
    CHECK_INT(made, N_MANY);
    for (int i = 0; i < made; i++)
        CHECK_INT((int)write(pairs[i][1], "x", 1), 1);
    CHECK_INT(wait_count(&many_done, made, 20000), made);
    CHECK_INT(atomic_load(&many_on_fiber), made);
    int answered = 0;
    for (int i = 0; i < made; i++) {
        char c = 0;
        answered += read(pairs[i][1], &c, 1) == 1 && c == 'y';
        close(pairs[i][0]);
        close(pairs[i][1]);
    }
    CHECK_INT(answered, made);
    loop_stop();
}

/* ---- a mutex wait through loop_stop's cancel ---- */

/* The holder takes the mutex and sleeps (a wait loop_stop's cancel cuts
 * short), then lets go; the waiter, on the same thread and cancelled
 * first (loop_stop cancels the newest fiber first), wants the mutex. A
 * waiter that blocked its thread would hold the holder forever: loop_stop
 * would never return. */
static struct {
    struct fmutex mu;
    atomic_int held, waiting, waiter_got;
} mx = {.mu = FMUTEX_INITIALIZER};

static void mx_holder(void *arg)
{
    (void)arg;
    fmutex_lock(&mx.mu);
    atomic_store(&mx.held, 1);
    fiber_sleep_ms(60000);
    fmutex_unlock(&mx.mu);
}

static void mx_waiter(void *arg)
{
    (void)arg;
    atomic_store(&mx.waiting, 1);
    fmutex_lock(&mx.mu);
    atomic_store(&mx.waiter_got, 1);
    fmutex_unlock(&mx.mu);
}

static atomic_int stopped;

static void *stop_main(void *arg)
{
    (void)arg;
    loop_stop();
    atomic_store(&stopped, 1);
    return NULL;
}

static void test_mutex_through_cancel(void)
{
    CHECK_INT(loop_start(1), 0);
    CHECK_INT(loop_spawn(mx_holder, NULL), 0);
    CHECK_INT(wait_count(&mx.held, 1, 5000), 1);
    CHECK_INT(loop_spawn(mx_waiter, NULL), 0);
    CHECK_INT(wait_count(&mx.waiting, 1, 5000), 1);
    sleep_ms(20); /* the waiter parks on the mutex */
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, stop_main, NULL), 0);
    CHECK_INT(wait_count(&stopped, 1, 10000), 1);
    CHECK_INT(atomic_load(&mx.waiter_got), 1);
    if (!atomic_load(&stopped)) {
        printf("loop_stop hangs: a cancelled mutex wait holds its thread\n");
        check_summary();
        exit(1); /* the loop thread cannot be joined */
    }
    pthread_join(t, NULL);
}

int main(void)
{
    fcond_init(&ord.cv);
    test_order();
    test_fd_wait();
    test_deadline_wake_cancel();
    test_many();
    test_mutex_through_cancel();
    /* ord_fiber is kept for the broadcast case: every waiter of one
     * condition wakes (order unspecified). */
    CHECK_INT(loop_start(2), 0);
    memset(ord.go, 0, sizeof ord.go);
    atomic_store(&ord.parked, 0);
    atomic_store(&ord.done, 0);
    ord.n = 0;
    for (int i = 0; i < N_ORDER; i++)
        CHECK_INT(loop_spawn(ord_fiber, (void *)(intptr_t)i), 0);
    CHECK_INT(wait_count(&ord.parked, N_ORDER, 5000), N_ORDER);
    pthread_mutex_lock(&ord.mu);
    for (int i = 0; i < N_ORDER; i++)
        ord.go[i] = 1;
    fcond_broadcast(&ord.cv);
    pthread_mutex_unlock(&ord.mu);
    CHECK_INT(wait_count(&ord.done, N_ORDER, 5000), N_ORDER);
    loop_stop();
    fcond_destroy(&ord.cv);
    return check_summary();
}
