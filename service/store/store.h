/* store — the only module that speaks SQL.
 *
 * One database holds sessions, their streams, the chunks (messages) of
 * each stream, and the event log: a SQLite file in WAL mode (one process),
 * or a PostgreSQL database that several mcpd processes share (see the end
 * of this header). The schema comes from the migrations embedded at build
 * time (store_migrations.h), one set per engine with the same version
 * numbers, and is brought up to date by store_open. The engines' SQL and
 * connections live behind db.h (db_sqlite.c, db_pg.c, store_sql.c).
 *
 * Writes go through a queue and a writer connection (PostgreSQL: a few
 * queues, a stream's writes always on the same one). Callers enqueue a
 * write and either return at once (touches, logs) or wait until it has been
 * committed (chunks, stream rows, session creation, deletes). A waiting
 * thread alone in the queue, with no commit running, commits the queue
 * itself; one that finds others waiting leaves it to a writer thread. A
 * caller on a fiber (an HTTP request, fiber.h) always leaves it to the
 * writer thread and parks meanwhile, so its pool thread is never held by
 * a commit.
 * Either way everything queued goes in one transaction, so many concurrent
 * appenders share one commit (group commit); on PostgreSQL the whole
 * transaction is one round trip (pipeline mode). The queue is FIFO, so a
 * stream row always lands before its chunks.
 *
 * Reads run on a second connection under a mutex (SQLite; WAL lets them
 * proceed while the writer commits) or on a bounded pool of connections
 * (PostgreSQL, MCPD_DB_READERS, default 4). With path ":memory:" both
 * roles share one connection, which gives a throwaway store for quick
 * runs and children.
 *
 * All SQL uses bound parameters. Strings returned by the read functions are
 * heap copies owned by the caller (free() them, or the *_free helper). */
#ifndef MCPD_STORE_H
#define MCPD_STORE_H

#include <stddef.h>
#include <stdint.h>

struct store;

/* Opens (creating the file and its folder if missing) and migrates. On
 * failure returns -1 and sets *err to a message the caller frees. */
int store_open(const char *path, struct store **out, char **err);
/* Commits everything still queued, stops the writer and closes. */
void store_close(struct store *st);
/* 1 when the writer is healthy and migrations are applied. */
int store_ready(struct store *st);
int store_schema_version(struct store *st);

/* How long the commit lock was held at a time (lock_hold.h): hold[i]
 * counts the holds longer than store_hold_bounds_us[i - 1] and at most
 * store_hold_bounds_us[i]; hold[STORE_HOLD_BUCKETS], those longer than the
 * last bound. */
#define STORE_HOLD_BUCKETS 9
extern const int64_t store_hold_bounds_us[STORE_HOLD_BUCKETS];

struct store_stats {
    uint64_t commits;  /* transactions committed */
    uint64_t writes;   /* writes in them */
    uint64_t failures; /* writes that failed */
    uint64_t purged;   /* sessions and streams store_purge removed */
    uint64_t hold[STORE_HOLD_BUCKETS + 1];
    uint64_t hold_sum_us;
};
void store_stats(struct store *st, struct store_stats *out);

/* Waits until every write enqueued before this call is committed.
 * Returns 0, or -1 if any write that nobody waited for (a touch, a log
 * row) failed since the last flush. */
int store_flush(struct store *st);

struct store_session {
    char *id;
    char *protocol_version;
    char *init_params; /* JSON text of the client's initialize params */
    char *log_level;
    int initialized;
    int64_t created_ms;
    int64_t last_active_ms;
    char *principal; /* the token name that created it, or NULL */
    char *transport; /* "http", "ws", "stdio" */
};
void store_session_free(struct store_session *s);

/* Inserts or replaces the row and waits for the commit. */
int store_session_put(struct store *st, const struct store_session *s);
/* Async updates. */
int store_session_set_state(struct store *st, const char *id, const char *log_level,
                            int initialized);
int store_session_touch(struct store *st, const char *id, int64_t now_ms);
/* Deletes the session's streams and chunks and leaves the session a
 * tombstone, invisible to store_session_get, until store_purge removes it
 * (with anything a racing request wrote since). Waits for the commit. */
