/* sock_bind — the listening socket of a raw transport (TCP's listener,
 * UDP's bound socket): resolved from a numeric host and port, opened
 * non-blocking and close-on-exec, bound; a stream socket also gets
 * SO_REUSEADDR (a restart binds while old connections linger) and
 * listens. Errors name the command-line flag, as the user wrote it. */
#ifndef MCPD_SOCK_BIND_H
#define MCPD_SOCK_BIND_H

/* Returns the descriptor with *bound_port the port it got (the one asked
 * for, or the kernel's pick for 0); or -1 with *err (malloc'd, the
 * caller's) "FLAG host:port: why". type: SOCK_STREAM or SOCK_DGRAM. */
int sock_bind(const char *flag, const char *host, int port, int type, int *bound_port, char **err);

#endif
