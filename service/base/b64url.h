/* b64url — base64url without padding (RFC 4648 5), as JOSE and OAuth
 * write it: JWS parts, PKCE values, key thumbprints, request states.
 *
 * Decoding is strict: any character outside the alphabet, padding, or
 * leftover bits that are not zero fail, so that every byte string has one
 * encoding and a changed character always changes what is decoded. */
#ifndef MCPD_B64URL_H
#define MCPD_B64URL_H

#include <stddef.h>

/* n bytes encoded, NUL-terminated; caller frees. NULL when out of memory. */
char *b64url_encode(const unsigned char *in, size_t n);
/* The same into out, which holds at least B64URL_LEN(n) + 1 bytes. */
#define B64URL_LEN(n) (((n)*4 + 2) / 3)
void b64url_encode_to(const unsigned char *in, size_t n, char *out);
/* n characters decoded; *len says how many bytes. Caller frees; NULL when
 * malformed or out of memory. */
unsigned char *b64url_decode(const char *in, size_t n, size_t *len);

#endif
