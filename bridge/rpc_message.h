/* rpc_message — the little the bridge needs to know about a JSON-RPC
 * message it relays: what kind it is, a key for its id (to pair a request
 * with its response), and how to write the error reply the bridge sends
 * when the server cannot answer.
 *
 * Ownership: strings returned are malloc'd; the caller frees them. */
#ifndef MCP_BRIDGE_RPC_MESSAGE_H
#define MCP_BRIDGE_RPC_MESSAGE_H

#include <jansson.h>

enum rpc_kind {
    RPC_INVALID = 0,
    RPC_REQUEST,      /* method and id */
    RPC_NOTIFICATION, /* method, no id */
    RPC_RESPONSE,     /* id and result or error, no method */
};

/* JSON-RPC error codes the bridge answers with. */
#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_INTERNAL_ERROR -32603
#define RPC_BRIDGE_ERROR -32000 /* the remote server could not answer */

enum rpc_kind rpc_classify(const json_t *m);

/* The id in canonical compact JSON ("1", "\"a\""), so that equal ids give
 * equal keys. NULL when out of memory. */
char *rpc_id_key(const json_t *id);

/* The top-level "id" (string or integer) of a JSON object read from its
 * first len bytes only, as of a message too large to parse whole: NULL
 * (and no id to answer) when those bytes do not reach a usable id. The
 * caller releases it (json_decref). */
json_t *rpc_id_from_prefix(const char *text, size_t len);

/* {"jsonrpc":"2.0","id":id,"error":{"code":code,"message":message}} as
 * compact JSON; id may be NULL (written as null). A message that is not
 * UTF-8 (a server's error body quoted) goes out with U+FFFD for each byte
 * that is not. NULL when out of memory. */
char *rpc_error_reply(const json_t *id, int code, const char *message);

#endif
