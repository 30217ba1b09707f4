/* upstream_catalog — what the gateway knows of its child server without a
 * session: its capabilities and its tools.
 *
 * A 2026-07-28 client asks server/discover before anything else, and each
 * of its requests is checked before it runs (Mcp-Param-* headers against
 * the tool's x-mcp-header arguments). Neither can wait for a session's
 * child, so the upstream backend keeps here what children said: the
 * capabilities of an initialize answer, and the tools of tools/list
 * answers (a probe child's, started for this, and every listing a client
 * gets through the gateway). A child's notifications/tools/list_changed
 * marks the tools stale, so the next check lists them again.
 *
 * Thread-safe: its own lock. Returned JSON is the caller's. */
#ifndef MCPD_UPSTREAM_CATALOG_H
#define MCPD_UPSTREAM_CATALOG_H

#include <jansson.h>

struct upstream_catalog;

struct upstream_catalog *upstream_catalog_new(void);
void upstream_catalog_free(struct upstream_catalog *c);

/* A child's InitializeResult (borrowed): its capabilities are kept. */
void upstream_catalog_set_init(struct upstream_catalog *c, json_t *result);
/* A child's ListToolsResult (borrowed); the first page replaces the list. */
void upstream_catalog_add_tools(struct upstream_catalog *c, json_t *result, int first_page);
void upstream_catalog_tools_changed(struct upstream_catalog *c);

/* 1 when capabilities and a current tool list are known. */
int upstream_catalog_known(struct upstream_catalog *c);
int upstream_catalog_has_tool(struct upstream_catalog *c, const char *name);

/* The capabilities to advertise in server/discover (new reference; {}
 * when none are known): the child's, less what the gateway does not
 * deliver to stateless clients (2025 tasks, listChanged, subscribe). */
json_t *upstream_catalog_capabilities(struct upstream_catalog *c);

/* The client capabilities the tool says it needs, in its
 * _meta["mcpd/requiredClientCapabilities"] (a ClientCapabilities object;
 * mcpd's own tools say so), as a new reference, or NULL. */
json_t *upstream_catalog_requires(struct upstream_catalog *c, const char *tool);

/* {"<header name>": "<argument>"} for the tool's x-mcp-header arguments
 * (new reference), or NULL for none or an unknown tool. */
json_t *upstream_catalog_header_params(struct upstream_catalog *c, const char *tool);

#endif
