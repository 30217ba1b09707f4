/* log — the event log: one structured line per event on stderr
 *   ts=2026-11-22T03:40:00.123Z level=info session=ab12… event=session_created msg="…"
 * and, once a store is attached, the same event as a row in the logs table
 * (asynchronously, through the store's group commit). Events below the
 * configured level are dropped before any formatting. Thread-safe. */
#ifndef MCPD_LOG_H
#define MCPD_LOG_H

#include "log_level.h"

struct store;

void log_set_level(enum log_level min);
/* Attach (or, with NULL, detach) the store that receives log rows. */
void log_set_store(struct store *st);

/* session may be NULL; event is a short snake_case tag; fmt/... is the
 * human detail (may be NULL). */
void log_event(enum log_level level, const char *session, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
