/* test_session — the session registry's rules (service/core/session.c) over
 * the real stream registry and a real SQLite store in a temporary folder,
 * one store per group of tests (a "world"), closed and reopened to play a
 * restart:
 *   - creation and lookup: ids, the caps on live sessions, on a principal's
 *     sessions and on initialize params (a refusal stores nothing), an id
 *     reserved before initialize, session_count;
 *   - the principal binding: a session is its creator's only, and no
 *     principal (NULL) is the same as "";
 *   - byte caps: session_charge against limits.max_bytes, charge_always past
 *     it, session_uncharge (floored at 0, by id, only for a loaded session);
 *   - the standalone GET stream: one reader at a time (claim, release), and
 *     the delivery cursor (only moves forward; the wait returns when the
 *     cursor gets there, the reader lets go, or the deadline passes);
 *   - requests in flight (session_track: DUP, BUSY at max_inflight counting
 *     parked long-polls too, ENDED) and server→client requests pending
 *     (next_request_id unique, add/take/has, client_gone);
 *   - end and expiry: session_end (gone from memory and store, streams
 *     expired, nothing new accepted), session_each_idle and
 *     session_expire_dormant with their cutoffs, session_each;
 *   - revival: after a restart a stored session is found again with its
 *     principal, state, stored bytes and GET cursor, counts against the cap
 *     while dormant and once only when revived, and an ended or expired one
 *     is not revived. */
#include "check.h"
#include "clock.h"
#include "protocol.h"
#include "randid.h"
#include "session.h"
#include "store.h"
#include "stream.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[64];
static char dbpath[128];
static int worlds;
static struct store *store;

static const struct session_limits plain = {.idle_ms = 60000, .max_bytes = 100000};

/* Opens the store at dbpath and the registries over it. */
static int world_reopen(const struct session_limits *l)
{
    char *err = NULL;
    if (store_open(dbpath, &store, &err) != 0) {
        printf("store_open(%s): %s\n", dbpath, err ? err : "?");
        free(err);
        return -1;
    }
    stream_registry_init(store);
    session_registry_init(store, l);
    return 0;
}

/* A fresh store in a folder of its own. */
static int world_open(const struct session_limits *l)
{
    snprintf(dbpath, sizeof dbpath, "%s/w%d/mcpd.db", tmpdir, ++worlds);
    return world_reopen(l);
}

/* As at exit: the registries forget everything in memory, the store stays. */
static void world_close(void)
{
    stream_registry_shutdown();
    session_registry_shutdown();
    store_close(store);
    store = NULL;
}

static json_t *init_params(void)
{
    return json_pack("{s:{s:{}}, s:{s:s, s:s}}", "capabilities", "sampling", "clientInfo", "name",
                     "unit", "version", "1");
}

/* session_create's code; *out the session (or NULL). */
static int create(const char *principal, struct session **out)
{
    json_t *params = init_params();
    struct session_origin o = {.principal = principal, .transport = "http"};
    int rc = session_create("2025-06-18", params, &o, out);
    json_decref(params);
    return rc;
}

static struct session *new_session(const char *principal)
{
    struct session *s = NULL;
    CHECK_INT(create(principal, &s), 0);
    return s;
}

/* 1 if the store holds a live row for id. */
static int stored(const char *id)
{
    struct store_session row;
    int rc = store_session_get(store, id, &row);
    if (rc == 0)
        store_session_free(&row);
    return rc == 0;
}

static void append_str(struct stream *st, const char *msg)
{
    stream_append(st, msg, strlen(msg), STREAM_ACTIVE);
}

