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
};

void session_free(struct session *s);

/* The client's initialize and notifications/initialized, as sent. */
int session_remember_initialize(struct session *s, const char *body, size_t len);
int session_remember_initialized(struct session *s, const char *body, size_t len);

/* A new session: its id (NULL if the server gave none). */
int session_adopt(struct session *s, const char *id);
int session_set_version(struct session *s, const char *version);

/* The remembered initialize with its id replaced by a bridge id, which is
 * written (NUL-terminated JSON, e.g. "\"mcp-bridge-reinit-3\"") into
 * id_key. Returns a malloc'd body, or NULL (nothing remembered or out of
 * memory). */
char *session_replay_initialize(struct session *s, char *id_key, size_t cap);

#endif
