/* longpoll — long-polling, the pull view of streams (seed 003's HTTP model).
 *
 * A client that cannot keep a streaming response open (a proxy buffers or
 * cuts it) adds "stream": true to any request's params. The core then
 * answers at once with a handle, {stream_id, status:"streaming_started",
 * transport}, and the request's messages go to its stream as usual. The
 * client fetches them with mcpd/poll {stream_id, from_seq, wait_ms,
 * max_chunks}, which waits (without using a CPU) until a chunk at or after
 * from_seq exists, then answers {stream_id, chunks:[{seq, message, end}],
 * has_more, next_seq, state}. The seq is the same cursor SSE event ids and
 * WebSocket chunk notifications carry, so a client resumes any stream the
 * same way on any transport. */
#ifndef MCPD_LONGPOLL_H
#define MCPD_LONGPOLL_H

#include <jansson.h>

struct session;
struct stream;

#define POLL_METHOD "mcpd/poll"
#define POLL_MAX_WAIT_MS 30000
#define POLL_MAX_CHUNKS 1000

/* 1 if the request's params opt in with "stream": true. */
int poll_opted_in(const json_t *params);
/* The immediate answer to an opted-in request. New reference. */
json_t *poll_ack(json_t *id, const struct stream *st, const char *transport);
/* The mcpd/chunk notification carrying one stored message of an opted-in
 * stream, for push transports. msg is the stored JSON text. New reference,
 * or NULL if msg does not parse. */
json_t *poll_chunk_notification(const struct stream *st, long long seq, const char *msg, size_t len,
                                int end);

/* Serves one mcpd/poll request of session s (blocks up to its wait_ms).
 * Returns the JSON-RPC response to send (new reference). */
json_t *poll_serve(struct session *s, json_t *id, json_t *params, const char *transport);

#endif
