/* upstream — the backend that puts any stdio MCP server behind mcpd.
 *
 * Each session gets its own child process running the configured command
 * (per-session mode, the default), started when the session initializes
 * with the client's own initialize params; or every session shares one of
 * a small pool of children (shared mode, for stateless servers). Requests
 * go to the child with ids rewritten by mcpd (so they never collide, and a
 * shared child's answers find their session), progress tokens likewise.
 * Everything the child sends comes back through the core's calls, so it is
 * stored on the session's streams before any transport sends it: responses
 * end their call, progress and log messages go to the call they belong to,
 * and the child's own requests (sampling, elicitation, roots) are relayed
 * to the client on the running call's stream (or the session's standalone
 * stream when none runs) and the client's answers relayed back. Each such
 * request waits on a fiber of its own (on the event loop, loop.h); a
 * child may have at most max_pending of them waiting, and past that it
 * gets an error reply at once.
 * Only what the client asked for reaches it: progress only for a token it
 * sent, sampling, elicitation and roots requests only when its initialize
 * declared the capability (else the child gets -32601). A response mcpd
 * cannot pass on (over max_message, an error without an integer code, a
 * result that is not an object) ends its request at once with -32603.
 *
 * 2026-07-28 clients, which have no session, are served from the same
 * children: each request gets its session's child (per-session mode) as
 * initialize'd from its _meta; server/discover and the Mcp-Param-* checks
 * come from upstream_catalog (a probe child's capabilities and tools); and
 * the child's requests for input become input-required results whose
 * retry resumes the held child call (upstream_mrtr.c).
 *
 * A child that exits fails every request it had with an error naming its
 * exit status; the next request starts a new child and replays the stored
 * initialize first. After mcpd itself restarts, a session's first request
 * does the same, so clients never have to initialize again. */
#ifndef MCPD_UPSTREAM_H
#define MCPD_UPSTREAM_H

#include <stddef.h>
#include <stdint.h>

struct backend_ops;

struct upstream_config {
    char *const *argv; /* the command; argv[0] looked up in PATH */
    char *const *env;  /* extra NAME=VALUE entries, or NULL */
    const char *cwd;   /* or NULL */
    int shared;        /* one pool of children for every session */
    int pool;          /* children in shared mode */
    int max_children;
    int64_t idle_ms;          /* a per-session child idle this long is stopped; 0: never */
    int64_t start_timeout_ms; /* a child must answer initialize within this */
    int64_t relay_timeout_ms; /* how long a child's request waits for the client
                               * (2026-07-28: how long a held call waits) */
    int max_pending;          /* a child's requests waiting for the client at once */
    size_t max_message;
    double log_rate; /* stderr lines and bad messages logged per second; 0: all */
};

const struct backend_ops *upstream_backend_ops(void);
/* The self pointer for the ops, or NULL with *err (caller frees). The
 * config is copied. */
void *upstream_backend_new(const struct upstream_config *cfg, char **err);

#endif
