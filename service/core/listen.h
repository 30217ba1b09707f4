/* listen — subscriptions/listen (2026-07-28): the long-lived streams on
 * which stateless clients receive list-changed notifications.
 *
 * A listen request gets a request stream like any other, in its own
 * session. Its first message is notifications/subscriptions/acknowledged,
 * naming the notification types mcpd agreed to (the subset of the client's
 * filter that mcpd can send), and every later message is one of those
 * notifications, tagged with the subscription's id in
 * _meta["io.modelcontextprotocol/subscriptionId"]. The stream never ends on
 * its own: the client closes it (which ends the session), or the server
 * tears it down at shutdown with a final empty result. Every message is
 * committed to the store before a reader sees it, as everywhere. */
#ifndef MCPD_LISTEN_H
#define MCPD_LISTEN_H

#include <jansson.h>

struct session;
struct stream;

/* Opens a subscription on stream st of session s (both borrowed; references
 * kept) for the request (id and params borrowed); appends the
 * acknowledgement. 0, or -1 (the store refused; nothing kept). */
int listen_open(struct session *s, struct stream *st, json_t *id, json_t *params);
/* A list changed: what is "tools", "prompts" or "resources". */
void listen_list_changed(const char *what);
/* Server shutdown: every subscription ends with its final result. */
void listen_close_all(void);

#endif
