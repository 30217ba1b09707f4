/* stdio_frame — the message framing of the stdio transport: an incremental
 * decoder and an encoder, with no I/O of their own.
 *
 * A stdio client sends either newline-delimited JSON (one message per line)
 * or LSP-style frames ("Content-Length: n\r\n\r\n" and n bytes of JSON). It
 * never says which, so the decoder looks at the first bytes that are not
 * white space: a "Content-Length:" (or "Content-Type:") header, in any case,
 * selects Content-Length framing; anything else ('{', '[' or garbage that
 * will fail to parse) selects NDJSON. The choice is made once per stream and
 * the server's replies use the same framing.
 *
 * Decoding is pull-style and bounded: the caller hands the decoder whatever
 * it read and the decoder consumes it up to the end of the next event (a
 * complete message or an error), so one read may yield many events and a
 * message may span many reads. Memory is bounded by max_message: a
 * Content-Length above it, or an NDJSON line growing past it, is reported
 * as soon as it is known and its bytes are then skipped as they arrive,
 * never buffered. A UTF-8 byte order mark at the start of a message makes
 * that message an error (the stream is UTF-8 without BOM). Blank lines are
 * ignored in both framings, "\r\n" line ends are accepted, and other
 * headers (Content-Type, ...) are ignored. Bad framing never stops the
 * decoder: the bad part is reported once and decoding resumes after it.
 *
 * Ownership: the decoder is the caller's (stdio_frame_decoder_new/_free).
 * A message event's data is borrowed: it points into the decoder's buffer
 * or straight into the caller's input, and stays valid until the next call
 * on the decoder, provided the caller does not change its input meanwhile.
 * stdio_frame_encode returns a malloc'd buffer the caller frees.
 *
 * Not thread-safe: one decoder per input stream, used by one thread. The
 * encoding functions are pure and may be called from any thread. */
#ifndef MCPD_STDIO_FRAME_H
#define MCPD_STDIO_FRAME_H

#include <stddef.h>

enum stdio_framing {
    STDIO_FRAMING_UNKNOWN = 0, /* nothing decided yet (no input) */
    STDIO_FRAMING_NDJSON,
    STDIO_FRAMING_CONTENT_LENGTH,
};

enum stdio_frame_kind {
    STDIO_FRAME_MESSAGE = 1, /* data/len: one message's payload */
    STDIO_FRAME_ERROR,       /* error: why a message was dropped */
};

enum stdio_frame_error {
    STDIO_FRAME_ERR_NONE = 0,
    STDIO_FRAME_ERR_BOM,       /* the message started with a UTF-8 BOM */
    STDIO_FRAME_ERR_TOO_LARGE, /* over max_message; skipped */
    STDIO_FRAME_ERR_HEADER,    /* a bad or missing Content-Length header */
    STDIO_FRAME_ERR_TRUNCATED, /* input ended inside a framed message */
    STDIO_FRAME_ERR_MEMORY,    /* out of memory while buffering; skipped */
};

struct stdio_frame_event {
    enum stdio_frame_kind kind;
    const char *data; /* MESSAGE: borrowed, see the ownership note above */
    size_t len;
    enum stdio_frame_error error; /* ERROR */
};

struct stdio_frame_decoder;

/* A decoder accepting messages of at most max_message bytes (0 means
 * STDIO_FRAME_DEFAULT_MAX). NULL when out of memory. */
#define STDIO_FRAME_DEFAULT_MAX (4u * 1024 * 1024)
struct stdio_frame_decoder *stdio_frame_decoder_new(size_t max_message);
void stdio_frame_decoder_free(struct stdio_frame_decoder *d);

/* Consumes in[0..len) up to and including the end of the next event and
 * sets *used to the bytes consumed. Returns 1 with *ev filled when an event
 * completed, 0 when all the input was consumed without completing one
 * (*used == len). Call again with the rest of the input after an event. */
int stdio_frame_decode(struct stdio_frame_decoder *d, const char *in, size_t len, size_t *used,
                       struct stdio_frame_event *ev);

/* At end of input: returns 1 with *ev for what the input left unfinished (a
 * last NDJSON line without its newline is a message; a Content-Length frame
 * cut short is STDIO_FRAME_ERR_TRUNCATED), else 0. The decoder is then
 * ready for a new stream in the same framing. */
int stdio_frame_finish(struct stdio_frame_decoder *d, struct stdio_frame_event *ev);

/* The framing detected so far (STDIO_FRAMING_UNKNOWN until decided). */
enum stdio_framing stdio_frame_framing(const struct stdio_frame_decoder *d);

/* The JSON-RPC error code and message to answer an error with: -32600 for
 * an oversized message (well-formed framing, unacceptable request),
 * -32603 when out of memory, -32700 (parse error) for the rest. The
 * message is a static string. */
int stdio_frame_error_code(enum stdio_frame_error e);
const char *stdio_frame_error_message(enum stdio_frame_error e);

/* Encoding one message of len bytes: what goes before and after it. The
 * prefix is written into out (at most cap bytes, NUL-terminated) and its
 * length returned; 64 bytes always suffice. The suffix is a static string.
 * UNKNOWN framing encodes as NDJSON. So a writer can send prefix, message
 * and suffix with one writev and no copy of the message. */
#define STDIO_FRAME_PREFIX_MAX 64
size_t stdio_frame_prefix(enum stdio_framing f, size_t len, char *out, size_t cap);
const char *stdio_frame_suffix(enum stdio_framing f);

/* The whole frame in one malloc'd buffer (caller frees), its length in
 * *out_len. NULL when out of memory. */
char *stdio_frame_encode(enum stdio_framing f, const char *msg, size_t len, size_t *out_len);

#endif
