/* test_bridge_modern — mcp-bridge's side of the 2026-07-28 request headers
 * (bridge/modern.c, bridge/tool_headers.c): the Value Encoding examples of
 * the specification, headers that mcpd's own checker (mcp_headers.c)
 * accepts for every kind of value, and the x-mcp-header declarations a
 * client must refuse. */
#include "check.h"
#include "mcp_headers.h"
#include "modern.h"
#include "tool_headers.h"

#include <stdlib.h>
#include <strings.h>

static void check_encoding(json_t *v, const char *want, int line)
{
    char *got = modern_encode_value(v);
    int ok = want ? got && strcmp(got, want) == 0 : got == NULL;
    check_record(ok, __FILE__, line, want ? want : "(no header)");
    if (!ok)
        printf("     got %s\n", got ? got : "(none)");
    free(got);
    json_decref(v);
}
#define ENC(v, want) check_encoding(v, want, __LINE__)

/* The value of header name in list ("Name: v" or "Name;"), for mcpd's checker. */
static const char *from_list(void *ud, const char *name)
{
    size_t n = strlen(name);
    for (struct curl_slist *l = ud; l; l = l->next) {
        if (strncasecmp(l->data, name, n) != 0)
            continue;
        if (l->data[n] == ';' && !l->data[n + 1])
            return "";
        if (l->data[n] == ':')
            return l->data + n + 2;
    }
    return NULL;
}

/* A tools/call with argument v in "v", its headers as the bridge makes
 * them: mcpd's checks accept them. */
static void check_round_trip(json_t *v, int line)
{
    json_t *m = json_pack("{s:s,s:i,s:s,s:{s:s,s:{s:o},s:{s:s}}}", "jsonrpc", "2.0", "id", 1,
                          "method", "tools/call", "params", "name", "t", "arguments", "v", v,
                          "_meta", "io.modelcontextprotocol/protocolVersion", "2026-07-28");
    json_t *map = json_pack("{s:[s]}", "V", "v");
    json_t *flat = json_pack("{s:s}", "V", "v");
    struct curl_slist *h = NULL;
    CHECK_INT(modern_headers(m, map, &h), 0);
    const char *why = mcp_headers_check(from_list(h, "MCP-Protocol-Version"),
                                        from_list(h, "Mcp-Method"), from_list(h, "Mcp-Name"), m);
    if (!why)
        why = mcp_headers_check_params(
            flat, json_object_get(json_object_get(m, "params"), "arguments"), from_list, h);
    check_record(why == NULL, __FILE__, line, why ? why : "");
    curl_slist_free_all(h);
    json_decref(m);
    json_decref(map);
    json_decref(flat);
}
#define ROUND(v) check_round_trip(v, __LINE__)

static void check_tool(const char *schema, int valid, int line)
{
    json_t *s = json_loads(schema, 0, NULL);
    const char *why = NULL;
    json_t *map = tool_headers_of(s, &why);
    check_record((map != NULL) == valid, __FILE__, line, schema);
    json_decref(map);
    json_decref(s);
}
#define VALID(s) check_tool(s, 1, __LINE__)
#define INVALID(s) check_tool(s, 0, __LINE__)

int main(void)
{
    /* the specification's Value Encoding table */
    ENC(json_string("us-west1"), "us-west1");
    ENC(json_string("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
    ENC(json_string(" padded "), "=?base64?IHBhZGRlZCA=?=");
    ENC(json_string("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
    ENC(json_string("=?base64?literal?="), "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=");
    ENC(json_string("us west 1"), "us west 1");
    ENC(json_string("\tindented"), "=?base64?CWluZGVudGVk?=");
    ENC(json_string(""), "");
    ENC(json_integer(42), "42");
    ENC(json_integer(-7), "-7");
    ENC(json_true(), "true");
    ENC(json_false(), "false");
    ENC(json_null(), NULL);
    ENC(json_object(), NULL);

    ROUND(json_string("us-west1"));
    ROUND(json_string("Hello, 世界"));
    ROUND(json_string(" padded "));
    ROUND(json_string("a\r\nInjected: yes"));
    ROUND(json_string("=?base64?literal?="));
    ROUND(json_string(""));
    ROUND(json_integer(9007199254740991));
    ROUND(json_false());

    VALID("{\"type\":\"object\",\"properties\":{\"r\":{\"type\":\"string\",\"x-mcp-header\":"
          "\"Region\"},\"q\":{\"type\":\"string\"}}}");
    VALID("{\"type\":\"object\",\"properties\":{\"o\":{\"type\":\"object\",\"properties\":{\"i\":"
          "{\"type\":\"integer\",\"x-mcp-header\":\"Inner\"}}}}}");
    VALID("{\"type\":\"object\"}");
    INVALID("{\"properties\":{\"v\":{\"type\":\"string\",\"x-mcp-header\":\"\"}}}");
    INVALID("{\"properties\":{\"v\":{\"type\":\"number\",\"x-mcp-header\":\"N\"}}}");
    INVALID("{\"properties\":{\"v\":{\"type\":\"object\",\"x-mcp-header\":\"O\"}}}");
    INVALID("{\"properties\":{\"v\":{\"type\":\"null\",\"x-mcp-header\":\"Nil\"}}}");
    INVALID("{\"properties\":{\"v\":{\"x-mcp-header\":\"NoType\"}}}");
    INVALID("{\"properties\":{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"My\"},"
            "\"b\":{\"type\":\"string\",\"x-mcp-header\":\"my\"}}}");
    INVALID("{\"properties\":{\"v\":{\"type\":\"string\",\"x-mcp-header\":\"A B\"}}}");
    INVALID("{\"properties\":{\"v\":{\"type\":\"string\",\"x-mcp-header\":\"A:B\"}}}");
    INVALID("{\"properties\":{\"v\":{\"type\":\"string\",\"x-mcp-header\":\"R\\u00e9gion\"}}}");
    INVALID("{\"properties\":{\"v\":{\"type\":\"string\",\"x-mcp-header\":\"R\\t1\"}}}");
    INVALID("{\"properties\":{\"v\":{\"type\":\"string\",\"x-mcp-header\":7}}}");
    INVALID("{\"properties\":{\"xs\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
            "\"x-mcp-header\":\"X\"}}}}");
    INVALID("{\"anyOf\":[{\"properties\":{\"v\":{\"type\":\"string\",\"x-mcp-header\":\"V\"}}}]}");
    INVALID("{\"$defs\":{\"d\":{\"type\":\"string\",\"x-mcp-header\":\"D\"}}}");
    INVALID("{\"type\":\"string\",\"x-mcp-header\":\"Root\"}");

    /* tools/list: the invalid tool goes, the valid one is learned */
    json_t *table = json_object();
    json_t *result =
        json_loads("{\"tools\":[{\"name\":\"ok\",\"inputSchema\":{\"properties\":{\"r\":{\"type\":"
                   "\"string\",\"x-mcp-header\":\"Region\"}}}},{\"name\":\"bad\",\"inputSchema\":{"
                   "\"properties\":{\"n\":{\"type\":\"number\",\"x-mcp-header\":\"N\"}}}}]}",
                   0, NULL);
    CHECK_INT(tool_headers_learn(table, result), 1);
    CHECK_INT(json_array_size(json_object_get(result, "tools")), 1);
    CHECK(json_object_get(json_object_get(table, "ok"), "Region") != NULL);
    CHECK(json_object_get(table, "bad") == NULL);
    json_decref(result);
    json_decref(table);
    return check_summary();
}
