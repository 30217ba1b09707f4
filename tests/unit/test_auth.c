/* test_auth — the token lookup cache's rules (service/core/auth_cache.c,
 * pure), and auth.c with kill_watch on a real store file: a check's grant,
 * the cache bounded under a flood of unknown values, and every hold of a
 * revoked or expired token told to end (directly, and by kill_watch from
 * what mcp-admin writes). */
#include "auth.h"
#include "auth_cache.h"
#include "check.h"
#include "clock.h"
#include "kill_watch.h"
#include "store.h"
#include "store_admin.h"
#include "token.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct auth_answer known(const char *name, int64_t revoked_ms)
{
    struct auth_answer a = {.known = 1, .revoked_ms = revoked_ms};
    snprintf(a.name, sizeof a.name, "%s", name);
    return a;
}

static const struct auth_answer unknown = {0};

/* 1 if hash has a fresh answer at now. */
static int fresh(struct auth_cache *c, const char *hash, int64_t now)
{
    struct auth_answer a;
    return auth_cache_get(c, hash, now, &a);
}

static void cache_rules(void)
{
    struct auth_cache *c = auth_cache_new(3, 2, 500);
    CHECK(c != NULL);
    struct auth_answer a = known("alice", 0), got;

    /* Fresh for the ttl, then stale: a known entry stays (to be refreshed),
     * an unknown one goes. */
    CHECK_INT(auth_cache_put(c, "h-alice", &a, 1000), 0);
    CHECK_INT(auth_cache_get(c, "h-alice", 1499, &got), 1);
    CHECK_STR(got.name, "alice");
    CHECK_INT(auth_cache_get(c, "h-alice", 1500, &got), 0);
    CHECK_INT(auth_cache_count(c, 1), 1);
    CHECK_INT(auth_cache_put(c, "h-x", &unknown, 1000), 0);
    CHECK_INT(fresh(c, "h-x", 1100), 1);
    CHECK_INT(fresh(c, "h-x", 1500), 0);
    CHECK_INT(auth_cache_count(c, 0), 0);

    /* An older lookup does not overwrite a newer answer. */
    struct auth_answer revoked = known("alice", 900);
    CHECK_INT(auth_cache_put(c, "h-alice", &a, 2000), 0);
    CHECK_INT(auth_cache_put(c, "h-alice", &revoked, 1990), 0);
    CHECK_INT(auth_cache_get(c, "h-alice", 2000, &got), 1);
    CHECK_INT(got.revoked_ms, 0);

    /* The cap: the least recently used known token goes. */
    struct auth_answer b = known("bob", 0), d = known("dave", 0), e = known("eve", 0);
    CHECK_INT(auth_cache_put(c, "h-bob", &b, 2000), 0);
    CHECK_INT(auth_cache_put(c, "h-dave", &d, 2000), 0);
    CHECK_INT(fresh(c, "h-alice", 2001), 1); /* alice used: bob is now the oldest */
    CHECK_INT(auth_cache_put(c, "h-eve", &e, 2002), 0);
    CHECK_INT(auth_cache_count(c, 1), 3);
    CHECK_INT(fresh(c, "h-bob", 2003), 0);
    CHECK_INT(fresh(c, "h-alice", 2003), 1);
    CHECK_INT(fresh(c, "h-dave", 2003), 1);
    CHECK_INT(fresh(c, "h-eve", 2003), 1);

    /* A flood of unknown values evicts only unknown values. */
    for (int i = 0; i < 1000; i++) {
        char h[32];
        snprintf(h, sizeof h, "h-random-%d", i);
        CHECK_INT(auth_cache_put(c, h, &unknown, 2100), 0);
    }
    CHECK_INT(auth_cache_count(c, 0), 2);
    CHECK_INT(auth_cache_count(c, 1), 3);
    CHECK_INT(fresh(c, "h-random-999", 2100), 1);
    CHECK_INT(fresh(c, "h-random-0", 2100), 0);
    CHECK_INT(fresh(c, "h-alice", 2100), 1);

    /* An answer that changes kind moves to its kind's list. */
    CHECK_INT(auth_cache_put(c, "h-random-999", &b, 2200), 0);
    CHECK_INT(auth_cache_count(c, 0), 1);
    CHECK_INT(auth_cache_count(c, 1), 3);

    /* Forgetting a revoked token's name drops all its entries. */
    CHECK_INT(auth_cache_put(c, "h-alice-2", &a, 2200), 0);
    auth_cache_forget_name(c, "alice");
    CHECK_INT(fresh(c, "h-alice", 2201), 0);
    CHECK_INT(fresh(c, "h-alice-2", 2201), 0);
    CHECK_INT(fresh(c, "h-random-999", 2201), 1);

    /* A use is recorded at most once a second per entry. */
    CHECK_INT(auth_cache_note_use(c, "h-random-999", 3000), 1);
    CHECK_INT(auth_cache_note_use(c, "h-random-999", 3999), 0);
    CHECK_INT(auth_cache_note_use(c, "h-random-999", 4000), 1);
    auth_cache_free(c);
}

