/* forwarded — see forwarded.h. */
#include "forwarded.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One network, kept as 16 bytes: IPv4 as its IPv4-mapped IPv6 form, so one
 * comparison covers both families. */
struct net {
    uint8_t addr[16];
    unsigned bits; /* prefix length over the 16 bytes */
};

struct forwarded {
    size_t n;
    struct net nets[];
};

static const char *const named[][5] = {
    {"loopback", "127.0.0.0/8", "::1/128", NULL},
    {"private", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"},
};

/* Reads a textual address into the 16-byte form; returns the prefix length
 * of a single address (128), or -1. */
static int read_addr(const char *text, uint8_t out[16])
{
    struct in_addr v4;
    if (inet_pton(AF_INET, text, &v4) == 1) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &v4, 4);
        return 1;
    }
    struct in6_addr v6;
    if (inet_pton(AF_INET6, text, &v6) == 1) {
        memcpy(out, &v6, 16);
        return 1;
    }
    return -1;
}

static int is_v4(const uint8_t a[16])
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(a, prefix, 12) == 0;
}

/* "ADDR" or "ADDR/BITS" into a net; the bits of an IPv4 prefix count from
 * the IPv4 address. */
static int read_net(const char *text, struct net *n)
{
    char buf[FORWARDED_ADDR_MAX + 8];
    size_t len = strlen(text);
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, text, len + 1);
    char *slash = strchr(buf, '/');
    long bits = -1;
    if (slash) {
        *slash = '\0';
        char *end;
        bits = strtol(slash + 1, &end, 10);
        if (end == slash + 1 || *end || bits < 0)
            return -1;
    }
    if (read_addr(buf, n->addr) < 0)
        return -1;
    unsigned max = is_v4(n->addr) && !strchr(buf, ':') ? 32 : 128;
    if (bits > (long)max)
        return -1;
    n->bits = (unsigned)(bits < 0 ? (long)max : bits) + (max == 32 ? 96 : 0);
    return 0;
}

static int in_net(const struct net *n, const uint8_t a[16])
{
    unsigned whole = n->bits / 8, rest = n->bits % 8;
    if (memcmp(n->addr, a, whole) != 0)
        return 0;
    if (rest == 0)
        return 1;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (n->addr[whole] & mask) == (a[whole] & mask);
}

/* Adds the networks an element names to f (only checks it when f is NULL);
 * returns -1 for an unknown element. */
static int each_net(const char *elem, struct forwarded *f)
{
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        if (strcmp(elem, named[i][0]) != 0)
            continue;
        for (size_t j = 1; j < 5 && named[i][j]; j++)
            if (f && read_net(named[i][j], &f->nets[f->n++]) != 0)
                return -1;
        return 0;
    }
    struct net n;
    if (read_net(elem, &n) != 0)
        return -1;
    if (f)
        f->nets[f->n++] = n;
    return 0;
}

/* Splits the list on commas and blanks; calls each_net per element. */
static int walk_list(const char *list, struct forwarded *f, char *err, size_t errcap)
{
    const char *p = list;
    while (p && *p) {
        size_t skip = strspn(p, ", \t");
        p += skip;
        size_t len = strcspn(p, ", \t");
        if (len == 0)
            break;
        char elem[FORWARDED_ADDR_MAX + 8];
        if (len >= sizeof elem || (memcpy(elem, p, len), elem[len] = '\0', each_net(elem, f))) {
            snprintf(err, errcap, "--trusted-proxies: not an address, network or name: %.*s",
                     (int)(len > 64 ? 64 : len), p);
            return -1;
        }
        p += len;
    }
    return 0;
}

int forwarded_parse(const char *list, struct forwarded **out, char *err, size_t errcap)
{
    /* Each element names at most 4 networks; elements are fewer than
     * separators plus one. */
    size_t cap = 0;
    for (const char *p = list ? list : ""; *p; p++)
        cap += *p == ',' || *p == ' ' || *p == '\t';
    cap = (cap + 1) * 4;
    if (walk_list(list, NULL, err, errcap) != 0)
        return -1;
    struct forwarded *f = calloc(1, sizeof *f + cap * sizeof(struct net));
    if (!f) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    walk_list(list, f, err, errcap);
    *out = f;
    return 0;
}

void forwarded_free(struct forwarded *f)
{
    free(f);
}

static int trusts_bytes(const struct forwarded *f, const uint8_t a[16])
{
    for (size_t i = 0; f && i < f->n; i++)
        if (in_net(&f->nets[i], a))
            return 1;
    return 0;
}

int forwarded_trusts(const struct forwarded *f, const char *addr)
{
    uint8_t a[16];
    return read_addr(addr, a) > 0 && trusts_bytes(f, a);
}

/* The canonical text of an address (IPv4-mapped shown as IPv4). */
static void canonical(const uint8_t a[16], char *out)
{
    if (is_v4(a))
        inet_ntop(AF_INET, a + 12, out, FORWARDED_ADDR_MAX);
    else
        inet_ntop(AF_INET6, a, out, FORWARDED_ADDR_MAX);
}

/* One X-Forwarded-For element, trimmed; also accepts "[v6]" and "v4:port"
 * forms some proxies write. Returns 0 with the address in a. */
static int read_hop(const char *s, size_t len, uint8_t a[16])
{
    while (len && (*s == ' ' || *s == '\t'))
        s++, len--;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    char buf[FORWARDED_ADDR_MAX + 8];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *p = buf;
    if (*p == '[') {
        char *close = strchr(p, ']');
        if (!close)
            return -1;
        *close = '\0';
        p++;
    } else if (strchr(p, '.') && strchr(p, ':') && read_addr(p, a) < 0) {
        /* "v4:port"; but "::ffff:v4" (how a dual-stack proxy may write an
         * IPv4 client) is an address as it is */
        *strrchr(p, ':') = '\0';
    }
    return read_addr(p, a) > 0 ? 0 : -1;
}

void forwarded_client(const struct forwarded *f, const char *peer, const char *xff, char *out)
{
    uint8_t a[16];
    if (read_addr(peer, a) < 0) {
        snprintf(out, FORWARDED_ADDR_MAX, "%s", peer);
        return;
    }
    /* From the right: while the current hop is trusted, its left neighbour
     * is who connected to it. */
    size_t end = xff ? strlen(xff) : 0;
    while (trusts_bytes(f, a) && end > 0) {
        size_t start = end;
        while (start > 0 && xff[start - 1] != ',')
            start--;
        uint8_t hop[16];
        if (read_hop(xff + start, end - start, hop) != 0)
            break;
        memcpy(a, hop, 16);
        end = start ? start - 1 : 0;
    }
    canonical(a, out);
}
