/* media_type — the Accept and Content-Type headers, read per RFC 9110
 * (sections 8.3 and 12.5.1).
 *
 * Pure: no I/O, no allocation. Type, subtype and parameter names compare
 * case-insensitively; whitespace around ',' and ';' is allowed; parameter
 * values may be tokens or quoted strings (with a ',' or ';' inside). An
 * Accept element that does not parse is ignored, as RFC 9110 lets a server
 * do. For a given type the most specific range that covers it decides
 * (type/subtype over a type wildcard over the any-type wildcard), and its
 * weight q=0 means "not acceptable". Parameters other than q do not narrow
 * a range: mcpd's JSON and event streams are always UTF-8 and carry no
 * other parameter. */
#ifndef MCPD_MEDIA_TYPE_H
#define MCPD_MEDIA_TYPE_H

/* 1 if the Accept header value `accept` accepts `type` ("type/subtype",
 * lowercase, no parameters), else 0. NULL (no header) and "" accept
 * nothing: every MCP client must send Accept. */
int media_type_accepts(const char *accept, const char *type);

/* 1 if the Content-Type header value is the media type `type` (with any
 * well-formed parameters), else 0. NULL is 0. */
int media_type_is(const char *content_type, const char *type);

#endif
