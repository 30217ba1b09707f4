/* fnv1a — the 32-bit FNV-1a hash, for spreading keys over a fixed number
 * of slots or queues (an address's rate slot, a stream's write queue).
 * Not for anything an attacker must not be able to collide on purpose:
 * where that matters the slots are bounded and a collision only shares
 * one (addr_caps, the introspection budget). The table (table.c) has its
 * own 64-bit form. */
#ifndef MCPD_FNV1A_H
#define MCPD_FNV1A_H

#include <stddef.h>
#include <stdint.h>

#define FNV1A_SEED 2166136261u

/* Hashes n bytes at p on from h (FNV1A_SEED to start; a previous result
 * to chain). */
uint32_t fnv1a(const void *p, size_t n, uint32_t h);
/* The hash of a NUL-terminated string. */
uint32_t fnv1a_str(const char *s);

#endif
