/* request_state — see request_state.h. */
#include "request_state.h"
#include "b64url.h"
#include "clock.h"
#include "store.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_LEN 32
#define MAC_LEN 32
#define KEY_NAME "request_state_hmac"

static unsigned char key[KEY_LEN];
static int have_key;
static struct store *store;
/* This process's id in the claims it makes: a claim of another run that
 * never finished died with its process. */
static char run[2 * 16 + 1];

static int mac(const char *text, size_t n, unsigned char out[MAC_LEN])
{
    return gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, KEY_LEN, text, n, out) == 0 ? 0 : -1;
}

static void hex(const unsigned char *in, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", in[i]);
}

/* n random bytes as hex into out (2n + 1). 0, or -1. */
static int random_hex(size_t n, char *out)
{
    unsigned char raw[32];
    if (n > sizeof raw || gnutls_rnd(GNUTLS_RND_NONCE, raw, n) != 0)
        return -1;
    hex(raw, n, out);
    return 0;
}

/* SHA-256 of v's canonical JSON (sorted keys, compact), base64url; caller
 * frees. NULL on failure. */
static char *digest(json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    unsigned char d[32];
    int ok = text && gnutls_hash_fast(GNUTLS_DIG_SHA256, text, strlen(text), d) == 0;
    free(text);
    return ok ? b64url_encode(d, sizeof d) : NULL;
}

/* What identifies the request a state continues: its method and the
 * params that say what it is for. Not _meta (client info, which may
 * change), nor the inputResponses and requestState of a retry. */
static char *request_digest(const char *method, json_t *params)
{
    json_t *args = json_object_get(params, "arguments");
    json_t *r =
        json_pack("{s:s?, s:O?, s:O?, s:o}", "method", method, "name",
                  json_object_get(params, "name"), "uri", json_object_get(params, "uri"),
                  "arguments", args && !json_is_null(args) ? json_incref(args) : json_object());
    char *d = r ? digest(r) : NULL;
    json_decref(r);
    return d;
}

int request_state_init(struct store *st, const char *this_run)
{
    unsigned char raw[KEY_LEN];
    char fresh[2 * KEY_LEN + 1], stored[2 * KEY_LEN + 1];
    if (gnutls_rnd(GNUTLS_RND_KEY, raw, sizeof raw) != 0)
        return -1;
    snprintf(run, sizeof run, "%s", this_run);
    hex(raw, KEY_LEN, fresh);
    if (store_secret(st, KEY_NAME, fresh, clock_wall_ms(), stored, sizeof stored) != 0 ||
        strlen(stored) != 2 * KEY_LEN)
        return -1;
    for (size_t i = 0; i < KEY_LEN; i++) {
        unsigned v;
        if (sscanf(stored + 2 * i, "%2x", &v) != 1)
            return -1;
        key[i] = (unsigned char)v;
    }
    store = st;
    have_key = 1;
    return 0;
}

char *request_state_seal(const char *principal, const char *method, json_t *params, json_t *asked,
                         json_t *data, int64_t ttl_ms)
{
    if (!have_key)
        return NULL;
    unsigned char raw[16];
    char *nonce =
        gnutls_rnd(GNUTLS_RND_NONCE, raw, sizeof raw) == 0 ? b64url_encode(raw, sizeof raw) : NULL;
    char *req = request_digest(method, params);
    json_t *keys = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(asked, k, v)
    {
        (void)v;
        json_array_append_new(keys, json_string(k));
    }
    json_t *p =
        nonce && req && keys
            ? json_pack("{s:s, s:s, s:O, s:s, s:I, s:O}", "p", principal ? principal : "", "r", req,
                        "i", keys, "n", nonce, "x", (json_int_t)(clock_wall_ms() + ttl_ms), "d",
                        data ? data : json_null())
            : NULL;
    json_decref(keys);
    free(nonce);
    free(req);
    char *text = p ? json_dumps(p, JSON_COMPACT) : NULL;
    json_decref(p);
    if (!text)
        return NULL;
    char *payload = b64url_encode((const unsigned char *)text, strlen(text));
    free(text);
    unsigned char m[MAC_LEN];
    char *sig = payload && mac(payload, strlen(payload), m) == 0 ? b64url_encode(m, MAC_LEN) : NULL;
    char *state = NULL;
    if (sig && asprintf(&state, "%s.%s", payload, sig) < 0)
        state = NULL;
    free(payload);
    free(sig);
    return state;
}

/* params.inputResponses, with only the answers to `keys` (an array). */
static json_t *answers_to(json_t *params, json_t *keys)
{
    json_t *all = json_object_get(params, "inputResponses"), *kept = json_object();
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k)
    {
        json_t *a = json_object_get(all, json_string_value(k));
        if (a && kept)
            json_object_set(kept, json_string_value(k), a);
    }
    return kept;
}

