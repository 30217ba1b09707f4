/* utf8 — the one UTF-8 validator: well-formed sequences as RFC 3629 defines
 * them (no overlong forms, no surrogates, nothing past U+10FFFF).
 *
 * It is a byte-at-a-time state machine, so that text arriving in pieces (a
 * WebSocket message's fragments, in whatever splits TCP delivers them) is
 * checked as it comes, with a sequence allowed to straddle two pieces. The
 * lead byte says how many continuation bytes follow and narrows the range
 * of the first of them; that narrowing is what rules out the overlong,
 * surrogate and too-large forms. The JSON reader and writer ask for one
 * whole sequence at a time (utf8_seq_len); the WebSocket parser feeds the
 * bytes of a message as they arrive (utf8_check_feed). */
#ifndef MCPD_UTF8_H
#define MCPD_UTF8_H

#include <stddef.h>
#include <stdint.h>

struct utf8_check {
    uint8_t need, lo, hi; /* continuation bytes still due; the next one's range */
};

/* Starts a check: no sequence open. */
void utf8_check_init(struct utf8_check *u);
/* Checks n more bytes; 0 while they may continue valid UTF-8, -1 once they
 * cannot (the check then stays failed only as far as the caller stops). */
int utf8_check_feed(struct utf8_check *u, const void *s, size_t n);
/* 1 when the bytes fed so far end on a sequence boundary. */
int utf8_check_complete(const struct utf8_check *u);

/* 1 when the len bytes are whole, valid UTF-8. */
int utf8_valid(const void *s, size_t len);

/* The length (2 to 4) of the valid multi-byte sequence that starts at s,
 * looking at no more than n bytes; 0 when there is none (s[0] is ASCII,
 * the sequence is invalid, or it is cut short at n). */
size_t utf8_seq_len(const unsigned char *s, size_t n);

/* The worst case of utf8_repair: every byte becomes a 3-byte U+FFFD. */
#define UTF8_REPAIR_CAP(n) (3 * (n) + 1)
/* s (n bytes) as valid UTF-8, into out (UTF8_REPAIR_CAP(n) bytes, NUL-
 * terminated): valid sequences and ASCII (NUL too) are copied, every other
 * byte becomes U+FFFD. For text from a peer, or cut short at a byte count,
 * that goes where only UTF-8 is accepted (a JSON string, a TEXT column).
 * Returns the length written. */
size_t utf8_repair(const void *s, size_t n, char *out);

#endif
