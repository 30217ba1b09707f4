/* protocol — see protocol.h. */
#include "protocol.h"

#include <stddef.h>
#include <string.h>

/* 2024-11-05 is the revision of the legacy HTTP+SSE transport (/sse); its
 * messages are those of 2025-03-26 without batches. */
static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
#define NVERSIONS (sizeof versions / sizeof versions[0])

static const char *const levels[] = {"debug", "info",     "notice", "warning",
                                     "error", "critical", "alert",  "emergency"};

int protocol_supported(const char *version)
{
    for (size_t i = 0; version && i < NVERSIONS; i++)
        if (strcmp(version, versions[i]) == 0)
            return 1;
    return 0;
}

const char *protocol_negotiate(const char *requested)
{
    for (size_t i = 0; requested && i < NVERSIONS; i++)
        if (strcmp(requested, versions[i]) == 0)
            return versions[i];
    return PROTOCOL_LATEST;
}

int protocol_allows_batch(const char *version)
{
    return strcmp(version, "2025-03-26") == 0;
}

int protocol_has_sse_polling(const char *version)
{
    /* ISO dates compare as strings. 2026-07-28 has no resumable streams. */
    return strcmp(version, "2025-11-25") >= 0 && !protocol_is_stateless(version);
}

int protocol_log_level(const char *name)
{
    for (int i = 0; name && i < 8; i++)
        if (strcmp(name, levels[i]) == 0)
            return i;
    return -1;
}

const char *protocol_log_level_name(int level)
{
    return level >= 0 && level < 8 ? levels[level] : "debug";
}

int protocol_is_stateless(const char *version)
{
    return version && strcmp(version, PROTOCOL_STATELESS) == 0;
}

static const char *const stateless_methods[] = {
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "subscriptions/listen",
    /* extension io.modelcontextprotocol/skills */
    "skills/list",
    "skills/get",
    "resources/directory/read",
    /* extension io.modelcontextprotocol/tasks */
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
};

int protocol_stateless_method(const char *method)
{
    for (size_t i = 0; method && i < sizeof stateless_methods / sizeof *stateless_methods; i++)
        if (strcmp(method, stateless_methods[i]) == 0)
            return 1;
    return 0;
}

json_t *protocol_versions_json(void)
{
    json_t *a = json_array();
    json_array_append_new(a, json_string(PROTOCOL_STATELESS));
    for (size_t i = 0; i < NVERSIONS; i++)
        json_array_append_new(a, json_string(versions[i]));
    return a;
}

/* Results a client may cache (SEP-2549). */
static const char *const cacheable[] = {
    "server/discover",          "tools/list",     "prompts/list", "resources/list",
    "resources/templates/list", "resources/read", "skills/list",  "skills/get"};

void protocol_adapt_final(const char *version, const char *method, json_t *msg)
{
    if (!protocol_is_stateless(version) || !json_is_object(msg))
        return;
    json_t *result = json_object_get(msg, "result");
    if (json_is_object(result)) {
        if (!json_object_get(result, "resultType"))
            json_object_set_new(result, "resultType", json_string("complete"));
        for (size_t i = 0; method && i < sizeof cacheable / sizeof *cacheable; i++)
            if (strcmp(method, cacheable[i]) == 0) {
                if (!json_object_get(result, "ttlMs"))
                    json_object_set_new(result, "ttlMs", json_integer(0));
                if (!json_object_get(result, "cacheScope"))
                    json_object_set_new(result, "cacheScope", json_string("private"));
            }
        return;
    }
    json_t *code = json_object_get(json_object_get(msg, "error"), "code");
    if (method && strcmp(method, "resources/read") == 0 && json_integer_value(code) == -32002)
        json_integer_set(code, -32602);
}
