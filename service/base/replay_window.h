/* replay_window — the keys seen in the last span of seconds, to refuse the
 * second use of a one-time value (a DPoP proof's jti).
 *
 * Keys are kept in the order they were first seen, in a ring of at most
 * `max`, with a hash table (table.h) to find them. A key is forgotten once
 * its span has passed, oldest first. Memory is therefore bounded whatever
 * is sent. Only when more than `max` keys arrive within one span does the
 * oldest go before its time; that is counted (replay_window_forgotten) so
 * the owner can say so, since a key forgotten early could be used again.
 *
 * Not thread-safe: the owner guards it with its lock. Pure: callers pass
 * the time. Keys are copied. */
#ifndef MCPD_REPLAY_WINDOW_H
#define MCPD_REPLAY_WINDOW_H

#include <stddef.h>
#include <stdint.h>

/* The longest key, without its terminator. */
#define REPLAY_WINDOW_KEY_MAX 64

struct replay_window;

/* NULL when out of memory. Caller frees with replay_window_free. */
struct replay_window *replay_window_new(size_t max, int64_t span_s);
void replay_window_free(struct replay_window *w);
/* 1 when key was not seen in the span before now_s, and notes it at now_s;
 * 0 when it was (a replay); -1 when it could not be noted (out of memory,
 * or a key longer than REPLAY_WINDOW_KEY_MAX): the caller refuses. */
int replay_window_first(struct replay_window *w, const char *key, int64_t now_s);
/* Keys held now. */
size_t replay_window_count(const struct replay_window *w);
/* Keys forgotten before their span ended, since the window was made. */
uint64_t replay_window_forgotten(const struct replay_window *w);

#endif
