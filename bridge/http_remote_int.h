/* http_remote_int — what the parts of the Streamable HTTP remote share
 * (http_remote.c: requests and completion; http_xfer.c: one curl transfer;
 * http_reinit.c: rebuilding a lost session; http_poll.c: --transport poll;
 * http_legacy.c: the 2024-11-05 HTTP+SSE transport; http_tools.c: the
 * x-mcp-header declarations of 2026-07-28 tools). Internal: only those
 * files include it.
 *
 * A struct req is a client request waiting for its response; it outlives
 * transfers (POST, then maybe resumes or polls, then maybe a retry after
 * re-initialization). A struct xfer is one HTTP exchange. Responses are
 * paired with requests by id wherever they arrive. */
#ifndef MCP_BRIDGE_HTTP_REMOTE_INT_H
#define MCP_BRIDGE_HTTP_REMOTE_INT_H

#include "http_remote.h"
#include "session.h"
#include "sse_parser.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdint.h>

#define MAX_BODY (16u * 1024 * 1024) /* a JSON reply or one SSE event */
#define MAX_ERROR_BODY 4096          /* kept of a non-2xx body, for the message */
#define DELETE_TIMEOUT_MS 2000
#define MSG_CAP 768
#define SPARE_HANDLES 32 /* finished easy handles kept for reuse */

enum xfer_kind {
    XF_POST,      /* a client message */
    XF_RESUME,    /* GET with Last-Event-ID, for a request's dropped stream */
    XF_LISTEN,    /* the standalone GET stream */
    XF_REINIT,    /* the replayed initialize */
    XF_REINIT_OK, /* the replayed notifications/initialized */
    XF_POLL,      /* mcpd/poll for a request's stream (--transport poll) */
    XF_LEGACY,    /* the 2024-11-05 transport's GET stream (http_legacy.c) */
    XF_TOOLS      /* the bridge's own 2026-07-28 tools/list (http_tools.c) */
};

struct req {
    struct req *next, *prev;
    json_t *id;
    char *key;
    char *body; /* as the client sent it */
    size_t body_len;
    char method[64];
    int is_initialize;
    int answered;
    int retried;           /* sent again after a re-initialization already */
    int waiting;           /* parked until re-initialization ends */
    int64_t resume_at;     /* a resume is scheduled (monotonic ms), or 0 */
    int64_t drop_deadline; /* resumes stop here */
    int resume_attempts;
    long retry_ms; /* the server's SSE retry: hint, or -1 */
    char *last_event_id;
    /* --transport poll: the request went with "stream": true, and its
     * messages are fetched with mcpd/poll from next_seq */
    int streamed;
    char *stream_id;
    long long next_seq;
    struct xfer *xf; /* the transfer serving it now, or NULL */
    /* a 2026-07-28 message (modern.h): it goes with its own headers, needs
     * no session, and a server/discover (probe) that a legacy server
     * refuses is answered -32601 so that the client falls back */
    json_t *modern;
    int probe;
    int waiting_tools; /* parked until the bridge knows the tool's headers */
    int auth_tries;    /* sent again after a sign-in (oauth.h), bounded */
};

struct xfer {
    struct xfer *next, *prev;
    struct http_remote *r;
    enum xfer_kind kind;
    CURL *easy;
    struct curl_slist *hdrs;
    struct req *req; /* XF_POST of a request, XF_RESUME */
    char *body;      /* what is POSTed when no req owns it */
    size_t body_len;
    char method[64];     /* of a POSTed notification, for logs */
    unsigned generation; /* session generation it was sent under */
    long status;
    int headers_done, is_sse, is_json;
    char *session_hdr;
    char *www_auth; /* the WWW-Authenticate of a 401 or 403 (oauth.h) */
    struct sse_parser sse;
    struct sse_buf acc; /* a JSON body, or the start of an error body */
    int64_t started, last_activity;
    int timed_out, too_big;
    int unstarted;     /* not handed to curl yet (http_xfer_start_pending) */
    int got_event;     /* an SSE event arrived: the stream worked */
    int opening;       /* initialize or notifications/initialized: holds the rest */
    char poll_key[64]; /* XF_POLL: the id key of the mcpd/poll request */
    int poll_ended;    /* XF_POLL: the stream is finished, failed or expired */
    char errbuf[CURL_ERROR_SIZE];
};

/* A client notification or response held while the session opens. */
struct parked {
    struct parked *next;
    char *body;
    size_t len;
    char method[64];
};

struct http_remote {
    const struct bridge_options *o;
    struct remote_sink sink;
    CURLM *multi;
    char host[256];
    struct session s;
    struct req *reqs, *reqs_tail; /* in arrival order */
    struct xfer *xfers;
    /* While the client's initialize or notifications/initialized is on its
     * way, later messages wait: the server must see them in that order,
     * and they need the session id the initialize reply brings. */
    int hold;
    struct parked *parked, *parked_tail;
    int n_pending;
    /* the standalone GET stream */
    int listen_wanted; /* the server has one: keep it open */
    int64_t listen_at; /* reconnect scheduled (monotonic ms), or 0 */
    int listen_attempts;
    char *listen_last_id;
    unsigned poll_count; /* for unique mcpd/poll ids */
    CURL *spare[SPARE_HANDLES];
    int n_spare;
    /* the 2024-11-05 HTTP+SSE transport: POSTs go to the endpoint the GET
     * stream announced; replies come on that stream */
    int legacy;
    char *legacy_endpoint;
    int legacy_had_session; /* the client initialized over an earlier stream */
    int stopping;
    /* 2026-07-28 tools: {"<tool>": {"<Name>": [path]}} (tool_headers.h),
     * and the bridge's own tools/list when a call names a tool it has not
     * seen listed */
    json_t *tool_maps;
    char tools_key[64]; /* the id key of that tools/list, "" when none runs */
    unsigned tools_count;
    int tools_pages;
    struct oauth *oauth; /* signs in on a 401 (oauth.h), or NULL */
};

