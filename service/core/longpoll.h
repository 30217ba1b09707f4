/* longpoll — long-polling, the pull view of streams (seed 003's HTTP model).
 *
 * A client that cannot keep a streaming response open (a proxy buffers or
 * cuts it) adds "stream": true to any request's params. The core then
 * answers at once with a handle, {stream_id, status:"streaming_started",
 * transport}, and the request's messages go to its stream as usual. The
 * client fetches them with mcpd/poll {stream_id, from_seq, wait_ms,
 * max_chunks}, which waits (holding no thread: see poll_submit) until a
 * chunk at or after
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

/* Answers one mcpd/poll request of session s with one message on reply:
 * at once when a chunk is there, the stream has ended or the poll does not
 * wait; otherwise the poll is parked until a chunk arrives, the stream or
 * the session ends, or wait_ms passes. Parked polls are followed by one
 * thread (the lot), so a waiting poll holds no thread. Returns 0, or
 * SESSION_BUSY when s already has its cap of requests in flight (nothing
 * is sent on reply). Takes its own references. */
int poll_submit(struct session *s, json_t *id, json_t *params, const char *transport,
                struct stream *reply);
/* Start and stop the lot; stopping answers every parked poll at once. */
int poll_lot_start(void);
void poll_lot_stop(void);

#endif
