/* token_bucket — how often something may happen: `rate` times a second on
 * average, `burst` times in a row after a quiet spell.
 *
 * Used where an outsider decides how often mcpd does something: writes an
 * upstream child's stderr or malformed messages, asks the authorization
 * server about a token, answers a datagram. What is over the rate is
 * counted, not kept, and the count is reported with the next event let
 * through. Where two limits apply, a token the second refused is given
 * back to the first. Not thread-safe: the owner guards it with its own
 * lock. */
#ifndef MCPD_TOKEN_BUCKET_H
#define MCPD_TOKEN_BUCKET_H

#include <stdint.h>

struct token_bucket {
    double rate, burst; /* per second; most tokens held */
    double tokens;
    int64_t last_ms;  /* when tokens was last refilled */
    uint64_t dropped; /* refused since the last token_bucket_take_dropped */
};

/* A full bucket; rate <= 0 lets everything through. */
void token_bucket_init(struct token_bucket *b, double rate, double burst, int64_t now_ms);
/* 1 if one event may happen at now_ms (and takes a token), else 0 (and
 * counts it as dropped). */
int token_bucket_take(struct token_bucket *b, int64_t now_ms);
/* Gives back a token taken at now_ms, when what it was taken for did not
 * happen after all (a second limit refused it): the bucket fills as if the
 * take never was, up to the burst. No-op when rate <= 0. */
void token_bucket_give(struct token_bucket *b, int64_t now_ms);
/* Returns how many were dropped since the last call, and resets it. */
uint64_t token_bucket_take_dropped(struct token_bucket *b);

#endif
