/* test_jsonrpc — JSON-RPC framing (jsonrpc.c) and protocol revisions /
 * log levels (protocol.c). */
#include "check.h"
#include "jsonrpc.h"
#include "protocol.h"

#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

static json_t *parse_str(const char *s, struct jsonrpc_error *err)
{
    return jsonrpc_parse(s, strlen(s), err);
}

/* Expects jsonrpc_parse to refuse buf with -32700 (failures name the
 * caller's line). */
#define expect_parse_error(buf, len, what) expect_parse_error_at(buf, len, what, __LINE__)
static void expect_parse_error_at(const char *buf, size_t len, const char *what, int line)
{
    struct jsonrpc_error err = {0};
    json_t *v = jsonrpc_parse(buf, len, &err);
    if (!check_record(v == NULL, __FILE__, line, what))
        json_decref(v);
    if (!check_record(err.code == JSONRPC_PARSE_ERROR && err.message[0] != '\0', __FILE__, line,
                      "error code -32700 with a message"))
        printf("     got code %d \"%s\"\n", err.code, err.message);
}

/* A text of `depth` nested arrays around 1 ("[[1]]" for 2), or without the
 * closers when `closed` is 0. Caller frees. */
static char *nested(int depth, int closed, char open, char close)
{
    size_t n = (size_t)depth * 8 + 8;
    char *s = malloc(n);
    size_t o = 0;
    for (int i = 0; i < depth; i++) {
        if (open == '{') {
            memcpy(s + o, "{\"a\":", 5);
            o += 5;
        } else {
            s[o++] = open;
        }
    }
    s[o++] = '1';
    for (int i = 0; closed && i < depth; i++)
        s[o++] = close;
    s[o] = '\0';
    return s;
}

/* Parses and classifies text; returns the classify rc, fills out/err.
 * *keep receives the parsed value (caller decrefs). */
static int classify_str(const char *text, struct jsonrpc_msg *out, struct jsonrpc_error *err,
                        json_t **keep)
{
    struct jsonrpc_error perr = {0};
    json_t *v = parse_str(text, &perr);
    *keep = v;
    if (!v) {
        printf("     (test input did not parse: %s)\n", text);
        return 99;
    }
    memset(err, 0, sizeof *err);
    return jsonrpc_classify(v, out, err);
}

#define expect_invalid(text) expect_invalid_at(text, __LINE__)
static void expect_invalid_at(const char *text, int line)
{
    struct jsonrpc_msg m;
    struct jsonrpc_error err;
    json_t *v;
    int rc = classify_str(text, &m, &err, &v);
    if (!check_record(rc == -1 && err.code == JSONRPC_INVALID_REQUEST, __FILE__, line, text))
        printf("     classify returned %d (kind %d), code %d\n", rc, (int)m.kind, err.code);
    json_decref(v);
}

/* ---- jsonrpc_parse ---- */

