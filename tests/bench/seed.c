/* seed — fills an mcpd store with sessions and stored messages, through the
 * store's own API, for the growth benchmark (growth.sh). Not a test.
 *
 * Each session gets request streams of two chunks, a progress notification
 * and a final result, the way a tools/call with progress is stored, until
 * the store holds --chunks chunks. Everything is dated --age-ms in the past:
 * 0 makes live data, an age past mcpd's --session-idle-ms makes data the
 * reaper must purge; --at-ms dates it at that wall-clock time instead (so
 * that it expires at a known moment). With --live-sessions the sessions are dated now and
 * only their streams are old (purged stream by stream, not with their
 * session). --threads writers share group commits.
 *
 * Usage: bench_seed --db PATH [--sessions N] [--chunks N] [--age-ms MS]
 *                   [--at-ms MS] [--live-sessions] [--threads N] */
#include "clock.h"
#include "store.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct store *st;
static long sessions = 100000, chunks = 1000000, threads = 16;
static int64_t age_ms, at_ms;
static int live_sessions;
static uint64_t run_tag;

/* 32 lowercase hex digits; stream ids begin with their creation time in ms,
 * as randid_make_ordered makes them (the reaper's purge depends on it). */
static void make_id(char out[33], uint64_t high48, uint64_t a, uint64_t b)
{
    snprintf(out, 33, "%012" PRIx64 "%04" PRIx64 "%016" PRIx64, high48 & (uint64_t)0xffffffffffff,
             a & 0xffff, b);
}

static int seed_session(long i, int64_t when, int64_t session_when)
{
    char sid[33];
    make_id(sid, run_tag, (uint64_t)i >> 16, ((uint64_t)i << 20) ^ 0x5eed);
    struct store_session s = {
        .id = sid,
        .protocol_version = "2025-11-25",
        .init_params = "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
                       "\"clientInfo\":{\"name\":\"bench-seed\",\"version\":\"1.0.0\"}}",
        .log_level = "info",
        .initialized = 1,
        .created_ms = session_when,
        .last_active_ms = session_when,
        .transport = "http",
    };
    if (store_session_put(st, &s) != 0)
        return -1;
    long per = chunks / sessions + (i < chunks % sessions);
    char msg[512];
    for (long k = 0; k < per; k += 2) {
        char stid[33];
        make_id(stid, (uint64_t)when, (uint64_t)k, ((uint64_t)i << 24) ^ run_tag);
        struct store_stream_new create = {sid, "request", "42", NULL};
        int n = snprintf(msg, sizeof msg,
                         "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":"
                         "{\"progressToken\":\"p-%ld\",\"progress\":1,\"total\":2,\"message\":"
                         "\"working on request %ld of session %ld\"}}",
                         k, k, i);
        if (store_stream_write(st, stid, &create, 0, msg, (size_t)n,
                               k + 1 >= per ? "finished" : NULL, when) != 0)
            return -1;
        if (k + 1 >= per)
            break;
        n = snprintf(msg, sizeof msg,
                     "{\"jsonrpc\":\"2.0\",\"id\":42,\"result\":{\"content\":[{\"type\":\"text\","
                     "\"text\":\"echo: a stored reply of realistic size for request %ld of "
                     "session %ld\"}],\"isError\":false}}",
                     k, i);
        if (store_stream_write(st, stid, NULL, 1, msg, (size_t)n, "finished", when) != 0)
            return -1;
    }
    return 0;
}

static void *writer(void *arg)
{
    long t = (long)(intptr_t)arg;
    int64_t now = clock_wall_ms(), when = at_ms ? at_ms : now - age_ms;
    for (long i = t; i < sessions; i += threads)
        if (seed_session(i, when, live_sessions ? now : when) != 0)
            return (void *)1;
    return NULL;
}

int main(int argc, char **argv)
{
    const char *db = NULL;
    int bad = 0;
    for (int i = 1; i < argc && !bad; i += 2) {
        if (strcmp(argv[i], "--live-sessions") == 0) {
            live_sessions = 1;
            i--;
        } else if (i + 1 >= argc) {
            bad = 1;
        } else if (strcmp(argv[i], "--db") == 0)
            db = argv[i + 1];
        else if (strcmp(argv[i], "--sessions") == 0)
            sessions = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--chunks") == 0)
            chunks = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--age-ms") == 0)
            age_ms = atoll(argv[i + 1]);
        else if (strcmp(argv[i], "--at-ms") == 0)
            at_ms = atoll(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0)
            threads = atol(argv[i + 1]);
        else
            bad = 1;
    }
    if (bad || !db || sessions < 1 || chunks < 0 || threads < 1) {
        fprintf(stderr, "usage: bench_seed --db PATH [--sessions N] [--chunks N] [--age-ms MS] "
                        "[--at-ms MS] [--live-sessions] [--threads N]\n");
        return 2;
    }
    char *err = NULL;
    if (store_open(db, &st, &err) != 0) {
        fprintf(stderr, "bench_seed: %s\n", err ? err : "cannot open the store");
        return 1;
    }
    /* Distinct ids across runs into the same file. */
    run_tag = (uint64_t)clock_wall_ms() * 2654435761u;
    int64_t t0 = clock_mono_ms();
    pthread_t tid[64];
    if (threads > 64)
        threads = 64;
    for (long t = 0; t < threads; t++)
        pthread_create(&tid[t], NULL, writer, (void *)(intptr_t)t);
    int failed = 0;
    for (long t = 0; t < threads; t++) {
        void *r;
        pthread_join(tid[t], &r);
        failed |= r != NULL;
    }
    failed |= store_flush(st) != 0;
    store_checkpoint(st);
    store_close(st);
    fprintf(stderr, "bench_seed: %ld sessions, %ld chunks, in %lld ms%s\n", sessions, chunks,
            (long long)(clock_mono_ms() - t0), failed ? " (FAILED)" : "");
    return failed;
}
