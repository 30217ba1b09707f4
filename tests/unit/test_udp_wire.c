/* test_udp_wire — the UDP transport's datagram codec, cookie and
 * retransmission timer (service/transports/udp_wire.c), which are pure:
 *   - a message that fits goes whole with "_udp_seq" added, and decodes
 *     back to the same message without the envelope;
 *   - one that does not (or that is not an object) goes in fragments of at
 *     most max_datagram bytes, numbered [i,n], whose data reassembles to
 *     the exact bytes (multi-byte UTF-8 cut anywhere);
 *   - envelopes that are malformed are refused with a reason; unknown
 *     _udp_ members are ignored;
 *   - acks and cookie replies encode as specified;
 *   - the cookie depends on the key, the address, the port and the window;
 *   - the RTO follows RFC 6298 and backs off, capped. */
#include "check.h"
#include "udp_wire.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

static void test_whole(void)
{
    const char *msg = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
    size_t len = strlen(msg);
    CHECK_INT(udp_wire_count(msg, len, 1200), 1);
    size_t dl;
    char *d = udp_wire_encode(msg, len, 0, 1, 7, NULL, 1200, &dl);
    CHECK_STR(d, "{\"_udp_seq\":7,\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
    CHECK_INT(dl, strlen(d));
    struct udp_wire_in in;
    char why[160];
    CHECK_INT(udp_wire_decode(d, dl, &in, why, sizeof why), 0);
    CHECK_INT(in.has_seq, 1);
    CHECK_INT(in.seq, 7);
    CHECK_INT(in.frag_n, 0);
    CHECK_STR(in.data, msg);
    udp_wire_in_clear(&in);
    free(d);
    /* {} has no member to put a comma before */
    d = udp_wire_encode("{}", 2, 0, 1, 1, NULL, 1200, &dl);
    CHECK_STR(d, "{\"_udp_seq\":1}");
    free(d);
    /* a client's: the cookie first */
    d = udp_wire_encode(msg, len, 0, 1, 2, "0123456789abcdef", 1200, &dl);
    CHECK_STR(d,
              "{\"_udp_cookie\":\"0123456789abcdef\",\"_udp_seq\":2,\"jsonrpc\":\"2.0\",\"id\":1,"
              "\"method\":\"ping\"}");
    free(d);
}

/* Encodes msg into fragments, checks each datagram's size and decodes
 * them back in order. */
static void roundtrip_cookie(const char *msg, size_t len, size_t max, const char *cookie)
{
    size_t n = udp_wire_count(msg, len, max);
    CHECK(n >= 1);
    char *back = malloc(len + 1);
    size_t got = 0;
    for (size_t i = 0; i < n; i++) {
        size_t dl;
        char *d = udp_wire_encode(msg, len, i, n, 100 + i, cookie, max, &dl);
        CHECK(dl <= max);
        struct udp_wire_in in;
        char why[160];
        CHECK_INT(udp_wire_decode(d, dl, &in, why, sizeof why), 0);
        CHECK_INT(in.seq, 100 + i);
        CHECK_STR(in.cookie, cookie ? cookie : "");
        if (n > 1 || msg[0] != '{') {
            CHECK_INT(in.frag_i, i);
            CHECK_INT(in.frag_n, n);
        }
        if (got + in.len <= len)
            memcpy(back + got, in.data, in.len);
        got += in.len;
        udp_wire_in_clear(&in);
        free(d);
    }
    CHECK_INT(got, len);
    CHECK(got == len && memcmp(back, msg, len) == 0);
    free(back);
}

/* Both ways: mcpd's datagrams (no cookie) and a client's (with one). */
static void roundtrip_fragments(const char *msg, size_t len, size_t max)
{
    roundtrip_cookie(msg, len, max, NULL);
    roundtrip_cookie(msg, len, max, "0123456789abcdef");
}

static void test_fragments(void)
{
    /* a large message with multi-byte UTF-8 everywhere */
    size_t len = 20000;
    char *msg = malloc(len + 1);
    strcpy(msg, "{\"t\":\"");
    size_t o = strlen(msg);
    while (o + 4 < len) {
        memcpy(msg + o, "\xc3\xbc", 2); /* ü */
        o += 2;
    }
    msg[o++] = '"';
    msg[o++] = '}';
    msg[o] = '\0';
    roundtrip_fragments(msg, o, 1200);
    roundtrip_fragments(msg, o, 256);
    roundtrip_fragments(msg, o, 65507);
    /* lengths around the fragment size (bytes that are no object: always
     * fragments, whatever their length) */
    for (size_t n = 1; n < 3000; n += 97)
        roundtrip_fragments(msg + 1, n, 300);
    /* a batch (an array) cannot carry _udp_seq: it goes as a fragment */
    const char *batch = "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]";
    CHECK_INT(udp_wire_count(batch, strlen(batch), 1200), 1);
    roundtrip_fragments(batch, strlen(batch), 1200);
    /* too small a datagram for anything */
    CHECK_INT(udp_wire_count(msg, o, 100), 0);
    free(msg);
}

static void refused(const char *d, const char *want)
{
    struct udp_wire_in in;
    char why[160] = "";
    int rc = udp_wire_decode(d, strlen(d), &in, why, sizeof why);
    if (!check_record(rc == -1, __FILE__, __LINE__, d))
        return;
    if (!check_record(strstr(why, want) != NULL, __FILE__, __LINE__, want))
        printf("     got \"%s\"\n", why);
}

static void test_malformed(void)
{
    refused("not json", "one JSON object");
    refused("[1,2]", "one JSON object");
    refused("{\"_udp_seq\":0,\"id\":1}", "_udp_seq must be an integer from 1");
    refused("{\"_udp_seq\":\"1\",\"id\":1}", "_udp_seq");
    refused("{\"_udp_ack\":-1}", "_udp_ack");
    refused("{\"_udp_sack\":[0]}", "_udp_sack");
    refused("{\"_udp_seq\":1,\"_udp_frag\":[2,2],\"_udp_data\":\"\"}", "_udp_frag");
    refused("{\"_udp_seq\":1,\"_udp_frag\":[0,2],\"_udp_data\":\"a\"}", "base64");
    refused("{\"_udp_seq\":1,\"_udp_frag\":[0,2]}", "_udp_data");
    refused("{\"_udp_seq\":1,\"_udp_frag\":[0,2],\"_udp_data\":\"\",\"id\":1}", "no other member");
    refused("{\"_udp_seq\":1}", "carries a message or a fragment");
    refused("{\"id\":1,\"method\":\"x\"}", "needs _udp_seq");
    refused("{\"_udp_seq\":1,\"_udp_data\":\"\"}", "needs _udp_frag");
    /* duplicate keys and deep nesting: not one (acceptable) JSON object */
    refused("{\"_udp_seq\":1,\"_udp_seq\":2,\"id\":1}", "one JSON object");
    char deep[1200];
    size_t o = (size_t)sprintf(deep, "{\"_udp_seq\":1,\"a\":");
    for (int i = 0; i < 300; i++)
        deep[o++] = '[';
    for (int i = 0; i < 300; i++)
        deep[o++] = ']';
    deep[o++] = '}';
    deep[o] = '\0';
    refused(deep, "one JSON object");

    /* control datagrams, and unknown _udp_ members ignored */
    struct udp_wire_in in;
    char why[160];
    const char *ack = "{\"_udp_cookie\":\"0123456789abcdef\",\"_udp_ack\":5,\"_udp_sack\":[7,9],"
                      "\"_udp_hello\":\"x\"}";
    CHECK_INT(udp_wire_decode(ack, strlen(ack), &in, why, sizeof why), 0);
    CHECK_INT(in.has_seq, 0);
    CHECK_INT(in.has_ack, 1);
    CHECK_INT(in.ack, 5);
    CHECK_INT(in.nsack, 2);
    CHECK_INT(in.sack[1], 9);
    CHECK_STR(in.cookie, "0123456789abcdef");
    CHECK(in.data == NULL);
    udp_wire_in_clear(&in);
    /* a cookie of the wrong length is not one */
    const char *bad = "{\"_udp_cookie\":\"abc\"}";
    CHECK_INT(udp_wire_decode(bad, strlen(bad), &in, why, sizeof why), 0);
    CHECK_STR(in.cookie, "");
}

static void test_control(void)
{
    char buf[256];
    uint64_t sack[] = {4, 6};
    udp_wire_ack(2, sack, 2, buf, sizeof buf);
    CHECK_STR(buf, "{\"_udp_ack\":2,\"_udp_sack\":[4,6]}");
    udp_wire_ack(0, NULL, 0, buf, sizeof buf);
    CHECK_STR(buf, "{\"_udp_ack\":0}");
    udp_wire_cookie_reply("0123456789abcdef", 0, buf, sizeof buf);
    CHECK_STR(buf, "{\"_udp_cookie\":\"0123456789abcdef\"}");
    udp_wire_cookie_reply("0123456789abcdef", 1, buf, sizeof buf);
    CHECK_STR(buf, "{\"_udp_cookie\":\"0123456789abcdef\",\"_udp_reset\":true}");
}

static void test_cookie(void)
{
    uint8_t k1[16] = {1}, k2[16] = {2};
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(1000)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    struct sockaddr_in b = a;
    b.sin_port = htons(1001);
    struct sockaddr_in c = a;
    inet_pton(AF_INET, "127.0.0.2", &c.sin_addr);
    char x[17], y[17];
    udp_wire_cookie(k1, (struct sockaddr *)&a, 5, x);
    CHECK_INT(strlen(x), UDP_WIRE_COOKIE_LEN);
    udp_wire_cookie(k1, (struct sockaddr *)&a, 5, y);
    CHECK_STR(x, y);
    udp_wire_cookie(k2, (struct sockaddr *)&a, 5, y);
    CHECK(strcmp(x, y) != 0);
    udp_wire_cookie(k1, (struct sockaddr *)&b, 5, y);
    CHECK(strcmp(x, y) != 0);
    udp_wire_cookie(k1, (struct sockaddr *)&c, 5, y);
    CHECK(strcmp(x, y) != 0);
    udp_wire_cookie(k1, (struct sockaddr *)&a, 6, y);
    CHECK(strcmp(x, y) != 0);
    struct sockaddr_in6 six = {.sin6_family = AF_INET6, .sin6_port = htons(1000)};
    inet_pton(AF_INET6, "::1", &six.sin6_addr);
    udp_wire_cookie(k1, (struct sockaddr *)&six, 5, y);
    CHECK(strcmp(x, y) != 0);
}

static void test_rto(void)
{
    struct udp_rto r;
    udp_rto_init(&r, 200, 100, 4000);
    CHECK_INT(udp_rto_backoff(&r, 0), 200);
    CHECK_INT(udp_rto_backoff(&r, 1), 400);
    CHECK_INT(udp_rto_backoff(&r, 10), 4000);
    udp_rto_sample(&r, 1); /* loopback: clamped to the minimum */
    CHECK_INT(r.rto, 100);
    udp_rto_init(&r, 200, 100, 4000);
    udp_rto_sample(&r, 400);
    CHECK_INT(r.srtt, 400);
    CHECK_INT(r.rttvar, 200);
    CHECK_INT(r.rto, 1200);
    udp_rto_sample(&r, 10000);
    CHECK_INT(r.rto, 4000);
}

int main(void)
{
    test_whole();
    test_fragments();
    test_malformed();
    test_control();
    test_cookie();
    test_rto();
    return check_summary();
}
