/* fd_write — see fd_write.h. */
#include "fd_write.h"

#include <errno.h>
#include <sys/socket.h>

int fd_write_all(int fd, int is_socket, struct iovec *iov, int n, fd_write_wait_fn wait, void *ud)
{
    while (n > 0) {
        if (iov->iov_len == 0) {
            iov++;
            n--;
            continue;
        }
        ssize_t w;
        if (is_socket) {
            struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
            w = sendmsg(fd, &mh, MSG_NOSIGNAL);
        } else {
            w = writev(fd, iov, n);
        }
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return -1;
            if (wait(ud) != 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    errno = ETIMEDOUT;
                return -1;
            }
            continue;
        }
        size_t done = (size_t)w;
        while (n > 0 && done >= iov->iov_len) {
            done -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + done;
            iov->iov_len -= done;
        }
    }
    return 0;
}
