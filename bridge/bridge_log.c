/* bridge_log — see bridge_log.h. */
#include "bridge_log.h"

#include <stdarg.h>
#include <stdio.h>

static enum log_level min_level = LOG_INFO;

void bridge_log_set_level(enum log_level min)
{
    min_level = min;
}

void bridge_log(enum log_level level, const char *event, const char *fmt, ...)
{
    if (level < min_level)
        return;
    char msg[1024] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    /* quotes and line breaks in msg would break the one-line format */
    for (char *p = msg; *p; p++) {
        if (*p == '"' || *p == '\n' || *p == '\r')
            *p = '\'';
    }
    fprintf(stderr, "mcp-bridge: level=%s event=%s%s%s%s\n", log_level_name(level), event,
            *msg ? " msg=\"" : "", msg, *msg ? "\"" : "");
}
