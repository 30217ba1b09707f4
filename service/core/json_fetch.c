#include "json_fetch.h"

#include "log.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

struct body {
    char *data;
    size_t len, max;
    int too_big;
};

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

json_t *json_fetch(const struct json_fetch *f)
{
    if (f->timeout_ms <= 0) {
        log_event(LOG_WARN, NULL, f->event, "%s: no time left", f->url);
        return NULL;
    }
    CURL *c = curl_easy_init();
    if (!c) {
        log_event(LOG_WARN, NULL, f->event, "%s: out of memory", f->url);
        return NULL;
    }
    struct body b = {.max = f->max};
    curl_easy_setopt(c, CURLOPT_URL, f->url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, f->timeout_ms);
    if (f->userpwd) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERPWD, f->userpwd);
    }
    if (f->form)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, f->form);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    struct curl_slist *h = curl_slist_append(NULL, "Accept: application/json");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    json_t *doc = NULL;
    if (rc != CURLE_OK)
        log_event(LOG_WARN, NULL, f->event, "%s: %s", f->url,
                  b.too_big ? "answer too large" : curl_easy_strerror(rc));
    else if (status != 200)
        log_event(LOG_WARN, NULL, f->event, "%s: HTTP status %ld", f->url, status);
    else if (!(doc = json_loadb(b.data ? b.data : "", b.len, 0, NULL)) || !json_is_object(doc)) {
        log_event(LOG_WARN, NULL, f->event, "%s: not a JSON object", f->url);
        json_decref(doc);
        doc = NULL;
    }
    free(b.data);
    return doc;
}