static void test_create_and_find(void)
{
    if (world_open(&plain) != 0)
        return;
    CHECK_INT(session_count(), 0);
    struct session *a = new_session(NULL), *b = new_session(NULL);
    if (!a || !b)
        return;
    CHECK_INT(strlen(session_id(a)), RANDID_LEN);
    CHECK(strcmp(session_id(a), session_id(b)) != 0);
    CHECK_STR(session_protocol(a), "2025-06-18");
    CHECK_INT(session_count(), 2);
    /* Persisted before the id is handed out. */
    CHECK(stored(session_id(a)));
    CHECK_INT(store_sessions_count(store, NULL), 2);

    /* The params are copied: the caller's may go. */
    json_t *params = session_init_params(a);
    CHECK_STR(json_string_value(json_object_get(json_object_get(params, "clientInfo"), "name")),
              "unit");
    CHECK(session_client_capabilities(a) != NULL);
    CHECK(json_object_get(session_client_capabilities(a), "sampling") != NULL);

    /* A fresh session: level 0, not initialized, a standalone stream. */
    CHECK_INT(session_log_level(a), 0);
    CHECK_INT(session_initialized(a), 0);
    CHECK_INT(session_ended(a), 0);
    struct stream *sa = session_standalone(a);
    CHECK(sa != NULL && stream_is_standalone(sa));
    CHECK_STR(sa ? stream_session(sa) : NULL, session_id(a));
    stream_unref(sa);

    /* Lookup: the same session, a new reference each time. */
    struct session *f = session_find(session_id(a));
    CHECK(f == a);
    session_unref(f);
    f = session_find_loaded(session_id(b));
    CHECK(f == b);
    session_unref(f);
    session_unref(b);
    /* Unknown ids, and ids of the wrong length, find nothing. */
    char other[RANDID_LEN + 1];
    CHECK_INT(randid_make(other), 0);
    CHECK(session_find(other) == NULL);
    CHECK(session_find("abc") == NULL);
    CHECK(session_find("") == NULL);

    /* init params that are not an object with capabilities. */
    json_t *bare = json_pack("{s:s}", "capabilities", "none");
    struct session *c = NULL;
    CHECK_INT(session_create("2025-06-18", bare, NULL, &c), 0);
    json_decref(bare);
    CHECK(c && session_client_capabilities(c) == NULL);
    CHECK_STR(c ? session_principal(c) : NULL, ""); /* no origin: no principal */

    /* An id the transport reserved before initialize (legacy /sse). */
    char want[RANDID_LEN + 1];
    CHECK_INT(randid_make(want), 0);
    json_t *p = init_params();
    struct session_origin o = {.transport = "http", .id = want};
    struct session *r = NULL;
    CHECK_INT(session_create("2024-11-05", p, &o, &r), 0);
    CHECK_STR(r ? session_id(r) : NULL, want);
    /* Not twice, and only a well-formed one. */
    struct session *r2 = NULL;
    CHECK_INT(session_create("2024-11-05", p, &o, &r2), SESSION_FAILED);
    CHECK(r2 == NULL);
    o.id = "not-an-id";
    CHECK_INT(session_create("2024-11-05", p, &o, &r2), SESSION_FAILED);
    char upper[RANDID_LEN + 1];
    memset(upper, 'A', RANDID_LEN);
    upper[RANDID_LEN] = '\0';
    o.id = upper;
    CHECK_INT(session_create("2024-11-05", p, &o, &r2), SESSION_FAILED);
    json_decref(p);
    CHECK_INT(session_count(), 4);

    session_unref(r);
    session_unref(c);
    session_unref(a);
    world_close();
}

static void count_one(struct session *s, void *arg)
{
    (*(size_t *)arg)++;
    session_unref(s);
}

