/* introspect — see introspect.h. */
#include "introspect.h"
#include "json_fetch.h"
#include "fnv1a.h"
#include "auth.h"
#include "auth_cache.h"
#include "dpop.h"
#include "clock.h"
#include "log.h"
#include "token.h"
#include "token_bucket.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANSWER_MAX (64 * 1024)

_Static_assert(sizeof((struct auth_answer *)0)->bound > DPOP_JKT_LEN, "a thumbprint fits");
_Static_assert(sizeof((struct auth_answer *)0)->name >= AUTH_PRINCIPAL_MAX, "a principal fits");

/* One client's budget; its slot is the hash of its address. */
struct client_budget {
    char addr[64];
    struct token_bucket b;
};

static struct {
    char *url, *userpwd;
    pthread_mutex_t mu;
    struct auth_cache *answers;          /* under mu */
    struct token_bucket calls, warnings; /* under mu */
    struct client_budget *clients;       /* INTROSPECT_CLIENTS, under mu */
    uint64_t limited;                    /* answered busy since the last warning */
} in = {.mu = PTHREAD_MUTEX_INITIALIZER};

int introspect_configure(const char *url, const char *client_id, const char *client_secret)
{
    introspect_shutdown();
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return -1;
    /* RFC 6749 2.3.1: each half form-encoded before Basic. */
    char *id = curl_easy_escape(NULL, client_id, 0);
    char *secret = curl_easy_escape(NULL, client_secret, 0);
    in.url = strdup(url);
    if (id && secret && asprintf(&in.userpwd, "%s:%s", id, secret) < 0)
        in.userpwd = NULL;
    curl_free(id);
    curl_free(secret);
    in.answers =
        auth_cache_new(INTROSPECT_CACHE_TOKENS, INTROSPECT_CACHE_TOKENS, INTROSPECT_CACHE_MS);
    token_bucket_init(&in.calls, INTROSPECT_RATE, INTROSPECT_BURST, clock_mono_ms());
    token_bucket_init(&in.warnings, 0.1, 1, clock_mono_ms()); /* a warning per 10 s */
    in.clients = calloc(INTROSPECT_CLIENTS, sizeof *in.clients);
    if (!in.url || !in.userpwd || !in.answers || !in.clients) {
        introspect_shutdown();
        return -1;
    }
    return 0;
}

int introspect_enabled(void)
{
    return in.url != NULL;
}

void introspect_shutdown(void)
{
    free(in.url);
    free(in.userpwd);
    auth_cache_free(in.answers);
    free(in.clients);
    in.url = in.userpwd = NULL;
    in.answers = NULL;
    in.clients = NULL;
}

/* Whose budget an address spends: itself, or for IPv6 its /64 (one host
 * commonly holds a whole /64, and could otherwise take a fresh budget with
 * each address of it). */
static void budget_key(const char *client, char *key, size_t cap)
{
    struct in6_addr a;
    if (inet_pton(AF_INET6, client, &a) == 1 && !IN6_IS_ADDR_V4MAPPED(&a)) {
        memset(a.s6_addr + 8, 0, 8);
        if (inet_ntop(AF_INET6, &a, key, (socklen_t)cap))
            return;
    }
    snprintf(key, cap, "%s", client);
}

/* A call from client's budget, then from everyone's (under mu): 1, or 0
 * when either is spent. A client not known (NULL, "") has only everyone's.
 * When everyone's refuses, the client's share is given back: no call was
 * made, and a client that waits out someone else's flood must not find its
 * own share spent on refusals. */
static int budget_take(const char *client, int64_t now)
{
    struct token_bucket *mine = NULL;
    if (client && *client) {
        char key[sizeof in.clients->addr];
        budget_key(client, key, sizeof key);
        struct client_budget *c = &in.clients[fnv1a_str(key) % INTROSPECT_CLIENTS];
        if (strcmp(c->addr, key) != 0) {
            snprintf(c->addr, sizeof c->addr, "%s", key);
            token_bucket_init(&c->b, INTROSPECT_CLIENT_RATE, INTROSPECT_CLIENT_BURST, now);
        }
        if (!token_bucket_take(&c->b, now))
            return 0;
        mine = &c->b;
    }
    if (token_bucket_take(&in.calls, now))
        return 1;
    if (mine)
        token_bucket_give(mine, now);
    return 0;
}

