/* udp — MCP over UDP (--udp-listen HOST:PORT): one JSON-RPC message per
 * datagram with the "_udp_seq" sequence numbers of the transport
 * specification, made reliable on top of an unreliable network
 * (acknowledgements, retransmission, reordering, fragmentation), with
 * every reply pushed to the peer as on TCP (push.h).
 *
 * Wire rules (README "UDP wire rules"; the encoding is udp_wire.h):
 *   - address validation: a datagram from an address:port mcpd holds no
 *     state for is answered, statelessly, with a cookie (udp_wire_cookie)
 *     and only when the answer is at most 3x what was received; state (a
 *     peer) is created only by a datagram that carries a valid cookie and
 *     _udp_seq 1. A spoofed source never receives a cookie, so it creates
 *     nothing and gets at most 3x back.
 *   - every datagram from a peer carries its cookie; one without is
 *     dropped (it is not from the peer);
 *   - a per-address token bucket (--udp-rate-per-ip datagrams a second)
 *     drops a flood from one address before it is even parsed;
 *   - the first message may be mcpd/connect (greeting.h): with --auth
 *     token it must be, and it resumes a session and stream;
 *   - reliability per peer is udp_peer.c's.
 *
 * How it works: one reader fiber on the event loop (loop.h) receives from
 * the non-blocking socket, applies the rules above and hands each peer's
 * datagrams to that peer (udp_peer.h); each peer is served by a fiber of
 * its own and push's writer fiber. No thread is started.
 *
 * udp_start and udp_stop run on the main thread, after loop_start and
 * before loop_stop. */
#ifndef MCPD_UDP_H
#define MCPD_UDP_H

#include <stddef.h>
#include <stdint.h>

#define UDP_TRANSPORT "udp"

struct udp_config {
    const char *host;    /* numeric address */
    int port;            /* 0: any free port (udp_port tells which) */
    size_t max_message;  /* a reassembled message, at most (--max-body) */
    size_t max_datagram; /* what mcpd sends, at most (--udp-max-datagram) */
    unsigned max_peers;
    unsigned max_per_ip; /* 0: no per-address cap */
    int64_t idle_ms;
    double rate_per_ip; /* datagrams a second from one address; 0: no limit */
    int max_inflight;   /* per peer; 0: push's default */
    int auth_required;  /* a peer greets with a token before anything */
};

/* Binds and starts receiving. Returns 0, or -1 with a message in *err
 * (caller frees). */
int udp_start(const struct udp_config *cfg, char **err);
/* The port bound (0 before udp_start). */
int udp_port(void);
/* Stops receiving, says goodbye to every peer and ends them; their
 * sessions and streams stay stored. Safe when never started. */
void udp_stop(void);

#endif
