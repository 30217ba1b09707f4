/* metrics — process counters for /metrics, in the Prometheus text format.
 *
 * Counters are atomics bumped where things happen (a request routed, a
 * message stored). Values owned by other modules (sessions and streams in
 * memory, the store's own counters) are read by the caller when the page is
 * rendered and handed in, so this module depends on nothing: the modules it
 * counts for call it, never the other way round. Nothing here takes a lock
 * on the hot path. */
#ifndef MCPD_METRICS_H
#define MCPD_METRICS_H

#include <stddef.h>
#include <stdint.h>

enum metric {
    METRIC_REQUESTS,      /* JSON-RPC requests routed */
    METRIC_NOTIFICATIONS, /* client notifications */
    METRIC_RESPONSES,     /* client answers to server requests */
    METRIC_REJECTED,      /* messages refused by the core */
    METRIC_SESSIONS,      /* sessions created */
    METRIC_MESSAGES,      /* messages appended to streams */
    METRIC_MESSAGE_BYTES, /* their bytes */
    METRIC_COUNT
};

void metrics_add(enum metric m, uint64_t n);

/* Counts one refusal (a limit hit, bad input turned away) under `reason`,
 * rendered as mcpd_refusals_total{reason="..."}. `reason` must be a string
 * literal or otherwise outlive the process: it is kept, not copied. Reasons
 * are few and fixed (snake_case); past 64 distinct ones they are counted as
 * "other". Safe from any thread. */
void metrics_refused(const char *reason);

/* Calls fn once per reason counted so far, in first-seen order. */
void metrics_refusals_each(void (*fn)(const char *reason, uint64_t n, void *arg), void *arg);

/* A value read elsewhere at render time. */
struct metrics_value {
    const char *name; /* mcpd_... */
    const char *help;
    int counter; /* 1: a counter; 0: a gauge */
    uint64_t value;
};

/* A histogram read elsewhere at render time: count[i] observations at most
 * le[i] and above le[i - 1]; count[n], those above le[n - 1] (rendered as
 * Prometheus wants: cumulative buckets, +Inf, _sum and _count). */
struct metrics_histogram {
    const char *name; /* mcpd_..._seconds */
    const char *help;
    size_t n;
    const double *le;      /* n ascending bounds */
    const uint64_t *count; /* n + 1 counts */
    double sum;
};

/* Renders every counter, then the given values and histograms, into a new
 * string (caller frees), or NULL. */
char *metrics_render(const struct metrics_value *values, size_t n,
                     const struct metrics_histogram *histograms, size_t nh);

#endif
