/* refusal — see refusal.h. */
#include "refusal.h"

#include <stdlib.h>

unsigned refusal_status(enum core_reason why)
{
    switch (why) {
    case CORE_NOT_FOUND:
        return 404;
    case CORE_UNAVAILABLE:
    case CORE_AT_CAPACITY:
        return 503;
    case CORE_TOO_LARGE:
        return 413;
    case CORE_TOO_MANY:
        return 429;
    case CORE_CONFLICT:
        return 409;
    case CORE_BAD_REQUEST:
        break;
    }
    return 400;
}

char *refusal_body(int code, const char *message)
{
    json_t *body = jsonrpc_error(NULL, code, message, NULL);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    return text;
}

int refusal_code(const json_t *error)
{
    return (int)json_integer_value(json_object_get(json_object_get(error, "error"), "code"));
}

const char *refusal_message(const json_t *error)
{
    const char *m = json_string_value(json_object_get(json_object_get(error, "error"), "message"));
    return m ? m : "";
}
