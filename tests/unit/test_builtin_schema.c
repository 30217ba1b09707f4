/* test_builtin_schema — the built-in tools' argument check
 * (builtin_schema.c, pure): every keyword of the subset with exact error
 * messages and paths (type, enum, const, minimum/maximum,
 * minLength/maxLength in characters, properties, required,
 * additionalProperties, items, minItems/maxItems, $ref into $defs and
 * definitions), true/false/junk schemas, recursion bounded, small error
 * buffers; then the schemas the toolset really publishes (parsed by
 * builtin_tools_init) against good and bad arguments.
 *
 * test_once_deviations keeps the deviations from JSON Schema these tests
 * found (1 vs 1.0 in enum/const, big integers in bounds, items:false). */
#include "builtin_int.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

struct schema_case {
    const char *schema, *value; /* JSON text */
    const char *err;            /* NULL: valid */
};

static const struct schema_case cases[] = {
    /* type, one name */
    {"{\"type\":\"string\"}", "\"x\"", NULL},
    {"{\"type\":\"string\"}", "1", "v must be of type string (got integer)"},
    {"{\"type\":\"string\"}", "1.5", "v must be of type string (got number)"},
    {"{\"type\":\"string\"}", "null", "v must be of type string (got null)"},
    {"{\"type\":\"string\"}", "true", "v must be of type string (got boolean)"},
    {"{\"type\":\"string\"}", "false", "v must be of type string (got boolean)"},
    {"{\"type\":\"string\"}", "{}", "v must be of type string (got object)"},
    {"{\"type\":\"string\"}", "[]", "v must be of type string (got array)"},
    {"{\"type\":\"integer\"}", "0", NULL},
    {"{\"type\":\"integer\"}", "-7", NULL},
    {"{\"type\":\"integer\"}", "1.0", NULL}, /* a whole real is an integer */
    {"{\"type\":\"integer\"}", "-0.0", NULL},
    {"{\"type\":\"integer\"}", "1e3", NULL},
    {"{\"type\":\"integer\"}", "1.5", "v must be of type integer (got number)"},
    {"{\"type\":\"integer\"}", "\"1\"", "v must be of type integer (got string)"},
    {"{\"type\":\"integer\"}", "true", "v must be of type integer (got boolean)"},
    {"{\"type\":\"integer\"}", "9223372036854775807", NULL},
    {"{\"type\":\"number\"}", "1", NULL},
    {"{\"type\":\"number\"}", "-1.25e-7", NULL},
    {"{\"type\":\"number\"}", "\"1\"", "v must be of type number (got string)"},
    {"{\"type\":\"boolean\"}", "false", NULL},
    {"{\"type\":\"boolean\"}", "0", "v must be of type boolean (got integer)"},
    {"{\"type\":\"null\"}", "null", NULL},
    {"{\"type\":\"null\"}", "0", "v must be of type null (got integer)"},
    {"{\"type\":\"object\"}", "{\"a\":1}", NULL},
    {"{\"type\":\"object\"}", "[]", "v must be of type object (got array)"},
    {"{\"type\":\"array\"}", "[1]", NULL},
    {"{\"type\":\"array\"}", "{}", "v must be of type array (got object)"},
    {"{\"type\":\"Object\"}", "1", NULL}, /* unknown type names do not reject */
    {"{\"type\":\"\"}", "1", NULL},
    {"{\"type\":5}", "1", NULL}, /* nor does a type that is no name */
    /* type, a list of names */
    {"{\"type\":[\"string\",\"null\"]}", "null", NULL},
    {"{\"type\":[\"string\",\"null\"]}", "\"\"", NULL},
    {"{\"type\":[\"string\",\"null\"]}", "1", "v has the wrong type (got integer)"},
    {"{\"type\":[\"integer\",\"boolean\"]}", "2.5", "v has the wrong type (got number)"},
    {"{\"type\":[]}", "1", "v has the wrong type (got integer)"},
    {"{\"type\":[\"string\",5]}", "1", NULL}, /* a non-name entry accepts */
    /* enum and const (deep equality) */
    {"{\"enum\":[\"a\",\"b\"]}", "\"b\"", NULL},
    {"{\"enum\":[\"a\",\"b\"]}", "\"c\"", "v must be one of the allowed values"},
    {"{\"enum\":[\"a\",\"b\"]}", "\"A\"", "v must be one of the allowed values"},
    {"{\"enum\":[1,null,{\"x\":[1,2]}]}", "{\"x\":[1,2]}", NULL},
    {"{\"enum\":[1,null,{\"x\":[1,2]}]}", "{\"x\":[2,1]}", "v must be one of the allowed values"},
    {"{\"enum\":[1,null,{\"x\":[1,2]}]}", "null", NULL},
    {"{\"enum\":[]}", "1", "v must be one of the allowed values"},
    {"{\"enum\":\"a\"}", "\"b\"", NULL}, /* not a list: ignored */
    {"{\"const\":\"x\"}", "\"x\"", NULL},
    {"{\"const\":\"x\"}", "\"y\"", "v must equal the constant value"},
    {"{\"const\":null}", "null", NULL},
    {"{\"const\":null}", "0", "v must equal the constant value"},
    {"{\"const\":{\"a\":[true]}}", "{\"a\":[true]}", NULL},
    {"{\"const\":{\"a\":[true]}}", "{\"a\":[true],\"b\":1}", "v must equal the constant value"},
    {"{\"type\":\"string\",\"enum\":[1]}", "1", "v must be of type string (got integer)"},
    /* minimum / maximum (inclusive) */
    {"{\"minimum\":1,\"maximum\":10}", "1", NULL},
    {"{\"minimum\":1,\"maximum\":10}", "10", NULL},
    {"{\"minimum\":1,\"maximum\":10}", "0", "v must be >= 1"},
    {"{\"minimum\":1,\"maximum\":10}", "0.999", "v must be >= 1"},
    {"{\"minimum\":1,\"maximum\":10}", "11", "v must be <= 10"},
    {"{\"minimum\":1,\"maximum\":10}", "10.5", "v must be <= 10"},
    {"{\"minimum\":-2.5}", "-2.5", NULL},
    {"{\"minimum\":-2.5}", "-3", "v must be >= -2.5"},
    {"{\"maximum\":0}", "-0.0", NULL},
    {"{\"minimum\":1}", "\"0\"", NULL}, /* only numbers are compared */
    {"{\"minimum\":\"5\"}", "1", NULL}, /* a bound that is no number: ignored */
    {"{\"minimum\":5,\"maximum\":1}", "3", "v must be >= 5"},
    /* minLength / maxLength, in characters (code points), not bytes */
    {"{\"minLength\":2,\"maxLength\":3}", "\"ab\"", NULL},
    {"{\"minLength\":2,\"maxLength\":3}", "\"abc\"", NULL},
    {"{\"minLength\":2,\"maxLength\":3}", "\"a\"", "v must be at least 2 characters long"},
    {"{\"minLength\":2,\"maxLength\":3}", "\"abcd\"", "v must be at most 3 characters long"},
    {"{\"minLength\":1}", "\"\"", "v must be at least 1 characters long"},
    {"{\"maxLength\":3}", "\"h\\u00e9\\u00e9\"", NULL},               /* 5 bytes, 3 characters */
    {"{\"maxLength\":3}", "\"\\u65e5\\u672c\\u8a9e\"", NULL},         /* 9 bytes */
    {"{\"maxLength\":3}", "\"\\ud83d\\ude00\\ud83d\\ude00x\"", NULL}, /* two emoji and x */
    {"{\"maxLength\":3}", "\"\\u65e5\\u672c\\u8a9ex\"", "v must be at most 3 characters long"},
    {"{\"minLength\":2}", "\"\\ud83d\\ude00\"", "v must be at least 2 characters long"},
    {"{\"maxLength\":2}", "\"a\\u0000b\"", "v must be at most 2 characters long"}, /* NUL counts */
    {"{\"maxLength\":0}", "\"\"", NULL},
    {"{\"minLength\":2.0}", "\"a\"", NULL}, /* only integer bounds are read */
    {"{\"maxLength\":1}", "12345", NULL},   /* only strings are measured */
    /* properties, required, additionalProperties */
    {"{\"properties\":{\"a\":{\"type\":\"string\"}}}", "{\"a\":\"x\",\"b\":1}", NULL},
    {"{\"properties\":{\"a\":{\"type\":\"string\"}}}", "{\"a\":1}",
     "v.a must be of type string (got integer)"},
    {"{\"properties\":{\"a\":{\"type\":\"string\"}}}", "{}", NULL},
    {"{\"required\":[\"a\",\"b\"]}", "{\"a\":1,\"b\":null}", NULL},
    {"{\"required\":[\"a\",\"b\"]}", "{\"a\":1}", "v is missing required property 'b'"},
    {"{\"required\":[\"a\",\"b\"]}", "{}", "v is missing required property 'a'"},
    {"{\"required\":[\"a\"]}", "[1]", NULL},         /* only objects have properties */
    {"{\"required\":[5,\"a\"]}", "{\"a\":1}", NULL}, /* non-name entries ignored */
    {"{\"required\":\"a\"}", "{}", NULL},            /* not a list: ignored */
    /* required is checked before the properties' own schemas */
    {"{\"required\":[\"b\"],\"properties\":{\"a\":{\"type\":\"string\"}}}", "{\"a\":1}",
     "v is missing required property 'b'"},
    {"{\"properties\":{\"a\":{}},\"additionalProperties\":false}", "{\"a\":1}", NULL},
    {"{\"properties\":{\"a\":{}},\"additionalProperties\":false}", "{\"a\":1,\"b\":2}",
     "v has unexpected property 'b'"},
    {"{\"additionalProperties\":false}", "{}", NULL},
    {"{\"additionalProperties\":false}", "{\"x\":1}", "v has unexpected property 'x'"},
    {"{\"additionalProperties\":true}", "{\"x\":1}", NULL},
    {"{\"properties\":{\"a\":{}},\"additionalProperties\":{\"type\":\"integer\"}}",
     "{\"a\":\"s\",\"b\":2}", NULL},
    {"{\"properties\":{\"a\":{}},\"additionalProperties\":{\"type\":\"integer\"}}",
     "{\"a\":\"s\",\"b\":\"x\"}", "v.b must be of type integer (got string)"},
    {"{\"properties\":{\"a\":false}}", "{\"a\":1}", "v.a is not allowed"},
    {"{\"properties\":{\"a\":false}}", "{\"b\":1}", NULL},
    {"{\"properties\":{\"a\":true}}", "{\"a\":1}", NULL},
    /* items, minItems, maxItems */
    {"{\"items\":{\"type\":\"integer\"}}", "[1,2,3]", NULL},
    {"{\"items\":{\"type\":\"integer\"}}", "[]", NULL},
    {"{\"items\":{\"type\":\"integer\"}}", "[1,2,\"x\"]",
     "v[2] must be of type integer (got string)"},
    {"{\"minItems\":2}", "[1]", "v must have at least 2 items"},
    {"{\"minItems\":2}", "[1,2]", NULL},
    {"{\"maxItems\":1}", "[1,2]", "v must have at most 1 items"},
    {"{\"maxItems\":0}", "[]", NULL},
    {"{\"minItems\":1,\"items\":{\"type\":\"string\"}}", "[]", "v must have at least 1 items"},
    {"{\"maxItems\":1}", "\"ab\"", NULL}, /* only arrays are counted */
    /* the path names the offending place through objects and arrays */
    {"{\"properties\":{\"a\":{\"items\":{\"properties\":{\"b\":{\"type\":\"string\"}}}}}}",
     "{\"a\":[{\"b\":\"ok\"},{\"b\":1}]}", "v.a[1].b must be of type string (got integer)"},
    {"{\"items\":{\"items\":{\"minimum\":0}}}", "[[0],[1,2,-1]]", "v[1][2] must be >= 0"},
    {"{\"properties\":{\"a\":{\"required\":[\"z\"]}}}", "{\"a\":{}}",
     "v.a is missing required property 'z'"},
    /* true, false and junk schemas */
    {"true", "{\"anything\":[1]}", NULL},
    {"false", "1", "v is not allowed"},
    {"false", "null", "v is not allowed"},
    {"\"junk\"", "1", NULL},
    {"{}", "[1,{}]", NULL},
    {"{\"pattern\":\"^a$\",\"format\":\"email\",\"oneOf\":[false]}", "\"zzz\"", NULL}, /* ignored */
    /* $ref */
    {"{\"$defs\":{\"p\":{\"type\":\"integer\"}},\"$ref\":\"#/$defs/p\"}", "1", NULL},
    {"{\"$defs\":{\"p\":{\"type\":\"integer\"}},\"$ref\":\"#/$defs/p\"}", "\"1\"",
     "v must be of type integer (got string)"},
    {"{\"definitions\":{\"p\":{\"minimum\":3}},\"properties\":{\"a\":{\"$ref\":"
     "\"#/definitions/p\"}}}",
     "{\"a\":2}", "v.a must be >= 3"},
    /* both $ref and its siblings apply */
    {"{\"$defs\":{\"p\":{\"type\":\"integer\"}},\"$ref\":\"#/$defs/p\",\"minimum\":5}", "4",
     "v must be >= 5"},
    {"{\"$defs\":{\"p\":{\"type\":\"integer\"}},\"$ref\":\"#/$defs/p\",\"minimum\":5}", "5.5",
     "v must be of type integer (got number)"},
    /* refs that lead nowhere are ignored */
    {"{\"$ref\":\"#/$defs/missing\"}", "1", NULL},
    {"{\"$defs\":{\"p\":false},\"$ref\":\"#/definitions/p\"}", "1", NULL},
    {"{\"$defs\":{\"p\":false},\"$ref\":\"#/$defs/p\"}", "1", "v is not allowed"},
    {"{\"$defs\":{\"p\":false},\"$ref\":\"https://example.com/s#/$defs/p\"}", "1", NULL},
    {"{\"$defs\":{\"p\":false},\"$ref\":\"#\"}", "1", NULL},
    {"{\"$defs\":{\"p\":false},\"$ref\":5}", "1", NULL},
    /* a recursive definition, followed as deep as the value goes */
    {"{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#/$defs/n\"}}}},"
     "\"$ref\":\"#/$defs/n\"}",
     "{\"next\":{\"next\":{\"next\":{}}}}", NULL},
    {"{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#/$defs/n\"}}}},"
     "\"$ref\":\"#/$defs/n\"}",
     "{\"next\":{\"next\":{\"next\":7}}}", "v.next.next.next must be of type object (got integer)"},
    /* a definition that refers to itself ends instead of looping */
    {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", "1",
     "v is nested too deeply"},
    {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},"
     "\"$ref\":\"#/$defs/a\"}",
     "{}", "v is nested too deeply"},
};

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!j)
        printf("     bad test JSON %s: %s\n", text, e.text);
    return j;
}

