/* store_sql — see store_sql.h. */
#include "store_sql.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A chunk's size as a session's storage cap counts it: the message's
 * bytes, not its characters. */
#define CHUNK_BYTES_SQLITE "LENGTH(CAST(c.message AS BLOB))"
#define CHUNK_BYTES_PG "octet_length(c.message)"

/* The next free seq of stream s. */
#define NEXT_SEQ "COALESCE((SELECT MAX(seq) + 1 FROM chunks c WHERE c.stream_id = s.id), 0)"

static const char *const sqlite_sql[SQL_COUNT] = {
    [W_SESSION_PUT] = "INSERT OR REPLACE INTO sessions(id, protocol_version, init_params, "
                      "log_level, initialized, created_ms, last_active_ms, principal, transport) "
                      "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [W_SESSION_STATE] = "UPDATE sessions SET log_level = ?2, initialized = ?3 WHERE id = ?1",
    [W_SESSION_TOUCH] =
        "UPDATE sessions SET last_active_ms = MAX(last_active_ms, ?2) WHERE id = ?1",
    [W_SESSION_DELETE] = "UPDATE sessions SET deleted_ms = ?2 WHERE id = ?1",
    [W_SESSION_STREAMS_DELETE] = "DELETE FROM streams WHERE session_id = ?1",
    /* A stream write binds one vector to all three of these: ?1 stream id,
     * ?2 seq, ?3 message, ?4 is_end, ?5 now, ?6 session id, ?7 kind, ?8
     * request id, ?9 end state (NULL while the stream goes on), ?12 the
     * writer's run (the stream's owner). */
    [W_ROW] = "INSERT INTO streams(id, session_id, kind, request_id, state, created_ms, ended_ms, "
              "owner) VALUES(?1, ?6, ?7, ?8, COALESCE(?9, 'active'), ?5, "
              "CASE WHEN ?9 IS NULL THEN NULL ELSE ?5 END, ?12)",
    [W_CHUNK] = "INSERT INTO chunks(stream_id, seq, message, is_end, created_ms) "
                "VALUES(?1, ?2, ?3, ?4, ?5)",
    [W_END] = "UPDATE streams SET state = ?9, ended_ms = ?5 WHERE id = ?1",
    /* The statements of one stream write stand or fall together: when the
     * second fails, these take back the first (see op_run). */
    [W_UNDO_ROW] = "DELETE FROM streams WHERE id = ?1",
    [W_UNDO_CHUNK] = "DELETE FROM chunks WHERE stream_id = ?1 AND seq = ?2",
    /* Prepared once, unlike sqlite3_exec's parse per commit. */
    [W_BEGIN] = "BEGIN",
    [W_COMMIT] = "COMMIT",
    [W_ROLLBACK] = "ROLLBACK",
    [W_LOG] = "INSERT INTO logs(ts_ms, level, session_id, event) VALUES(?1, ?2, ?3, ?4)",
    /* The purges delete one key range [?2, ?3] that a read found (see
     * store_purge), checking the condition again: a row in the range that
     * no longer qualifies stays. Their streams and chunks go by cascade. */
    [W_PURGE_IDLE_SESSIONS] = "DELETE FROM sessions WHERE id >= ?2 AND id <= ?3 "
                              "AND last_active_ms < ?1",
    /* Tombstones are few among many live rows: found by their index. */
    [W_PURGE_TOMBSTONES] = "DELETE FROM sessions INDEXED BY sessions_by_deleted "
                           "WHERE id >= ?2 AND id <= ?3 AND deleted_ms < ?1",
    [W_PURGE_STREAMS] = "DELETE FROM streams WHERE id >= ?2 AND id <= ?3 "
                        "AND ended_ms IS NOT NULL AND ended_ms < ?1",
    /* Log ids grow by one per row and rows go only from the oldest end, so
     * the newest ?2 rows are those above max(id) - ?2. */
    [W_PURGE_LOGS] = "DELETE FROM logs WHERE ts_ms < ?1 OR id <= (SELECT max(id) FROM logs) - ?2",
    [W_TOKEN_USED] = "UPDATE tokens SET last_used_ms = MAX(COALESCE(last_used_ms, 0), ?2) "
                     "WHERE name = ?1",
    /* Never changes a token that exists, of this name or with this hash:
     * see store_token_create. */
    [W_TOKEN_CREATE] = "INSERT INTO tokens(name, hash, note, created_ms) VALUES(?1, ?2, ?3, ?4) "
                       "ON CONFLICT DO NOTHING",
    [W_SECRET_PUT] = "INSERT INTO secrets(name, value, created_ms) VALUES(?1, ?2, ?3) "
                     "ON CONFLICT(name) DO NOTHING",
    /* With a stream write that copies a legacy request's message (?10, the
     * request's stream; ?11, how many of its messages are copied now): in
     * the same transaction as the copy, so that a restart neither repeats
     * nor loses one. Never backwards. */
    [W_RELAY_MARK] = "UPDATE streams SET relayed = MAX(COALESCE(relayed, 0), ?11) WHERE id = ?10",
    [W_STATE_USE_PURGE] = "DELETE FROM request_state_uses WHERE expires_ms < ?1",
    /* A state nobody has claimed is claimed; so is one whose claim a
     * previous run left unfinished (that process died with the request). */
    [W_STATE_USE_CLAIM] = "INSERT INTO request_state_uses(nonce, claim, run, answers, expires_ms) "
                          "VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(nonce) DO UPDATE SET "
                          "claim = excluded.claim, run = excluded.run, answers = excluded.answers "
                          "WHERE request_state_uses.done = 0 AND "
                          "request_state_uses.run <> excluded.run",
    [W_STATE_USE_DONE] = "UPDATE request_state_uses SET done = 1, outcome = ?3 "
                         "WHERE nonce = ?1 AND claim = ?2",
    [W_STATE_USE_RELEASE] = "DELETE FROM request_state_uses "
                            "WHERE nonce = ?1 AND claim = ?2 AND done = 0",
    /* A proof already spent changes nothing: its use is refused. */
    [W_DPOP_USE] = "INSERT INTO dpop_uses(proof, expires_ms) VALUES(?1, ?2) "
                   "ON CONFLICT(proof) DO NOTHING",
    /* W_NOTIFY: one process, no signals. ?4: the run, for the signal. */
    [W_INBOX_PUT] = "INSERT INTO inbox(session_id, message, created_ms) VALUES(?1, ?2, ?3) "
                    "RETURNING id",
    [W_NODE_BEAT] = "INSERT INTO nodes(run, started_ms, beat_ms, inflight) VALUES(?1, ?2, ?2, ?3) "
                    "ON CONFLICT(run) DO UPDATE SET beat_ms = excluded.beat_ms, "
                    "inflight = excluded.inflight",
    [W_NODE_GONE] = "DELETE FROM nodes WHERE run = ?1",
    /* ?2 this run, ?3 the oldest beat of a live owner. */
    [W_SESSION_CLAIM] = "UPDATE sessions SET owner = ?2 WHERE id = ?1 AND deleted_ms IS NULL AND "
                        "(owner IS NULL OR owner = ?2 OR NOT EXISTS (SELECT 1 FROM nodes n "
                        "WHERE n.run = sessions.owner AND n.beat_ms >= ?3))",
    /* ?2 this run, ?3 now, ?4 the lease's end: changes one row when won. */
    [W_STANDALONE_CLAIM] = "INSERT INTO standalone_claims(session_id, run, until_ms) "
                           "VALUES(?1, ?2, ?4) ON CONFLICT(session_id) DO UPDATE SET "
                           "run = excluded.run, until_ms = excluded.until_ms "
                           "WHERE standalone_claims.run = excluded.run OR "
                           "standalone_claims.until_ms < ?3",
    [W_STANDALONE_RELEASE] = "DELETE FROM standalone_claims WHERE session_id = ?1 AND run = ?2",
    [W_PURGE_INBOX] = "DELETE FROM inbox WHERE created_ms < ?1",
    [W_PURGE_NODES] = "DELETE FROM nodes WHERE beat_ms < ?1",
    [W_PURGE_CLAIMS] = "DELETE FROM standalone_claims WHERE until_ms < ?1",
    [W_PURGE_DPOP_USES] = "DELETE FROM dpop_uses WHERE expires_ms < ?1",

    [R_SESSION_GET] = "SELECT id, protocol_version, init_params, log_level, initialized, "
                      "created_ms, last_active_ms, principal, transport FROM sessions "
                      "WHERE id = ?1 AND deleted_ms IS NULL",
    [R_SESSION_BYTES] = "SELECT COALESCE(SUM(" CHUNK_BYTES_SQLITE "), 0) FROM chunks c "
                        "JOIN streams s ON s.id = c.stream_id WHERE s.session_id = ?1",
    [R_SESSIONS_LIVE] = "SELECT last_active_ms FROM sessions WHERE deleted_ms IS NULL",
    [R_STREAM_ROW] = "SELECT id, session_id, kind, request_id, state, COALESCE(ended_ms, 0), "
                     "owner FROM streams WHERE id = ?1",
    [R_STREAM_CHUNKS] = "SELECT seq, message, is_end FROM chunks WHERE stream_id = ?1 "
                        "AND seq >= ?2 ORDER BY seq",
    [R_UNFINISHED] = "SELECT s.id, s.session_id, s.request_id, " NEXT_SEQ " FROM streams s "
                     "WHERE s.kind = 'request' AND s.state = 'active'",
    [R_RELAYED] = "SELECT s.id, COALESCE(s.relayed, 0) FROM streams s "
                  "JOIN sessions e ON e.id = s.session_id "
                  "WHERE s.session_id = ?1 AND s.kind = 'request' AND "
                  "s.created_ms < ?2 AND e.transport = 'sse' AND "
                  "(SELECT COUNT(*) FROM chunks c WHERE c.stream_id = s.id) > "
                  "COALESCE(s.relayed, 0) ORDER BY s.id",
    [R_STANDALONE] = "SELECT id FROM streams WHERE session_id = ?1 AND "
                     "kind = 'standalone' ORDER BY created_ms LIMIT 1",
    [R_TOKEN_LOOKUP] = "SELECT name, expires_ms, revoked_ms FROM tokens WHERE hash = ?1",
    [R_TOKENS_REVOKED] = "SELECT name FROM tokens WHERE revoked_ms >= ?1",
    /* Killed by mcp-admin, or belonging to a token revoked since. */
    [R_ENDED_BY_OPERATOR] =
        "SELECT id, kill_reason FROM sessions WHERE deleted_ms >= ?1 AND kill_reason IS NOT "
        "NULL UNION ALL SELECT s.id, 'token ' || t.name || ' revoked' FROM sessions s "
        "JOIN tokens t ON t.name = s.principal WHERE t.revoked_ms >= ?1 AND s.deleted_ms IS "
        "NULL",
    [R_SECRET] = "SELECT value FROM secrets WHERE name = ?1",
    [R_TOKEN_STATE] = "SELECT hash, revoked_ms FROM tokens WHERE name = ?1",
    [R_STATE_USE] = "SELECT claim, run, answers, done, outcome FROM request_state_uses "
                    "WHERE nonce = ?1",
    /* The next key range of rows to purge (store.c's purge_range): ?1
     * cutoff, ?2 after, ?3 limit, ?4 an upper bound. */
    [R_PURGE_IDLE] = "SELECT id FROM sessions WHERE id > ?2 AND last_active_ms < ?1 "
                     "ORDER BY id LIMIT ?3",
    [R_PURGE_TOMBSTONES] = "SELECT id FROM sessions INDEXED BY sessions_by_deleted WHERE id > ?2 "
                           "AND deleted_ms < ?1 ORDER BY id LIMIT ?3",
    [R_PURGE_STREAMS] = "SELECT s.id, s.session_id, (SELECT SUM(" CHUNK_BYTES_SQLITE
                        ") FROM chunks c WHERE c.stream_id = s.id) FROM streams s "
                        "WHERE s.id > ?2 AND s.id < ?4 AND s.ended_ms IS NOT NULL "
                        "AND s.ended_ms < ?1 ORDER BY s.id LIMIT ?3",
    /* A delete that returns what it took: one taker wins. */
    [R_INBOX_TAKE] = "DELETE FROM inbox WHERE id = ?1 RETURNING message",
    [R_NODES_ALIVE] = "SELECT run, beat_ms, inflight FROM nodes WHERE beat_ms >= ?1 ORDER BY run",
    [R_SESSIONS_COUNT] = "SELECT COUNT(*) FROM sessions WHERE deleted_ms IS NULL AND "
                         "(?1 IS NULL OR principal = ?1)",
    /* ?1 this run, ?2 the oldest beat of a live owner. */
    [R_ORPHANED] = "SELECT s.id, s.session_id, s.request_id, " NEXT_SEQ " FROM streams s "
                   "WHERE s.kind = 'request' AND s.state = 'active' AND "
                   "(s.owner IS NULL OR s.owner <> ?1) AND NOT EXISTS (SELECT 1 FROM nodes n "
                   "WHERE n.run = s.owner AND n.beat_ms >= ?2)",
    [R_SESSION_OWNER] = "SELECT owner FROM sessions WHERE id = ?1",
    [R_SESSION_LIVE] = "SELECT log_level, initialized FROM sessions WHERE id = ?1 AND "
                       "deleted_ms IS NULL",
    [R_SESSION_CALLS_ELSEWHERE] = "SELECT COUNT(*) FROM streams WHERE session_id = ?1 AND "
                                  "kind = 'request' AND state = 'active' AND owner IS NOT ?2",
    /* One process: always the leader. */
    [R_LEADER] = "SELECT 1",
    [R_RUN_LOCK] = "SELECT 1",
    [R_PING] = "SELECT 1",
};

