/* table — see table.h. */
#include "table.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    char *key;
    void *value;
    uint64_t hash;
    struct entry *next;
};

struct table {
    struct entry **buckets;
    size_t nbuckets; /* a power of two */
    size_t count;
};

/* FNV-1a: keys are random ids or short names, so a simple hash is enough. */
static uint64_t hash_key(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

struct table *table_new(void)
{
    struct table *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->nbuckets = 64;
    t->buckets = calloc(t->nbuckets, sizeof *t->buckets);
    if (!t->buckets) {
        free(t);
        return NULL;
    }
    return t;
}

void table_free(struct table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct entry *e = t->buckets[i], *next;
        for (; e; e = next) {
            next = e->next;
            free(e->key);
            free(e);
        }
    }
    free(t->buckets);
    free(t);
}

static struct entry **find(const struct table *t, const char *key, uint64_t h)
{
    struct entry **pp = &t->buckets[h & (t->nbuckets - 1)];
    while (*pp && ((*pp)->hash != h || strcmp((*pp)->key, key) != 0))
        pp = &(*pp)->next;
    return pp;
}

void *table_get(const struct table *t, const char *key)
{
    struct entry *e = *find(t, key, hash_key(key));
    return e ? e->value : NULL;
}

static void grow(struct table *t)
{
    size_t n = t->nbuckets * 2;
    struct entry **b = calloc(n, sizeof *b);
    if (!b)
        return; /* keep working with longer chains */
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct entry *e = t->buckets[i], *next;
        for (; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
}

int table_put(struct table *t, const char *key, void *value)
{
    uint64_t h = hash_key(key);
    struct entry **pp = find(t, key, h);
    if (*pp) {
        (*pp)->value = value;
        return 0;
    }
    struct entry *e = malloc(sizeof *e);
    if (!e || !(e->key = strdup(key))) {
        free(e);
        return -1;
    }
    e->value = value;
    e->hash = h;
    e->next = NULL;
    *pp = e;
    if (++t->count > t->nbuckets)
        grow(t);
    return 0;
}

void *table_del(struct table *t, const char *key)
{
    struct entry **pp = find(t, key, hash_key(key));
    struct entry *e = *pp;
    if (!e)
        return NULL;
    void *v = e->value;
    *pp = e->next;
    free(e->key);
    free(e);
    t->count--;
    return v;
}

size_t table_count(const struct table *t)
{
    return t->count;
}

void table_each(const struct table *t, void (*fn)(void *arg, const char *key, void *value),
                void *arg)
{
    for (size_t i = 0; i < t->nbuckets; i++)
        for (struct entry *e = t->buckets[i]; e; e = e->next)
            fn(arg, e->key, e->value);
}
