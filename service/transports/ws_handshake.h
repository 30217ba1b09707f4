/* ws_handshake — the two computations of the RFC 6455 opening handshake
 * that both ends make: the shape of a Sec-WebSocket-Key, and the
 * Sec-WebSocket-Accept that proves the server read it (base64 of the SHA-1
 * of the key and the protocol's GUID). mcpd's WebSocket transport answers
 * with it; mcp-bridge checks it. */
#ifndef MCPD_WS_HANDSHAKE_H
#define MCPD_WS_HANDSHAKE_H

/* 1 when key is base64 of 16 bytes (22 characters and "=="). */
int ws_handshake_key_ok(const char *key);

/* Sec-WebSocket-Accept for key (24 characters) into out (28 characters and
 * a NUL). Returns 0, or -1 if hashing failed. */
int ws_handshake_accept(const char *key, char out[29]);

/* A fresh random Sec-WebSocket-Key (24 characters and a NUL), for a
 * client. Returns 0, or -1 without randomness. */
int ws_handshake_new_key(char out[25]);

#endif
