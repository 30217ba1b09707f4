/* linger — the end of a refused connection, away from the pool threads.
 *
 * A refusal is followed by a lingering close: writing stops, and what the
 * client still sends (the rest of a body it was not asked for) is read and
 * dropped until it stops or a second passes, so that closing with unread
 * bytes does not reset the connection before the client reads the refusal.
 * And a refusal in the middle of a chunked body goes on the socket
 * directly (libmicrohttpd 0.9.75 takes no response then). Both can take as
 * long as the client makes them, which a pool thread serving other
 * connections cannot give, so one thread does them for every connection:
 * it takes a duplicate of the socket (libmicrohttpd closes its own
 * descriptor as usual; the connection lives until both are closed), writes
 * what it was given, shuts down writing, drains, and closes. */
#ifndef MCPD_LINGER_H
#define MCPD_LINGER_H

#include <stddef.h>

int linger_start(void);
void linger_stop(void);
/* Writes what of text (len bytes; may be NULL) the socket takes now, then
 * takes over a duplicate of fd: writes the rest, lingers and closes. When the thread has too many
 * already, or is not running, the duplicate is closed at once (a plain close). */
void linger_hand_off(int fd, const char *text, size_t len);

#endif
