/* translate_shape — see translate_shape.h. */
#include "translate_shape.h"

#include "modern.h"
#include "protocol.h"

#include <string.h>

/* The 2025-era revisions the bridge serves a client by translation, newest
 * first. */
static const char *const legacy_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
                                              "2024-11-05"};

/* 1 when v names a revision older than the stateless one. */
static int older(const char *v)
{
    return v && strcmp(v, MODERN_VERSION) < 0;
}

int translate_shape_refusal(const json_t *error)
{
    json_int_t code = json_integer_value(json_object_get(error, "code"));
    /* -32020: the headers of 2026-07-28 are missing, which only a server of
     * that revision checks (a 2025 server takes a request without
     * MCP-Protocol-Version as 2025-03-26) */
    if (code == RPC_METHOD_NOT_FOUND || code == -32020)
        return 1;
    json_t *supported = json_object_get(json_object_get(error, "data"), "supported");
    if (!json_is_array(supported) || json_array_size(supported) == 0)
        return 0;
    size_t i;
    json_t *v;
    json_array_foreach(supported, i, v)
    {
        if (older(json_string_value(v)))
            return 0;
    }
    return 1;
}

int translate_shape_discover_ok(const json_t *result, int only_stateless)
{
    int modern = 0;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(result, "supportedVersions"), i, v)
    {
        const char *s = json_string_value(v);
        if (s && strcmp(s, MODERN_VERSION) == 0)
            modern = 1;
        else if (only_stateless && older(s))
            return 0;
    }
    return modern;
}

static const char *negotiate(const char *asked)
{
    for (size_t i = 0; asked && i < sizeof legacy_versions / sizeof *legacy_versions; i++)
        if (strcmp(asked, legacy_versions[i]) == 0)
            return legacy_versions[i];
    return TRANSLATE_LATEST_LEGACY;
}

/* The server's capabilities as a 2025 client may rely on them through the
 * bridge. */
static json_t *capabilities(const json_t *discover)
{
    json_t *caps = json_object_get(discover, "capabilities");
    caps = json_is_object(caps) ? json_deep_copy(caps) : json_object();
    if (!caps)
        return NULL;
    /* list changes and resource updates reach a 2026-07-28 client on a
     * subscriptions/listen stream, which the bridge does not open for a
     * 2025 one: promising them would leave the client waiting */
    static const char *const lists[] = {"tools", "prompts", "resources"};
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
        json_object_del(json_object_get(caps, lists[i]), "listChanged");
    json_object_del(json_object_get(caps, "resources"), "subscribe");
    json_object_del(caps, "extensions"); /* 2026-07-28 extensions are not translated */
    /* the bridge answers logging/setLevel and sends the level in _meta */
    if (!json_object_get(caps, "logging"))
        json_object_set_new(caps, "logging", json_object());
    return caps;
}

json_t *translate_shape_initialize_result(const json_t *discover, const json_t *init_params)
{
    const char *asked = json_string_value(json_object_get(init_params, "protocolVersion"));
    json_t *info = json_object_get(json_object_get(discover, "_meta"), PROTOCOL_META_SERVER_INFO);
    if (!json_is_object(info))
        info = json_object_get(discover, "serverInfo");
    json_t *server = json_is_object(info) ? json_incref(info)
                                          : json_pack("{s:s, s:s}", "name", "mcp-bridge remote",
                                                      "version", "unknown");
    json_t *result = json_pack("{s:s, s:o, s:o}", "protocolVersion", negotiate(asked),
                               "capabilities", capabilities(discover), "serverInfo", server);
    json_t *instructions = json_object_get(discover, "instructions");
    if (result && json_is_string(instructions))
        json_object_set(result, "instructions", instructions);
    return result;
}

json_t *translate_shape_request(const json_t *m, const json_t *caps, const json_t *info,
                                const char *log_level)
{
    json_t *copy = json_deep_copy(m);
    if (!copy)
        return NULL;
    json_t *params = json_object_get(copy, "params");
    if (!json_is_object(params)) {
        params = json_object();
        json_object_set_new(copy, "params", params);
    }
    json_t *meta = json_object_get(params, "_meta");
    if (!json_is_object(meta)) {
        meta = json_object();
        json_object_set_new(params, "_meta", meta);
    }
    json_object_set_new(meta, PROTOCOL_META_VERSION, json_string(MODERN_VERSION));
    json_object_set_new(meta, PROTOCOL_META_CAPABILITIES,
                        json_is_object(caps) ? json_deep_copy(caps) : json_object());
    if (json_is_object(info))
        json_object_set_new(meta, PROTOCOL_META_CLIENT_INFO, json_deep_copy(info));
    if (log_level)
        json_object_set_new(meta, PROTOCOL_META_LOG_LEVEL, json_string(log_level));
    if (!json_object_get(meta, PROTOCOL_META_VERSION)) {
        json_decref(copy);
        return NULL;
    }
    return copy;
}

const char *translate_shape_missing_capability(const char *method, const json_t *params,
                                               const json_t *caps)
{
    if (!method)
        return NULL;
    if (strcmp(method, "elicitation/create") == 0) {
        json_t *e = json_object_get(caps, "elicitation");
        if (!json_is_object(e))
            return "elicitation";
        const char *mode = json_string_value(json_object_get(params, "mode"));
        if (mode && strcmp(mode, "url") == 0 && !json_object_get(e, "url"))
            return "elicitation.url";
        return NULL;
    }
    if (strcmp(method, "sampling/createMessage") == 0) {
        json_t *s = json_object_get(caps, "sampling");
        if (!json_is_object(s))
            return "sampling";
        if (json_object_get(params, "tools") && !json_object_get(s, "tools"))
            return "sampling.tools";
        return NULL;
    }
    if (strcmp(method, "roots/list") == 0)
        return json_is_object(json_object_get(caps, "roots")) ? NULL : "roots";
    return NULL;
}
