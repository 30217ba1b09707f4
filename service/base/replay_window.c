/* replay_window — see replay_window.h. */
#include "replay_window.h"
#include "table.h"

#include <stdlib.h>
#include <string.h>

struct seen {
    char key[REPLAY_WINDOW_KEY_MAX + 1];
    int64_t at_s;
};

struct replay_window {
    struct table *by_key; /* key -> its struct seen in ring */
    struct seen *ring;
    size_t max, head, n; /* the oldest at ring[head] */
    int64_t span_s;
    uint64_t forgotten;
};

struct replay_window *replay_window_new(size_t max, int64_t span_s)
{
    struct replay_window *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->max = max ? max : 1;
    w->span_s = span_s;
    w->ring = calloc(w->max, sizeof *w->ring);
    w->by_key = table_new();
    if (!w->ring || !w->by_key) {
        replay_window_free(w);
        return NULL;
    }
    return w;
}

void replay_window_free(struct replay_window *w)
{
    if (!w)
        return;
    table_free(w->by_key);
    free(w->ring);
    free(w);
}

static void drop_oldest(struct replay_window *w)
{
    table_del(w->by_key, w->ring[w->head].key);
    w->head = (w->head + 1) % w->max;
    w->n--;
}

int replay_window_first(struct replay_window *w, const char *key, int64_t now_s)
{
    if (strlen(key) > REPLAY_WINDOW_KEY_MAX)
        return -1;
    /* Oldest first, and only from the front: a clock stepped back leaves
     * entries that look young behind older ones, and those wait their turn
     * (the ring's bound still holds). */
    while (w->n && now_s - w->ring[w->head].at_s > w->span_s)
        drop_oldest(w);
    struct seen *s = table_get(w->by_key, key);
    if (s) {
        if (now_s - s->at_s <= w->span_s)
            return 0;
        s->at_s = now_s; /* past its span but not yet dropped: seen anew */
        return 1;
    }
    if (w->n == w->max) {
        w->forgotten++;
        drop_oldest(w);
    }
    s = &w->ring[(w->head + w->n) % w->max];
    memcpy(s->key, key, strlen(key) + 1);
    s->at_s = now_s;
    if (table_put(w->by_key, s->key, s) != 0)
        return -1;
    w->n++;
    return 1;
}

size_t replay_window_count(const struct replay_window *w)
{
    return w->n;
}

uint64_t replay_window_forgotten(const struct replay_window *w)
{
    return w->forgotten;
}