static int all_strings(json_t *a)
{
    size_t i;
    json_t *v;
    if (!json_is_array(a))
        return 0;
    json_array_foreach(a, i, v)
    {
        if (!json_is_string(v))
            return 0;
    }
    return 1;
}

int request_state_open(const char *state, const char *principal, const char *method, json_t *params,
                       struct request_state *out, const char **why)
{
    memset(out, 0, sizeof *out);
    const char *dot = state ? strchr(state, '.') : NULL;
    size_t plen = dot ? (size_t)(dot - state) : 0;
    size_t siglen;
    unsigned char *sig = dot ? b64url_decode(dot + 1, strlen(dot + 1), &siglen) : NULL;
    unsigned char m[MAC_LEN];
    /* Verified before anything in it is read. */
    int intact = have_key && sig && siglen == MAC_LEN && mac(state, plen, m) == 0 &&
                 gnutls_memcmp(m, sig, MAC_LEN) == 0;
    free(sig);
    if (!intact) {
        *why = "Invalid params: requestState failed its integrity check";
        return -1;
    }
    size_t len;
    unsigned char *text = b64url_decode(state, plen, &len);
    json_t *p = text ? json_loadb((const char *)text, len, 0, NULL) : NULL;
    free(text);
    const char *who = json_string_value(json_object_get(p, "p"));
    const char *req = json_string_value(json_object_get(p, "r"));
    const char *nonce = json_string_value(json_object_get(p, "n"));
    json_t *keys = json_object_get(p, "i");
    json_int_t expiry = json_integer_value(json_object_get(p, "x"));
    char *here = req ? request_digest(method, params) : NULL;
    int rc = -1;
    if (!who || !req || !nonce || strlen(nonce) >= sizeof out->nonce || !all_strings(keys))
        *why = "Invalid params: requestState is malformed; start the request again";
    else if (strcmp(who, principal ? principal : "") != 0)
        *why = "Invalid params: requestState belongs to another request (another principal's)";
    else if (!here || strcmp(here, req) != 0)
        *why = "Invalid params: requestState belongs to another request (another method, name, "
               "uri or arguments)";
    else if (expiry < clock_wall_ms())
        *why = "Invalid params: requestState has expired; start the request again";
    else if (!(out->answers = answers_to(params, keys)))
        *why = "Internal error: out of memory";
    else {
        out->data = json_incref(json_object_get(p, "d"));
        snprintf(out->nonce, sizeof out->nonce, "%s", nonce);
        out->expires_ms = expiry;
        rc = 0;
    }
    free(here);
    json_decref(p);
    return rc;
}

void request_state_clear(struct request_state *s)
{
    json_decref(s->data);
    json_decref(s->answers);
    memset(s, 0, sizeof *s);
}

int request_state_claim(const struct request_state *s, struct request_state_claim *claim,
                        json_t **outcome, const char **why)
{
    *outcome = NULL;
    memset(claim, 0, sizeof *claim);
    char *answers = digest(s->answers);
    struct store_state_use mine = {.nonce = (char *)s->nonce,
                                   .claim = claim->id,
                                   .run = run,
                                   .answers = answers,
                                   .expires_ms = s->expires_ms},
                           row;
    if (!answers || !store || random_hex(16, claim->id) != 0 ||
        store_state_use_claim(store, &mine, clock_wall_ms(), &row) != 0) {
        free(answers);
        *why = "Internal error: cannot record the use of the requestState";
        return -1;
    }
    int rc = -1;
    if (strcmp(row.claim, claim->id) == 0) {
        snprintf(claim->nonce, sizeof claim->nonce, "%s", s->nonce);
        rc = 0;
    } else if (!row.done)
        *why = "Invalid params: requestState is in use by a request still running; retry once "
               "it has answered";
    else if (strcmp(row.answers, answers) != 0)
        *why = "Invalid params: requestState was used already, with other inputResponses; "
               "start the request again";
    else if (!row.outcome || !(*outcome = json_loads(row.outcome, 0, NULL)))
        *why = "Invalid params: requestState was used already and its answer was not kept; "
               "start the request again";
    else
        rc = 1;
    free(answers);
    store_state_use_free(&row);
    return rc;
}

void request_state_finish(const struct request_state_claim *claim, json_t *result)
{
    if (!store || !claim->nonce[0])
        return;
    if (!result) {
        store_state_use_release(store, claim->nonce, claim->id);
        return;
    }
    char *kept = json_dumps(result, JSON_COMPACT);
    if (kept && strlen(kept) > REQUEST_STATE_OUTCOME_MAX) {
        free(kept);
        kept = NULL;
    }
    store_state_use_done(store, claim->nonce, claim->id, kept);
    free(kept);
}
