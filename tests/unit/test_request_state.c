/* test_request_state — the requestState of 2026-07-28 input-required
 * results (service/core/request_state.c) against a real store file.
 *
 * Sealing: a state opens only for its principal and its request (method,
 * name, arguments, uri: other arguments are refused, the same ones in
 * another order or a changed _meta are not), any change to it is refused,
 * it expires, it yields only the answers to what it asked, and one sealed
 * before a restart (a new process on the same file) still opens after it.
 *
 * Use: the first request that presents a state claims it; a second one
 * while it runs is refused; once it answered, the same answers get the same
 * result back and other answers are refused; one that ended without an
 * answer gives the state back; a claim a killed process left behind is
 * taken over after a restart; a result too large to keep makes a second use
 * a refusal; uses of expired states are removed. */
#include "check.h"
#include "request_state.h"
#include "store.h"

#include <jansson.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct store *open_store(const char *path)
{
    struct store *st = NULL;
    char *err = NULL;
    CHECK(store_open(path, &st, &err) == 0);
    free(err);
    /* Each open is a process of its own: a run of its own. */
    static int opens;
    char run[32];
    snprintf(run, sizeof run, "test-run-%d", ++opens);
    CHECK_INT(request_state_init(st, run), 0);
    return st;
}

/* The params of a tools/call of tool `name` with these arguments (a JSON
 * text, or NULL for none) and inputResponses (a JSON text, or NULL). */
static json_t *call_params(const char *name, const char *args, const char *responses)
{
    json_t *p = json_pack("{s:s, s:{s:s}}", "name", name, "_meta",
                          "io.modelcontextprotocol/protocolVersion", "2026-07-28");
    if (args)
        json_object_set_new(p, "arguments", json_loads(args, 0, NULL));
    if (responses)
        json_object_set_new(p, "inputResponses", json_loads(responses, 0, NULL));
    return p;
}

/* Opens state for (principal, method, params): the "n" of its data, or
 * -1 (then *why, when why is not NULL, says why). */
static long long opened_why(const char *state, const char *principal, const char *method,
                            json_t *params, const char **why)
{
    struct request_state s;
    const char *reason = NULL;
    if (request_state_open(state, principal, method, params, &s, &reason) != 0) {
        CHECK(reason != NULL && s.data == NULL && s.answers == NULL);
        if (why)
            *why = reason;
        return -1;
    }
    long long n = json_integer_value(json_object_get(s.data, "n"));
    request_state_clear(&s);
    return n;
}

static long long opened(const char *state, const char *principal, const char *method,
                        json_t *params)
{
    return opened_why(state, principal, method, params, NULL);
}

static int contains(const char *s, const char *part)
{
    return s && strstr(s, part) != NULL;
}

