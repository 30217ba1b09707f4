/* test_json_fetch — exchanges with a real HTTP server on loopback
 * (json_fetch.c): a JSON object comes back; a non-200 status, a body that is
 * not an object and one over the cap do not; a POST carries its form and
 * HTTP Basic credentials; a silent server is given up on at the deadline;
 * slow exchanges run at once, not one after another; a fiber that waits for
 * an answer parks, so another fiber of the same loop thread runs meanwhile
 * (a blocking exchange held the whole thread); a cancelled fiber gives up
 * at once and its exchange is freed by the fetcher; shutdown ends waits in
 * flight, and a later fetch starts the fetcher again. And the JWKS fetch on
 * top of it (jwks.c): fibers that need a key at once wait for one fetch,
 * parked, and get its key; a fiber cancelled while waiting stops waiting. */
#include "check.h"
#include "clock.h"
#include "fiber.h"
#include "json_fetch.h"
#include "jwks.h"
#include "loop.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SLOW_MS 600

static int port;
static int listener = -1;
static atomic_int in_flight, most_in_flight, jwks_served;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void answer(int fd, int status, const char *body)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, strlen(body));
    /* The client may have given up (a cancelled or shut-down fetch):
     * MSG_NOSIGNAL, or the SIGPIPE would end the test. */
    if (send(fd, head, (size_t)n, MSG_NOSIGNAL) < 0 ||
        send(fd, body, strlen(body), MSG_NOSIGNAL) < 0)
        return;
}

/* One connection: reads the request, answers by its path. */
static void *serve_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char req[8192] = "";
    size_t len = 0;
    char *end = NULL;
    while (len < sizeof req - 1 && !(end = strstr(req, "\r\n\r\n"))) {
        ssize_t n = read(fd, req + len, sizeof req - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        req[len] = '\0';
    }
    /* The body, by Content-Length. */
    const char *cl = strstr(req, "Content-Length: ");
    size_t want = cl && end ? (size_t)(end + 4 - req) + strtoul(cl + 16, NULL, 10) : len;
    while (len < want && len < sizeof req - 1) {
        ssize_t n = read(fd, req + len, sizeof req - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        req[len] = '\0';
    }
    if (strncmp(req, "GET /ok ", 8) == 0) {
        answer(fd, 200, "{\"a\":1}");
    } else if (strncmp(req, "GET /slow ", 10) == 0) {
        /* How many slow answers are under way at once. */
        int now = atomic_fetch_add(&in_flight, 1) + 1;
        for (int m = atomic_load(&most_in_flight); now > m;)
            if (atomic_compare_exchange_weak(&most_in_flight, &m, now))
                break;
        sleep_ms(SLOW_MS);
        atomic_fetch_sub(&in_flight, 1);
        answer(fd, 200, "{\"slow\":true}");
    } else if (strncmp(req, "GET /missing ", 13) == 0) {
        answer(fd, 404, "{}");
    } else if (strncmp(req, "GET /array ", 11) == 0) {
        answer(fd, 200, "[1]");
    } else if (strncmp(req, "GET /big ", 9) == 0) {
        answer(fd, 200, "{\"padding\":\"0123456789012345678901234567890123456789\"}");
    } else if (strncmp(req, "GET /.well-known/openid-configuration ", 38) == 0) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"issuer\":\"http://127.0.0.1:%d\",\"jwks_uri\":\"http://127.0.0.1:%d/jwks\"}",
                 port, port);
        answer(fd, 200, body);
    } else if (strncmp(req, "GET /jwks ", 10) == 0) {
        /* RFC 7517's example EC key (A.1), slowly. */
        atomic_fetch_add(&jwks_served, 1);
        sleep_ms(SLOW_MS);
        answer(fd, 200,
               "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"use\":\"sig\",\"kid\":\"1\","
               "\"x\":\"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4\","
               "\"y\":\"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM\"}]}");
    } else if (strncmp(req, "GET /silent ", 12) == 0) {
        sleep_ms(3000);
    } else if (strncmp(req, "POST /echo ", 11) == 0) {
        /* What arrived: the form and the credentials. */
        const char *auth = strstr(req, "Authorization: Basic ");
        char a[128] = "";
        if (auth)
            sscanf(auth + 21, "%127[^\r]", a);
        char body[512];
        snprintf(body, sizeof body, "{\"auth\":\"%s\",\"form\":\"%s\"}", a, end ? end + 4 : "");
        answer(fd, 200, body);
    } else {
        answer(fd, 400, "{}");
    }
    close(fd);
    return NULL;
}

