/* test_wal — the store's checkpointer (service/store/wal.c) with a tiny
 * threshold, so that nearly every commit is past the back-pressure limit
 * and checkpoints inside the commit hook, while on-demand checkpoints run
 * from another thread, with inserts and deletes spread over many pages.
 * Afterwards SQLite's integrity_check must pass and every row must be
 * there, a fully copied log must not be checkpointed again before a
 * commit, and a reader holding an old snapshot must make checkpoints pause
 * rather than spin. (The race this module once had, two threads in its
 * NOMUTEX connection at once, showed only on a 500 MB store under a minute
 * of full load: tests/bench/growth.sh checks the file's integrity after
 * such runs; this test runs the same paths on every build.) */
#include "check.h"
#include "lock_hold.h"
#include "wal.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { WRITERS = 3, ROWS = 3000 };

static pthread_mutex_t commit_mu = PTHREAD_MUTEX_INITIALIZER;
static struct lock_hold hold;
static sqlite3 *writer;
static atomic_int stop;
static int write_failures;

static void *write_rows(void *arg)
{
    long t = (long)(intptr_t)arg;
    char sql[1200], pad[1500];
    memset(pad, 'a' + (int)t, sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    for (int i = 0; i < ROWS; i++) {
        snprintf(sql, sizeof sql, "INSERT INTO t(k, v) VALUES(%ld, '%.1000s')", t * ROWS + i, pad);
        pthread_mutex_lock(&commit_mu);
        if (sqlite3_exec(writer, sql, NULL, NULL, NULL) != SQLITE_OK)
            write_failures++;
        /* Deletes spread the writes over many pages, as the reaper does. */
        if (i % 10 == 9) {
            snprintf(sql, sizeof sql, "DELETE FROM t WHERE k = %ld", t * ROWS + i - 5);
            sqlite3_exec(writer, sql, NULL, NULL, NULL);
        }
        pthread_mutex_unlock(&commit_mu);
    }
    return NULL;
}

/* One row, committed as mcpd's writer commits: under the commit lock. */
static void commit_row(int k)
{
    char sql[64];
    snprintf(sql, sizeof sql, "INSERT INTO t(k, v) VALUES(%d, 'x')", k);
    pthread_mutex_lock(&commit_mu);
    CHECK(sqlite3_exec(writer, sql, NULL, NULL, NULL) == SQLITE_OK);
    pthread_mutex_unlock(&commit_mu);
}

static uint64_t holds_counted(void)
{
    struct store_stats s;
    lock_hold_read(&hold, &s);
    uint64_t n = 0;
    for (int i = 0; i <= STORE_HOLD_BUCKETS; i++)
        n += s.hold[i];
    return n;
}

static void *checkpoint_loop(void *arg)
{
    struct wal *w = arg;
    while (!stop)
        wal_checkpoint(w);
    return NULL;
}

int main(void)
{
    char dir[] = "/tmp/mcpd-test-wal-XXXXXX";
    if (!mkdtemp(dir))
        return 2;
    char path[128], cmd[160];
    snprintf(path, sizeof path, "%s/wal.db", dir);
    CHECK(sqlite3_open_v2(path, &writer,
                          SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                          NULL) == SQLITE_OK);
    /* As the store opens its writer (store.c open_conn). A first phase
     * that reads the log's header while a commit rewrites it takes the
     * write lock for a moment to reread it; without a busy timeout the
     * commit that meets that lock fails at once (CI, TSan under load). */
    sqlite3_busy_timeout(writer, 5000);
    CHECK(sqlite3_exec(writer,
                       "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                       "PRAGMA wal_autocheckpoint=0; "
                       "CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)",
                       NULL, NULL, NULL) == SQLITE_OK);
    char *err = NULL;
    struct wal *w = wal_start(path, writer, &commit_mu, &hold, 4, &err);
    if (!CHECK(w != NULL)) {
        printf("     %s\n", err ? err : "?");
        return check_summary();
    }
    CHECK_INT(wal_checkpoint(w), 1); /* none before the first commit */
    pthread_t cp, th[WRITERS];
    CHECK_INT(pthread_create(&cp, NULL, checkpoint_loop, w), 0);
    for (long t = 0; t < WRITERS; t++)
        CHECK_INT(pthread_create(&th[t], NULL, write_rows, (void *)(intptr_t)t), 0);
    for (int t = 0; t < WRITERS; t++)
        pthread_join(th[t], NULL);
    stop = 1;
    pthread_join(cp, NULL);
    CHECK_INT(write_failures, 0);
    CHECK(wal_checkpoint(w) >= 0); /* 1 if the loop copied the last commit */
    /* A fully copied log is left alone until a commit starts it over: a
     * checkpoint starting beside that restart is SQLite's WAL-reset bug
     * (before 3.51.3), which this test's load once hit. */
    CHECK_INT(wal_checkpoint(w), 1);
    /* Each second phase, which holds the commit lock, is counted once; a
     * checkpoint with nothing to copy holds nothing. */
    uint64_t holds = holds_counted();
    commit_row(-1);
    CHECK_INT(wal_checkpoint(w), 0);
    CHECK_INT(holds_counted(), holds + 1);
    CHECK_INT(wal_checkpoint(w), 1);
    CHECK_INT(holds_counted(), holds + 1);

    /* A reader that keeps an old snapshot: the first checkpoint copies up
     * to its frame, the second gets no further and says so (2, its second
     * phase not run), and for a moment none starts at all. Once the reader
     * is gone, the whole log is copied again. */
    sqlite3 *reader = NULL;
    CHECK(sqlite3_open_v2(path, &reader, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    commit_row(-2);
    CHECK(sqlite3_exec(reader, "BEGIN; SELECT COUNT(*) FROM t", NULL, NULL, NULL) == SQLITE_OK);
    commit_row(-3);
    CHECK_INT(wal_checkpoint(w), 2);
    CHECK_INT(wal_checkpoint(w), 2);
    CHECK(sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);
    usleep(30 * 1000);
    CHECK_INT(wal_checkpoint(w), 0);
    CHECK_INT(wal_checkpoint(w), 1);
    sqlite3_close(reader);
    wal_stop(w);

    sqlite3_stmt *q = NULL;
    CHECK(sqlite3_prepare_v2(writer, "PRAGMA integrity_check", -1, &q, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(q) == SQLITE_ROW);
    const char *verdict = (const char *)sqlite3_column_text(q, 0);
    if (!CHECK(verdict && strcmp(verdict, "ok") == 0))
        printf("     integrity_check: %s\n", verdict ? verdict : "(none)");
    sqlite3_finalize(q);
    CHECK(sqlite3_prepare_v2(writer, "SELECT COUNT(*) FROM t", -1, &q, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(q) == SQLITE_ROW);
    CHECK_INT(sqlite3_column_int(q, 0), WRITERS * (ROWS - ROWS / 10) + 3);
    sqlite3_finalize(q);
    sqlite3_close(writer);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", dir);
    return check_summary();
}
