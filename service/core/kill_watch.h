/* kill_watch — sessions ended from outside the process take effect at once.
 *
 * mcp-admin works on the database, not on the process: `session kill`
 * marks the session deleted with a reason, and `tokens revoke` marks the
 * token. A thread here asks the store every KILL_WATCH_MS for sessions
 * killed since it last looked and for live sessions of tokens revoked since
 * then, and ends each in this process like a DELETE would (its streams end,
 * its readers are released, its upstream child stops), logging
 * session_killed with the reason. */
#ifndef MCPD_KILL_WATCH_H
#define MCPD_KILL_WATCH_H

struct store;

#define KILL_WATCH_MS 250

/* end is called for each session to end, on the watcher's thread. */
int kill_watch_start(struct store *st, void (*end)(const char *session_id, const char *why));
void kill_watch_stop(void);

#endif
