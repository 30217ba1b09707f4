/* auth_cache — see auth_cache.h. */
#include "auth_cache.h"
#include "table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How often a token's use is written to the store, at most. */
#define NOTE_USE_MS 1000

struct entry {
    char hash[80];
    struct auth_answer a;
    int64_t checked_ms, used_ms;
    struct entry *newer, *older; /* in its kind's list */
};

/* Most recently used first. */
struct lru {
    struct entry *newest, *oldest;
    size_t n, max;
};

struct auth_cache {
    struct table *by_hash;
    struct lru lists[2]; /* [0] unknown values, [1] known tokens */
    int64_t ttl_ms;
};

struct auth_cache *auth_cache_new(size_t known_max, size_t unknown_max, int64_t ttl_ms)
{
    struct auth_cache *c = calloc(1, sizeof *c);
    if (!c || !(c->by_hash = table_new())) {
        free(c);
        return NULL;
    }
    c->lists[0].max = unknown_max ? unknown_max : 1;
    c->lists[1].max = known_max ? known_max : 1;
    c->ttl_ms = ttl_ms;
    return c;
}

void auth_cache_free(struct auth_cache *c)
{
    if (!c)
        return;
    for (int k = 0; k < 2; k++)
        for (struct entry *e = c->lists[k].newest, *next; e; e = next) {
            next = e->older;
            free(e);
        }
    table_free(c->by_hash);
    free(c);
}

static struct lru *list_of(struct auth_cache *c, const struct entry *e)
{
    return &c->lists[e->a.known ? 1 : 0];
}

static void unlink_entry(struct auth_cache *c, struct entry *e)
{
    struct lru *l = list_of(c, e);
    if (e->newer)
        e->newer->older = e->older;
    else
        l->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        l->oldest = e->newer;
    e->newer = e->older = NULL;
    l->n--;
}

static void link_newest(struct auth_cache *c, struct entry *e)
{
    struct lru *l = list_of(c, e);
    e->newer = NULL;
    e->older = l->newest;
    if (l->newest)
        l->newest->newer = e;
    else
        l->oldest = e;
    l->newest = e;
    l->n++;
}

static void drop(struct auth_cache *c, struct entry *e)
{
    unlink_entry(c, e);
    table_del(c->by_hash, e->hash);
    free(e);
}

int auth_cache_get(struct auth_cache *c, const char *hash, int64_t now_ms, struct auth_answer *out)
{
    struct entry *e = table_get(c->by_hash, hash);
    if (!e)
        return 0;
    if (now_ms - e->checked_ms >= c->ttl_ms) {
        /* A stale unknown value is worth nothing: a client that sends it
         * again gets a new lookup either way. */
        if (!e->a.known)
            drop(c, e);
        return 0;
    }
    unlink_entry(c, e);
    link_newest(c, e);
    *out = e->a;
    return 1;
}

int auth_cache_put(struct auth_cache *c, const char *hash, const struct auth_answer *a,
                   int64_t checked_ms)
{
    if (strlen(hash) >= sizeof((struct entry *)NULL)->hash)
        return -1;
    struct entry *e = table_get(c->by_hash, hash);
    if (e) {
        /* Lookups run outside the caller's lock: a slower, older one must
         * not overwrite what a newer one found. */
        if (checked_ms < e->checked_ms)
            return 0;
        unlink_entry(c, e);
    } else {
        e = calloc(1, sizeof *e);
        if (!e)
            return -1;
        snprintf(e->hash, sizeof e->hash, "%s", hash);
        if (table_put(c->by_hash, e->hash, e) != 0) {
            free(e);
            return -1;
        }
    }
    e->a = *a;
    e->checked_ms = checked_ms;
    link_newest(c, e);
    struct lru *l = list_of(c, e);
    while (l->n > l->max)
        drop(c, l->oldest);
    return 0;
}

int auth_cache_note_use(struct auth_cache *c, const char *hash, int64_t now_ms)
{
    struct entry *e = table_get(c->by_hash, hash);
    if (!e || (e->used_ms && now_ms - e->used_ms < NOTE_USE_MS))
        return !e;
    e->used_ms = now_ms;
    return 1;
}

void auth_cache_forget_name(struct auth_cache *c, const char *name)
{
    for (struct entry *e = c->lists[1].newest, *next; e; e = next) {
        next = e->older;
        if (strcmp(e->a.name, name) == 0)
            drop(c, e);
    }
}

size_t auth_cache_count(const struct auth_cache *c, int known)
{
    return c->lists[known ? 1 : 0].n;
}
