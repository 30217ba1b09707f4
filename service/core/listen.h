/* listen — subscriptions/listen (2026-07-28): the long-lived streams on
 * which stateless clients receive list-changed and resource-updated
 * notifications.
 *
 * A listen request gets a request stream like any other, in its own
 * session. Its first message is notifications/subscriptions/acknowledged,
 * naming what mcpd agreed to (the subset of the client's filter that mcpd
 * can send), and every later message is one of those notifications. Every
 * message, the acknowledgement and the final result included, carries the
 * subscription's id in _meta["io.modelcontextprotocol/subscriptionId"]: the
 * listen request's JSON-RPC id, verbatim (string or number), as the
 * specification defines it, so a client can match them to its request. The
 * stream never ends on its own: the client closes it (which ends the
 * session), or the server tears it down at shutdown with a final result.
 * Every message is committed to the store before a reader sees it, as
 * everywhere, so a resumed stream replays them tagged the same way.
 *
 * resourceSubscriptions (a list of URIs) is honoured when the backend both
 * advertises resources.subscribe and reports changes to the core
 * (backend_ops.tells_list_changes, core_resource_updated): then up to
 * LISTEN_MAX_URIS distinct non-empty URIs are kept and acknowledged, and a
 * change to one of them arrives as notifications/resources/updated {uri}.
 * A URI that names no resource is kept too: it just never changes.
 *
 * taskIds (the tasks extension, SEP-2663; only on a request that declares
 * the extension) follows tasks: up to LISTEN_MAX_TASKS ids of tasks of the
 * listener's principal are kept and acknowledged (others, unknown or not
 * its own, are left out). Each gets notifications/tasks, whose params are
 * the task as tasks/get would show it then, less resultType: once at once,
 * then on each change of status (or, while input_required, of the
 * requests asked), up to and including its terminal status. The stream
 * layer reports every change of a request stream (stream_on_change) and
 * tasks/update the answers it delivers; a change on another replica
 * reaches this one's copy of the task's stream by the store's signals.
 * input_required is known only to the process that runs the task: a
 * subscription on another replica sees working until the task moves on. */
#ifndef MCPD_LISTEN_H
#define MCPD_LISTEN_H

#include <jansson.h>

struct session;
struct stream;

/* Resource URIs one subscription may follow; more are left out of the
 * acknowledgement. */
#define LISTEN_MAX_URIS 64
/* Tasks one subscription may follow; more are left out likewise. */
#define LISTEN_MAX_TASKS 64

/* Opens a subscription on stream st of session s (both borrowed; references
 * kept) for the request (id and params borrowed); appends the
 * acknowledgement. 0, or -1 (the store refused; nothing kept). */
int listen_open(struct session *s, struct stream *st, json_t *id, json_t *params);
/* A list changed: what is "tools", "prompts" or "resources". */
void listen_list_changed(const char *what);
/* The resource at uri changed: the subscriptions that follow it are told. */
void listen_resource_updated(const char *uri);
/* The request stream task_id changed (or a task's pending requests were
 * answered): subscriptions that follow it are told if its status moved.
 * Cheap when none follows a task. Any thread, no stream lock held. */
void listen_task_changed(const char *task_id);
/* Server shutdown: every subscription ends with its final result. */
void listen_close_all(void);

#endif
