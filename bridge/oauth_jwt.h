/* oauth_jwt — private_key_jwt client authentication (RFC 7523 2.2): a
 * short-lived JWT, signed with the client's private key (PEM file: an EC
 * P-256 key signs ES256, an RSA key RS256), with iss and sub the client id,
 * aud the authorization server's issuer, and a fresh jti. Signing is
 * OpenSSL's. The returned assertion is malloc'd (caller frees). */
#ifndef MCP_BRIDGE_OAUTH_JWT_H
#define MCP_BRIDGE_OAUTH_JWT_H

#include <stddef.h>

char *oauth_jwt_assertion(const char *key_file, const char *client_id, const char *audience,
                          char *err, size_t cap);

/* DPoP (RFC 9449): a proof-of-possession key, an EC P-256 key made for the
 * client (kept with its tokens, whose binding is worthless without it), and the proofs it signs
 * (ES256, typ dpop+jwt, the public key as jwk): htm and htu name the request (htu without query or
 * fragment); token (may be NULL) is the access token the request presents (its hash goes as ath);
 * nonce (may be NULL) is the server's DPoP-Nonce. */
struct oauth_dpop;
struct oauth_dpop *oauth_dpop_new(void);
void oauth_dpop_free(struct oauth_dpop *d);
/* The key as PEM (PKCS#8), to keep it with the tokens bound to it (caller
 * frees; NULL when out of memory); and a key read back from it (NULL when
 * it is not an EC key of ours). */
char *oauth_dpop_export(const struct oauth_dpop *d);
struct oauth_dpop *oauth_dpop_import(const char *pem);
char *oauth_dpop_proof(struct oauth_dpop *d, const char *htm, const char *htu, const char *token,
                       const char *nonce);

#endif
