/* tool_headers — see tool_headers.h. */
#include "tool_headers.h"

#include "bridge_log.h"

#include <string.h>
#include <strings.h>

#define NAME_MAX_LEN 120 /* an Mcp-Param-<Name> header name stays short */

/* RFC 9110 tchar. */
static int is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int primitive(const json_t *type)
{
    const char *t = json_string_value(type);
    return t &&
           (strcmp(t, "string") == 0 || strcmp(t, "integer") == 0 || strcmp(t, "boolean") == 0);
}

/* One property's declaration: valid, and unique in map. */
static const char *check_one(const json_t *prop, const json_t *decl, const json_t *map)
{
    const char *name = json_string_value(decl);
    if (!name || !*name)
        return "x-mcp-header must be a non-empty string";
    size_t n = strlen(name);
    if (n > NAME_MAX_LEN || n != json_string_length(decl))
        return "x-mcp-header is too long or holds a NUL";
    for (size_t i = 0; i < n; i++) {
        if (!is_tchar((unsigned char)name[i]))
            return "x-mcp-header must be an HTTP token (no spaces, colons, controls or "
                   "non-ASCII)";
    }
    if (!primitive(json_object_get(prop, "type")))
        return "x-mcp-header is only allowed on string, integer and boolean properties";
    const char *have;
    json_t *unused;
    json_object_foreach((json_t *)map, have, unused)
    {
        if (strcasecmp(have, name) == 0)
            return "x-mcp-header names must be unique (without regard to case)";
    }
    return NULL;
}

/* Walks a schema node. on_chain: reached from the root through
 * "properties" only; is_prop: node is a property's schema. A declaration
 * anywhere else makes the tool invalid. */
static const char *walk(const json_t *node, int on_chain, int is_prop, json_t *path, json_t *map,
                        int depth)
{
    if (depth > 64)
        return "inputSchema nests too deep";
    if (json_is_array(node)) {
        size_t i;
        json_t *e;
        json_array_foreach(node, i, e)
        {
            const char *why = walk(e, 0, 0, path, map, depth + 1);
            if (why)
                return why;
        }
        return NULL;
    }
    if (!json_is_object(node))
        return NULL;
    json_t *decl = json_object_get(node, "x-mcp-header");
    if (decl) {
        if (!on_chain || !is_prop)
            return "x-mcp-header is only allowed on properties reached through \"properties\" "
                   "alone";
        const char *why = check_one(node, decl, map);
        if (why)
            return why;
        if (json_object_set_new(map, json_string_value(decl), json_deep_copy(path)) != 0)
            return "out of memory";
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)node, key, v)
    {
        const char *why = NULL;
        if (strcmp(key, "properties") == 0 && json_is_object(v)) {
            const char *pname;
            json_t *pschema;
            json_object_foreach(v, pname, pschema)
            {
                if (json_array_append_new(path, json_string(pname)) != 0)
                    return "out of memory";
                why = walk(pschema, on_chain, 1, path, map, depth + 1);
                json_array_remove(path, json_array_size(path) - 1);
                if (why)
                    return why;
            }
        } else if (strcmp(key, "x-mcp-header") != 0) {
            why = walk(v, 0, 0, path, map, depth + 1);
        }
        if (why)
            return why;
    }
    return NULL;
}

json_t *tool_headers_of(const json_t *input_schema, const char **why)
{
    json_t *map = json_object(), *path = json_array();
    *why = map && path ? walk(input_schema, 1, 0, path, map, 0) : "out of memory";
    json_decref(path);
    if (*why) {
        json_decref(map);
        return NULL;
    }
    return map;
}

int tool_headers_learn(json_t *table, json_t *result)
{
    json_t *tools = json_object_get(result, "tools");
    if (!json_is_array(tools))
        return 0;
    int removed = 0;
    for (size_t i = 0; i < json_array_size(tools);) {
        json_t *tool = json_array_get(tools, i);
        const char *name = json_string_value(json_object_get(tool, "name"));
        const char *why = NULL;
        json_t *map = tool_headers_of(json_object_get(tool, "inputSchema"), &why);
        if (!map && why && strcmp(why, "out of memory") == 0)
            return -1;
        if (!map) {
            bridge_log(LOG_WARN, "tool_rejected",
                       "tool %.100s left out of tools/list: %s (its Mcp-Param headers could "
                       "not be sent)",
                       name ? name : "(unnamed)", why);
            if (name)
                json_object_del(table, name);
            json_array_remove(tools, i);
            removed++;
            continue;
        }
        if (name)
            json_object_set(table, name, map);
        json_decref(map);
        i++;
    }
    return removed;
}
