/* addr_caps — the connection caps of the raw transports (TCP connections,
 * UDP peers): at most max_total at once, and at most max_per_ip from one
 * client address (--max-connections, --max-connections-per-ip, counted
 * apart from HTTP's).
 *
 * A chained hash table counts the slots per address; an address's entry
 * goes with its last slot. Each transport has its own struct (a static,
 * initialised with ADDR_CAPS_INIT). Thread-safe: its own mutex, which it
 * never holds while calling out, so a caller may hold its own around. */
#ifndef MCPD_ADDR_CAPS_H
#define MCPD_ADDR_CAPS_H

#include <pthread.h>

#define ADDR_CAPS_BUCKETS 256

struct addr_caps_entry;

struct addr_caps {
    pthread_mutex_t mu;             /* guards what follows */
    unsigned max_total, max_per_ip; /* max_per_ip 0: no per-address cap */
    unsigned total;
    struct addr_caps_entry *buckets[ADDR_CAPS_BUCKETS];
};

#define ADDR_CAPS_INIT                                                                             \
    {                                                                                              \
        .mu = PTHREAD_MUTEX_INITIALIZER                                                            \
    }

/* Before the first take. max_total 0 counts as 1. */
void addr_caps_configure(struct addr_caps *caps, unsigned max_total, unsigned max_per_ip);

/* Takes a slot for addr (a numeric address, no port). Returns 0, or the
 * JSON-RPC code of the cap it is past (-32013 busy, also when out of
 * memory; -32014 per address) with *what naming it (static text). */
int addr_caps_take(struct addr_caps *caps, const char *addr, const char **what);

/* Gives back a slot taken for addr. */
void addr_caps_release(struct addr_caps *caps, const char *addr);

/* The slots taken now. */
unsigned addr_caps_total(struct addr_caps *caps);

#endif