int store_session_delete(struct store *st, const char *id, int64_t now_ms);
/* 0 found (fields filled, caller frees with store_session_free), 1 not
 * found, -1 error. */
int store_session_get(struct store *st, const char *id, struct store_session *out);
/* 1 when the session is stored and not deleted (then its log level, cap
 * bytes, and initialized are filled), 0 when not, or -1 /
 * STORE_UNAVAILABLE: one key lookup, for a process that must neither serve
 * a session another process ended a moment ago nor with a state another
 * changed. */
int store_session_live(struct store *st, const char *id, char *log_level, size_t cap,
                       int *initialized);
/* The session's request streams still active that other runs own (calls
 * running in other processes, once they wrote their first message), or
 * -1 / STORE_UNAVAILABLE. */
int64_t store_session_calls_elsewhere(struct store *st, const char *id);
/* Bytes of chunk text stored for the session, or -1. */
int64_t store_session_bytes(struct store *st, const char *id);
/* Calls cb with the last activity time of every live (not deleted)
 * session; cb must not call the store. 0, or -1 on error. */
int store_sessions_live(struct store *st, void (*cb)(void *arg, int64_t last_active_ms), void *arg);

/* What a stream's first write records about it. kind is "request" or
 * "standalone"; request_id is the JSON text of the request id, or NULL. */
struct store_stream_new {
    const char *session_id;
    const char *kind;
    const char *request_id;
    const char *owner; /* the run that writes it (a call handed to another
                        * process); NULL: this process */
};

/* Stream ids must begin with 12 lowercase hex digits of their creation
 * time in ms (randid_make_ordered makes such ids): store_purge finds old
 * streams through that prefix of their key.
 *
 * One write to a stream, committed before it returns (its statements stand
 * or fall together): the stream's row first when `create` is not NULL (a
 * stream's row is written with its first message, so a stream costs no
 * write of its own), then chunk `seq` unless seq < 0, then the stream's end
 * when end_state is not NULL ("finished", "error", ...). Returns 0;
 * STORE_STREAM_GONE, writing nothing, when the stream's row is no longer
 * there (deleted with its session, or purged); or -1 (a duplicate seq, a
 * failed write). */
#define STORE_STREAM_GONE 1
int store_stream_write(struct store *st, const char *stream_id,
                       const struct store_stream_new *create, int64_t seq, const char *msg,
                       size_t len, const char *end_state, int64_t now_ms);

/* A stream write that copies a legacy request's message onto its
 * session's standalone stream (core/relay.h) also records, in the same
 * transaction, that the first `copied` messages of the request's stream
 * (stream_id) are copied. */
struct store_relay_mark {
    const char *stream_id;
    int64_t copied;
};
int store_stream_write_relayed(struct store *st, const char *stream_id,
                               const struct store_stream_new *create, int64_t seq, const char *msg,
                               size_t len, const char *end_state, int64_t now_ms,
                               const struct store_relay_mark *mark);

struct store_stream {
    char *id;
    char *session_id;
    char *kind;
    char *request_id; /* may be NULL */
    char *state;
    int64_t ended_ms; /* 0 while active */
    char *owner;      /* the run that writes it; may be NULL */
};
void store_stream_free(struct store_stream *s);

/* 0 found, 1 not found, -1 error. Then calls chunk_cb for every chunk in
 * seq order; `msg` is only valid during the call, and chunk_cb must not call
 * the store. */
typedef void (*store_chunk_cb)(void *arg, int64_t seq, const char *msg, size_t len, int is_end);
int store_stream_get(struct store *st, const char *id, struct store_stream *out,
                     store_chunk_cb chunk_cb, void *arg);
/* The same, with only the chunks from from_seq on (a reader that has the
 * rest already). */
int store_stream_get_from(struct store *st, const char *id, int64_t from_seq,
                          struct store_stream *out, store_chunk_cb chunk_cb, void *arg);

/* Calls cb for each request stream still 'active' (i.e. in flight when the
 * previous process died), with the next free seq. */
typedef void (*store_open_stream_cb)(void *arg, const char *stream_id, const char *session_id,
                                     const char *request_id, int64_t next_seq);
int store_streams_unfinished(struct store *st, store_open_stream_cb cb, void *arg);

