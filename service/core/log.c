/* log — see log.h. */
#include "log.h"
#include "clock.h"
#include "store.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static _Atomic int min_level = LOG_INFO;
static struct store *_Atomic log_store;

void log_set_level(enum log_level min)
{
    min_level = min;
}

void log_set_store(struct store *st)
{
    log_store = st;
}

static int log_enabled(enum log_level level)
{
    return (int)level >= min_level;
}

/* Quotes msg for a key="value" field: escapes quotes, backslashes and
 * control characters so one event stays one line. */
static void quote(char *out, size_t cap, const char *msg)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p && o + 5 < cap; p++) {
        if (*p == '"' || *p == '\\') {
            out[o++] = '\\';
            out[o++] = (char)*p;
        } else if (*p < 0x20) {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", *p);
        } else {
            out[o++] = (char)*p;
        }
    }
    out[o] = '\0';
}

void log_event(enum log_level level, const char *session, const char *event, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    char detail[1024] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
    }
    char quoted[2048];
    quote(quoted, sizeof quoted, detail);

    int64_t now = clock_wall_ms();
    time_t secs = (time_t)(now / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "ts=%s.%03dZ level=%s session=%s event=%s msg=\"%s\"\n", ts, (int)(now % 1000),
            log_level_name(level), session ? session : "-", event, quoted);

    struct store *st = log_store;
    if (st) {
        char row[1200];
        snprintf(row, sizeof row, "%s %s", event, detail);
        store_log(st, now, log_level_name(level), session, row);
    }
}