static void test_cases(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct schema_case *c = &cases[i];
        json_t *schema = parse(c->schema), *value = parse(c->value);
        if (!CHECK(schema && value)) {
            json_decref(schema);
            json_decref(value);
            continue;
        }
        char err[256];
        memset(err, 'Z', sizeof err);
        int rc = builtin_schema_validate(schema, value, "v", err, sizeof err);
        int ok = c->err ? rc == -1 && strcmp(err, c->err) == 0 : rc == 0 && err[0] == '\0';
        if (!check_record(ok, __FILE__, __LINE__, c->schema))
            printf("     case %zu value %s: rc %d err \"%.*s\", want %s\n", i, c->value, rc,
                   (int)strnlen(err, sizeof err), err, c->err ? c->err : "valid");
        json_decref(schema);
        json_decref(value);
    }
}

/* Nesting is bounded at 32 schema levels (never a stack overflow). With a
 * list type defined by $ref, each list level costs two (the $ref and the
 * items), so 16 nested lists are checked and 17 or 1000 are refused, with
 * the path where the bound was hit. */
static json_t *nested_lists(int levels)
{
    json_t *v = json_array(), *inner = v;
    for (int d = 1; d < levels; d++) {
        json_t *a = json_array();
        json_array_append_new(inner, a);
        inner = a;
    }
    return v;
}

