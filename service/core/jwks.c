/* jwks — see jwks.h. */
#include "jwks.h"
#include "json_fetch.h"
#include "clock.h"
#include "fcond.h"
#include "log.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    char *issuer;
    pthread_mutex_t mu; /* the keys and the times below; never held across a fetch */
    struct jwks_key keys[JWKS_KEYS_MAX];
    int nkeys;
    int ever_fetched;     /* a set was read once: the issuer was reachable */
    int64_t fetched_ms;   /* monotonic time of the last good fetch */
    int64_t attempted_ms; /* of the last attempt; 0: none yet */
    uint64_t fetches;
    char *jwks_uri; /* from the metadata, once found */
    /* One fetch at a time: a request that needs a key waits for the one
     * under way, parked on `fetched` (with a deadline, so that a fiber
     * cancelled at shutdown stops waiting at once). */
    int fetching;
    struct fcond fetched;
    int fetched_ready; /* `fetched` was initialized (once, kept) */
} jw = {.mu = PTHREAD_MUTEX_INITIALIZER};

int jwks_configure(const char *issuer)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return -1;
    if (!jw.fetched_ready) {
        if (fcond_init(&jw.fetched) != 0)
            return -1;
        jw.fetched_ready = 1;
    }
    free(jw.issuer);
    jw.issuer = strdup(issuer);
    return jw.issuer ? 0 : -1;
}

static void drop_keys(struct jwks_key *keys, int n)
{
    for (int i = 0; i < n; i++)
        cjose_jwk_release(keys[i].jwk);
}

void jwks_shutdown(void)
{
    pthread_mutex_lock(&jw.mu);
    drop_keys(jw.keys, jw.nkeys);
    jw.nkeys = 0;
    /* The next issuer starts afresh: a fetch at once, nothing known. */
    jw.ever_fetched = 0;
    jw.fetched_ms = jw.attempted_ms = 0;
    free(jw.issuer);
    free(jw.jwks_uri);
    jw.issuer = jw.jwks_uri = NULL;
    pthread_mutex_unlock(&jw.mu);
}

uint64_t jwks_fetches(void)
{
    pthread_mutex_lock(&jw.mu);
    uint64_t n = jw.fetches;
    pthread_mutex_unlock(&jw.mu);
    return n;
}

char *jwks_discovery_url(const char *issuer, int kind)
{
    size_t len = strlen(issuer);
    while (len && issuer[len - 1] == '/')
        len--;
    const char *scheme_end = strstr(issuer, "://");
    if (!scheme_end || (size_t)(scheme_end - issuer) + 3 >= len)
        return NULL;
    char *url = NULL;
    int n;
    if (kind == 0) {
        n = asprintf(&url, "%.*s/.well-known/openid-configuration", (int)len, issuer);
    } else {
        const char *host = scheme_end + 3;
        size_t origin = (size_t)(host - issuer) + strcspn(host, "/");
        if (origin > len)
            origin = len;
        n = asprintf(&url, "%.*s/.well-known/oauth-authorization-server%.*s", (int)origin, issuer,
                     (int)(len - origin), issuer + origin);
    }
    return n < 0 ? NULL : url;
}

const char *jwks_uri_of(json_t *doc, const char *issuer, const char **why)
{
    const char *iss = json_string_value(json_object_get(doc, "issuer"));
    if (!iss || strcmp(iss, issuer) != 0) {
        *why = "the authorization server's metadata names another issuer";
        return NULL;
    }
    const char *uri = json_string_value(json_object_get(doc, "jwks_uri"));
    if (!uri || (strncmp(uri, "https://", 8) != 0 && strncmp(uri, "http://", 7) != 0)) {
        *why = "the authorization server's metadata has no jwks_uri";
        return NULL;
    }
    return uri;
}

