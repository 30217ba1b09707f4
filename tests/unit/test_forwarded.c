/* test_forwarded — --trusted-proxies and X-Forwarded-For (forwarded.c,
 * pure): networks of both families, the named sets, the right-to-left walk
 * that stops at the first untrusted hop, forged and malformed hops, and
 * bad lists refused. */
#include "check.h"
#include "forwarded.h"

struct client_case {
    const char *trusted, *peer, *xff, *want;
};

static const struct client_case client_cases[] = {
    {"", "192.0.2.1", "198.51.100.7", "192.0.2.1"}, /* untrusted peer: header ignored */
    {"127.0.0.1", "127.0.0.1", "198.51.100.7", "198.51.100.7"},
    {"127.0.0.1", "127.0.0.1", NULL, "127.0.0.1"},
    {"127.0.0.1", "127.0.0.1", "", "127.0.0.1"},
    {"loopback", "127.0.0.1", " 198.51.100.7 ", "198.51.100.7"},
    /* the client forged a hop; the proxy appended the real one */
    {"loopback", "127.0.0.1", "203.0.113.1, 198.51.100.7", "198.51.100.7"},
    /* two trusted proxies in a row */
    {"loopback,10.0.0.0/8", "127.0.0.1", "198.51.100.7, 10.1.2.3", "198.51.100.7"},
    {"private", "172.18.0.5", "198.51.100.7", "198.51.100.7"},
    {"private", "172.32.0.5", "198.51.100.7", "172.32.0.5"}, /* outside 172.16/12 */
    {"loopback", "::1", "2001:db8::1", "2001:db8::1"},
    {"loopback", "::ffff:127.0.0.1", "198.51.100.7", "198.51.100.7"}, /* mapped */
    {"loopback", "127.0.0.1", "[2001:db8::2]", "2001:db8::2"},
    {"loopback", "127.0.0.1", "198.51.100.7:4711", "198.51.100.7"},
    /* an IPv4 client as a dual-stack proxy writes it: not cut at its first
     * colon (that left "", and every such client counted as the proxy) */
    {"loopback", "127.0.0.1", "::ffff:198.51.100.7", "198.51.100.7"},
    {"loopback", "127.0.0.1", "203.0.113.1, ::ffff:198.51.100.7", "198.51.100.7"},
    /* a malformed hop stops the walk at the last good address */
    {"loopback", "127.0.0.1", "198.51.100.7, garbage", "127.0.0.1"},
    {"loopback", "127.0.0.1", "unknown", "127.0.0.1"},
    /* every hop trusted: the leftmost one is all there is */
    {"loopback", "127.0.0.1", "127.0.0.2, 127.0.0.3", "127.0.0.2"},
    {"2001:db8::/32", "2001:db8:ffff::1", "192.0.2.9", "192.0.2.9"},
    {"2001:db8::/32", "2001:db9::1", "192.0.2.9", "2001:db9::1"},
    {"0.0.0.0/0", "192.0.2.1", "198.51.100.7", "198.51.100.7"},
};

static const char *const bad_lists[] = {
    "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/x", "nonsense", "10.0.0.1/-1", "256.0.0.1",
};

int main(void)
{
    for (size_t i = 0; i < sizeof client_cases / sizeof client_cases[0]; i++) {
        const struct client_case *c = &client_cases[i];
        struct forwarded *f = NULL;
        char err[200], got[FORWARDED_ADDR_MAX];
        if (!CHECK(forwarded_parse(c->trusted, &f, err, sizeof err) == 0))
            continue;
        forwarded_client(f, c->peer, c->xff, got);
        if (!check_record(strcmp(got, c->want) == 0, __FILE__, __LINE__, c->peer))
            printf("     trusted \"%s\" peer %s xff \"%s\": %s, want %s\n", c->trusted, c->peer,
                   c->xff ? c->xff : "(none)", got, c->want);
        forwarded_free(f);
    }
    for (size_t i = 0; i < sizeof bad_lists / sizeof bad_lists[0]; i++) {
        struct forwarded *f = NULL;
        char err[200] = "";
        CHECK_INT(forwarded_parse(bad_lists[i], &f, err, sizeof err), -1);
        CHECK(strstr(err, "--trusted-proxies") != NULL);
    }
    struct forwarded *f = NULL;
    char err[200];
    CHECK_INT(forwarded_parse(" 10.0.0.0/8 ,, 192.168.1.1 \t fc00::/7 ", &f, err, sizeof err), 0);
    CHECK_INT(forwarded_trusts(f, "10.255.0.1"), 1);
    CHECK_INT(forwarded_trusts(f, "11.0.0.1"), 0);
    CHECK_INT(forwarded_trusts(f, "192.168.1.1"), 1);
    CHECK_INT(forwarded_trusts(f, "192.168.1.2"), 0);
    CHECK_INT(forwarded_trusts(f, "fd00::1"), 1);
    CHECK_INT(forwarded_trusts(f, "not an address"), 0);
    forwarded_free(f);
    CHECK_INT(forwarded_parse(NULL, &f, err, sizeof err), 0);
    CHECK_INT(forwarded_trusts(f, "127.0.0.1"), 0);
    forwarded_free(f);
    return check_summary();
}