static void test_depth(void)
{
    json_t *schema = parse("{\"$defs\":{\"l\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/"
                           "l\"}}},\"$ref\":\"#/$defs/l\"}");
    char err[256], want[256];
    static const int levels[] = {1, 16, 17, 1000};
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        json_t *v = nested_lists(levels[i]);
        int rc = builtin_schema_validate(schema, v, "v", err, sizeof err);
        if (levels[i] <= 16) {
            CHECK_INT(rc, 0);
            CHECK_STR(err, "");
        } else {
            CHECK_INT(rc, -1);
            snprintf(want, sizeof want, "v%s is nested too deeply",
                     "[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]");
            CHECK_STR(err, want);
        }
        json_decref(v);
    }
    /* Ten levels, well within the bound, are checked all the way down. */
    json_t *v = parse("[[[[[[[[[[1]]]]]]]]]]");
    CHECK_INT(builtin_schema_validate(schema, v, "v", err, sizeof err), -1);
    CHECK_STR(err, "v[0][0][0][0][0][0][0][0][0][0] must be of type array (got integer)");
    json_decref(v);
    json_decref(schema);
    /* Written out as 40 nested "items" (one level each): a value 33 lists
     * deep reaches level 32 and passes, 34 deep is refused at level 33. */
    char text[1024] = "";
    for (int i = 0; i < 40; i++)
        strcat(text, "{\"items\":");
    strcat(text, "{}");
    for (int i = 0; i < 40; i++)
        strcat(text, "}");
    schema = parse(text);
    for (int n = 33; n <= 34; n++) {
        v = nested_lists(n);
        int rc = builtin_schema_validate(schema, v, "v", err, sizeof err);
        CHECK_INT(rc, n == 33 ? 0 : -1);
        if (n == 34) {
            strcpy(want, "v");
            for (int i = 0; i < 33; i++)
                strcat(want, "[0]");
            strcat(want, " is nested too deeply");
            CHECK_STR(err, want);
        }
        json_decref(v);
    }
    json_decref(schema);
}

