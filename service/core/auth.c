/* auth — see auth.h. */
#include "auth.h"
#include "auth_cache.h"
#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "dpop.h"
#include "introspect.h"
#include "oauth.h"
#include "store.h"
#include "token.h"
#include "token_bucket.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static struct {
    int required;
    int tokens; /* static tokens from mcp-admin */
    int oauth;  /* JWT access tokens from --oauth-issuer */
    char *metadata_url;
    struct store *store;
    pthread_mutex_t mu;       /* the cache; never held across a lookup */
    struct auth_cache *cache; /* token hash -> the store's answer */
    pthread_mutex_t live_mu;  /* the holds; end callbacks run under it */
    struct auth_hold *live;
    /* A client retrying with a revoked token decides how often mcpd would
     * warn about it: the warnings past this rate are counted, not written. */
    pthread_mutex_t warn_mu;
    struct token_bucket revoked_warnings;
    int warn_ready;
} auth = {.mu = PTHREAD_MUTEX_INITIALIZER,
          .live_mu = PTHREAD_MUTEX_INITIALIZER,
          .warn_mu = PTHREAD_MUTEX_INITIALIZER};

#define REVOKED_WARN_RATE 1.0 /* a second */
#define REVOKED_WARN_BURST 5.0

/* Logs that a revoked token was presented, at most REVOKED_WARN_RATE a
 * second after a burst, with the count of those not logged since. */
static void warn_revoked_use(const char *name, int64_t now)
{
    pthread_mutex_lock(&auth.warn_mu);
    if (!auth.warn_ready) {
        token_bucket_init(&auth.revoked_warnings, REVOKED_WARN_RATE, REVOKED_WARN_BURST, now);
        auth.warn_ready = 1;
    }
    int log_it = token_bucket_take(&auth.revoked_warnings, now);
    uint64_t dropped = log_it ? token_bucket_take_dropped(&auth.revoked_warnings) : 0;
    pthread_mutex_unlock(&auth.warn_mu);
    if (!log_it)
        return;
    if (dropped)
        log_event(LOG_WARN, NULL, "token_revoked_used",
                  "token %s used after revocation (%llu more uses of revoked tokens not logged)",
                  name, (unsigned long long)dropped);
    else
        log_event(LOG_WARN, NULL, "token_revoked_used", "token %s used after revocation", name);
}

int auth_configure(const char *mode, struct store *st)
{
    int tokens = strcmp(mode, "token") == 0 || strcmp(mode, "token,oauth") == 0 ||
                 strcmp(mode, "oauth,token") == 0;
    int oauth = strcmp(mode, "oauth") == 0 || strcmp(mode, "token,oauth") == 0 ||
                strcmp(mode, "oauth,token") == 0;
    if (strcmp(mode, "none") != 0 && !tokens && !oauth)
        return -1;
    if (oauth && !oauth_enabled())
        return -1;
    auth.tokens = tokens;
    auth.oauth = oauth;
    auth.required = tokens || oauth;
    auth.store = st;
    free(auth.metadata_url);
    auth.metadata_url = oauth ? oauth_metadata_url(oauth_resource()) : NULL;
    if (oauth && !auth.metadata_url)
        return -1;
    if (oauth)
        log_event(LOG_INFO, NULL, "oauth_configured",
                  "issuer %s, resource %s (metadata %s), audience %s, scopes '%s'%s",
                  oauth_issuer(), oauth_resource(), auth.metadata_url, oauth_audience(),
                  oauth_scopes(), introspect_enabled() ? ", opaque tokens introspected" : "");
    if (auth.required && !auth.cache)
        auth.cache = auth_cache_new(AUTH_CACHE_KNOWN_MAX, AUTH_CACHE_UNKNOWN_MAX, AUTH_CACHE_MS);
    return auth.required && !auth.cache ? -1 : 0;
}

int auth_required(void)
{
    return auth.required;
}

void auth_shutdown(void)
{
    pthread_mutex_lock(&auth.mu);
    auth_cache_free(auth.cache);
    auth.cache = NULL;
    pthread_mutex_unlock(&auth.mu);
    free(auth.metadata_url);
    auth.metadata_url = NULL;
}

