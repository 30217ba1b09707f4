/* tcp_conn — one TCP connection of tcp.h, served by a reader fiber.
 *
 * tcp.c accepts and counts; this module serves an accepted socket: the
 * framing (stdio_frame.h), the mcpd/connect greeting (authentication and
 * resume), push (push.h) for everything after it, the handshake and idle
 * timeouts, and the goodbye (a JSON-RPC error with id null) when the
 * connection is ended from our side. The wire rules are in tcp.h.
 *
 * Ownership: tcp_conn_new takes the socket; the reader fiber
 * (tcp_conn_main) closes it and frees the connection, and calls
 * tcp_conn_gone(addr) (in tcp.c) last. */
#ifndef MCPD_TCP_CONN_H
#define MCPD_TCP_CONN_H

#include "tcp.h"

struct tcp_conn;

/* The settings every connection uses (copied); before the first accept. */
void tcp_conn_configure(const struct tcp_config *cfg);
/* A connection for the accepted, non-blocking socket fd from addr. NULL
 * when out of memory (fd is then still the caller's). */
struct tcp_conn *tcp_conn_new(int fd, const char *addr);
/* Frees a connection whose fiber never ran, closing its socket. */
void tcp_conn_discard(struct tcp_conn *c);
/* The reader fiber (loop_spawn's fn, arg a tcp_conn). */
void tcp_conn_main(void *arg);
/* Ends every connection: a goodbye, then closed; waits (the main thread)
 * up to a few seconds for them to end. */
void tcp_conn_stop_all(void);

/* In tcp.c: the connection from addr has ended (its slot is free). */
void tcp_conn_gone(const char *addr);

#endif