static void test_parse(void)
{
    struct jsonrpc_error err = {0};
    json_t *v = parse_str("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", &err);
    CHECK(json_is_object(v));
    CHECK_STR(json_string_value(json_object_get(v, "method")), "ping");
    CHECK_INT(json_integer_value(json_object_get(v, "id")), 1);
    json_decref(v);

    /* Only the given length is read: trailing bytes beyond len are ignored. */
    const char *longer = "{\"a\":1}GARBAGE";
    v = jsonrpc_parse(longer, 7, &err);
    CHECK(json_is_object(v));
    json_decref(v);

    expect_parse_error("{\"a\":", 5, "truncated object");
    expect_parse_error("{\"a\" 1}", 7, "missing colon");
    expect_parse_error("", 0, "empty body");
    expect_parse_error("{\"a\":1} {}", 10, "two values");
    expect_parse_error("{'a':1}", 7, "single quotes");
    expect_parse_error("{\"a\":1,\"a\":2}", 13, "duplicate keys");

    /* Invalid UTF-8: stray continuation bytes, an overlong '/', a UTF-16
     * surrogate encoded as UTF-8, and a truncated sequence. */
    expect_parse_error("{\"a\":\"\xff\xfe\"}", 10, "invalid UTF-8 0xff 0xfe");
    expect_parse_error("{\"a\":\"\xc0\xaf\"}", 10, "overlong UTF-8");
    expect_parse_error("{\"a\":\"\xed\xa0\x80\"}", 11, "UTF-8 encoded surrogate");
    expect_parse_error("{\"a\":\"\xe2\x82\"}", 10, "truncated UTF-8 sequence");
    expect_parse_error("{\"\x80\":1}", 8, "invalid UTF-8 in a key");
    /* Valid multi-byte UTF-8 still parses. */
    v = parse_str("{\"a\":\"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80\"}", &err);
    CHECK(json_is_object(v));
    json_decref(v);

    /* NUL: raw inside a string, escaped, and between tokens. */
    static const char raw_nul[] = "{\"a\":\"x\0y\"}";
    expect_parse_error(raw_nul, sizeof raw_nul - 1, "raw NUL inside a string");
    /* An escaped U+0000 is accepted and kept whole (commit 2efb71d: escaped
     * NULs round-trip), unlike a raw NUL byte. */
    v = parse_str("{\"a\":\"x\\u0000y\"}", &err);
    CHECK(json_is_object(v));
    CHECK_INT(json_string_length(json_object_get(v, "a")), 3);
    CHECK(memcmp(json_string_value(json_object_get(v, "a")), "x\0y", 3) == 0);
    size_t dlen = 0;
    char *dumped = v ? jsonrpc_dump(v, &dlen) : NULL;
    CHECK(dumped && strstr(dumped, "x\\u0000y") != NULL && dlen == strlen(dumped));
    free(dumped);
    json_decref(v);
    static const char nul_between[] = "{\"a\":\0 1}";
    expect_parse_error(nul_between, sizeof nul_between - 1, "NUL between tokens");
    static const char nul_after[] = "{\"a\":1}\0";
    expect_parse_error(nul_after, sizeof nul_after - 1, "NUL after the value");
}

