/* stdio_transport — MCP over a pair of file descriptors: `mcpd --stdio`, for clients
 * that spawn their server and talk to its stdin and stdout.
 *
 * The transport only frames: bytes read from in_fd go through the
 * stdio_frame decoder (NDJSON or Content-Length, detected from the first
 * bytes), each message goes to push_receive, and everything push sends
 * back, from any thread, is written to out_fd as one frame in the detected
 * framing. A framing error (bad header, BOM, oversize) is answered with a
 * JSON-RPC error (id null) and reading goes on. Requests run concurrently
 * in the core and their replies go out as they come, so they may be out of
 * order, as JSON-RPC allows.
 *
 * out_fd carries nothing but JSON-RPC; logs go to stderr (log.c). A
 * message after a notification waits until the client has read it
 * (note_gate.h: the official SDK drops progress read with its result).
 *
 * Ending: at EOF on in_fd, requests in flight finish (up to grace_ms), then
 * stdio_serve returns 0. A stop signal does the same without reading
 * further. If out_fd goes away (EPIPE, EBADF) nothing more can be said, so
 * serving ends the same way, without waiting. A client that stops reading
 * out_fd cannot hold the process: writes give up grace_ms after a stop
 * signal or EOF (out_fd is put in non-blocking mode for that while serving,
 * when it is a pipe or socket, and restored on return).
 *
 * (Named stdio_transport, not stdio: service/transports is on the include
 * path, and a stdio.h there would shadow the C library's <stdio.h>.) */
#ifndef MCPD_STDIO_TRANSPORT_H
#define MCPD_STDIO_TRANSPORT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

struct stdio_config {
    size_t max_message; /* largest message accepted (0: STDIO_FRAME_DEFAULT_MAX) */
    int64_t grace_ms;   /* how long requests in flight may take at the end */
};

/* Serves MCP on in_fd/out_fd until EOF or one of `stop` (signals blocked by
 * the caller in every thread) arrives. Needs a started core and event loop (loop.h: the reader
 * and push's writer run there as fibers; the caller's thread only waits). Returns the exit status:
 * 0 on EOF or signal after a graceful finish, 1 when serving could not start (out of memory, no
 * signalfd). */
int stdio_serve(int in_fd, int out_fd, const struct stdio_config *cfg, const sigset_t *stop);

#endif