static void test_caps(void)
{
    /* max_sessions. */
    const struct session_limits two = {.idle_ms = 60000, .max_bytes = 1000, .max_sessions = 2};
    if (world_open(&two) != 0)
        return;
    struct session *a = new_session(NULL), *b = new_session(NULL), *c = NULL;
    CHECK_INT(create(NULL, &c), SESSION_AT_CAP);
    CHECK(c == NULL);
    CHECK_INT(session_count(), 2);
    CHECK_INT(store_sessions_count(store, NULL), 2); /* nothing stored */
    /* An ended session frees its place. */
    if (a)
        session_end(a);
    session_unref(a);
    CHECK_INT(create(NULL, &c), 0);
    session_unref(c);
    session_unref(b);
    world_close();

    /* max_per_principal: counts a principal's sessions; others, and no
     * principal, are not held back by it. */
    const struct session_limits per = {.idle_ms = 60000, .max_bytes = 1000, .max_per_principal = 2};
    if (world_open(&per) != 0)
        return;
    struct session *a1 = new_session("alice"), *a2 = new_session("alice"), *a3 = NULL;
    CHECK_INT(create("alice", &a3), SESSION_PRINCIPAL_AT_CAP);
    CHECK(a3 == NULL);
    CHECK_INT(store_sessions_count(store, "alice"), 2);
    struct session *b1 = new_session("bob"), *n1 = new_session(NULL), *n2 = new_session(NULL),
                   *n3 = new_session(NULL);
    if (a1)
        session_end(a1);
    CHECK_INT(create("alice", &a3), 0);
    session_unref(a1);
    session_unref(a2);
    session_unref(a3);
    session_unref(b1);
    session_unref(n1);
    session_unref(n2);
    session_unref(n3);
    world_close();

    /* max_init_params: the stored (compact) JSON's bytes, at most. */
    const struct session_limits small = {
        .idle_ms = 60000, .max_bytes = 1000, .max_init_params = 200};
    if (world_open(&small) != 0)
        return;
    json_t *p = json_pack("{s:{}, s:s}", "capabilities", "pad", "");
    char *text = json_dumps(p, JSON_COMPACT);
    size_t base = text ? strlen(text) : 0;
    free(text);
    char pad[256];
    memset(pad, 'x', 200 - base);
    pad[200 - base] = '\0';
    json_object_set_new(p, "pad", json_string(pad));
    struct session *s = NULL;
    CHECK_INT(session_create("2025-06-18", p, NULL, &s), 0); /* exactly 200 */
    session_unref(s);
    s = NULL;
    pad[200 - base] = 'x';
    pad[201 - base] = '\0';
    json_object_set_new(p, "pad", json_string(pad));
    CHECK_INT(session_create("2025-06-18", p, NULL, &s), SESSION_PARAMS_TOO_LARGE);
    CHECK(s == NULL);
    CHECK_INT(session_count(), 1);
    CHECK_INT(store_sessions_count(store, NULL), 1);
    json_decref(p);
    world_close();
}

