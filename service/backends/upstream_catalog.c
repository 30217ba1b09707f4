/* upstream_catalog — see upstream_catalog.h. */
#include "upstream_catalog.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct upstream_catalog {
    pthread_mutex_t mu;
    json_t *caps;  /* the child's ServerCapabilities, or NULL: not known yet */
    json_t *tools; /* tool name → Tool, as the child listed it */
    int stale;     /* the child said its tools changed since they were listed */
};

struct upstream_catalog *upstream_catalog_new(void)
{
    struct upstream_catalog *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->tools = json_object();
    if (!c->tools) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void upstream_catalog_free(struct upstream_catalog *c)
{
    if (!c)
        return;
    json_decref(c->caps);
    json_decref(c->tools);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void upstream_catalog_set_init(struct upstream_catalog *c, json_t *result)
{
    json_t *caps = json_object_get(result, "capabilities");
    if (!json_is_object(caps))
        return;
    json_t *copy = json_deep_copy(caps);
    pthread_mutex_lock(&c->mu);
    json_decref(c->caps);
    c->caps = copy;
    pthread_mutex_unlock(&c->mu);
}

void upstream_catalog_add_tools(struct upstream_catalog *c, json_t *result, int first_page)
{
    json_t *list = json_object_get(result, "tools");
    if (!json_is_array(list))
        return;
    pthread_mutex_lock(&c->mu);
    if (first_page) {
        json_object_clear(c->tools);
        c->stale = 0;
    }
    size_t i;
    json_t *t;
    json_array_foreach(list, i, t)
    {
        const char *name = json_string_value(json_object_get(t, "name"));
        if (name)
            json_object_set(c->tools, name, t);
    }
    pthread_mutex_unlock(&c->mu);
}

void upstream_catalog_tools_changed(struct upstream_catalog *c)
{
    pthread_mutex_lock(&c->mu);
    c->stale = 1;
    pthread_mutex_unlock(&c->mu);
}

int upstream_catalog_known(struct upstream_catalog *c)
{
    pthread_mutex_lock(&c->mu);
    int known = c->caps != NULL && !c->stale;
    pthread_mutex_unlock(&c->mu);
    return known;
}

int upstream_catalog_has_tool(struct upstream_catalog *c, const char *name)
{
    pthread_mutex_lock(&c->mu);
    int has = name && json_object_get(c->tools, name) != NULL;
    pthread_mutex_unlock(&c->mu);
    return has;
}

json_t *upstream_catalog_capabilities(struct upstream_catalog *c)
{
    pthread_mutex_lock(&c->mu);
    json_t *caps = c->caps ? json_deep_copy(c->caps) : json_object();
    pthread_mutex_unlock(&c->mu);
    if (!caps)
        return NULL;
    /* What a stateless client cannot be given through the gateway: the
     * 2025 tasks capability (2026-07-28 has the tasks extension instead),
     * and change notifications (delivered to 2025 sessions only; a
     * subscriptions/listen stream is not fed from the child). */
    json_object_del(caps, "tasks");
    const char *lists[] = {"tools", "prompts", "resources"};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        json_t *cap = json_object_get(caps, lists[i]);
        json_object_del(cap, "listChanged");
        json_object_del(cap, "subscribe");
    }
    return caps;
}

json_t *upstream_catalog_requires(struct upstream_catalog *c, const char *tool)
{
    pthread_mutex_lock(&c->mu);
    json_t *t = tool ? json_object_get(c->tools, tool) : NULL;
    json_t *needs = json_object_get(json_object_get(t, "_meta"), "mcpd/requiredClientCapabilities");
    json_t *copy = json_is_object(needs) ? json_deep_copy(needs) : NULL;
    pthread_mutex_unlock(&c->mu);
    return copy;
}

json_t *upstream_catalog_header_params(struct upstream_catalog *c, const char *tool)
{
    json_t *map = NULL;
    pthread_mutex_lock(&c->mu);
    json_t *t = tool ? json_object_get(c->tools, tool) : NULL;
    json_t *props = json_object_get(json_object_get(t, "inputSchema"), "properties");
    const char *param;
    json_t *spec;
    json_object_foreach(props, param, spec)
    {
        const char *header = json_string_value(json_object_get(spec, "x-mcp-header"));
        if (!header)
            continue;
        if (!map)
            map = json_object();
        json_object_set_new(map, header, json_string(param));
    }
    pthread_mutex_unlock(&c->mu);
    return map;
}