int auth_challenge(const struct auth_grant *grant, const char *why, char *buf, size_t cap)
{
    int status = grant->refusal == AUTH_INSUFFICIENT_SCOPE ? 403
                 : grant->refusal == AUTH_BUSY             ? 503
                                                           : 401;
    const char *error = grant->refusal == AUTH_INSUFFICIENT_SCOPE ? "insufficient_scope"
                        : grant->refusal == AUTH_INVALID_TOKEN    ? "invalid_token"
                        : grant->refusal == AUTH_INVALID_PROOF    ? "invalid_dpop_proof"
                                                                  : NULL;
    /* why holds no quotes; error_description drops the "Unauthorized: "
     * or "Forbidden: " that the JSON-RPC message starts with. */
    const char *colon = why ? strstr(why, ": ") : NULL;
    const char *desc = colon ? colon + 2 : why;
    int n;
    if (!auth.oauth)
        n = snprintf(buf, cap, "Bearer");
    else if (grant->dpop)
        n = snprintf(buf, cap, "DPoP algs=\"%s\", resource_metadata=\"%s\"", DPOP_ALGS,
                     auth.metadata_url);
    else
        n = snprintf(buf, cap, "Bearer resource_metadata=\"%s\"", auth.metadata_url);
    if (n >= 0 && (size_t)n < cap && auth.oauth && *oauth_scopes())
        n += snprintf(buf + n, cap - (size_t)n, ", scope=\"%s\"", oauth_scopes());
    /* RFC 6750 3: a request without a token gets no error code */
    if (n >= 0 && (size_t)n < cap && error)
        n += snprintf(buf + n, cap - (size_t)n, "%serror=\"%s\", error_description=\"%s\"",
                      auth.oauth ? ", " : " ", error, desc ? desc : error);
    return status;
}

/* The token in "Bearer <token>" or "DPoP <token>" (schemes
 * case-insensitive; *dpop says which), or in a "bearer.<token>" element of
 * a subprotocol list. Copies it into out. */
static int extract(const char *authorization, const char *ws_protocols, char *out, size_t cap,
                   int *dpop)
{
    *dpop = authorization && strncasecmp(authorization, "DPoP ", 5) == 0;
    if (authorization && (*dpop || strncasecmp(authorization, "Bearer ", 7) == 0)) {
        const char *t = authorization + (*dpop ? 5 : 7);
        while (*t == ' ')
            t++;
        size_t n = strcspn(t, " \t");
        if (n == 0 || n >= cap)
            return -1;
        memcpy(out, t, n);
        out[n] = '\0';
        return 0;
    }
    for (const char *p = ws_protocols; p && *p;) {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, " \t,");
        if (n > 7 && strncmp(p, "bearer.", 7) == 0 && n - 7 < cap) {
            memcpy(out, p + 7, n - 7);
            out[n - 7] = '\0';
            return 0;
        }
        p += n;
    }
    return -1;
}

/* The store's answer for hash, from the cache or a lookup made outside the
 * lock (so a slow or failing one holds up no other request). 0, or -1 when
 * the store could not be read. *note_use: record the token's use. */
static int answer_for(const char *hash, int64_t now, struct auth_answer *a, int *note_use)
{
    pthread_mutex_lock(&auth.mu);
    int hit = auth.cache && auth_cache_get(auth.cache, hash, now, a);
    *note_use = hit && a->known && auth_cache_note_use(auth.cache, hash, now);
    pthread_mutex_unlock(&auth.mu);
    if (hit)
        return 0;
    struct store_token tok;
    int rc = store_token_lookup(auth.store, hash, &tok);
    if (rc < 0)
        return -1; /* not cached: the next request asks again */
    memset(a, 0, sizeof *a);
    a->known = rc == 0;
    if (a->known) {
        snprintf(a->name, sizeof a->name, "%s", tok.name);
        a->expires_ms = tok.expires_ms;
        a->revoked_ms = tok.revoked_ms;
    }
    pthread_mutex_lock(&auth.mu);
    /* Out of memory, the answer is still right; it is only not kept. */
    if (auth.cache && auth_cache_put(auth.cache, hash, a, now) == 0)
        *note_use = a->known && auth_cache_note_use(auth.cache, hash, now);
    else
        *note_use = a->known;
    pthread_mutex_unlock(&auth.mu);
    return 0;
}

