/* oauth — see oauth.h. The protocol steps, in order: oauth_challenge ->
 * discover (PRM, then AS metadata) -> identify the client -> authorize
 * (browser + loopback) -> token request -> keep. HTTP to the metadata,
 * registration and token endpoints goes through one blocking easy handle. */
#include "oauth.h"

#include "bridge_log.h"
#include "connection.h"
#include "oauth_jwt.h"
#include "oauth_redirect.h"
#include "oauth_store.h"
#include "oauth_util.h"
#include "pkce.h"

#include "clock.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_META (256 * 1024)       /* a metadata or token response */
#define SIGNIN_TIMEOUT_MS (300000L) /* the user has five minutes in the browser */
#define AFTER_OPENER_MS 3000L       /* an --oauth-open-command that exited: the redirect is late */
#define MAX_STEP_UPS 2              /* 403 insufficient_scope re-authorizations per run */
#define REFRESH_AGAIN_S 60          /* a 401 soon after a refresh needs a real sign-in */
#define REFRESH_MARGIN_S 30         /* refresh this long before expiry */

struct oauth {
    const struct bridge_options *o;
    char *access_token, *refresh_token;
    long long expires_at; /* wall-clock seconds, 0 when unknown */
    long long refresh_at; /* when to refresh: REFRESH_MARGIN_S before expiry, or half-way */
    char *client_id, *client_secret, *auth_method;
    char *issuer, *token_endpoint, *resource, *scope;
    char *client_issuer;       /* the authorization server client_id belongs to */
    struct oauth_dpop *dpop;   /* the server offers DPoP (RFC 9449): the run's key */
    int dpop_bound;            /* the access token is DPoP-bound */
    char *as_nonce, *rs_nonce; /* the servers' latest DPoP-Nonce */
    long long refreshed_at;
    int step_ups;
};

/* ------------------------------------------------------------ helpers */

static void set_str(char **slot, const char *v)
{
    char *n = v ? strdup(v) : NULL;
    free(*slot);
    *slot = n;
}

static void wipe(char **slot)
{
    if (*slot) {
        volatile char *p = *slot;
        while (*p)
            *p++ = 0;
        free(*slot);
        *slot = NULL;
    }
}

struct buf {
    char *p;
    size_t len;
};

static size_t on_data(char *d, size_t size, size_t n, void *ud)
{
    struct buf *b = ud;
    size_t len = size * n;
    if (b->len + len > MAX_META)
        return 0;
    char *m = realloc(b->p, b->len + len + 1);
    if (!m)
        return 0;
    memcpy(m + b->len, d, len);
    b->p = m;
    b->len += len;
    b->p[b->len] = '\0';
    return len;
}

/* Keeps the authorization server's DPoP-Nonce (RFC 9449 8). */
static size_t on_header(char *b, size_t size, size_t n, void *ud)
{
    struct oauth *a = ud;
    size_t len = size * n;
    if (len > 11 && strncasecmp(b, "dpop-nonce:", 11) == 0) {
        size_t vlen = len - 11;
        const char *v = b + 11;
        while (vlen && (*v == ' ' || *v == '\t'))
            v++, vlen--;
        while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
            vlen--;
        free(a->as_nonce);
        a->as_nonce = strndup(v, vlen);
    }
    return len;
}

/* Appends name=value (form-encoded) to *form. */
/* err = "mcp-bridge: <what> (HTTP <st>[: <error>[: <error_description>]])",
 * from an OAuth error answer (RFC 6749 5.2, RFC 7591 3.2.2). The server's
 * words are cut short and kept to printable ASCII: they reach a terminal. */
static void refused(char *err, size_t cap, const char *what, long st, const json_t *answer)
{
    const char *words[2] = {json_string_value(json_object_get(answer, "error")),
                            json_string_value(json_object_get(answer, "error_description"))};
    char said[256];
    size_t n = 0;
    for (int i = 0; i < 2 && words[i] && n + 3 < sizeof said; i++) {
        said[n++] = ':';
        said[n++] = ' ';
        for (const char *c = words[i]; *c && n + 1 < sizeof said; c++)
            said[n++] = (*c >= 0x20 && *c < 0x7f) ? *c : '?';
    }
    said[n] = '\0';
    snprintf(err, cap, "mcp-bridge: %s (HTTP %ld%s)", what, st, said);
}

static void form_add(char **form, const char *name, const char *value)
{
    if (!value)
        return;
    char *ev = curl_easy_escape(NULL, value, 0);
    if (!ev)
        return;
    size_t old = *form ? strlen(*form) : 0;
    size_t n = old + strlen(name) + strlen(ev) + 3;
    char *m = realloc(*form, n);
    if (m) {
        snprintf(m + old, n - old, "%s%s=%s", old ? "&" : "", name, ev);
        *form = m;
    }
    curl_free(ev);
}

/* One request: GET url, or POST form (urlencoded) or json. basic_id (may be
 * NULL) authenticates with client_secret_basic. Returns the HTTP status (0
 * when the exchange failed) and the body as JSON in *out (NULL when not
 * JSON). */
