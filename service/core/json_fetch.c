/* json_fetch — see json_fetch.h. */
#include "json_fetch.h"
#include "clock.h"
#include "fcond.h"
#include "log.h"
#include "thread_stack.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* How much longer than libcurl's own deadline a caller waits: the fetcher
 * reports a timed-out exchange within a poll of it. */
#define WAIT_SLACK_MS 1000
/* The fetcher's longest sleep with nothing to do: libcurl's own timers
 * (a deadline, a retry) wake it earlier. */
#define POLL_MS 1000

struct body {
    char *data;
    size_t len, max;
    int too_big;
};

/* One exchange. Its caller and the fetcher both own it; the last to let go
 * frees it, so a caller that gave up never frees what libcurl still
 * writes into. */
struct job {
    struct job *next; /* fx.queue, then fx.active (the fetcher's alone) */
    CURL *easy;
    struct curl_slist *headers;
    struct body b;
    CURLcode rc;
    long status;
    int done;   /* under fx.mu */
    int owners; /* under fx.mu */
};

static struct {
    pthread_mutex_t mu;
    struct fcond done;  /* broadcast when any job is done */
    int done_ready;     /* `done` was initialized (once, kept) */
    struct job *queue;  /* handed over, not yet added to libcurl */
    struct job *active; /* in libcurl: the fetcher's only */
    CURLM *multi;
    pthread_t thread;
    int running, stopping;
} fx = {.mu = PTHREAD_MUTEX_INITIALIZER};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct body *b = ud;
    size_t n = size * nmemb;
    if (b->len + n > b->max) {
        b->too_big = 1;
        return 0;
    }
    char *grown = realloc(b->data, b->len + n + 1);
    if (!grown)
        return 0;
    memcpy(grown + b->len, ptr, n);
    b->len += n;
    grown[b->len] = '\0';
    b->data = grown;
    return n;
}

static void job_free(struct job *j)
{
    if (!j)
        return;
    curl_easy_cleanup(j->easy);
    curl_slist_free_all(j->headers);
    free(j->b.data);
    free(j);
}

/* An exchange set up from f, every string copied. NULL when out of memory. */
static struct job *job_new(const struct json_fetch *f)
{
    struct job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->b.max = f->max;
    j->easy = curl_easy_init();
    j->headers = curl_slist_append(NULL, "Accept: application/json");
    CURL *c = j->easy;
    if (!c || !j->headers || curl_easy_setopt(c, CURLOPT_URL, f->url) != CURLE_OK ||
        (f->form && curl_easy_setopt(c, CURLOPT_COPYPOSTFIELDS, f->form) != CURLE_OK) ||
        (f->userpwd && curl_easy_setopt(c, CURLOPT_USERPWD, f->userpwd) != CURLE_OK)) {
        job_free(j);
        return NULL;
    }
    if (f->userpwd)
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, f->timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &j->b);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, j->headers);
    curl_easy_setopt(c, CURLOPT_PRIVATE, j);
    return j;
}

/* The fetcher is done with j (out of libcurl): its caller may read it. */
static void finish(struct job *j, CURLcode rc)
{
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &status);
    pthread_mutex_lock(&fx.mu);
    j->rc = rc;
    j->status = status;
    j->done = 1;
    int last = --j->owners == 0;
    fcond_broadcast(&fx.done);
    pthread_mutex_unlock(&fx.mu);
    if (last)
        job_free(j);
}

/* Takes j out of the fetcher's list and out of libcurl. */
static void retire(struct job *j)
{
    for (struct job **p = &fx.active; *p; p = &(*p)->next)
        if (*p == j) {
            *p = j->next;
            break;
        }
    curl_multi_remove_handle(fx.multi, j->easy);
}

