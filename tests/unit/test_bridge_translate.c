/* test_bridge_translate — the JSON of mcp-bridge's 2025 ↔ 2026-07-28
 * translation (bridge/translate_shape.c): which refusals of initialize mean
 * a 2026-07-28-only server, which server/discover results it can translate
 * for, the initialize result built from one, the _meta a request gains, and
 * the capability an input request needs. */
#include "check.h"
#include "translate_shape.h"

#include <jansson.h>
#include <stdlib.h>

static json_t *parse(const char *text)
{
    json_t *v = json_loads(text, 0, NULL);
    if (!v)
        printf("bad test JSON: %s\n", text);
    return v;
}

static int refusal(const char *error)
{
    json_t *e = parse(error);
    int r = translate_shape_refusal(e);
    json_decref(e);
    return r;
}

static int discover_ok(const char *result, int only_stateless)
{
    json_t *d = parse(result);
    int r = translate_shape_discover_ok(d, only_stateless);
    json_decref(d);
    return r;
}

static void check_initialize_result(void)
{
    json_t *d =
        parse("{\"supportedVersions\":[\"2026-07-28\"],\"capabilities\":{\"tools\":{"
              "\"listChanged\":true},\"resources\":{\"subscribe\":true},\"extensions\":{"
              "\"x\":{}}},\"instructions\":\"hi\",\"_meta\":{"
              "\"io.modelcontextprotocol/serverInfo\":{\"name\":\"s\",\"version\":\"1\"}}}");
    json_t *p = parse("{\"protocolVersion\":\"2025-06-18\"}");
    json_t *r = translate_shape_initialize_result(d, p);
    CHECK_STR(json_string_value(json_object_get(r, "protocolVersion")), "2025-06-18");
    json_t *caps = json_object_get(r, "capabilities");
    CHECK(json_is_object(json_object_get(caps, "tools")));
    CHECK(!json_object_get(json_object_get(caps, "tools"), "listChanged"));
    CHECK(!json_object_get(json_object_get(caps, "resources"), "subscribe"));
    CHECK(!json_object_get(caps, "extensions"));
    CHECK(json_is_object(json_object_get(caps, "logging")));
    CHECK_STR(json_string_value(json_object_get(json_object_get(r, "serverInfo"), "name")), "s");
    CHECK_STR(json_string_value(json_object_get(r, "instructions")), "hi");
    /* the discover result is not changed */
    CHECK(json_object_get(json_object_get(json_object_get(d, "capabilities"), "tools"),
                          "listChanged"));
    json_decref(r);
    json_decref(p);

    /* an unknown revision gets the latest 2025 one; no serverInfo: a placeholder */
    p = parse("{\"protocolVersion\":\"2099-01-01\"}");
    json_t *bare = parse("{\"supportedVersions\":[\"2026-07-28\"]}");
    r = translate_shape_initialize_result(bare, p);
    CHECK_STR(json_string_value(json_object_get(r, "protocolVersion")), TRANSLATE_LATEST_LEGACY);
    CHECK(json_is_string(json_object_get(json_object_get(r, "serverInfo"), "version")));
    CHECK(json_is_object(json_object_get(r, "capabilities")));
    CHECK(!json_object_get(r, "instructions"));
    json_decref(r);
    json_decref(p);
    json_decref(bare);
    json_decref(d);
}