static void *accept_main(void *arg)
{
    (void)arg;
    for (;;) {
        int fd = accept(listener, NULL, NULL);
        if (fd < 0)
            return NULL;
        pthread_t t;
        if (pthread_create(&t, NULL, serve_main, (void *)(intptr_t)fd) == 0)
            pthread_detach(t);
        else
            close(fd);
    }
}

static int server_start(void)
{
    listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (listener < 0 || bind(listener, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(listener, 64) != 0 || getsockname(listener, (struct sockaddr *)&a, &alen) != 0)
        return -1;
    port = ntohs(a.sin_port);
    pthread_t t;
    if (pthread_create(&t, NULL, accept_main, NULL) != 0)
        return -1;
    pthread_detach(t);
    return 0;
}

static json_t *get(const char *path, long timeout_ms, size_t max)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    struct json_fetch f = {
        .url = url, .timeout_ms = timeout_ms, .max = max, .event = "test_fetch_failed"};
    return json_fetch(&f);
}

static void test_answers(void)
{
    json_t *ok = get("/ok", 5000, 4096);
    CHECK(json_is_object(ok));
    CHECK_INT(json_integer_value(json_object_get(ok, "a")), 1);
    json_decref(ok);
    CHECK(get("/missing", 5000, 4096) == NULL);
    CHECK(get("/array", 5000, 4096) == NULL);
    CHECK(get("/big", 5000, 16) == NULL);
    json_t *big = get("/big", 5000, 4096); /* under a larger cap it reads */
    CHECK(json_is_object(big));
    json_decref(big);
    CHECK(get("/ok", 0, 4096) == NULL); /* no time left */

    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/echo", port);
    char *form = strdup("token=abc&token_type_hint=access_token");
    char *userpwd = strdup("client:secret");
    struct json_fetch f = {.url = url,
                           .form = form,
                           .userpwd = userpwd,
                           .timeout_ms = 5000,
                           .max = 4096,
                           .event = "test_fetch_failed"};
    json_t *echo = json_fetch(&f);
    CHECK_STR(json_string_value(json_object_get(echo, "form")),
              "token=abc&token_type_hint=access_token");
    CHECK_STR(json_string_value(json_object_get(echo, "auth")), "Y2xpZW50OnNlY3JldA==");
    json_decref(echo);
    free(form);
    free(userpwd);
}

static void test_silent(void)
{
    int64_t t0 = clock_mono_ms();
    CHECK(get("/silent", 300, 4096) == NULL);
    int64_t took = clock_mono_ms() - t0;
    CHECK(took >= 250 && took < 2500);
}

static void *slow_main(void *arg)
{
    json_t *r = get("/slow", 10000, 4096);
    *(int *)arg = json_is_true(json_object_get(r, "slow"));
    json_decref(r);
    return NULL;
}

