/* child — an MCP server running as a child process, spoken to over stdio.
 *
 * child_spawn forks and execs the command with its stdin, stdout and stderr
 * on pipes (close-on-exec everywhere else, so no descriptor leaks into it),
 * in its own process group, with PR_SET_PDEATHSIG so it dies with mcpd even
 * when mcpd is killed with SIGKILL. A reader decodes what the child writes
 * on stdout (NDJSON, or Content-Length frames, detected as for any stdio
 * peer) and hands each message to on_message as soon as it is complete;
 * another hands each stderr line to on_stderr. Both readers are fibers on
 * the event loop (loop.h) over non-blocking pipes, so a child costs no
 * thread; child_spawn fails when the loop is not running. A message
 * the decoder has to drop (larger than max_message, badly framed) goes to
 * on_dropped instead, once, with what could be read of it as it streamed
 * past (see struct child_dropped). When stdout closes, the child is reaped
 * (never left a zombie) and on_exit gets its wait status, exactly once.
 *
 * child_send writes one message as an NDJSON line; it is safe from any
 * thread or fiber. child_stop ends the process (SIGTERM to its group,
 * SIGKILL after the grace period), waits for the readers, and drops the
 * reference child_spawn returned. On a fiber both park rather than block
 * (child_stop on a loop fiber should be one loop_stop does not cancel:
 * loop_spawn_shielded). The callbacks run on the child's reader fibers and
 * must not call child_stop on the same child.
 *
 * Ownership: the struct is reference counted. child_spawn's caller owns one
 * reference and gives it up through child_stop (exactly once). Any other
 * thread that got the pointer from a shared place (under the lock that
 * guards that place) takes its own with child_hold before using it outside
 * that lock, and drops it with child_release; the last release frees the
 * memory. A held child may be stopped meanwhile: child_send then fails with
 * -1 and touches nothing freed. child_release never blocks, so it is safe
 * under any lock and on the child's own readers. */
#ifndef MCPD_CHILD_H
#define MCPD_CHILD_H

#include "stdio_frame.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct child;

struct child_spec {
    char *const *argv; /* argv[0] is looked up in PATH */
    char *const *env;  /* extra NAME=VALUE entries (NULL-terminated), or NULL */
    const char *cwd;   /* or NULL */
    size_t max_message;
};

/* A message of the child's that was dropped without being decoded. It is
 * never held in memory (it may be far larger than max_message), so what
 * it was about is read from it as it goes by: its top-level "id" member
 * and whether it has a top-level "method". So a dropped response can still
 * end the request it answers. It is reported once: when its top-level
 * object closes, or when its line (NDJSON) or its stream ends or the next
 * message begins. A message that never ends is not reported until then. */
struct child_dropped {
    enum stdio_frame_error error;
    /* The raw JSON text of its "id" member (not NUL-terminated), or NULL:
     * none, or longer than any id mcpd gives (128 bytes). */
    const char *id;
    size_t id_len;
    int has_method; /* a request or notification of the child's own, not a response */
};

struct child_ops {
    void (*on_message)(void *arg, const char *msg, size_t len);
    void (*on_dropped)(void *arg, const struct child_dropped *d);
    void (*on_stderr)(void *arg, const char *line, size_t len);
    void (*on_exit)(void *arg, int wait_status);
};

/* Returns the child, or NULL with *err (caller frees). */
struct child *child_spawn(const struct child_spec *spec, const struct child_ops *ops, void *arg,
                          char **err);
/* 0, or -1 when the child's stdin is closed (it exited). */
int child_send(struct child *c, const char *msg, size_t len);
void child_stop(struct child *c, int64_t grace_ms);
/* NULL is a no-op for both. */
void child_hold(struct child *c);
void child_release(struct child *c);

/* "exited with status 3" / "killed by signal 9", for error messages. */
void child_describe_exit(int wait_status, char *out, size_t cap);

#endif
