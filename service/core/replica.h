/* replica — what lets several mcpd processes serve one deployment from one
 * shared store (PostgreSQL), so that any process serves any request of any
 * session.
 *
 * Every process is a node with a run id (replica_run). On a shared store
 * a thread here:
 *  - beats (store_node_beat) every REPLICA_BEAT_MS, so others know it lives;
 *  - takes the store's signals (store_signal_listen) off the store's
 *    listener thread and acts on them here, where calling the store is
 *    allowed: a stream another process wrote wakes its readers in this one
 *    (stream_refresh), a session another process changed or ended is
 *    taken in (hooks->session_changed), a client message that another
 *    process put in the inbox for a call here is delivered
 *    (hooks->inbox);
 *  - after signals may have been lost (the listener reconnected), and every
 *    few seconds anyway, re-reads every stream it follows;
 *  - on the leader only (store_leader: one process at a time), ends the
 *    streams of calls whose process died: those whose owner has not beaten
 *    for the lease (hooks->orphans).
 * On a store of one process (SQLite) replica_start starts nothing.
 *
 * Hooks run on the replica thread; they may call the store and the core. */
#ifndef MCPD_REPLICA_H
#define MCPD_REPLICA_H

#include <stddef.h>
#include <stdint.h>

struct store;

#define REPLICA_BEAT_MS 1000
/* Inbox targets (the extra of STORE_SIGNAL_INBOX after "<id>."): 'r' then
 * the id tag of the process awaiting a response; 'c' then the hex of the
 * request id key a notifications/cancelled names. */
#define REPLICA_TO_PROCESS 'r'
#define REPLICA_TO_CALL 'c'
/* 'f' then the id tag of the process that holds a bound session: a request
 * (with the stream to write) or notification handed over to it. */
#define REPLICA_HAND_OVER 'f'

struct replica_hooks {
    void (*session_changed)(const char *session_id);
    void (*inbox)(const char *session_id, int64_t inbox_id, const char *target);
    /* The leader's sweep: end the streams of processes dead since before
     * alive_since_ms. */
    void (*orphans)(int64_t alive_since_ms);
    /* Every beat, to renew what this process holds. */
    void (*beat)(void);
    /* Another process's backend changed a list, or a resource (its URI). */
    void (*list_changed)(const char *what);
    void (*resource_updated)(const char *uri);
    /* Another process wants this session's GET stream (its reader here). */
    void (*probe)(const char *session_id);
};

/* This process's run id: 32 hex digits, made once (static storage). */
const char *replica_run(void);
/* The short tag of the run that ends server->client request ids. */
const char *replica_tag(void);
/* 0 (also when the store is not shared: nothing to do), or -1. */
int replica_start(struct store *st, int64_t lease_ms, const struct replica_hooks *hooks);
/* Stops the thread and removes this node's row. */
void replica_stop(void);
/* 1 when the store is shared with other processes. */
int replica_shared(void);
/* Text as hex digits, for what a signal carries (no spaces): 0, or -1 when
 * out (cap bytes) cannot hold it. replica_unhex undoes it. */
int replica_hex(const char *text, char *out, size_t cap);
int replica_unhex(const char *hex, char *out, size_t cap);
/* 0 when the process of that id tag is known dead (gone from the store's
 * live processes at the last beat), else 1. */
int replica_tag_alive(const char *tag);
/* Ends the calls of every process known dead now (the hook orphans), on
 * the caller's thread: for a request that found a call whose process
 * died, rather than leave it to the leader's next beat. Safe beside the
 * leader's sweep: an end that loses the race to another is dropped. */
void replica_sweep(void);
/* Calls running here, reported with the beat. */
void replica_inflight_add(int delta);

#endif