static long http(struct oauth *a, const char *url, const char *form, const char *json,
                 const char *basic_id, const char *basic_secret, const char *extra, json_t **out)
{
    *out = NULL;
    CURL *e = curl_easy_init();
    if (!e)
        return 0;
    char errbuf[CURL_ERROR_SIZE];
    struct buf b = {0};
    struct curl_slist *h = curl_slist_append(NULL, "Accept: application/json");
    connection_setup(e, a->o, errbuf);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, a->o->response_timeout_ms);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, a);
    if (form || json) {
        h = curl_slist_append(h, form ? "Content-Type: application/x-www-form-urlencoded"
                                      : "Content-Type: application/json");
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, form ? form : json);
    }
    if (basic_id) {
        /* RFC 6749 2.3.1: both parts form-encoded before base64 */
        char *id = curl_easy_escape(NULL, basic_id, 0);
        char *sec = curl_easy_escape(NULL, basic_secret ? basic_secret : "", 0);
        size_t n = (id ? strlen(id) : 0) + (sec ? strlen(sec) : 0) + 2;
        char *pair = malloc(n), *enc = malloc(4 * n / 3 + 8);
        char *line = malloc(4 * n / 3 + 32);
        if (id && sec && pair && enc && line) {
            snprintf(pair, n, "%s:%s", id, sec);
            EVP_EncodeBlock((unsigned char *)enc, (const unsigned char *)pair, (int)strlen(pair));
            sprintf(line, "Authorization: Basic %s", enc);
            h = curl_slist_append(h, line);
        }
        curl_free(id);
        curl_free(sec);
        free(pair);
        free(enc);
        free(line);
    }
    if (extra)
        h = curl_slist_append(h, extra);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    long status = 0;
    if (curl_easy_perform(e) == CURLE_OK)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    else
        bridge_log(LOG_DEBUG, "oauth_http", "%s: %s", url, errbuf);
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    if (b.p)
        *out = json_loadb(b.p, b.len, 0, NULL);
    free(b.p);
    return status;
}

/* The JSON object at the first of urls that answers 200 with one. */
static json_t *first_document(struct oauth *a, char **urls, int n)
{
    for (int i = 0; i < n; i++) {
        if (!urls[i])
            continue;
        json_t *doc;
        long st = http(a, urls[i], NULL, NULL, NULL, NULL, NULL, &doc);
        if (st == 200 && json_is_object(doc))
            return doc;
        json_decref(doc);
    }
    return NULL;
}

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* 1 when the array member k of o has s. */
static int jhas(const json_t *o, const char *k, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(o, k), i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
            return 1;
    }
    return 0;
}

/* The strings of array k of o joined with spaces (malloc'd), or NULL. */
static char *jjoin(const json_t *o, const char *k)
{
    json_t *arr = json_object_get(o, k), *v;
    size_t i, n = 1;
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return NULL;
    json_array_foreach(arr, i, v) n += strlen(json_string_value(v) ? json_string_value(v) : "") + 1;
    char *s = calloc(1, n);
    if (!s)
        return NULL;
    json_array_foreach(arr, i, v)
    {
        if (!json_string_value(v))
            continue;
        if (*s)
            strcat(s, " ");
        strcat(s, json_string_value(v));
    }
    return s;
}

/* 1 when the published resource identifier covers server_url: same
 * origin, and the URL's path is the resource's path or under it (RFC 9728
 * 3.3: a client must not use metadata published for another resource). */
static int resource_covers(const char *resource, const char *server_url)
{
    char *ro = oauth_origin(resource), *so = oauth_origin(server_url);
    int ok = ro && so && strcmp(ro, so) == 0;
    if (ok) {
        const char *rp = resource + strlen(ro), *sp = server_url + strlen(so);
        size_t n = strlen(rp);
        while (n && rp[n - 1] == '/')
            n--;
        ok = strncmp(rp, sp, n) == 0 && (sp[n] == '\0' || sp[n] == '/' || sp[n] == '?');
    }
    free(ro);
    free(so);
    return ok;
}

/* ------------------------------------------------------------ tokens */

static void save(struct oauth *a)
{
    json_t *e = json_object();
    if (!e)
        return;
    json_object_set_new(e, "issuer", json_string(a->issuer ? a->issuer : ""));
    json_object_set_new(e, "client_id", json_string(a->client_id ? a->client_id : ""));
    if (a->client_issuer)
        json_object_set_new(e, "client_issuer", json_string(a->client_issuer));
    if (a->client_secret)
        json_object_set_new(e, "client_secret", json_string(a->client_secret));
    if (a->auth_method)
        json_object_set_new(e, "token_endpoint_auth_method", json_string(a->auth_method));
    if (a->token_endpoint)
        json_object_set_new(e, "token_endpoint", json_string(a->token_endpoint));
    if (a->resource)
        json_object_set_new(e, "resource", json_string(a->resource));
    if (a->scope)
        json_object_set_new(e, "scope", json_string(a->scope));
    /* a DPoP-bound token is worthless without its key: they are kept
     * together, or not at all */
    char *key = a->dpop_bound ? oauth_dpop_export(a->dpop) : NULL;
    if (!a->dpop_bound || key) {
        if (a->access_token)
            json_object_set_new(e, "access_token", json_string(a->access_token));
        if (a->refresh_token)
            json_object_set_new(e, "refresh_token", json_string(a->refresh_token));
    }
    if (key) {
        json_object_set_new(e, "dpop_key", json_string(key));
        memset(key, 0, strlen(key));
        free(key);
    }
    json_object_set_new(e, "expires_at", json_integer(a->expires_at));
    json_object_set_new(e, "refresh_at", json_integer(a->refresh_at));
    if (oauth_store_put(a->o->url, e) < 0)
        bridge_log(LOG_WARN, "oauth_store", "could not keep the sign-in (it lasts this run)");
    json_decref(e);
}