static void *fetcher_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "mcpd-fetch");
    for (;;) {
        pthread_mutex_lock(&fx.mu);
        int stopping = fx.stopping;
        struct job *q = fx.queue;
        fx.queue = NULL;
        pthread_mutex_unlock(&fx.mu);
        while (q) {
            struct job *next = q->next;
            if (curl_multi_add_handle(fx.multi, q->easy) == CURLM_OK) {
                q->next = fx.active;
                fx.active = q;
            } else {
                finish(q, CURLE_OUT_OF_MEMORY);
            }
            q = next;
        }
        if (stopping)
            break;
        int running;
        curl_multi_perform(fx.multi, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(fx.multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            /* m is gone once its handle leaves libcurl: read it first. */
            CURLcode rc = m->data.result;
            char *j = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &j);
            retire((struct job *)(void *)j);
            finish((struct job *)(void *)j, rc);
        }
        curl_multi_poll(fx.multi, NULL, 0, POLL_MS, NULL);
    }
    while (fx.active) {
        struct job *j = fx.active;
        retire(j);
        finish(j, CURLE_ABORTED_BY_CALLBACK);
    }
    return NULL;
}

/* Starts the fetcher unless it runs (under fx.mu). 0, or -1. */
static int start_locked(void)
{
    if (fx.running)
        return fx.stopping ? -1 : 0;
    if (!fx.done_ready) {
        if (fcond_init(&fx.done) != 0)
            return -1;
        fx.done_ready = 1;
    }
    fx.multi = curl_multi_init();
    pthread_attr_t attr;
    if (!fx.multi || thread_stack_attr(&attr, 0, 0) != 0) {
        curl_multi_cleanup(fx.multi);
        fx.multi = NULL;
        return -1;
    }
    int err = pthread_create(&fx.thread, &attr, fetcher_main, NULL);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        curl_multi_cleanup(fx.multi);
        fx.multi = NULL;
        return -1;
    }
    fx.running = 1;
    return 0;
}

void json_fetch_shutdown(void)
{
    pthread_mutex_lock(&fx.mu);
    if (!fx.running || fx.stopping) {
        pthread_mutex_unlock(&fx.mu);
        return;
    }
    fx.stopping = 1;
    curl_multi_wakeup(fx.multi);
    pthread_mutex_unlock(&fx.mu);
    pthread_join(fx.thread, NULL);
    pthread_mutex_lock(&fx.mu);
    curl_multi_cleanup(fx.multi);
    fx.multi = NULL;
    fx.running = fx.stopping = 0;
    pthread_mutex_unlock(&fx.mu);
}

json_t *json_fetch(const struct json_fetch *f)
{
    if (f->timeout_ms <= 0) {
        log_event(LOG_WARN, NULL, f->event, "%s: no time left", f->url);
        return NULL;
    }
    struct job *j = job_new(f);
    if (!j) {
        log_event(LOG_WARN, NULL, f->event, "%s: out of memory", f->url);
        return NULL;
    }
    int64_t deadline = clock_mono_ms() + f->timeout_ms + WAIT_SLACK_MS;
    pthread_mutex_lock(&fx.mu);
    if (start_locked() != 0) {
        pthread_mutex_unlock(&fx.mu);
        log_event(LOG_WARN, NULL, f->event, "%s: the fetcher thread is not running", f->url);
        job_free(j);
        return NULL;
    }
    j->owners = 2;
    j->next = fx.queue;
    fx.queue = j;
    curl_multi_wakeup(fx.multi);
    /* A cancelled fiber's wait times out at once: it gives up and leaves
     * the exchange to the fetcher. */
    while (!j->done && fcond_wait_until(&fx.done, &fx.mu, deadline) != ETIMEDOUT)
        ;
    int done = j->done;
    int last = --j->owners == 0;
    pthread_mutex_unlock(&fx.mu);
    if (!done) {
        log_event(LOG_WARN, NULL, f->event, "%s: gave up waiting for the answer", f->url);
        return NULL;
    }
    json_t *doc = NULL;
    if (j->rc != CURLE_OK)
        log_event(LOG_WARN, NULL, f->event, "%s: %s", f->url,
                  j->b.too_big ? "answer too large" : curl_easy_strerror(j->rc));
    else if (j->status != 200)
        log_event(LOG_WARN, NULL, f->event, "%s: HTTP status %ld", f->url, j->status);
    else if (!(doc = json_loadb(j->b.data ? j->b.data : "", j->b.len, 0, NULL)) ||
             !json_is_object(doc)) {
        log_event(LOG_WARN, NULL, f->event, "%s: not a JSON object", f->url);
        json_decref(doc);
        doc = NULL;
    }
    if (last)
        job_free(j);
    return doc;
}
