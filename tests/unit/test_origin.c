/* test_origin — DNS-rebinding protection (origin.c, pure): the loopback
 * defaults, ports ignored, IPv6 brackets, case, "*", full-origin entries,
 * missing headers, and look-alike names refused. */
#include "check.h"
#include "origin.h"

struct host_case {
    const char *hosts, *host;
    int want;
};

static const struct host_case host_cases[] = {
    {NULL, "localhost", 1},
    {NULL, "localhost:8080", 1},
    {NULL, "127.0.0.1:9", 1},
    {NULL, "[::1]:443", 1},
    {NULL, "LOCALHOST", 1},
    {NULL, "evil.example", 0},
    {NULL, "localhost.evil.example", 0},
    {NULL, "127.0.0.1.nip.io", 0},
    {NULL, NULL, 0}, /* HTTP/1.0 without Host */
    {NULL, "", 0},
    {"mcp.example.com", "mcp.example.com:443", 1},
    {"mcp.example.com", "localhost", 0},
    {"mcp.example.com, localhost", "localhost:1", 1},
    {"*", "anything.example", 1},
};

struct origin_case {
    const char *origins, *origin;
    int want;
};

static const struct origin_case origin_cases[] = {
    {NULL, NULL, 1}, /* not a browser */
    {NULL, "http://localhost:3000", 1},
    {NULL, "https://127.0.0.1", 1},
    {NULL, "http://[::1]:8080", 1},
    {NULL, "https://evil.example", 0},
    {NULL, "http://localhost.evil.example", 0},
    {NULL, "null", 0},
    {"app.example.com", "https://app.example.com", 1},
    {"app.example.com", "https://app.example.com:8443", 1},
    {"https://app.example.com", "https://app.example.com", 1},
    {"https://app.example.com", "http://app.example.com", 0},
    {"*", "https://whatever.example", 1},
};

int main(void)
{
    for (size_t i = 0; i < sizeof host_cases / sizeof host_cases[0]; i++) {
        const struct host_case *c = &host_cases[i];
        struct origin_policy *p = origin_policy_new(c->hosts, NULL);
        if (!CHECK(p != NULL))
            continue;
        int got = origin_host_allowed(p, c->host);
        if (!check_record(got == c->want, __FILE__, __LINE__, c->host ? c->host : "(none)"))
            printf("     hosts \"%s\" Host \"%s\": %d, want %d\n",
                   c->hosts ? c->hosts : "(default)", c->host ? c->host : "(none)", got, c->want);
        origin_policy_free(p);
    }
    for (size_t i = 0; i < sizeof origin_cases / sizeof origin_cases[0]; i++) {
        const struct origin_case *c = &origin_cases[i];
        struct origin_policy *p = origin_policy_new(NULL, c->origins);
        if (!CHECK(p != NULL))
            continue;
        int got = origin_origin_allowed(p, c->origin);
        if (!check_record(got == c->want, __FILE__, __LINE__, c->origin ? c->origin : "(none)"))
            printf("     origins \"%s\" Origin \"%s\": %d, want %d\n",
                   c->origins ? c->origins : "(default)", c->origin ? c->origin : "(none)", got,
                   c->want);
        origin_policy_free(p);
    }
    return check_summary();
}