int jwks_parse(json_t *doc, struct jwks_key *out, int max)
{
    json_t *keys = json_object_get(doc, "keys");
    if (!json_is_array(keys))
        return -1;
    int n = 0;
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k)
    {
        if (n == max)
            break;
        const char *kty = json_string_value(json_object_get(k, "kty"));
        const char *use = json_string_value(json_object_get(k, "use"));
        if (!kty || (strcmp(kty, "RSA") != 0 && strcmp(kty, "EC") != 0))
            continue; /* symmetric keys never verify a token; OKP is not supported */
        if (use && strcmp(use, "sig") != 0)
            continue;
        /* Only the public half is read: a set that leaks a private one
         * must not make mcpd hold it. */
        json_t *pub = json_deep_copy(k);
        if (!pub)
            continue;
        static const char *const priv[] = {"d", "p", "q", "dp", "dq", "qi", "oth"};
        for (size_t j = 0; j < sizeof priv / sizeof priv[0]; j++)
            json_object_del(pub, priv[j]);
        char *text = json_dumps(pub, JSON_COMPACT);
        json_decref(pub);
        if (!text)
            continue;
        cjose_err err;
        cjose_jwk_t *jwk = cjose_jwk_import(text, strlen(text), &err);
        free(text);
        if (!jwk)
            continue;
        const char *kid = json_string_value(json_object_get(k, "kid"));
        if (kid && strlen(kid) >= sizeof out[n].kid) {
            cjose_jwk_release(jwk);
            continue;
        }
        snprintf(out[n].kid, sizeof out[n].kid, "%s", kid ? kid : "");
        out[n].kty = strcmp(kty, "RSA") == 0 ? CJOSE_JWK_KTY_RSA : CJOSE_JWK_KTY_EC;
        out[n].jwk = jwk;
        n++;
    }
    return n;
}

/* ---- fetching ---- */

/* GETs url as JSON by deadline (monotonic ms). NULL (and a warning naming
 * what failed) on any error. */
static json_t *get_json(const char *url, int64_t deadline)
{
    struct json_fetch f = {.url = url,
                           .timeout_ms = (long)(deadline - clock_mono_ms()),
                           .max = JWKS_DOC_MAX,
                           .event = "oauth_fetch_failed"};
    return json_fetch(&f);
}

/* The jwks_uri, from the metadata (found once, then kept). Caller frees. */
static char *find_jwks_uri(int64_t deadline)
{
    pthread_mutex_lock(&jw.mu);
    char *known = jw.jwks_uri ? strdup(jw.jwks_uri) : NULL;
    pthread_mutex_unlock(&jw.mu);
    if (known)
        return known;
    for (int kind = 0; kind < 2; kind++) {
        char *url = jwks_discovery_url(jw.issuer, kind);
        json_t *doc = url ? get_json(url, deadline) : NULL;
        const char *why = NULL;
        const char *uri = doc ? jwks_uri_of(doc, jw.issuer, &why) : NULL;
        if (why)
            log_event(LOG_WARN, NULL, "oauth_metadata_refused", "%s: %s", url, why);
        char *found = uri ? strdup(uri) : NULL;
        json_decref(doc);
        free(url);
        if (found) {
            pthread_mutex_lock(&jw.mu);
            free(jw.jwks_uri);
            jw.jwks_uri = strdup(found);
            pthread_mutex_unlock(&jw.mu);
            return found;
        }
    }
    return NULL;
}

