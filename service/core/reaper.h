/* reaper — a background thread (a ticker, ticker.h) that runs one
 * housekeeping function at a fixed interval (expiring idle sessions and old streams), so storage
 * stays bounded without any client having to say goodbye. */
#ifndef MCPD_REAPER_H
#define MCPD_REAPER_H

#include <stdint.h>

int reaper_start(int64_t interval_ms, void (*tick)(void *arg), void *arg);
/* Stops the thread and waits for a running tick to finish. */
void reaper_stop(void);

#endif
