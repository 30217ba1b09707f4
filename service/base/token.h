/* token — bearer tokens: how they are made and how they are stored.
 *
 * A token is "mcpd_" and 43 base64url characters (32 random bytes from
 * gnutls_rnd). Only its SHA-256, in hex, is ever stored or compared, so a
 * copy of the database does not hand out access. mcpd (checking requests)
 * and mcp-admin (issuing tokens) share this module. */
#ifndef MCPD_TOKEN_H
#define MCPD_TOKEN_H

#define TOKEN_LEN 48      /* characters, without the terminator */
#define TOKEN_HASH_LEN 64 /* hex characters */

/* Writes a fresh token into out (TOKEN_LEN + 1 bytes). 0, or -1 when no
 * randomness is available. */
int token_generate(char out[TOKEN_LEN + 1]);
/* Writes the hex SHA-256 of token into out (TOKEN_HASH_LEN + 1 bytes).
 * 0, or -1. */
int token_hash(const char *token, char out[TOKEN_HASH_LEN + 1]);

#endif
