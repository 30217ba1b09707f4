/* pkce — Proof Key for Code Exchange (RFC 7636), S256 only.
 *
 * pkce_verifier makes a fresh verifier: 32 random bytes from the kernel,
 * base64url without padding (43 characters, the RFC's recommendation).
 * pkce_challenge is BASE64URL(SHA-256(verifier)). Both write into the
 * caller's buffer (PKCE_MAX bytes is always enough). */
#ifndef MCP_BRIDGE_PKCE_H
#define MCP_BRIDGE_PKCE_H

#include <stddef.h>

#define PKCE_MAX 64

/* Writes n random bytes as base64url into out (PKCE_MAX bytes; n <= 32).
 * Returns 0, or -1 when the kernel gives no randomness. */
int pkce_random(char *out, size_t n);

/* A new code verifier into out (PKCE_MAX bytes). 0, or -1. */
int pkce_verifier(char *out);

/* The S256 challenge of verifier into out (PKCE_MAX bytes). */
void pkce_challenge(const char *verifier, char *out);

#endif
