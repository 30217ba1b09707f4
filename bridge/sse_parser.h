/* sse_parser — an incremental parser of a text/event-stream body (the
 * WHATWG "server-sent events" rules), with no I/O of its own.
 *
 * The HTTP layer feeds whatever bytes arrived, in pieces of any size; the
 * parser calls back once per dispatched event with its data (the data: lines
 * joined by "\n"), its event type and the stream's last event id. Lines end
 * in CR, LF or CRLF (a CRLF split across two feeds counts once); a leading
 * UTF-8 BOM is skipped; comment lines (":" keepalives) dispatch nothing but
 * count as activity; an event with no data is not dispatched, but its id:
 * still becomes the last event id (what Last-Event-ID must carry on resume);
 * an id containing NUL is ignored; retry: takes digits only.
 *
 * Memory is bounded by max_event: a line or an event's data growing past it
 * makes sse_parser_feed return -1 and the parser refuses further input (the
 * caller drops the stream: a server that sends an endless line is broken).
 *
 * Ownership: struct sse_parser is the caller's; sse_parser_init sets it up
 * and sse_parser_free releases its buffers. The strings in a struct
 * sse_event are borrowed for the duration of the callback. */
#ifndef MCP_BRIDGE_SSE_PARSER_H
#define MCP_BRIDGE_SSE_PARSER_H

#include <stddef.h>

struct sse_event {
    const char *data; /* NUL-terminated; len excludes the NUL */
    size_t len;
    const char *type;    /* "message" when the event had no event: line */
    const char *last_id; /* the stream's last event id ("" if none yet) */
};

/* Returns 0 to go on, non-zero to stop parsing (sse_parser_feed returns it). */
typedef int (*sse_event_fn)(void *ud, const struct sse_event *ev);

struct sse_buf {
    char *p;
    size_t len, cap;
};

struct sse_parser {
    size_t max_event;
    struct sse_buf line, data, type, id;
    long retry_ms; /* the last retry: value, -1 if none */
    int started;   /* past the optional BOM */
    int skip_lf;   /* the previous line ended in CR: ignore a LF right after */
    int failed;    /* over max_event: input refused */
};

void sse_parser_init(struct sse_parser *p, size_t max_event);
void sse_parser_free(struct sse_parser *p);

/* Parses buf[0..len). Returns 0, -1 when a line or event outgrew max_event
 * (or memory ran out), or the callback's non-zero value. */
int sse_parser_feed(struct sse_parser *p, const char *buf, size_t len, sse_event_fn fn, void *ud);

/* The last event id seen on this stream ("" if none). */
const char *sse_parser_last_id(const struct sse_parser *p);

#endif