/* For a session of the legacy transport ('sse'), calls cb in creation
 * order for each request stream created before created_before_ms that has
 * messages the relay has not copied, with how many it has (0 when none was
 * recorded). stream_id is only valid during the call, and cb must not call
 * the store. */
typedef void (*store_relayed_cb)(void *arg, const char *stream_id, int64_t copied);
int store_streams_relayed(struct store *st, const char *session_id, int64_t created_before_ms,
                          store_relayed_cb cb, void *arg);

/* The standalone stream of a session, if any: 0 found (*id_out malloc'd),
 * 1 none, -1 error. */
int store_session_standalone(struct store *st, const char *session_id, char **id_out);

/* Async: one event-log row. session_id may be NULL. */
int store_log(struct store *st, int64_t ts_ms, const char *level, const char *session_id,
              const char *event);

/* What store_purge removes: rows older than each cutoff (wall ms). */
struct store_purge_cutoffs {
    int64_t idle_ms;      /* sessions last active before it, with their streams */
    int64_t ended_ms;     /* tombstones of sessions ended before it */
    int64_t stream_ms;    /* streams ended before it */
    int64_t log_ms;       /* log lines written before it */
    int64_t log_max_rows; /* and beyond the newest this many (0: no bound) */
};
/* A session's tombstone outlives its end by this much: a running mcpd
 * learns of a session mcp-admin killed by reading it (kill_watch looks every
 * quarter second), so a purge must not take it away first. */
#define STORE_ENDED_KEEP_MS 10000

/* Told, once a batch of ended streams is deleted, how many bytes of chunk
 * text (as store_session_bytes counts them) a session lost with them, so a
 * running mcpd can lower its count without reading the session's whole
 * history again. Sessions deleted whole are not reported. */
typedef void (*store_freed_cb)(void *arg, const char *session_id, int64_t bytes);
/* Purges what c names. It commits in short batches of a few hundred rows
 * (with their chunks), each queued behind the live writes of the moment,
 * so a large purge delays no client by more than one small transaction; it
 * returns when all are committed. freed (may be NULL) is called as above. */
int store_purge(struct store *st, const struct store_purge_cutoffs *c, store_freed_cb freed,
                void *arg);

/* Tokens: what a request's bearer token (by its SHA-256, hex) names. */
struct store_token {
    char name[64];
    int64_t expires_ms; /* 0: never */
    int64_t revoked_ms; /* 0: not revoked */
};
/* 0 found, 1 unknown, -1 error. */
int store_token_lookup(struct store *st, const char *hash, struct store_token *out);
/* A server secret by name: stores `candidate` (text) unless one exists,
 * then copies the stored value into out (cap bytes). 0, or -1. */
int store_secret(struct store *st, const char *name, const char *candidate, int64_t now_ms,
                 char *out, size_t cap);

enum store_token_create_result {
    STORE_TOKEN_CREATED,    /* there was no token of that name: it was added */
    STORE_TOKEN_EXISTS,     /* the token of that name has this hash already */
    STORE_TOKEN_REVOKED,    /* the token of that name is revoked (whatever its hash) */
    STORE_TOKEN_OTHER_HASH, /* the token of that name has another hash */
    STORE_TOKEN_HASH_TAKEN, /* no token of that name, and this hash is another's */
};
/* Adds the token `name` with this hash when no token of that name exists,
 * and says in *out what it found; it never changes a token that exists (a
 * revoked one stays revoked). Waits for the commit. 0, or -1 on error. */
int store_token_create(struct store *st, const char *name, const char *hash, const char *note,
                       int64_t now_ms, enum store_token_create_result *out);
/* Async: the token was used at now_ms. */
int store_token_used(struct store *st, const char *name, int64_t now_ms);
/* Calls cb with the name of each token revoked at or after since_ms; cb
 * must not call the store. 0, or -1 on error. */
int store_tokens_revoked_since(struct store *st, int64_t since_ms,
                               void (*cb)(void *arg, const char *name), void *arg);
/* Calls cb for each session an operator ended (mcp-admin session kill) at
 * or after since_ms, and each live session of a token revoked since then;
 * cb must not call the store. 0, or -1 on error. */
int store_sessions_ended_by_operator(struct store *st, int64_t since_ms,
                                     void (*cb)(void *arg, const char *id, const char *why),
                                     void *arg);

