/* protocol — MCP protocol revisions and log levels.
 *
 * Knows which revisions mcpd serves, negotiates one at initialize (echo the
 * client's when supported, otherwise answer the latest), and answers the
 * per-revision questions transports ask: may this session batch, does it get
 * SSE priming events. Also the RFC 5424 severity names used by
 * logging/setLevel and notifications/message. */
#ifndef MCPD_PROTOCOL_H
#define MCPD_PROTOCOL_H

#include <jansson.h>

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

/* 2026-07-28 and later: no initialize, no session; every request carries
 * the revision, the client's capabilities and info in params._meta. */
#define PROTOCOL_STATELESS "2026-07-28"
/* The revision with experimental tasks (tasks/get, /result, /list, /cancel). */
#define PROTOCOL_TASKS_EXPERIMENTAL "2025-11-25"
#define PROTOCOL_META_VERSION "io.modelcontextprotocol/protocolVersion"
#define PROTOCOL_META_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define PROTOCOL_META_CLIENT_INFO "io.modelcontextprotocol/clientInfo"
#define PROTOCOL_META_LOG_LEVEL "io.modelcontextprotocol/logLevel"
#define PROTOCOL_META_SERVER_INFO "io.modelcontextprotocol/serverInfo"
/* 1 for a stateless revision mcpd serves. */
int protocol_is_stateless(const char *version);
/* A method a stateless client may call (server/discover and the methods
 * that survived 2026-07-28; initialize, ping, logging/setLevel and
 * resources/(un)subscribe are gone). */
int protocol_stateless_method(const char *method);
/* Every revision served, newest first, as a new JSON array. */
json_t *protocol_versions_json(void);
/* Shapes a final message (a response, modified in place) as the session's
 * revision has it: from 2026-07-28 every result says resultType
 * "complete", cacheable results say ttlMs and cacheScope, and an unknown
 * resource is -32602 (it was -32002). */
void protocol_adapt_final(const char *version, const char *method, json_t *msg);

/* RFC 5424 severities as MCP names them: 0 debug … 7 emergency. Returns -1
 * for an unknown name. */
int protocol_log_level(const char *name);
/* Above every severity: a session at this level gets no log messages. */
#define PROTOCOL_LOG_OFF 8
const char *protocol_log_level_name(int level);

#endif