static void test_depth(void)
{
    struct jsonrpc_error err = {0};
    char *s;
    json_t *v;

    /* Exactly JSONRPC_MAX_DEPTH is fine, one more is not. */
    s = nested(JSONRPC_MAX_DEPTH, 1, '[', ']');
    v = parse_str(s, &err);
    CHECK(json_is_array(v));
    json_decref(v);
    free(s);

    s = nested(JSONRPC_MAX_DEPTH + 1, 1, '[', ']');
    memset(&err, 0, sizeof err);
    v = parse_str(s, &err);
    CHECK(v == NULL);
    CHECK_INT(err.code, JSONRPC_PARSE_ERROR);
    CHECK(strstr(err.message, "deep") != NULL);
    json_decref(v);
    free(s);

    s = nested(JSONRPC_MAX_DEPTH + 1, 1, '{', '}');
    memset(&err, 0, sizeof err);
    v = parse_str(s, &err);
    CHECK(v == NULL);
    CHECK_INT(err.code, JSONRPC_PARSE_ERROR);
    CHECK(strstr(err.message, "deep") != NULL);
    json_decref(v);
    free(s);

    /* Rejected before parsing: an unterminated text that is too deep gets
     * the depth error, not jansson's end-of-input error. */
    s = nested(JSONRPC_MAX_DEPTH + 1, 0, '[', ']');
    memset(&err, 0, sizeof err);
    v = parse_str(s, &err);
    CHECK(v == NULL);
    CHECK(strstr(err.message, "deep") != NULL);
    json_decref(v);
    free(s);

    /* Far deeper than jansson's own limit: still a clean -32700. */
    s = nested(100000, 1, '[', ']');
    memset(&err, 0, sizeof err);
    v = parse_str(s, &err);
    CHECK(v == NULL);
    CHECK_INT(err.code, JSONRPC_PARSE_ERROR);
    CHECK(strstr(err.message, "deep") != NULL);
    json_decref(v);
    free(s);

    /* Depth is nesting, not a running total: two siblings each
     * MAX_DEPTH - 1 deep inside one array are fine. */
    char *inner = nested(JSONRPC_MAX_DEPTH - 1, 1, '[', ']');
    size_t n = 2 * strlen(inner) + 4;
    s = malloc(n);
    snprintf(s, n, "[%s,%s]", inner, inner);
    v = parse_str(s, &err);
    CHECK(json_is_array(v));
    CHECK_INT(json_array_size(v), 2);
    json_decref(v);
    free(s);
    free(inner);

    /* Brackets inside strings are not counted. */
    char buf[512];
    char brackets[201];
    memset(brackets, '[', 200);
    brackets[200] = '\0';
    snprintf(buf, sizeof buf, "{\"s\":\"%s\"}", brackets);
    v = parse_str(buf, &err);
    CHECK(json_is_object(v));
    CHECK_INT(json_string_length(json_object_get(v, "s")), 200);
    json_decref(v);
    /* ... also after an escaped quote inside the string ... */
    snprintf(buf, sizeof buf, "{\"s\":\"\\\"%s{{{{\"}", brackets);
    v = parse_str(buf, &err);
    CHECK(json_is_object(v));
    json_decref(v);
    /* ... and in keys. */
    snprintf(buf, sizeof buf, "{\"%s\":1}", brackets);
    v = parse_str(buf, &err);
    CHECK(json_is_object(v));
    json_decref(v);

    /* An escaped backslash ends the string normally: the brackets after it
     * are real nesting and must be counted. */
    char *deep = nested(JSONRPC_MAX_DEPTH, 1, '[', ']');
    n = strlen(deep) + 16;
    s = malloc(n);
    snprintf(s, n, "[\"\\\\\",%s]", deep); /* ["\\", [[[...1]]]] : depth MAX+1 */
    memset(&err, 0, sizeof err);
    v = parse_str(s, &err);
    CHECK(v == NULL);
    CHECK(strstr(err.message, "deep") != NULL);
    json_decref(v);
    free(s);
    free(deep);
}

/* ---- jsonrpc_classify ---- */

