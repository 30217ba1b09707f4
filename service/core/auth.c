/* auth — see auth.h. */
#include "auth.h"
#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "table.h"
#include "token.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct cached {
    struct store_token tok;
    int known;
    int64_t checked_ms, used_ms;
};

static struct {
    int required;
    struct store *store;
    pthread_mutex_t mu;
    struct table *cache; /* token hash -> struct cached */
} auth = {.mu = PTHREAD_MUTEX_INITIALIZER};

int auth_configure(const char *mode, struct store *st)
{
    if (strcmp(mode, "none") != 0 && strcmp(mode, "token") != 0)
        return -1;
    auth.required = strcmp(mode, "token") == 0;
    auth.store = st;
    if (auth.required && !auth.cache)
        auth.cache = table_new();
    return auth.required && !auth.cache ? -1 : 0;
}

int auth_required(void)
{
    return auth.required;
}

static void free_cached(void *arg, const char *key, void *value)
{
    (void)arg;
    (void)key;
    free(value);
}

void auth_shutdown(void)
{
    pthread_mutex_lock(&auth.mu);
    if (auth.cache) {
        table_each(auth.cache, free_cached, NULL);
        table_free(auth.cache);
        auth.cache = NULL;
    }
    pthread_mutex_unlock(&auth.mu);
}

/* The token in "Bearer <token>" (scheme case-insensitive), or in a
 * "bearer.<token>" element of a subprotocol list. Copies it into out. */
static int extract(const char *authorization, const char *ws_protocols, char *out, size_t cap)
{
    if (authorization && strncasecmp(authorization, "Bearer ", 7) == 0) {
        const char *t = authorization + 7;
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

int auth_check(const char *authorization, const char *ws_protocols,
               char principal[AUTH_PRINCIPAL_MAX], const char **why)
{
    principal[0] = '\0';
    if (!auth.required)
        return 0;
    char token[256], hash[TOKEN_HASH_LEN + 1];
    if (extract(authorization, ws_protocols, token, sizeof token) != 0) {
        *why = "Unauthorized: a bearer token is required (Authorization: Bearer <token>)";
        metrics_refused("auth_missing");
        return -1;
    }
    if (token_hash(token, hash) != 0) {
        *why = "Unauthorized: the token could not be checked";
        return -1;
    }
    int64_t now = clock_mono_ms(), wall = clock_wall_ms();
    pthread_mutex_lock(&auth.mu);
    struct cached *c = table_get(auth.cache, hash);
    if (!c || now - c->checked_ms >= AUTH_CACHE_MS) {
        struct store_token tok;
        int rc = store_token_lookup(auth.store, hash, &tok);
        if (rc < 0) {
            pthread_mutex_unlock(&auth.mu);
            *why = "Unauthorized: the token store is not readable";
            return -1;
        }
        if (!c && (c = calloc(1, sizeof *c)) && table_put(auth.cache, hash, c) != 0) {
            free(c);
            c = NULL;
        }
        if (!c) {
            pthread_mutex_unlock(&auth.mu);
            *why = "Unauthorized: out of memory";
            return -1;
        }
        c->known = rc == 0;
        c->tok = tok;
        c->checked_ms = now;
    }
    struct cached seen = *c;
    int note_use = c->known && now - c->used_ms >= 1000;
    if (note_use)
        c->used_ms = now;
    pthread_mutex_unlock(&auth.mu);
    if (!seen.known) {
        *why = "Unauthorized: unknown token";
        metrics_refused("auth_unknown");
        return -1;
    }
    if (seen.tok.revoked_ms) {
        *why = "Unauthorized: the token was revoked";
        metrics_refused("auth_revoked");
        log_event(LOG_WARN, NULL, "token_revoked_used", "token %s used after revocation",
                  seen.tok.name);
        return -1;
    }
    if (seen.tok.expires_ms && wall >= seen.tok.expires_ms) {
        *why = "Unauthorized: the token has expired";
        metrics_refused("auth_expired");
        return -1;
    }
    if (note_use)
        store_token_used(auth.store, seen.tok.name, wall);
    snprintf(principal, AUTH_PRINCIPAL_MAX, "%s", seen.tok.name);
    return 0;
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
