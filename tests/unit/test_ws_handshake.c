/* test_ws_handshake — the RFC 6455 opening handshake's computations
 * (ws_handshake.c): Sec-WebSocket-Accept against the RFC's own example and
 * a second independent vector, which keys are well formed, and fresh keys
 * (well formed, their 22nd character carrying 2 bits, all distinct). */
#include "check.h"
#include "ws_handshake.h"

#include <stdlib.h>
#include <string.h>

static void test_accept(void)
{
    static const struct {
        const char *key, *accept;
    } vectors[] = {
        /* RFC 6455 section 1.3 */
        {"dGhlIHNhbXBsZSBub25jZQ==", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="},
        /* base64 SHA-1 of "x3JJHMbDL1EzLkh9GBhXDw==258EAFA5-E914-47DA-95CA-C5AB0DC85B11" */
        {"x3JJHMbDL1EzLkh9GBhXDw==", "HSmrc0sMlYUkAGmm5OPpG2HaGWk="},
    };
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        char out[30];
        memset(out, 'Z', sizeof out);
        CHECK_INT(ws_handshake_accept(vectors[i].key, out), 0);
        CHECK_STR(out, vectors[i].accept);
        CHECK(out[29] == 'Z');
    }
    /* Only the first 24 characters are read. */
    char out[29];
    CHECK_INT(ws_handshake_accept("dGhlIHNhbXBsZSBub25jZQ==trailing", out), 0);
    CHECK_STR(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

static void test_key_ok(void)
{
    static const struct {
        const char *key;
        int ok;
    } keys[] = {
        {"dGhlIHNhbXBsZSBub25jZQ==", 1},
        {"AAAAAAAAAAAAAAAAAAAAAA==", 1},
        {"++++//////++++//////09==", 1},
        {"dGhlIHNhbXBsZSBub25jZQ=", 0},   /* 23 */
        {"dGhlIHNhbXBsZSBub25jZQ===", 0}, /* 25 */
        {"dGhlIHNhbXBsZSBub25jZQ", 0},    /* no padding */
        {"dGhlIHNhbXBsZSBub25jZQAA", 0},
        {"dGhlIHNhbXBsZSBub25jZ===", 0}, /* padding too early */
        {"dGhlIHNhbXBsZSBub25jZQ=A", 0},
        {"dGhlIHNhbXBsZSBub25j-Q==", 0}, /* base64url is not base64 */
        {"dGhlIHNhbXBsZSBub25j_Q==", 0},
        {"dGhlIHNhbXBsZSBub25j Q==", 0},
        {" dGhlIHNhbXBsZSBub25jZQ==", 0},
        {"dGhlIHNhbXBsZSBub25jZQ== ", 0},
        {"dGhlIHNhbXBsZSBub25j\xc3\xa9==", 0},
        {"", 0},
        {NULL, 0},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int got = ws_handshake_key_ok(keys[i].key);
        if (!check_record(got == keys[i].ok, __FILE__, __LINE__,
                          keys[i].key ? keys[i].key : "(null)"))
            printf("     got %d, want %d\n", got, keys[i].ok);
    }
}

static int cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void test_new_key(void)
{
    enum { N = 1000 };
    char(*keys)[25] = calloc(N, sizeof *keys);
    if (!CHECK(keys != NULL))
        return;
    static const char last[] = "AQgw";
    int ok = 1, seen[4] = {0};
    for (int i = 0; i < N; i++) {
        char k[26];
        memset(k, 'Z', sizeof k);
        ok &= ws_handshake_new_key(k) == 0 && ws_handshake_key_ok(k) && k[25] == 'Z';
        /* 16 bytes end in 2 bits of data and 4 of padding: A, Q, g or w. */
        const char *p = strchr(last, k[21]);
        ok &= p != NULL && k[21] != '\0';
        if (p)
            seen[p - last]++;
        memcpy(keys[i], k, 25);
    }
    CHECK(ok);
    CHECK(seen[0] && seen[1] && seen[2] && seen[3]);
    qsort(keys, N, sizeof *keys, cmp);
    int distinct = 1;
    for (int i = 1; i < N; i++)
        distinct &= strcmp(keys[i - 1], keys[i]) != 0;
    CHECK(distinct);
    free(keys);
}

int main(void)
{
    test_accept();
    test_key_ok();
    test_new_key();
    return check_summary();
}
