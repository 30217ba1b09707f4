/* modern — see modern.h. */
#include "modern.h"

#include "mcp_headers.h"
#include "protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int modern_is(const json_t *m)
{
    const char *method = json_string_value(json_object_get(m, "method"));
    if (method && strcmp(method, "server/discover") == 0)
        return 1;
    json_t *meta = json_object_get(json_object_get(m, "params"), "_meta");
    return json_is_string(json_object_get(meta, PROTOCOL_META_VERSION));
}

static char *base64(const unsigned char *s, size_t n)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned acc = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0u) |
                       (i + 2 < n ? (unsigned)s[i + 2] : 0u);
        out[o++] = digits[acc >> 18 & 63];
        out[o++] = digits[acc >> 12 & 63];
        out[o++] = i + 1 < n ? digits[acc >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? digits[acc & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

/* 1 when s can go in a header as it is: visible ASCII and inner spaces,
 * and not shaped like the base64 sentinel (which would be decoded). */
static int plain_safe(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c > 0x7E)
            return 0;
    }
    if (n && (s[0] == ' ' || s[n - 1] == ' '))
        return 0;
    static const char pre[] = "=?base64?", suf[] = "?=";
    return !(n >= sizeof pre - 1 + sizeof suf - 1 && strncmp(s, pre, sizeof pre - 1) == 0 &&
             strncmp(s + n - (sizeof suf - 1), suf, sizeof suf - 1) == 0);
}

static char *encode_text(const char *s, size_t n)
{
    if (plain_safe(s, n)) {
        char *d = malloc(n + 1);
        if (d) {
            memcpy(d, s, n);
            d[n] = '\0';
        }
        return d;
    }
    char *b = base64((const unsigned char *)s, n);
    if (!b)
        return NULL;
    size_t len = strlen(b) + 12; /* the sentinel around it, and the NUL */
    char *out = malloc(len);
    if (out)
        snprintf(out, len, "=?base64?%s?=", b);
    free(b);
    return out;
}

char *modern_encode_value(const json_t *v)
{
    char num[64];
    if (json_is_string(v))
        return encode_text(json_string_value(v), json_string_length(v));
    if (json_is_integer(v))
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
    else if (json_is_boolean(v))
        snprintf(num, sizeof num, "%s", json_is_true(v) ? "true" : "false");
    else if (json_is_real(v))
        snprintf(num, sizeof num, "%.17g", json_real_value(v));
    else
        return NULL;
    return encode_text(num, strlen(num));
}

/* Appends "name: value" ("name;" for an empty value: curl drops "name:"). */
static int add(struct curl_slist **list, const char *name, const char *value)
{
    size_t len = strlen(name) + strlen(value) + 3;
    char *line = malloc(len);
    if (!line)
        return -1;
    snprintf(line, len, *value ? "%s: %s" : "%s;", name, value);
    struct curl_slist *more = curl_slist_append(*list, line);
    free(line);
    if (!more)
        return -1;
    *list = more;
    return 0;
}

/* 1 when s may go into a header verbatim: visible ASCII only. The client's
 * revision and method are copied as they are (the server compares them
 * exactly); a CR or LF there would add headers of the client's choosing. */
static int token_safe(const char *s)
{
    for (; *s; s++) {
        if ((unsigned char)*s < 0x21 || (unsigned char)*s > 0x7E)
            return 0;
    }
    return 1;
}

/* The argument at path (an array of property names) in args, or NULL. */
static json_t *value_at(json_t *args, const json_t *path)
{
    size_t i;
    json_t *step;
    json_array_foreach(path, i, step)
    {
        args = json_object_get(args, json_string_value(step));
        if (!args)
            return NULL;
    }
    return args;
}

int modern_headers(const json_t *m, const json_t *param_map, struct curl_slist **list)
{
    const char *method = json_string_value(json_object_get(m, "method"));
    json_t *params = json_object_get(m, "params");
    const char *version =
        json_string_value(json_object_get(json_object_get(params, "_meta"), PROTOCOL_META_VERSION));
    if (!version || !token_safe(version))
        version = MODERN_VERSION; /* the server then says the body's is wrong */
    if (add(list, "MCP-Protocol-Version", version) != 0)
        return -1;
    if (!method || !token_safe(method))
        return 0; /* the server answers the missing header with -32020 */
    if (add(list, "Mcp-Method", method) != 0)
        return -1;
    const char *name = mcp_headers_name_of(method, params);
    if (name) {
        char *enc = encode_text(name, strlen(name));
        int rc = enc ? add(list, "Mcp-Name", enc) : -1;
        free(enc);
        if (rc != 0)
            return -1;
    }
    if (strcmp(method, "tools/call") != 0)
        return 0;
    json_t *args = json_object_get(params, "arguments");
    const char *header;
    json_t *path;
    json_object_foreach((json_t *)param_map, header, path)
    {
        char *enc = modern_encode_value(value_at(args, path));
        if (!enc)
            continue; /* absent or null: no header */
        char hname[160];
        snprintf(hname, sizeof hname, "Mcp-Param-%s", header);
        int rc = add(list, hname, enc);
        free(enc);
        if (rc != 0)
            return -1;
    }
    return 0;
}

int modern_error_is_modern(const json_t *error)
{
    json_int_t code = json_integer_value(json_object_get(error, "code"));
    if (code == -32020 || code == -32021)
        return 1;
    if (code != -32022)
        return 0;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(json_object_get(error, "data"), "supported"), i, v)
    {
        const char *s = json_string_value(v);
        if (s && strcmp(s, MODERN_VERSION) >= 0)
            return 1;
    }
    return 0;
}
