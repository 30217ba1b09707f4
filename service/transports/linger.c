/* linger — see linger.h. One thread (a ticker, ticker.h), whose tick waits
 * in poll() over at most MAX_LINGERING sockets, woken through a pipe when
 * one is handed over. */
#include "linger.h"
#include "clock.h"
#include "ticker.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* How long a refused connection may take to be written to and drained. */
#define WRITE_MS 2000
#define LINGER_MS 1000
#define MAX_LINGERING 256

struct lingering {
    int fd;
    char *text;
    size_t len, off;
    int64_t deadline; /* of the current phase: writing, then draining */
};

static struct {
    pthread_mutex_t mu;
    struct lingering *q; /* handed over, not yet taken by the thread */
    size_t nq;
    int open; /* takes sockets (under mu): started, not stopping */
    int wake[2];
    /* The thread's (until it is stopped): the sockets it has taken, and
     * what it polls, the wake pipe first. */
    struct lingering live[MAX_LINGERING];
    struct pollfd pf[MAX_LINGERING + 1];
    size_t n;
    struct ticker ticker;
} lg = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = {-1, -1}, .ticker = TICKER_INITIALIZER};

static void finish(struct lingering *l)
{
    close(l->fd);
    free(l->text);
    l->fd = -1;
}

/* Writing done: no more output, drain from now on. */
static void start_drain(struct lingering *l)
{
    shutdown(l->fd, SHUT_WR);
    free(l->text);
    l->text = NULL;
    l->deadline = clock_mono_ms() + LINGER_MS;
}

/* One step on a socket poll() reported ready (or on a deadline). */
static void step(struct lingering *l, int64_t now)
{
    if (now >= l->deadline) {
        finish(l);
        return;
    }
    if (l->text) {
        ssize_t w = send(l->fd, l->text + l->off, l->len - l->off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0)
            l->off += (size_t)w;
        else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            finish(l);
        if (l->fd >= 0 && l->off == l->len)
            start_drain(l);
        return;
    }
    char sink[16384];
    for (;;) {
        ssize_t r = recv(l->fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r > 0)
            continue;
        if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            finish(l);
        return;
    }
}

/* Takes what was handed over, waits in poll() for a socket, the next
 * deadline or a wake, and steps the sockets that are ready. */
static int64_t linger_tick(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lg.mu);
    size_t take = lg.nq < MAX_LINGERING - lg.n ? lg.nq : MAX_LINGERING - lg.n;
    memcpy(lg.live + lg.n, lg.q, take * sizeof *lg.q);
    lg.n += take;
    lg.nq -= take;
    memmove(lg.q, lg.q + take, lg.nq * sizeof *lg.q);
    pthread_mutex_unlock(&lg.mu);
    int64_t now = clock_mono_ms(), next = now + 60000;
    lg.pf[0] = (struct pollfd){.fd = lg.wake[0], .events = POLLIN};
    for (size_t i = 0; i < lg.n; i++) {
        lg.pf[i + 1] =
            (struct pollfd){.fd = lg.live[i].fd, .events = lg.live[i].text ? POLLOUT : POLLIN};
        if (lg.live[i].deadline < next)
            next = lg.live[i].deadline;
    }
    int timeout = next > now ? (int)(next - now) : 0;
    int failed = poll(lg.pf, (nfds_t)lg.n + 1, timeout) < 0 && errno != EINTR;
    if (lg.pf[0].revents) {
        char drop[64];
        while (read(lg.wake[0], drop, sizeof drop) > 0)
            ;
    }
    now = clock_mono_ms();
    size_t kept = 0;
    for (size_t i = 0; i < lg.n; i++) {
        if (lg.pf[i + 1].revents || now >= lg.live[i].deadline)
            step(&lg.live[i], now);
        if (lg.live[i].fd >= 0)
            lg.live[kept++] = lg.live[i];
    }
    lg.n = kept;
    /* poll() has waited. When it cannot (more sockets than RLIMIT_NOFILE,
     * no memory), the ticker waits instead, for the next deadline or a
     * hand-off. */
    return failed ? next : 0;
}

static void linger_wake(void *arg)
{
    (void)arg;
    (void)!write(lg.wake[1], "x", 1);
}

int linger_start(void)
{
    lg.q = calloc(MAX_LINGERING, sizeof *lg.q);
    if (!lg.q || pipe2(lg.wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        free(lg.q);
        lg.q = NULL;
        return -1;
    }
    if (ticker_start(&lg.ticker, &(struct ticker_job){.name = "mcpd-linger",
                                                      .tick = linger_tick,
                                                      .wake = linger_wake}) != 0) {
        close(lg.wake[0]);
        close(lg.wake[1]);
        free(lg.q);
        lg.q = NULL;
        return -1;
    }
    pthread_mutex_lock(&lg.mu);
    lg.open = 1;
    pthread_mutex_unlock(&lg.mu);
    return 0;
}

void linger_stop(void)
{
    pthread_mutex_lock(&lg.mu);
    lg.open = 0;
    pthread_mutex_unlock(&lg.mu);
    if (!ticker_stop(&lg.ticker))
        return;
    for (size_t i = 0; i < lg.n; i++)
        finish(&lg.live[i]);
    lg.n = 0;
    pthread_mutex_lock(&lg.mu);
    for (size_t i = 0; i < lg.nq; i++)
        finish(&lg.q[i]);
    lg.nq = 0;
    pthread_mutex_unlock(&lg.mu);
    close(lg.wake[0]);
    close(lg.wake[1]);
    free(lg.q);
    lg.q = NULL;
}

void linger_hand_off(int fd, const char *text, size_t len)
{
    if (fd < 0)
        return;
    /* Now, while the socket can still be written: libmicrohttpd shuts it
     * for writing when it drops the connection. A refusal fits in any
     * socket buffer but that of a client that reads nothing. */
    while (text && len) {
        ssize_t w = send(fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w <= 0)
            break;
        text += w;
        len -= (size_t)w;
    }
    int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0)
        return;
    struct lingering l = {.fd = dup_fd, .len = len};
    if (text && len) {
        l.text = malloc(len);
        if (l.text)
            memcpy(l.text, text, len);
    }
    pthread_mutex_lock(&lg.mu);
    /* The thread holds at most MAX_LINGERING; so does the queue. */
    int taken = lg.open && lg.nq < MAX_LINGERING;
    if (taken) {
        if (l.text)
            l.deadline = clock_mono_ms() + WRITE_MS;
        else {
            shutdown(dup_fd, SHUT_WR);
            l.deadline = clock_mono_ms() + LINGER_MS;
        }
        lg.q[lg.nq++] = l;
    }
    pthread_mutex_unlock(&lg.mu);
    if (!taken) {
        free(l.text);
        close(dup_fd);
        return;
    }
    ticker_kick(&lg.ticker);
}
