/* reaper — see reaper.h. */
#include "reaper.h"
#include "clock.h"
#include "ticker.h"

static struct {
    struct ticker ticker;
    int64_t interval;
    void (*tick)(void *);
    void *arg;
} r = {.ticker = TICKER_INITIALIZER};

static int64_t reap_tick(void *unused)
{
    (void)unused;
    r.tick(r.arg);
    return clock_mono_ms() + r.interval;
}

int reaper_start(int64_t interval_ms, void (*tick)(void *arg), void *arg)
{
    r.interval = interval_ms > 0 ? interval_ms : 1000;
    r.tick = tick;
    r.arg = arg;
    return ticker_start(
        &r.ticker,
        &(struct ticker_job){.name = "mcpd-reaper", .first_ms = r.interval, .tick = reap_tick});
}

void reaper_stop(void)
{
    ticker_stop(&r.ticker);
}
