/* bridge_log — see bridge_log.h. */
#include "bridge_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static enum bridge_log_level min_level = BLOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void bridge_log_set_level(enum bridge_log_level min)
{
    min_level = min;
}

int bridge_log_level_parse(const char *name, enum bridge_log_level *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (enum bridge_log_level)i;
            return 0;
        }
    }
    return -1;
}

int bridge_log_enabled(enum bridge_log_level level)
{
    return level >= min_level;
}

void bridge_log(enum bridge_log_level level, const char *event, const char *fmt, ...)
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
    fprintf(stderr, "mcp-bridge: level=%s event=%s%s%s%s\n", level_names[level], event,
            *msg ? " msg=\"" : "", msg, *msg ? "\"" : "");
}