static void test_principal(void)
{
    if (world_open(&plain) != 0)
        return;
    struct session *a = new_session("alice"), *n = new_session(NULL), *e = new_session("");
    if (!a || !n || !e)
        return;
    CHECK_STR(session_principal(a), "alice");
    CHECK(session_belongs_to(a, "alice"));
    CHECK(!session_belongs_to(a, "bob"));
    CHECK(!session_belongs_to(a, "alic"));
    CHECK(!session_belongs_to(a, "alice2"));
    CHECK(!session_belongs_to(a, NULL));
    CHECK(!session_belongs_to(a, ""));
    /* Without authentication: "", and NULL means the same. */
    CHECK_STR(session_principal(n), "");
    CHECK_STR(session_principal(e), "");
    CHECK(session_belongs_to(n, NULL));
    CHECK(session_belongs_to(n, ""));
    CHECK(session_belongs_to(e, NULL));
    CHECK(!session_belongs_to(n, "alice"));
    /* The longest principal auth hands out (AUTH_PRINCIPAL_MAX - 1). */
    char longest[64];
    memset(longest, 'p', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    struct session *l = new_session(longest);
    CHECK(l && session_belongs_to(l, longest));
    session_unref(l);
    session_unref(a);
    session_unref(n);
    session_unref(e);
    world_close();
}

static void test_bytes(void)
{
    const struct session_limits cap = {.idle_ms = 60000, .max_bytes = 100};
    if (world_open(&cap) != 0)
        return;
    struct session *s = new_session(NULL);
    if (!s)
        return;
    CHECK_INT(session_charge(s, 60), 0);
    CHECK_INT(session_charge(s, 41), -1); /* 101 > 100: refused, not counted */
    CHECK_INT(session_charge(s, 40), 0);  /* exactly the cap */
    CHECK_INT(session_charge(s, 1), -1);
    CHECK_INT(session_charge(s, 0), 0);
    /* Stored anyway, past the cap: the count goes over it. */
    session_charge_always(s, 50);
    session_uncharge(session_id(s), 40); /* 150 - 40 = 110: still over */
    CHECK_INT(session_charge(s, 0), -1);
    session_uncharge(session_id(s), 10); /* 100 */
    CHECK_INT(session_charge(s, 1), -1);
    session_uncharge(session_id(s), 30); /* 70 */
    CHECK_INT(session_charge(s, 31), -1);
    CHECK_INT(session_charge(s, 30), 0);
    /* Floored at zero: a purge that frees more than counted. */
    session_uncharge(session_id(s), 1000);
    CHECK_INT(session_charge(s, 101), -1);
    CHECK_INT(session_charge(s, 100), 0);
    /* Another session's count is its own; an unknown id is no-op. */
    struct session *t = new_session(NULL);
    CHECK(t && session_charge(t, 100) == 0);
    char other[RANDID_LEN + 1];
    randid_make(other);
    session_uncharge(other, 100);
    CHECK_INT(session_charge(s, 1), -1);
    session_unref(t);
    session_unref(s);
    world_close();
}

struct waiter {
    struct session *s;
    int64_t next, deadline;
    int64_t seen; /* the cursor when the wait returned */
};

static void *wait_main(void *arg)
{
    struct waiter *w = arg;
    session_wait_get_cursor(w->s, w->next, w->deadline);
    w->seen = session_get_cursor(w->s);
    return NULL;
}

static void test_get_stream(void)
{
    if (world_open(&plain) != 0)
        return;
    struct session *s = new_session(NULL), *t = new_session(NULL);
    if (!s || !t)
        return;
    /* One reader at a time, per session. */
    CHECK_INT(session_get_claim(s), 0);
    CHECK_INT(session_get_claim(s), -1);
    CHECK_INT(session_get_claim(t), 0);
    session_get_release(s);
    CHECK_INT(session_get_claim(s), 0);

    /* The cursor starts at 0 and only moves forward. */
    CHECK_INT(session_get_cursor(s), 0);
    session_set_get_cursor(s, 3);
    CHECK_INT(session_get_cursor(s), 3);
    session_set_get_cursor(s, 2);
    CHECK_INT(session_get_cursor(s), 3);
    CHECK_INT(session_get_cursor(t), 0);

    /* The wait: at once when the cursor is there, or the deadline passed. */
    int64_t far = clock_mono_ms() + 60000;
    session_wait_get_cursor(s, 3, far);
    session_wait_get_cursor(s, 10, clock_mono_ms() - 1);
    CHECK_INT(session_get_cursor(s), 3);

    /* It returns when the reader writes that far... */
    struct waiter w = {.s = s, .next = 5, .deadline = far};
    pthread_t th;
    int64_t start = clock_mono_ms();
    CHECK_INT(pthread_create(&th, NULL, wait_main, &w), 0);
    session_set_get_cursor(s, 4);
    session_set_get_cursor(s, 5);
    pthread_join(th, NULL);
    CHECK(w.seen >= 5);
    /* ... or lets go of the stream (no reader: nothing to wait for). */
    w = (struct waiter){.s = s, .next = 50, .deadline = far};
    CHECK_INT(pthread_create(&th, NULL, wait_main, &w), 0);
    session_get_release(s);
    pthread_join(th, NULL);
    CHECK_INT(w.seen, 5);
    /* Neither wait ran to its deadline (generous: a minute away). */
    CHECK(clock_mono_ms() - start < 30000);
    session_wait_get_cursor(s, 50, far); /* unclaimed: at once */
    CHECK(clock_mono_ms() - start < 30000);
    /* The cursor outlives the reader: the next GET starts there. */
    CHECK_INT(session_get_claim(s), 0);
    CHECK_INT(session_get_cursor(s), 5);
    session_get_release(s);

    /* An ended session's stream cannot be claimed. */
    session_end(t);
    session_get_release(t);
    CHECK_INT(session_get_claim(t), -1);
    session_unref(t);
    session_unref(s);
    world_close();
}

static void set_flag(void *value, void *arg)
{
    *(void **)arg = value;
}

static void count_value(void *value, void *arg)
{
    (void)value;
    (*(int *)arg)++;
}

static void test_tracked(void)
{
    const struct session_limits three = {.idle_ms = 60000, .max_bytes = 1000, .max_inflight = 3};
    if (world_open(&three) != 0)
        return;
    struct session *s = new_session(NULL), *t = new_session(NULL);
    if (!s || !t)
        return;
    int v1, v2, v3;
    CHECK_INT(session_track(s, "1", &v1), SESSION_TRACK_OK);
    CHECK_INT(session_track(s, "1", &v2), SESSION_TRACK_DUP);
    CHECK_INT(session_track(s, "\"1\"", &v2), SESSION_TRACK_OK); /* another key */
    /* Tracked requests and parked long-polls share max_inflight. */
    CHECK_INT(session_poll_enter(s), SESSION_TRACK_OK);
    CHECK_INT(session_track(s, "3", &v3), SESSION_TRACK_BUSY);
    CHECK_INT(session_poll_enter(s), SESSION_TRACK_BUSY);
    /* Per session: another is not held back. */
    CHECK_INT(session_track(t, "3", &v3), SESSION_TRACK_OK);
    session_poll_leave(s);
    CHECK_INT(session_track(s, "3", &v3), SESSION_TRACK_OK);
    CHECK_INT(session_poll_enter(s), SESSION_TRACK_BUSY);
    /* A duplicate is a duplicate even at the cap. */
    CHECK_INT(session_track(s, "1", &v3), SESSION_TRACK_DUP);

    void *found = NULL;
    CHECK_INT(session_with_tracked(s, "1", set_flag, &found), 0);
    CHECK(found == &v1);
    CHECK_INT(session_with_tracked(s, "9", set_flag, &found), -1);
    CHECK_INT(session_with_tracked(s, "3", NULL, NULL), 0);
    int n = 0;
    session_each_tracked(s, count_value, &n);
    CHECK_INT(n, 3);

    session_untrack(s, "1");
    CHECK_INT(session_with_tracked(s, "1", NULL, NULL), -1);
    CHECK_INT(session_poll_enter(s), SESSION_TRACK_OK);
    CHECK_INT(session_track(s, "1", &v1), SESSION_TRACK_BUSY);
    session_poll_leave(s);
    CHECK_INT(session_track(s, "1", &v1), SESSION_TRACK_OK);

    /* An ended session takes nothing new. */
    session_end(s);
    session_untrack(s, "1");
    CHECK_INT(session_track(s, "7", &v1), SESSION_TRACK_ENDED);
    CHECK_INT(session_poll_enter(s), SESSION_TRACK_ENDED);
    session_unref(t);
    session_unref(s);
    world_close();

    /* No cap (0): many. */
    if (world_open(&plain) != 0)
        return;
    s = new_session(NULL);
    if (!s)
        return;
    char key[16];
    int ok = 1;
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "%d", i);
        ok &= session_track(s, key, &v1) == SESSION_TRACK_OK;
        ok &= session_poll_enter(s) == SESSION_TRACK_OK;
    }
    CHECK(ok);
    session_unref(s);
    world_close();
}

