/* stdio_side — the client's end of the bridge: JSON-RPC messages read from
 * stdin and written to stdout, framed by service/base/stdio_frame exactly
 * as `mcpd --stdio` frames them (NDJSON or Content-Length, detected from
 * the first bytes; replies in the same framing).
 *
 * Reading is driven by the caller's poll loop: when stdin is readable,
 * stdio_side_read does one read and hands each complete message (or
 * framing error) to the callbacks. Writing is blocking, one writev per
 * message, so a message is never interleaved with another; stdout carries
 * nothing else.
 *
 * A message that follows a notification waits until the client has read
 * it (note_gate.h: the official SDK drops progress read together with its
 * result).
 *
 * Ownership: the struct is the caller's (stdio_side_new/_free); message
 * data passed to callbacks is borrowed for the duration of the call. */
#ifndef MCP_BRIDGE_STDIO_SIDE_H
#define MCP_BRIDGE_STDIO_SIDE_H

#include <jansson.h>
#include <stddef.h>

struct stdio_side;

struct stdio_side_handler {
    void (*message)(void *ud, const char *data, size_t len);
    /* A message the bridge cannot take (bad framing, too large): answer
     * with this code and message, and this id (borrowed; NULL: none could
     * be read, answer with id null). */
    void (*frame_error)(void *ud, const json_t *id, int code, const char *message);
    void *ud;
};

struct stdio_side *stdio_side_new(int in_fd, int out_fd, size_t max_message);
void stdio_side_free(struct stdio_side *s);

/* One read from stdin. Returns 0 when more may come, 1 at EOF (after the
 * last message, if any, was handed over), -1 on a read error (treated as
 * EOF by the caller). */
int stdio_side_read(struct stdio_side *s, const struct stdio_side_handler *h);

/* Writes one message in the detected framing. Returns 0, or -1 when stdout
 * is gone (the client exited). */
int stdio_side_write(struct stdio_side *s, const char *json, size_t len);

#endif
