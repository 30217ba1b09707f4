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
    int64_t base = hint_ms > 0 ? hint_ms : BACKOFF_BASE_MS;
    int64_t d = base << (attempt < 10 ? attempt : 10);
    if (d > BACKOFF_CAP_MS)
        d = BACKOFF_CAP_MS;
    return d / 2 + (int64_t)(random() % (d / 2 + 1));
}
