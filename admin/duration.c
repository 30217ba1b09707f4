/* duration — see duration.h. */
#include "duration.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int duration_parse(const char *text, int64_t *ms)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"ms", 1},      {"s", 1000},     {"m", 60000},
                 {"h", 3600000}, {"d", 86400000}, {"w", 604800000}};
    if (!text || *text < '0' || *text > '9')
        return -1;
    char *end;
    errno = 0;
    long long n = strtoll(text, &end, 10);
    if (errno || n <= 0)
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].unit) != 0)
            continue;
        if (n > INT64_MAX / units[i].ms)
            return -1;
        *ms = n * units[i].ms;
        return 0;
    }
    return -1;
}

void duration_relative(int64_t when_ms, int64_t now_ms, char *out, size_t cap)
{
    if (when_ms <= 0) {
        snprintf(out, cap, "-");
        return;
    }
    int64_t d = now_ms - when_ms;
    int future = d < 0;
    if (future)
        d = -d;
    int64_t s = d / 1000;
    if (s < 5) {
        snprintf(out, cap, future ? "in a moment" : "just now");
        return;
    }
    const char *unit = "s";
    int64_t v = s;
    if (s >= 86400)
        v = s / 86400, unit = "d";
    else if (s >= 3600)
        v = s / 3600, unit = "h";
    else if (s >= 60)
        v = s / 60, unit = "m";
    snprintf(out, cap, future ? "in %lld%s" : "%lld%s ago", (long long)v, unit);
}

void duration_bytes(int64_t bytes, char *out, size_t cap)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) {
        snprintf(out, cap, "%lld B", (long long)bytes);
        return;
    }
    double v = (double)bytes;
    size_t u = 0;
    for (v /= 1024; v >= 1024 && u + 1 < sizeof units / sizeof units[0]; v /= 1024)
        u++;
    snprintf(out, cap, "%.1f %s", v, units[u]);
}
