/* metrics — see metrics.h. */
#include "metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Atomic uint64_t counters[METRIC_COUNT];

static const struct {
    const char *name, *help;
} counter_info[METRIC_COUNT] = {
    [METRIC_REQUESTS] = {"mcpd_requests_total", "JSON-RPC requests routed by the core"},
    [METRIC_NOTIFICATIONS] = {"mcpd_notifications_total", "Client notifications received"},
    [METRIC_RESPONSES] = {"mcpd_client_responses_total",
                          "Client responses to server requests received"},
    [METRIC_REJECTED] = {"mcpd_rejected_total", "Messages the core refused"},
    [METRIC_SESSIONS] = {"mcpd_sessions_created_total", "Sessions created"},
    [METRIC_MESSAGES] = {"mcpd_messages_stored_total", "Server messages appended to streams"},
    [METRIC_MESSAGE_BYTES] = {"mcpd_message_bytes_stored_total",
                              "Bytes of server messages appended to streams"},
};

void metrics_add(enum metric m, uint64_t n)
{
    atomic_fetch_add_explicit(&counters[m], n, memory_order_relaxed);
}

enum { MAX_REASONS = 64 };

/* Reasons are appended under the lock and never removed, so a reader that
 * loads reason_count may walk that many slots without it. */
static struct {
    const char *reason;
    _Atomic uint64_t n;
} refusals[MAX_REASONS] = {[MAX_REASONS - 1] = {.reason = "other"}};
static _Atomic int reason_count;
static pthread_mutex_t reasons_lock = PTHREAD_MUTEX_INITIALIZER;

static int reason_slot(const char *reason)
{
    int n = atomic_load_explicit(&reason_count, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (strcmp(refusals[i].reason, reason) == 0)
            return i;
    pthread_mutex_lock(&reasons_lock);
    n = atomic_load_explicit(&reason_count, memory_order_relaxed);
    int slot = -1;
    for (int i = 0; i < n && slot < 0; i++)
        if (strcmp(refusals[i].reason, reason) == 0)
            slot = i;
    if (slot < 0 && n < MAX_REASONS - 1) {
        refusals[n].reason = reason;
        slot = n;
        atomic_store_explicit(&reason_count, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&reasons_lock);
    return slot;
}

void metrics_refused(const char *reason)
{
    int slot = reason_slot(reason);
    if (slot < 0)
        slot = MAX_REASONS - 1; /* reserved for the overflow bucket */
    atomic_fetch_add_explicit(&refusals[slot].n, 1, memory_order_relaxed);
}

void metrics_refusals_each(void (*fn)(const char *reason, uint64_t n, void *arg), void *arg)
{
    int n = atomic_load_explicit(&reason_count, memory_order_acquire);
    for (int i = 0; i < n; i++)
        fn(refusals[i].reason, atomic_load(&refusals[i].n), arg);
    uint64_t other = atomic_load(&refusals[MAX_REASONS - 1].n);
    if (other)
        fn("other", other, arg);
}

static void render_refusal(const char *reason, uint64_t n, void *arg)
{
    fprintf(arg, "mcpd_refusals_total{reason=\"%s\"} %llu\n", reason, (unsigned long long)n);
}

static void render_histogram(FILE *f, const struct metrics_histogram *h)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", h->name, h->help, h->name);
    uint64_t below = 0;
    for (size_t i = 0; i < h->n; i++) {
        below += h->count[i];
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", h->name, h->le[i], (unsigned long long)below);
    }
    below += h->count[h->n];
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", h->name,
            (unsigned long long)below, h->name, h->sum, h->name, (unsigned long long)below);
}

char *metrics_render(const struct metrics_value *gauges, size_t ngauges,
                     const struct metrics_histogram *histograms, size_t nh)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    for (int i = 0; i < METRIC_COUNT; i++)
        fprintf(f, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", counter_info[i].name,
                counter_info[i].help, counter_info[i].name, counter_info[i].name,
                (unsigned long long)atomic_load(&counters[i]));
    fputs("# HELP mcpd_refusals_total Requests and messages refused, by reason\n"
          "# TYPE mcpd_refusals_total counter\n",
          f);
    metrics_refusals_each(render_refusal, f);
    for (size_t i = 0; i < ngauges; i++)
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", gauges[i].name, gauges[i].help,
                gauges[i].name, gauges[i].counter ? "counter" : "gauge", gauges[i].name,
                (unsigned long long)gauges[i].value);
    for (size_t i = 0; i < nh; i++)
        render_histogram(f, &histograms[i]);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