/* The uses of 2026-07-28 requestStates (request_state.h), by each state's
 * nonce. A row says which claim holds the state (claim, by the process
 * `run`), with which inputResponses (answers, a digest), until when it
 * matters (expires_ms), and once done the result the request answered
 * with (outcome, NULL when not kept). Strings are heap copies in what the
 * store returns, borrowed in what it is given. */
struct store_state_use {
    char *nonce, *claim, *run, *answers, *outcome;
    int64_t expires_ms;
    int done;
};
/* Claims u's state unless it is done or claimed by this run (u->run),
 * removing expired uses first; waits for the commit, then *out is the
 * state's row as it stands: u's claim when it won. 0, or -1 on error. */
int store_state_use_claim(struct store *st, const struct store_state_use *u, int64_t now_ms,
                          struct store_state_use *out);
/* Async, in order with the writes after it: the claim's request answered
 * with outcome (NULL: not kept), or ended without an answer (release: the
 * state may be used again). */
int store_state_use_done(struct store *st, const char *nonce, const char *claim,
                         const char *outcome);
int store_state_use_release(struct store *st, const char *nonce, const char *claim);
void store_state_use_free(struct store_state_use *u);

/* Spends a DPoP proof (its use: dpop.h) until expires_ms (wall clock),
 * when it can no longer be valid; store_purge forgets it after. Waits for
 * the commit. 1 the first time, 0 when it was spent before (by any
 * process on the store, or before a restart); -1 on error, or
 * STORE_UNAVAILABLE while the database cannot be reached. */
int store_dpop_use(struct store *st, const char *proof, int64_t expires_ms);

/* Copies the WAL into the database file and lets the next commit start it
 * over (wal.h: the writer waits only for the frames of the last moment).
 * The store also does this by itself whenever the log grows past a few
 * MB; calling it periodically keeps a quiet store's log small too.
 * 0, 1 when there was nothing to copy, 2 when a reader holding an old
 * snapshot kept it from copying, -1 on error. */
int store_checkpoint(struct store *st);

/* ---- More than one process on one store (PostgreSQL, issue 30) ----
 *
 * store_open takes a path (SQLite, one process) or a libpq connection
 * string ("postgres://..." or "postgresql://...", PostgreSQL, any number of
 * mcpd processes: "replicas"). Each process names itself with a run id
 * (store_set_run before anything else), which the store writes beside what
 * the process owns. */
enum store_backend { STORE_SQLITE, STORE_POSTGRES };
enum store_backend store_backend_of(struct store *st);
/* 1 when `path` names a PostgreSQL database (a libpq URL or key=value
 * string). */
int store_path_is_postgres(const char *path);
/* The run id (borrowed, copied) of this process: streams it creates are
 * owned by it, its node row carries it. Call once, before any write. */
void store_set_run(struct store *st, const char *run);

/* A store call that failed because the database cannot be reached returns
 * STORE_UNAVAILABLE (instead of -1) and does so at once while the store is
 * reconnecting, so a request gets 503 + Retry-After, never a hang. */
#define STORE_UNAVAILABLE (-2)

/* Signals: a short message to every other process on the store
 * (PostgreSQL LISTEN/NOTIFY; with SQLite, where one process runs, nothing
 * is sent). A process never receives its own signals. `kind` is one of
 * the letters below; key and extra are short printable ASCII without
 * spaces (ids, numbers), extra may be NULL.
 *
 *  STORE_SIGNAL_STREAM  key stream id, extra the next seq ("e" appended
 *                       when it ended): sent by the store itself in the
 *                       transaction of every stream write that adds a
 *                       chunk or ends a stream, so it arrives after the
 *                       commit.
 *  STORE_SIGNAL_SESSION key session id: its row changed (state, delete).
 *  STORE_SIGNAL_INBOX   key session id, extra "<inbox id>": a message
 *                       for whichever process holds that session's call.
 *  STORE_SIGNAL_NODE    key run id: a process started or stopped.
 *  STORE_SIGNAL_PROBE   key session id: another process wants the session's
 *                       GET stream; its holder checks its client is alive.
 *  STORE_SIGNAL_LIST    key "tools", "prompts"...: a list changed.
 *  STORE_SIGNAL_RESOURCE key the hex of a resource's URI: it changed.
 *
 * The callback runs on the store's listener thread; it must be quick and
 * must not call the store. After the listener reconnects (signals may have
 * been lost meanwhile) it is called once with kind STORE_SIGNAL_RESYNC and
 * key "" so that callers re-read what they follow. */
