/* forwarded — who the client is when mcpd sits behind a reverse proxy.
 *
 * A proxy (Caddy, nginx) connects from its own address and names the client
 * in X-Forwarded-For. That header is believed only from peers in the
 * --trusted-proxies set; anyone else could write any address in it. The set
 * is a comma-separated list of addresses and CIDR networks, IPv4 or IPv6,
 * plus the names `loopback` (127.0.0.0/8, ::1) and `private` (10/8,
 * 172.16/12, 192.168/16, fc00::/7), e.g. the network of a compose file.
 *
 * The client is found by walking X-Forwarded-For from the right (the hop the
 * trusted peer appended last) past every trusted address; the first address
 * that is not trusted is the client. A malformed element stops the walk at
 * the last address known good, so a client cannot forge its way past a
 * proxy. IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are read as IPv4.
 *
 * Pure and thread-safe once parsed. */
#ifndef MCPD_FORWARDED_H
#define MCPD_FORWARDED_H

#include <stddef.h>

/* Long enough for any IPv6 address in text, with a terminator. */
#define FORWARDED_ADDR_MAX 48

struct forwarded;

/* Parses the list (NULL or "" gives an empty set). Returns 0 and *out (the
 * caller frees it with forwarded_free), or -1 with a message in err. */
int forwarded_parse(const char *list, struct forwarded **out, char *err, size_t errcap);
void forwarded_free(struct forwarded *f);
/* 1 if the textual address is in the set. */
int forwarded_trusts(const struct forwarded *f, const char *addr);
/* Writes the client's address into out (at least FORWARDED_ADDR_MAX bytes):
 * the peer itself unless the peer is trusted, else the rightmost untrusted
 * hop of xff (which may be NULL). */
void forwarded_client(const struct forwarded *f, const char *peer, const char *xff, char *out);

#endif
