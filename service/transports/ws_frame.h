/* ws_frame — the RFC 6455 WebSocket frame codec, with no I/O of its own.
 *
 * The parser is incremental: the transport feeds it whatever bytes the
 * socket gave, in pieces of any size, and gets events back one at a time: a
 * complete text message, a ping, a pong, the peer's close, or a protocol
 * error with the close code to send. It enforces what a server must:
 *
 *   - client frames are masked (else 1002); reserved bits and opcodes are
 *     refused (1002); control frames are at most 125 bytes and never
 *     fragmented (1002); a continuation frame needs a message to continue
 *     and a new data frame must not interrupt one (1002);
 *   - the length in a frame's header (7, 16 or 64 bits) is checked against
 *     max_message before a single payload byte is stored, and so is the
 *     running total of a fragmented message (1009); the message buffer then
 *     grows only as payload bytes actually arrive, so a header that claims
 *     2^62 bytes costs nothing and a slow sender never makes the parser hold
 *     more than it was sent, never more than max_message;
 *   - binary messages are refused (1003): MCP over WebSocket is text only;
 *   - text is validated as UTF-8 as it arrives, across fragment boundaries,
 *     so invalid bytes close the connection at once (1007): overlong forms,
 *     surrogates and code points above U+10FFFF are invalid;
 *   - a close frame's code and reason are checked (1002 / 1007) and
 *     reported so that the transport can echo the close.
 *
 * After an error or a close the parser stays in that state: further input
 * is ignored and the same event is not reported again.
 *
 * Ownership: a struct ws_parser is the caller's (on the stack or in its
 * own allocation); ws_parser_init sets it up, ws_parser_free releases the
 * message buffer it allocated. An event's data pointer is borrowed from the
 * parser and stays valid only until the next call to ws_parser_feed or
 * ws_parser_free.
 *
 * The builders write server frames (FIN set, never masked) into buffers the
 * caller provides (ws_frame_header, ws_frame_control, ws_frame_close), or
 * return a malloc'd frame the caller frees (ws_frame_text). */
#ifndef MCPD_WS_FRAME_H
#define MCPD_WS_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "utf8.h"

enum ws_opcode {
    WS_OP_CONTINUATION = 0x0,
    WS_OP_TEXT = 0x1,
    WS_OP_BINARY = 0x2,
    WS_OP_CLOSE = 0x8,
    WS_OP_PING = 0x9,
    WS_OP_PONG = 0xA,
};

/* Close codes (RFC 6455 section 7.4.1) the codec and transport use. */
#define WS_CLOSE_NORMAL 1000
#define WS_CLOSE_GOING_AWAY 1001
#define WS_CLOSE_PROTOCOL_ERROR 1002
#define WS_CLOSE_UNSUPPORTED_DATA 1003
#define WS_CLOSE_NO_STATUS 1005 /* never sent: the peer's close had no code */
#define WS_CLOSE_INVALID_PAYLOAD 1007
#define WS_CLOSE_POLICY_VIOLATION 1008
#define WS_CLOSE_TOO_BIG 1009
#define WS_CLOSE_INTERNAL_ERROR 1011

#define WS_MAX_HEADER 10 /* a server frame's header: no mask key */
#define WS_MAX_CONTROL_PAYLOAD 125
#define WS_MAX_CONTROL_FRAME (2 + WS_MAX_CONTROL_PAYLOAD)

enum ws_event_kind {
    WS_EV_NONE,    /* all input consumed, nothing complete yet */
    WS_EV_MESSAGE, /* a complete, valid UTF-8 text message: data, len */
    WS_EV_PING,    /* answer with a pong carrying data, len */
    WS_EV_PONG,    /* data, len: the payload the peer echoed */
    WS_EV_CLOSE,   /* the peer closed: code (WS_CLOSE_NO_STATUS if none), reason */
    WS_EV_ERROR,   /* the peer broke the protocol: send close(code, reason), then close */
};

struct ws_event {
    enum ws_event_kind kind;
    const char *data; /* borrowed: valid until the next feed */
    size_t len;
    uint16_t code;      /* WS_EV_CLOSE, WS_EV_ERROR */
    const char *reason; /* WS_EV_CLOSE: the peer's (NUL-terminated copy); WS_EV_ERROR: static */
};

struct ws_parser {
    size_t max_message;
    int state; /* internal: header, payload, failed, closed */

    /* the frame being read */
    unsigned char hdr[14];
    size_t hdr_len;
    int opcode, fin;
    unsigned char mask[4];
    uint64_t frame_len, frame_done;

    /* the data message being assembled (text, possibly fragmented) */
    int in_message;
    char *msg;
    size_t msg_len, msg_cap;
    struct utf8_check utf8; /* incremental UTF-8 validation across fragments */
    int delivered;          /* msg was handed out: reset it on the next feed */

    /* a control frame's payload, NUL-terminated for the close reason */
    char ctl[WS_MAX_CONTROL_PAYLOAD + 1];

    size_t largest_alloc; /* the biggest buffer ever requested: tests check it */
    int from_server;      /* a client's parser: frames must be unmasked */
};

/* Sets up p for messages of at most max_message bytes (at least 1). */
void ws_parser_init(struct ws_parser *p, size_t max_message);
/* The same for a client (mcp-bridge) reading a server: frames must not be
 * masked (1002 if they are), everything else as above. */
void ws_parser_init_client(struct ws_parser *p, size_t max_message);
/* Frees the message buffer. p may be initialised again afterwards. */
void ws_parser_free(struct ws_parser *p);

/* Consumes bytes from buf until an event is complete or buf is used up.
 * Returns how many bytes it consumed; *ev says what happened (WS_EV_NONE:
 * all of buf was consumed and more is needed). Call it again with the rest
 * of buf after any other event. Once an error or close has been reported,
 * the parser consumes and ignores everything (returns len, WS_EV_NONE). */
size_t ws_parser_feed(struct ws_parser *p, const void *buf, size_t len, struct ws_event *ev);

/* A server frame header (FIN set, unmasked) for a payload of len bytes.
 * Returns the header's length (2, 4 or 10). */
size_t ws_frame_header(unsigned char out[WS_MAX_HEADER], enum ws_opcode op, uint64_t len);

/* A whole text frame: header and payload, malloc'd (caller frees); the
 * frame's size in *out_len. NULL when out of memory. */
unsigned char *ws_frame_text(const char *msg, size_t len, size_t *out_len);

/* A ping or pong frame carrying up to 125 bytes of payload (longer is cut).
 * Returns the frame's length. */
size_t ws_frame_control(unsigned char out[WS_MAX_CONTROL_FRAME], enum ws_opcode op,
                        const void *payload, size_t len);

/* A close frame. code 0 or WS_CLOSE_NO_STATUS: an empty close (echoing a
 * close that had no code). The reason (may be NULL) is cut to fit 123 bytes
 * on a UTF-8 character boundary. Returns the frame's length. */
size_t ws_frame_close(unsigned char out[WS_MAX_CONTROL_FRAME], uint16_t code, const char *reason);

/* A client frame (FIN set, masked with key): op, then the payload XORed
 * with the key. malloc'd (caller frees); its size in *out_len. NULL when out
 * of memory. */
unsigned char *ws_frame_client(enum ws_opcode op, const void *payload, size_t len,
                               const unsigned char key[4], size_t *out_len);

/* 1 when code may appear in a close frame on the wire. */
int ws_close_code_valid(unsigned code);

#endif
