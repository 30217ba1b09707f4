/* request_state — the requestState of 2026-07-28's input-required results
 * (SEP-2322), made tamper-evident.
 *
 * A stateless server that needs more input answers with an
 * InputRequiredResult and may hand the client an opaque requestState, which
 * the client sends back with its answers. The client holds it, so the
 * server must be able to tell whether it is the state it gave out, to whom,
 * and for which request: a state is "<payload>.<mac>", both base64url, the
 * payload the JSON {"p": principal, "k": what it is for, "x": expiry (wall
 * ms), "d": data} and the mac its HMAC-SHA256 under a key kept in the store
 * (generated once), so a state handed out before a restart still opens after
 * it. A modified state, one sealed for another principal or another tool,
 * and an expired one are refused. */
#ifndef MCPD_REQUEST_STATE_H
#define MCPD_REQUEST_STATE_H

#include <jansson.h>
#include <stdint.h>

struct store;

/* Loads the key from the store, creating it on first use. 0, or -1. */
int request_state_init(struct store *st);

/* A new state (caller frees) carrying data (borrowed) for principal (""
 * or NULL: none) and purpose `kind`, valid for ttl_ms. NULL on failure. */
char *request_state_seal(const char *principal, const char *kind, json_t *data, int64_t ttl_ms);

/* Opens a state: 0 with *data (new reference), or -1 with *why (static
 * text) when it is malformed, tampered with, another principal's or
 * purpose's, or expired. */
int request_state_open(const char *state, const char *principal, const char *kind, json_t **data,
                       const char **why);

#endif
