/* mcp_headers — the request headers of MCP 2026-07-28 (SEP-2243) against
 * the body they travel with.
 *
 * A 2026-07-28 client names, in headers, what its body says: the revision
 * (MCP-Protocol-Version, which must equal params._meta's protocolVersion),
 * the method (Mcp-Method, exactly), and for the methods that act on one
 * thing its name (Mcp-Name: a tool's or prompt's name, a resource's URI, a
 * task's id; optional whitespace around it is allowed). Proxies route on
 * the headers, so a server that trusted the body alone could be told one
 * thing and do another. Pure: no I/O, no allocation. */
#ifndef MCPD_MCP_HEADERS_H
#define MCPD_MCP_HEADERS_H

#include <jansson.h>

/* NULL when the headers (any may be NULL: absent) agree with msg, else why
 * not (static text), to answer with HTTP 400 and -32020. A missing
 * params._meta protocolVersion is not this module's refusal (the core
 * answers -32602). */
const char *mcp_headers_check(const char *version, const char *method, const char *name,
                              json_t *msg);

/* What Mcp-Name must carry for this method and params, or NULL when the
 * method names nothing (borrowed from params). */
const char *mcp_headers_name_of(const char *method, json_t *params);

/* Mcp-Param-<Name> headers: a tool marks a parameter with "x-mcp-header":
 * "<Name>" in its inputSchema, and the client copies that argument into the
 * header (raw, or "=?base64?<standard base64>?=" for values a header cannot
 * carry). `map` is {"<Name>": "<parameter>"} for the tool called; get(ud,
 * header name) looks a request header up. NULL when every mapped header
 * matches its argument (a header for an argument the body lacks, or an
 * argument without its header, does not), else why not (static text), for
 * HTTP 400 and -32020. */
typedef const char *(*mcp_headers_get_fn)(void *ud, const char *name);
const char *mcp_headers_check_params(json_t *map, json_t *args, mcp_headers_get_fn get, void *ud);

#endif
