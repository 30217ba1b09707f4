/* store_admin — the operator's view of an mcpd database (mcp-admin's SQL).
 *
 * mcp-admin runs next to a live mcpd, on the same file. Reading commands
 * open the database read-only (SQLITE_OPEN_READONLY: the file is never
 * created or changed, and WAL lets them read while mcpd writes); writing
 * commands open it read-write with a busy timeout and make one short
 * transaction each, so mcpd's writer never waits more than a few
 * milliseconds. Every statement binds its parameters. A database that is
 * missing, not SQLite, or of a newer schema than this build knows is
 * refused at open with a one-line message.
 *
 * Results come back as jansson values (new references, the caller
 * decrefs): arrays of objects with the column names as keys, times in
 * milliseconds since the epoch. On error they are NULL with *err set (the
 * caller frees). */
#ifndef MCPD_STORE_ADMIN_H
#define MCPD_STORE_ADMIN_H

#include <jansson.h>
#include <stdint.h>

struct store_admin;

enum store_admin_mode { STORE_ADMIN_READ, STORE_ADMIN_WRITE };

int store_admin_open(const char *path, enum store_admin_mode mode, struct store_admin **out,
                     char **err);
void store_admin_close(struct store_admin *a);

struct store_admin_sessions_filter {
    enum { SESSIONS_ACTIVE, SESSIONS_ENDED, SESSIONS_ALL } which;
    const char *principal;   /* NULL: any */
    int64_t active_since_ms; /* 0: any */
    int64_t limit;
};
json_t *store_admin_sessions(struct store_admin *a, const struct store_admin_sessions_filter *f,
                             char **err);
/* One session with its params, streams and last messages; JSON null when
 * there is no such session. */
json_t *store_admin_session(struct store_admin *a, const char *id, int last_messages, char **err);
json_t *store_admin_streams(struct store_admin *a, const char *session_id, char **err);
json_t *store_admin_chunks(struct store_admin *a, const char *stream_id, int64_t from_seq,
                           int64_t limit, char **err);

struct store_admin_logs_filter {
    int64_t after_id;    /* rows with a larger id (following); 0: from the start */
    int64_t since_ms;    /* 0: any time */
    int min_level;       /* log_level.h's order */
    const char *session; /* NULL: any */
    const char *principal;
    const char *grep; /* a substring of the event line */
    int64_t limit;    /* the newest `limit` rows, oldest first */
};
json_t *store_admin_logs(struct store_admin *a, const struct store_admin_logs_filter *f,
                         char **err);
/* Counts, sizes, requests per minute over the last hour, refusals. */
json_t *store_admin_stats(struct store_admin *a, const char *path, char **err);

json_t *store_admin_tokens(struct store_admin *a, char **err);
/* 0 added, 1 the name is taken, -1 error. */
int store_admin_token_add(struct store_admin *a, const char *name, const char *hash,
                          const char *note, int64_t expires_ms, char **err);
/* 0 revoked, 1 no such token (or already revoked), -1 error. */
int store_admin_token_revoke(struct store_admin *a, const char *name, char **err);
/* Marks the session ended, with the reason: a running mcpd's kill_watch
 * ends it within a second (its streams go as with a DELETE); a stopped one
 * never revives it, and the reaper purges it. 0, 1 no such live session,
 * -1 error. */
int store_admin_session_kill(struct store_admin *a, const char *id, const char *reason, char **err);

int store_admin_vacuum(struct store_admin *a, char **err);
/* A consistent copy of the whole database into `file` (SQLite's online
 * backup), while mcpd keeps writing. The file must not exist; it is
 * created 0600 (owner only), whatever the umask. */
int store_admin_backup(struct store_admin *a, const char *file, char **err);
/* {integrity, schema_version, latest_version, migrations:[...]} */
json_t *store_admin_check(struct store_admin *a, char **err);

#endif