static void test_classify(void)
{
    struct jsonrpc_msg m;
    struct jsonrpc_error err;
    json_t *v;

    CHECK_INT(classify_str("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\","
                           "\"params\":{\"a\":1}}",
                           &m, &err, &v),
              0);
    CHECK_INT(m.kind, JSONRPC_REQUEST);
    CHECK(json_is_integer(m.id) && json_integer_value(m.id) == 1);
    CHECK_STR(m.method, "tools/list");
    CHECK(json_is_object(m.params) && json_object_get(m.params, "a"));
    CHECK(m.result == NULL && m.error == NULL);
    json_decref(v);

    CHECK_INT(classify_str("{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"method\":\"x\",\"params\":[1]}",
                           &m, &err, &v),
              0);
    CHECK_INT(m.kind, JSONRPC_REQUEST);
    CHECK_STR(json_string_value(m.id), "abc");
    CHECK(json_is_array(m.params));
    json_decref(v);

    /* An empty-string id is still a string id. */
    CHECK_INT(classify_str("{\"jsonrpc\":\"2.0\",\"id\":\"\",\"method\":\"x\"}", &m, &err, &v), 0);
    CHECK_INT(m.kind, JSONRPC_REQUEST);
    CHECK(m.params == NULL);
    json_decref(v);

    CHECK_INT(classify_str("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &m,
                           &err, &v),
              0);
    CHECK_INT(m.kind, JSONRPC_NOTIFICATION);
    CHECK(m.id == NULL);
    CHECK_STR(m.method, "notifications/initialized");
    json_decref(v);

    CHECK_INT(
        classify_str("{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"result\":{\"ok\":true}}", &m, &err, &v),
        0);
    CHECK_INT(m.kind, JSONRPC_RESPONSE);
    CHECK_STR(json_string_value(m.id), "s1");
    CHECK(json_is_object(m.result) && m.error == NULL && m.method == NULL);
    json_decref(v);

    /* A null result is still a result. */
    CHECK_INT(classify_str("{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":null}", &m, &err, &v), 0);
    CHECK_INT(m.kind, JSONRPC_RESPONSE);
    CHECK(json_is_null(m.result));
    json_decref(v);

    CHECK_INT(classify_str("{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32601,"
                           "\"message\":\"nope\"}}",
                           &m, &err, &v),
              0);
    CHECK_INT(m.kind, JSONRPC_RESPONSE);
    CHECK(json_is_integer(m.id) && json_integer_value(m.id) == 3);
    CHECK(json_is_object(m.error) && m.result == NULL);
    json_decref(v);

    /* Ids: null (MCP forbids), float, object, array, bool. */
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"x\"}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"x\"}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1.0,\"method\":\"x\"}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"method\":\"x\"}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"x\"}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"x\"}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":false,\"method\":\"x\"}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":2.5,\"result\":{}}");
    /* jsonrpc member. */
    expect_invalid("{\"id\":1,\"method\":\"x\"}");
    expect_invalid("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"x\"}");
    expect_invalid("{\"jsonrpc\":2.0,\"id\":1,\"method\":\"x\"}");
    expect_invalid("{\"jsonrpc\":\"2.0 \",\"id\":1,\"method\":\"x\"}");
    expect_invalid("{\"jsonrpc\":null,\"method\":\"x\"}");
    /* method. */
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":42}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"method\":null}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"method\":[\"x\"]}");
    /* params. */
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":\"s\"}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":5}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":null}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":true}");
    /* responses. */
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{\"code\":1,"
                   "\"message\":\"m\"}}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"result\":{}}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"message\":\"m\"}}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":\"1\",\"message\":\"m\"}}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1.5,\"message\":\"m\"}}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":\"boom\"}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":null}");
    /* non-objects. */
    expect_invalid("[]");
    expect_invalid("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}]");
    expect_invalid("5");
    expect_invalid("\"x\"");
    expect_invalid("null");
    expect_invalid("{}");

    /* NULL (what a failed lookup gives) is not an object either. */
    memset(&err, 0, sizeof err);
    CHECK_INT(jsonrpc_classify(NULL, &m, &err), -1);
    CHECK_INT(err.code, JSONRPC_INVALID_REQUEST);
}

/* ---- jsonrpc_id_key ---- */

/* Names compared as C strings must not hide a NUL; arguments may carry one. */
static void test_nul_in_names(void)
{
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\\u0000x\"}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\\u0000\"}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"echo\\u0000zzz\"}}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/read\","
                   "\"params\":{\"uri\":\"file:///a\\u0000b\"}}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
                   "\"params\":{\"protocolVersion\":\"2025-03-26\\u0000x\"}}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\","
                   "\"params\":{\"_meta\":{\"protocolVersion\":\"2026-07-28\\u0000\"}}}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"logging/setLevel\","
                   "\"params\":{\"level\":\"debug\\u0000\"}}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/get\","
                   "\"params\":{\"taskId\":\"t\\u0000\"}}");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"completion/complete\","
                   "\"params\":{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"a\\u0000\"}}}");
    struct jsonrpc_msg m;
    struct jsonrpc_error err;
    json_t *v;
    CHECK_INT(
        classify_str("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                     "\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":\"a\\u0000b\"}}}",
                     &m, &err, &v),
        0);
    json_decref(v);
}