/* What the request's DPoP proof proves, into *proof: 0, or -1 with reason. */
static int proven_key(const char *token, const struct auth_request *req, struct dpop_proof *proof,
                      int64_t now_s, const char **reason)
{
    if (!req || !req->dpop) {
        *reason = "a DPoP proof is required (the DPoP header)";
        return -1;
    }
    /* RFC 9449 4.3: exactly one proof (repeated headers arrive joined) */
    if (strchr(req->dpop, ',')) {
        *reason = "more than one DPoP proof";
        return -1;
    }
    /* The URL the client used: the resource path and what is under it are
     * the resource's public URL and what is under it; other paths (legacy
     * /sse) are under the resource's origin. */
    const char *resource = oauth_resource();
    const char *host = strstr(resource, "://");
    size_t origin = host ? (size_t)(host + 3 - resource) + strcspn(host + 3, "/?#") : 0;
    size_t base = origin;
    const char *rest = req->path;
    size_t rp = req->resource_path ? strlen(req->resource_path) : 0;
    if (rp && strncmp(req->path, req->resource_path, rp) == 0 &&
        (req->path[rp] == '\0' || req->path[rp] == '/')) {
        base = strcspn(resource, "?#");
        while (base > origin && resource[base - 1] == '/')
            base--;
        rest = req->path + rp;
    }
    char htu[2048];
    int n = snprintf(htu, sizeof htu, "%.*s%s", (int)base, resource, rest);
    if (!host || n < 0 || (size_t)n >= sizeof htu) {
        *reason = "the DPoP proof could not be checked";
        return -1;
    }
    return dpop_check(req->dpop, req->method, htu, token, now_s, proof, reason);
}

/* A JWT access token (oauth.h), with its DPoP proof when the request used
 * that scheme. */
static int check_jwt(const char *token, const struct auth_request *req, struct auth_grant *grant,
                     const char **why)
{
    static __thread char msg[160];
    const char *reason = "the token could not be checked";
    struct dpop_proof proof = {.jkt = ""};
    char bound[DPOP_JKT_LEN + 1];
    int64_t now_s = clock_wall_ms() / 1000;
    if (grant->dpop && proven_key(token, req, &proof, now_s, &reason) != 0)
        goto bad_proof;
    enum oauth_verdict v = oauth_check(token, req ? req->client : NULL, grant->principal,
                                       sizeof grant->principal, &grant->expires_ms, bound, &reason);
    const char *jkt = proof.jkt;
    /* no word on the scopes to whoever does not hold the token's key */
    if ((v == OAUTH_OK || v == OAUTH_INSUFFICIENT_SCOPE) && strcmp(bound, jkt) != 0) {
        v = OAUTH_INVALID;
        reason = !*bound ? "the token is not bound to a key: send it as a Bearer token"
                 : !*jkt ? "the token is bound to a key: send it with the DPoP scheme and a proof"
                         : "the DPoP proof is made with another key than the token's (cnf.jkt)";
    }
    /* The jti is spent only now, by the token's own key: a proof made for
     * a made-up token takes no room in the memory of proofs. This
     * process's memory first (a replay here costs no store call), then the
     * store's, which every replica shares and a restart keeps. */
    if ((v == OAUTH_OK || v == OAUTH_INSUFFICIENT_SCOPE) && *jkt) {
        int first = dpop_first_use(&proof, now_s);
        if (first == 1)
            first = store_dpop_use(auth.store, proof.use,
                                   (proof.valid_until_s + DPOP_CLOCK_SKEW_S) * 1000);
        if (first < 0) {
            v = OAUTH_BUSY;
            reason = "the DPoP proof could not be checked now; retry with a new proof";
        } else if (first != 1) {
            reason = "the DPoP proof was used before (jti)";
            goto bad_proof;
        }
    }
    switch (v) {
    case OAUTH_OK:
        return 0;
    case OAUTH_INSUFFICIENT_SCOPE:
        grant->refusal = AUTH_INSUFFICIENT_SCOPE;
        snprintf(msg, sizeof msg, "Forbidden: %s", reason);
        metrics_refused("auth_scope");
        break;
    case OAUTH_INVALID:
        snprintf(msg, sizeof msg, "Unauthorized: %s", reason);
        metrics_refused("auth_invalid_jwt");
        break;
    case OAUTH_BUSY:
        grant->refusal = AUTH_BUSY;
        snprintf(msg, sizeof msg, "Service Unavailable: %s", reason);
        metrics_refused("auth_busy");
        break;
    }
    grant->principal[0] = '\0';
    grant->expires_ms = 0;
    *why = msg;
    return -1;
bad_proof:
    grant->refusal = AUTH_INVALID_PROOF;
    grant->principal[0] = '\0';
    grant->expires_ms = 0;
    snprintf(msg, sizeof msg, "Unauthorized: %s", reason);
    metrics_refused("auth_dpop_proof");
    *why = msg;
    return -1;
}