/* ---- auth and kill_watch on a real store ---- */

struct ended {
    _Atomic(const char *) why;
    atomic_int calls;
};

static void on_end(void *ud, const char *why)
{
    struct ended *e = ud;
    atomic_store(&e->why, why);
    atomic_fetch_add(&e->calls, 1);
}

static void no_session(const char *id, const char *why)
{
    (void)id;
    (void)why;
}

/* Adds a token with mcp-admin's store call; returns it (static buffer). */
static const char *add_token(struct store_admin *a, const char *name, int64_t expires_ms)
{
    static char token[64];
    char hash[TOKEN_HASH_LEN + 1];
    snprintf(token, sizeof token, "mcpd_test_%s_0123456789abcdef", name);
    CHECK_INT(token_hash(token, hash), 0);
    char *err = NULL;
    CHECK_INT(store_admin_token_add(a, name, hash, NULL, expires_ms, &err), 0);
    free(err);
    return token;
}

static int check(const char *token, struct auth_grant *g, const char **why)
{
    char header[128];
    snprintf(header, sizeof header, "Bearer %s", token);
    return auth_check(header, NULL, NULL, g, why);
}

/* Waits (a generous bound) until e was told to end. */
static int ended_within(struct ended *e, int ms)
{
    for (int i = 0; i < ms / 10 && !atomic_load(&e->calls); i++)
        usleep(10000);
    return atomic_load(&e->calls);
}

