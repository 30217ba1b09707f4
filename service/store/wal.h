/* wal — keeps the store's write-ahead log bounded under sustained writes.
 *
 * SQLite's own auto-checkpoint runs inside a COMMIT, so every appender
 * waiting on that commit would wait for the checkpoint's copy and fsyncs
 * too. A checkpoint run beside the writer never finishes under sustained
 * load, though: frames keep arriving behind it, the log is never fully
 * copied, so SQLite never starts it over from the beginning, and the file
 * grows without bound (hundreds of MB in seconds at full rate) while ext4
 * pays for every new block.
 *
 * So a checkpoint here runs in two phases, on a connection of its own. The
 * first copies everything committed so far while the writer goes on. The
 * second takes the writer's commit lock and copies the few frames that
 * arrived meanwhile; with the log fully copied and no writer running, the
 * next commit starts the log over from its beginning, reusing its blocks.
 * A hook on the writer's connection wakes this module's thread when the log
 * passes a size, and store_checkpoint runs one on demand.
 *
 * A reader that keeps an old snapshot (a backup, sqlite3 or mcp-admin on
 * the file) stops every checkpoint at the frame it still needs. Once one
 * made no progress, none starts for a few ms at a time, so the writer is
 * not held for copies that cannot happen; when the reader lets go, the
 * thread copies the backlog beside the writer, which waits for it only
 * past a hard limit on the log.
 *
 * No checkpoint starts while the log is fully copied and no commit has
 * followed: SQLite before 3.51.3 can corrupt the database when one starts
 * just as a commit starts the log over (its WAL-reset bug). mcp-admin's
 * writes come from another process and are not counted: it never
 * checkpoints, but one of its rare writes that starts the log over at the
 * instant mcpd starts a checkpoint is still exposed on such a SQLite.
 *
 * Private to the store. */
#ifndef MCPD_STORE_WAL_H
#define MCPD_STORE_WAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>

struct wal;
struct lock_hold;

/* Opens a checkpoint connection to the database at path, hooks writer (the
 * writer's connection, only ever used under commit_mu) and starts the
 * thread that checkpoints once the log holds threshold_frames pages. The
 * second phase's holds of commit_mu are recorded in hold (which must
 * outlive this). Returns NULL and sets *err (caller frees) on failure. */
struct wal *wal_start(const char *path, sqlite3 *writer, pthread_mutex_t *commit_mu,
                      struct lock_hold *hold, int threshold_frames, char **err);
/* The microseconds the hook spent copying the log inside the last commit
 * (back-pressure, see wal.c), then 0 until it copies again; 0 for NULL.
 * Called with commit_mu held, after a commit. */
int64_t wal_take_hook_us(struct wal *w);
/* Both phases, now, on the calling thread. 0; 1 if the log was fully
 * copied and nothing has been committed since (nothing started); 2 if a
 * reader's snapshot kept it from copying the log, now or a few ms ago (the
 * second phase did not run); or -1 if a phase failed. */
int wal_checkpoint(struct wal *w);
/* Stops the thread and closes the connection; the writer's hook is removed. */
void wal_stop(struct wal *w);

#endif
