/* origin — see origin.h. */
#include "origin.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_ENTRIES 32

struct origin_policy {
    char *hosts[MAX_ENTRIES];
    int nhosts;
    char *origins[MAX_ENTRIES];
    int norigins;
};

static const char *const loopback = "localhost,127.0.0.1,[::1]";

static int split(const char *csv, char **out)
{
    int n = 0;
    const char *p = csv;
    while (*p && n < MAX_ENTRIES) {
        while (*p == ',' || isspace((unsigned char)*p))
            p++;
        const char *start = p;
        while (*p && *p != ',')
            p++;
        const char *end = p;
        while (end > start && isspace((unsigned char)end[-1]))
            end--;
        if (end > start)
            out[n++] = strndup(start, (size_t)(end - start));
    }
    return n;
}

struct origin_policy *origin_policy_new(const char *hosts, const char *origins)
{
    struct origin_policy *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->nhosts = split(hosts && *hosts ? hosts : loopback, p->hosts);
    p->norigins = split(origins && *origins ? origins : loopback, p->origins);
    return p;
}

void origin_policy_free(struct origin_policy *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nhosts; i++)
        free(p->hosts[i]);
    for (int i = 0; i < p->norigins; i++)
        free(p->origins[i]);
    free(p);
}

/* Copies the host name of "name[:port]" or "[v6]:port" into out. */
static int host_part(const char *hostport, char *out, size_t cap)
{
    size_t len;
    if (hostport[0] == '[') {
        const char *close = strchr(hostport, ']');
        if (!close)
            return -1;
        len = (size_t)(close - hostport) + 1;
        if (close[1] && close[1] != ':')
            return -1;
    } else {
        const char *colon = strchr(hostport, ':');
        len = colon ? (size_t)(colon - hostport) : strlen(hostport);
    }
    if (len == 0 || len >= cap)
        return -1;
    memcpy(out, hostport, len);
    out[len] = '\0';
    return 0;
}

static int listed(char *const *list, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(list[i], "*") == 0 || strcasecmp(list[i], name) == 0)
            return 1;
    return 0;
}

int origin_host_allowed(const struct origin_policy *p, const char *host)
{
    char name[256];
    if (!host || host_part(host, name, sizeof name) != 0)
        return 0;
    return listed(p->hosts, p->nhosts, name);
}

int origin_origin_allowed(const struct origin_policy *p, const char *origin)
{
    if (!origin)
        return 1;
    for (int i = 0; i < p->norigins; i++)
        if (strstr(p->origins[i], "://") && strcasecmp(p->origins[i], origin) == 0)
            return 1;
    const char *sep = strstr(origin, "://");
    if (!sep)
        return 0;
    const char *hostport = sep + 3;
    char trimmed[300];
    size_t len = strcspn(hostport, "/");
    if (len >= sizeof trimmed)
        return 0;
    memcpy(trimmed, hostport, len);
    trimmed[len] = '\0';
    char name[256];
    if (host_part(trimmed, name, sizeof name) != 0)
        return 0;
    return listed(p->origins, p->norigins, name);
}

const char *origin_refusal(const struct origin_policy *p, const char *host, const char *origin)
{
    if (!origin_host_allowed(p, host))
        return "Forbidden: Host header not allowed";
    if (!origin_origin_allowed(p, origin))
        return "Forbidden: Origin not allowed";
    return NULL;
}
