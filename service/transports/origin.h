/* origin — DNS-rebinding protection: which Host and Origin headers a request
 * may carry.
 *
 * Both lists hold host names ("localhost", "127.0.0.1", "[::1]",
 * "mcp.example.com"); the port is not compared, since a proxy may change it.
 * An Origin entry that contains "://" must match the whole origin exactly
 * instead. "*" allows anything. Without configuration only loopback names
 * are allowed, which is what a server bound to 127.0.0.1 should accept. */
#ifndef MCPD_ORIGIN_H
#define MCPD_ORIGIN_H

struct origin_policy;

/* Comma-separated lists; NULL or "" means the loopback defaults. Returns a
 * policy the caller frees with origin_policy_free, or NULL. */
struct origin_policy *origin_policy_new(const char *hosts, const char *origins);
void origin_policy_free(struct origin_policy *p);

/* 1 when allowed. host is the Host header (NULL: HTTP/1.0 without Host,
 * refused); origin is the Origin header (NULL: not a browser, allowed). */
int origin_host_allowed(const struct origin_policy *p, const char *host);
int origin_origin_allowed(const struct origin_policy *p, const char *origin);
/* Both checks, as every transport makes them: NULL when the request may
 * pass, else the reason to answer with 403 (a static string). */
const char *origin_refusal(const struct origin_policy *p, const char *host, const char *origin);

#endif