static void check_request(void)
{
    json_t *m = parse("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{"
                      "\"name\":\"echo\",\"_meta\":{\"progressToken\":\"p\"}}}");
    json_t *caps = parse("{\"elicitation\":{}}");
    json_t *info = parse("{\"name\":\"c\",\"version\":\"1\"}");
    json_t *t = translate_shape_request(m, caps, info, "warning");
    json_t *meta = json_object_get(json_object_get(t, "params"), "_meta");
    CHECK_STR(json_string_value(json_object_get(meta, "io.modelcontextprotocol/protocolVersion")),
              "2026-07-28");
    CHECK(json_equal(json_object_get(meta, "io.modelcontextprotocol/clientCapabilities"), caps));
    CHECK(json_equal(json_object_get(meta, "io.modelcontextprotocol/clientInfo"), info));
    CHECK_STR(json_string_value(json_object_get(meta, "io.modelcontextprotocol/logLevel")),
              "warning");
    CHECK_STR(json_string_value(json_object_get(meta, "progressToken")), "p");
    CHECK(!json_object_get(json_object_get(json_object_get(m, "params"), "_meta"),
                           "io.modelcontextprotocol/protocolVersion"));
    json_decref(t);

    /* no params at all, no level, no info */
    json_t *bare = parse("{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/list\"}");
    t = translate_shape_request(bare, NULL, NULL, NULL);
    meta = json_object_get(json_object_get(t, "params"), "_meta");
    CHECK(json_is_object(json_object_get(meta, "io.modelcontextprotocol/clientCapabilities")));
    CHECK(!json_object_get(meta, "io.modelcontextprotocol/clientInfo"));
    CHECK(!json_object_get(meta, "io.modelcontextprotocol/logLevel"));
    json_decref(t);
    json_decref(bare);
    json_decref(m);
    json_decref(caps);
    json_decref(info);
}

static const char *missing(const char *method, const char *params, const char *caps)
{
    json_t *p = parse(params), *c = parse(caps);
    const char *r = translate_shape_missing_capability(method, p, c);
    json_decref(p);
    json_decref(c);
    return r;
}

int main(void)
{
    CHECK(refusal("{\"code\":-32601,\"message\":\"Method not found\"}"));
    CHECK(refusal("{\"code\":-32020,\"message\":\"Missing MCP-Protocol-Version header\"}"));
    CHECK(refusal("{\"code\":-32022,\"message\":\"v\",\"data\":{\"supported\":[\"2026-07-28\"]}}"));
    CHECK(!refusal("{\"code\":-32022,\"message\":\"v\",\"data\":{\"supported\":[\"2026-07-28\","
                   "\"2025-11-25\"]}}"));
    CHECK(!refusal("{\"code\":-32602,\"message\":\"bad params\"}"));
    CHECK(!refusal("{\"code\":-32022,\"message\":\"v\",\"data\":{\"supported\":[]}}"));

    CHECK(discover_ok("{\"supportedVersions\":[\"2026-07-28\"]}", 1));
    CHECK(discover_ok("{\"supportedVersions\":[\"2026-07-28\",\"2025-11-25\"]}", 0));
    CHECK(!discover_ok("{\"supportedVersions\":[\"2026-07-28\",\"2025-11-25\"]}", 1));
    CHECK(!discover_ok("{\"supportedVersions\":[\"2025-11-25\"]}", 0));
    CHECK(!discover_ok("{}", 0));

    check_initialize_result();
    check_request();

    CHECK(!missing("elicitation/create", "{}", "{\"elicitation\":{}}"));
    CHECK_STR(missing("elicitation/create", "{}", "{}"), "elicitation");
    CHECK_STR(missing("elicitation/create", "{\"mode\":\"url\"}", "{\"elicitation\":{}}"),
              "elicitation.url");
    CHECK(!missing("elicitation/create", "{\"mode\":\"url\"}", "{\"elicitation\":{\"url\":{}}}"));
    CHECK_STR(missing("sampling/createMessage", "{}", "{\"elicitation\":{}}"), "sampling");
    CHECK_STR(missing("sampling/createMessage", "{\"tools\":[]}", "{\"sampling\":{}}"),
              "sampling.tools");
    CHECK_STR(missing("roots/list", "{}", "{}"), "roots");
    CHECK(!missing("roots/list", "{}", "{\"roots\":{}}"));
    CHECK(!missing("x/other", "{}", "{}"));
    return check_summary();
}