/* Error buffers: truncated but terminated; a zero-sized one is not written;
 * a long path is cut, not overflowed. */
static void test_err_buffers(void)
{
    json_t *schema = parse("{\"type\":\"string\"}"), *value = json_integer(1);
    char small[8];
    CHECK_INT(builtin_schema_validate(schema, value, "arguments", small, sizeof small), -1);
    CHECK_STR(small, "argumen");
    char none[4] = "abc";
    CHECK_INT(builtin_schema_validate(schema, value, "v", none, 0), -1);
    CHECK_STR(none, "abc");
    char ok[16] = "junk";
    json_t *str = json_string("s");
    CHECK_INT(builtin_schema_validate(schema, str, "v", ok, sizeof ok), 0);
    CHECK_STR(ok, "");
    json_decref(str);
    json_decref(schema);
    json_decref(value);

    /* A 400-character property name: the path is cut at 255 bytes. */
    char key[401];
    memset(key, 'k', 400);
    key[400] = '\0';
    schema = json_pack("{s:{s:o}}", "additionalProperties", "type", json_string("integer"));
    value = json_pack("{s:s}", key, "x");
    char err[512];
    CHECK_INT(builtin_schema_validate(schema, value, "v", err, sizeof err), -1);
    char want[512];
    snprintf(want, sizeof want, "v.%.253s must be of type integer (got string)", key);
    CHECK_STR(err, want);
    json_decref(schema);
    json_decref(value);
}