static void test_id_key(void)
{
    char a[64], b[64];
    json_t *s7 = json_string("7"), *i7 = json_integer(7);
    CHECK_INT(jsonrpc_id_key(s7, a, sizeof a), 0);
    CHECK_INT(jsonrpc_id_key(i7, b, sizeof b), 0);
    CHECK(strcmp(a, b) != 0);
    CHECK_STR(b, "7");

    /* Stable: the same id twice gives the same key; equal ids from
     * different objects give equal keys. */
    json_t *s7b = json_string("7");
    char c[64];
    CHECK_INT(jsonrpc_id_key(s7b, c, sizeof c), 0);
    CHECK_STR(a, c);

    json_t *sa = json_string("a"), *sb = json_string("b");
    CHECK_INT(jsonrpc_id_key(sa, a, sizeof a), 0);
    CHECK_INT(jsonrpc_id_key(sb, b, sizeof b), 0);
    CHECK(strcmp(a, b) != 0);

    json_t *neg = json_integer(-3), *big1 = json_integer(9007199254740993LL),
           *big0 = json_integer(9007199254740992LL);
    CHECK_INT(jsonrpc_id_key(neg, a, sizeof a), 0);
    CHECK_STR(a, "-3");
    CHECK_INT(jsonrpc_id_key(big1, a, sizeof a), 0);
    CHECK_INT(jsonrpc_id_key(big0, b, sizeof b), 0);
    CHECK(strcmp(a, b) != 0);
    CHECK_STR(a, "9007199254740993");

    /* Not a string or an integer. */
    json_t *real = json_real(7.0), *obj = json_object();
    CHECK_INT(jsonrpc_id_key(real, a, sizeof a), -1);
    CHECK_INT(jsonrpc_id_key(json_null(), a, sizeof a), -1);
    CHECK_INT(jsonrpc_id_key(json_true(), a, sizeof a), -1);
    CHECK_INT(jsonrpc_id_key(obj, a, sizeof a), -1);
    CHECK_INT(jsonrpc_id_key(NULL, a, sizeof a), -1);

    /* Capacity: "abc" needs 5 characters plus the NUL. */
    json_t *abc = json_string("abc");
    CHECK_INT(jsonrpc_id_key(abc, a, 6), 0);
    CHECK_INT(jsonrpc_id_key(abc, a, 5), -1);
    CHECK_INT(jsonrpc_id_key(i7, a, 1), -1);

    /* Ids that differ only after an escaped NUL ("a\u0000b", which
     * jsonrpc_parse accepts) must not share a key with "a" or with each
     * other: jsonrpc_id_key refuses them (-1) or the keys differ. */
    struct jsonrpc_error err = {0};
    json_t *msg = parse_str("{\"jsonrpc\":\"2.0\",\"id\":\"a\\u0000b\",\"method\":\"x\"}", &err);
    json_t *nul_b = json_stringn("a\0b", 3), *nul_c = json_stringn("a\0c", 3);
    CHECK(msg != NULL && json_equal(json_object_get(msg, "id"), nul_b));
    CHECK_INT(jsonrpc_id_key(sa, a, sizeof a), 0);
    int rb = jsonrpc_id_key(nul_b, b, sizeof b);
    CHECK(rb != 0 || strcmp(a, b) != 0); /* "a\0b" vs "a" */
    int rc = jsonrpc_id_key(nul_c, c, sizeof c);
    CHECK(rb != 0 || rc != 0 || strcmp(b, c) != 0); /* "a\0b" vs "a\0c" */
    json_decref(msg);
    json_decref(nul_b);
    json_decref(nul_c);

    json_decref(s7);
    json_decref(s7b);
    json_decref(i7);
    json_decref(sa);
    json_decref(sb);
    json_decref(neg);
    json_decref(big0);
    json_decref(big1);
    json_decref(real);
    json_decref(obj);
    json_decref(abc);
}

/* ---- builders and dump ---- */