/* Where PostgreSQL's dialect differs (the rest: sqlite_sql with $N). */
static const char *const pg_only[SQL_COUNT] = {
    /* A live owner: mcpd_run_alive (migrations/postgres/0009). */
    [W_SESSION_CLAIM] = "UPDATE sessions SET owner = $2 WHERE id = $1 AND deleted_ms IS NULL AND "
                        "(owner IS NULL OR owner = $2 OR NOT mcpd_run_alive(owner, $3))",
    [R_ORPHANED] = "SELECT s.id, s.session_id, s.request_id, " NEXT_SEQ " FROM streams s "
                   "WHERE s.kind = 'request' AND s.state = 'active' AND "
                   "(s.owner IS NULL OR s.owner <> $1) AND "
                   "(s.owner IS NULL OR NOT mcpd_run_alive(s.owner, $2))",
    [R_NODES_ALIVE] = "SELECT run, beat_ms, inflight FROM nodes WHERE mcpd_run_alive(run, $1) "
                      "ORDER BY run",
    /* A previous run's claim is taken over only once that process is dead
     * (another replica may be running the request). */
    [W_STATE_USE_CLAIM] = "INSERT INTO request_state_uses(nonce, claim, run, answers, expires_ms) "
                          "VALUES($1, $2, $3, $4, $5) ON CONFLICT(nonce) DO UPDATE SET "
                          "claim = excluded.claim, run = excluded.run, answers = excluded.answers "
                          "WHERE request_state_uses.done = 0 AND "
                          "request_state_uses.run <> excluded.run AND "
                          "NOT mcpd_run_alive(request_state_uses.run, 0)",
    /* A stream's first write with its first message: one statement, one
     * round of parse/bind/execute in the pipeline instead of two. */
    [W_ROW_CHUNK] = "WITH r AS (INSERT INTO streams(id, session_id, kind, request_id, state, "
                    "created_ms, ended_ms, owner) VALUES($1, $6, $7, $8, COALESCE($9::text, "
                    "'active'), $5::bigint, CASE WHEN $9::text IS NULL THEN NULL ELSE "
                    "$5::bigint END, $12) RETURNING id) INSERT INTO chunks(stream_id, seq, "
                    "message, is_end, created_ms) SELECT r.id, $2::bigint, $3::text, "
                    "$4::integer, $5::bigint FROM r",
    /* Many streams, each with its first message, in one statement (store.c's
     * pg_run; the columns are arrays, pg_array.h): a chunk is inserted only
     * with its stream's row (the join on r), which the chunk's foreign key
     * needs. */
    [W_ROW_CHUNK_MANY] =
        "WITH u AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::integer[], "
        "$5::bigint[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[]) AS "
        "u(id, seq, message, is_end, created_ms, session_id, kind, request_id, state, owner)), "
        "r AS (INSERT INTO streams(id, session_id, kind, request_id, state, created_ms, ended_ms, "
        "owner) SELECT id, session_id, kind, request_id, COALESCE(state, 'active'), created_ms, "
        "CASE WHEN state IS NULL THEN NULL ELSE created_ms END, owner FROM u RETURNING id) "
        "INSERT INTO chunks(stream_id, seq, message, is_end, created_ms) SELECT u.id, u.seq, "
        "u.message, u.is_end, u.created_ms FROM u JOIN r ON r.id = u.id",
    /* Every log line of a group commit in one statement (pg_array.h): a
     * request's log line would otherwise cost PostgreSQL as much as its
     * reply. */
    [W_LOG_MANY] = "INSERT INTO logs(ts_ms, level, session_id, event) SELECT * FROM "
                   "unnest($1::bigint[], $2::text[], $3::text[], $4::text[])",
    /* A dead holder's claim (its process gone) yields at once. */
    [W_STANDALONE_CLAIM] = "INSERT INTO standalone_claims(session_id, run, until_ms) "
                           "VALUES($1, $2, $4) ON CONFLICT(session_id) DO UPDATE SET "
                           "run = excluded.run, until_ms = excluded.until_ms "
                           "WHERE standalone_claims.run = excluded.run OR "
                           "standalone_claims.until_ms < $3 OR "
                           "NOT mcpd_run_alive(standalone_claims.run, 0)",
    /* This process's run lock, held for its life (see mcpd_run_alive). */
    [R_RUN_LOCK] = "SELECT pg_try_advisory_lock(1835233380, hashtext($1))::integer",
    [R_SESSION_CALLS_ELSEWHERE] = "SELECT COUNT(*) FROM streams WHERE session_id = $1 AND "
                                  "kind = 'request' AND state = 'active' AND "
                                  "owner IS DISTINCT FROM $2",
    /* The row as a new one: what INSERT OR REPLACE leaves. */
    [W_SESSION_PUT] = "INSERT INTO sessions(id, protocol_version, init_params, log_level, "
                      "initialized, created_ms, last_active_ms, principal, transport) "
                      "VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT(id) DO UPDATE SET "
                      "protocol_version = excluded.protocol_version, init_params = "
                      "excluded.init_params, log_level = excluded.log_level, initialized = "
                      "excluded.initialized, created_ms = excluded.created_ms, last_active_ms = "
                      "excluded.last_active_ms, principal = excluded.principal, transport = "
                      "excluded.transport, deleted_ms = NULL, kill_reason = NULL, owner = NULL",
    [W_SESSION_TOUCH] =
        "UPDATE sessions SET last_active_ms = GREATEST(last_active_ms, $2) WHERE id = $1",
    [W_ROW] = "INSERT INTO streams(id, session_id, kind, request_id, state, created_ms, ended_ms, "
              "owner) VALUES($1, $6, $7, $8, COALESCE($9::text, 'active'), $5::bigint, "
              "CASE WHEN $9::text IS NULL THEN NULL ELSE $5::bigint END, $12)",
    /* A failed statement aborts a PostgreSQL transaction, and a pipelined
     * batch with it: a chunk whose stream is gone inserts nothing instead
     * (store.c's commit_pg reads that as STORE_STREAM_GONE). */
    [W_CHUNK] = "INSERT INTO chunks(stream_id, seq, message, is_end, created_ms) "
                "SELECT $1::text, $2::bigint, $3::text, $4::integer, $5::bigint "
                "WHERE EXISTS (SELECT 1 FROM streams WHERE id = $1::text)",
    [W_PURGE_TOMBSTONES] = "DELETE FROM sessions WHERE id >= $2 AND id <= $3 AND deleted_ms < $1",
    [W_TOKEN_USED] = "UPDATE tokens SET last_used_ms = GREATEST(COALESCE(last_used_ms, 0), $2) "
                     "WHERE name = $1",
    [W_RELAY_MARK] =
        "UPDATE streams SET relayed = GREATEST(COALESCE(relayed, 0), $11) WHERE id = $10",
    [W_NOTIFY] = "SELECT pg_notify('" STORE_SQL_CHANNEL "', $1)",
    [W_INBOX_PUT] = "WITH r AS (INSERT INTO inbox(session_id, message, created_ms) "
                    "VALUES($1, $2, $3) RETURNING id) SELECT id, pg_notify('" STORE_SQL_CHANNEL
                    "', 'i ' || $4::text || ' ' || $1::text || ' ' || id) FROM r",
    [R_SESSION_BYTES] = "SELECT COALESCE(SUM(" CHUNK_BYTES_PG "), 0) FROM chunks c "
                        "JOIN streams s ON s.id = c.stream_id WHERE s.session_id = $1",
    [R_PURGE_TOMBSTONES] = "SELECT id FROM sessions WHERE id > $2 AND deleted_ms < $1 "
                           "ORDER BY id LIMIT $3",
    [R_PURGE_STREAMS] = "SELECT s.id, s.session_id, (SELECT SUM(" CHUNK_BYTES_PG
                        ") FROM chunks c WHERE c.stream_id = s.id) FROM streams s "
                        "WHERE s.id > $2 AND s.id < $4 AND s.ended_ms IS NOT NULL "
                        "AND s.ended_ms < $1 ORDER BY s.id LIMIT $3",
    [R_SESSIONS_COUNT] = "SELECT COUNT(*) FROM sessions WHERE deleted_ms IS NULL AND "
                         "($1::text IS NULL OR principal = $1::text)",
    /* Session-level: held until this connection ends. */
    [R_LEADER] = "SELECT pg_try_advisory_lock(7163102502)::integer",
};

static const char *pg_sql[SQL_COUNT];
static pthread_once_t pg_once = PTHREAD_ONCE_INIT;

/* ?N → $N. No statement holds a '?' elsewhere. The copies live as long
 * as the process (they are the table). */
static char *to_dollars(const char *s)
{
    char *d = strdup(s);
    for (char *p = d; p && *p; p++)
        if (*p == '?')
            *p = '$';
    return d;
}

static void make_pg(void)
{
    for (int k = 0; k < SQL_COUNT; k++) {
        if (pg_only[k])
            pg_sql[k] = pg_only[k];
        else if (sqlite_sql[k])
            pg_sql[k] = to_dollars(sqlite_sql[k]);
    }
}

const char *const *store_sql_table(enum db_engine e)
{
    if (e == DB_SQLITE)
        return sqlite_sql;
    pthread_once(&pg_once, make_pg);
    return pg_sql;
}