struct gone {
    int n;
    int saw_a, saw_b;
};

static void on_gone(void *arg, const char *key, void *value)
{
    struct gone *g = arg;
    g->n++;
    g->saw_a |= strcmp(key, "a") == 0 && *(int *)value == 1;
    g->saw_b |= strcmp(key, "b") == 0 && *(int *)value == 2;
}

static void test_pending(void)
{
    if (world_open(&plain) != 0)
        return;
    struct session *s = new_session(NULL), *t = new_session(NULL);
    if (!s || !t)
        return;
    /* Ids: "mcpd-<n>-<8 hex>", n counting from 1 per session; no tag with
     * one process. */
    char id[64];
    session_next_request_id(s, id, sizeof id);
    CHECK(strncmp(id, "mcpd-1-", 7) == 0);
    CHECK_INT(strlen(id), 15);
    CHECK(session_request_id_tag(id) == NULL);
    session_next_request_id(t, id, sizeof id);
    CHECK(strncmp(id, "mcpd-1-", 7) == 0);
    json_t *set = json_object();
    for (int i = 0; i < 1000; i++) {
        session_next_request_id(s, id, sizeof id);
        json_object_set_new(set, id, json_true());
    }
    CHECK_INT(json_object_size(set), 1000);
    json_decref(set);
    /* The tag of an id made on a shared store names the process. */
    CHECK_STR(session_request_id_tag("mcpd-7-0000abcd-r3"), "r3");
    CHECK(session_request_id_tag("mcpd-7-0000abcd") == NULL);
    CHECK(session_request_id_tag("other-7-0000abcd-r3") == NULL);

    int one = 1, two = 2;
    CHECK_INT(session_pending_has(s, "a"), 0);
    CHECK_INT(session_pending_add(s, "a", &one), 0);
    CHECK_INT(session_pending_add(s, "b", &two), 0);
    CHECK_INT(session_pending_has(s, "a"), 1);
    CHECK_INT(session_pending_has(t, "a"), 0); /* per session */
    CHECK(session_pending_take(s, "a") == &one);
    CHECK(session_pending_take(s, "a") == NULL); /* once */
    CHECK_INT(session_pending_has(s, "a"), 0);
    CHECK(session_pending_take(s, "zz") == NULL);
    CHECK_INT(session_pending_add(s, "a", &one), 0);

    /* The client can answer nothing more: every pending value is handed
     * over once, and nothing new is asked. */
    struct gone g = {0};
    session_client_gone(s, on_gone, &g);
    CHECK_INT(g.n, 2);
    CHECK(g.saw_a && g.saw_b);
    CHECK_INT(session_pending_has(s, "a"), 0);
    CHECK(session_pending_take(s, "b") == NULL);
    CHECK_INT(session_pending_add(s, "c", &one), -1);
    CHECK_INT(session_pending_has(s, "c"), 0);
    g = (struct gone){0};
    session_client_gone(s, on_gone, &g);
    CHECK_INT(g.n, 0);

    /* Nor on an ended session. */
    session_end(t);
    CHECK_INT(session_pending_add(t, "a", &one), -1);
    session_unref(t);
    session_unref(s);
    world_close();
}

