/* test_mcp_headers — the 2026-07-28 request headers against their body
 * (service/core/mcp_headers.c): MCP-Protocol-Version, Mcp-Method,
 * Mcp-Name (optional whitespace, case of the value, its base64 form), and
 * the Mcp-Param-* headers of x-mcp-header arguments with their strict
 * base64 form, numbers compared as numbers. */
#include "check.h"
#include "mcp_headers.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static json_t *msg(const char *text)
{
    json_t *m = json_loads(text, 0, NULL);
    CHECK(m != NULL);
    return m;
}

#define CALL                                                                                       \
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","       \
    "\"arguments\":{\"region\":\"Hello\",\"n\":3},\"_meta\":{"                                     \
    "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}"

static void test_method_and_name(void)
{
    json_t *m = msg(CALL);
    CHECK(mcp_headers_check("2026-07-28", "tools/call", "echo", m) == NULL);
    CHECK(mcp_headers_check("2026-07-28", "tools/call", "  echo\t", m) == NULL);
    CHECK(mcp_headers_check(NULL, "tools/call", "echo", m) != NULL);
    CHECK(mcp_headers_check("2025-11-25", "tools/call", "echo", m) != NULL);
    CHECK(mcp_headers_check("2026-07-28", NULL, "echo", m) != NULL);
    CHECK(mcp_headers_check("2026-07-28", "TOOLS/CALL", "echo", m) != NULL);
    CHECK(mcp_headers_check("2026-07-28", "tools/list", "echo", m) != NULL);
    CHECK(mcp_headers_check("2026-07-28", "tools/call", NULL, m) != NULL);
    CHECK(mcp_headers_check("2026-07-28", "tools/call", "Echo", m) != NULL);
    CHECK(mcp_headers_check("2026-07-28", "tools/call", "echo2", m) != NULL);
    CHECK(mcp_headers_check("2026-07-28", "tools/call", "ech", m) != NULL);
    json_decref(m);

    /* A name or URI a header cannot carry raw comes base64-wrapped, as
     * Mcp-Param values do. */
    m = msg("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/read\",\"params\":{"
            "\"uri\":\"test://caf\u00e9\",\"_meta\":{"
            "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}");
    CHECK(mcp_headers_check("2026-07-28", "resources/read", "=?base64?dGVzdDovL2NhZsOp?=", m) ==
          NULL);
    CHECK(mcp_headers_check("2026-07-28", "resources/read", " =?base64?dGVzdDovL2NhZsOp?= ", m) ==
          NULL);
    CHECK(mcp_headers_check("2026-07-28", "resources/read", "=?base64?dGVzdDovL2NhZg==?=", m) !=
          NULL); /* test://caf */
    CHECK(mcp_headers_check("2026-07-28", "resources/read", "=?base64?!!!?=", m) != NULL);
    json_decref(m);

    /* What Mcp-Name names, per method. */
    json_t *p = json_pack("{s:s, s:s, s:s}", "name", "n1", "uri", "test://r", "taskId", "t1");
    CHECK_STR(mcp_headers_name_of("tools/call", p), "n1");
    CHECK_STR(mcp_headers_name_of("prompts/get", p), "n1");
    CHECK_STR(mcp_headers_name_of("resources/read", p), "test://r");
    CHECK_STR(mcp_headers_name_of("tasks/get", p), "t1");
    CHECK(mcp_headers_name_of("tools/list", p) == NULL);
    /* Removed with 2026-07-28: no name to check; the core answers 404. */
    CHECK(mcp_headers_name_of("tasks/result", p) == NULL);
    CHECK(mcp_headers_name_of("tasks/list", p) == NULL);
    CHECK(mcp_headers_name_of(NULL, p) == NULL);
    json_decref(p);
    /* A method that names nothing needs no Mcp-Name; a request without a
     * method (a response) is the core's to refuse. */
    m = msg("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{}}");
    CHECK(mcp_headers_check("2026-07-28", "tools/list", NULL, m) == NULL);
    json_decref(m);
    m = msg("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
    CHECK(mcp_headers_check("2026-07-28", NULL, NULL, m) == NULL);
    json_decref(m);
}

struct headers {
    const char *name, *value;
};

static const char *get(void *ud, const char *name)
{
    for (const struct headers *h = ud; h->name; h++)
        if (strcasecmp(h->name, name) == 0)
            return h->value;
    return NULL;
}

static const char *params(const char *region_header)
{
    static json_t *m, *map;
    if (!m) {
        m = msg(CALL);
        map = json_pack("{s:s}", "Region", "region");
    }
    struct headers h[] = {{"Mcp-Param-Region", region_header}, {NULL, NULL}};
    return mcp_headers_check_params(map, json_object_get(json_object_get(m, "params"), "arguments"),
                                    get, region_header ? h : &h[1]);
}

static void test_params(void)
{
    CHECK(params("Hello") == NULL);
    CHECK(params("=?base64?SGVsbG8=?=") == NULL);    /* "Hello" */
    CHECK(params("=?base64?SGVsbG8?=") != NULL);     /* padding missing */
    CHECK(params("=?base64?SGVs!!!bG8=?=") != NULL); /* not the alphabet */
    CHECK(params("=?base64?SGVsbG8=") != NULL);      /* no ?=: literal, and not "Hello" */
    CHECK(params("SGVsbG8=") != NULL);               /* literal */
    CHECK(params("hello") != NULL);
    CHECK(params("=?base64?SGVsbG9v?=") != NULL); /* "Helloo" */
    CHECK(params(NULL) != NULL);                  /* the argument came without its header */

    /* A number argument travels as its decimal text. */
    json_t *m = msg(CALL), *map = json_pack("{s:s}", "N", "n");
    json_t *args = json_object_get(json_object_get(m, "params"), "arguments");
    struct headers three[] = {{"Mcp-Param-N", "3"}, {NULL, NULL}};
    struct headers four[] = {{"Mcp-Param-N", "4"}, {NULL, NULL}};
    CHECK(mcp_headers_check_params(map, args, get, three) == NULL);
    CHECK(mcp_headers_check_params(map, args, get, four) != NULL);
    /* ... and is compared as a number: 3.0 and 3e0 carry 3; blanks, hex,
     * "inf" and a sign alone do not. */
    static const char *same[] = {"3.0", "3e0", "0.3E1", "=?base64?My4w?="};
    static const char *other[] = {" 3", "0x3", "3.", "+3", "inf", "nan", "-", "", "3.1", "03x"};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        struct headers h[] = {{"Mcp-Param-N", same[i]}, {NULL, NULL}};
        CHECK(mcp_headers_check_params(map, args, get, h) == NULL);
    }
    for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
        struct headers h[] = {{"Mcp-Param-N", other[i]}, {NULL, NULL}};
        CHECK(mcp_headers_check_params(map, args, get, h) != NULL);
    }
    json_t *real = json_pack("{s:f}", "n", 2.5);
    struct headers r_same[] = {{"Mcp-Param-N", "25e-1"}, {NULL, NULL}};
    struct headers r_other[] = {{"Mcp-Param-N", "2.50001"}, {NULL, NULL}};
    CHECK(mcp_headers_check_params(map, real, get, r_same) == NULL);
    CHECK(mcp_headers_check_params(map, real, get, r_other) != NULL);
    json_decref(real);
    /* A header for an argument the body lacks. */
    json_t *none = json_object();
    CHECK(mcp_headers_check_params(map, none, get, three) != NULL);
    CHECK(mcp_headers_check_params(map, none, get, &three[1]) == NULL);
    json_decref(none);

    /* NUL on either side: compared whole, so that what a proxy reads in the
     * header is what the tool receives. */
    json_t *nul = json_pack("{s:s%}", "region", "eu\0us", (size_t)5);
    struct headers eu[] = {{"Mcp-Param-Region", "eu"}, {NULL, NULL}};
    struct headers eu_nul[] = {{"Mcp-Param-Region", "=?base64?ZXUAdXM=?="}, {NULL, NULL}};
    json_t *region = json_pack("{s:s}", "Region", "region"),
           *plain = json_pack("{s:s}", "region", "eu");
    CHECK(mcp_headers_check_params(region, nul, get, eu) != NULL);
    CHECK(mcp_headers_check_params(region, plain, get, eu_nul) != NULL);
    CHECK(mcp_headers_check_params(region, nul, get, eu_nul) == NULL);
    json_decref(region);
    json_decref(plain);
    json_decref(nul);
    json_decref(map);
    json_decref(m);
}

int main(void)
{
    test_method_and_name();
    test_params();
    return check_summary();
}
