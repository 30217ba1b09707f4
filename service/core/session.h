/* session — an MCP session: what initialize negotiated, the client's
 * capabilities, its log level, its standalone stream, and the bookkeeping of
 * its in-flight requests and of the server→client requests awaiting an
 * answer.
 *
 * Sessions live in a registry backed by the store: session_create persists
 * the session before its id is handed out, and session_find loads a session
 * that is not in memory (after a restart) from the store, so a client keeps
 * its session id across restarts without initializing again. Such a revival
 * reads the session's stored bytes, which for a session near its cap is its
 * whole history: it happens outside the registry lock, one revival at a
 * time, so lookups of sessions in memory never wait for it. A session that
 * was deleted or expired is gone from both, and finding it yields NULL (the
 * transports answer 404).
 *
 * Sessions are reference counted: session_create and session_find return a
 * reference the caller releases with session_unref.
 *
 * Caps: session_create refuses a session past max_sessions live ones, and
 * initialize params longer than max_init_params bytes (as stored: compact
 * JSON). Live sessions are those in memory, those being created, and the
 * "dormant" ones a previous process left in the store that nobody has used
 * since the restart; the count is checked and reserved under the registry
 * lock, so concurrent initializes cannot overshoot it. */
#ifndef MCPD_SESSION_H
#define MCPD_SESSION_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct store;
struct session;
struct stream;

struct session_limits {
    int64_t idle_ms;           /* a session idle this long expires */
    int64_t max_bytes;         /* stored chunk bytes a session may hold */
    int64_t max_sessions;      /* live sessions at most; 0: no cap */
    int64_t max_init_params;   /* bytes of stored initialize params; 0: no cap */
    int64_t max_inflight;      /* requests in flight per session; 0: no cap */
    int64_t max_per_principal; /* live sessions per token; 0: no cap */
};

void session_registry_init(struct store *st, const struct session_limits *limits);
void session_registry_shutdown(void);

enum session_refusal {
    SESSION_FAILED = -1,           /* out of memory, or the store failed */
    SESSION_AT_CAP = -2,           /* max_sessions live sessions exist */
    SESSION_PARAMS_TOO_LARGE = -3, /* init params over max_init_params */
    SESSION_PRINCIPAL_AT_CAP = -4, /* the principal has max_per_principal */
};
/* Creates and persists a session for the negotiated revision with the
 * client's initialize params (borrowed; copied). Returns 0 with a new
 * reference in *out, or an enum session_refusal (nothing stored). */
/* Who opened a session: the principal (a token's name; NULL without
 * authentication) and the transport ("http", "ws", "stdio"). */
struct session_origin {
    const char *principal;
    const char *transport;
    /* The id the session gets, when the transport handed it out before
     * initialize (the legacy /sse endpoint event; randid_make, used once):
     * NULL for a fresh one. Refused (SESSION_FAILED) if it is not a
     * well-formed id or names a live session. */
    const char *id;
};
int session_create(const char *protocol_version, json_t *init_params,
                   const struct session_origin *origin, struct session **out);
/* A new reference to the live session with that id, or NULL. */
struct session *session_find(const char *id);
void session_ref(struct session *s);
void session_unref(struct session *s);

const char *session_id(const struct session *s);
const char *session_protocol(const struct session *s);
/* 1 if a request by `principal` (NULL: none) may use the session: the
 * same principal that created it. */
int session_belongs_to(const struct session *s, const char *principal);
/* The principal that created it ("" without authentication). Borrowed. */
const char *session_principal(const struct session *s);
/* Borrowed; valid while the reference is held. */
json_t *session_init_params(const struct session *s);
json_t *session_client_capabilities(const struct session *s);

int session_log_level(struct session *s);
void session_set_log_level(struct session *s, int level);
int session_initialized(struct session *s);
void session_set_initialized(struct session *s);
/* Records activity (requests, stream writes); persisted lazily. */
void session_touch(struct session *s);
int session_ended(struct session *s);

/* The standalone (GET) stream: a new reference, or NULL. */
struct stream *session_standalone(struct session *s);
/* One GET reader at a time: returns 0 and takes the slot, or -1 when taken
 * (the transport answers 409). */
int session_get_claim(struct session *s);
void session_get_release(struct session *s);
/* Where a fresh GET starts reading the standalone stream, and where it
 * stopped: messages sent while no GET was open are delivered by the next. */
int64_t session_get_cursor(struct session *s);
void session_set_get_cursor(struct session *s, int64_t next_seq);
/* Waits until the GET stream has written everything before next_seq, or
 * until the deadline; returns at once when no GET stream is open. Lets a
 * JSON reply follow the messages its request relayed to the GET stream. */
void session_wait_get_cursor(struct session *s, int64_t next_seq, int64_t deadline_mono_ms);

