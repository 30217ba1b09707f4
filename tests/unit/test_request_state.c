/* test_request_state — the tamper-evident requestState of 2026-07-28
 * input-required results (service/core/request_state.c) against a real
 * store file: a state opens for its principal and purpose only, any change
 * to it is refused, it expires, and one sealed before a restart (a new
 * process on the same file) still opens after it. */
#include "check.h"
#include "request_state.h"
#include "store.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct store *open_store(const char *path)
{
    struct store *st = NULL;
    char *err = NULL;
    CHECK(store_open(path, &st, &err) == 0);
    free(err);
    return st;
}

/* Opens state for (principal, kind): the "n" of its data, or -1. */
static long long opened(const char *state, const char *principal, const char *kind)
{
    json_t *data = NULL;
    const char *why = NULL;
    if (request_state_open(state, principal, kind, &data, &why) != 0) {
        CHECK(why != NULL && data == NULL);
        return -1;
    }
    long long n = json_integer_value(json_object_get(data, "n"));
    json_decref(data);
    return n;
}

int main(void)
{
    char dir[] = "/tmp/mcpd-test-state-XXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/mcpd.db", dir);

    struct store *st = open_store(path);
    CHECK_INT(request_state_init(st), 0);
    json_t *data = json_pack("{s:i}", "n", 42);
    char *s = request_state_seal("alice", "tools/call:t", data, 60000);
    CHECK(s != NULL && strchr(s, '.') != NULL);
    CHECK_INT(opened(s, "alice", "tools/call:t"), 42);
    /* Another principal's, another tool's: refused. */
    CHECK_INT(opened(s, "bob", "tools/call:t"), -1);
    CHECK_INT(opened(s, "", "tools/call:t"), -1);
    CHECK_INT(opened(s, "alice", "tools/call:u"), -1);
    /* Any byte changed, appended or cut: refused. */
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        char *t = strdup(s);
        t[i] = t[i] == 'A' ? 'B' : 'A';
        CHECK_INT(opened(t, "alice", "tools/call:t"), -1);
        free(t);
    }
    char *longer = malloc(n + 10);
    snprintf(longer, n + 10, "%s-TAMPER", s);
    CHECK_INT(opened(longer, "alice", "tools/call:t"), -1);
    free(longer);
    char *cut = strndup(s, n - 1);
    CHECK_INT(opened(cut, "alice", "tools/call:t"), -1);
    free(cut);
    CHECK_INT(opened("", "alice", "tools/call:t"), -1);
    CHECK_INT(opened("no-dot-here", "alice", "tools/call:t"), -1);
    CHECK_INT(opened(".", "alice", "tools/call:t"), -1);
    CHECK_INT(opened(NULL, "alice", "tools/call:t"), -1);
    /* Expired. */
    char *old = request_state_seal("alice", "tools/call:t", data, -1000);
    CHECK_INT(opened(old, "alice", "tools/call:t"), -1);
    free(old);
    /* No principal (no authentication) is a principal of its own. */
    char *anon = request_state_seal(NULL, "k", data, 60000);
    CHECK_INT(opened(anon, NULL, "k"), 42);
    CHECK_INT(opened(anon, "", "k"), 42);
    CHECK_INT(opened(anon, "alice", "k"), -1);
    free(anon);
    store_close(st);

    /* A restart: the key comes back from the store, the old state opens. */
    st = open_store(path);
    CHECK_INT(request_state_init(st), 0);
    CHECK_INT(opened(s, "alice", "tools/call:t"), 42);
    store_close(st);

    /* Another store (another key): the state does not open there. */
    char other[160];
    snprintf(other, sizeof other, "%s/other.db", dir);
    st = open_store(other);
    CHECK_INT(request_state_init(st), 0);
    CHECK_INT(opened(s, "alice", "tools/call:t"), -1);
    store_close(st);

    free(s);
    json_decref(data);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_INT(system(cmd), 0);
    return check_summary();
}
