/* udp_wire — see udp_wire.h. */
#include "udp_wire.h"
#include "json_text.h"

#include <inttypes.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "_udp_"
/* The most a fragment's envelope adds around its base64 data:
 * {"_udp_seq":<20 digits>,"_udp_frag":[<10>,<10>],"_udp_data":""} */
#define FRAG_OVERHEAD 80
/* A whole message's envelope: "_udp_seq":<20 digits>, */
#define SEQ_OVERHEAD 32
/* A client's cookie: "_udp_cookie":"<16>", */
#define COOKIE_OVERHEAD 32

/* ---- base64 (RFC 4648, with padding) ---- */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t b64_encode(const unsigned char *in, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = B64[(v >> 18) & 63];
        out[o++] = B64[(v >> 12) & 63];
        out[o++] = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? B64[v & 63] : '=';
    }
    return o;
}

static int b64_value(char c)
{
    const char *p = c ? strchr(B64, c) : NULL;
    return p ? (int)(p - B64) : -1;
}

/* Returns the decoded length, or -1 when in is not padded base64. */
static long b64_decode(const char *in, size_t n, unsigned char *out)
{
    if (n % 4)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (in[i + (size_t)k] == '=' && i + 4 == n && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad || (v[k] = b64_value(in[i + (size_t)k])) < 0) {
                return -1;
            }
        }
        uint32_t w =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[o++] = (unsigned char)(w >> 16);
        if (pad < 2)
            out[o++] = (unsigned char)(w >> 8);
        if (pad < 1)
            out[o++] = (unsigned char)w;
    }
    return (long)o;
}

/* ---- decoding ---- */

static int fail(char *why, size_t cap, const char *msg)
{
    snprintf(why, cap, "%s", msg);
    return -1;
}

static int get_count(json_t *v, uint64_t min, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) < min)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* The envelope members of root (removed from it) into in. */
static int take_envelope(json_t *root, struct udp_wire_in *in, json_t **data, char *why, size_t cap)
{
    const char *key;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(root, tmp, key, v)
    {
        if (strncmp(key, PREFIX, strlen(PREFIX)) != 0)
            continue;
        const char *k = key + strlen(PREFIX);
        if (strcmp(k, "seq") == 0) {
            if (get_count(v, 1, &in->seq) != 0)
                return fail(why, cap, "_udp_seq must be an integer from 1");
            in->has_seq = 1;
        } else if (strcmp(k, "ack") == 0) {
            if (get_count(v, 0, &in->ack) != 0)
                return fail(why, cap, "_udp_ack must be a non-negative integer");
            in->has_ack = 1;
        } else if (strcmp(k, "sack") == 0) {
            if (!json_is_array(v) || json_array_size(v) > UDP_WIRE_MAX_SACK)
                return fail(why, cap, "_udp_sack must be an array of at most 32 sequence numbers");
            for (size_t i = 0; i < json_array_size(v); i++)
                if (get_count(json_array_get(v, i), 1, &in->sack[i]) != 0)
                    return fail(why, cap, "_udp_sack must hold sequence numbers");
            in->nsack = json_array_size(v);
        } else if (strcmp(k, "cookie") == 0) {
            const char *s = json_string_value(v);
            if (!s)
                return fail(why, cap, "_udp_cookie must be a string");
            /* A cookie of the wrong length is simply not valid. */
            if (strlen(s) == UDP_WIRE_COOKIE_LEN)
                memcpy(in->cookie, s, UDP_WIRE_COOKIE_LEN + 1);
        } else if (strcmp(k, "reset") == 0) {
            in->reset = json_is_true(v);
        } else if (strcmp(k, "frag") == 0) {
            uint64_t i, n;
            if (!json_is_array(v) || json_array_size(v) != 2 ||
                get_count(json_array_get(v, 0), 0, &i) != 0 ||
                get_count(json_array_get(v, 1), 1, &n) != 0 || i >= n || n > UINT32_MAX)
                return fail(why, cap, "_udp_frag must be [i, n] with 0 <= i < n");
            in->frag_i = (uint32_t)i;
            in->frag_n = (uint32_t)n;
        } else if (strcmp(k, "data") == 0) {
            if (!json_is_string(v))
                return fail(why, cap, "_udp_data must be a base64 string");
            *data = json_incref(v);
        }
        /* Other _udp_ members (_udp_hello, padding) are ignored. */
        json_object_del(root, key);
    }
    return 0;
}

