/* oauth_util — see oauth_util.h. URLs are split with libcurl's URL API. */
#include "oauth_util.h"

#include <ctype.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

char *oauth_challenge_param(const char *h, const char *name)
{
    if (!h)
        return NULL;
    const char *p = h;
    /* find the Bearer scheme (a header may carry several challenges) */
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            return NULL;
        if (strncasecmp(p, "Bearer", 6) == 0 && (p[6] == ' ' || p[6] == '\0')) {
            p += 6;
            break;
        }
        p++;
    }
    size_t nlen = strlen(name);
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\t')
            p++;
        const char *k = p;
        while (*p && *p != '=' && *p != ' ' && *p != ',')
            p++;
        size_t klen = (size_t)(p - k);
        while (*p == ' ')
            p++;
        if (*p != '=') {
            /* a bare token: the start of another scheme's challenge */
            if (klen)
                return NULL;
            continue;
        }
        p++;
        while (*p == ' ')
            p++;
        char *v = malloc(strlen(p) + 1), *o = v;
        if (!v)
            return NULL;
        if (*p == '"') {
            p++;
            while (*p && *p != '"') {
                if (*p == '\\' && p[1])
                    p++;
                *o++ = *p++;
            }
            if (*p == '"')
                p++;
        } else {
            while (*p && *p != ',' && *p != ' ')
                *o++ = *p++;
        }
        *o = '\0';
        if (klen == nlen && strncasecmp(k, name, nlen) == 0)
            return v;
        free(v);
    }
    return NULL;
}

/* Splits url into its origin and its path without the trailing slash
 * (empty for "/"). 0, or -1. */
static int split(const char *url, char **origin, char **path)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *pth = NULL;
    int rc = -1;
    *origin = *path = NULL;
    if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PATH, &pth, 0) != CURLUE_OK)
        goto out;
    curl_url_get(u, CURLUPART_PORT, &port, 0);
    size_t cap = strlen(scheme) + strlen(host) + (port ? strlen(port) : 0) + 8;
    *origin = malloc(cap);
    size_t plen = strlen(pth);
    while (plen && pth[plen - 1] == '/')
        plen--;
    *path = malloc(plen + 1);
    if (!*origin || !*path) {
        free(*origin);
        free(*path);
        *origin = *path = NULL;
        goto out;
    }
    snprintf(*origin, cap, "%s://%s%s%s", scheme, host, port ? ":" : "", port ? port : "");
    memcpy(*path, pth, plen);
    (*path)[plen] = '\0';
    rc = 0;
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(pth);
    curl_url_cleanup(u);
    return rc;
}

char *oauth_origin(const char *url)
{
    char *origin, *path;
    if (split(url, &origin, &path) < 0)
        return NULL;
    free(path);
    return origin;
}

char *oauth_http_url(const char *url)
{
    static const struct {
        const char *from, *to;
    } map[] = {{"ws://", "http://"}, {"wss://", "https://"}, {"tcp://", "http://"}};
    const char *scheme = "";
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strncasecmp(url, map[i].from, strlen(map[i].from)) == 0) {
            scheme = map[i].to;
            url += strlen(map[i].from);
            break;
        }
    size_t rest = strcspn(url, "#");
    size_t cap = strlen(scheme) + rest + 1;
    char *out = malloc(cap);
    if (out)
        snprintf(out, cap, "%s%.*s", scheme, (int)rest, url);
    return out;
}

static char *join3(const char *a, const char *b, const char *c)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s%s%s", a, b, c);
    return s;
}

int oauth_prm_urls(const char *server_url, char **out)
{
    char *origin, *path;
    int n = 0;
    out[0] = NULL;
    if (split(server_url, &origin, &path) < 0)
        return 0;
    if (*path)
        out[n++] = join3(origin, "/.well-known/oauth-protected-resource", path);
    out[n++] = join3(origin, "/.well-known/oauth-protected-resource", "");
    out[n] = NULL;
    free(origin);
    free(path);
    return n;
}

int oauth_as_urls(const char *issuer, char **out)
{
    char *origin, *path;
    int n = 0;
    out[0] = NULL;
    if (split(issuer, &origin, &path) < 0)
        return 0;
    out[n++] = join3(origin, "/.well-known/oauth-authorization-server", path);
    out[n++] = join3(origin, "/.well-known/openid-configuration", path);
    if (*path)
        out[n++] = join3(origin, path, "/.well-known/openid-configuration");
    if (n < OAUTH_MAX_URLS)
        out[n] = NULL;
    free(origin);
    free(path);
    return n;
}

void oauth_urls_free(char **out, int n)
{
    for (int i = 0; i < n; i++)
        free(out[i]);
}

int oauth_has_word(const char *list, const char *word)
{
    size_t w = strlen(word);
    for (const char *p = list; p && *p;) {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, " ");
        if (n == w && strncmp(p, word, w) == 0)
            return 1;
        p += n;
    }
    return 0;
}