static void test_end(void)
{
    if (world_open(&plain) != 0)
        return;
    struct session *s = new_session(NULL), *keep = new_session(NULL);
    if (!s || !keep)
        return;
    char id[RANDID_LEN + 1];
    snprintf(id, sizeof id, "%s", session_id(s));
    struct stream *sa = session_standalone(s);
    struct stream *rq = stream_create(id, STREAM_REQUEST, NULL);
    append_str(rq, "{\"n\":1}");
    char sa_id[64], rq_id[64];
    snprintf(sa_id, sizeof sa_id, "%s", sa ? stream_id(sa) : "");
    snprintf(rq_id, sizeof rq_id, "%s", rq ? stream_id(rq) : "");
    CHECK_INT(session_count(), 2);

    session_end(s);
    CHECK_INT(session_ended(s), 1);
    CHECK(session_find(id) == NULL);
    CHECK(session_find_loaded(id) == NULL);
    CHECK_INT(session_count(), 1);
    CHECK(!stored(id));
    CHECK_INT(store_sessions_count(store, NULL), 1);
    /* Its streams ended with it, in memory and in the store. */
    CHECK_INT(sa ? (int)stream_state(sa) : -1, STREAM_EXPIRED);
    CHECK_INT(rq ? (int)stream_state(rq) : -1, STREAM_EXPIRED);
    CHECK(stream_find(sa_id) == NULL);
    CHECK(stream_find(rq_id) == NULL);
    /* The holder's reference stays good; a second end changes nothing. */
    CHECK_STR(session_id(s), id);
    session_end(s);
    CHECK_INT(session_count(), 1);
    CHECK_INT(session_ended(keep), 0);
    stream_unref(sa);
    stream_unref(rq);
    session_unref(s);

    /* session_each sees every loaded session. */
    size_t n = 0;
    session_each(count_one, &n);
    CHECK_INT(n, 1);
    session_unref(keep);
    world_close();
}