/* The schemas the built-in toolset publishes, as builtin_tools_init parses
 * them. They are found by their shape, not their place in the table. */
#define NTOOLS 16 /* the tools in builtin_tools.c */

static const json_t *find_schema(json_t **schemas, const char *prop)
{
    for (size_t i = 0; i < NTOOLS; i++)
        if (json_object_get(json_object_get(schemas[i], "properties"), prop))
            return schemas[i];
    return NULL;
}

struct tool_case {
    const char *prop; /* a property that picks the schema */
    const char *args; /* JSON text */
    const char *err;  /* NULL: valid */
};

static const struct tool_case tool_cases[] = {
    /* countdown */
    {"interval_ms", "{\"n\":3,\"interval_ms\":0}", NULL},
    {"interval_ms", "{\"n\":10000,\"interval_ms\":60000}", NULL},
    {"interval_ms", "{\"n\":3.0,\"interval_ms\":5}", NULL},
    {"interval_ms", "{\"n\":3,\"interval_ms\":0,\"extra\":true}", NULL},
    {"interval_ms", "{}", "arguments is missing required property 'n'"},
    {"interval_ms", "{\"n\":1}", "arguments is missing required property 'interval_ms'"},
    {"interval_ms", "{\"n\":0,\"interval_ms\":0}", "arguments.n must be >= 1"},
    {"interval_ms", "{\"n\":10001,\"interval_ms\":0}", "arguments.n must be <= 10000"},
    {"interval_ms", "{\"n\":-1,\"interval_ms\":0}", "arguments.n must be >= 1"},
    {"interval_ms", "{\"n\":\"3\",\"interval_ms\":0}",
     "arguments.n must be of type integer (got string)"},
    {"interval_ms", "{\"n\":2.5,\"interval_ms\":0}",
     "arguments.n must be of type integer (got number)"},
    {"interval_ms", "{\"n\":null,\"interval_ms\":0}",
     "arguments.n must be of type integer (got null)"},
    {"interval_ms", "{\"n\":1,\"interval_ms\":60001}", "arguments.interval_ms must be <= 60000"},
    {"interval_ms", "{\"n\":1,\"interval_ms\":-1}", "arguments.interval_ms must be >= 0"},
    {"interval_ms", "{\"n\":1,\"interval_ms\":9223372036854775807}",
     "arguments.interval_ms must be <= 60000"},
    /* test_sampling */
    {"prompt", "{\"prompt\":\"hi\"}", NULL},
    {"prompt", "{}", "arguments is missing required property 'prompt'"},
    {"prompt", "{\"prompt\":[\"hi\"]}", "arguments.prompt must be of type string (got array)"},
    /* json_schema_2020_12_tool: $defs, $ref, additionalProperties:false */
    {"address", "{}", NULL},
    {"address", "{\"name\":\"n\",\"address\":{\"street\":\"s\",\"city\":\"c\",\"zip\":1}}", NULL},
    {"address", "{\"address\":{\"city\":1}}",
     "arguments.address.city must be of type string (got integer)"},
    {"address", "{\"address\":\"Main St\"}",
     "arguments.address must be of type object (got string)"},
    {"address", "{\"name\":\"n\",\"extra\":1}", "arguments has unexpected property 'extra'"},
    {"address", "{\"name\":5}", "arguments.name must be of type string (got integer)"},
};

