/* sock_io — the two socket waits the stream transports (WebSocket, raw
 * TCP) share; both run on a loop fiber.
 *
 * sock_io_write writes a whole iovec array to a non-blocking socket
 * (fd_write_all). When the socket is full the fiber parks until the peer
 * reads, the connection is marked dead, or the deadline passes; it looks
 * at the dead flag every SOCK_IO_TICK_MS meanwhile. Its loop thread serves
 * the other connections. What a timeout is logged as, and what a failed
 * write does to the connection, stay with the caller.
 *
 * sock_io_linger is the end after a last message (a goodbye, a close
 * frame): it half-closes and reads (and drops) what the peer still sends
 * until the peer closes too or the time passes, because closing with
 * unread bytes makes the kernel send a reset, which can destroy the last
 * message before the peer reads it. */
#ifndef MCPD_SOCK_IO_H
#define MCPD_SOCK_IO_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

#define SOCK_IO_TICK_MS 1000

/* sock_io_write's result when the peer did not read within timeout_ms. */
#define SOCK_IO_TIMEOUT 1

/* Writes iov[0..n) (modifying the array) within timeout_ms. Returns 0,
 * SOCK_IO_TIMEOUT, or -1 (a write error, *dead set, or the loop is
 * stopping / not on a loop fiber). */
int sock_io_write(int fd, struct iovec *iov, int n, int64_t timeout_ms, atomic_int *dead);

/* Shuts down writing on fd, then drains it for up to ms. */
void sock_io_linger(int fd, int64_t ms);

#endif