/* Storage accounting: the count is the bytes of the session's stored
 * messages. 0 if `bytes` more fit under the cap (and counts them), -1 if
 * not. */
int session_charge(struct session *s, size_t bytes);
/* Counts bytes stored past any cap: the messages that must be stored
 * anyway (the error that says the cap was reached, quick final replies). */
void session_charge_always(struct session *s, size_t bytes);
/* The reaper deleted `bytes` of the session's stored messages (with its
 * ended streams, store_freed_cb): lowers its count, without reading the
 * rest of its history. Only a session in memory is touched: one loaded
 * later counts what is stored then (a purge that lands while the session
 * is being revived may be counted by neither). A purge by mcp-admin gc,
 * from another process, is not seen either. Both leave the count high,
 * refusing sooner, never later, until the session is next loaded. */
void session_uncharge(const char *id, int64_t bytes);

/* In-flight requests by id key (jsonrpc_id_key), for cancellation and
 * duplicate-id detection. Values are opaque to the session. Tracked
 * requests and parked long-polls together count against max_inflight. */
enum session_track_rc {
    SESSION_TRACK_OK = 0,
    SESSION_TRACK_DUP = -1,   /* the key is already in flight */
    SESSION_TRACK_ENDED = -2, /* the session has ended */
    SESSION_TRACK_BUSY = -3,  /* max_inflight requests are in flight */
    SESSION_TRACK_NOMEM = -4,
};
enum session_track_rc session_track(struct session *s, const char *key, void *value);
void session_untrack(struct session *s, const char *key);
/* A long-poll parks (enter) and is answered (leave). */
enum session_track_rc session_poll_enter(struct session *s);
void session_poll_leave(struct session *s);
/* Runs fn on the tracked value under the session lock (so it cannot go
 * away meanwhile). Returns 0 if found, -1 if not. fn may be NULL: is key in
 * flight? */
int session_with_tracked(struct session *s, const char *key, void (*fn)(void *value, void *arg),
                         void *arg);
/* Runs fn on every tracked value under the session lock. */
void session_each_tracked(struct session *s, void (*fn)(void *value, void *arg), void *arg);

/* Server→client requests awaiting an answer, by the id the server chose.
 * next_request_id writes a fresh id ("mcpd-<n>-<clock>", and "-<tag>" with
 * several processes: session_registry_shared) into out. take removes and
 * returns the value, or NULL if no such request is pending. */
void session_next_request_id(struct session *s, char *out, size_t cap);
int session_pending_add(struct session *s, const char *key, void *value);
void *session_pending_take(struct session *s, const char *key);
/* The client can answer nothing more (stdio at the end of its input):
 * session_pending_add refuses from now on, and every pending value is
 * taken out and handed to fn (outside the session lock, so fn may call
 * back into the session). */
void session_client_gone(struct session *s, void (*fn)(void *arg, const char *key, void *value),
                         void *arg);
/* 1 while a server→client request with that key awaits its answer. */
int session_pending_has(struct session *s, const char *key);
/* Wall-clock ms of the last activity. */
int64_t session_last_active_ms(const struct session *s);

/* Several processes on one store (core/replica.h). After
 * session_registry_shared, the caps count every process's sessions (the
 * store's), an id not in memory is always looked up in the store (another
 * process may have created it), and the ids of server->client requests end
 * in "-<id_tag>" (this process's), so that an answer arriving at another
 * process can be sent to this one: session_request_id_tag returns the tag
 * of such an id (borrowed from it), or NULL for an id without one. */
void session_registry_shared(const char *id_tag);
const char *session_request_id_tag(const char *request_id);
/* Renews the store's claim of every GET stream open in this process (one
 * per session deployment-wide; session_get_claim takes it). */
void session_renew_get_claims(void);
/* A new reference to the session if it is in this process's memory (never
 * loads it), or NULL. */
struct session *session_find_loaded(const char *id);
/* Takes in what another process changed in the session's stored row: its
 * log level (< 0: unchanged), initialized, and its last activity. */
void session_apply_stored(struct session *s, int log_level, int initialized,
                          int64_t last_active_ms);

/* Ends the session: gone from memory and store, streams expired. The
 * caller still holds (and releases) its reference. Returns 1 when this call
 * ended it, 0 when it had ended already. */
int session_end(struct session *s);

/* Reaper: stops counting the dormant sessions idle since before cutoff
 * (store_purge deletes them). */
void session_expire_dormant(int64_t cutoff_wall_ms);
/* Reaper: calls fn with a reference to each in-memory session idle since
 * before cutoff (fn must unref). */
void session_each_idle(int64_t cutoff_wall_ms, void (*fn)(struct session *s, void *arg), void *arg);
/* Every in-memory session, each with a reference fn must release. */
void session_each(void (*fn)(struct session *s, void *arg), void *arg);
size_t session_count(void);

#endif
