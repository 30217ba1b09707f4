/* mcp_headers — see mcp_headers.h. */
#include "mcp_headers.h"
#include "protocol.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mcp_headers_name_of(const char *method, json_t *params)
{
    if (!method)
        return NULL;
    const char *key = NULL;
    if (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0)
        key = "name";
    else if (strcmp(method, "resources/read") == 0)
        key = "uri";
    else if (strcmp(method, "tasks/get") == 0 || strcmp(method, "tasks/update") == 0 ||
             strcmp(method, "tasks/cancel") == 0)
        key = "taskId"; /* tasks/result and tasks/list are gone: the core says so */
    const char *v = key ? json_string_value(json_object_get(params, key)) : NULL;
    return v ? v : key ? "" : NULL;
}

static int name_matches(const char *header, const char *want);

const char *mcp_headers_check(const char *version, const char *method, const char *name,
                              json_t *msg)
{
    if (!version)
        return "Bad Request: missing MCP-Protocol-Version header";
    json_t *params = json_object_get(msg, "params");
    const char *meta_version =
        json_string_value(json_object_get(json_object_get(params, "_meta"), PROTOCOL_META_VERSION));
    if (meta_version && strcmp(meta_version, version) != 0)
        return "Bad Request: MCP-Protocol-Version header does not match _meta protocolVersion";
    const char *body_method = json_string_value(json_object_get(msg, "method"));
    if (!body_method)
        return NULL; /* a response or an invalid message: the core says what is wrong */
    if (!method)
        return "Bad Request: missing Mcp-Method header";
    if (strcmp(method, body_method) != 0)
        return "Bad Request: Mcp-Method header does not match the body's method";
    const char *want = mcp_headers_name_of(body_method, params);
    if (want && !name)
        return "Bad Request: missing Mcp-Name header";
    if (want && !name_matches(name, want))
        return "Bad Request: Mcp-Name header does not match the body";
    return NULL;
}

static int b64_digit(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Standard base64 with its padding, strictly: a length that is a multiple
 * of 4, '=' only at the end, no other characters. The decoded bytes go to
 * out (cap bytes, NUL-terminated), their count to *len; -1 if malformed or
 * too long. */
static int b64_decode_strict(const char *in, size_t n, char *out, size_t cap, size_t *len)
{
    if (n % 4 != 0)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int pad = (in[i + 3] == '=') + (in[i + 2] == '=' && in[i + 3] == '=');
        if (pad && i + 4 != n)
            return -1;
        int v[4];
        for (int k = 0; k < 4 - pad; k++)
            if ((v[k] = b64_digit(in[i + (size_t)k])) < 0)
                return -1;
        unsigned acc = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 |
                       (pad < 2 ? (unsigned)v[2] << 6 : 0u) | (pad < 1 ? (unsigned)v[3] : 0u);
        char bytes[3] = {(char)(acc >> 16), (char)(acc >> 8 & 0xFF), (char)(acc & 0xFF)};
        for (int k = 0; k < 3 - pad; k++) {
            if (o + 1 >= cap)
                return -1;
            out[o++] = bytes[k];
        }
    }
    out[o] = '\0';
    *len = o;
    return 0;
}

/* The header's value (its first n bytes) as the client meant it, its
 * length in *len: the base64 wrapper decoded (the bytes may include NUL). */
static int header_value_n(const char *h, size_t n, char *out, size_t cap, size_t *len)
{
    static const char pre[] = "=?base64?", suf[] = "?=";
    if (n >= sizeof pre - 1 + sizeof suf - 1 && strncmp(h, pre, sizeof pre - 1) == 0 &&
        memcmp(h + n - (sizeof suf - 1), suf, sizeof suf - 1) == 0)
        return b64_decode_strict(h + sizeof pre - 1, n - (sizeof pre - 1) - (sizeof suf - 1), out,
                                 cap, len);
    if (n >= cap)
        return -1;
    memcpy(out, h, n);
    out[n] = '\0';
    *len = n;
    return 0;
}