static void test_published(void)
{
    struct builtin b;
    memset(&b, 0, sizeof b);
    if (!CHECK(builtin_tools_init(&b) == 0))
        return;
    int all = 1, no_args = 0;
    char err[512];
    json_t *empty = json_object(), *one = json_pack("{s:i}", "x", 1);
    json_t *object = json_string("object");
    for (size_t i = 0; i < NTOOLS; i++) {
        all &= json_is_object(b.tool_schemas[i]);
        all &= json_equal(json_object_get(b.tool_schemas[i], "type"), object);
        /* Every tool accepts arguments that are exactly what it requires. */
        json_t *args = json_object();
        json_t *req = json_object_get(b.tool_schemas[i], "required"), *r;
        size_t k;
        json_array_foreach(req, k, r)
        {
            json_t *p = json_object_get(json_object_get(b.tool_schemas[i], "properties"),
                                        json_string_value(r));
            const char *t = json_string_value(json_object_get(p, "type"));
            json_object_set_new(args, json_string_value(r),
                                t && strcmp(t, "integer") == 0 ? json_integer(1)
                                                               : json_string("text"));
        }
        all &= builtin_schema_validate(b.tool_schemas[i], args, "arguments", err, sizeof err) == 0;
        json_decref(args);
        if (json_object_size(json_object_get(b.tool_schemas[i], "properties")) == 0) {
            no_args++;
            /* A tool without arguments takes {} and ignores others. */
            all &= builtin_schema_validate(b.tool_schemas[i], empty, "arguments", err,
                                           sizeof err) == 0;
            all &=
                builtin_schema_validate(b.tool_schemas[i], one, "arguments", err, sizeof err) == 0;
        }
    }
    CHECK(all);
    CHECK_INT(no_args, 11);
    json_decref(empty);
    json_decref(one);
    json_decref(object);

    /* echo and test_elicitation both require "message": a string. */
    for (int pick = 0; pick < 2; pick++) {
        int found = 0;
        for (size_t i = 0; i < NTOOLS; i++) {
            json_t *s = b.tool_schemas[i];
            if (!json_object_get(json_object_get(s, "properties"), "message"))
                continue;
            found++;
            json_t *v = parse(pick ? "{\"message\":1}" : "{}");
            CHECK_INT(builtin_schema_validate(s, v, "arguments", err, sizeof err), -1);
            CHECK_STR(err, pick ? "arguments.message must be of type string (got integer)"
                                : "arguments is missing required property 'message'");
            json_decref(v);
        }
        CHECK_INT(found, 2);
    }

    for (size_t i = 0; i < sizeof tool_cases / sizeof tool_cases[0]; i++) {
        const struct tool_case *c = &tool_cases[i];
        const json_t *schema = find_schema(b.tool_schemas, c->prop);
        json_t *args = parse(c->args);
        if (!CHECK(schema && args)) {
            json_decref(args);
            continue;
        }
        memset(err, 'Z', sizeof err);
        int rc = builtin_schema_validate(schema, args, "arguments", err, sizeof err);
        int ok = c->err ? rc == -1 && strcmp(err, c->err) == 0 : rc == 0 && err[0] == '\0';
        if (!check_record(ok, __FILE__, __LINE__, c->args))
            printf("     tool case %zu: rc %d err \"%.*s\", want %s\n", i, rc,
                   (int)strnlen(err, sizeof err), err, c->err ? c->err : "valid");
        json_decref(args);
    }
    builtin_tools_free(&b);
    CHECK(b.tool_schemas == NULL);
    builtin_tools_free(&b); /* twice is harmless */
}

