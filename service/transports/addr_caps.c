/* addr_caps — see addr_caps.h. */
#include "addr_caps.h"
#include "fnv1a.h"
#include "jsonrpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct addr_caps_entry {
    char addr[64];
    unsigned n;
    struct addr_caps_entry *next;
};

static unsigned addr_hash(const char *s)
{
    return fnv1a_str(s) % ADDR_CAPS_BUCKETS;
}

/* Where addr's entry is (or would be linked). Caller holds mu. */
static struct addr_caps_entry **slot_of(struct addr_caps *caps, const char *addr)
{
    struct addr_caps_entry **ep = &caps->buckets[addr_hash(addr)];
    while (*ep && strcmp((*ep)->addr, addr) != 0)
        ep = &(*ep)->next;
    return ep;
}

void addr_caps_configure(struct addr_caps *caps, unsigned max_total, unsigned max_per_ip)
{
    pthread_mutex_lock(&caps->mu);
    caps->max_total = max_total ? max_total : 1;
    caps->max_per_ip = max_per_ip;
    pthread_mutex_unlock(&caps->mu);
}

int addr_caps_take(struct addr_caps *caps, const char *addr, const char **what)
{
    pthread_mutex_lock(&caps->mu);
    int refused = 0;
    struct addr_caps_entry **ep = slot_of(caps, addr), *e = *ep;
    if (caps->total >= caps->max_total) {
        refused = JSONRPC_SERVER_BUSY;
        *what = "Server busy: too many connections (--max-connections); try again later";
    } else if (caps->max_per_ip && e && e->n >= caps->max_per_ip) {
        refused = JSONRPC_TOO_MANY_CONNECTIONS;
        *what = "Too many connections from this address (--max-connections-per-ip)";
    } else if (!e && !(e = calloc(1, sizeof *e))) {
        refused = JSONRPC_SERVER_BUSY;
        *what = "Server busy: out of memory";
    } else {
        if (!e->n) {
            snprintf(e->addr, sizeof e->addr, "%s", addr);
            e->next = *ep;
            *ep = e;
        }
        e->n++;
        caps->total++;
    }
    pthread_mutex_unlock(&caps->mu);
    return refused;
}

void addr_caps_release(struct addr_caps *caps, const char *addr)
{
    pthread_mutex_lock(&caps->mu);
    struct addr_caps_entry **ep = slot_of(caps, addr);
    if (*ep && --(*ep)->n == 0) {
        struct addr_caps_entry *e = *ep;
        *ep = e->next;
        free(e);
    }
    caps->total--;
    pthread_mutex_unlock(&caps->mu);
}

unsigned addr_caps_total(struct addr_caps *caps)
{
    pthread_mutex_lock(&caps->mu);
    unsigned n = caps->total;
    pthread_mutex_unlock(&caps->mu);
    return n;
}
