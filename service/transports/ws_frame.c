/* ws_frame — see ws_frame.h. */
#include "ws_frame.h"

#include "utf8.h"

#include <stdlib.h>
#include <string.h>

enum { ST_HEADER, ST_PAYLOAD, ST_FAILED, ST_CLOSED };

/* A delivered message buffer larger than this is freed rather than kept for
 * the next message, so an idle connection holds little memory however big
 * its last message was. */
#define KEEP_BUFFER 16384
#define FIRST_BUFFER 4096

int ws_close_code_valid(unsigned code)
{
    /* 1004-1006 and 1015 are reserved and must never be sent; 1016-2999
     * are unassigned; 3000-4999 belong to libraries and applications. */
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

/* ---- parser ---- */

void ws_parser_init(struct ws_parser *p, size_t max_message)
{
    memset(p, 0, sizeof *p);
    p->max_message = max_message ? max_message : 1;
    p->state = ST_HEADER;
    utf8_check_init(&p->utf8);
}

void ws_parser_init_client(struct ws_parser *p, size_t max_message)
{
    ws_parser_init(p, max_message);
    p->from_server = 1;
}

void ws_parser_free(struct ws_parser *p)
{
    free(p->msg);
    p->msg = NULL;
    p->msg_len = p->msg_cap = 0;
}

static size_t fail(struct ws_parser *p, struct ws_event *ev, uint16_t code, const char *reason,
                   size_t consumed)
{
    p->state = ST_FAILED;
    ev->kind = WS_EV_ERROR;
    ev->code = code;
    ev->reason = reason;
    ev->data = NULL;
    ev->len = 0;
    return consumed;
}

static int is_control(int op)
{
    return op & 0x8;
}

/* How long the header is, once its first two bytes are known. */
static size_t header_size(const unsigned char *h)
{
    unsigned len7 = h[1] & 0x7Fu;
    return 2u + (len7 == 126 ? 2u : len7 == 127 ? 8u : 0u) + (h[1] & 0x80 ? 4u : 0u);
}

/* Checks the first two bytes, before the rest of the header arrives. */
static const char *check_start(const struct ws_parser *p, const unsigned char *h, uint16_t *code)
{
    int op = h[0] & 0x0F;
    *code = WS_CLOSE_PROTOCOL_ERROR;
    if (h[0] & 0x70)
        return "reserved bits set";
    if (!p->from_server && !(h[1] & 0x80))
        return "client frames must be masked";
    if (p->from_server && (h[1] & 0x80))
        return "server frames must not be masked";
    if (is_control(op)) {
        if (op != WS_OP_CLOSE && op != WS_OP_PING && op != WS_OP_PONG)
            return "reserved opcode";
        if (!(h[0] & 0x80))
            return "fragmented control frame";
        if ((h[1] & 0x7F) > WS_MAX_CONTROL_PAYLOAD)
            return "control frame longer than 125 bytes";
        return NULL;
    }
    if (op != WS_OP_CONTINUATION && op != WS_OP_TEXT && op != WS_OP_BINARY)
        return "reserved opcode";
    if (op == WS_OP_CONTINUATION && !p->in_message)
        return "continuation frame without a message to continue";
    if (op != WS_OP_CONTINUATION && p->in_message)
        return "new message before the fragmented one ended";
    if (op == WS_OP_BINARY) {
        *code = WS_CLOSE_UNSUPPORTED_DATA;
        return "binary messages are not supported";
    }
    return NULL;
}

/* The whole header is in: decode the length and check it against the
 * limit. Nothing has been allocated for this frame yet. */
static const char *parse_header(struct ws_parser *p, uint16_t *code)
{
    const unsigned char *h = p->hdr;
    unsigned len7 = h[1] & 0x7F;
    uint64_t len = len7;
    size_t at = 2;
    if (len7 == 126) {
        len = ((uint64_t)h[2] << 8) | h[3];
        at = 4;
    } else if (len7 == 127) {
        len = 0;
        for (int i = 0; i < 8; i++)
            len = (len << 8) | h[2 + i];
        at = 10;
        if (len >> 63) {
            *code = WS_CLOSE_PROTOCOL_ERROR;
            return "frame length with the most significant bit set";
        }
    }
    if (h[1] & 0x80)
        memcpy(p->mask, h + at, 4);
    else
        memset(p->mask, 0, 4);
    p->opcode = h[0] & 0x0F;
    p->fin = (h[0] & 0x80) != 0;
    p->frame_len = len;
    p->frame_done = 0;
    if (!is_control(p->opcode)) {
        /* The running total of the message, before a byte is stored. */
        if (len > p->max_message - p->msg_len) {
            *code = WS_CLOSE_TOO_BIG;
            return "message too big";
        }
        if (p->opcode == WS_OP_TEXT)
            p->in_message = 1;
    }
    return NULL;
}

/* Room for `more` bytes of message (the caller has checked the limit). The
 * buffer grows with what arrives, never with what a header claims. */
static int reserve(struct ws_parser *p, size_t more)
{
    size_t need = p->msg_len + more + 1; /* + NUL */
    if (need <= p->msg_cap)
        return 0;
    size_t cap = p->msg_cap ? p->msg_cap : FIRST_BUFFER;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (cap > p->max_message + 1)
        cap = p->max_message + 1;
    if (cap < need)
        cap = need;
    char *m = realloc(p->msg, cap);
    if (!m)
        return -1;
    if (cap > p->largest_alloc)
        p->largest_alloc = cap;
    p->msg = m;
    p->msg_cap = cap;
    return 0;
}

/* XORs n payload bytes with the mask into dst. */
static void unmask(struct ws_parser *p, char *dst, const unsigned char *src, size_t n)
{
    size_t k = (size_t)(p->frame_done & 3);
    for (size_t i = 0; i < n; i++, k = (k + 1) & 3)
        dst[i] = (char)(src[i] ^ p->mask[k]);
}

/* The frame's payload is complete: report what it means. Returns 1 when
 * *ev holds an event. */
static int finish_frame(struct ws_parser *p, struct ws_event *ev, size_t consumed, size_t *ret)
{
    p->state = ST_HEADER;
    p->hdr_len = 0;
    ev->data = NULL;
    ev->len = 0;
    ev->code = 0;
    ev->reason = NULL;
    if (!is_control(p->opcode)) {
        if (!p->fin)
            return 0;
        if (!utf8_check_complete(&p->utf8)) {
            *ret =
                fail(p, ev, WS_CLOSE_INVALID_PAYLOAD, "invalid UTF-8 in a text message", consumed);
            return 1;
        }
        if (!p->msg && reserve(p, 0) != 0) {
            *ret = fail(p, ev, WS_CLOSE_INTERNAL_ERROR, "out of memory", consumed);
            return 1;
        }
        p->msg[p->msg_len] = '\0';
        p->in_message = 0;
        p->delivered = 1;
        ev->kind = WS_EV_MESSAGE;
        ev->data = p->msg;
        ev->len = p->msg_len;
        *ret = consumed;
        return 1;
    }
    size_t n = (size_t)p->frame_len;
    p->ctl[n] = '\0';
    *ret = consumed;
    if (p->opcode == WS_OP_PING || p->opcode == WS_OP_PONG) {
        ev->kind = p->opcode == WS_OP_PING ? WS_EV_PING : WS_EV_PONG;
        ev->data = p->ctl;
        ev->len = n;
        return 1;
    }
    /* close */
    if (n == 1) {
        *ret =
            fail(p, ev, WS_CLOSE_PROTOCOL_ERROR, "close frame with a one-byte payload", consumed);
        return 1;
    }
    uint16_t code = WS_CLOSE_NO_STATUS;
    if (n >= 2) {
        code = (uint16_t)(((unsigned char)p->ctl[0] << 8) | (unsigned char)p->ctl[1]);
        if (!ws_close_code_valid(code)) {
            *ret = fail(p, ev, WS_CLOSE_PROTOCOL_ERROR, "invalid close code", consumed);
            return 1;
        }
        if (!utf8_valid(p->ctl + 2, n - 2)) {
            *ret = fail(p, ev, WS_CLOSE_INVALID_PAYLOAD, "invalid UTF-8 in the close reason",
                        consumed);
            return 1;
        }
    }
    p->state = ST_CLOSED;
    ev->kind = WS_EV_CLOSE;
    ev->code = code;
    ev->reason = n >= 2 ? p->ctl + 2 : "";
    ev->data = ev->reason;
    ev->len = n >= 2 ? n - 2 : 0;
    return 1;
}

size_t ws_parser_feed(struct ws_parser *p, const void *buf, size_t len, struct ws_event *ev)
{
    const unsigned char *in = buf;
    size_t used = 0;
    ev->kind = WS_EV_NONE;
    ev->data = NULL;
    ev->len = 0;
    ev->code = 0;
    ev->reason = NULL;
    if (p->state == ST_FAILED || p->state == ST_CLOSED)
        return len;
    if (p->delivered) {
        /* The caller is done with the last message. */
        p->delivered = 0;
        p->msg_len = 0;
        if (p->msg_cap > KEEP_BUFFER) {
            free(p->msg);
            p->msg = NULL;
            p->msg_cap = 0;
        }
    }
    while (used < len) {
        if (p->state == ST_HEADER) {
            size_t want = p->hdr_len < 2 ? 2 : header_size(p->hdr);
            while (p->hdr_len < want && used < len) {
                p->hdr[p->hdr_len++] = in[used++];
                if (p->hdr_len == 2) {
                    uint16_t code;
                    const char *why = check_start(p, p->hdr, &code);
                    if (why)
                        return fail(p, ev, code, why, used);
                    want = header_size(p->hdr);
                }
            }
            if (p->hdr_len < want)
                break;
            uint16_t code;
            const char *why = parse_header(p, &code);
            if (why)
                return fail(p, ev, code, why, used);
            p->state = ST_PAYLOAD;
            if (p->frame_len == 0) {
                size_t ret;
                if (finish_frame(p, ev, used, &ret))
                    return ret;
            }
            continue;
        }
        /* ST_PAYLOAD */
        uint64_t left = p->frame_len - p->frame_done;
        size_t n = len - used;
        if ((uint64_t)n > left)
            n = (size_t)left;
        if (is_control(p->opcode)) {
            unmask(p, p->ctl + p->frame_done, in + used, n);
        } else {
            if (reserve(p, n) != 0)
                return fail(p, ev, WS_CLOSE_INTERNAL_ERROR, "out of memory", used);
            char *dst = p->msg + p->msg_len;
            unmask(p, dst, in + used, n);
            /* Validate as it arrives: bad bytes end the connection now,
             * not after the rest of a large message. */
            if (utf8_check_feed(&p->utf8, dst, n) != 0)
                return fail(p, ev, WS_CLOSE_INVALID_PAYLOAD, "invalid UTF-8 in a text message",
                            used + n);
            p->msg_len += n;
        }
        used += n;
        p->frame_done += n;
        if (p->frame_done == p->frame_len) {
            size_t ret;
            if (finish_frame(p, ev, used, &ret))
                return ret;
        }
    }
    return used;
}

/* ---- builders ---- */

size_t ws_frame_header(unsigned char out[WS_MAX_HEADER], enum ws_opcode op, uint64_t len)
{
    out[0] = (unsigned char)(0x80 | (op & 0x0F));
    if (len < 126) {
        out[1] = (unsigned char)len;
        return 2;
    }
    if (len <= 0xFFFF) {
        out[1] = 126;
        out[2] = (unsigned char)(len >> 8);
        out[3] = (unsigned char)len;
        return 4;
    }
    out[1] = 127;
    for (int i = 0; i < 8; i++)
        out[2 + i] = (unsigned char)(len >> (56 - 8 * i));
    return 10;
}

unsigned char *ws_frame_text(const char *msg, size_t len, size_t *out_len)
{
    if (len > SIZE_MAX - WS_MAX_HEADER)
        return NULL;
    unsigned char hdr[WS_MAX_HEADER];
    size_t h = ws_frame_header(hdr, WS_OP_TEXT, len);
    unsigned char *f = malloc(h + len);
    if (!f)
        return NULL;
    memcpy(f, hdr, h);
    if (len)
        memcpy(f + h, msg, len);
    *out_len = h + len;
    return f;
}

unsigned char *ws_frame_client(enum ws_opcode op, const void *payload, size_t len,
                               const unsigned char key[4], size_t *out_len)
{
    if (len > SIZE_MAX - WS_MAX_HEADER - 4)
        return NULL;
    unsigned char hdr[WS_MAX_HEADER];
    size_t h = ws_frame_header(hdr, op, len);
    unsigned char *f = malloc(h + 4 + len);
    if (!f)
        return NULL;
    memcpy(f, hdr, h);
    f[1] |= 0x80;
    memcpy(f + h, key, 4);
    const unsigned char *in = payload;
    for (size_t i = 0; i < len; i++)
        f[h + 4 + i] = in[i] ^ key[i & 3];
    *out_len = h + 4 + len;
    return f;
}

size_t ws_frame_control(unsigned char out[WS_MAX_CONTROL_FRAME], enum ws_opcode op,
                        const void *payload, size_t len)
{
    if (len > WS_MAX_CONTROL_PAYLOAD)
        len = WS_MAX_CONTROL_PAYLOAD;
    size_t h = ws_frame_header(out, op, len);
    if (len)
        memcpy(out + h, payload, len);
    return h + len;
}

size_t ws_frame_close(unsigned char out[WS_MAX_CONTROL_FRAME], uint16_t code, const char *reason)
{
    if (code == 0 || code == WS_CLOSE_NO_STATUS)
        return ws_frame_header(out, WS_OP_CLOSE, 0);
    size_t rlen = reason ? strlen(reason) : 0;
    if (rlen > WS_MAX_CONTROL_PAYLOAD - 2) {
        rlen = WS_MAX_CONTROL_PAYLOAD - 2;
        /* Never cut a character in half: the peer checks the reason. */
        while (rlen > 0 && ((unsigned char)reason[rlen] & 0xC0) == 0x80)
            rlen--;
    }
    unsigned char payload[WS_MAX_CONTROL_PAYLOAD];
    payload[0] = (unsigned char)(code >> 8);
    payload[1] = (unsigned char)code;
    if (rlen)
        memcpy(payload + 2, reason, rlen);
    return ws_frame_control(out, WS_OP_CLOSE, payload, 2 + rlen);
}
