#include "pg_array.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(struct pg_array *a, const char *s, size_t n)
{
    if (a->failed)
        return;
    if (a->len + n + 1 > a->cap) {
        size_t cap = a->cap ? a->cap : 64;
        while (cap < a->len + n + 1)
            cap *= 2;
        char *t = realloc(a->text, cap);
        if (!t) {
            a->failed = 1;
            return;
        }
        a->text = t;
        a->cap = cap;
    }
    memcpy(a->text + a->len, s, n);
    a->len += n;
    a->text[a->len] = '\0';
}

void pg_array_begin(struct pg_array *a)
{
    *a = (struct pg_array){0};
    put(a, "{", 1);
}

static void separate(struct pg_array *a)
{
    if (a->n++)
        put(a, ",", 1);
}

void pg_array_add_int(struct pg_array *a, int64_t v)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%" PRId64, v);
    separate(a);
    put(a, buf, (size_t)n);
}

void pg_array_add_text(struct pg_array *a, const char *s, size_t len)
{
    separate(a);
    if (!s) {
        put(a, "NULL", 4);
        return;
    }
    put(a, "\"", 1);
    size_t from = 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] == '"' || s[i] == '\\') {
            put(a, s + from, i - from);
            put(a, "\\", 1);
            from = i;
        }
    put(a, s + from, len - from);
    put(a, "\"", 1);
}

char *pg_array_end(struct pg_array *a)
{
    put(a, "}", 1);
    if (a->failed) {
        free(a->text);
        a->text = NULL;
    }
    char *t = a->text;
    *a = (struct pg_array){0};
    return t;
}
