/* request_state — see request_state.h. */
#include "request_state.h"
#include "clock.h"
#include "store.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_LEN 32
#define MAC_LEN 32
#define KEY_NAME "request_state_hmac"

static unsigned char key[KEY_LEN];
static int have_key;

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static char *b64url_encode(const unsigned char *in, size_t n)
{
    char *out = malloc(n / 3 * 4 + 5);
    if (!out)
        return NULL;
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = b64[v >> 6 & 63];
        out[o++] = b64[v & 63];
    }
    if (i < n) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0u);
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        if (i + 1 < n)
            out[o++] = b64[v >> 6 & 63];
    }
    out[o] = '\0';
    return out;
}

static int b64_value(char c)
{
    const char *p = c ? strchr(b64, c) : NULL;
    return p ? (int)(p - b64) : -1;
}

/* Decodes n characters (no padding); *len the bytes. NULL if malformed. */
static unsigned char *b64url_decode(const char *in, size_t n, size_t *len)
{
    if (n % 4 == 1)
        return NULL;
    unsigned char *out = malloc(n / 4 * 3 + 3);
    if (!out)
        return NULL;
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_value(in[i]);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = acc << 6 | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits & 0xFF);
        }
    }
    /* Bits left over must be zero: one encoding per byte string, so a
     * changed character always changes what is verified. */
    if (bits && (acc & ((1u << bits) - 1)) != 0) {
        free(out);
        return NULL;
    }
    *len = o;
    return out;
}

static int mac(const char *text, size_t n, unsigned char out[MAC_LEN])
{
    return gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, KEY_LEN, text, n, out) == 0 ? 0 : -1;
}

int request_state_init(struct store *st)
{
    unsigned char raw[KEY_LEN];
    char hex[2 * KEY_LEN + 1], stored[2 * KEY_LEN + 1];
    if (gnutls_rnd(GNUTLS_RND_KEY, raw, sizeof raw) != 0)
        return -1;
    for (size_t i = 0; i < KEY_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    if (store_secret(st, KEY_NAME, hex, clock_wall_ms(), stored, sizeof stored) != 0 ||
        strlen(stored) != 2 * KEY_LEN)
        return -1;
    for (size_t i = 0; i < KEY_LEN; i++) {
        unsigned v;
        if (sscanf(stored + 2 * i, "%2x", &v) != 1)
            return -1;
        key[i] = (unsigned char)v;
    }
    have_key = 1;
    return 0;
}

char *request_state_seal(const char *principal, const char *kind, json_t *data, int64_t ttl_ms)
{
    if (!have_key)
        return NULL;
    json_t *p = json_pack("{s:s, s:s, s:I, s:O}", "p", principal ? principal : "", "k", kind, "x",
                          (json_int_t)(clock_wall_ms() + ttl_ms), "d", data ? data : json_null());
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

int request_state_open(const char *state, const char *principal, const char *kind, json_t **data,
                       const char **why)
{
    *data = NULL;
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
    const char *what = json_string_value(json_object_get(p, "k"));
    json_int_t expiry = json_integer_value(json_object_get(p, "x"));
    int rc = -1;
    if (!who || !what)
        *why = "Invalid params: requestState is malformed";
    else if (strcmp(who, principal ? principal : "") != 0 || strcmp(what, kind) != 0)
        *why = "Invalid params: requestState belongs to another request";
    else if (expiry < clock_wall_ms())
        *why = "Invalid params: requestState has expired; start the request again";
    else {
        *data = json_incref(json_object_get(p, "d"));
        rc = 0;
    }
    json_decref(p);
    return rc;
}
