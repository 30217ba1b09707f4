/* duration — the times an operator types and reads: "30d", "1h", "90s",
 * "250ms" in, "3m ago" and "in 29d" out. Pure. */
#ifndef MCPD_ADMIN_DURATION_H
#define MCPD_ADMIN_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* Parses a positive count with a unit (ms, s, m, h, d, w). Returns 0 and
 * the milliseconds, or -1. */
int duration_parse(const char *text, int64_t *ms);
/* "just now", "42s ago", "3m ago", "5h ago", "2d ago", or "in 29d" for a
 * time after now; "-" for 0. Writes at most cap bytes. */
void duration_relative(int64_t when_ms, int64_t now_ms, char *out, size_t cap);
/* "512 B", "3.4 KiB", "12.0 MiB", "1.2 GiB". */
void duration_bytes(int64_t bytes, char *out, size_t cap);

#endif
