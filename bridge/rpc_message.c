/* rpc_message — see rpc_message.h. */
#include "rpc_message.h"
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

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
    /* The message may quote a server's error body, cut at a byte count or
     * not UTF-8 at all: jansson would refuse it, and the request would go
     * unanswered. */
    size_t n = strlen(message);
    char *repaired = utf8_valid(message, n) ? NULL : malloc(UTF8_REPAIR_CAP(n));
    if (repaired) {
        utf8_repair(message, n, repaired);
        message = repaired;
    }
    json_t *reply =
        json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
                  id ? (json_t *)id : json_null(), "error", "code", code, "message", message);
    free(repaired);
    if (!reply)
        return NULL;
    char *s = json_dumps(reply, JSON_COMPACT);
    json_decref(reply);
    return s;
}

/* A cursor over the prefix; every step fails (returns 0) at its end. */
struct scan {
    const char *p, *end;
};

static void skip_ws(struct scan *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r' || *c->p == '\n'))
        c->p++;
}

/* Past a string that starts at c->p. */
static int skip_string(struct scan *c)
{
    for (c->p++; c->p < c->end; c->p++) {
        if (*c->p == '\\' && c->end - c->p < 2)
            return 0; /* an escape cut off by the end of the prefix */
        if (*c->p == '\\')
            c->p++;
        else if (*c->p == '"')
            return ++c->p <= c->end;
    }
    return 0;
}

/* Past one value of any kind; nesting is only counted, not checked. */
static int skip_value(struct scan *c)
{
    int depth = 0;
    while (c->p < c->end) {
        char ch = *c->p;
        if (ch == '"') {
            if (!skip_string(c))
                return 0;
        } else if (ch == '{' || ch == '[') {
            depth++;
            c->p++;
        } else if (ch == '}' || ch == ']') {
            if (depth == 0)
                return 1;
            depth--;
            c->p++;
        } else if (ch == ',' && depth == 0) {
            return 1;
        } else {
            c->p++;
        }
        if (depth == 0 && (ch == '"' || ch == '}' || ch == ']'))
            return 1;
    }
    return 0;
}

json_t *rpc_id_from_prefix(const char *text, size_t len)
{
    struct scan c = {text, text + len};
    skip_ws(&c);
    if (c.p >= c.end || *c.p != '{')
        return NULL;
    c.p++;
    for (;;) {
        skip_ws(&c);
        if (c.p >= c.end || *c.p != '"')
            return NULL;
        const char *key = c.p;
        if (!skip_string(&c))
            return NULL;
        int is_id = c.p - key == 4 && memcmp(key, "\"id\"", 4) == 0;
        skip_ws(&c);
        if (c.p >= c.end || *c.p != ':')
            return NULL;
        c.p++;
        skip_ws(&c);
        const char *value = c.p;
        if (!skip_value(&c) || c.p >= c.end)
            return NULL; /* a value cut short, even a number, is not the id */
        if (is_id) {
            json_t *id = json_loadb(value, (size_t)(c.p - value), JSON_DECODE_ANY, NULL);
            if (json_is_string(id) || json_is_integer(id))
                return id;
            json_decref(id);
            return NULL;
        }
        skip_ws(&c);
        if (c.p >= c.end || *c.p != ',')
            return NULL;
        c.p++;
    }
}