static void load(struct oauth *a)
{
    json_t *e = oauth_store_get(a->o->url);
    if (!e)
        return;
    const char *id = jstr(e, "client_id");
    /* an entry of another client is not ours to use */
    if (id && *id && (!a->o->oauth_client_id || strcmp(id, a->o->oauth_client_id) == 0)) {
        set_str(&a->client_id, id);
        set_str(&a->client_secret, jstr(e, "client_secret"));
        set_str(&a->client_issuer, jstr(e, "client_issuer"));
        set_str(&a->auth_method, jstr(e, "token_endpoint_auth_method"));
        set_str(&a->issuer, jstr(e, "issuer"));
        set_str(&a->token_endpoint, jstr(e, "token_endpoint"));
        set_str(&a->resource, jstr(e, "resource"));
        set_str(&a->scope, jstr(e, "scope"));
        set_str(&a->access_token, jstr(e, "access_token"));
        set_str(&a->refresh_token, jstr(e, "refresh_token"));
        a->expires_at = json_integer_value(json_object_get(e, "expires_at"));
        a->refresh_at = json_integer_value(json_object_get(e, "refresh_at"));
        const char *key = jstr(e, "dpop_key");
        if (key && (a->dpop = oauth_dpop_import(key)) != NULL) {
            a->dpop_bound = 1;
        } else if (key) {
            /* tokens bound to a key that cannot be read back are no use */
            wipe(&a->access_token);
            wipe(&a->refresh_token);
        }
    }
    json_decref(e);
}

/* Client authentication on a token request: into the form (none, post) or
 * as basic credentials (*basic_id). */