int auth_check(const char *authorization, const char *ws_protocols, const struct auth_request *req,
               struct auth_grant *grant, const char **why)
{
    memset(grant, 0, sizeof *grant);
    if (!auth.required)
        return 0;
    char token[AUTH_BEARER_MAX], hash[TOKEN_HASH_LEN + 1];
    if (extract(authorization, ws_protocols, token, sizeof token, &grant->dpop) != 0) {
        *why = "Unauthorized: a bearer token is required (Authorization: Bearer <token>)";
        metrics_refused("auth_missing");
        return -1;
    }
    grant->refusal = AUTH_INVALID_TOKEN;
    /* mcp-admin's tokens ("mcpd_…") hold no dot; a JWT holds two; any
     * other value is an opaque token for introspection, when configured. */
    if (auth.oauth && (strchr(token, '.') || !auth.tokens ||
                       (introspect_enabled() && strncmp(token, "mcpd_", 5) != 0)))
        return check_jwt(token, req, grant, why);
    if (grant->dpop) {
        *why = "Unauthorized: the DPoP scheme is for the authorization server's tokens";
        metrics_refused("auth_dpop_proof");
        return -1;
    }
    if (token_hash(token, hash) != 0) {
        *why = "Unauthorized: the token could not be checked";
        return -1;
    }
    int64_t now = clock_mono_ms(), wall = clock_wall_ms();
    struct auth_answer seen;
    int note_use;
    if (answer_for(hash, now, &seen, &note_use) != 0) {
        *why = "Unauthorized: the token store is not readable";
        return -1;
    }
    if (!seen.known) {
        *why = "Unauthorized: unknown token";
        metrics_refused("auth_unknown");
        return -1;
    }
    if (seen.revoked_ms) {
        *why = "Unauthorized: the token was revoked";
        metrics_refused("auth_revoked");
        warn_revoked_use(seen.name, now);
        return -1;
    }
    if (seen.expires_ms && wall >= seen.expires_ms) {
        *why = "Unauthorized: the token has expired";
        metrics_refused("auth_expired");
        return -1;
    }
    if (note_use)
        store_token_used(auth.store, seen.name, wall);
    snprintf(grant->principal, sizeof grant->principal, "%s", seen.name);
    grant->expires_ms = seen.expires_ms;
    return 0;
}

size_t auth_cache_size(int known)
{
    pthread_mutex_lock(&auth.mu);
    size_t n = auth.cache ? auth_cache_count(auth.cache, known) : 0;
    pthread_mutex_unlock(&auth.mu);
    return n;
}

/* ---- connections holding a token ---- */

void auth_hold(struct auth_hold *h, const struct auth_grant *grant,
               void (*end)(void *ud, const char *why), void *ud)
{
    h->end = end;
    h->ud = ud;
    h->prev = NULL;
    h->principal[0] = '\0'; /* not held: auth_release takes no lock */
    if (!grant->principal[0])
        return;
    snprintf(h->principal, sizeof h->principal, "%s", grant->principal);
    h->expires_ms = grant->expires_ms;
    pthread_mutex_lock(&auth.live_mu);
    h->next = auth.live;
    if (h->next)
        h->next->prev = &h->next;
    h->prev = &auth.live;
    auth.live = h;
    pthread_mutex_unlock(&auth.live_mu);
}

static void unlink_hold(struct auth_hold *h)
{
    *h->prev = h->next;
    if (h->next)
        h->next->prev = h->prev;
    h->next = NULL;
    h->prev = NULL;
}

