/* jsonrpc — JSON-RPC 2.0 framing rules, independent of any transport.
 *
 * jsonrpc_parse turns bytes into a JSON value (json_text.h), refusing
 * invalid UTF-8 and nesting deeper than JSONRPC_MAX_DEPTH before it recurses
 * into it. jsonrpc_classify checks one message object and says whether it is a
 * request, a notification or a response, with MCP's extra rule that a request
 * id is a string or an integer, never null. The builders make the messages
 * the server sends. All builders return new references the caller owns. */
#ifndef MCPD_JSONRPC_H
#define MCPD_JSONRPC_H

#include <jansson.h>
#include <stddef.h>

#define JSONRPC_PARSE_ERROR -32700
#define JSONRPC_INVALID_REQUEST -32600
#define JSONRPC_METHOD_NOT_FOUND -32601
#define JSONRPC_INVALID_PARAMS -32602
#define JSONRPC_INTERNAL_ERROR -32603
/* Implementation-defined range. */
#define JSONRPC_SERVER_ERROR -32000
#define JSONRPC_SESSION_NOT_FOUND -32001
#define JSONRPC_TOO_MANY_SESSIONS -32010         /* --max-sessions reached */
#define JSONRPC_INIT_PARAMS_TOO_LARGE -32011     /* --max-init-params exceeded */
#define JSONRPC_UPSTREAM_TOO_MANY_PENDING -32012 /* --upstream-max-pending reached */
#define JSONRPC_SERVER_BUSY -32013               /* --max-connections reached */
#define JSONRPC_TOO_MANY_CONNECTIONS -32014      /* --max-connections-per-ip reached */
#define JSONRPC_TOO_MANY_IN_FLIGHT -32015        /* --max-inflight-per-session reached */
#define JSONRPC_REQUEST_CANCELLED -32800
/* 2026-07-28 */
#define JSONRPC_HEADER_MISMATCH -32020     /* Mcp-* headers disagree with the body */
#define JSONRPC_MISSING_CAPABILITY -32021  /* the client lacks a capability the request needs */
#define JSONRPC_UNSUPPORTED_VERSION -32022 /* _meta protocolVersion not served */

#define JSONRPC_MAX_DEPTH 64

enum jsonrpc_kind { JSONRPC_REQUEST, JSONRPC_NOTIFICATION, JSONRPC_RESPONSE };

struct jsonrpc_error {
    int code;
    char message[160];
};

/* A classified message; the pointers are borrowed from the object given to
 * jsonrpc_classify. */
struct jsonrpc_msg {
    enum jsonrpc_kind kind;
    json_t *id;         /* request or response id; NULL for notifications */
    const char *method; /* requests and notifications */
    json_t *params;     /* may be NULL */
    json_t *result;     /* responses: exactly one of result / error */
    json_t *error;
};

/* Parses one JSON text. Returns a new reference, or NULL with *err set
 * (-32700 for syntax, invalid UTF-8 or excessive depth). */
json_t *jsonrpc_parse(const char *buf, size_t len, struct jsonrpc_error *err);

/* Validates one message object. Returns 0, or -1 with *err set (-32600):
 * among other things, a method, or a string member of params (or of its
 * _meta or a completion's ref), with a NUL inside: the server compares
 * those as C strings. */
int jsonrpc_classify(json_t *msg, struct jsonrpc_msg *out, struct jsonrpc_error *err);

/* Stable text key for an id (e.g. `"abc"` or `7`), for lookups. Writes at
 * most cap bytes; returns 0, or -1 if the id is not a string or integer or
 * does not fit. */
int jsonrpc_id_key(const json_t *id, char *out, size_t cap);

json_t *jsonrpc_result(json_t *id, json_t *result); /* steals result */
/* Steals data; id NULL → null. A message that is not UTF-8 (a client's
 * text quoted and cut at a byte count) goes out with U+FFFD for each byte
 * that is not. */
json_t *jsonrpc_error(json_t *id, int code, const char *message, json_t *data);
json_t *jsonrpc_request(json_t *id, const char *method, json_t *params); /* steals id, params */
json_t *jsonrpc_notification(const char *method, json_t *params);        /* steals params */

/* Compact one-line encoding of a message, or of any JSON value (never
 * contains a raw newline). NULL when out of memory. Caller frees. */
char *jsonrpc_dump(const json_t *msg, size_t *len);

#endif
