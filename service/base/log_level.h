/* log_level — the four levels of mcpd's event log and of mcp-bridge's
 * diagnostics, and their names (debug, info, warn, error), so that both
 * programs take the same --log-level values. */
#ifndef MCPD_LOG_LEVEL_H
#define MCPD_LOG_LEVEL_H

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Parses debug|info|warn|error. Returns 0, or -1 if unknown. */
int log_level_parse(const char *name, enum log_level *out);
/* The level's name (a static string). */
const char *log_level_name(enum log_level level);

#endif