static void client_auth(struct oauth *a, char **form, const char **basic_id)
{
    *basic_id = NULL;
    if (a->o->oauth_client_key && a->auth_method &&
        strcmp(a->auth_method, "private_key_jwt") == 0) {
        char err[256];
        char *jwt =
            oauth_jwt_assertion(a->o->oauth_client_key, a->client_id, a->issuer, err, sizeof err);
        if (!jwt)
            bridge_log(LOG_WARN, "oauth_client_key", "%s", err);
        form_add(form, "client_id", a->client_id);
        form_add(form, "client_assertion_type",
                 "urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
        form_add(form, "client_assertion", jwt);
        free(jwt);
        return;
    }
    if (a->client_secret && a->auth_method && strcmp(a->auth_method, "client_secret_basic") == 0) {
        *basic_id = a->client_id;
        return;
    }
    form_add(form, "client_id", a->client_id);
    if (a->client_secret && a->auth_method && strcmp(a->auth_method, "client_secret_post") == 0)
        form_add(form, "client_secret", a->client_secret);
}

/* POSTs form to the token endpoint and keeps what it gives. 0, or -1. */
static int token_request(struct oauth *a, char *form, char *err, size_t cap)
{
    const char *basic_id;
    client_auth(a, &form, &basic_id);
    json_t *t = NULL;
    long st = 0;
    /* a DPoP server may want its nonce in the proof: once more with it */
    for (int attempt = 0; attempt < 2; attempt++) {
        char *dpop = NULL;
        if (a->dpop) {
            /* the token request proves the key the token will be bound to */
            char *proof = oauth_dpop_proof(a->dpop, "POST", a->token_endpoint, NULL, a->as_nonce);
            if (proof && (dpop = malloc(strlen(proof) + 8)) != NULL)
                sprintf(dpop, "DPoP: %s", proof);
            free(proof);
        }
        json_decref(t);
        st = http(a, a->token_endpoint, form ? form : "", NULL, basic_id, a->client_secret, dpop,
                  &t);
        free(dpop);
        if (!(a->dpop && st == 400 && a->as_nonce && jstr(t, "error") &&
              strcmp(jstr(t, "error"), "use_dpop_nonce") == 0))
            break;
    }
    free(form);
    const char *at = jstr(t, "access_token");
    if (st != 200 || !at || !*at) {
        refused(err, cap, "the token endpoint refused", st, t);
        json_decref(t);
        return -1;
    }
    set_str(&a->access_token, at);
    a->dpop_bound =
        a->dpop && jstr(t, "token_type") && strcasecmp(jstr(t, "token_type"), "DPoP") == 0;
    if (jstr(t, "refresh_token"))
        set_str(&a->refresh_token, jstr(t, "refresh_token"));
    if (jstr(t, "scope"))
        set_str(&a->scope, jstr(t, "scope"));
    json_int_t ein = json_integer_value(json_object_get(t, "expires_in"));
    long long now = (long long)time(NULL);
    a->expires_at = ein > 0 ? now + ein : 0;
    /* A token that lives less than twice the margin is refreshed half-way:
     * with the margin alone, every request would refresh it. */
    long long margin = ein < 2 * REFRESH_MARGIN_S ? ein / 2 : REFRESH_MARGIN_S;
    a->refresh_at = ein > 0 ? a->expires_at - margin : 0;
    json_decref(t);
    save(a);
    return 0;
}

static int refresh(struct oauth *a)
{
    char err[256];
    if (!a->refresh_token || !a->token_endpoint)
        return -1;
    char *form = NULL;
    form_add(&form, "grant_type", "refresh_token");
    form_add(&form, "refresh_token", a->refresh_token);
    form_add(&form, "resource", a->resource);
    if (token_request(a, form, err, sizeof err) == 0) {
        bridge_log(LOG_INFO, "oauth_refreshed", "the access token was refreshed");
        return 0;
    }
    /* the refresh token is spent or revoked: a new sign-in is needed */
    wipe(&a->refresh_token);
    return -1;
}

/* ------------------------------------------------------------ sign-in */

struct discovery {
    json_t *prm, *as;
    char *authorization_endpoint, *registration_endpoint;
};

static void discovery_free(struct discovery *d)
{
    json_decref(d->prm);
    json_decref(d->as);
    free(d->authorization_endpoint);
    free(d->registration_endpoint);
}

static int discover(struct oauth *a, const char *rm_hint, struct discovery *d, char *err,
                    size_t cap)
{
    const char *url = a->o->url;
    char *urls[OAUTH_MAX_URLS + 1] = {0};
    int n;
    if (rm_hint) {
        urls[0] = strdup(rm_hint);
        n = 1;
    } else {
        n = oauth_prm_urls(url, urls);
    }
    d->prm = first_document(a, urls, n);
    oauth_urls_free(urls, n);
    if (rm_hint && !d->prm) {
        /* the hint failed: the well-known places still may answer */
        n = oauth_prm_urls(url, urls);
        d->prm = first_document(a, urls, n);
        oauth_urls_free(urls, n);
    }
    const char *issuer = NULL;
    char *origin = oauth_origin(url);
    if (d->prm) {
        const char *res = jstr(d->prm, "resource");
        if (!res || !resource_covers(res, url)) {
            snprintf(err, cap,
                     "mcp-bridge: the server's protected resource metadata names another "
                     "resource (%.200s): refusing to sign in for it",
                     res ? res : "none");
            free(origin);
            return -1;
        }
        set_str(&a->resource, res);
        issuer =
            json_string_value(json_array_get(json_object_get(d->prm, "authorization_servers"), 0));
    } else {
        /* 2025-03-26: no resource metadata, the server's origin is the
         * authorization server */
        set_str(&a->resource, url);
    }
    set_str(&a->issuer, issuer ? issuer : origin);
    free(origin);
    if (!a->issuer) {
        snprintf(err, cap, "mcp-bridge: out of memory");
        return -1;
    }
    n = oauth_as_urls(a->issuer, urls);
    d->as = first_document(a, urls, n);
    oauth_urls_free(urls, n);
    if (d->as) {
        const char *iss = jstr(d->as, "issuer");
        if (!iss || strcmp(iss, a->issuer) != 0) {
            snprintf(err, cap,
                     "mcp-bridge: the authorization server's metadata names another issuer "
                     "(%.200s, expected %.200s): refusing to use it",
                     iss ? iss : "none", a->issuer);
            return -1;
        }
        set_str(&d->authorization_endpoint, jstr(d->as, "authorization_endpoint"));
        set_str(&a->token_endpoint, jstr(d->as, "token_endpoint"));
        set_str(&d->registration_endpoint, jstr(d->as, "registration_endpoint"));
        if (!a->dpop && jhas(d->as, "dpop_signing_alg_values_supported", "ES256"))
            a->dpop = oauth_dpop_new();
        if (json_object_get(d->as, "code_challenge_methods_supported") &&
            !jhas(d->as, "code_challenge_methods_supported", "S256")) {
            snprintf(err, cap, "mcp-bridge: the authorization server does not offer PKCE S256");
            return -1;
        }
    } else {
        /* 2025-03-26 fall-back: the default endpoints on the issuer's origin */
        char *o = oauth_origin(a->issuer);
        if (!o) {
            snprintf(err, cap, "mcp-bridge: the authorization server URL is not valid");
            return -1;
        }
        char b[2048];
        snprintf(b, sizeof b, "%s/authorize", o);
        set_str(&d->authorization_endpoint, b);
        snprintf(b, sizeof b, "%s/token", o);
        set_str(&a->token_endpoint, b);
        snprintf(b, sizeof b, "%s/register", o);
        set_str(&d->registration_endpoint, b);
        free(o);
    }
    if (!a->token_endpoint) {
        snprintf(err, cap, "mcp-bridge: the authorization server has no token endpoint");
        return -1;
    }
    return 0;
}

/* The token endpoint authentication to use with a secret, per the
 * server's metadata (RFC 8414's default is client_secret_basic). */
static const char *pick_auth_method(const struct discovery *d, int has_secret)
{
    if (!has_secret)
        return "none";
    json_t *m = d->as ? json_object_get(d->as, "token_endpoint_auth_methods_supported") : NULL;
    if (!m || jhas(d->as, "token_endpoint_auth_methods_supported", "client_secret_basic"))
        return "client_secret_basic";
    if (jhas(d->as, "token_endpoint_auth_methods_supported", "client_secret_post"))
        return "client_secret_post";
    return "none";
}

static int identify(struct oauth *a, const struct discovery *d, const char *redirect_uri, char *err,
                    size_t cap)
{
    const struct bridge_options *o = a->o;
    if (o->oauth_client_id) {
        set_str(&a->client_id, o->oauth_client_id);
        set_str(&a->client_secret, o->oauth_client_secret);
        set_str(&a->auth_method, o->oauth_client_key
                                     ? "private_key_jwt"
                                     : pick_auth_method(d, o->oauth_client_secret != NULL));
        return 0;
    }
    if (o->oauth_client_metadata_url && d->as &&
        json_is_true(json_object_get(d->as, "client_id_metadata_document_supported"))) {
        set_str(&a->client_id, o->oauth_client_metadata_url);
        set_str(&a->client_secret, NULL);
        set_str(&a->auth_method, "none");
        return 0;
    }
    if (a->client_id && a->client_issuer && strcmp(a->client_issuer, a->issuer) == 0)
        return 0; /* registered before with this authorization server (kept) */
    /* a client of another authorization server is not this one's (SEP-2352) */
    set_str(&a->client_id, NULL);
    wipe(&a->client_secret);
    if (!d->registration_endpoint) {
        snprintf(
            err, cap,
            "mcp-bridge: the authorization server has no dynamic client registration: "
            "give --oauth-client-id (and --oauth-client-secret)%s",
            d->as && json_is_true(json_object_get(d->as, "client_id_metadata_document_supported"))
                ? " or --oauth-client-metadata-url"
                : "");
        return -1;
    }
    json_t *req = json_pack("{s:s, s:[s], s:[s,s], s:[s], s:s, s:s}", "client_name", "mcp-bridge",
                            "redirect_uris", redirect_uri, "grant_types", "authorization_code",
                            "refresh_token", "response_types", "code", "token_endpoint_auth_method",
                            "none", "application_type", "native");
    if (!req) {
        snprintf(err, cap, "mcp-bridge: out of memory");
        return -1;
    }
    if (a->o->oauth_scope || a->scope)
        json_object_set_new(req, "scope",
                            json_string(a->o->oauth_scope ? a->o->oauth_scope : a->scope));
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    json_t *r = NULL;
    long st = body ? http(a, d->registration_endpoint, NULL, body, NULL, NULL, NULL, &r) : 0;
    free(body);
    const char *id = jstr(r, "client_id");
    if ((st != 200 && st != 201) || !id) {
        if (!d->prm && !d->as)
            /* a server with its own tokens (mcpd's static ones), not OAuth */
            snprintf(err, cap,
                     "mcp-bridge: %s needs authorization (HTTP 401) and offers no OAuth sign-in "
                     "(no protected resource or authorization server metadata): give a token "
                     "with --token-env or --token-file",
                     a->o->url);
        else
            refused(err, cap, "dynamic client registration failed", st, r);
        json_decref(r);
        return -1;
    }
    set_str(&a->client_id, id);
    set_str(&a->client_issuer, a->issuer);
    set_str(&a->client_secret, jstr(r, "client_secret"));
    const char *m = jstr(r, "token_endpoint_auth_method");
    set_str(&a->auth_method, m ? m : pick_auth_method(d, a->client_secret != NULL));
    json_decref(r);
    return 0;
}

/* Runs the browser opener (found on PATH unless path has a '/'), with
 * /dev/null for stdin and stdout: those are the client's MCP stream, not
 * the opener's. Its pid, or 0. */
static pid_t spawn_opener(const char *path, char *const argv[])
{
    pid_t pid = 0;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (posix_spawnp(&pid, path, &fa, NULL, argv, environ) != 0)
        pid = 0;
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

/* Shows the user the authorization URL: --oauth-open-command, else
 * xdg-open when there is a display; always printed on stderr. The opener's
 * pid (or 0). */
static pid_t open_browser(const struct bridge_options *o, const char *url)
{
    fprintf(stderr, "mcp-bridge: sign in to %s in your browser:\n  %s\n", o->url, url);
    const char *cmd = o->oauth_open_command;
    char *argv[6];
    if (cmd) {
        /* the shell splits the command; the URL goes as one argument */
        char *script = malloc(strlen(cmd) + 8);
        if (!script)
            return 0;
        sprintf(script, "%s \"$1\"", cmd);
        argv[0] = "sh", argv[1] = "-c", argv[2] = script, argv[3] = "mcp-bridge-open";
        argv[4] = (char *)url, argv[5] = NULL;
        pid_t pid = spawn_opener("/bin/sh", argv);
        free(script);
        return pid;
    }
    if (!getenv("DISPLAY") && !getenv("WAYLAND_DISPLAY"))
        return 0;
    argv[0] = "xdg-open", argv[1] = (char *)url, argv[2] = NULL;
    return spawn_opener("xdg-open", argv);
}

/* The value of name in a query string (decoded, malloc'd), or NULL;
 * *count says how often it appears. */
static char *query_get(const char *q, const char *name, int *count)
{
    char *val = NULL;
    size_t n = strlen(name);
    *count = 0;
    for (const char *p = q; p && *p;) {
        size_t len = strcspn(p, "&");
        if (len > n && strncmp(p, name, n) == 0 && p[n] == '=') {
            (*count)++;
            if (!val) {
                int outlen;
                char *plus = strndup(p + n + 1, len - n - 1);
                for (char *c = plus; c && *c; c++)
                    if (*c == '+')
                        *c = ' ';
                char *d = plus ? curl_easy_unescape(NULL, plus, 0, &outlen) : NULL;
                val = d ? strdup(d) : NULL;
                curl_free(d);
                free(plus);
            }
        }
        p += len;
        if (*p == '&')
            p++;
    }
    return val;
}

/* Waits for the redirect, while the opener runs and a little after it. */
static char *wait_redirect(struct oauth_redirect *rd, pid_t opener)
{
    int64_t deadline = clock_mono_ms() + SIGNIN_TIMEOUT_MS, after = 0;
    char *q = NULL;
    while (!q && clock_mono_ms() < deadline) {
        q = oauth_redirect_wait(rd, 250);
        if (q || !opener)
            continue;
        int status;
        if (!after && waitpid(opener, &status, WNOHANG) == opener)
            after = clock_mono_ms() + AFTER_OPENER_MS;
        if (after && clock_mono_ms() > after)
            break;
    }
    if (opener && !after)
        waitpid(opener, NULL, WNOHANG);
    return q;
}

static int authorize(struct oauth *a, const struct discovery *d, struct oauth_redirect *rd,
                     const char *redirect_uri, char *err, size_t cap)
{
    char verifier[PKCE_MAX], challenge[PKCE_MAX], state[PKCE_MAX];
    if (pkce_verifier(verifier) < 0 || pkce_random(state, 16) < 0) {
        snprintf(err, cap, "mcp-bridge: no randomness for PKCE");
        return -1;
    }
    pkce_challenge(verifier, challenge);
    char *q = NULL;
    form_add(&q, "response_type", "code");
    form_add(&q, "client_id", a->client_id);
    form_add(&q, "redirect_uri", redirect_uri);
    form_add(&q, "state", state);
    form_add(&q, "code_challenge", challenge);
    form_add(&q, "code_challenge_method", "S256");
    form_add(&q, "scope", a->scope);
    /* OpenID Connect (Core 11) ignores offline_access, and so issues no
     * refresh token, unless the request asks for consent. */
    if (a->scope && oauth_has_word(a->scope, "offline_access"))
        form_add(&q, "prompt", "consent");
    form_add(&q, "resource", a->resource);
    if (!q || !d->authorization_endpoint) {
        free(q);
        snprintf(err, cap, "mcp-bridge: the authorization server has no authorization endpoint");
        return -1;
    }
    size_t n = strlen(d->authorization_endpoint) + strlen(q) + 2;
    char *url = malloc(n);
    if (!url) {
        free(q);
        return -1;
    }
    snprintf(url, n, "%s%c%s", d->authorization_endpoint,
             strchr(d->authorization_endpoint, '?') ? '&' : '?', q);
    free(q);
    pid_t opener = open_browser(a->o, url);
    free(url);
    char *resp = wait_redirect(rd, opener);
    if (!resp) {
        snprintf(err, cap, "mcp-bridge: the sign-in did not come back to the bridge in time");
        return -1;
    }
    int c_state, c_code, c_iss, c_err;
    char *got_state = query_get(resp, "state", &c_state);
    char *code = query_get(resp, "code", &c_code);
    char *iss = query_get(resp, "iss", &c_iss);
    char *e = query_get(resp, "error", &c_err);
    free(resp);
    int rc = -1;
    int iss_required =
        d->as &&
        json_is_true(json_object_get(d->as, "authorization_response_iss_parameter_supported"));
    if (e)
        snprintf(err, cap, "mcp-bridge: the authorization server said %.200s", e);
    else if (c_state != 1 || strcmp(got_state, state) != 0)
        snprintf(err, cap, "mcp-bridge: the sign-in's state does not match: refused");
    else if (c_code != 1 || !code || !*code)
        snprintf(err, cap, "mcp-bridge: the sign-in came back without a code");
    else if ((iss_required && !iss) || c_iss > 1 || (iss && strcmp(iss, a->issuer) != 0))
        /* RFC 9207: a present iss is compared as a plain string, always */
        snprintf(err, cap,
                 "mcp-bridge: the sign-in came back from another issuer (%.200s): refused",
                 iss ? iss : "none");
    else
        rc = 0;
    if (rc == 0) {
        char *form = NULL;
        form_add(&form, "grant_type", "authorization_code");
        form_add(&form, "code", code);
        form_add(&form, "redirect_uri", redirect_uri);
        form_add(&form, "code_verifier", verifier);
        form_add(&form, "resource", a->resource);
        rc = token_request(a, form, err, cap);
    }
    free(got_state);
    free(code);
    free(iss);
    free(e);
    return rc;
}

/* The scope to ask for: the challenge's (added to what was granted on a
 * step-up), else --oauth-scope, else the resource metadata's
 * scopes_supported, else none; offline_access when the server offers it
 * (2026-07-28: a client that wants refresh tokens asks for it). */
static void choose_scope(struct oauth *a, const struct discovery *d, const char *hint, int step_up)
{
    char *s = NULL;
    if (hint && step_up && a->scope) {
        size_t n = strlen(a->scope) + strlen(hint) + 2;
        s = malloc(n);
        if (s) {
            snprintf(s, n, "%s", a->scope);
            char *h = strdup(hint), *save_p = NULL;
            for (char *w = h ? strtok_r(h, " ", &save_p) : NULL; w;
                 w = strtok_r(NULL, " ", &save_p))
                if (!oauth_has_word(s, w))
                    strcat(strcat(s, " "), w);
            free(h);
        }
    } else if (hint) {
        s = strdup(hint);
    } else if (a->o->oauth_scope) {
        s = strdup(a->o->oauth_scope);
    } else if (d->prm) {
        s = jjoin(d->prm, "scopes_supported");
    }
    if (s && d->as && jhas(d->as, "scopes_supported", "offline_access") &&
        !oauth_has_word(s, "offline_access") &&
        (!json_object_get(d->as, "grant_types_supported") ||
         jhas(d->as, "grant_types_supported", "refresh_token"))) {
        char *m = realloc(s, strlen(s) + 16);
        if (m)
            s = strcat(m, " offline_access");
    }
    free(a->scope);
    a->scope = s;
}

static int client_credentials(struct oauth *a, const struct discovery *d, char *err, size_t cap)
{
    if (!a->o->oauth_client_id || (!a->o->oauth_client_secret && !a->o->oauth_client_key)) {
        snprintf(err, cap,
                 "mcp-bridge: --oauth-client-credentials needs --oauth-client-id and "
                 "--oauth-client-secret or --oauth-client-key");
        return -1;
    }
    set_str(&a->client_id, a->o->oauth_client_id);
    set_str(&a->client_secret, a->o->oauth_client_secret);
    set_str(&a->auth_method, a->o->oauth_client_key ? "private_key_jwt" : pick_auth_method(d, 1));
    char *form = NULL;
    form_add(&form, "grant_type", "client_credentials");
    form_add(&form, "scope", a->scope);
    form_add(&form, "resource", a->resource);
    return token_request(a, form, err, cap);
}

/* The first line of path into buf (cap bytes); 0, or -1 when empty. */
static int read_first_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    buf[strcspn(buf, " \r\n")] = '\0';
    return *buf ? 0 : -1;
}

/* Enterprise-managed authorization: the user's ID token, exchanged at the
 * enterprise IdP (RFC 8693) for an identity assertion grant (ID-JAG) for
 * this authorization server and resource. Malloc'd, or NULL. */
static char *id_jag(struct oauth *a, char *err, size_t cap)
{
    const struct bridge_options *o = a->o;
    char idt[16384];
    if (!o->oauth_idp_token_endpoint || read_first_line(o->oauth_idp_id_token, idt, sizeof idt)) {
        snprintf(err, cap,
                 "mcp-bridge: --oauth-idp-id-token needs a file with the ID token and "
                 "--oauth-idp-token-endpoint");
        return NULL;
    }
    char *form = NULL;
    form_add(&form, "grant_type", "urn:ietf:params:oauth:grant-type:token-exchange");
    form_add(&form, "subject_token", idt);
    form_add(&form, "subject_token_type", "urn:ietf:params:oauth:token-type:id_token");
    form_add(&form, "requested_token_type", "urn:ietf:params:oauth:token-type:id-jag");
    form_add(&form, "audience", a->issuer);
    form_add(&form, "resource", a->resource);
    form_add(&form, "client_id", o->oauth_idp_client_id);
    json_t *t = NULL;
    long st = http(a, o->oauth_idp_token_endpoint, form ? form : "", NULL, NULL, NULL, NULL, &t);
    free(form);
    const char *jag = jstr(t, "access_token");
    char *out = st == 200 && jag ? strdup(jag) : NULL;
    if (!out)
        refused(err, cap, "the identity provider refused the token exchange", st, t);
    json_decref(t);
    return out;
}

/* The JWT-bearer grant (RFC 7523 2.1) with a workload's JWT, read from its
 * file now (such tokens are short-lived and rotated by their issuer), or
 * with an ID-JAG from the enterprise IdP. */
static int jwt_bearer(struct oauth *a, const struct discovery *d, char *err, size_t cap)
{
    char jwt[16384];
    if (a->o->oauth_idp_id_token) {
        char *jag = id_jag(a, err, cap);
        if (!jag)
            return -1;
        snprintf(jwt, sizeof jwt, "%s", jag);
        free(jag);
    } else if (read_first_line(a->o->oauth_jwt_bearer, jwt, sizeof jwt) < 0) {
        snprintf(err, cap, "mcp-bridge: --oauth-jwt-bearer %s holds no JWT",
                 a->o->oauth_jwt_bearer);
        return -1;
    }
    set_str(&a->client_id, a->o->oauth_client_id);
    set_str(&a->client_secret, a->o->oauth_client_secret);
    set_str(&a->auth_method, a->client_secret ? pick_auth_method(d, 1) : "none");
    char *form = NULL;
    form_add(&form, "grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer");
    form_add(&form, "assertion", jwt);
    form_add(&form, "scope", a->scope);
    form_add(&form, "resource", a->resource);
    return token_request(a, form, err, cap);
}

int oauth_challenge(struct oauth *a, long status, const char *www_auth, char *err, size_t cap)
{
    char *rm = oauth_challenge_param(www_auth, "resource_metadata");
    char *scope = oauth_challenge_param(www_auth, "scope");
    char *error = oauth_challenge_param(www_auth, "error");
    int step_up = status == 403;
    int rc = -1;
    struct discovery d = {0};
    struct oauth_redirect rd = {.fd = -1};
    if (step_up && (!error || strcmp(error, "insufficient_scope") != 0)) {
        snprintf(err, cap, "mcp-bridge: %s refused the request (HTTP 403%s%s)", a->o->url,
                 error ? ": " : "", error ? error : "");
        goto out;
    }
    if (step_up && ++a->step_ups > MAX_STEP_UPS) {
        snprintf(err, cap, "mcp-bridge: %s still asks for more scope after %d sign-ins: giving up",
                 a->o->url, MAX_STEP_UPS);
        goto out;
    }
    /* an expired token: a refresh is quieter than a sign-in */
    if (!step_up && a->refresh_token && (long long)time(NULL) - a->refreshed_at > REFRESH_AGAIN_S &&
        refresh(a) == 0) {
        a->refreshed_at = (long long)time(NULL);
        rc = 0;
        goto out;
    }
    wipe(&a->access_token);
    if (discover(a, rm, &d, err, cap) < 0)
        goto out;
    choose_scope(a, &d, scope, step_up);
    bridge_log(LOG_INFO, "oauth_signin", "signing in to %s with %s%s%s", a->o->url, a->issuer,
               a->scope ? ", scope " : "", a->scope ? a->scope : "");
    if (a->o->oauth_client_credentials) {
        rc = client_credentials(a, &d, err, cap);
        goto out;
    }
    if (a->o->oauth_jwt_bearer || a->o->oauth_idp_id_token) {
        rc = jwt_bearer(a, &d, err, cap);
        goto out;
    }
    if (oauth_redirect_open(&rd) < 0) {
        snprintf(err, cap, "mcp-bridge: cannot listen on 127.0.0.1 for the sign-in");
        goto out;
    }
    char redirect_uri[64];
    snprintf(redirect_uri, sizeof redirect_uri, "http://127.0.0.1:%d/callback", rd.port);
    if (identify(a, &d, redirect_uri, err, cap) < 0)
        goto out;
    rc = authorize(a, &d, &rd, redirect_uri, err, cap);
out:
    if (rc == 0)
        bridge_log(LOG_INFO, "oauth_signed_in", "signed in to %s", a->o->url);
    oauth_redirect_close(&rd);
    discovery_free(&d);
    free(rm);
    free(scope);
    free(error);
    return rc;
}

/* ------------------------------------------------------------ public */

struct oauth *oauth_new(const struct bridge_options *o)
{
    if (o->oauth_off || o->token)
        return NULL;
    for (int i = 0; i < o->n_headers; i++) {
        if (strncasecmp(o->headers[i], "authorization:", 14) == 0)
            return NULL; /* a static Authorization: the user signs in another way */
    }
    struct oauth *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->o = o;
    load(a);
    return a;
}

const char *oauth_token(struct oauth *a)
{
    if (!a || !a->access_token)
        return NULL;
    long long refresh_at = a->refresh_at ? a->refresh_at : a->expires_at - REFRESH_MARGIN_S;
    if (a->expires_at && (long long)time(NULL) >= refresh_at && a->refresh_token)
        refresh(a);
    return a->access_token;
}

int oauth_headers(struct oauth *a, const char *htm, const char *url, struct curl_slist **h)
{
    const char *token = oauth_token(a);
    if (!token)
        return 0;
    char htu[2048];
    snprintf(htu, sizeof htu, "%.*s", (int)strcspn(url, "?#"), url);
    char *proof = a->dpop_bound ? oauth_dpop_proof(a->dpop, htm, htu, token, a->rs_nonce) : NULL;
    size_t n = strlen(token) + (proof ? strlen(proof) : 0) + 32;
    char *line = malloc(n);
    if (!line || (a->dpop_bound && !proof)) {
        free(line);
        free(proof);
        return -1;
    }
    snprintf(line, n, "Authorization: %s %s", a->dpop_bound ? "DPoP" : "Bearer", token);
    *h = curl_slist_append(*h, line);
    if (proof) {
        snprintf(line, n, "DPoP: %s", proof);
        *h = curl_slist_append(*h, line);
    }
    free(line);
    free(proof);
    return 0;
}

void oauth_dpop_nonce(struct oauth *a, const char *nonce, size_t len)
{
    if (!a || !a->dpop)
        return;
    free(a->rs_nonce);
    a->rs_nonce = strndup(nonce, len);
}

void oauth_free(struct oauth *a)
{
    if (!a)
        return;
    wipe(&a->access_token);
    wipe(&a->refresh_token);
    wipe(&a->client_secret);
    free(a->client_id);
    free(a->client_issuer);
    oauth_dpop_free(a->dpop);
    free(a->as_nonce);
    free(a->rs_nonce);
    free(a->auth_method);
    free(a->issuer);
    free(a->token_endpoint);
    free(a->resource);
    free(a->scope);
    free(a);
}

int oauth_logout(const char *url)
{
    /* a WebSocket URL's sign-in is kept under its http(s) form */
    char *http = oauth_http_url(url);
    int rc = http ? oauth_store_put(http, NULL) : -1;
    free(http);
    return rc;
}
