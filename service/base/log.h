/* log — the event log: one structured line per event on stderr
 *   ts=2026-11-22T03:40:00.123Z level=info session=ab12… event=session_created msg="…"
 * and, once a sink is attached, the same event handed to the sink (mcpd's
 * main attaches one that writes a row to the store's logs table,
 * asynchronously, through its group commit). Every layer logs through
 * here, the store included, so every line has one format.
 *
 * Clients put text in these lines (session ids from headers, tool names,
 * an upstream's stderr), so the stderr line is built to be unforgeable: a
 * session or event that is not a plain token ([A-Za-z0-9._:/@+-]+, and not
 * "-", which stands for none) is written quoted, as msg always is, and a
 * quoted value has '"', '\', control characters, line separators (C1,
 * U+2028, U+2029) and bytes that are not UTF-8 escaped (\" \\ \n \r \t
 * \xNN). One call is one line, written at once, whose fields parse as
 * logfmt. The sink gets the text unescaped, but as valid UTF-8 (bytes
 * that are not become U+FFFD), since it stores it as text. Events below the
 * configured level are dropped before any formatting. Thread-safe. */
#ifndef MCPD_LOG_H
#define MCPD_LOG_H

#include "log_level.h"

#include <stddef.h>
#include <stdint.h>

void log_set_level(enum log_level min);
/* 1 when an event at this level would be written: to skip building one. */
int log_enabled(enum log_level level);

/* Receives each event that passed the level: wall-clock ms, level name,
 * session (NULL: none) and "event detail". Called on the logging thread;
 * must not block for long. */
typedef void (*log_sink_fn)(void *ud, int64_t ts_ms, const char *level, const char *session,
                            const char *row);
/* Attach (or, with NULL, detach) the sink. Detaching waits for no one:
 * the caller makes sure no thread is still logging into a sink it frees. */
void log_set_sink(log_sink_fn sink, void *ud);

/* session may be NULL; event is a short snake_case tag; fmt/... is the
 * human detail (may be NULL). */
void log_event(enum log_level level, const char *session, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same, on stderr only: for the sink's own failures (a store that
 * cannot write must not be asked to write that it cannot). */
void log_local(enum log_level level, const char *session, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* v (n bytes) as a quoted logfmt value, escaped as msg= is, into out (cap
 * bytes, NUL-terminated; cut short, never inside an escape, when it does
 * not fit). Returns its length. For logs of their own (mcp-bridge's). */
size_t log_quote(char *out, size_t cap, const char *v, size_t n);
/* v as a field value the way session= and event= are written: bare when it
 * is a plain token, else as log_quote writes it. For values inside msg=
 * (the request log's tool=, mcp=), which a client names. */
size_t log_value(char *out, size_t cap, const char *v);

#endif
