/* media_type — see media_type.h. */
#include "media_type.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

/* RFC 9110 tchar. */
static int is_tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static const char *skip_ows(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

static const char *token_end(const char *p, const char *end)
{
    while (p < end && is_tchar(*p))
        p++;
    return p;
}

/* Past a quoted-string starting at p (on the '"'), or NULL if unclosed. */
static const char *quoted_end(const char *p, const char *end)
{
    for (p++; p < end; p++) {
        if (*p == '\\') {
            if (++p == end)
                return NULL;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

/* The end of the list element starting at p: the next ',' outside a
 * quoted string, or the string's end. */
static const char *element_end(const char *p)
{
    while (*p && *p != ',') {
        if (*p == '"') {
            const char *q = quoted_end(p, p + strlen(p));
            if (!q)
                return p + strlen(p);
            p = q;
        } else {
            p++;
        }
    }
    return p;
}

/* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), in
 * thousandths; -1 if malformed. */
static int parse_q(const char *p, const char *end)
{
    if (p == end || (*p != '0' && *p != '1'))
        return -1;
    int q = (*p - '0') * 1000;
    p++;
    if (p == end)
        return q;
    if (*p != '.' || end - p > 4)
        return -1;
    int scale = 100;
    for (p++; p < end; p++, scale /= 10) {
        if (*p < '0' || *p > '9' || (q == 1000 && *p != '0'))
            return -1;
        q += (*p - '0') * scale;
    }
    return q;
}

struct range {
    const char *type, *sub;
    size_t type_len, sub_len;
    int q; /* thousandths */
};

/* Parses one media-range (or media-type) with its parameters from [p, end);
 * in an Accept element (weighted) the parameter q is its weight. Returns 0,
 * or -1 if it is not well-formed. */
static int parse_range(const char *p, const char *end, int weighted, struct range *r)
{
    p = skip_ows(p, end);
    r->type = p;
    p = token_end(p, end);
    r->type_len = (size_t)(p - r->type);
    if (!r->type_len || p == end || *p != '/')
        return -1;
    r->sub = ++p;
    p = token_end(p, end);
    r->sub_len = (size_t)(p - r->sub);
    if (!r->sub_len)
        return -1;
    r->q = 1000;
    for (;;) {
        p = skip_ows(p, end);
        if (p == end)
            return 0;
        if (*p != ';')
            return -1;
        p = skip_ows(p + 1, end);
        if (p == end || *p == ';')
            continue; /* RFC 9110 allows empty parameters */
        const char *name = p;
        p = token_end(p, end);
        size_t name_len = (size_t)(p - name);
        if (!name_len || p == end || *p != '=')
            return -1;
        const char *value = ++p;
        p = p < end && *p == '"' ? quoted_end(p, end) : token_end(p, end);
        if (!p || p == value)
            return -1;
        if (weighted && name_len == 1 && (*name == 'q' || *name == 'Q') &&
            (r->q = parse_q(value, p)) < 0)
            return -1;
    }
}

static int same(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen == blen && strncasecmp(a, b, alen) == 0;
}

int media_type_accepts(const char *accept, const char *type)
{
    if (!accept)
        return 0;
    const char *slash = strchr(type, '/');
    if (!slash)
        return 0;
    size_t type_len = (size_t)(slash - type), sub_len = strlen(slash + 1);
    int best = 0, best_q = 0; /* specificity of the deciding range, and its q */
    for (const char *p = accept;; p++) {
        const char *end = element_end(p);
        struct range r;
        if (parse_range(p, end, 1, &r) == 0) {
            int spec = 0;
            if (same(r.type, r.type_len, "*", 1))
                spec = same(r.sub, r.sub_len, "*", 1)
                           ? 1
                           : 0; /* a wildcard type needs a wildcard subtype */
            else if (same(r.type, r.type_len, type, type_len))
                spec = same(r.sub, r.sub_len, "*", 1)               ? 2
                       : same(r.sub, r.sub_len, slash + 1, sub_len) ? 3
                                                                    : 0;
            /* Equally specific ranges listed twice: the more generous wins. */
            if (spec > best || (spec == best && spec && r.q > best_q)) {
                best = spec;
                best_q = r.q;
            }
        }
        if (!*end)
            break;
        p = end;
    }
    return best > 0 && best_q > 0;
}

int media_type_is(const char *content_type, const char *type)
{
    if (!content_type)
        return 0;
    const char *end = content_type + strlen(content_type);
    const char *slash = strchr(type, '/');
    struct range r;
    return slash && parse_range(content_type, end, 0, &r) == 0 &&
           same(r.type, r.type_len, type, (size_t)(slash - type)) &&
           same(r.sub, r.sub_len, slash + 1, strlen(slash + 1));
}
