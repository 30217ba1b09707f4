/* rpc_message — see rpc_message.h. */
#include "rpc_message.h"

enum rpc_kind rpc_classify(const json_t *m)
{
    if (!json_is_object(m))
        return RPC_INVALID;
    const json_t *method = json_object_get(m, "method");
    const json_t *id = json_object_get(m, "id");
    int id_ok = id && (json_is_string(id) || json_is_integer(id));
    if (method) {
        if (!json_is_string(method))
            return RPC_INVALID;
        if (!id)
            return RPC_NOTIFICATION;
        return id_ok ? RPC_REQUEST : RPC_INVALID;
    }
    if (id && (json_object_get(m, "result") || json_object_get(m, "error")))
        return RPC_RESPONSE;
    return RPC_INVALID;
}

char *rpc_id_key(const json_t *id)
{
    return json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT);
}

char *rpc_error_reply(const json_t *id, int code, const char *message)
{
    json_t *reply =
        json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
                  id ? (json_t *)id : json_null(), "error", "code", code, "message", message);
    if (!reply)
        return NULL;
    char *s = json_dumps(reply, JSON_COMPACT);
    json_decref(reply);
    return s;
}