struct idle_seen {
    struct session *a, *b;
    int a_seen, b_seen, n;
};

static void on_idle(struct session *s, void *arg)
{
    struct idle_seen *is = arg;
    is->n++;
    is->a_seen += s == is->a;
    is->b_seen += s == is->b;
    session_unref(s);
}

static void test_idle(void)
{
    if (world_open(&plain) != 0)
        return;
    struct session *a = new_session(NULL), *b = new_session(NULL);
    if (!a || !b)
        return;
    /* b's last activity, as another process stored it, is later (only a
     * later time is taken in). */
    int64_t ta = session_last_active_ms(a), tb = ta + 100000;
    session_apply_stored(b, -1, 0, tb);
    CHECK_INT(session_last_active_ms(b), tb);
    session_apply_stored(b, -1, 0, ta - 5000);
    CHECK_INT(session_last_active_ms(b), tb);

    /* Idle: last active strictly before the cutoff. */
    struct idle_seen is = {.a = a, .b = b};
    session_each_idle(ta, on_idle, &is);
    CHECK_INT(is.a_seen, 0);
    CHECK_INT(is.b_seen, 0);
    is = (struct idle_seen){.a = a, .b = b};
    session_each_idle(ta + 1, on_idle, &is);
    CHECK_INT(is.a_seen, 1);
    CHECK_INT(is.b_seen, 0);
    is = (struct idle_seen){.a = a, .b = b};
    session_each_idle(tb + 1, on_idle, &is);
    CHECK_INT(is.a_seen, 1);
    CHECK_INT(is.b_seen, 1);
    CHECK_INT(is.n, 2);
    /* An ended session is no longer there to expire. */
    session_end(a);
    is = (struct idle_seen){.a = a, .b = b};
    session_each_idle(tb + 1, on_idle, &is);
    CHECK_INT(is.a_seen, 0);
    CHECK_INT(is.n, 1);

    /* State another process stored: level and initialized. */
    session_apply_stored(b, 3, 1, 0);
    CHECK_INT(session_log_level(b), 3);
    CHECK_INT(session_initialized(b), 1);
    session_apply_stored(b, -1, 0, 0); /* unchanged; initialized stays */
    CHECK_INT(session_log_level(b), 3);
    CHECK_INT(session_initialized(b), 1);
    session_unref(a);
    session_unref(b);
    world_close();
}

