/* bridge_log — see bridge_log.h. */
#include "bridge_log.h"
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
    /* A remote server's text lands here: escaped as mcpd's log escapes it,
     * so one event stays one line with fields that parse. */
    char quoted[4 * sizeof msg + 3];
    if (*msg)
        log_quote(quoted, sizeof quoted, msg, strlen(msg));
    fprintf(stderr, "mcp-bridge: level=%s event=%s%s%s\n", log_level_name(level), event,
            *msg ? " msg=" : "", *msg ? quoted : "");
}
