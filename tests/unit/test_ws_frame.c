/* test_ws_frame — the RFC 6455 codec: every close decision the parser makes,
 * masking, fragmentation, UTF-8 across fragment boundaries, control frames
 * inside a fragmented message, length checks before allocation, and the
 * server-side frame builders.
 *
 * The codec is linked with -Wl,--wrap=malloc,--wrap=realloc, so every
 * allocation it makes passes through the wrappers below, which remember the
 * largest size requested: that is how the tests prove that a header
 * claiming 2^62 bytes is refused without any allocation of that size. */
#include "check.h"
#include "ws_frame.h"

#include <stdlib.h>
#include <string.h>

/* ---- allocation watch ---- */

void *__real_malloc(size_t n);
void *__real_realloc(void *p, size_t n);
/* The linker routes malloc/realloc here (-Wl,--wrap). */
void *__wrap_malloc(size_t n);
void *__wrap_realloc(void *p, size_t n);
static size_t biggest_alloc;

void *__wrap_malloc(size_t n)
{
    if (n > biggest_alloc)
        biggest_alloc = n;
    return __real_malloc(n);
}

void *__wrap_realloc(void *p, size_t n)
{
    if (n > biggest_alloc)
        biggest_alloc = n;
    return __real_realloc(p, n);
}

/* ---- client frames ---- */

static const unsigned char MASK[4] = {0x37, 0xfa, 0x21, 0x3d};

enum { LEN_AUTO, LEN_16, LEN_64 };

/* Writes a client frame into out; returns its size. flags: bit 0 FIN,
 * bits 4-6 RSV. masked=0 for an (illegal) unmasked frame. */
static size_t cframe_ex(unsigned char *out, int fin, int rsv, int op, int masked,
                        const void *payload, size_t len, int lenform)
{
    size_t at = 0;
    out[at++] = (unsigned char)((fin ? 0x80 : 0) | ((rsv & 7) << 4) | (op & 0x0F));
    unsigned char mbit = masked ? 0x80 : 0;
    if (lenform == LEN_AUTO && len < 126) {
        out[at++] = (unsigned char)(mbit | len);
    } else if (lenform != LEN_64 && len <= 0xFFFF) {
        out[at++] = mbit | 126;
        out[at++] = (unsigned char)(len >> 8);
        out[at++] = (unsigned char)len;
    } else {
        out[at++] = mbit | 127;
        for (int i = 0; i < 8; i++)
            out[at++] = (unsigned char)((uint64_t)len >> (56 - 8 * i));
    }
    if (masked) {
        memcpy(out + at, MASK, 4);
        at += 4;
    }
    const unsigned char *pl = payload;
    for (size_t i = 0; i < len; i++)
        out[at + i] = masked ? pl[i] ^ MASK[i & 3] : pl[i];
    return at + len;
}

static size_t cframe(unsigned char *out, int fin, int op, const void *payload, size_t len)
{
    return cframe_ex(out, fin, 0, op, 1, payload, len, LEN_AUTO);
}

static size_t ctext(unsigned char *out, const char *s)
{
    return cframe(out, 1, WS_OP_TEXT, s, strlen(s));
}

/* Feeds all of buf and collects the events (at most max). Returns how many. */
static int feed_all(struct ws_parser *p, const unsigned char *buf, size_t len, struct ws_event *evs,
                    char msgs[][256], int max)
{
    int n = 0;
    while (len > 0) {
        struct ws_event ev;
        size_t used = ws_parser_feed(p, buf, len, &ev);
        if (used > len) {
            CHECK(used <= len);
            return n;
        }
        buf += used;
        len -= used;
        if (ev.kind != WS_EV_NONE && n < max) {
            evs[n] = ev;
            /* keep a copy: data is only valid until the next feed */
            size_t k = ev.len < 255 ? ev.len : 255;
            if (ev.data)
                memcpy(msgs[n], ev.data, k);
            msgs[n][k] = '\0';
            n++;
        } else if (ev.kind == WS_EV_NONE) {
            CHECK_INT(len, 0);
        }
    }
    return n;
}

