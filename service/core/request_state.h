/* request_state — the requestState of 2026-07-28's input-required results
 * (SEP-2322), made tamper-evident and bound to the request it continues.
 *
 * A stateless server that needs more input answers with an
 * InputRequiredResult and may hand the client an opaque requestState, which
 * the client sends back with its answers when it retries the request. The
 * client holds it, so the server must be able to tell whether it is the
 * state it gave out, to whom, and for which request. A state is
 * "<payload>.<mac>", both base64url, the payload the JSON
 *   {"p": principal, "r": digest of the request, "i": [keys asked for],
 *    "n": nonce, "x": expiry (wall ms), "d": data}
 * and the mac its HMAC-SHA256 under a key kept in the store (generated
 * once), so a state handed out before a restart still opens after it.
 *
 * What the specification asks (basic/patterns/mrtr, "to prevent replay")
 * is all bound: the principal; a short expiry; the originating request, as
 * a SHA-256 of its method, name, arguments and uri (canonical JSON: sorted
 * keys; absent arguments count as {}), so a state cannot continue a call
 * with other arguments or of another tool, prompt or resource. On top:
 *   - the keys of the inputRequests it was sent with: opening it keeps
 *     only the inputResponses to those, so an answer to an earlier round
 *     (or to a question never asked) cannot slip into this one;
 *   - use: each state has a nonce, and the request that presents it first
 *     claims it in the store (request_state_claim). When that request
 *     answers, its result is kept with a digest of its inputResponses until
 *     the state expires: the same retry sent again (a client that lost the
 *     answer) gets the same result without running again, and any other
 *     use of the state is refused. A request that ends without an answer
 *     (an error, cancelled, the process killed) gives its claim back, so
 *     the state can be used again.
 * A modified state, one sealed for another principal or request, an
 * expired one and one used already with other answers are refused with a
 * -32602 message that says which. */
#ifndef MCPD_REQUEST_STATE_H
#define MCPD_REQUEST_STATE_H

#include <jansson.h>
#include <stdint.h>

struct store;

/* How long a state may wait for its answers: long enough for a person to
 * fill in a form, short enough to bound replay and the uses kept. */
#define REQUEST_STATE_TTL_MS (15 * 60 * 1000)
/* A result larger than this (bytes of JSON) is not kept: the same retry
 * sent again is then refused like any other second use. */
#define REQUEST_STATE_OUTCOME_MAX (256 * 1024)

/* Loads the key from the store, creating it on first use, and keeps st for
 * the uses; `run` (copied) names this process in its claims (replica.h's
 * run: on a shared store a claim is taken over only when its process is
 * dead). 0, or -1. */
int request_state_init(struct store *st, const char *run);

/* A new state (caller frees) carrying data (borrowed) for principal (""
 * or NULL: none), continuing the request `method` with params (borrowed:
 * its name, arguments and uri are bound), sent with the inputRequests
 * `asked` (borrowed, may be NULL: only its keys count), valid for ttl_ms.
 * NULL on failure. */
char *request_state_seal(const char *principal, const char *method, json_t *params, json_t *asked,
                         json_t *data, int64_t ttl_ms);

/* An opened state. */
struct request_state {
    json_t *data;    /* what was sealed (own reference) */
    json_t *answers; /* params.inputResponses, only the keys asked for (own reference) */
    char nonce[32];
    int64_t expires_ms;
};

/* Opens a state presented with the request (method, params): 0 with *out
 * filled (request_state_clear it), or -1 with *why (static text) when it is
 * malformed, tampered with, another principal's or request's, or expired.
 * Does not touch the store. */
int request_state_open(const char *state, const char *principal, const char *method, json_t *params,
                       struct request_state *out, const char **why);
void request_state_clear(struct request_state *s);

/* A request's hold on a state, from request_state_claim to
 * request_state_finish. */
struct request_state_claim {
    char nonce[32];
    char id[40];
};

/* Claims an opened state for the request presenting it: 0 when it is this
 * request's to use (*claim set: end it with request_state_finish); 1 with
 * *outcome (new reference) when an earlier use with the same answers
 * answered with that result, which is the answer to this request too; -1
 * with *why when the state was used already with other answers, is in use
 * by a request still running, or the store failed. */
int request_state_claim(const struct request_state *s, struct request_state_claim *claim,
                        json_t **outcome, const char **why);

/* The claiming request answered with result (borrowed), which is kept for
 * the same retry sent again; or, with result NULL, ended without an answer
 * and gives the state back. */
void request_state_finish(const struct request_state_claim *claim, json_t *result);

#endif
