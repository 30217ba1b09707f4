/* bridge_log — mcp-bridge's diagnostics: one line per event on stderr,
 *   mcp-bridge: level=warn event=stream_dropped msg="..."
 * stdout belongs to JSON-RPC, so this is the only place the bridge speaks
 * to a human. Events below the chosen level cost one comparison. Never pass
 * a token or a header value here. Single-threaded, like the bridge. */
#ifndef MCP_BRIDGE_LOG_H
#define MCP_BRIDGE_LOG_H

enum bridge_log_level { BLOG_DEBUG = 0, BLOG_INFO, BLOG_WARN, BLOG_ERROR };

void bridge_log_set_level(enum bridge_log_level min);
/* Parses debug|info|warn|error. Returns 0, or -1 if unknown. */
int bridge_log_level_parse(const char *name, enum bridge_log_level *out);
int bridge_log_enabled(enum bridge_log_level level);
void bridge_log(enum bridge_log_level level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