static void test_builders(void)
{
    struct jsonrpc_msg m;
    struct jsonrpc_error err;

    json_t *id = json_integer(5);
    json_t *r = jsonrpc_result(id, json_pack("{s:i}", "x", 1));
    CHECK(json_is_object(r));
    CHECK_INT(json_object_size(r), 3);
    CHECK_STR(json_string_value(json_object_get(r, "jsonrpc")), "2.0");
    CHECK(json_equal(json_object_get(r, "id"), id));
    CHECK_INT(json_integer_value(json_object_get(json_object_get(r, "result"), "x")), 1);
    CHECK_INT(jsonrpc_classify(r, &m, &err), 0);
    CHECK_INT(m.kind, JSONRPC_RESPONSE);
    json_decref(r);
    /* The id was borrowed, not stolen. */
    CHECK_INT(id->refcount, 1);

    r = jsonrpc_result(id, NULL);
    CHECK(json_is_object(json_object_get(r, "result")));
    CHECK_INT(json_object_size(json_object_get(r, "result")), 0);
    json_decref(r);

    json_t *e = jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST, "bad request", NULL);
    CHECK(json_is_object(e));
    CHECK_INT(json_object_size(e), 3);
    CHECK(json_object_get(e, "id") != NULL && json_is_null(json_object_get(e, "id")));
    CHECK(json_object_get(e, "result") == NULL);
    json_t *eo = json_object_get(e, "error");
    CHECK_INT(json_integer_value(json_object_get(eo, "code")), JSONRPC_INVALID_REQUEST);
    CHECK_STR(json_string_value(json_object_get(eo, "message")), "bad request");
    CHECK(json_object_get(eo, "data") == NULL);
    size_t len = 0;
    char *text = jsonrpc_dump(e, &len);
    CHECK(text && strstr(text, "\"id\":null") != NULL);
    free(text);
    json_decref(e);

    e = jsonrpc_error(id, JSONRPC_INTERNAL_ERROR, "boom", json_pack("{s:s}", "why", "disk"));
    CHECK(json_equal(json_object_get(e, "id"), id));
    eo = json_object_get(e, "error");
    CHECK_INT(json_integer_value(json_object_get(eo, "code")), JSONRPC_INTERNAL_ERROR);
    CHECK_STR(json_string_value(json_object_get(json_object_get(eo, "data"), "why")), "disk");
    CHECK_INT(jsonrpc_classify(e, &m, &err), 0);
    CHECK_INT(m.kind, JSONRPC_RESPONSE);
    CHECK(m.error == eo);
    json_decref(e);
    CHECK_INT(id->refcount, 1);
    json_decref(id);

    /* A message quoting a client's text cut mid-character (or a header's
     * bytes) still makes an error, with U+FFFD where the text was not UTF-8. */
    e = jsonrpc_error(NULL, JSONRPC_METHOD_NOT_FOUND, "Method not found: x\xe2\x82", NULL);
    CHECK(e != NULL);
    CHECK_STR(json_string_value(json_object_get(json_object_get(e, "error"), "message")),
              "Method not found: x\xef\xbf\xbd\xef\xbf\xbd");
    json_decref(e);

    json_t *q = jsonrpc_request(json_string("mcpd-1"), "sampling/createMessage",
                                json_pack("{s:i}", "maxTokens", 10));
    CHECK_INT(json_object_size(q), 4);
    CHECK_STR(json_string_value(json_object_get(q, "id")), "mcpd-1");
    CHECK_STR(json_string_value(json_object_get(q, "method")), "sampling/createMessage");
    CHECK_INT(json_integer_value(json_object_get(json_object_get(q, "params"), "maxTokens")), 10);
    CHECK_INT(jsonrpc_classify(q, &m, &err), 0);
    CHECK_INT(m.kind, JSONRPC_REQUEST);
    json_decref(q);
    q = jsonrpc_request(json_integer(9), "ping", NULL);
    CHECK_INT(json_object_size(q), 3);
    CHECK(json_object_get(q, "params") == NULL);
    json_decref(q);

    json_t *n = jsonrpc_notification("notifications/progress",
                                     json_pack("{s:i, s:i}", "progress", 1, "total", 3));
    CHECK_INT(json_object_size(n), 3);
    CHECK(json_object_get(n, "id") == NULL);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(n, "params"), "total")), 3);
    CHECK_INT(jsonrpc_classify(n, &m, &err), 0);
    CHECK_INT(m.kind, JSONRPC_NOTIFICATION);
    json_decref(n);
    n = jsonrpc_notification("notifications/initialized", NULL);
    CHECK_INT(json_object_size(n), 2);
    json_decref(n);
}

