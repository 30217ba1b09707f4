/* fd_write — writes a whole iovec array to a non-blocking descriptor, for
 * the transports that write to a peer who may stop reading (a WebSocket,
 * stdio's stdout).
 *
 * It loops over short writes and EINTR; when the descriptor is full it asks
 * the caller's wait function, which knows the transport's deadline and
 * whatever else may end the wait (a stop signal), whether to go on. So the
 * deadline policy stays with each transport and the write loop is written
 * once. Sockets are written with sendmsg(MSG_NOSIGNAL), anything else with
 * writev; SIGPIPE is ignored process-wide anyway. */
#ifndef MCPD_FD_WRITE_H
#define MCPD_FD_WRITE_H

#include <sys/uio.h>

/* Called when fd would block: 0 to try again (fd is writable, or worth
 * another look), -1 to give up. */
typedef int (*fd_write_wait_fn)(void *ud);

/* Writes everything in iov[0..n) (advancing the array, which it modifies).
 * Returns 0, or -1 on a write error or when wait gave up; errno tells
 * which (ETIMEDOUT for the latter unless wait set another). */
int fd_write_all(int fd, int is_socket, struct iovec *iov, int n, fd_write_wait_fn wait, void *ud);

#endif
