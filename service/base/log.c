/* log — see log.h. */
#include "log.h"
#include "clock.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static _Atomic int min_level = LOG_INFO;
/* Read through one pointer, so a logging thread never pairs a sink with
 * another sink's ud. Slots alternate: the one being replaced may still be
 * in use. */
struct sink {
    log_sink_fn fn;
    void *ud;
};
static struct sink sinks[2];
static struct sink *_Atomic sink;

void log_set_level(enum log_level min)
{
    min_level = min;
}

void log_set_sink(log_sink_fn fn, void *ud)
{
    if (!fn) {
        sink = NULL;
        return;
    }
    struct sink *next = atomic_load(&sink) == &sinks[0] ? &sinks[1] : &sinks[0];
    next->fn = fn;
    next->ud = ud;
    sink = next;
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

static void emit(enum log_level level, const char *session, const char *event, int to_sink,
                 const char *fmt, va_list ap)
{
    char detail[1024] = "";
    if (fmt)
        vsnprintf(detail, sizeof detail, fmt, ap);
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

    struct sink *s = to_sink ? atomic_load(&sink) : NULL;
    if (s) {
        char row[1200];
        snprintf(row, sizeof row, "%s %s", event, detail);
        s->fn(s->ud, now, log_level_name(level), session, row);
    }
}

void log_event(enum log_level level, const char *session, const char *event, const char *fmt, ...)
{
    if ((int)level < min_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(level, session, event, 1, fmt, ap);
    va_end(ap);
}

void log_local(enum log_level level, const char *session, const char *event, const char *fmt, ...)
{
    if ((int)level < min_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(level, session, event, 0, fmt, ap);
    va_end(ap);
}
