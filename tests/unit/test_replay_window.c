/* test_replay_window — the memory of one-time values (replay_window.c,
 * pure): a repeat within the span is refused and after it accepted, keys
 * leave oldest first, a full window forgets its oldest early and counts
 * it, a clock stepped back does not let a repeat through, and keys too
 * long are refused rather than cut. */
#include "check.h"
#include "replay_window.h"

#include <stdio.h>

static void test_span(void)
{
    struct replay_window *w = replay_window_new(8, 600);
    CHECK_INT(replay_window_first(w, "a", 1000), 1);
    CHECK_INT(replay_window_first(w, "a", 1000), 0);
    CHECK_INT(replay_window_first(w, "a", 1600), 0); /* the span's last second */
    CHECK_INT(replay_window_first(w, "b", 1300), 1);
    CHECK_INT(replay_window_first(w, "a", 1601), 1); /* past it: new again */
    CHECK_INT(replay_window_first(w, "a", 1601), 0);
    CHECK_INT(replay_window_first(w, "b", 1900), 0);
    /* b's span ended: it left, and so did what came before it */
    CHECK_INT(replay_window_first(w, "c", 1901), 1);
    CHECK_INT(replay_window_count(w), 2); /* a (seen anew at 1601) and c */
    CHECK_INT(replay_window_forgotten(w), 0);
    replay_window_free(w);
}

static void test_full(void)
{
    struct replay_window *w = replay_window_new(4, 600);
    char k[16];
    for (int i = 0; i < 4; i++) {
        snprintf(k, sizeof k, "k%d", i);
        CHECK_INT(replay_window_first(w, k, 100 + i), 1);
    }
    CHECK_INT(replay_window_first(w, "k4", 110), 1); /* k0 goes early */
    CHECK_INT(replay_window_forgotten(w), 1);
    CHECK_INT(replay_window_count(w), 4);
    CHECK_INT(replay_window_first(w, "k1", 110), 0); /* the rest are held */
    CHECK_INT(replay_window_first(w, "k4", 110), 0);
    CHECK_INT(replay_window_first(w, "k0", 110), 1); /* what full costs */
    CHECK_INT(replay_window_forgotten(w), 2);
    /* Many more than fit: the count stays bounded. */
    for (int i = 0; i < 1000; i++) {
        snprintf(k, sizeof k, "x%d", i);
        CHECK_INT(replay_window_first(w, k, 200), 1);
    }
    CHECK_INT(replay_window_count(w), 4);
    CHECK_INT(replay_window_first(w, "x999", 200), 0);
    replay_window_free(w);
}

static void test_clock_back(void)
{
    struct replay_window *w = replay_window_new(8, 600);
    CHECK_INT(replay_window_first(w, "a", 5000), 1);
    CHECK_INT(replay_window_first(w, "b", 4000), 1); /* the clock stepped back */
    CHECK_INT(replay_window_first(w, "b", 4100), 0);
    CHECK_INT(replay_window_first(w, "a", 4100), 0);
    replay_window_free(w);
}

static void test_long_key(void)
{
    struct replay_window *w = replay_window_new(8, 600);
    char k[REPLAY_WINDOW_KEY_MAX + 2];
    memset(k, 'k', sizeof k - 1);
    k[sizeof k - 1] = '\0';
    CHECK_INT(replay_window_first(w, k, 1), -1);
    k[REPLAY_WINDOW_KEY_MAX] = '\0';
    CHECK_INT(replay_window_first(w, k, 1), 1);
    CHECK_INT(replay_window_first(w, k, 1), 0);
    replay_window_free(w);
}

int main(void)
{
    test_span();
    test_full();
    test_clock_back();
    test_long_key();
    return check_summary();
}
