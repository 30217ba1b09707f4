/* connection — what every connection of the bridge has in common, whatever
 * the transport: the curl options (connect timeout, TLS verification always
 * on, --cacert, TCP keepalive, http and https only, no signals), and the
 * delay before trying again after a failure (capped exponential backoff
 * with jitter, so that the bridges of many desktops do not all come back
 * in step after a server restart). */
#ifndef MCP_BRIDGE_CONNECTION_H
#define MCP_BRIDGE_CONNECTION_H

#include "options.h"

#include <curl/curl.h>
#include <stdint.h>

/* errbuf (CURL_ERROR_SIZE bytes) must live as long as e: curl writes its
 * words there on any later failure of e, not only on this setup. */
void connection_setup(CURL *e, const struct bridge_options *o, char *errbuf);

/* Milliseconds to wait before the attempt-th retry (0-based): 250 ms
 * doubling up to 5 s, then a random half to all of it. When hint_ms (the
 * server's SSE retry:) is positive, it is the floor: hint_ms doubling up to
 * 5 s (or hint_ms if larger), plus up to a quarter more, never less. */
int64_t connection_backoff_ms(int attempt, long hint_ms);

#endif
