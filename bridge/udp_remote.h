/* udp_remote — the server's end of the bridge over mcpd's UDP transport
 * (a udp://HOST:PORT URL; README "UDP wire rules"): the client's side of
 * the rules (the cookie, numbered datagrams kept until acknowledged and
 * retransmitted, acknowledgements, reordering, fragments; the codec is
 * mcpd's own, service/transports/udp_wire) with mcpd/connect first (the
 * token of --token-env/--token-file). mcpd puts each message's event id,
 * and the session id on initialize's reply, in _meta; when mcpd says it
 * has no state for the bridge (a restart, a dropped peer) or stops
 * acknowledging, the bridge gets a new cookie and resumes the session from
 * the last event id it saw. A request not answered within
 * response_timeout_ms of such a loss is answered with an error.
 *
 * No TLS: like tcp://, plain udp:// is for loopback unless --allow-http.
 *
 * Ownership: the caller owns the struct (udp_remote_new/_free). */
#ifndef MCP_BRIDGE_UDP_REMOTE_H
#define MCP_BRIDGE_UDP_REMOTE_H

#include "options.h"
#include "remote.h"

#include <curl/curl.h>
#include <jansson.h>

struct udp_remote;

struct udp_remote *udp_remote_new(const struct bridge_options *o, struct remote_sink sink);
void udp_remote_free(struct udp_remote *u);
/* An empty multi handle, for curl_multi_poll to wait on the socket. */
CURLM *udp_remote_multi(struct udp_remote *u);
/* The socket and the poll events it needs. */
int udp_remote_fd(struct udp_remote *u, short *events);
void udp_remote_send(struct udp_remote *u, const char *body, size_t len, json_t *m);
void udp_remote_run(struct udp_remote *u);
long udp_remote_timeout_ms(struct udp_remote *u);
int udp_remote_pending(struct udp_remote *u);
void udp_remote_shutdown(struct udp_remote *u, const char *why);

#endif
