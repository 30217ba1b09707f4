/* kill_watch — what mcp-admin ends from outside, and tokens that run out,
 * take effect at once.
 *
 * mcp-admin works on the database, not on the process: `session kill`
 * marks the session deleted with a reason, and `tokens revoke` marks the
 * token. A thread here asks the store every KILL_WATCH_MS for tokens
 * revoked and sessions killed since it last looked (and a moment before:
 * OVERLAP_MS), and for the live sessions of those tokens. A revoked token's
 * connections are ended first (auth_token_revoked: every WebSocket, event
 * stream or waiting request that holds it, with or without a session, so
 * each says why), then each session ends in this process like a DELETE
 * would (its streams end, its readers are released, its upstream child
 * stops), logging session_killed with the reason.
 *
 * Expiry needs no query: every hold knows its token's expiry, and the
 * thread also wakes at the earliest one ahead (auth_expire) to end the
 * connections of tokens that have just expired. A connection that starts
 * with a token expiring sooner than the thread's next wake is ended at
 * that wake, at most KILL_WATCH_MS late. Their sessions stay: only
 * revocation ends sessions. */
#ifndef MCPD_KILL_WATCH_H
#define MCPD_KILL_WATCH_H

struct store;

#define KILL_WATCH_MS 250

/* end is called for each session to end, on the watcher's thread. */
int kill_watch_start(struct store *st, void (*end)(const char *session_id, const char *why));
void kill_watch_stop(void);

#endif
