/* bridge_log — mcp-bridge's diagnostics: one line per event on stderr,
 *   mcp-bridge: level=warn event=stream_dropped msg="..."
 * stdout belongs to JSON-RPC, so this is the only place the bridge speaks
 * to a human. The levels are mcpd's (service/base/log_level.h). Events
 * below the chosen level cost one comparison. Never pass a token or a
 * header value here. Single-threaded, like the bridge. */
#ifndef MCP_BRIDGE_LOG_H
#define MCP_BRIDGE_LOG_H

#include "log_level.h"

void bridge_log_set_level(enum log_level min);
void bridge_log(enum log_level level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
