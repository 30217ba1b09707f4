/* builtin_schema — checks tool arguments against the tool's inputSchema.
 *
 * A deliberately small JSON Schema subset, enough for the schemas this
 * backend publishes (so the published schema is the one source of truth for
 * what a tool accepts): type (string or array of names), enum, const,
 * minimum, maximum, minLength, maxLength, properties, required,
 * additionalProperties (false or a schema), items, minItems, maxItems and
 * local $ref ("#/$defs/NAME" or "#/definitions/NAME"). Other keywords are
 * ignored, which only ever makes the check more lenient. Recursion is bounded.
 * Pure function over borrowed values; safe from any thread. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "builtin_int.h"
#include "strcopy.h"

#define MAX_DEPTH 32

struct vctx {
    const json_t *root;
    char *err;
    size_t errlen;
};

static int verr(struct vctx *v, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int verr(struct vctx *v, const char *path, const char *fmt, ...)
{
    char what[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(v->err, v->errlen, "%s %s", path, what);
    return -1;
}

static int is_integral(const json_t *x)
{
    double d;

    if (json_is_integer(x))
        return 1;
    if (!json_is_real(x))
        return 0;
    d = json_real_value(x);
    return d > -9e15 && d < 9e15 && (double)(long long)d == d;
}

static int type_is(const char *t, const json_t *x)
{
    if (strcmp(t, "object") == 0)
        return json_is_object(x);
    if (strcmp(t, "array") == 0)
        return json_is_array(x);
    if (strcmp(t, "string") == 0)
        return json_is_string(x);
    if (strcmp(t, "boolean") == 0)
        return json_is_boolean(x);
    if (strcmp(t, "null") == 0)
        return json_is_null(x);
    if (strcmp(t, "number") == 0)
        return json_is_number(x);
    if (strcmp(t, "integer") == 0)
        return is_integral(x);
    return 1; /* unknown type name: don't reject */
}

static const char *type_name(const json_t *x)
{
    switch (json_typeof(x)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
        return "null";
    }
    return "value";
}

