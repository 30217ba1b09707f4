/* wal — see wal.h. */
#include "wal.h"

#include "clock.h"
#include "lock_hold.h"
#include "log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long checkpoints rest after one found a reader holding the log. */
#define PINNED_WAIT_MS 10

struct wal {
    sqlite3 *db; /* the checkpoints' own connection */
    sqlite3 *writer;
    pthread_mutex_t *commit_mu;
    struct lock_hold *hold; /* the second phase's holds of commit_mu go here */
    /* Microseconds the hook spent copying the log in the last commit. */
    _Atomic int64_t hook_us;
    /* Log frames at which the hook wakes the thread, copies the log itself
     * unless the thread is copying, and waits for the copy (on_commit). */
    int threshold;
    int limit, hard_limit;
    pthread_mutex_t run_mu; /* one checkpoint at a time; taken before commit_mu */
    /* Whoever uses db holds db_mu: the connection is opened NOMUTEX, and
     * two threads in it at once (a first phase and the hook's back-pressure
     * checkpoint) corrupted the database under sustained load. Taken after
     * commit_mu by the hook and the second phase, alone by the first. */
    pthread_mutex_t db_mu;
    /* Commits seen by the hook, and its value when a checkpoint last found
     * the whole log copied. While the two are equal, the next commit
     * starts the log over, and SQLite before 3.51.3 (Debian 12 ships
     * 3.40.1) can lose pages when a checkpoint starts just as a commit
     * does that: the second checkpoint misses the reset, and a later one
     * skips frames it believes copied (sqlite.org/wal.html#walresetbug).
     * So no checkpoint starts then; there is nothing to copy anyway. */
    atomic_llong commits;
    atomic_llong copied_at;
    /* A reader that holds an old snapshot (mcp-admin, a backup, sqlite3 on
     * the file) keeps every checkpoint from copying past its frame. One
     * that copied no further than the one before is held back so: none
     * starts again until pinned_until (monotonic ms), rather than one per
     * commit, each under the commit lock, for as long as the reader stays.
     * last_copied is the previous checkpoint's count, under db_mu. */
    atomic_llong pinned_until;
    int last_copied;
    pthread_mutex_t mu; /* guards the flags */
    pthread_cond_t cv;  /* the thread: due or stop */
    int due, stop;
    pthread_t thread;
};

/* Called with db_mu held. 0; 1 when there was nothing to copy (and no
 * checkpoint started); 2 when a reader's old snapshot held it back, now or
 * lately (until grace_ms past pinned_until, see there); or -1. */
static int passive(struct wal *w, int64_t grace_ms)
{
    long long seen = atomic_load(&w->commits);
    if (atomic_load(&w->copied_at) == seen)
        return 1;
    if (clock_mono_ms() < atomic_load(&w->pinned_until) + grace_ms)
        return 2;
    int frames = 0, copied = 0;
    int rc = sqlite3_wal_checkpoint_v2(w->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames, &copied);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) /* BUSY: another process checkpoints */
        log_local(LOG_WARN, NULL, "store_checkpoint_failed", "%s", sqlite3_errmsg(w->db));
    if (rc != SQLITE_OK)
        return -1;
    /* Only a first phase runs beside commits. One that lands during it
     * moves the count past seen whether or not its frames were copied, so
     * the second phase, with commits held off, runs and records the truth. */
    if (frames == copied)
        atomic_store(&w->copied_at, seen);
    /* A short read in progress stops a checkpoint short too, but the next
     * one gets further: only no progress at all means a reader stays. */
    int pinned = copied < frames && copied == w->last_copied;
    w->last_copied = copied < frames ? copied : -1;
    if (pinned)
        atomic_store(&w->pinned_until, clock_mono_ms() + PINNED_WAIT_MS);
    return pinned ? 2 : 0;
}

/* Runs after each commit on the writer's connection, with commit_mu held.
 * Past the limit, writes outran the checkpoints, so the committer copies
 * the log itself, the writer waiting: that is the back-pressure that bounds
 * the log. Below the hard limit it leaves a running first phase alone
 * (db_mu taken): that phase is copying the log already, and its second
 * phase copies the rest with the commits held; after a reader's pin ends,
 * that is how the backlog gets copied without stopping the writer. Past the
 * hard limit the committer waits for it and copies what is left. */
static int on_commit(void *arg, sqlite3 *db, const char *name, int frames)
{
    (void)db;
    (void)name;
    struct wal *w = arg;
    atomic_fetch_add(&w->commits, 1);
    int64_t t0 = clock_mono_us();
    if (frames >= w->hard_limit) {
        pthread_mutex_lock(&w->db_mu);
        passive(w, 0);
        pthread_mutex_unlock(&w->db_mu);
        atomic_store(&w->hook_us, clock_mono_us() - t0);
    } else if (frames >= w->limit && pthread_mutex_trylock(&w->db_mu) == 0) {
        /* After a pin, the thread gets the first go at the backlog. */
        passive(w, PINNED_WAIT_MS);
        pthread_mutex_unlock(&w->db_mu);
        atomic_store(&w->hook_us, clock_mono_us() - t0);
    }
    if (frames >= w->threshold) {
        pthread_mutex_lock(&w->mu);
        if (!w->due) {
            w->due = 1;
            pthread_cond_signal(&w->cv);
        }
        pthread_mutex_unlock(&w->mu);
    }
    return SQLITE_OK;
}