static void test_bindings(const char *path)
{
    struct store *st = open_store(path);
    json_t *data = json_pack("{s:i}", "n", 42);
    json_t *asked = json_pack("{s:{s:s}}", "confirm", "method", "elicitation/create");
    json_t *p = call_params("t", "{\"a\": 1, \"b\": \"x\"}", NULL);
    char *s = request_state_seal("alice", "tools/call", p, asked, data, 60000);
    CHECK(s != NULL && strchr(s, '.') != NULL);
    CHECK_INT(opened(s, "alice", "tools/call", p), 42);

    /* The same request: its arguments in another order, another _meta, a
     * retry's inputResponses and requestState do not matter. */
    json_t *same = call_params("t", "{\"b\": \"x\", \"a\": 1}", "{\"confirm\": {}}");
    json_object_set_new(same, "_meta", json_pack("{s:s}", "other", "client"));
    json_object_set_new(same, "requestState", json_string(s));
    CHECK_INT(opened(s, "alice", "tools/call", same), 42);
    json_decref(same);

    /* Another principal: refused. */
    const char *why = NULL;
    CHECK_INT(opened_why(s, "bob", "tools/call", p, &why), -1);
    CHECK(contains(why, "another principal"));
    CHECK_INT(opened(s, "", "tools/call", p), -1);
    CHECK_INT(opened(s, NULL, "tools/call", p), -1);

    /* Another request: tool, method, arguments (changed, added, dropped). */
    const char *others[][2] = {
        {"u", "{\"a\": 1, \"b\": \"x\"}"},
        {"t", "{\"a\": 2, \"b\": \"x\"}"},
        {"t", "{\"a\": 1, \"b\": \"x\", \"c\": 0}"},
        {"t", "{\"a\": 1}"},
        {"t", NULL},
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        json_t *o = call_params(others[i][0], others[i][1], NULL);
        why = NULL;
        CHECK_INT(opened_why(s, "alice", "tools/call", o, &why), -1);
        CHECK(contains(why, "another request"));
        json_decref(o);
    }
    CHECK_INT(opened(s, "alice", "prompts/get", p), -1);

    /* Any byte changed, appended or cut: refused. */
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        char *t = strdup(s);
        t[i] = t[i] == 'A' ? 'B' : 'A';
        CHECK_INT(opened(t, "alice", "tools/call", p), -1);
        free(t);
    }
    char *longer = malloc(n + 10);
    snprintf(longer, n + 10, "%s-TAMPER", s);
    why = NULL;
    CHECK_INT(opened_why(longer, "alice", "tools/call", p, &why), -1);
    CHECK(contains(why, "integrity"));
    free(longer);
    char *cut = strndup(s, n - 1);
    CHECK_INT(opened(cut, "alice", "tools/call", p), -1);
    free(cut);
    CHECK_INT(opened("", "alice", "tools/call", p), -1);
    CHECK_INT(opened("no-dot-here", "alice", "tools/call", p), -1);
    CHECK_INT(opened(".", "alice", "tools/call", p), -1);
    CHECK_INT(opened(NULL, "alice", "tools/call", p), -1);

    /* Expired. */
    char *old = request_state_seal("alice", "tools/call", p, asked, data, -1000);
    why = NULL;
    CHECK_INT(opened_why(old, "alice", "tools/call", p, &why), -1);
    CHECK(contains(why, "expired"));
    free(old);

    /* No principal (no authentication) is a principal of its own. */
    char *anon = request_state_seal(NULL, "tools/call", p, asked, data, 60000);
    CHECK_INT(opened(anon, NULL, "tools/call", p), 42);
    CHECK_INT(opened(anon, "", "tools/call", p), 42);
    CHECK_INT(opened(anon, "alice", "tools/call", p), -1);
    free(anon);

    /* No arguments and empty arguments are the same call. */
    json_t *bare = call_params("t", NULL, NULL), *empty = call_params("t", "{}", NULL);
    char *b = request_state_seal("alice", "tools/call", bare, asked, data, 60000);
    CHECK_INT(opened(b, "alice", "tools/call", empty), 42);
    free(b);
    json_decref(bare);
    json_decref(empty);

    /* A resource read is bound to its uri. */
    json_t *r1 = json_pack("{s:s}", "uri", "file:///a"),
           *r2 = json_pack("{s:s}", "uri", "file:///b");
    char *r = request_state_seal("alice", "resources/read", r1, asked, data, 60000);
    CHECK_INT(opened(r, "alice", "resources/read", r1), 42);
    CHECK_INT(opened(r, "alice", "resources/read", r2), -1);
    free(r);
    json_decref(r1);
    json_decref(r2);

    /* Only the answers to what the state asked come out of it. */
    json_t *retry = call_params(
        "t", "{\"a\": 1, \"b\": \"x\"}",
        "{\"confirm\": {\"action\": \"accept\"}, \"step1\": {\"action\": \"decline\"}}");
    struct request_state o;
    CHECK_INT(request_state_open(s, "alice", "tools/call", retry, &o, &why), 0);
    CHECK_INT(json_object_size(o.answers), 1);
    CHECK(json_object_get(o.answers, "confirm") != NULL);
    CHECK(json_object_get(o.answers, "step1") == NULL);
    request_state_clear(&o);
    json_decref(retry);
    /* A state that asked nothing yields no answers. */
    char *none = request_state_seal("alice", "tools/call", p, NULL, data, 60000);
    retry = call_params("t", "{\"a\": 1, \"b\": \"x\"}", "{\"confirm\": {}}");
    CHECK_INT(request_state_open(none, "alice", "tools/call", retry, &o, &why), 0);
    CHECK_INT(json_object_size(o.answers), 0);
    request_state_clear(&o);
    json_decref(retry);
    free(none);
    store_close(st);

    /* A restart: the key comes back from the store, the old state opens. */
    st = open_store(path);
    CHECK_INT(opened(s, "alice", "tools/call", p), 42);
    store_close(st);

    /* Another store (another key): the state does not open there. */
    char other[300];
    snprintf(other, sizeof other, "%s.other", path);
    st = open_store(other);
    CHECK_INT(opened(s, "alice", "tools/call", p), -1);
    store_close(st);

    free(s);
    json_decref(p);
    json_decref(asked);
    json_decref(data);
}

/* Opens state with these inputResponses (a JSON text) and claims it: 0
 * (claimed: *claim set), 1 (*outcome set) or -1 (*why set). */
static int use(const char *state, const char *responses, struct request_state_claim *claim,
               json_t **outcome, const char **why)
{
    json_t *p = call_params("t", "{}", responses);
    struct request_state s;
    int rc = request_state_open(state, "alice", "tools/call", p, &s, why);
    CHECK_INT(rc, 0);
    json_decref(p);
    if (rc != 0)
        return -2;
    rc = request_state_claim(&s, claim, outcome, why);
    request_state_clear(&s);
    return rc;
}

static int64_t rows(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    int64_t n = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *q = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
            n = sqlite3_column_int64(q, 0);
        sqlite3_finalize(q);
    }
    sqlite3_close(db);
    return n;
}

