/* jsonrpc — see jsonrpc.h. */
#include "jsonrpc.h"
#include "json_text.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_err(struct jsonrpc_error *err, int code, const char *msg)
{
    err->code = code;
    snprintf(err->message, sizeof err->message, "%s", msg);
}

json_t *jsonrpc_parse(const char *buf, size_t len, struct jsonrpc_error *err)
{
    /* Scalars parse too, so that `42` is an invalid request, not a parse
     * error. Invalid UTF-8 is refused; NUL is allowed inside strings. */
    char why[120];
    json_t *v = json_text_read(buf, len, JSONRPC_MAX_DEPTH, why, sizeof why);
    if (!v) {
        char msg[160];
        snprintf(msg, sizeof msg, "Parse error: %s", why);
        set_err(err, JSONRPC_PARSE_ERROR, msg);
    }
    return v;
}

/* 1 when v is a string with a NUL inside: read as a C string, it would be
 * a different (shorter) string from the one the client sent. */
static int has_nul(const json_t *v)
{
    return json_is_string(v) && strlen(json_string_value(v)) != json_string_length(v);
}

/* The first string member of obj with a NUL inside, or NULL. */
static const char *nul_member(json_t *obj)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        if (has_nul(v))
            return key;
    }
    return NULL;
}

/* A params string member with a NUL inside: the server looks things up by
 * those (a tool's or prompt's name, a resource's URI, a revision, a log
 * level, a cursor, a task, a polled stream) and compares them as C
 * strings, so "echo\u0000x" must not name echo. Also _meta's and a
 * completion ref's. Nested deeper, tool arguments may carry NUL: they are
 * data. One pass over the members: a lookup of each name cost more. */
static const char *nul_in_names(json_t *params)
{
    const char *key = nul_member(params);
    if (key)
        return key;
    json_t *meta = json_object_get(params, "_meta"), *ref = json_object_get(params, "ref");
    return meta && nul_member(meta) ? "_meta" : ref && nul_member(ref) ? "ref" : NULL;
}

int jsonrpc_classify(json_t *msg, struct jsonrpc_msg *out, struct jsonrpc_error *err)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(msg)) {
        set_err(err, JSONRPC_INVALID_REQUEST, "Invalid Request: a message must be a JSON object");
        return -1;
    }
    json_t *ver = json_object_get(msg, "jsonrpc");
    if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0") != 0) {
        set_err(err, JSONRPC_INVALID_REQUEST, "Invalid Request: \"jsonrpc\" must be \"2.0\"");
        return -1;
    }
    json_t *id = json_object_get(msg, "id");
    json_t *method = json_object_get(msg, "method");
    if (id && !json_is_string(id) && !json_is_integer(id)) {
        set_err(err, JSONRPC_INVALID_REQUEST,
                json_is_null(id) ? "Invalid Request: id must not be null"
                                 : "Invalid Request: id must be a string or an integer");
        return -1;
    }
    if (method) {
        if (!json_is_string(method) || json_string_length(method) == 0 || has_nul(method)) {
            set_err(err, JSONRPC_INVALID_REQUEST,
                    "Invalid Request: method must be a non-empty string without NUL");
            return -1;
        }
        json_t *params = json_object_get(msg, "params");
        if (params && !json_is_object(params) && !json_is_array(params)) {
            set_err(err, JSONRPC_INVALID_REQUEST,
                    "Invalid Request: params must be an object or an array");
            return -1;
        }
        const char *named = nul_in_names(params);
        if (named) {
            char why[120];
            snprintf(why, sizeof why, "Invalid Request: params.%s must not contain NUL", named);
            set_err(err, JSONRPC_INVALID_REQUEST, why);
            return -1;
        }
        out->kind = id ? JSONRPC_REQUEST : JSONRPC_NOTIFICATION;
        out->id = id;
        out->method = json_string_value(method);
        out->params = params;
        return 0;
    }
    json_t *result = json_object_get(msg, "result");
    json_t *error = json_object_get(msg, "error");
    if (!id || (!result == !error)) {
        set_err(err, JSONRPC_INVALID_REQUEST,
                "Invalid Request: need a method, or an id with exactly one of result/error");
        return -1;
    }
    if (error && (!json_is_object(error) || !json_is_integer(json_object_get(error, "code")))) {
        set_err(err, JSONRPC_INVALID_REQUEST, "Invalid Request: error must have an integer code");
        return -1;
    }
    out->kind = JSONRPC_RESPONSE;
    out->id = id;
    out->result = result;
    out->error = error;
    return 0;
}

int jsonrpc_id_key(const json_t *id, char *out, size_t cap)
{
    int n;
    if (json_is_integer(id)) {
        n = snprintf(out, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(id));
        return n < 0 || (size_t)n >= cap ? -1 : 0;
    }
    if (!json_is_string(id))
        return -1;
    /* The JSON encoding: quoted, so "7" and 7 differ, and escaped, so ids
     * that differ only after an embedded NUL still differ. */
    size_t need = json_dumpb(id, NULL, 0, JSON_ENCODE_ANY);
    if (need == 0 || need >= cap)
        return -1;
    json_dumpb(id, out, cap, JSON_ENCODE_ANY);
    out[need] = '\0';
    return 0;
}

json_t *jsonrpc_result(json_t *id, json_t *result)
{
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result",
                     result ? result : json_object());
}

json_t *jsonrpc_error(json_t *id, int code, const char *message, json_t *data)
{
    /* A message may quote what a client sent (a header, a method, a key),
     * cut at a byte count: jansson refuses a string that is not UTF-8, and
     * the client would get no answer at all. */
    size_t n = strlen(message);
    char *repaired = utf8_valid(message, n) ? NULL : malloc(UTF8_REPAIR_CAP(n));
    if (repaired) {
        utf8_repair(message, n, repaired);
        message = repaired;
    }
    json_t *err = json_pack("{s:i, s:s}", "code", code, "message", message);
    free(repaired);
    if (data)
        json_object_set_new(err, "data", data);
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error",
                     err);
}

json_t *jsonrpc_request(json_t *id, const char *method, json_t *params)
{
    json_t *m = json_pack("{s:s, s:o, s:s}", "jsonrpc", "2.0", "id", id, "method", method);
    if (params)
        json_object_set_new(m, "params", params);
    return m;
}

json_t *jsonrpc_notification(const char *method, json_t *params)
{
    json_t *m = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);
    if (params)
        json_object_set_new(m, "params", params);
    return m;
}

char *jsonrpc_dump(const json_t *msg, size_t *len)
{
    return json_text_write(msg, len);
}
