/* test_randid — session and stream ids (randid.c): 32 lowercase hex
 * characters, all distinct over many; the ordered kind starts with the
 * wall clock in ms (12 hex digits) so ids made later sort later, and its
 * other 20 digits are random. Threads draw from buffers of their own:
 * ids made in several threads at once are distinct too. */
#include "check.h"
#include "clock.h"
#include "randid.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int is_id(const char *s)
{
    return strlen(s) == RANDID_LEN && strspn(s, "0123456789abcdef") == RANDID_LEN;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void test_random(void)
{
    enum { N = 5000 };
    char(*ids)[RANDID_LEN + 1] = calloc(N, sizeof *ids);
    if (!CHECK(ids != NULL))
        return;
    int shape = 1, seen[RANDID_LEN][16];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < N; i++) {
        char id[RANDID_LEN + 2];
        memset(id, 'Z', sizeof id);
        shape &= randid_make(id) == 0 && is_id(id) && id[RANDID_LEN + 1] == 'Z';
        for (int k = 0; k < RANDID_LEN && shape; k++)
            seen[k][id[k] <= '9' ? id[k] - '0' : id[k] - 'a' + 10]++;
        memcpy(ids[i], id, RANDID_LEN + 1);
    }
    CHECK(shape);
    /* Every digit position takes every value. */
    int all = 1;
    for (int k = 0; k < RANDID_LEN; k++)
        for (int v = 0; v < 16; v++)
            all &= seen[k][v] > 0;
    CHECK(all);
    qsort(ids, N, sizeof *ids, cmp);
    int distinct = 1;
    for (int i = 1; i < N; i++)
        distinct &= strcmp(ids[i - 1], ids[i]) != 0;
    CHECK(distinct);
    free(ids);
}

static void test_ordered(void)
{
    char prev[RANDID_LEN + 1] = "", id[RANDID_LEN + 1];
    int shape = 1, sorted = 1, clock_ok = 1;
    int seen[RANDID_LEN][16];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 3000; i++) {
        int64_t before = clock_wall_ms();
        shape &= randid_make_ordered(id) == 0 && is_id(id);
        int64_t after = clock_wall_ms();
        char ts[13];
        memcpy(ts, id, 12);
        ts[12] = '\0';
        int64_t ms = (int64_t)strtoll(ts, NULL, 16);
        clock_ok &= ms >= before && ms <= after;
        /* Ids from a later millisecond sort after earlier ones. */
        if (prev[0] && strncmp(prev, id, 12) < 0)
            sorted &= strcmp(prev, id) < 0;
        else if (prev[0])
            sorted &= strncmp(prev, id, 12) == 0; /* never earlier */
        for (int k = 12; k < RANDID_LEN; k++)
            seen[k][id[k] <= '9' ? id[k] - '0' : id[k] - 'a' + 10]++;
        memcpy(prev, id, sizeof id);
        if (i % 1000 == 999) {
            struct timespec pause = {0, 2000000}; /* 2 ms: a new timestamp */
            nanosleep(&pause, NULL);
        }
    }
    CHECK(shape);
    CHECK(clock_ok);
    CHECK(sorted);
    int all = 1;
    for (int k = 12; k < RANDID_LEN; k++)
        for (int v = 0; v < 16; v++)
            all &= seen[k][v] > 0;
    CHECK(all);

    /* Two made 2 ms apart: the later sorts later, whatever the random
     * part. */
    char a[RANDID_LEN + 1], b[RANDID_LEN + 1];
    CHECK_INT(randid_make_ordered(a), 0);
    struct timespec pause = {0, 2000000};
    nanosleep(&pause, NULL);
    CHECK_INT(randid_make_ordered(b), 0);
    CHECK(strncmp(a, b, 12) < 0 && strcmp(a, b) < 0);
}

enum { THREADS = 4, PER_THREAD = 2000 };
static char threaded_ids[THREADS * PER_THREAD][RANDID_LEN + 1];

static void *make_ids(void *arg)
{
    char(*out)[RANDID_LEN + 1] = arg;
    for (int i = 0; i < PER_THREAD; i++)
        if (randid_make(out[i]) != 0)
            out[i][0] = '\0';
    return NULL;
}

static void test_threads(void)
{
    pthread_t t[THREADS];
    int started = 0;
    while (started < THREADS &&
           pthread_create(&t[started], NULL, make_ids, threaded_ids[started * PER_THREAD]) == 0)
        started++;
    CHECK_INT(started, THREADS);
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    int shape = 1;
    for (int i = 0; i < THREADS * PER_THREAD; i++)
        shape &= is_id(threaded_ids[i]);
    CHECK(shape);
    qsort(threaded_ids, THREADS * PER_THREAD, sizeof threaded_ids[0], cmp);
    int distinct = 1;
    for (int i = 1; i < THREADS * PER_THREAD; i++)
        distinct &= strcmp(threaded_ids[i - 1], threaded_ids[i]) != 0;
    CHECK(distinct);
}

int main(void)
{
    test_random();
    test_threads();
    test_ordered();
    return check_summary();
}