static void test_uses(const char *path)
{
    struct store *st = open_store(path);
    json_t *asked = json_pack("{s:{}}", "confirm");
    json_t *p = call_params("t", "{}", NULL);
    char *s = request_state_seal("alice", "tools/call", p, asked, NULL, 60000);
    const char *yes = "{\"confirm\": {\"action\": \"accept\", \"content\": {\"ok\": true}}}";
    /* The same answers, written otherwise, and with an answer to a question
     * the state did not ask: the same answers still. */
    const char *yes_again = "{\"junk\": 1, \"confirm\": {\"content\": {\"ok\": true}, \"action\": "
                            "\"accept\"}}";
    const char *no = "{\"confirm\": {\"action\": \"accept\", \"content\": {\"ok\": false}}}";

    struct request_state_claim first, second;
    json_t *outcome = NULL;
    const char *why = NULL;
    CHECK_INT(use(s, yes, &first, &outcome, &why), 0);
    CHECK(outcome == NULL && first.nonce[0] != '\0');
    /* While the first use runs, another is refused, whatever its answers. */
    CHECK_INT(use(s, yes, &second, &outcome, &why), -1);
    CHECK(contains(why, "in use"));
    CHECK_INT(use(s, no, &second, &outcome, &why), -1);
    /* The first one answers. The same retry again gets that answer; other
     * answers are refused. */
    json_t *result = json_pack("{s:s, s:[{s:s, s:s}]}", "resultType", "complete", "content", "type",
                               "text", "text", "state-ok: confirmed");
    request_state_finish(&first, result);
    CHECK_INT(use(s, yes_again, &second, &outcome, &why), 1);
    CHECK(json_equal(outcome, result));
    json_decref(outcome);
    outcome = NULL;
    why = NULL;
    CHECK_INT(use(s, no, &second, &outcome, &why), -1);
    CHECK(contains(why, "used already"));
    CHECK(outcome == NULL);

    /* A use that ends without an answer (an error, cancelled) gives the
     * state back: the next use may have other answers. */
    char *s2 = request_state_seal("alice", "tools/call", p, asked, NULL, 60000);
    CHECK_INT(use(s2, no, &first, &outcome, &why), 0);
    request_state_finish(&first, NULL);
    CHECK_INT(use(s2, yes, &first, &outcome, &why), 0);
    request_state_finish(&first, result);
    CHECK_INT(use(s2, yes, &second, &outcome, &why), 1);
    json_decref(outcome);

    /* A result too large to keep: a second use is refused, and says so. */
    char *s3 = request_state_seal("alice", "tools/call", p, asked, NULL, 60000);
    CHECK_INT(use(s3, yes, &first, &outcome, &why), 0);
    char *big = malloc(REQUEST_STATE_OUTCOME_MAX + 2);
    memset(big, 'x', REQUEST_STATE_OUTCOME_MAX + 1);
    big[REQUEST_STATE_OUTCOME_MAX + 1] = '\0';
    json_t *large = json_pack("{s:s}", "text", big);
    free(big);
    request_state_finish(&first, large);
    json_decref(large);
    outcome = NULL;
    why = NULL;
    CHECK_INT(use(s3, yes, &second, &outcome, &why), -1);
    CHECK(contains(why, "not kept") && outcome == NULL);

    /* A claim left by a process that died (never finished) is taken over
     * after a restart; a finished use is still remembered there. */
    char *s4 = request_state_seal("alice", "tools/call", p, asked, NULL, 60000);
    CHECK_INT(use(s4, no, &first, &outcome, &why), 0);
    store_close(st);
    st = open_store(path);
    CHECK_INT(use(s4, yes, &first, &outcome, &why), 0);
    request_state_finish(&first, result);
    CHECK_INT(use(s, yes, &second, &outcome, &why), 1);
    CHECK(json_equal(outcome, result));
    json_decref(outcome);
    CHECK_INT(use(s, no, &second, &outcome, &why), -1);

    /* Uses are kept until their state expires, then removed with the next
     * claim. */
    CHECK_INT(store_flush(st), 0);
    CHECK_INT(rows(path, "SELECT COUNT(*) FROM request_state_uses"), 4);
    struct request_state gone = {.expires_ms = 1};
    snprintf(gone.nonce, sizeof gone.nonce, "an-expired-state");
    gone.answers = json_object();
    CHECK_INT(request_state_claim(&gone, &first, &outcome, &why), 0);
    request_state_finish(&first, result);
    json_decref(gone.answers);
    CHECK_INT(use(s, yes, &second, &outcome, &why), 1);
    json_decref(outcome);
    CHECK_INT(store_flush(st), 0);
    CHECK_INT(rows(path, "SELECT COUNT(*) FROM request_state_uses"), 4);
    CHECK_INT(
        rows(path, "SELECT COUNT(*) FROM request_state_uses WHERE nonce = 'an-expired-state'"), 0);
    store_close(st);

    free(s);
    free(s2);
    free(s3);
    free(s4);
    json_decref(result);
    json_decref(p);
    json_decref(asked);
}

int main(void)
{
    char dir[] = "/tmp/mcpd-test-state-XXXXXX", path[128], path2[128];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/mcpd.db", dir);
    snprintf(path2, sizeof path2, "%s/uses.db", dir);
    test_bindings(path);
    test_uses(path2);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_INT(system(cmd), 0);
    return check_summary();
}
