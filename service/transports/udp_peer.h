/* udp_peer — one validated peer (address:port + cookie) of the UDP
 * transport (udp.h): its reliability state and the fiber that serves it.
 *
 * Sending: push hands each message to the peer's send function, which cuts
 * it into datagrams (udp_wire_encode), numbers them and keeps each until
 * the peer acknowledges it, retransmitting on a timer (udp_wire's RTO,
 * doubled each time, capped) and giving the peer up after
 * UDP_PEER_MAX_TRIES retransmissions of one datagram. At most
 * UDP_PEER_SEND_WINDOW datagrams are unacknowledged at once: push's writer
 * parks while the window is full, so a peer that never acknowledges
 * cannot make mcpd buffer without bound (its replies stay in the store).
 *
 * Receiving: udp.c's reader hands over each datagram (udp_peer_input). A
 * datagram is acknowledged at once (cumulative + selective); duplicates are
 * dropped; one ahead of the next expected is kept in a reorder window of
 * UDP_PEER_RECV_WINDOW datagrams (beyond it, dropped unacknowledged);
 * in-order datagrams are reassembled into messages (refusing one larger
 * than --max-body: an error naming the limit, its fragments skipped), which
 * the peer's fiber gives to push (after mcpd/connect, as tcp_conn does).
 *
 * Ending: an idle peer (no datagram for idle_ms, nothing in flight), one
 * that stopped acknowledging, a revoked token, an ended session or
 * udp_stop: a goodbye (an error with id null, in sequence, waited for a
 * little), then the peer is gone; its sessions and streams stay stored.
 *
 * Ownership: udp_peer_new returns a peer with two references, the
 * caller's (udp.c's table) and its fiber's; udp_peer_unref frees at 0. */
#ifndef MCPD_UDP_PEER_H
#define MCPD_UDP_PEER_H

#include "udp.h"
#include "udp_wire.h"

#include <sys/socket.h>

#define UDP_PEER_SEND_WINDOW 64
#define UDP_PEER_RECV_WINDOW 64
#define UDP_PEER_MAX_TRIES 8
#define UDP_PEER_RTO_INITIAL_MS 200
#define UDP_PEER_RTO_MIN_MS 100
#define UDP_PEER_RTO_MAX_MS 4000

struct udp_peer;

/* The settings every peer uses (copied) and the socket it sends on. */
void udp_peer_configure(const struct udp_config *cfg, int fd);
/* A peer for addr (copied), named `name` in the log, validated with
 * `cookie`. NULL when out of memory. */
struct udp_peer *udp_peer_new(const struct sockaddr *addr, socklen_t len, const char *name,
                              const char *cookie);
/* Starts the peer's fiber. Returns 0, or -1 (the fiber's reference is
 * dropped then). */
int udp_peer_start(struct udp_peer *p);
void udp_peer_ref(struct udp_peer *p);
void udp_peer_unref(struct udp_peer *p);
/* The cookie the peer was validated with (borrowed). */
const char *udp_peer_cookie(const struct udp_peer *p);
/* One decoded datagram from the peer (its data is taken). */
void udp_peer_input(struct udp_peer *p, struct udp_wire_in *in);
/* udp_stop: the peer says goodbye and ends. */
void udp_peer_stop(struct udp_peer *p);
/* In udp.c: the peer's fiber ends; the table lets it go. */
void udp_peer_gone(struct udp_peer *p);

#endif