/* Fetches the set and, when it reads, replaces the keys held. */
static void refresh(void)
{
    /* One deadline for the metadata and the set together. */
    int64_t deadline = clock_mono_ms() + JWKS_FETCH_TIMEOUT_MS;
    char *uri = find_jwks_uri(deadline);
    json_t *doc = uri ? get_json(uri, deadline) : NULL;
    struct jwks_key fresh[JWKS_KEYS_MAX];
    int n = doc ? jwks_parse(doc, fresh, JWKS_KEYS_MAX) : -1;
    json_decref(doc);
    if (doc && n < 0)
        log_event(LOG_WARN, NULL, "oauth_fetch_failed", "%s: not a JWK set", uri);
    pthread_mutex_lock(&jw.mu);
    jw.fetches++;
    if (n >= 0) {
        drop_keys(jw.keys, jw.nkeys);
        memcpy(jw.keys, fresh, (size_t)n * sizeof fresh[0]);
        jw.nkeys = n;
        jw.ever_fetched = 1;
        jw.fetched_ms = clock_mono_ms();
    }
    pthread_mutex_unlock(&jw.mu);
    if (n >= 0)
        log_event(LOG_INFO, NULL, "oauth_keys_fetched", "%d signing keys from %s", n, uri);
    else if (!uri) /* the metadata may have moved its jwks_uri: look again next time */
        log_event(LOG_WARN, NULL, "oauth_fetch_failed", "no metadata for issuer %s", jw.issuer);
    free(uri);
    if (n < 0) {
        pthread_mutex_lock(&jw.mu);
        free(jw.jwks_uri);
        jw.jwks_uri = NULL;
        pthread_mutex_unlock(&jw.mu);
    }
}

/* Under mu: the key, retained, or NULL. */
static cjose_jwk_t *lookup(const char *kid, cjose_jwk_kty_t kty)
{
    cjose_jwk_t *found = NULL;
    int matches = 0;
    for (int i = 0; i < jw.nkeys; i++) {
        if (jw.keys[i].kty != kty)
            continue;
        if (kid ? strcmp(jw.keys[i].kid, kid) == 0 : 1) {
            found = jw.keys[i].jwk;
            matches++;
        }
    }
    /* Without a kid, only a set of one such key says which key it is. */
    if (!found || (!kid && matches != 1))
        return NULL;
    cjose_err err;
    return cjose_jwk_retain(found, &err);
}

void jwks_release(cjose_jwk_t *jwk)
{
    if (!jwk)
        return;
    pthread_mutex_lock(&jw.mu);
    cjose_jwk_release(jwk);
    pthread_mutex_unlock(&jw.mu);
}

/* Under mu: may a fetch start now? */
static int may_fetch(int64_t now)
{
    return !jw.attempted_ms || now - jw.attempted_ms >= JWKS_REFRESH_MIN_MS;
}

cjose_jwk_t *jwks_key(const char *kid, cjose_jwk_kty_t kty, const char **why, int *unreachable)
{
    pthread_mutex_lock(&jw.mu);
    int64_t now = clock_mono_ms();
    int stale = jw.ever_fetched && now - jw.fetched_ms >= JWKS_MAX_AGE_MS;
    cjose_jwk_t *k = lookup(kid, kty);
    if (!k && jw.fetching) {
        /* The fetch under way may bring it: wait for its set. */
        int64_t deadline = now + JWKS_FETCH_TIMEOUT_MS + 1000;
        while (jw.fetching && fcond_wait_until(&jw.fetched, &jw.mu, deadline) != ETIMEDOUT)
            ;
        k = lookup(kid, kty);
    } else if ((!k || stale) && !jw.fetching && may_fetch(now)) {
        /* One request fetches. The others wait for its set, or, when the
         * set only grew old, go on with the key they have. */
        jw.fetching = 1;
        jw.attempted_ms = now;
        pthread_mutex_unlock(&jw.mu);
        refresh();
        pthread_mutex_lock(&jw.mu);
        jw.fetching = 0;
        fcond_broadcast(&jw.fetched);
        if (k)
            cjose_jwk_release(k);
        k = lookup(kid, kty);
    }
    *unreachable = !k && !jw.ever_fetched;
    pthread_mutex_unlock(&jw.mu);
    if (k)
        return k;
    *why = *unreachable ? "the authorization server's keys could not be fetched"
                        : "the token's signing key is not one of the issuer's keys";
    return NULL;
}