json_t *introspect_claims(json_t *answer, const char *issuer)
{
    if (!json_is_object(answer) || !json_is_true(json_object_get(answer, "active")))
        return NULL;
    json_t *c = json_deep_copy(answer);
    if (!c)
        return NULL;
    if (!json_object_get(c, "iss"))
        json_object_set_new(c, "iss", json_string(issuer));
    json_t *client = json_object_get(c, "client_id");
    if (!json_object_get(c, "sub") && json_is_string(client))
        json_object_set(c, "sub", client);
    return c;
}

/* The server's answer for token, or NULL (with a warning) when there is none. */
static json_t *ask(const char *token)
{
    CURL *c = curl_easy_init();
    char *esc = c ? curl_easy_escape(c, token, 0) : NULL;
    char *form = NULL;
    if (!esc || asprintf(&form, "token=%s&token_type_hint=access_token", esc) < 0) {
        curl_free(esc);
        if (c)
            curl_easy_cleanup(c);
        return NULL;
    }
    curl_free(esc);
    curl_easy_cleanup(c);
    struct json_fetch f = {.url = in.url,
                           .form = form,
                           .userpwd = in.userpwd,
                           .timeout_ms = INTROSPECT_TIMEOUT_MS,
                           .max = ANSWER_MAX,
                           .event = "oauth_introspection_failed"};
    json_t *doc = json_fetch(&f);
    /* The form holds the token: gone before anything else happens. */
    memset(form, 0, strlen(form));
    free(form);
    return doc;
}

enum oauth_verdict introspect_check(const char *token, const char *client, char *principal,
                                    size_t cap, int64_t *expires_ms, char *bound, const char **why)
{
    bound[0] = '\0';
    char hash[TOKEN_HASH_LEN + 1];
    if (token_hash(token, hash) != 0) {
        *why = "the token could not be checked";
        return OAUTH_INVALID;
    }
    int64_t now = clock_mono_ms();
    struct auth_answer seen;
    pthread_mutex_lock(&in.mu);
    if (auth_cache_get(in.answers, hash, now, &seen)) {
        pthread_mutex_unlock(&in.mu);
        *why = seen.why;
        snprintf(principal, cap, "%s", seen.name);
        *expires_ms = seen.expires_ms;
        memcpy(bound, seen.bound, DPOP_JKT_LEN + 1);
        return (enum oauth_verdict)seen.verdict;
    }
    int allowed = budget_take(client, now);
    uint64_t over = 0;
    if (!allowed && ++in.limited && token_bucket_take(&in.warnings, now)) {
        over = in.limited;
        in.limited = 0;
    }
    pthread_mutex_unlock(&in.mu);
    if (over)
        log_event(LOG_WARN, NULL, "oauth_introspection_limited",
                  "%llu unknown tokens not passed on to the authorization server (over %d a "
                  "second, or %d a second from one client): answered 503",
                  (unsigned long long)over, INTROSPECT_RATE, INTROSPECT_CLIENT_RATE);
    if (!allowed) {
        *why = "too many unknown tokens to check at once: retry shortly";
        return OAUTH_BUSY;
    }

    json_t *answer = ask(token);
    if (!answer) {
        /* Not kept: the next request asks again. */
        *why = "the authorization server could not check the token";
        return OAUTH_INVALID;
    }
    json_t *claims = introspect_claims(answer, oauth_issuer());
    json_decref(answer);
    enum oauth_verdict v = OAUTH_INVALID;
    *expires_ms = 0;
    principal[0] = '\0';
    if (!claims)
        *why = "the token is not active";
    else
        v = oauth_claims_check(claims, oauth_issuer(), oauth_audience(), oauth_scopes(),
                               clock_wall_ms() / 1000, principal, cap, expires_ms, bound, why);
    struct auth_answer keep = {
        .known = claims != NULL, .expires_ms = *expires_ms, .verdict = (int)v, .why = *why};
    json_decref(claims);
    snprintf(keep.name, sizeof keep.name, "%s", principal);
    snprintf(keep.bound, sizeof keep.bound, "%s", bound);
    pthread_mutex_lock(&in.mu);
    /* Out of memory, the verdict is still right; it is only not kept. */
    (void)auth_cache_put(in.answers, hash, &keep, now);
    pthread_mutex_unlock(&in.mu);
    return v;
}
