/* auth_cache — the bounded memory of token lookups behind auth_check.
 *
 * Keyed by a token's hash (token.h). auth.c keeps its store lookups here,
 * introspect.c the authorization server's answers, each in a cache of its own. An answer is fresh
 * for the cache's ttl after its lookup: within that, auth_check asks no query; past it, the caller
 * looks the token up again (outside its lock) and stores the new answer. So a revocation or a new
 * token is seen within the ttl.
 *
 * Memory is bounded whatever clients send: known tokens and unknown values
 * sit in two lists, each with its own cap and least-recently-used eviction,
 * so a flood of random bearer values evicts only other unknown values and
 * never a token in use. An unknown value's answer is dropped once stale (a
 * negative entry lives one ttl at most), and so are the entries of a token
 * the watcher reports revoked (auth_cache_forget_name).
 *
 * Not thread-safe: auth.c calls it under its lock. Pure: no store, no
 * clock (callers pass now). Names and values are copied in and out. */
#ifndef MCPD_AUTH_CACHE_H
#define MCPD_AUTH_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* What the store, or the authorization server, said about a token. */
struct auth_answer {
    int known; /* a real token: in the store, or active at the server */
    char name[64];
    int64_t expires_ms; /* wall clock; 0: never */
    int64_t revoked_ms; /* 0: not revoked */
    /* An introspected token's (introspect.c): the caller's verdict on its
     * claims, why (static text), and the DPoP key it is bound to ("" when
     * none). */
    int verdict;
    const char *why;
    char bound[48];
};

struct auth_cache;

/* NULL when out of memory. */
struct auth_cache *auth_cache_new(size_t known_max, size_t unknown_max, int64_t ttl_ms);
void auth_cache_free(struct auth_cache *c);
/* 1 with the fresh answer in *out (the entry becomes the most recently
 * used); 0 when there is none or it is stale: look the token up and
 * auth_cache_put the answer. A stale unknown entry is dropped here. */
int auth_cache_get(struct auth_cache *c, const char *hash, int64_t now_ms, struct auth_answer *out);
/* Stores the answer of a lookup made at checked_ms, unless a newer one is
 * there already, and evicts the least recently used entry of its kind past
 * the cap. 0, or -1 when out of memory (nothing stored). */
int auth_cache_put(struct auth_cache *c, const char *hash, const struct auth_answer *a,
                   int64_t checked_ms);
/* 1 when the token's use should be recorded (the last one recorded through
 * this entry is a second old or more, or there is none); notes now_ms. */
int auth_cache_note_use(struct auth_cache *c, const char *hash, int64_t now_ms);
/* Drops every entry of the token `name`: its next check asks the store. */
void auth_cache_forget_name(struct auth_cache *c, const char *name);
/* Entries held: known tokens (known = 1) or unknown values (0). */
size_t auth_cache_count(const struct auth_cache *c, int known);

#endif
