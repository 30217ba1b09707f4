/* modern — what a message of MCP 2026-07-28 (the stateless revision) needs
 * on the Streamable HTTP wire, from the client's side.
 *
 * A 2026-07-28 request carries its revision in params._meta, and the HTTP
 * transport wants the body's facts in headers too, for proxies that route
 * on them: MCP-Protocol-Version, Mcp-Method, Mcp-Name (the tool or prompt
 * name, the resource URI, the task id: mcp_headers_name_of, the rule mcpd
 * checks on its side) and Mcp-Param-<Name> for the tool arguments the
 * tool's inputSchema marks with x-mcp-header (tool_headers.h). Values a
 * header cannot carry as they are (not visible ASCII or space, whitespace
 * at either end, or shaped like the sentinel) go as "=?base64?…?=".
 *
 * A dual-era client probes with server/discover and falls back to
 * initialize on a legacy error; modern_error_is_modern tells a modern
 * server's refusal (relayed) from a legacy server's (answered -32601).
 *
 * Pure: no I/O. Returned strings are malloc'd; the caller frees them. */
#ifndef MCP_BRIDGE_MODERN_H
#define MCP_BRIDGE_MODERN_H

#include <curl/curl.h>
#include <jansson.h>

#define MODERN_VERSION "2026-07-28" /* the revision a bare server/discover probes for */
#define RPC_METHOD_NOT_FOUND -32601

/* 1 when m is a message of the stateless revision: params._meta names a
 * protocol revision, or it is server/discover. */
int modern_is(const json_t *m);

/* The header text of a value (string, integer, boolean; a real as a
 * number), encoded per the revision's Value Encoding; NULL for null,
 * objects and arrays (no header), or when out of memory. */
char *modern_encode_value(const json_t *v);

/* The request headers of modern message m: MCP-Protocol-Version, Mcp-Method,
 * Mcp-Name when the method names something, and for tools/call the
 * Mcp-Param-* of param_map ({"<Name>": ["prop", …]}, may be NULL), appended
 * to *list. A revision or method that is not visible ASCII is not copied
 * into a header (the revision goes as MODERN_VERSION, the method not at all:
 * the server refuses the request). -1 when out of memory (*list keeps what
 * was added). */
int modern_headers(const json_t *m, const json_t *param_map, struct curl_slist **list);

/* 1 when error (a JSON-RPC error object answering a probe) comes from a
 * server that speaks the stateless revision: a header mismatch (-32020), a
 * missing capability (-32021), or an unsupported version (-32022) whose
 * data.supported lists a stateless revision. Anything else means a legacy
 * server, to which the client should fall back. */
int modern_error_is_modern(const json_t *error);

#endif