static int take_payload(json_t *root, json_t *data, struct udp_wire_in *in, char *why, size_t cap)
{
    size_t rest = json_object_size(root);
    if (!in->has_seq) {
        if (rest || data || in->frag_n)
            return fail(why, cap, "a message or fragment needs _udp_seq");
        return 0;
    }
    if (in->frag_n) {
        if (!data || rest)
            return fail(why, cap, "a fragment (_udp_frag) carries _udp_data and no other member");
        size_t n = json_string_length(data);
        in->data = malloc(n / 4 * 3 + 1);
        long got =
            in->data ? b64_decode(json_string_value(data), n, (unsigned char *)in->data) : -1;
        if (got < 0)
            return fail(why, cap, in->data ? "_udp_data is not padded base64" : "out of memory");
        in->len = (size_t)got;
        in->data[in->len] = '\0';
        return 0;
    }
    if (data)
        return fail(why, cap, "_udp_data needs _udp_frag");
    if (!rest)
        return fail(why, cap, "a datagram with _udp_seq carries a message or a fragment");
    in->data = json_text_write(root, &in->len);
    return in->data ? 0 : fail(why, cap, "out of memory");
}

int udp_wire_decode(const char *buf, size_t len, struct udp_wire_in *in, char *why, size_t cap)
{
    memset(in, 0, sizeof *in);
    char perr[120];
    json_t *root = json_text_read(buf, len, JSON_TEXT_MAX_DEPTH, perr, sizeof perr);
    if (!json_is_object(root)) {
        json_decref(root);
        return fail(why, cap, "a datagram must be one JSON object (README \"UDP wire rules\")");
    }
    json_t *data = NULL;
    int rc = take_envelope(root, in, &data, why, cap);
    if (rc == 0)
        rc = take_payload(root, data, in, why, cap);
    json_decref(data);
    json_decref(root);
    if (rc != 0)
        udp_wire_in_clear(in);
    return rc;
}

void udp_wire_in_clear(struct udp_wire_in *in)
{
    free(in->data);
    in->data = NULL;
    in->len = 0;
}

/* ---- encoding ---- */

/* Raw bytes per fragment, a multiple of 3 so no fragment but the last is
 * padded. */
static size_t frag_bytes(size_t max_datagram)
{
    if (max_datagram < UDP_WIRE_MIN_DATAGRAM)
        return 0;
    return (max_datagram - FRAG_OVERHEAD - COOKIE_OVERHEAD) / 4 * 3;
}

static int whole(const char *msg, size_t len, size_t max_datagram)
{
    return len >= 2 && msg[0] == '{' && len + SEQ_OVERHEAD + COOKIE_OVERHEAD <= max_datagram;
}

/* The envelope's head: {"_udp_cookie":"…","_udp_seq":N */
static size_t head(char *out, size_t cap, const char *cookie, uint64_t seq)
{
    int k =
        cookie ? snprintf(out, cap, "{\"_udp_cookie\":\"%.16s\",\"_udp_seq\":%" PRIu64, cookie, seq)
               : snprintf(out, cap, "{\"_udp_seq\":%" PRIu64, seq);
    return k < 0 ? 0 : (size_t)k;
}

size_t udp_wire_count(const char *msg, size_t len, size_t max_datagram)
{
    size_t per = frag_bytes(max_datagram);
    if (!per)
        return 0;
    if (whole(msg, len, max_datagram))
        return 1;
    return len ? (len + per - 1) / per : 1;
}

char *udp_wire_encode(const char *msg, size_t len, size_t i, size_t n, uint64_t seq,
                      const char *cookie, size_t max_datagram, size_t *out_len)
{
    if (n == 1 && whole(msg, len, max_datagram)) {
        char *out = malloc(len + SEQ_OVERHEAD + COOKIE_OVERHEAD + 1);
        if (!out)
            return NULL;
        size_t o = head(out, SEQ_OVERHEAD + COOKIE_OVERHEAD, cookie, seq);
        /* "{}" has no member to put a comma before. */
        if (len > 2)
            out[o++] = ',';
        memcpy(out + o, msg + 1, len - 1);
        o += len - 1;
        out[o] = '\0';
        *out_len = o;
        return out;
    }
    size_t per = frag_bytes(max_datagram);
    size_t from = i * per, take = len - from < per ? len - from : per;
    size_t cap = FRAG_OVERHEAD + COOKIE_OVERHEAD + (take + 2) / 3 * 4 + 1;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t o = head(out, cap, cookie, seq);
    int k = snprintf(out + o, cap - o, ",\"_udp_frag\":[%zu,%zu],\"_udp_data\":\"", i, n);
    o += (size_t)k;
    o += b64_encode((const unsigned char *)msg + from, take, out + o);
    out[o++] = '"';
    out[o++] = '}';
    out[o] = '\0';
    *out_len = o;
    return out;
}