static int header_value(const char *h, char *out, size_t cap, size_t *len)
{
    return header_value_n(h, strlen(h), out, cap, len);
}

/* 1 if Mcp-Name, without the optional whitespace around it and with its
 * base64 wrapper decoded (a name or URI a header cannot carry raw), equals
 * want. */
static int name_matches(const char *header, const char *want)
{
    while (*header == ' ' || *header == '\t')
        header++;
    size_t n = strlen(header);
    while (n && (header[n - 1] == ' ' || header[n - 1] == '\t'))
        n--;
    char got[4096];
    size_t got_len;
    if (header_value_n(header, n, got, sizeof got, &got_len) != 0)
        return 0;
    return strlen(want) == got_len && memcmp(got, want, got_len) == 0;
}

/* 1 if s is a number as JSON writes one: -?digits(.digits)?([eE][+-]?digits)?
 * (strtod alone would also take blanks, hex, "inf" and "nan"). */
static int json_number_text(const char *s)
{
    if (*s == '-')
        s++;
    if (*s < '0' || *s > '9')
        return 0;
    while (*s >= '0' && *s <= '9')
        s++;
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (*s < '0' || *s > '9')
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

/* 1 if a number argument and the header's text are the same number (the
 * specification asks servers to compare them as numbers: "42.0" and "4.2e1"
 * carry 42). */
static int same_number(json_t *v, const char *got, size_t got_len)
{
    if (!json_is_number(v) || strlen(got) != got_len || !json_number_text(got))
        return 0;
    char *end;
    errno = 0;
    double d = strtod(got, &end);
    if (*end != '\0' || errno == ERANGE)
        return 0;
    if (json_is_integer(v)) {
        long long want = (long long)json_integer_value(v);
        long long exact = strtoll(got, &end, 10);
        if (*end == '\0' && errno != ERANGE)
            return exact == want;
        return d == (double)want;
    }
    return d == json_real_value(v);
}

/* An argument as a header carries it, its length in *len. A string is
 * taken whole, NUL included: "eu\u0000us" must not pass for "eu". */
static int arg_text(json_t *v, char *out, size_t cap, size_t *len)
{
    int n = -1;
    if (json_is_string(v)) {
        size_t k = json_string_length(v);
        if (k >= cap)
            return -1;
        memcpy(out, json_string_value(v), k + 1);
        *len = k;
        return 0;
    }
    if (json_is_integer(v))
        n = snprintf(out, cap, "%lld", (long long)json_integer_value(v));
    else if (json_is_boolean(v))
        n = snprintf(out, cap, "%s", json_is_true(v) ? "true" : "false");
    else if (json_is_real(v))
        n = snprintf(out, cap, "%.17g", json_real_value(v));
    if (n < 0 || (size_t)n >= cap)
        return -1;
    *len = (size_t)n;
    return 0;
}

const char *mcp_headers_check_params(json_t *map, json_t *args, mcp_headers_get_fn get, void *ud)
{
    const char *name;
    json_t *param;
    json_object_foreach(map, name, param)
    {
        char hname[200];
        snprintf(hname, sizeof hname, "Mcp-Param-%s", name);
        const char *h = get(ud, hname);
        json_t *v = json_object_get(args, json_string_value(param));
        if (!h && !v)
            continue;
        if (!h)
            return "Bad Request: an argument marked x-mcp-header came without its Mcp-Param header";
        if (!v)
            return "Bad Request: an Mcp-Param header names an argument the body does not have";
        char want[4096], got[4096];
        size_t want_len, got_len;
        if (header_value(h, got, sizeof got, &got_len) != 0)
            return "Bad Request: an Mcp-Param header is not valid base64";
        int same = arg_text(v, want, sizeof want, &want_len) == 0 && want_len == got_len &&
                   memcmp(want, got, want_len) == 0;
        if (!same && !same_number(v, got, got_len))
            return "Bad Request: an Mcp-Param header does not match its argument";
    }
    return NULL;
}