/* Once deviations from JSON Schema (found by these tests, fixed):
 * 1. enum and const compare with json_equal, for which 1 and 1.0 differ
 *    (an integer and a real), while JSON Schema calls them the same number:
 *    {"enum":[1]} refuses 1.0 and {"const":2.0} refuses 2, although
 *    {"type":"integer"} accepts 1.0.
 * 2. minimum/maximum compare as doubles, so integers beyond 2^53 lose
 *    precision: {"maximum":9007199254740992} accepts 9007199254740993.
 * 3. items:false (no items allowed) is ignored, so [1] passes. */
static void test_once_deviations(void)
{
    static const struct schema_case bugs[] = {
        {"{\"enum\":[1]}", "1.0", NULL},
        {"{\"const\":2.0}", "2", NULL},
        {"{\"maximum\":9007199254740992}", "9007199254740993", "v must be <= 9.0072e+15"},
        {"{\"items\":false}", "[1]", "v[0] is not allowed"},
    };
    for (size_t i = 0; i < sizeof bugs / sizeof bugs[0]; i++) {
        json_t *s = parse(bugs[i].schema), *v = parse(bugs[i].value);
        char err[256] = "";
        int rc = builtin_schema_validate(s, v, "v", err, sizeof err);
        if (bugs[i].err) {
            CHECK_INT(rc, -1);
            CHECK_STR(err, bugs[i].err);
        } else {
            CHECK_INT(rc, 0);
        }
        json_decref(s);
        json_decref(v);
    }
}

int main(void)
{
    test_cases();
    test_depth();
    test_err_buffers();
    test_published();
    test_once_deviations();
    return check_summary();
}
