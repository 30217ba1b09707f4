/* connection — see connection.h. */
#include "connection.h"

#include <stdlib.h>

#define BACKOFF_BASE_MS 250
#define BACKOFF_CAP_MS 5000

void connection_setup(CURL *e, const struct bridge_options *o, char *errbuf)
{
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (o->cacert)
        curl_easy_setopt(e, CURLOPT_CAINFO, o->cacert);
}

int64_t connection_backoff_ms(int attempt, long hint_ms)
{
    int shift = attempt < 10 ? attempt : 10;
    if (hint_ms > 0) {
        /* The server said how long to wait (SSE retry:): never sooner.
         * Jitter only goes above it; repeated failures still back off. */
        int64_t d = (int64_t)hint_ms << shift;
        int64_t cap = hint_ms > BACKOFF_CAP_MS ? hint_ms : BACKOFF_CAP_MS;
        if (d > cap)
            d = cap;
        return d + (int64_t)(random() % (d / 4 + 1));
    }
    int64_t d = (int64_t)BACKOFF_BASE_MS << shift;
    if (d > BACKOFF_CAP_MS)
        d = BACKOFF_CAP_MS;
    return d / 2 + (int64_t)(random() % (d / 2 + 1));
}
