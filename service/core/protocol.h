/* protocol — MCP protocol revisions and log levels.
 *
 * Knows which revisions mcpd serves, negotiates one at initialize (echo the
 * client's when supported, otherwise answer the latest), and answers the
 * per-revision questions transports ask: may this session batch, does it get
 * SSE priming events. Also the RFC 5424 severity names used by
 * logging/setLevel and notifications/message. */
#ifndef MCPD_PROTOCOL_H
#define MCPD_PROTOCOL_H

#define PROTOCOL_LATEST "2025-11-25"
/* What a request without MCP-Protocol-Version is assumed to speak. */
#define PROTOCOL_DEFAULT "2025-03-26"

int protocol_supported(const char *version);
/* The revision to answer an initialize that asked for `requested` (may be
 * NULL). Returns a static string. */
const char *protocol_negotiate(const char *requested);
/* Batches (JSON arrays) exist only in 2025-03-26. */
int protocol_allows_batch(const char *version);
/* SSE priming events and retry: (SEP-1699) from 2025-11-25 on. */
int protocol_has_sse_polling(const char *version);

/* RFC 5424 severities as MCP names them: 0 debug … 7 emergency. Returns -1
 * for an unknown name. */
int protocol_log_level(const char *name);
const char *protocol_log_level_name(int level);

#endif
