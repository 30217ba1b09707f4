/* udp_wire — the datagrams of the UDP transport (README "UDP wire rules"):
 * their encoding and decoding, the address cookie, and the retransmission
 * timer's arithmetic. Pure functions: no I/O, no clock, no global state.
 *
 * Every datagram is one JSON object. The members whose names start with
 * "_udp_" are the envelope; the others (if any) are the JSON-RPC message:
 *
 *   {"_udp_seq":7, "jsonrpc":"2.0", ...}          a message in one datagram
 *   {"_udp_seq":8, "_udp_frag":[0,3], "_udp_data":"<base64>"}
 *                                                 fragment 0 of 3 of one
 *   {"_udp_ack":8, "_udp_sack":[10,11]}           acknowledgements
 *   {"_udp_cookie":"<hex>"}                       address validation
 *   {"_udp_cookie":"<hex>", "_udp_reset":true}    "no state for you here"
 *
 * A message (or fragment) datagram carries a sequence number (per peer and
 * direction, from 1, one per datagram); each fragment of a message takes
 * its own, consecutive ones. A datagram from a client also carries the
 * cookie mcpd gave it. Acknowledgements may ride on any datagram.
 *
 * The cookie is SipHash-2-4, keyed with a per-process secret, of the
 * client's address, port and a time window: mcpd recomputes it instead of
 * remembering it, so a datagram from an address that never received one
 * costs no state.
 *
 * Ownership: struct udp_wire_in's message/data and every returned buffer
 * are the caller's (udp_wire_in_clear frees them). Thread-safe. */
#ifndef MCPD_UDP_WIRE_H
#define MCPD_UDP_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* The largest UDP payload on IPv4. */
#define UDP_WIRE_MAX_DATAGRAM 65507
/* The smallest --udp-max-datagram: room for a fragment's envelope. */
#define UDP_WIRE_MIN_DATAGRAM 256
/* Selective acknowledgements per datagram, at most. */
#define UDP_WIRE_MAX_SACK 32
#define UDP_WIRE_COOKIE_LEN 16 /* hex digits */

struct udp_wire_in {
    int has_seq;
    uint64_t seq;
    int has_ack;
    uint64_t ack;
    size_t nsack;
    uint64_t sack[UDP_WIRE_MAX_SACK];
    char cookie[UDP_WIRE_COOKIE_LEN + 1]; /* "" when absent */
    int reset;
    /* With has_seq: a fragment (frag_n > 0; data holds its decoded
     * bytes), or a whole message (data holds its JSON text, the envelope
     * taken out). NULL for a control datagram. */
    uint32_t frag_i, frag_n;
    char *data;
    size_t len;
};

/* Decodes one datagram. Returns 0, or -1 with why (a sentence for the
 * client) when it is not a JSON object or its envelope is malformed. */
int udp_wire_decode(const char *buf, size_t len, struct udp_wire_in *in, char *why, size_t whycap);
void udp_wire_in_clear(struct udp_wire_in *in);

/* How many datagrams of at most max_datagram bytes the message of len
 * bytes takes (1 when it goes whole; 0 when max_datagram is too small). */
size_t udp_wire_count(const char *msg, size_t len, size_t max_datagram);
/* Datagram i (of udp_wire_count's n) of the message, with sequence number
 * seq: the message itself with "_udp_seq" added when n is 1 and it is a
 * JSON object, else fragment i of n. A client's datagrams also carry its
 * cookie (cookie: UDP_WIRE_COOKIE_LEN hex digits; NULL for mcpd's), within
 * the same max_datagram. Returns a malloc'd buffer (its length in
 * *out_len), NULL when out of memory. */
char *udp_wire_encode(const char *msg, size_t len, size_t i, size_t n, uint64_t seq,
                      const char *cookie, size_t max_datagram, size_t *out_len);

/* {"_udp_ack":ack[,"_udp_sack":[...]]} into out; returns its length. */
size_t udp_wire_ack(uint64_t ack, const uint64_t *sack, size_t nsack, char *out, size_t cap);
/* {"_udp_cookie":"..."[,"_udp_reset":true]} into out; returns its length. */
size_t udp_wire_cookie_reply(const char *cookie, int reset, char *out, size_t cap);

/* The cookie for an address in a time window, as hex (cookie has
 * UDP_WIRE_COOKIE_LEN + 1 bytes). */
void udp_wire_cookie(const uint8_t key[16], const struct sockaddr *addr, uint64_t window,
                     char *cookie);

/* The retransmission timer (RFC 6298, in milliseconds): srtt and rttvar
 * from samples of datagrams sent once (Karn), rto clamped to [min, max]. */
struct udp_rto {
    int64_t srtt, rttvar, rto, min, max;
};
void udp_rto_init(struct udp_rto *r, int64_t initial, int64_t min, int64_t max);
void udp_rto_sample(struct udp_rto *r, int64_t rtt_ms);
/* The timeout for the tries-th retransmission (0: the first send):
 * exponential backoff, capped at max. */
int64_t udp_rto_backoff(const struct udp_rto *r, int tries);

#endif
