/* libFuzzer harness for mcp-bridge's header and URL handling
 * (bridge/options.c): the --header check and ${ENV} expansion, the URL
 * check and the loopback test, on arbitrary strings.
 *
 * Invariants: an accepted header has a non-empty token name before its
 * colon and no CR or LF anywhere (no header injection); expansion of a
 * string without "${" is the identity; plain http is never accepted for a
 * host the loopback test rejects unless allow_http is set. */
#include "options.h"

#include <curl/curl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* libFuzzer calls this for each input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    char *s = malloc(size);
    if (!s)
        return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    int allow_http = data[0] & 1;
    enum bridge_transport t = (enum bridge_transport)((data[0] >> 1) % 4);

    if (!options_check_header(s)) {
        const char *colon = strchr(s, ':');
        if (!colon || colon == s || strchr(s, '\r') || strchr(s, '\n'))
            abort();
    }
    setenv("FUZZ_BRIDGE_VAR", "v", 1);
    const char *err = NULL;
    char *x = options_expand_env(s, &err);
    if (!x && !err)
        abort();
    if (x && !strstr(s, "${") && strcmp(x, s) != 0)
        abort();
    free(x);

    char msg[512];
    if (options_check_url(s, t, allow_http, msg, sizeof msg) == 0 && !allow_http) {
        CURLU *u = curl_url();
        char *scheme = NULL, *host = NULL;
        if (u && curl_url_set(u, CURLUPART_URL, s, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
            int plain = strcmp(scheme, "http") == 0 || strcmp(scheme, "ws") == 0;
            if (plain && !options_is_loopback(host))
                abort();
        }
        curl_free(scheme);
        curl_free(host);
        curl_url_cleanup(u);
    }
    options_is_loopback(s);
    free(s);
    return 0;
}
