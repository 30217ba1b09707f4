/* pg_array — PostgreSQL array literals ('{1,2}', '{"a",NULL}'), so that one
 * prepared statement can take many rows at once (INSERT … SELECT FROM
 * unnest($1::bigint[], $2::text[])) instead of a statement a row.
 *
 * A literal is built by appending elements; text elements are double-quoted
 * with '\' and '"' escaped, which is all the array input syntax needs inside
 * quotes (PostgreSQL's "Array Value Input"). The text is passed as a
 * statement's parameter, never spliced into SQL. */
#ifndef MCPD_PG_ARRAY_H
#define MCPD_PG_ARRAY_H

#include <stddef.h>
#include <stdint.h>

struct pg_array {
    char *text; /* "{…" while building; the caller frees it (pg_array_end) */
    size_t len, cap;
    int n;      /* elements so far */
    int failed; /* out of memory: pg_array_end returns NULL */
};

void pg_array_begin(struct pg_array *a);
void pg_array_add_int(struct pg_array *a, int64_t v);
/* s NULL: the element is NULL. s is len bytes (no NUL inside). */
void pg_array_add_text(struct pg_array *a, const char *s, size_t len);
/* The finished literal (owned by the caller, free()), or NULL when out of
 * memory; a is spent either way. */
char *pg_array_end(struct pg_array *a);

#endif
