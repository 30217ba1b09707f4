/* translate_int — what the parts of the translation share (translate.c:
 * initialize, the probe and the client's messages; translate_calls.c: the
 * requests translated to 2026-07-28 and their input-required rounds).
 * Internal: only those files include it. */
#ifndef MCP_BRIDGE_TRANSLATE_INT_H
#define MCP_BRIDGE_TRANSLATE_INT_H

#include "translate.h"

#include <jansson.h>

#define RPC_MISSING_CAPABILITY -32021 /* 2026-07-28's code, with the capability in data */

enum translate_mode {
    T_PASS,    /* messages pass as they are */
    T_PROBING, /* the bridge's server/discover is out; the client's messages wait */
    T_ON,      /* translating */
};

/* A client request translated to 2026-07-28. Each round goes to the server
 * under its own id (a retry MUST have a new one): the client's on the first
 * round, "mcp-bridge-retry-N" after; the answer goes back under the
 * client's. */
struct treq {
    struct treq *next;
    json_t *id;      /* the client's */
    char *key;       /* its id key */
    json_t *rid;     /* the id of the round at the server */
    char *rkey;      /* its id key */
    json_t *msg;     /* as first sent to the server */
    json_t *asked;   /* questions out: {"<bridge id key>": "<inputRequests key>"} */
    json_t *answers; /* {"<inputRequests key>": result} */
    json_t *state;   /* the requestState to echo, or NULL */
    int rounds;
    int at_remote;
};

struct translate {
    struct remote *rm;
    struct remote_sink client;
    enum translate_mode mode;
    int probe_first; /* ask server/discover before sending initialize */
    int probes;      /* server/discover asked for the initialize being handled */
    int stopping;    /* translate_shutdown was called */
    int stdin_closed;
    json_t *init;        /* the client's initialize, while it is handled */
    char *init_key;      /* its id key, while it is at the server */
    json_t *init_error;  /* the server's refusal, relayed if the probe fails */
    char *probe_key;     /* the bridge's server/discover */
    char *client_probe;  /* the client's own server/discover */
    json_t *discovered;  /* a server/discover result */
    json_t *caps, *info; /* the client's, from initialize */
    char log_level[16];  /* set by logging/setLevel, "" when not */
    json_t *waiting;     /* client messages held while probing (array) */
    struct treq *reqs;
    unsigned counter; /* for bridge ids */
};

/* translate.c: one message to the client (borrowed). */
void translate_emit(struct translate *t, const json_t *m);
/* A result or an error (data stolen, may be NULL) for id. */
void translate_reply(struct translate *t, const json_t *id, json_t *result);
void translate_reply_error(struct translate *t, const json_t *id, int code, const char *message,
                           json_t *data);
/* Sends m to the server. */
void translate_send_remote(struct translate *t, json_t *m);

/* translate_calls.c */
void translate_call_start(struct translate *t, json_t *m);
/* The round of the request at the server whose id key is rkey, or NULL. */
struct treq *translate_call_at_remote(struct translate *t, const char *rkey);
/* The server's answer m to q's round. */
void translate_call_reply(struct translate *t, struct treq *q, json_t *m);
/* The client's answer m to a question; 0 when it answers none. */
int translate_call_answer(struct translate *t, json_t *m);
/* notifications/cancelled for the client's request id. */
void translate_call_cancel(struct translate *t, const json_t *id);
/* Fails, with why, every request that waits for the client. */
void translate_call_fail_held(struct translate *t, const char *why);
void translate_call_free(struct translate *t, struct treq *q);

#endif
