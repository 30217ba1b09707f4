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

#endif
