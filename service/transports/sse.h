/* sse — Server-Sent Events framing into a growable output buffer.
 *
 * A transport writes events, comments and retry hints into an sse_buf and
 * drains it into the socket in whatever pieces the HTTP server asks for.
 * Data containing line breaks is split into several data: lines, so any
 * payload is framed correctly. */
#ifndef MCPD_SSE_H
#define MCPD_SSE_H

#include <stddef.h>
#include <stdint.h>

struct sse_buf {
    char *data;
    size_t len; /* bytes written */
    size_t off; /* bytes already drained */
    size_t cap;
};

void sse_buf_free(struct sse_buf *b);
/* Returns 0, or -1 when out of memory or when id holds a CR or LF. id and
 * retry_ms are optional (NULL, negative). Line breaks in data (LF, CR,
 * CRLF) start a new data: line, so a reader gets data back with LFs. */
int sse_event(struct sse_buf *b, const char *id, int64_t retry_ms, const char *data, size_t len);
/* Names the type of the next event (an "event:" line); call it right
 * before sse_event. Without it an event is of type "message". */
int sse_event_type(struct sse_buf *b, const char *type);
/* A comment line; -1 (nothing written) if text holds CR or LF. */
int sse_comment(struct sse_buf *b, const char *text);
/* Moves up to max pending bytes into out; returns how many. */
size_t sse_drain(struct sse_buf *b, char *out, size_t max);
size_t sse_pending(const struct sse_buf *b);

#endif
