/* upstream_int — what the upstream backend's files share: the structures
 * of upstream.c (a child and the requests in flight at it) and the few
 * functions upstream_mrtr.c, which holds 2026-07-28 clients' calls between
 * their rounds, needs of it. Not for anything outside the backend. */
#ifndef MCPD_UPSTREAM_INT_H
#define MCPD_UPSTREAM_INT_H

#include "fcond.h"
#include "token_bucket.h"
#include "upstream.h"
#include "upstream_catalog.h"

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

struct call;
struct child;
struct jsonrpc_msg;
struct table;
struct upstream_hold;

/* A request in flight at the child. */
struct pend {
    struct call *call; /* held until the child answers */
    char key[48];      /* jsonrpc_id_key of the id the child sees */
    char token[32];    /* the progress token the child sees, or "" when the client sent none */
    /* A 2026-07-28 client's call that asked for input and is held between
     * its rounds (upstream_mrtr.c), or NULL. */
    struct upstream_hold *hold;
};

/* One child and what it serves: one session, or (shared) several. */
struct link {
    struct upstream *up;
    char session[64]; /* per-session mode: the session; shared: "" */
    _Atomic int refs;
    pthread_mutex_t mu; /* guards everything below */
    struct fcond cv;    /* initialize answered, or the child exited */
    struct child *child;
    struct child *dead; /* exited, to be joined and freed off its own readers */
    enum { LINK_DOWN, LINK_STARTING, LINK_READY } state;
    int closed;           /* its session ended: start no child for it again */
    char last_exit[64];   /* how the last child ended, for error messages */
    int64_t closed_ms;    /* when (the tombstone is dropped a while later) */
    json_t *init_answer;  /* the child's initialize response */
    json_t *probe_answer; /* a probe link: the answer to its tools/list */
    /* Or why its initialize response could not be taken ("": none). */
    char init_invalid[256];
    struct table *pending;
    struct table *sessions; /* shared mode: the sessions using this link */
    uint64_t next_id;
    int relays;      /* the child's requests waiting for the client */
    int held;        /* per-session: a held call took it over from its session */
    uint64_t starts; /* children started: a held call resumes on its own child only */
    int64_t used_ms; /* monotonic: the last request or notification sent to it */
    /* How often the child may make mcpd log (stderr lines, bad messages):
     * its own lock, since those come from the reader fibers. */
    pthread_mutex_t log_mu;
    struct token_bucket log_budget;
};

struct upstream {
    struct upstream_config cfg;
    char **argv, **env; /* owned copies */
    char *cwd;
    pthread_mutex_t mu;
    struct table *links; /* per-session: session id → link */
    struct link **pool;  /* shared mode */
    /* Children running or being started: a slot is taken before a spawn
     * and given back when the child has exited, so the cap holds under
     * concurrent starts. */
    _Atomic int slots;
    _Atomic int64_t swept_ms; /* when idle children were last looked for */
    /* What children said of themselves, for requests without a session. */
    struct upstream_catalog *catalog;
    /* One probe at a time; guards probed_ms. An fmutex: the probe waits for
     * its child, and a request on a fiber that wants it parks meanwhile. */
    struct fmutex probe_mu;
    int64_t probed_ms; /* when the last probe ended (monotonic), or 0 */
    /* Held calls of 2026-07-28 clients (upstream_mrtr.c): id → hold. */
    pthread_mutex_t hold_mu;
    struct table *holds;
    int retiring; /* threads stopping held calls' children (hold_mu) */
    pthread_cond_t retired;
};

/* References on a link; the last one frees it. */
void upstream_link_ref(struct link *l);
void upstream_link_unref(struct link *l);
/* Sends msg (stolen) to the link's child: 0, or -1 when none runs. */
int upstream_send(struct link *l, json_t *msg);
/* 1 for a call of a 2026-07-28 client. */
int upstream_stateless_call(struct call *c);
/* Sends call c to the link's child as a new request (params: what the
 * child sees, stolen; NULL: the call's own), tied to hold (may be NULL).
 * Ends the call with an error when it cannot be sent. */
void upstream_forward(struct link *l, struct call *c, json_t *params, struct upstream_hold *hold);
/* Ends the link's child now (waiting up to its stop grace) and marks the
 * link closed; takes over the caller's reference. Not from the link's own
 * reader (a fiber on the event loop). */
void upstream_link_stop(struct link *l);
/* Ends the link's child, from any thread, off the caller's (a reader
 * may not stop its own child): for a held call's link that no
 * session uses. Takes over the caller's reference. */
void upstream_link_retire(struct link *l);

/* ---- upstream_mrtr.c ---- */

/* A 2026-07-28 call's result from the child (borrowed): 1 when it asks for
 * input and was answered here (the call is held, p ended), else 0. */
int upstream_mrtr_result(struct link *l, struct pend *p, json_t *result);
/* A request of the child's (m) on a link whose only call is a 2026-07-28
 * client's: 1 when handled here (turned into an input-required result, or
 * the call refused -32021), else 0. */
int upstream_mrtr_request(struct link *l, const struct jsonrpc_msg *m);
/* A 2026-07-28 call that presents a requestState: 1 when handled here
 * (resumed, or refused), else 0. */
int upstream_mrtr_resume(struct upstream *up, struct call *c);
/* A held call's pend ended (answered, failed, its child exited): the hold
 * is let go. */
void upstream_mrtr_release(struct upstream_hold *h);
/* Lets go of holds past their time. */
void upstream_mrtr_sweep(struct upstream *up);
void upstream_mrtr_destroy(struct upstream *up);

#endif
