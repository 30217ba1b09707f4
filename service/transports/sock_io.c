/* sock_io — see sock_io.h. */
#include "sock_io.h"
#include "clock.h"
#include "fd_write.h"
#include "loop.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>

struct write_wait {
    int fd;
    atomic_int *dead;
    int64_t deadline;
    int timed_out;
};

/* fd_write's wait: the socket is full; park until it is writable, the
 * deadline passes, or (at the next tick) the connection died. */
static int wait_peer(void *ud)
{
    struct write_wait *w = ud;
    int64_t now = clock_mono_ms();
    if (now >= w->deadline) {
        w->timed_out = 1;
        return -1;
    }
    int64_t until = w->deadline - now > SOCK_IO_TICK_MS ? now + SOCK_IO_TICK_MS : w->deadline;
    int rc = loop_wait_fd(w->fd, EPOLLOUT, until);
    if (rc != 0 && rc != ETIMEDOUT && rc != EINTR)
        return -1; /* cancelled (the loop is stopping), or not on a loop fiber */
    return atomic_load(w->dead) ? -1 : 0;
}

int sock_io_write(int fd, struct iovec *iov, int n, int64_t timeout_ms, atomic_int *dead)
{
    struct write_wait w = {fd, dead, clock_mono_ms() + timeout_ms, 0};
    if (fd_write_all(fd, 1, iov, n, wait_peer, &w) == 0)
        return 0;
    return w.timed_out ? SOCK_IO_TIMEOUT : -1;
}

void sock_io_linger(int fd, int64_t ms)
{
    shutdown(fd, SHUT_WR);
    int64_t deadline = clock_mono_ms() + ms;
    char sink[4096];
    for (;;) {
        ssize_t got = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
            break;
        if (got > 0 || errno == EINTR)
            continue;
        int waited = loop_wait_fd(fd, EPOLLIN, deadline);
        if (waited != 0 && waited != EINTR)
            break; /* the deadline, or the loop is stopping */
    }
}