static void holds(const char *path)
{
    struct store *st = NULL;
    char *err = NULL;
    CHECK_INT(store_open(path, &st, &err), 0);
    free(err);
    err = NULL;
    CHECK_INT(auth_configure("token", st), 0);
    struct store_admin *adm = NULL;
    CHECK_INT(store_admin_open(path, STORE_ADMIN_WRITE, &adm, &err), 0);
    free(err);

    char alice[64], bob[64];
    snprintf(alice, sizeof alice, "%s", add_token(adm, "alice", 0));
    int64_t bob_expires = clock_wall_ms() + 300;
    snprintf(bob, sizeof bob, "%s", add_token(adm, "bob", bob_expires));

    struct auth_grant g;
    const char *why = NULL;
    CHECK_INT(check(alice, &g, &why), 0);
    CHECK_STR(g.principal, "alice");
    CHECK_INT(g.expires_ms, 0);
    struct auth_grant gb;
    CHECK_INT(check(bob, &gb, &why), 0);
    CHECK_INT(gb.expires_ms, bob_expires);
    /* A static token under the DPoP scheme (RFC 9449 is for the
     * authorization server's tokens): refused, with the reason and the
     * invalid_token error, and nobody's principal. */
    char dpop[128];
    snprintf(dpop, sizeof dpop, "DPoP %s", alice);
    struct auth_grant gp;
    CHECK_INT(auth_check(dpop, NULL, NULL, &gp, &why), -1);
    CHECK(strstr(why, "DPoP") != NULL);
    CHECK_STR(gp.principal, "");
    char challenge[256];
    CHECK_INT(auth_challenge(&gp, why, challenge, sizeof challenge), 401);
    CHECK(strstr(challenge, "error=\"invalid_token\"") != NULL);

    /* A flood of unknown values: refused, and the cache stays bounded with
     * the known tokens still in it. */
    for (int i = 0; i < AUTH_CACHE_UNKNOWN_MAX * 3; i++) {
        char t[64];
        snprintf(t, sizeof t, "mcpd_random_%d", i);
        struct auth_grant x;
        CHECK_INT(check(t, &x, &why), -1);
    }
    CHECK(strstr(why, "unknown") != NULL);
    CHECK_INT(auth_cache_size(0), AUTH_CACHE_UNKNOWN_MAX);
    CHECK_INT(auth_cache_size(1), 2);

    /* Holds: a revoked token's end all its connections, and only those. */
    struct ended e1 = {0}, e2 = {0}, e3 = {0};
    struct auth_hold h1 = {0}, h2 = {0}, h3 = {0}, none = {0};
    auth_hold(&h1, &g, on_end, &e1);
    auth_hold(&h2, &gb, on_end, &e2);
    auth_hold(&h3, &g, on_end, &e3);
    struct auth_grant off = {0}; /* auth off: nothing is held */
    auth_hold(&none, &off, on_end, NULL);
    CHECK(none.prev == NULL);
    auth_release(&h3); /* released: never told */
    auth_token_revoked("alice");
    CHECK_INT(atomic_load(&e1.calls), 1);
    CHECK_STR(atomic_load(&e1.why), "token revoked");
    CHECK_INT(atomic_load(&e2.calls), 0);
    CHECK_INT(atomic_load(&e3.calls), 0);
    auth_token_revoked("alice"); /* reported again: told once */
    CHECK_INT(atomic_load(&e1.calls), 1);
    auth_release(&h1); /* after its end: fine */

    /* Expiry: nothing before it (the earliest ahead is returned), the hold
     * ends at it. */
    CHECK_INT(auth_expire(bob_expires - 1), bob_expires);
    CHECK_INT(atomic_load(&e2.calls), 0);
    CHECK_INT(auth_expire(bob_expires), 0);
    CHECK_INT(atomic_load(&e2.calls), 1);
    CHECK_STR(atomic_load(&e2.why), "token expired");
    auth_release(&h2);

    /* Revoked in the store: once the watcher reports it, the cached answer
     * is gone and the next check is refused at once. */
    CHECK_INT(check(alice, &g, &why), 0);
    CHECK_INT(store_admin_token_revoke(adm, "alice", &err), 0);
    auth_token_revoked("alice");
    CHECK_INT(check(alice, &g, &why), -1);
    CHECK(strstr(why, "revoked") != NULL);

    /* kill_watch: a revocation by mcp-admin and an expiry end holds of
     * tokens whose connections exist, with no session. */
    CHECK_INT(kill_watch_start(st, no_session), 0);
    char carol[64], dave[64];
    snprintf(carol, sizeof carol, "%s", add_token(adm, "carol", 0));
    snprintf(dave, sizeof dave, "%s", add_token(adm, "dave", clock_wall_ms() + 400));
    struct auth_grant gc, gd;
    CHECK_INT(check(carol, &gc, &why), 0);
    CHECK_INT(check(dave, &gd, &why), 0);
    struct ended ec = {0}, ed = {0};
    struct auth_hold hc = {0}, hd = {0};
    auth_hold(&hc, &gc, on_end, &ec);
    auth_hold(&hd, &gd, on_end, &ed);
    CHECK_INT(store_admin_token_revoke(adm, "carol", &err), 0);
    CHECK(ended_within(&ec, 3000));
    CHECK_STR(atomic_load(&ec.why), "token revoked");
    CHECK(ended_within(&ed, 3000));
    CHECK_STR(atomic_load(&ed.why), "token expired");
    CHECK(clock_wall_ms() >= gd.expires_ms);
    kill_watch_stop();
    auth_release(&hc);
    auth_release(&hd);

    store_admin_close(adm);
    auth_shutdown();
    store_close(st);
}

int main(void)
{
    cache_rules();
    char dir[] = "/tmp/mcpd-test-auth-XXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/mcpd.db", dir);
    holds(path);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_INT(system(cmd), 0);
    return check_summary();
}
