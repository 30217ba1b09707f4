/* dpop — proof of possession for OAuth access tokens (RFC 9449, the MCP
 * DPoP extension, SEP-1932).
 *
 * An authorization server may bind the token it issues to a key of the
 * client's (the token's cnf.jkt is the key's thumbprint). The client then
 * sends `Authorization: DPoP <token>` and, in a `DPoP` header, a proof: a
 * JWT signed with that key, the public key in its header, naming this
 * request (htm, htu), when it was made (iat), a unique jti, and the
 * token's hash (ath). A stolen token is then of no use without the key.
 *
 * dpop_check verifies a proof, in this order: typ "dpop+jwt", an allowed
 * asymmetric algorithm (oauth.h's list), a public key of that algorithm's
 * type (no private members; RSA at most DPOP_RSA_MAX_BITS with a 32-bit
 * exponent, so a proof costs no more than a real one), the signature
 * (cjose), and only then the
 * claims: htm is the method, htu the request's URL (scheme and host
 * case-insensitive, default ports and query ignored), iat within
 * DPOP_IAT_WINDOW_S of now, and ath the token's SHA-256. The key's
 * thumbprint (RFC 7638) is what the token's cnf.jkt must equal: the caller
 * compares them, and only then spends the proof's jti (dpop_first_use).
 * So the memory of jtis holds the proofs of real tokens' keys only, and
 * nobody without a token can fill it.
 *
 * Replays are caught first per process in a replay_window
 * (replay_window.h) of the last 2 * DPOP_IAT_WINDOW_S seconds, up to
 * DPOP_JTI_MAX proofs (about 110 a second sustained): bounded memory, and
 * past that the oldest are forgotten early, with a warning
 * (dpop_replay_window_full). A proof new to the process is then spent in
 * the store (store_dpop_use, by auth.c), which every replica shares and a
 * restart keeps. No server nonce is asked for. Thread-safe. */
#ifndef MCPD_DPOP_H
#define MCPD_DPOP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define DPOP_IAT_WINDOW_S 300
/* How far replicas' clocks may disagree: a proof spent in the store is
 * kept this much past its own window, since another replica's clock may
 * still accept its iat. */
#define DPOP_CLOCK_SKEW_S 60
/* The largest RSA proof key (and its exponent at most 32 bits). */
#define DPOP_RSA_MAX_BITS 4096
#define DPOP_JTI_MAX 65536
/* A thumbprint: base64url of a SHA-256, without padding. */
#define DPOP_JKT_LEN 43
/* The longest proof read (a proof with an RSA-4096 key runs to ~2 KiB). */
#define DPOP_PROOF_MAX 8192
/* The algorithms a proof may be signed with, for metadata and challenges. */
#define DPOP_ALGS "ES256 ES384 ES512 RS256 RS384 RS512 PS256 PS384 PS512"

/* What a proof proves. */
struct dpop_proof {
    char jkt[DPOP_JKT_LEN + 1]; /* the key's thumbprint */
    char use[DPOP_JKT_LEN + 1]; /* its one use: a digest of jkt and the jti */
    int64_t valid_until_s;      /* past this (wall clock s), its iat is refused */
};

/* Checks the proof sent with token on a request (method, htu: the URL the
 * request was sent to) at now_s (wall clock seconds), all but its jti's
 * first use. On success returns 0 and fills *out. Otherwise -1 and *why
 * (static text) says why. */
int dpop_check(const char *proof, const char *method, const char *htu, const char *token,
               int64_t now_s, struct dpop_proof *out, const char **why);
/* Spends the proof's jti: 1 the first time in the window, 0 for a replay,
 * -1 when it could not be noted (out of memory): refuse all but 1. */
int dpop_first_use(const struct dpop_proof *p, int64_t now_s);

/* The RFC 7638 thumbprint of a public JWK (RSA or EC) into jkt
 * (DPOP_JKT_LEN + 1 bytes). 0, or -1 for another key type or a key
 * missing a required member. */
int dpop_thumbprint(const json_t *jwk, char *jkt);

/* 1 when two URLs are the same for htu: scheme and host compared without
 * case, a default port (80, 443) the same as none, query and fragment
 * ignored, an empty path the same as "/". */
int dpop_htu_matches(const char *htu, const char *url);

/* Forgets every jti seen (for tests and shutdown). */
void dpop_reset(void);

#endif