static void test_dump(void)
{
    json_t *msg = jsonrpc_notification("notifications/message",
                                       json_pack("{s:s, s:s, s:[s]}", "level", "info", "data",
                                                 "line1\nline2\r\nline3\u2028end", "more", "a\nb"));
    size_t len = 0;
    char *text = jsonrpc_dump(msg, &len);
    CHECK(text != NULL);
    CHECK_INT(len, strlen(text));
    CHECK(memchr(text, '\n', len) == NULL);
    CHECK(memchr(text, '\r', len) == NULL);
    CHECK(strstr(text, "line1\\nline2\\r\\nline3") != NULL);
    /* It round-trips. */
    struct jsonrpc_error err;
    json_t *back = jsonrpc_parse(text, len, &err);
    CHECK(back && json_equal(back, msg));
    json_decref(back);
    free(text);
    /* len may be NULL. */
    text = jsonrpc_dump(msg, NULL);
    CHECK(text && strchr(text, '\n') == NULL);
    free(text);
    json_decref(msg);
}

/* ---- protocol ---- */

static void test_protocol(void)
{
    const char *versions[] = {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"};
    for (int i = 0; i < 4; i++) {
        CHECK(protocol_supported(versions[i]));
        CHECK_STR(protocol_negotiate(versions[i]), versions[i]);
    }
    CHECK_STR(PROTOCOL_LATEST, "2025-11-25");
    CHECK_STR(protocol_negotiate("2024-10-07"), "2025-11-25");
    CHECK_STR(protocol_negotiate("2099-01-01"), "2025-11-25");
    CHECK_STR(protocol_negotiate(""), "2025-11-25");
    CHECK_STR(protocol_negotiate("2025-06-18x"), "2025-11-25");
    CHECK_STR(protocol_negotiate(NULL), "2025-11-25");
    CHECK(!protocol_supported("2024-10-07"));
    CHECK(!protocol_allows_batch("2024-11-05")); /* batching came with 2025-03-26 */
    CHECK(!protocol_has_sse_polling("2024-11-05"));
    CHECK(!protocol_supported("2025-06-1"));
    CHECK(!protocol_supported(""));
    CHECK(!protocol_supported(NULL));

    CHECK(protocol_allows_batch("2025-03-26"));
    CHECK(!protocol_allows_batch("2025-06-18"));
    CHECK(!protocol_allows_batch("2025-11-25"));

    CHECK(protocol_has_sse_polling("2025-11-25"));
    CHECK(!protocol_has_sse_polling("2025-06-18"));
    CHECK(!protocol_has_sse_polling("2025-03-26"));

    const char *names[] = {"debug", "info",     "notice", "warning",
                           "error", "critical", "alert",  "emergency"};
    for (int i = 0; i < 8; i++) {
        CHECK_INT(protocol_log_level(names[i]), i);
        CHECK_STR(protocol_log_level_name(i), names[i]);
        CHECK_INT(protocol_log_level(protocol_log_level_name(i)), i);
    }
    CHECK_INT(protocol_log_level("warn"), -1);
    CHECK_INT(protocol_log_level("DEBUG"), -1);
    CHECK_INT(protocol_log_level("debug "), -1);
    CHECK_INT(protocol_log_level(""), -1);
    CHECK_INT(protocol_log_level("fatal"), -1);
    CHECK_INT(protocol_log_level(NULL), -1);
}

int main(void)
{
    test_parse();
    test_depth();
    test_classify();
    test_nul_in_names();
    test_id_key();
    test_builders();
    test_dump();
    test_protocol();
    return check_summary();
}