/* A transfer of kind to the server URL (or the legacy endpoint): method_http
 * "POST" (body borrowed: it must outlive the transfer), "GET" or another
 * verb; the session headers, the token and --header lines go with it.
 * modern (may be NULL) is the body of a 2026-07-28 message: then its own
 * headers (modern.h) go instead of the session's. NULL when out of
 * memory. */
struct xfer *http_xfer_new(struct http_remote *r, enum xfer_kind kind, const char *method_http,
                           const char *body, size_t body_len, const char *last_event_id,
                           const json_t *modern);

/* Links xf into r and hands it to curl. */
void http_xfer_start(struct http_remote *r, struct xfer *xf);

/* Hands the transfers started since the last call to curl. Called from
 * the poll loop, outside curl's callbacks. */
void http_xfer_start_pending(struct http_remote *r);
/* Unlinks, stops and frees xf (and its body when it owns one). */
void http_xfer_free(struct http_remote *r, struct xfer *xf);

/* The server answered the replayed initialize (on any stream). */
void http_reinit_result(struct http_remote *r, struct xfer *xf, const json_t *m);

/* The server forgot the session: replay the client's initialize. */
void http_reinit_start(struct http_remote *r);

/* Re-initialization ended: send what waited, or fail it with failure. */
void http_reinit_end(struct http_remote *r, const char *failure);

/* q met a 404 for the session it was sent under (generation). */
void http_reinit_session_gone(struct http_remote *r, struct req *q, unsigned generation);

/* The reply to a "stream": true request: keeps its stream id. Returns 0
 * when m is not a handle (then m is the request's answer). */
int http_poll_handle(struct req *q, const json_t *m);

/* An mcpd/poll result: relay its chunks, remember where to go on. */
void http_poll_result(struct http_remote *r, struct xfer *xf, const json_t *m);

/* Fetches q's next messages with mcpd/poll. */
void http_poll_next(struct http_remote *r, struct req *q);

/* m with "stream": true in its params, as compact JSON (length in *len);
 * malloc'd, NULL when out of memory. */
char *http_poll_body(const json_t *m, size_t *len);

/* A malloc'd NUL-terminated copy of s[0..n), or NULL. */
char *http_remote_dup(const char *s, size_t n);

/* One message to the client. */
void http_remote_emit(struct http_remote *r, const char *json, size_t len);

/* Answers q with a bridge error, unless it was answered already. */
void http_remote_fail(struct http_remote *r, struct req *q, const char *message);

/* Unlinks and frees q. */
void http_remote_req_free(struct http_remote *r, struct req *q);

/* One JSON-RPC message from the server, received on xf: paired with its
 * request, relayed to the client. raw (may be NULL) is its text. */
void http_remote_incoming(struct http_remote *r, struct xfer *xf, const json_t *m, const char *raw,
                          size_t raw_len);

/* A JSON text from the server: a message or a batch. -1 if not JSON. */
int http_remote_incoming_text(struct http_remote *r, struct xfer *xf, const char *text, size_t len);

/* POSTs q's body (again). */
void http_remote_post_req(struct http_remote *r, struct req *q);

/* POSTs a copy of body, owned by the transfer; modern as for
 * http_xfer_new. NULL when out of memory. */
struct xfer *http_remote_post_other(struct http_remote *r, enum xfer_kind kind, const char *body,
                                    size_t len, const char *method, const json_t *modern);

/* The session is open: what waited goes out, in the client's order. */
void http_remote_release(struct http_remote *r);

/* Opens the standalone GET stream unless it is open. */
void http_remote_open_listen(struct http_remote *r);

/* 1 while client messages must wait: the session is opening or being
 * rebuilt, or the legacy stream has not announced its endpoint yet (then
 * it is opened). */
int http_remote_gated(struct http_remote *r);

/* Describes why xf failed, for the user (MSG_CAP bytes into msg). */
void http_remote_describe_failure(struct http_remote *r, struct xfer *xf, CURLcode cc, char *msg);

/* http_tools.c: 1 when q, a 2026-07-28 tools/call, names a tool whose
 * headers the bridge has not learned: q waits (the bridge lists the tools
 * itself first). */
int http_tools_wait(struct http_remote *r, struct req *q);
/* 1 when key is the id key of the bridge's own tools/list. */
int http_tools_is_reply(struct http_remote *r, const char *key);
/* The answer to the bridge's own tools/list. */
void http_tools_result(struct http_remote *r, const json_t *m);
/* The bridge's tools/list transfer ended (answered or not). */
void http_tools_done(struct http_remote *r, struct xfer *xf, int ok);
/* A tools/list result relayed to a 2026-07-28 client: learned, and
 * returned without the tools whose x-mcp-header declarations are invalid
 * (a new reference), or NULL to relay m as it is. */
json_t *http_tools_relay(struct http_remote *r, const json_t *m);

/* http_legacy.c: switch to the 2024-11-05 transport (the server answered
 * the POST of initialize with 404 or 405, or --transport sse). */
void http_legacy_enter(struct http_remote *r);
/* Opens the GET stream unless it is open. */
void http_legacy_open(struct http_remote *r);
/* The stream announced where to POST. */
void http_legacy_endpoint(struct http_remote *r, const char *data);
/* The stream ended: what was sent on it cannot be answered any more. */
void http_legacy_done(struct http_remote *r, struct xfer *xf, CURLcode cc);

#endif