/* Four slow exchanges from four threads: the server sees them all at once. */
static void test_together(void)
{
    atomic_store(&most_in_flight, 0);
    pthread_t t[4];
    int got[4] = {0};
    for (int i = 0; i < 4; i++)
        CHECK_INT(pthread_create(&t[i], NULL, slow_main, &got[i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK_INT(got[i], 1);
    }
    CHECK_INT(atomic_load(&most_in_flight), 4);
}

/* ---- on loop fibers ---- */

static atomic_int ticks, fetched_ok, ticks_during, fibers_done;

static void fetcher_fiber(void *arg)
{
    (void)arg;
    int before = atomic_load(&ticks);
    json_t *r = get("/slow", 10000, 4096);
    atomic_store(&fetched_ok, json_is_true(json_object_get(r, "slow")));
    atomic_store(&ticks_during, atomic_load(&ticks) - before);
    json_decref(r);
    atomic_fetch_add(&fibers_done, 1);
}

static void ticker_fiber(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++) {
        fiber_sleep_ms(10);
        atomic_fetch_add(&ticks, 1);
    }
    atomic_fetch_add(&fibers_done, 1);
}

static int wait_done(int want, int ms)
{
    int64_t deadline = clock_mono_ms() + ms;
    while (atomic_load(&fibers_done) < want && clock_mono_ms() < deadline)
        sleep_ms(5);
    return atomic_load(&fibers_done);
}

static void test_fiber_parks(void)
{
    CHECK_INT(loop_start(1), 0);
    CHECK_INT(loop_spawn(fetcher_fiber, NULL), 0);
    CHECK_INT(loop_spawn(ticker_fiber, NULL), 0);
    CHECK_INT(wait_done(2, 10000), 2);
    CHECK_INT(atomic_load(&fetched_ok), 1);
    /* The ticker (20 ticks in about 200 ms) ran while the fetch (600 ms)
     * waited, on the one loop thread. */
    CHECK_INT(atomic_load(&ticks_during), 20);
    loop_stop();
}

static atomic_int silent_returned;

static void silent_fiber(void *arg)
{
    (void)arg;
    json_t *r = get("/silent", 20000, 4096);
    CHECK(r == NULL);
    atomic_store(&silent_returned, 1);
}

/* loop_stop cancels the fiber: it stops waiting at once; the exchange
 * (still in libcurl) is the fetcher's to finish and free. */
static void test_fiber_cancelled(void)
{
    CHECK_INT(loop_start(1), 0);
    CHECK_INT(loop_spawn(silent_fiber, NULL), 0);
    sleep_ms(200);
    int64_t t0 = clock_mono_ms();
    loop_stop();
    CHECK_INT(atomic_load(&silent_returned), 1);
    CHECK(clock_mono_ms() - t0 < 2000);
}

static void *silent_main(void *arg)
{
    *(json_t **)arg = get("/silent", 20000, 4096);
    return NULL;
}

static void test_shutdown(void)
{
    json_t *r = (json_t *)&r; /* not NULL until the thread says */
    pthread_t t;
    CHECK_INT(pthread_create(&t, NULL, silent_main, &r), 0);
    sleep_ms(200);
    int64_t t0 = clock_mono_ms();
    json_fetch_shutdown();
    pthread_join(t, NULL);
    CHECK(r == NULL);
    CHECK(clock_mono_ms() - t0 < 2000);
    json_fetch_shutdown(); /* twice: nothing to do */
    /* The next fetch starts the fetcher again. */
    json_t *ok = get("/ok", 5000, 4096);
    CHECK(json_is_object(ok));
    json_decref(ok);
}

/* ---- the JWKS fetch ---- */

static atomic_int keys_found, key_fibers_done;

static void key_fiber(void *arg)
{
    (void)arg;
    const char *why = NULL;
    int unreachable = 0;
    cjose_jwk_t *k = jwks_key("1", CJOSE_JWK_KTY_EC, &why, &unreachable);
    if (k) {
        atomic_fetch_add(&keys_found, 1);
        jwks_release(k);
    }
    atomic_fetch_add(&key_fibers_done, 1);
}

static void test_jwks_one_fetch(void)
{
    char issuer[64];
    snprintf(issuer, sizeof issuer, "http://127.0.0.1:%d", port);
    CHECK_INT(jwks_configure(issuer), 0);
    atomic_store(&ticks, 0);
    atomic_store(&fibers_done, 0);
    CHECK_INT(loop_start(1), 0);
    for (int i = 0; i < 3; i++)
        CHECK_INT(loop_spawn(key_fiber, NULL), 0);
    CHECK_INT(loop_spawn(ticker_fiber, NULL), 0);
    int64_t deadline = clock_mono_ms() + 10000;
    while (atomic_load(&key_fibers_done) < 3 && clock_mono_ms() < deadline)
        sleep_ms(5);
    CHECK_INT(atomic_load(&keys_found), 3);
    CHECK_INT(atomic_load(&jwks_served), 1); /* one fetch served all three */
    CHECK_INT(wait_done(1, 5000), 1);        /* the ticker ran beside them */
    loop_stop();
    jwks_shutdown();
}

/* A new issuer, never fetched: a fiber that waits for another's fetch
 * (of a set that answers in SLOW_MS) is cancelled and stops waiting. */
static void test_jwks_cancelled(void)
{
    char issuer[64];
    snprintf(issuer, sizeof issuer, "http://127.0.0.1:%d", port);
    CHECK_INT(jwks_configure(issuer), 0);
    atomic_store(&key_fibers_done, 0);
    CHECK_INT(loop_start(1), 0);
    CHECK_INT(loop_spawn(key_fiber, NULL), 0);
    CHECK_INT(loop_spawn(key_fiber, NULL), 0);
    sleep_ms(100);
    int64_t t0 = clock_mono_ms();
    loop_stop();
    CHECK_INT(atomic_load(&key_fibers_done), 2);
    CHECK(clock_mono_ms() - t0 < 2000);
    jwks_shutdown();
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (server_start() != 0) {
        perror("server");
        return 1;
    }
    test_answers();
    test_silent();
    test_together();
    test_fiber_parks();
    test_fiber_cancelled();
    test_shutdown();
    test_jwks_one_fetch();
    test_jwks_cancelled();
    json_fetch_shutdown();
    curl_global_cleanup();
    return check_summary();
}
