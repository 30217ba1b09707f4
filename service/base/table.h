/* table — a string-keyed hash table of void pointers (chained, doubling).
 * Not thread-safe: each owner guards its table with its own lock. Keys are
 * copied; values are borrowed and never freed by the table. */
#ifndef MCPD_TABLE_H
#define MCPD_TABLE_H

#include <stddef.h>

struct table;

struct table *table_new(void);
void table_free(struct table *t);
void *table_get(const struct table *t, const char *key);
/* Inserts or replaces. Returns 0, or -1 when out of memory. */
int table_put(struct table *t, const char *key, void *value);
/* Removes the key and returns its value (NULL if absent). */
void *table_del(struct table *t, const char *key);
size_t table_count(const struct table *t);
/* Calls fn for every entry; fn must not change the table. */
void table_each(const struct table *t, void (*fn)(void *arg, const char *key, void *value),
                void *arg);

#endif
