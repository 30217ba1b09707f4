/* store_sql — the text of every statement of the store, in each dialect.
 *
 * store.c names statements by these numbers; store_sql_table gives the
 * table of texts for an engine, which each connection prepares once
 * (db_prepare). A PostgreSQL text is the SQLite one with ?N turned into
 * $N, unless the dialects differ: then it is written out. NULL: the
 * statement does not exist on that engine. The tables are static. */
#ifndef MCPD_STORE_SQL_H
#define MCPD_STORE_SQL_H

#include "db.h"

enum store_sql {
    /* Writes: run by the write queue (store.c's op_run / commit_pg). */
    W_SESSION_PUT,
    W_SESSION_STATE,
    W_SESSION_TOUCH,
    W_SESSION_DELETE,
    W_SESSION_STREAMS_DELETE,
    W_ROW,
    W_CHUNK,
    W_ROW_CHUNK,      /* PostgreSQL: W_ROW and W_CHUNK in one statement */
    W_ROW_CHUNK_MANY, /* PostgreSQL: many W_ROW_CHUNKs in one statement */
    W_END,
    W_UNDO_ROW,
    W_UNDO_CHUNK,
    W_BEGIN,
    W_COMMIT,
    W_ROLLBACK,
    W_LOG,
    W_LOG_MANY, /* PostgreSQL: the log lines of a commit in one statement */
    W_PURGE_IDLE_SESSIONS,
    W_PURGE_TOMBSTONES,
    W_PURGE_STREAMS,
    W_PURGE_LOGS,
    W_TOKEN_USED,
    W_TOKEN_CREATE,
    W_SECRET_PUT,
    W_RELAY_MARK,
    W_STATE_USE_PURGE,
    W_STATE_USE_CLAIM,
    W_STATE_USE_DONE,
    W_STATE_USE_RELEASE,
    W_DPOP_USE,
    W_NOTIFY,
    W_INBOX_PUT,
    W_NODE_BEAT,
    W_NODE_GONE,
    W_SESSION_CLAIM,
    W_STANDALONE_CLAIM,
    W_STANDALONE_RELEASE,
    W_PURGE_INBOX,
    W_PURGE_NODES,
    W_PURGE_CLAIMS,
    W_PURGE_DPOP_USES,
    /* Reads (and the two writes that return rows: R_INBOX_TAKE, R_LEADER). */
    R_SESSION_GET,
    R_SESSION_BYTES,
    R_SESSIONS_LIVE,
    R_STREAM_ROW,
    R_STREAM_CHUNKS,
    R_UNFINISHED,
    R_RELAYED,
    R_STANDALONE,
    R_TOKEN_LOOKUP,
    R_TOKENS_REVOKED,
    R_ENDED_BY_OPERATOR,
    R_SECRET,
    R_TOKEN_STATE,
    R_STATE_USE,
    R_PURGE_IDLE,
    R_PURGE_TOMBSTONES,
    R_PURGE_STREAMS,
    R_INBOX_TAKE,
    R_NODES_ALIVE,
    R_SESSIONS_COUNT,
    R_ORPHANED,
    R_SESSION_OWNER,
    R_SESSION_LIVE,
    R_SESSION_CALLS_ELSEWHERE,
    R_LEADER,
    R_RUN_LOCK,
    R_PING,
    SQL_COUNT
};

/* The channel of the store's signals (LISTEN/NOTIFY). */
#define STORE_SQL_CHANNEL "mcpd"

const char *const *store_sql_table(enum db_engine e);

#endif
