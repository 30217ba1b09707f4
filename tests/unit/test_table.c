/* test_table — the string-keyed hash table (table.c): put, replace, get,
 * delete, growth through many doublings, keys copied, each visiting every
 * entry once. */
#include "check.h"
#include "table.h"

#include <stdint.h>
#include <stdlib.h>

static void sum(void *arg, const char *key, void *value)
{
    (void)key;
    *(uintptr_t *)arg += (uintptr_t)value;
}

int main(void)
{
    struct table *t = table_new();
    CHECK(t != NULL);
    if (!t)
        return check_summary();
    CHECK(table_get(t, "missing") == NULL);
    CHECK(table_del(t, "missing") == NULL);
    char key[32];
    snprintf(key, sizeof key, "copied");
    CHECK_INT(table_put(t, key, (void *)1), 0);
    key[0] = 'X'; /* the table kept its own copy */
    CHECK(table_get(t, "copied") == (void *)1);
    CHECK_INT(table_put(t, "copied", (void *)2), 0); /* replace */
    CHECK(table_count(t) == 1);
    CHECK(table_get(t, "copied") == (void *)2);
    uintptr_t want = 2;
    for (uintptr_t i = 1; i <= 20000; i++) {
        snprintf(key, sizeof key, "k%lu", (unsigned long)i);
        if (table_put(t, key, (void *)i) != 0) {
            CHECK(0);
            break;
        }
        want += i;
    }
    CHECK(table_count(t) == 20001);
    uintptr_t got = 0;
    table_each(t, sum, &got);
    CHECK(got == want);
    int found = 1;
    for (uintptr_t i = 1; i <= 20000; i += 7) {
        snprintf(key, sizeof key, "k%lu", (unsigned long)i);
        found &= table_get(t, key) == (void *)i;
    }
    CHECK(found);
    for (uintptr_t i = 1; i <= 20000; i += 2) {
        snprintf(key, sizeof key, "k%lu", (unsigned long)i);
        found &= table_del(t, key) == (void *)i;
    }
    CHECK(found);
    CHECK(table_count(t) == 10001);
    CHECK(table_get(t, "k1") == NULL);
    CHECK(table_get(t, "k2") == (void *)2);
    table_free(t);
    return check_summary();
}