/* One frame (or bytes) in, the single close decision out. */
static struct ws_event expect_error(size_t max, const unsigned char *buf, size_t len)
{
    struct ws_parser p;
    ws_parser_init(&p, max);
    struct ws_event evs[8];
    char msgs[8][256];
    int n = feed_all(&p, buf, len, evs, msgs, 8);
    ws_parser_free(&p);
    struct ws_event none = {0};
    for (int i = 0; i < n; i++)
        if (evs[i].kind == WS_EV_ERROR)
            return evs[i];
    return none;
}

/* ---- tests ---- */

static void test_simple_text(void)
{
    unsigned char buf[64];
    size_t n = ctext(buf, "hello");
    struct ws_parser p;
    ws_parser_init(&p, 1024);
    struct ws_event evs[4];
    char msgs[4][256];
    CHECK_INT(feed_all(&p, buf, n, evs, msgs, 4), 1);
    CHECK_INT(evs[0].kind, WS_EV_MESSAGE);
    CHECK_INT(evs[0].len, 5);
    CHECK_STR(msgs[0], "hello");
    ws_parser_free(&p);
}

static void test_byte_by_byte(void)
{
    unsigned char buf[512];
    char text[300];
    memset(text, 'x', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    text[0] = '{';
    size_t n = ctext(buf, text); /* 16-bit length form */
    struct ws_parser p;
    ws_parser_init(&p, 1024);
    int messages = 0;
    for (size_t i = 0; i < n; i++) {
        struct ws_event ev;
        size_t used = ws_parser_feed(&p, buf + i, 1, &ev);
        CHECK_INT(used, 1);
        if (ev.kind == WS_EV_MESSAGE) {
            messages++;
            CHECK_INT(i, n - 1);
            CHECK_INT(ev.len, strlen(text));
            CHECK(memcmp(ev.data, text, ev.len) == 0);
        } else {
            CHECK_INT(ev.kind, WS_EV_NONE);
        }
    }
    CHECK_INT(messages, 1);
    ws_parser_free(&p);
}

static void test_several_frames_one_buffer(void)
{
    unsigned char buf[256];
    size_t n = ctext(buf, "one");
    n += ctext(buf + n, "");
    n += cframe(buf + n, 1, WS_OP_PING, "p", 1);
    n += ctext(buf + n, "three");
    n += cframe(buf + n, 1, WS_OP_PONG, "q", 1);
    struct ws_parser p;
    ws_parser_init(&p, 1024);
    struct ws_event evs[8];
    char msgs[8][256];
    CHECK_INT(feed_all(&p, buf, n, evs, msgs, 8), 5);
    CHECK_INT(evs[0].kind, WS_EV_MESSAGE);
    CHECK_STR(msgs[0], "one");
    CHECK_INT(evs[1].kind, WS_EV_MESSAGE);
    CHECK_INT(evs[1].len, 0);
    CHECK_INT(evs[2].kind, WS_EV_PING);
    CHECK_STR(msgs[2], "p");
    CHECK_INT(evs[3].kind, WS_EV_MESSAGE);
    CHECK_STR(msgs[3], "three");
    CHECK_INT(evs[4].kind, WS_EV_PONG);
    CHECK_STR(msgs[4], "q");
    ws_parser_free(&p);
}

static void test_masking(void)
{
    unsigned char buf[64];
    /* An unmasked client frame is a protocol error (RFC 6455 5.1). */
    size_t n = cframe_ex(buf, 1, 0, WS_OP_TEXT, 0, "hi", 2, LEN_AUTO);
    struct ws_event ev = expect_error(1024, buf, n);
    CHECK_INT(ev.kind, WS_EV_ERROR);
    CHECK_INT(ev.code, 1002);
    /* Decided from the first two bytes: the rest need not arrive. */
    ev = expect_error(1024, buf, 2);
    CHECK_INT(ev.code, 1002);
    /* Unmasked control frames too. */
    n = cframe_ex(buf, 1, 0, WS_OP_PING, 0, "", 0, LEN_AUTO);
    CHECK_INT(expect_error(1024, buf, n).code, 1002);
    /* The mask is applied per payload byte, continuing across a split. */
    n = ctext(buf, "abcdefghij");
    struct ws_parser p;
    ws_parser_init(&p, 1024);
    struct ws_event evs[2];
    char msgs[2][256];
    CHECK_INT(feed_all(&p, buf, 9, evs, msgs, 2), 0);
    CHECK_INT(feed_all(&p, buf + 9, n - 9, evs, msgs, 2), 1);
    CHECK_STR(msgs[0], "abcdefghij");
    ws_parser_free(&p);
}

static void test_reserved_bits_and_opcodes(void)
{
    unsigned char buf[64];
    for (int rsv = 1; rsv < 8; rsv++) {
        size_t n = cframe_ex(buf, 1, rsv, WS_OP_TEXT, 1, "x", 1, LEN_AUTO);
        CHECK_INT(expect_error(1024, buf, n).code, 1002);
    }
    int bad_ops[] = {3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF};
    for (size_t i = 0; i < sizeof bad_ops / sizeof bad_ops[0]; i++) {
        size_t n = cframe(buf, 1, bad_ops[i], "x", 1);
        struct ws_event ev = expect_error(1024, buf, n);
        CHECK_INT(ev.kind, WS_EV_ERROR);
        CHECK_INT(ev.code, 1002);
    }
}

static void test_control_frame_rules(void)
{
    unsigned char buf[512];
    char big[126];
    memset(big, 'a', sizeof big);
    /* 126 bytes: too long for a control frame (16-bit length form). */
    size_t n = cframe(buf, 1, WS_OP_PING, big, 126);
    CHECK_INT(expect_error(1024, buf, n).code, 1002);
    /* 125 bytes is fine. */
    n = cframe(buf, 1, WS_OP_PING, big, 125);
    struct ws_parser p;
    ws_parser_init(&p, 16); /* control frames do not count against max_message */
    struct ws_event evs[2];
    char msgs[2][256];
    CHECK_INT(feed_all(&p, buf, n, evs, msgs, 2), 1);
    CHECK_INT(evs[0].kind, WS_EV_PING);
    CHECK_INT(evs[0].len, 125);
    ws_parser_free(&p);
    /* A fragmented control frame. */
    n = cframe(buf, 0, WS_OP_PING, "x", 1);
    CHECK_INT(expect_error(1024, buf, n).code, 1002);
    n = cframe(buf, 0, WS_OP_CLOSE, "", 0);
    CHECK_INT(expect_error(1024, buf, n).code, 1002);
}

static void test_binary(void)
{
    unsigned char buf[64];
    size_t n = cframe(buf, 1, WS_OP_BINARY, "\x01\x02", 2);
    struct ws_event ev = expect_error(1024, buf, n);
    CHECK_INT(ev.kind, WS_EV_ERROR);
    CHECK_INT(ev.code, 1003);
    /* Even a fragmented or empty one. */
    n = cframe(buf, 0, WS_OP_BINARY, "", 0);
    CHECK_INT(expect_error(1024, buf, n).code, 1003);
}

static void test_fragmentation_rules(void)
{
    unsigned char buf[128];
    /* Continuation without a message. */
    size_t n = cframe(buf, 1, WS_OP_CONTINUATION, "x", 1);
    CHECK_INT(expect_error(1024, buf, n).code, 1002);
    /* A new text frame while a fragmented message is open. */
    n = cframe(buf, 0, WS_OP_TEXT, "a", 1);
    n += cframe(buf + n, 1, WS_OP_TEXT, "b", 1);
    CHECK_INT(expect_error(1024, buf, n).code, 1002);
    /* A binary frame in the middle of a text message: 1002 as well. */
    n = cframe(buf, 0, WS_OP_TEXT, "a", 1);
    n += cframe(buf + n, 1, WS_OP_BINARY, "b", 1);
    CHECK_INT(expect_error(1024, buf, n).code, 1002);

    /* Three fragments make one message; the parser is reusable after it. */
    n = cframe(buf, 0, WS_OP_TEXT, "Hel", 3);
    n += cframe(buf + n, 0, WS_OP_CONTINUATION, "", 0);
    n += cframe(buf + n, 1, WS_OP_CONTINUATION, "lo", 2);
    n += ctext(buf + n, "again");
    struct ws_parser p;
    ws_parser_init(&p, 1024);
    struct ws_event evs[4];
    char msgs[4][256];
    CHECK_INT(feed_all(&p, buf, n, evs, msgs, 4), 2);
    CHECK_INT(evs[0].kind, WS_EV_MESSAGE);
    CHECK_STR(msgs[0], "Hello");
    CHECK_STR(msgs[1], "again");
    ws_parser_free(&p);
}

static void test_control_inside_fragmented(void)
{
    unsigned char buf[128];
    size_t n = cframe(buf, 0, WS_OP_TEXT, "ab", 2);
    n += cframe(buf + n, 1, WS_OP_PING, "x", 1);
    n += cframe(buf + n, 0, WS_OP_CONTINUATION, "cd", 2);
    n += cframe(buf + n, 1, WS_OP_PONG, "y", 1);
    n += cframe(buf + n, 1, WS_OP_CONTINUATION, "ef", 2);
    struct ws_parser p;
    ws_parser_init(&p, 1024);
    struct ws_event evs[4];
    char msgs[4][256];
    CHECK_INT(feed_all(&p, buf, n, evs, msgs, 4), 3);
    CHECK_INT(evs[0].kind, WS_EV_PING);
    CHECK_STR(msgs[0], "x");
    CHECK_INT(evs[1].kind, WS_EV_PONG);
    CHECK_INT(evs[2].kind, WS_EV_MESSAGE);
    CHECK_STR(msgs[2], "abcdef");
    ws_parser_free(&p);

    /* A close in the middle of a fragmented message is reported. */
    n = cframe(buf, 0, WS_OP_TEXT, "ab", 2);
    n += cframe(buf + n, 1, WS_OP_CLOSE, "\x03\xe8", 2);
    ws_parser_init(&p, 1024);
    CHECK_INT(feed_all(&p, buf, n, evs, msgs, 4), 1);
    CHECK_INT(evs[0].kind, WS_EV_CLOSE);
    CHECK_INT(evs[0].code, 1000);
    ws_parser_free(&p);
}

static void test_too_big(void)
{
    unsigned char buf[512];
    char text[200];
    memset(text, 'a', sizeof text);
    /* Exactly the limit passes. */
    size_t n = cframe(buf, 1, WS_OP_TEXT, text, 100);
    struct ws_parser p;
    ws_parser_init(&p, 100);
    struct ws_event evs[2];
    char msgs[2][256];
    CHECK_INT(feed_all(&p, buf, n, evs, msgs, 2), 1);
    CHECK_INT(evs[0].kind, WS_EV_MESSAGE);
    CHECK_INT(evs[0].len, 100);
    CHECK(p.largest_alloc <= 101);
    ws_parser_free(&p);

    /* One byte over: refused from the header alone (payload not sent). */
    n = cframe(buf, 1, WS_OP_TEXT, text, 101);
    ws_parser_init(&p, 100);
    struct ws_event ev;
    size_t used = ws_parser_feed(&p, buf, 2, &ev);
    CHECK_INT(used, 2);
    CHECK_INT(ev.kind, WS_EV_NONE);
    used = ws_parser_feed(&p, buf + 2, 4, &ev); /* the mask key completes the header */
    CHECK_INT(ev.kind, WS_EV_ERROR);
    CHECK_INT(ev.code, 1009);
    CHECK_INT(p.largest_alloc, 0);
    /* The parser stays failed and swallows the rest. */
    used = ws_parser_feed(&p, buf + 6, n - 6, &ev);
    CHECK_INT(used, n - 6);
    CHECK_INT(ev.kind, WS_EV_NONE);
    ws_parser_free(&p);

    /* 16-bit length form over the limit. */
    n = cframe(buf, 1, WS_OP_TEXT, text, 200);
    CHECK_INT(expect_error(150, buf, n).code, 1009);

    /* Fragments whose total exceeds the limit: refused at the header of the
     * fragment that would pass it, having stored at most the limit. */
    n = cframe(buf, 0, WS_OP_TEXT, text, 60);
    n += cframe(buf + n, 0, WS_OP_CONTINUATION, text, 40);
    n += cframe(buf + n, 1, WS_OP_CONTINUATION, text, 1);
    ws_parser_init(&p, 100);
    CHECK_INT(feed_all(&p, buf, n, evs, msgs, 2), 1);
    CHECK_INT(evs[0].kind, WS_EV_ERROR);
    CHECK_INT(evs[0].code, 1009);
    CHECK(p.largest_alloc <= 101);
    ws_parser_free(&p);
}

static void test_huge_length_header(void)
{
    /* A 64-bit length claiming 2^62 bytes: 1009 at once, no allocation. */
    unsigned char buf[16];
    size_t at = 0;
    buf[at++] = 0x81;
    buf[at++] = 0x80 | 127;
    uint64_t len = (uint64_t)1 << 62;
    for (int i = 0; i < 8; i++)
        buf[at++] = (unsigned char)(len >> (56 - 8 * i));
    memcpy(buf + at, MASK, 4);
    at += 4;
    biggest_alloc = 0;
    struct ws_parser p;
    ws_parser_init(&p, 1048576);
    struct ws_event ev;
    size_t used = ws_parser_feed(&p, buf, at, &ev);
    CHECK_INT(used, at);
    CHECK_INT(ev.kind, WS_EV_ERROR);
    CHECK_INT(ev.code, 1009);
    CHECK_INT(p.largest_alloc, 0);
    CHECK_INT(biggest_alloc, 0); /* nothing was allocated at all */
    ws_parser_free(&p);

    /* The same as a continuation of an open message. */
    unsigned char buf2[64];
    size_t n = cframe(buf2, 0, WS_OP_TEXT, "ab", 2);
    buf[0] = 0x80; /* FIN + continuation */
    memcpy(buf2 + n, buf, at);
    n += at;
    biggest_alloc = 0;
    ws_parser_init(&p, 1048576);
    struct ws_event evs[2];
    char msgs[2][256];
    CHECK_INT(feed_all(&p, buf2, n, evs, msgs, 2), 1);
    CHECK_INT(evs[0].code, 1009);
    CHECK(biggest_alloc <= 8192);
    ws_parser_free(&p);

    /* The most significant bit set: a protocol error (RFC 6455 5.2). */
    buf[0] = 0x81;
    buf[2] = 0x80;
    CHECK_INT(expect_error(1048576, buf, at).code, 1002);

    /* A sender that claims a big (allowed) frame and trickles it: memory
     * grows with what arrived, not with the claim. */
    static unsigned char frame[70000];
    static char payload[65536];
    memset(payload, 'z', sizeof payload);
    n = cframe_ex(frame, 1, 0, WS_OP_TEXT, 1, payload, sizeof payload, LEN_64);
    biggest_alloc = 0;
    ws_parser_init(&p, 1048576);
    used = ws_parser_feed(&p, frame, 14 + 10, &ev);
    CHECK_INT(ev.kind, WS_EV_NONE);
    CHECK(p.largest_alloc <= 4096);
    CHECK(biggest_alloc <= 4096);
    CHECK(biggest_alloc > 0); /* the watch does see the codec's allocations */
    used = ws_parser_feed(&p, frame + 24, n - 24, &ev);
    CHECK_INT(ev.kind, WS_EV_MESSAGE);
    CHECK_INT(ev.len, sizeof payload);
    CHECK(p.largest_alloc <= 2 * sizeof payload);
    /* The big buffer is let go once the message was handed out. */
    n = ctext(frame, "small");
    used = ws_parser_feed(&p, frame, n, &ev);
    CHECK_INT(ev.kind, WS_EV_MESSAGE);
    CHECK(p.msg_cap <= 16384);
    ws_parser_free(&p);
}

static void test_utf8(void)
{
    /* utf8.c's rules are tested in test_utf8; here, that a text message is
     * held to them: 1007 for invalid text, whole or cut short. */
    struct {
        const char *bytes;
        int valid;
    } cases[] = {
        {"plain ascii", 1},      {"\xe2\x82\xac", 1}, /* € */
        {"\xf4\x8f\xbf\xbf", 1},                      /* U+10FFFF */
        {"\xc0\xaf", 0},                              /* overlong '/' */
        {"\xed\xa0\x80", 0},                          /* U+D800 surrogate */
        {"\xe2\x82", 0},                              /* truncated */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = strlen(cases[i].bytes);
        unsigned char buf[64];
        size_t n = cframe(buf, 1, WS_OP_TEXT, cases[i].bytes, len);
        struct ws_parser p;
        ws_parser_init(&p, 1024);
        struct ws_event evs[2];
        char msgs[2][256];
        int k = feed_all(&p, buf, n, evs, msgs, 2);
        CHECK_INT(k, 1);
        if (cases[i].valid) {
            CHECK_INT(evs[0].kind, WS_EV_MESSAGE);
        } else {
            CHECK_INT(evs[0].kind, WS_EV_ERROR);
            CHECK_INT(evs[0].code, 1007);
        }
        ws_parser_free(&p);
    }
}

static void test_utf8_across_fragments(void)
{
    /* € (E2 82 AC) split over two and three fragments. */
    unsigned char buf[128];
    size_t n = cframe(buf, 0, WS_OP_TEXT, "x\xe2", 2);
    n += cframe(buf + n, 1, WS_OP_CONTINUATION, "\x82\xac", 2);
    struct ws_parser p;
    ws_parser_init(&p, 1024);
    struct ws_event evs[2];
    char msgs[2][256];
    CHECK_INT(feed_all(&p, buf, n, evs, msgs, 2), 1);
    CHECK_INT(evs[0].kind, WS_EV_MESSAGE);
    CHECK_STR(msgs[0], "x\xe2\x82\xac");
    ws_parser_free(&p);

    n = cframe(buf, 0, WS_OP_TEXT, "\xf0", 1);
    n += cframe(buf + n, 0, WS_OP_CONTINUATION, "\x9d\x84", 2);
    n += cframe(buf + n, 1, WS_OP_PING, "", 0);
    n += cframe(buf + n, 1, WS_OP_CONTINUATION, "\x9e", 1);
    ws_parser_init(&p, 1024);
    CHECK_INT(feed_all(&p, buf, n, evs, msgs, 2), 2);
    CHECK_INT(evs[0].kind, WS_EV_PING);
    CHECK_INT(evs[1].kind, WS_EV_MESSAGE);
    CHECK_INT(evs[1].len, 4);
    ws_parser_free(&p);

    /* A sequence left open at the end of the message. */
    n = cframe(buf, 0, WS_OP_TEXT, "ok", 2);
    n += cframe(buf + n, 1, WS_OP_CONTINUATION, "\xe2\x82", 2);
    CHECK_INT(expect_error(1024, buf, n).code, 1007);

    /* A surrogate whose lead byte is in one fragment and the bad byte in
     * the next. */
    n = cframe(buf, 0, WS_OP_TEXT, "\xed", 1);
    n += cframe(buf + n, 1, WS_OP_CONTINUATION, "\xa0\x80", 2);
    CHECK_INT(expect_error(1024, buf, n).code, 1007);

    /* Fail fast: an invalid first fragment is refused before the rest. */
    n = cframe(buf, 0, WS_OP_TEXT, "ab\xc0\xaf", 4);
    ws_parser_init(&p, 1024);
    CHECK_INT(feed_all(&p, buf, n, evs, msgs, 2), 1);
    CHECK_INT(evs[0].kind, WS_EV_ERROR);
    CHECK_INT(evs[0].code, 1007);
    ws_parser_free(&p);

    /* Fail fast inside one frame whose tail has not arrived yet. */
    char text[100];
    memset(text, 'a', sizeof text);
    text[10] = '\xff';
    n = cframe(buf, 1, WS_OP_TEXT, text, sizeof text);
    ws_parser_init(&p, 1024);
    struct ws_event ev;
    ws_parser_feed(&p, buf, 6 + 20, &ev);
    CHECK_INT(ev.kind, WS_EV_ERROR);
    CHECK_INT(ev.code, 1007);
    ws_parser_free(&p);
}

static void test_close_frames(void)
{
    unsigned char buf[256];
    struct ws_parser p;
    struct ws_event evs[2];
    char msgs[2][256];

    size_t n = cframe(buf, 1, WS_OP_CLOSE,
                      "\x03\xe8"
                      "bye",
                      5);
    ws_parser_init(&p, 1024);
    CHECK_INT(feed_all(&p, buf, n, evs, msgs, 2), 1);
    CHECK_INT(evs[0].kind, WS_EV_CLOSE);
    CHECK_INT(evs[0].code, 1000);
    CHECK_STR(evs[0].reason, "bye");
    /* After a close, more input is ignored. */
    n = ctext(buf, "late");
    struct ws_event ev;
    CHECK_INT(ws_parser_feed(&p, buf, n, &ev), n);
    CHECK_INT(ev.kind, WS_EV_NONE);
    ws_parser_free(&p);

    /* Empty close: no status. */
    n = cframe(buf, 1, WS_OP_CLOSE, "", 0);
    ws_parser_init(&p, 1024);
    CHECK_INT(feed_all(&p, buf, n, evs, msgs, 2), 1);
    CHECK_INT(evs[0].kind, WS_EV_CLOSE);
    CHECK_INT(evs[0].code, 1005);
    ws_parser_free(&p);

    /* Application code 4000 is fine. */
    n = cframe(buf, 1, WS_OP_CLOSE, "\x0f\xa0", 2);
    ws_parser_init(&p, 1024);
    CHECK_INT(feed_all(&p, buf, n, evs, msgs, 2), 1);
    CHECK_INT(evs[0].kind, WS_EV_CLOSE);
    CHECK_INT(evs[0].code, 4000);
    ws_parser_free(&p);

    /* A one-byte payload, reserved and out-of-range codes: 1002. */
    n = cframe(buf, 1, WS_OP_CLOSE, "\x03", 1);
    CHECK_INT(expect_error(1024, buf, n).code, 1002);
    unsigned bad[] = {0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned char pl[2] = {(unsigned char)(bad[i] >> 8), (unsigned char)bad[i]};
        n = cframe(buf, 1, WS_OP_CLOSE, pl, 2);
        struct ws_event e = expect_error(1024, buf, n);
        if (!CHECK(e.kind == WS_EV_ERROR && e.code == 1002))
            printf("     close code %u\n", bad[i]);
    }
    /* An invalid UTF-8 reason: 1007. */
    n = cframe(buf, 1, WS_OP_CLOSE, "\x03\xe8\xc0\xaf", 4);
    CHECK_INT(expect_error(1024, buf, n).code, 1007);
}

static void test_failed_is_sticky(void)
{
    unsigned char buf[64];
    size_t n = cframe(buf, 1, WS_OP_BINARY, "x", 1);
    n += ctext(buf + n, "after");
    struct ws_parser p;
    ws_parser_init(&p, 1024);
    struct ws_event evs[4];
    char msgs[4][256];
    CHECK_INT(feed_all(&p, buf, n, evs, msgs, 4), 1);
    CHECK_INT(evs[0].code, 1003);
    ws_parser_free(&p);
}

static void test_builders(void)
{
    unsigned char h[WS_MAX_HEADER];
    CHECK_INT(ws_frame_header(h, WS_OP_TEXT, 0), 2);
    CHECK_INT(h[0], 0x81);
    CHECK_INT(h[1], 0);
    CHECK_INT(ws_frame_header(h, WS_OP_TEXT, 125), 2);
    CHECK_INT(h[1], 125);
    CHECK_INT(ws_frame_header(h, WS_OP_TEXT, 126), 4);
    CHECK_INT(h[1], 126);
    CHECK_INT(h[2], 0);
    CHECK_INT(h[3], 126);
    CHECK_INT(ws_frame_header(h, WS_OP_TEXT, 65535), 4);
    CHECK_INT(h[2], 0xff);
    CHECK_INT(ws_frame_header(h, WS_OP_TEXT, 65536), 10);
    CHECK_INT(h[1], 127);
    CHECK_INT(h[7], 1);
    CHECK_INT(h[8], 0);
    CHECK_INT(h[9], 0);

    size_t len;
    unsigned char *f = ws_frame_text("{\"a\":1}", 7, &len);
    CHECK(f != NULL);
    CHECK_INT(len, 9);
    CHECK_INT(f[0], 0x81);
    CHECK_INT(f[1], 7); /* no mask bit: server frames are never masked */
    CHECK(memcmp(f + 2, "{\"a\":1}", 7) == 0);
    free(f);

    unsigned char c[WS_MAX_CONTROL_FRAME];
    size_t n = ws_frame_control(c, WS_OP_PING, "abc", 3);
    CHECK_INT(n, 5);
    CHECK_INT(c[0], 0x89);
    CHECK_INT(c[1], 3);
    n = ws_frame_control(c, WS_OP_PONG, "", 0);
    CHECK_INT(n, 2);
    CHECK_INT(c[0], 0x8A);

    n = ws_frame_close(c, 1009, "message too big");
    CHECK_INT(n, 2 + 2 + 15);
    CHECK_INT(c[0], 0x88);
    CHECK_INT(c[1], 17);
    CHECK_INT(c[2], 0x03);
    CHECK_INT(c[3], 0xf1);
    CHECK(memcmp(c + 4, "message too big", 15) == 0);
    n = ws_frame_close(c, WS_CLOSE_NO_STATUS, "ignored");
    CHECK_INT(n, 2);
    CHECK_INT(c[1], 0);

    /* A long reason is cut to 123 bytes, never inside a character. */
    char reason[300] = "";
    for (int i = 0; i < 100; i++)
        strcat(reason, "\xc3\xa9"); /* é, 2 bytes each */
    n = ws_frame_close(c, 1000, reason);
    CHECK(n <= WS_MAX_CONTROL_FRAME);
    CHECK_INT(c[1], n - 2);
    CHECK((c[1] & 1) == 0); /* 2 + an even number of bytes */
    CHECK(utf8_valid(c + 4, n - 4));
    CHECK_INT(n - 4, 122);
}

int main(void)
{
    test_simple_text();
    test_byte_by_byte();
    test_several_frames_one_buffer();
    test_masking();
    test_reserved_bits_and_opcodes();
    test_control_frame_rules();
    test_binary();
    test_fragmentation_rules();
    test_control_inside_fragmented();
    test_too_big();
    test_huge_length_header();
    test_utf8();
    test_utf8_across_fragments();
    test_close_frames();
    test_failed_is_sticky();
    test_builders();
    return check_summary();
}
