/* session — what the bridge remembers about its MCP session with the
 * remote server, so that it can rebuild the session by itself.
 *
 * The client initializes once, at start; a server that restarts without
 * its store, expires the session or has it killed by an operator answers
 * 404 from then on. The bridge keeps the client's own initialize request
 * and notifications/initialized so that it can replay them (with a bridge
 * id on the initialize, whose reply the client never sees), adopt the new
 * Mcp-Session-Id, and retry what failed. The generation counts adopted
 * sessions: a 404 from a request sent under an older generation means
 * only "send it again", not "re-initialize again".
 *
 * Ownership: all strings are malloc'd and owned by the struct; session_free
 * releases them. */
#ifndef MCP_BRIDGE_SESSION_H
#define MCP_BRIDGE_SESSION_H

#include <jansson.h>
#include <stddef.h>

enum session_state {
    SESSION_NONE = 0, /* the client has not initialized yet */
    SESSION_READY,    /* requests may go out */
    SESSION_REINIT,   /* replaying initialize: requests wait */
};

struct session {
    enum session_state state;
    char *id;               /* Mcp-Session-Id, NULL for a stateless server */
    char *protocol_version; /* negotiated by initialize, sent as MCP-Protocol-Version */
    char *init_body;        /* the client's initialize request */
    char *initialized_body; /* the client's notifications/initialized */
    unsigned generation;    /* bumped whenever a session is adopted */
    unsigned reinit_count;  /* for unique bridge ids on replayed initializes */
    char reinit_key[64];    /* the replayed initialize's id key */
};

void session_free(struct session *s);

/* The client's initialize and notifications/initialized, as sent. */
int session_remember_initialize(struct session *s, const char *body, size_t len);
int session_remember_initialized(struct session *s, const char *body, size_t len);

/* 1 when v, a server's text, may go into a request header as it is: only
 * visible ASCII (what MCP allows in a session id, and a protocol revision or
 * an event id needs). A CR or LF would add headers, or a request, of the
 * server's choosing to the bridge's next request, bearer token and all. */
int session_header_safe(const char *v);

/* A new session: its id (NULL if the server gave none). An id that is not
 * session_header_safe is refused (-1, logged; the session stays as it was). */
int session_adopt(struct session *s, const char *id);
/* The revision the server chose, sent as MCP-Protocol-Version; -1 (ignored,
 * logged) when not session_header_safe. */
int session_set_version(struct session *s, const char *version);

/* Rebuilding a lost session, whatever the transport: the replayed
 * initialize goes out under a bridge id, its result is adopted, the
 * replayed notifications/initialized follows, then what waited is sent
 * again. The transport says how its messages go out and what becomes of
 * the requests that wait; the steps and the user's messages live here. */
enum session_replay {
    SESSION_REPLAY_INITIALIZE,  /* the answer comes to session_rebuild_result */
    SESSION_REPLAY_INITIALIZED, /* once it is out, the transport calls session_rebuild_end */
};

struct session_rebuild {
    void (*send)(void *ud, enum session_replay what, const char *body, size_t len);
    /* Rebuilding ended: send the waiting requests again (failure NULL), or
     * answer them with failure. */
    void (*end)(void *ud, const char *failure);
    void *ud;
    const char *host; /* host[:port], for messages */
};

/* The answer to a request that met a 404 for a session rebuilt for it
 * already. */
#define SESSION_LOST_AGAIN                                                                         \
    "mcp-bridge: the server lost the session again right after the bridge re-initialized it; "     \
    "it may be restarting in a loop (check its logs)"

/* A request sent under generation met a 404 for its session, and the
 * transport made it wait: rebuilds the session, unless that is under way,
 * or only ends (sending it again) when another request rebuilt it since. */
void session_rebuild_needed(struct session *s, const struct session_rebuild *rb,
                            unsigned generation);
/* The server forgot the session: replays the client's initialize. */
void session_rebuild_start(struct session *s, const struct session_rebuild *rb);
/* 1 when key (rpc_id_key) is the replayed initialize's id, while rebuilding. */
int session_rebuild_is_reply(const struct session *s, const char *key);
/* The server answered the replayed initialize with m, giving the session
 * new_id (NULL if none). */
void session_rebuild_result(struct session *s, const struct session_rebuild *rb, const json_t *m,
                            const char *new_id);
/* Rebuilding ended: failure NULL once notifications/initialized is out. */
void session_rebuild_end(struct session *s, const struct session_rebuild *rb, const char *failure);

#endif
