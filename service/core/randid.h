/* randid — unguessable identifiers for sessions and streams: 128 bits from
 * the kernel's CSPRNG (getrandom, drawn 256 bytes at a time into a buffer of
 * each thread's own), written as 32 lowercase hex characters, which are all
 * visible ASCII as Mcp-Session-Id requires. */
#ifndef MCPD_RANDID_H
#define MCPD_RANDID_H

#define RANDID_LEN 32

/* Fills out[RANDID_LEN + 1]. Returns 0, or -1 if the kernel gave no
 * randomness (never falls back to a weak source). */
int randid_make(char out[RANDID_LEN + 1]);

/* The same length, but the first 48 bits are the wall clock in ms and only
 * 80 are random: ids made later sort later, so rows keyed by them are
 * appended at the end of their B-trees instead of dirtying pages all over
 * them. For stream ids, which only ever work together with the session id
 * that owns them. */
int randid_make_ordered(char out[RANDID_LEN + 1]);

#endif
