/* event_id — the "<stream id>:<seq>" strings that name a position in a
 * stream (SSE ids, WebSocket resume ids, poll cursors), parsed from what a
 * client sends back.
 *
 * Pure (no I/O, no allocation), so it is unit-tested and fuzzed on its own;
 * stream_resume (stream.h) checks the result against the stream. The seq is
 * read strictly: decimal digits with no sign, space or leading zero, or
 * exactly "-1" ("before the first message", the priming event's id). The
 * caller gets the seq to read NEXT, seq + 1, which is computed without
 * overflow: a seq whose successor does not fit in int64_t is refused. */
#ifndef MCPD_EVENT_ID_H
#define MCPD_EVENT_ID_H

#include <stddef.h>
#include <stdint.h>

/* Splits `id` (NUL-terminated; NULL is malformed) at its last ':'. Copies
 * the stream id into stream_out (cap bytes with the NUL; it must be
 * non-empty and fit) and stores the next seq, in [0, INT64_MAX], in *next.
 * Returns 0, or -1 if malformed (outputs then unspecified). */
int event_id_parse(const char *id, char *stream_out, size_t cap, int64_t *next);

#endif