#define STORE_SIGNAL_STREAM 's'
#define STORE_SIGNAL_SESSION 'e'
#define STORE_SIGNAL_INBOX 'i'
#define STORE_SIGNAL_NODE 'n'
#define STORE_SIGNAL_PROBE 'p'
#define STORE_SIGNAL_LIST 'l'
#define STORE_SIGNAL_RESOURCE 'u'
#define STORE_SIGNAL_RESYNC 'r'
typedef void (*store_signal_cb)(void *arg, char kind, const char *key, const char *extra);
void store_signal_listen(struct store *st, store_signal_cb cb, void *arg);
/* Async, sent with the commit of the writes queued before it. */
int store_signal(struct store *st, char kind, const char *key, const char *extra);

/* The inbox: client messages that must reach the process running a call
 * of their session (a response to a server->client request, a
 * notifications/cancelled) when they arrive at another process.
 * store_inbox_put commits the row and signals STORE_SIGNAL_INBOX with its
 * id; store_inbox_take deletes and returns it (0 taken, *msg malloc'd;
 * 1 taken already by another process or gone; -1 / STORE_UNAVAILABLE).
 * Rows nobody takes are purged after STORE_INBOX_KEEP_MS. */
#define STORE_INBOX_KEEP_MS 60000
int store_inbox_put(struct store *st, const char *session_id, const char *msg, size_t len,
                    int64_t now_ms, int64_t *id_out);
int store_inbox_take(struct store *st, int64_t id, char **msg, size_t *len);

/* Nodes (processes) and leases. Every process beats: store_node_beat
 * writes its row (run id, now, how many calls it runs) every second or so;
 * a process whose beat is older than the lease is dead, and what it owned
 * (streams still active, sessions of an upstream child) may be taken over.
 * store_node_gone removes this process's row at a clean stop. */
int store_node_beat(struct store *st, int64_t now_ms, int64_t inflight);
int store_node_gone(struct store *st);
/* Calls cb for every node whose beat is at or after alive_since_ms. */
int store_nodes_alive(struct store *st, int64_t alive_since_ms,
                      void (*cb)(void *arg, const char *run, int64_t beat_ms, int64_t inflight),
                      void *arg);
/* 1 when this process holds the store's leader lock (taking it if free),
 * 0 when another does, or an error: background work that must run once
 * (the reaper) runs only on the leader. Always 1 on SQLite. The lock goes
 * with the process (PostgreSQL session-level advisory lock). */
int store_leader(struct store *st);
/* Live sessions counted across every process: all (principal NULL) or one
 * principal's. -1 / STORE_UNAVAILABLE on error. */
int64_t store_sessions_count(struct store *st, const char *principal);

/* Streams carry their owner (the run id of the process that writes them).
 * store_streams_orphaned is store_streams_unfinished for a shared store:
 * the unfinished request streams whose owner is not this run and has no
 * beat at or after alive_since_ms. (On SQLite, any other run.) */
int store_streams_orphaned(struct store *st, int64_t alive_since_ms, store_open_stream_cb cb,
                           void *arg);
/* Session ownership, for process-bound state (an upstream child): claims
 * the session for this run when it has no owner, or its owner has no beat
 * at or after alive_since_ms. 0 and *owner_out (malloc'd) the owner after
 * the claim: this run when it won. */
int store_session_claim(struct store *st, const char *session_id, int64_t alive_since_ms,
                        char **owner_out);
/* The standalone GET stream of a session is read by one connection in the
 * whole deployment: claims it for this run until lease_until_ms (renewed
 * by calling again), unless another live run holds an unexpired claim.
 * 0 claimed, 1 held elsewhere. store_standalone_release drops this run's
 * claim. */
int store_standalone_claim(struct store *st, const char *session_id, int64_t now_ms,
                           int64_t lease_until_ms);
int store_standalone_release(struct store *st, const char *session_id);

#endif