static size_t utf8_len(const json_t *s)
{
    const unsigned char *p = (const unsigned char *)json_string_value(s);
    size_t n = json_string_length(s), i, count = 0;

    for (i = 0; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            count++;
    return count;
}

static const json_t *resolve_ref(struct vctx *v, const char *ref)
{
    static const struct {
        const char *prefix, *key;
    } places[] = {{"#/$defs/", "$defs"}, {"#/definitions/", "definitions"}};
    size_t i;

    for (i = 0; i < sizeof places / sizeof places[0]; i++) {
        size_t n = strlen(places[i].prefix);
        if (strncmp(ref, places[i].prefix, n) == 0)
            return json_object_get(json_object_get(v->root, places[i].key), ref + n);
    }
    return NULL;
}

static int check(struct vctx *v, const json_t *schema, const json_t *x, const char *path,
                 int depth);

static int check_type(struct vctx *v, const json_t *type, const json_t *x, const char *path)
{
    size_t i;
    json_t *t;

    if (json_is_string(type)) {
        if (type_is(json_string_value(type), x))
            return 0;
        return verr(v, path, "must be of type %s (got %s)", json_string_value(type), type_name(x));
    }
    if (!json_is_array(type))
        return 0;
    json_array_foreach(type, i, t)
    {
        if (!json_is_string(t) || type_is(json_string_value(t), x))
            return 0;
    }
    return verr(v, path, "has the wrong type (got %s)", type_name(x));
}

/* <0, 0, >0 as a compares to b. Two integers compare exactly (a double
 * holds only 53 bits); otherwise as doubles. */
static int number_cmp(const json_t *a, const json_t *b)
{
    if (json_is_integer(a) && json_is_integer(b)) {
        json_int_t x = json_integer_value(a), y = json_integer_value(b);
        return (x > y) - (x < y);
    }
    double x = json_number_value(a), y = json_number_value(b);
    return (x > y) - (x < y);
}

/* JSON Schema's equality: json_equal, except that 1 and 1.0 are one
 * number (as "type": "integer" already holds). */
static int schema_equal(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return number_cmp(a, b) == 0;
    return json_equal((json_t *)a, (json_t *)b);
}

static int check_number(struct vctx *v, const json_t *schema, const json_t *x, const char *path)
{
    json_t *min = json_object_get(schema, "minimum"), *max = json_object_get(schema, "maximum");

    if (json_is_number(min) && number_cmp(x, min) < 0)
        return verr(v, path, "must be >= %g", json_number_value(min));
    if (json_is_number(max) && number_cmp(x, max) > 0)
        return verr(v, path, "must be <= %g", json_number_value(max));
    return 0;
}

static int check_string(struct vctx *v, const json_t *schema, const json_t *x, const char *path)
{
    json_t *min = json_object_get(schema, "minLength"), *max = json_object_get(schema, "maxLength");
    size_t n = utf8_len(x);

    if (json_is_integer(min) && (json_int_t)n < json_integer_value(min))
        return verr(v, path, "must be at least %lld characters long",
                    (long long)json_integer_value(min));
    if (json_is_integer(max) && (json_int_t)n > json_integer_value(max))
        return verr(v, path, "must be at most %lld characters long",
                    (long long)json_integer_value(max));
    return 0;
}

static int check_object(struct vctx *v, const json_t *schema, const json_t *x, const char *path,
                        int depth)
{
    json_t *props = json_object_get(schema, "properties");
    json_t *required = json_object_get(schema, "required");
    json_t *extra = json_object_get(schema, "additionalProperties");
    const char *key;
    json_t *val, *r;
    size_t i;
    char sub[256];

    json_array_foreach(required, i, r)
    {
        if (json_is_string(r) && json_object_get(x, json_string_value(r)) == NULL)
            return verr(v, path, "is missing required property '%s'", json_string_value(r));
    }
    json_object_foreach((json_t *)x, key, val)
    {
        json_t *ps = json_object_get(props, key);
        size_t at = strcopy(sub, sizeof sub - 1, path);
        sub[at++] = '.';
        strcopy(sub + at, sizeof sub - at, key);
        if (ps != NULL) {
            if (check(v, ps, val, sub, depth + 1) != 0)
                return -1;
        } else if (json_is_false(extra)) {
            return verr(v, path, "has unexpected property '%s'", key);
        } else if (json_is_object(extra)) {
            if (check(v, extra, val, sub, depth + 1) != 0)
                return -1;
        }
    }
    return 0;
}

static int check_array(struct vctx *v, const json_t *schema, const json_t *x, const char *path,
                       int depth)
{
    json_t *items = json_object_get(schema, "items");
    json_t *min = json_object_get(schema, "minItems"), *max = json_object_get(schema, "maxItems");
    size_t i, n = json_array_size(x);
    json_t *el;
    char sub[256];

    if (json_is_integer(min) && (json_int_t)n < json_integer_value(min))
        return verr(v, path, "must have at least %lld items", (long long)json_integer_value(min));
    if (json_is_integer(max) && (json_int_t)n > json_integer_value(max))
        return verr(v, path, "must have at most %lld items", (long long)json_integer_value(max));
    if (!json_is_object(items) && !json_is_false(items))
        return 0; /* true, absent or junk: any item */
    json_array_foreach(x, i, el)
    {
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        if (check(v, items, el, sub, depth + 1) != 0)
            return -1;
    }
    return 0;
}

static int check(struct vctx *v, const json_t *schema, const json_t *x, const char *path, int depth)
{
    json_t *ref, *type, *en, *cn, *e;
    size_t i;

    if (depth > MAX_DEPTH)
        return verr(v, path, "is nested too deeply");
    if (json_is_false(schema))
        return verr(v, path, "is not allowed");
    if (!json_is_object(schema))
        return 0; /* true or junk: accept */

    ref = json_object_get(schema, "$ref");
    if (json_is_string(ref)) {
        const json_t *target = resolve_ref(v, json_string_value(ref));
        if (target != NULL && check(v, target, x, path, depth + 1) != 0)
            return -1;
    }

    type = json_object_get(schema, "type");
    if (type != NULL && check_type(v, type, x, path) != 0)
        return -1;

    en = json_object_get(schema, "enum");
    if (json_is_array(en)) {
        int found = 0;
        json_array_foreach(en, i, e)
        {
            if (schema_equal(e, x)) {
                found = 1;
                break;
            }
        }
        if (!found)
            return verr(v, path, "must be one of the allowed values");
    }
    cn = json_object_get(schema, "const");
    if (cn != NULL && !schema_equal(cn, x))
        return verr(v, path, "must equal the constant value");

    if (json_is_number(x))
        return check_number(v, schema, x, path);
    if (json_is_string(x))
        return check_string(v, schema, x, path);
    if (json_is_object(x))
        return check_object(v, schema, x, path, depth);
    if (json_is_array(x))
        return check_array(v, schema, x, path, depth);
    return 0;
}

int builtin_schema_validate(const json_t *schema, const json_t *value, const char *what, char *err,
                            size_t errlen)
{
    struct vctx v = {schema, err, errlen};

    if (errlen > 0)
        err[0] = '\0';
    return check(&v, schema, value, what, 0);
}