static void test_revival(void)
{
    const struct session_limits four = {.idle_ms = 60000, .max_bytes = 1000, .max_sessions = 4};
    if (world_open(&four) != 0)
        return;
    struct session *a = new_session("alice"), *b = new_session(NULL), *gone = new_session(NULL);
    if (!a || !b || !gone)
        return;
    char ida[RANDID_LEN + 1], idb[RANDID_LEN + 1], idg[RANDID_LEN + 1];
    snprintf(ida, sizeof ida, "%s", session_id(a));
    snprintf(idb, sizeof idb, "%s", session_id(b));
    snprintf(idg, sizeof idg, "%s", session_id(gone));
    int64_t tb = session_last_active_ms(b);
    int warning = protocol_log_level("warning");
    session_set_log_level(a, warning);
    session_set_initialized(a);
    /* 990 bytes stored: 2 on the standalone stream, 1 on a request's. */
    char big[401];
    memset(big, ' ', sizeof big - 1);
    big[0] = '[';
    big[sizeof big - 2] = ']';
    big[sizeof big - 1] = '\0';
    struct stream *sa = session_standalone(a);
    append_str(sa, big);
    append_str(sa, big);
    struct stream *rq = stream_create(ida, STREAM_REQUEST, NULL);
    big[189] = ']';
    big[190] = '\0';
    append_str(rq, big);
    stream_unref(rq);
    stream_unref(sa);
    session_end(gone);
    session_unref(gone);
    session_unref(a);
    session_unref(b);
    world_close();

    /* The restart: nothing is loaded, but the stored sessions count. */
    if (world_reopen(&four) != 0)
        return;
    CHECK_INT(session_count(), 0);
    CHECK(session_find_loaded(ida) == NULL);
    struct session *c = new_session(NULL), *d = new_session(NULL), *e = NULL, *f = NULL;
    CHECK_INT(create(NULL, &e), SESSION_AT_CAP); /* a, b dormant, c and d */
    CHECK(e == NULL);

    /* Found again, as it was. */
    a = session_find(ida);
    CHECK(a != NULL);
    if (!a)
        return;
    CHECK_INT(session_count(), 3);
    CHECK_STR(session_id(a), ida);
    CHECK_STR(session_principal(a), "alice");
    CHECK(session_belongs_to(a, "alice"));
    CHECK(!session_belongs_to(a, NULL));
    CHECK_STR(session_protocol(a), "2025-06-18");
    CHECK_INT(session_log_level(a), warning);
    CHECK_INT(session_initialized(a), 1);
    CHECK(json_object_get(session_client_capabilities(a), "sampling") != NULL);
    /* Its stored bytes count against its cap... */
    CHECK_INT(session_charge(a, 11), -1);
    CHECK_INT(session_charge(a, 10), 0);
    /* ... and its GET starts after what was there: the previous process
     * may have delivered it. */
    CHECK_INT(session_get_cursor(a), 2);
    struct stream *sa2 = session_standalone(a);
    CHECK(sa2 && stream_next_seq(sa2) == 2);
    stream_unref(sa2);
    /* Once: a second lookup finds the same one, and it is no longer
     * counted as dormant besides (c, d, a and b dormant: 4). */
    struct session *again = session_find(ida);
    CHECK(again == a);
    session_unref(again);
    CHECK_INT(session_count(), 3);
    CHECK_INT(create(NULL, &e), SESSION_AT_CAP);
    if (d)
        session_end(d);
    CHECK_INT(create(NULL, &e), 0);
    CHECK_INT(create(NULL, &f), SESSION_AT_CAP);

    /* An ended session stays gone. */
    CHECK(session_find(idg) == NULL);

    /* Expiry of the dormant: strictly before the cutoff. */
    session_expire_dormant(tb);
    CHECK_INT(create(NULL, &f), SESSION_AT_CAP);
    session_expire_dormant(tb + 1);
    CHECK_INT(create(NULL, &f), 0);
    /* No longer counted, not revived either (the reaper purges it). */
    CHECK(session_find(idb) == NULL);
    CHECK_INT(session_count(), 4);
    session_unref(f);
    session_unref(e);
    session_unref(d);
    session_unref(c);
    session_unref(a);
    world_close();
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mcpd-test-session-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_create_and_find();
    test_caps();
    test_principal();
    test_bytes();
    test_get_stream();
    test_tracked();
    test_pending();
    test_end();
    test_idle();
    test_revival();

    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", tmpdir);
    return check_summary();
}
