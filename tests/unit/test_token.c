/* test_token — bearer tokens (token.c): token_hash against the published
 * SHA-256 test vectors (lowercase hex, 64 characters), and token_generate's
 * shape: "mcpd_" and 43 base64url characters whose last one carries only 4
 * bits of the 32 random bytes (so it is one of 16), all distinct. */
#include "check.h"
#include "token.h"

#include <stdlib.h>
#include <string.h>

static void test_hash(void)
{
    static const struct {
        const char *in, *want;
    } vectors[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    char out[TOKEN_HASH_LEN + 2];
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        memset(out, 'Z', sizeof out);
        CHECK_INT(token_hash(vectors[i].in, out), 0);
        CHECK_STR(out, vectors[i].want);
        CHECK(out[TOKEN_HASH_LEN + 1] == 'Z'); /* nothing past the NUL */
    }
    /* A million 'a's (the long FIPS 180-2 vector). */
    char *a = malloc(1000001);
    if (CHECK(a != NULL)) {
        memset(a, 'a', 1000000);
        a[1000000] = '\0';
        CHECK_INT(token_hash(a, out), 0);
        CHECK_STR(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
        free(a);
    }
    /* The hash is of the whole token: one character more or less differs. */
    char h1[TOKEN_HASH_LEN + 1], h2[TOKEN_HASH_LEN + 1];
    CHECK_INT(token_hash("mcpd_x", h1), 0);
    CHECK_INT(token_hash("mcpd_x ", h2), 0);
    CHECK(strcmp(h1, h2) != 0);
    CHECK_INT(token_hash("mcpd_x", h2), 0);
    CHECK_STR(h1, h2);
}

static int cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static void test_generate(void)
{
    enum { N = 2000 };
    char(*tokens)[TOKEN_LEN + 1] = calloc(N, sizeof *tokens);
    if (!CHECK(tokens != NULL))
        return;
    int shape = 1, last_ok = 1;
    int seen_last[64] = {0}, seen_mid[64] = {0};
    for (int i = 0; i < N; i++) {
        char t[TOKEN_LEN + 2];
        memset(t, 'Z', sizeof t);
        if (token_generate(t) != 0) {
            shape = 0;
            break;
        }
        shape &= t[TOKEN_LEN] == '\0' && t[TOKEN_LEN + 1] == 'Z';
        shape &= strlen(t) == TOKEN_LEN && strncmp(t, "mcpd_", 5) == 0;
        shape &= strspn(t + 5, B64URL) == TOKEN_LEN - 5;
        /* 32 bytes are 256 bits; 43 characters hold 258: the last one's two
         * low bits are zero. */
        const char *last = strchr(B64URL, t[TOKEN_LEN - 1]);
        last_ok &= last != NULL && (last - B64URL) % 4 == 0;
        if (last)
            seen_last[last - B64URL]++;
        const char *mid = strchr(B64URL, t[20]);
        if (mid)
            seen_mid[mid - B64URL]++;
        memcpy(tokens[i], t, TOKEN_LEN + 1);
    }
    CHECK(shape);
    CHECK(last_ok);
    /* Random enough to use the whole alphabet (2000 draws: the odds that a
     * value is missing by chance are about 1e-12). */
    int last_values = 0, mid_values = 0;
    for (int v = 0; v < 64; v++) {
        last_values += seen_last[v] > 0;
        mid_values += seen_mid[v] > 0;
    }
    CHECK_INT(last_values, 16);
    CHECK_INT(mid_values, 64);
    qsort(tokens, N, sizeof *tokens, cmp);
    int distinct = 1;
    for (int i = 1; i < N; i++)
        distinct &= strcmp(tokens[i - 1], tokens[i]) != 0;
    CHECK(distinct);
    free(tokens);
}

int main(void)
{
    test_hash();
    test_generate();
    return check_summary();
}