int wal_checkpoint(struct wal *w)
{
    pthread_mutex_lock(&w->run_mu);
    pthread_mutex_lock(&w->db_mu);
    int rc = passive(w, 0);
    pthread_mutex_unlock(&w->db_mu);
    /* After a first phase that a reader held back, the second could copy
     * no further: it would only hold the commits. */
    if (rc == 0) {
        pthread_mutex_lock(w->commit_mu);
        int64_t t0 = clock_mono_us();
        pthread_mutex_lock(&w->db_mu);
        int last = passive(w, 0);
        if (last == -1 || last == 2) /* 1: the first phase copied the whole log */
            rc = last;
        pthread_mutex_unlock(&w->db_mu);
        int64_t held = clock_mono_us() - t0;
        pthread_mutex_unlock(w->commit_mu);
        if (lock_hold_record(w->hold, held))
            log_local(LOG_WARN, NULL, "store_slow_checkpoint",
                      "a checkpoint's second phase held the store's commit lock for %.1f ms",
                      (double)held / 1000);
    }
    pthread_mutex_unlock(&w->run_mu);
    return rc;
}

static void *wal_main(void *arg)
{
    struct wal *w = arg;
    pthread_setname_np(pthread_self(), "mcpd-checkpoint");
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (!w->due && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        int stop = w->stop;
        w->due = 0;
        pthread_mutex_unlock(&w->mu);
        if (stop)
            return NULL;
        if (wal_checkpoint(w) == 2) {
            /* A reader holds the log: wait for the pin to lapse, not for
             * the next commit, which comes at once under load. */
            pthread_mutex_lock(&w->mu);
            int64_t until = atomic_load(&w->pinned_until);
            while (!w->stop && clock_cond_wait_until(&w->cv, &w->mu, until) != ETIMEDOUT)
                ;
            pthread_mutex_unlock(&w->mu);
        }
    }
}

struct wal *wal_start(const char *path, sqlite3 *writer, pthread_mutex_t *commit_mu,
                      struct lock_hold *hold, int threshold_frames, char **err)
{
    struct wal *w = calloc(1, sizeof *w);
    if (!w) {
        *err = strdup("out of memory");
        return NULL;
    }
    /* A connection sees the log only once it has looked at the database:
     * until then a checkpoint reports "not in WAL mode" and does nothing. */
    if (sqlite3_open_v2(path, &w->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
            SQLITE_OK ||
        sqlite3_exec(w->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL) != SQLITE_OK) {
        const char *why = w->db ? sqlite3_errmsg(w->db) : "out of memory";
        size_t n = strlen(path) + strlen(why) + 64;
        *err = malloc(n);
        if (*err)
            snprintf(*err, n, "cannot open %s for checkpoints: %s", path, why);
        sqlite3_close(w->db);
        free(w);
        return NULL;
    }
    /* Equal: no checkpoint before the first commit. A log left by a crash
     * is not fully copied (recovery starts its count at none), so it waits
     * only for that commit. */
    atomic_init(&w->commits, 0);
    atomic_init(&w->copied_at, 0);
    atomic_init(&w->pinned_until, 0);
    w->last_copied = -1;
    w->writer = writer;
    w->commit_mu = commit_mu;
    w->hold = hold;
    atomic_init(&w->hook_us, 0);
    w->threshold = threshold_frames;
    w->limit = 4 * threshold_frames;
    w->hard_limit = 64 * threshold_frames;
    pthread_mutex_init(&w->run_mu, NULL);
    pthread_mutex_init(&w->db_mu, NULL);
    pthread_mutex_init(&w->mu, NULL);
    clock_cond_init(&w->cv);
    if (pthread_create(&w->thread, NULL, wal_main, w) != 0) {
        *err = strdup("cannot start the checkpoint thread");
        sqlite3_close(w->db);
        pthread_mutex_destroy(&w->run_mu);
        pthread_mutex_destroy(&w->db_mu);
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w);
        return NULL;
    }
    pthread_mutex_lock(commit_mu);
    sqlite3_wal_hook(writer, on_commit, w);
    pthread_mutex_unlock(commit_mu);
    return w;
}

int64_t wal_take_hook_us(struct wal *w)
{
    return w ? atomic_exchange(&w->hook_us, 0) : 0;
}

void wal_stop(struct wal *w)
{
    if (!w)
        return;
    pthread_mutex_lock(w->commit_mu);
    sqlite3_wal_hook(w->writer, NULL, NULL);
    pthread_mutex_unlock(w->commit_mu);
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    sqlite3_close(w->db);
    pthread_mutex_destroy(&w->run_mu);
    pthread_mutex_destroy(&w->db_mu);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}