size_t udp_wire_ack(uint64_t ack, const uint64_t *sack, size_t nsack, char *out, size_t cap)
{
    size_t o = (size_t)snprintf(out, cap, "{\"_udp_ack\":%" PRIu64, ack);
    for (size_t i = 0; i < nsack && o + 32 < cap; i++)
        o +=
            (size_t)snprintf(out + o, cap - o, "%s%" PRIu64, i ? "," : ",\"_udp_sack\":[", sack[i]);
    if (nsack && o + 2 < cap)
        out[o++] = ']';
    if (o + 2 < cap)
        out[o++] = '}';
    out[o < cap ? o : cap - 1] = '\0';
    return o;
}

size_t udp_wire_cookie_reply(const char *cookie, int reset, char *out, size_t cap)
{
    int k = snprintf(out, cap, "{\"_udp_cookie\":\"%s\"%s}", cookie,
                     reset ? ",\"_udp_reset\":true" : "");
    return k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap - 1;
}

/* ---- the cookie: SipHash-2-4 ---- */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = ROTL(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = ROTL(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = ROTL(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = ROTL(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = ROTL(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = ROTL(v2, 32);                                                                         \
    } while (0)

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t siphash(const uint8_t key[16], const uint8_t *in, size_t n)
{
    uint64_t k0 = le64(key), k1 = le64(key + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
    size_t end = n - n % 8;
    for (size_t i = 0; i < end; i += 8) {
        uint64_t m = le64(in + i);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)n << 56;
    for (size_t i = 0; i < n % 8; i++)
        b |= (uint64_t)in[end + i] << (8 * i);
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

void udp_wire_cookie(const uint8_t key[16], const struct sockaddr *addr, uint64_t window,
                     char *cookie)
{
    uint8_t in[64];
    size_t n = 0;
    for (int i = 0; i < 8; i++)
        in[n++] = (uint8_t)(window >> (8 * i));
    in[n++] = (uint8_t)addr->sa_family;
    if (addr->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)addr;
        memcpy(in + n, &a->sin6_port, 2);
        n += 2;
        memcpy(in + n, &a->sin6_addr, 16);
        n += 16;
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
        memcpy(in + n, &a->sin_port, 2);
        n += 2;
        memcpy(in + n, &a->sin_addr, 4);
        n += 4;
    }
    snprintf(cookie, UDP_WIRE_COOKIE_LEN + 1, "%016" PRIx64, siphash(key, in, n));
}

/* ---- the retransmission timer ---- */

void udp_rto_init(struct udp_rto *r, int64_t initial, int64_t min, int64_t max)
{
    r->srtt = 0;
    r->rttvar = 0;
    r->rto = initial;
    r->min = min;
    r->max = max;
}

void udp_rto_sample(struct udp_rto *r, int64_t rtt)
{
    if (rtt < 0)
        return;
    if (!r->srtt) {
        r->srtt = rtt ? rtt : 1;
        r->rttvar = rtt / 2;
    } else {
        int64_t d = r->srtt > rtt ? r->srtt - rtt : rtt - r->srtt;
        r->rttvar = (3 * r->rttvar + d) / 4;
        r->srtt = (7 * r->srtt + rtt) / 8;
        if (!r->srtt)
            r->srtt = 1;
    }
    int64_t rto = r->srtt + 4 * r->rttvar;
    r->rto = rto < r->min ? r->min : rto > r->max ? r->max : rto;
}

int64_t udp_rto_backoff(const struct udp_rto *r, int tries)
{
    int64_t t = r->rto;
    for (int i = 0; i < tries && t < r->max; i++)
        t *= 2;
    return t > r->max ? r->max : t;
}
