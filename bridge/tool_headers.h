/* tool_headers — the x-mcp-header declarations of the tools a 2026-07-28
 * server lists, as the client side must read them.
 *
 * A tool marks a parameter of its inputSchema with "x-mcp-header": "<Name>"
 * and the client mirrors that argument into an Mcp-Param-<Name> header
 * (modern.h encodes it). The specification constrains the declarations —
 * a non-empty HTTP token, unique without regard to case, on a string,
 * integer or boolean property reachable from the root through
 * "properties" alone — and requires a client to drop from tools/list every
 * tool that breaks them, so that one bad tool does not spoil the others.
 *
 * The bridge keeps what it learned in a table {"<tool>": {"<Name>":
 * ["prop", "sub", …]}} (a JSON object the caller owns): tools/list
 * results it relays fill it, and tools/call reads it.
 *
 * Ownership: returned json_t are new references. */
#ifndef MCP_BRIDGE_TOOL_HEADERS_H
#define MCP_BRIDGE_TOOL_HEADERS_H

#include <jansson.h>

/* {"<Name>": [property path]} for one inputSchema (an empty object when it
 * declares nothing), or NULL when a declaration is invalid: *why says how
 * (static text). */
json_t *tool_headers_of(const json_t *input_schema, const char **why);

/* Learns the tools of a tools/list result into table and removes the
 * invalid ones from result.tools (logging each). Returns how many were
 * removed, or -1 when out of memory (result unchanged then). */
int tool_headers_learn(json_t *table, json_t *result);

#endif