void auth_release(struct auth_hold *h)
{
    if (!h->principal[0])
        return;
    pthread_mutex_lock(&auth.live_mu);
    if (h->prev)
        unlink_hold(h);
    pthread_mutex_unlock(&auth.live_mu);
}

/* Ends the holds for which ends(h, arg) is true; the others' earliest
 * expiry ahead (0 if none). Under live_mu, so that auth_release waits for
 * an end callback in progress. */
static int64_t end_holds(int (*ends)(const struct auth_hold *h, const void *arg), const void *arg,
                         const char *why)
{
    int64_t earliest = 0;
    pthread_mutex_lock(&auth.live_mu);
    for (struct auth_hold *h = auth.live, *next; h; h = next) {
        next = h->next;
        if (ends(h, arg)) {
            unlink_hold(h);
            log_event(LOG_INFO, NULL, "connection_ended", "%s: %s", h->principal, why);
            h->end(h->ud, why);
        } else if (h->expires_ms && (!earliest || h->expires_ms < earliest)) {
            earliest = h->expires_ms;
        }
    }
    pthread_mutex_unlock(&auth.live_mu);
    return earliest;
}

static int named(const struct auth_hold *h, const void *name)
{
    return strcmp(h->principal, name) == 0;
}

static int expired(const struct auth_hold *h, const void *now)
{
    return h->expires_ms && h->expires_ms <= *(const int64_t *)now;
}

void auth_token_revoked(const char *name)
{
    pthread_mutex_lock(&auth.mu);
    if (auth.cache)
        auth_cache_forget_name(auth.cache, name);
    pthread_mutex_unlock(&auth.mu);
    end_holds(named, name, "token revoked");
}

int64_t auth_expire(int64_t now_wall_ms)
{
    return end_holds(expired, &now_wall_ms, "token expired");
}

int auth_bootstrap(const char *file, char **err)
{
    FILE *f = fopen(file, "r");
    if (!f) {
        if (asprintf(err, "--bootstrap-token-file %s: %s", file, strerror(errno)) < 0)
            *err = NULL;
        return -1;
    }
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *t = buf + strspn(buf, " \t\r\n");
    t[strcspn(t, " \t\r\n")] = '\0';
    char hash[TOKEN_HASH_LEN + 1];
    if (strlen(t) < 16 || token_hash(t, hash) != 0) {
        if (asprintf(err, "--bootstrap-token-file %s: no token of at least 16 characters", file) <
            0)
            *err = NULL;
        return -1;
    }
    /* The file only ever creates the token. Applied on every start (a
     * container restarts with the same secret), it must not undo what an
     * operator did since: a revocation, or a token of that name made with
     * mcp-admin. What the file would change is reported, never applied. */
    enum store_token_create_result found;
    if (store_token_create(auth.store, "bootstrap", hash, "from --bootstrap-token-file",
                           clock_wall_ms(), &found) != 0) {
        *err = strdup("--bootstrap-token-file: the store could not add the token");
        return -1;
    }
    switch (found) {
    case STORE_TOKEN_CREATED:
        log_event(LOG_INFO, NULL, "bootstrap_token_created",
                  "the token named bootstrap was created from --bootstrap-token-file");
        break;
    case STORE_TOKEN_EXISTS:
        break;
    case STORE_TOKEN_REVOKED:
        log_event(LOG_WARN, NULL, "bootstrap_token_revoked",
                  "the token named bootstrap was revoked and stays revoked: "
                  "--bootstrap-token-file is not applied (remove the option, and make a new "
                  "token with mcp-admin tokens add)");
        break;
    case STORE_TOKEN_OTHER_HASH:
        log_event(LOG_WARN, NULL, "bootstrap_token_differs",
                  "a token named bootstrap exists with another value (the file changed, or "
                  "the token was made with mcp-admin): --bootstrap-token-file is not applied "
                  "and the existing token is kept");
        break;
    case STORE_TOKEN_HASH_TAKEN:
        log_event(LOG_WARN, NULL, "bootstrap_token_taken",
                  "the token in --bootstrap-token-file is already another token's: it is not "
                  "added as bootstrap");
        break;
    }
    return 0;
}
