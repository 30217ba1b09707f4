/* oauth_redirect — the loopback redirect of the authorization code flow:
 * a listener on 127.0.0.1 with an ephemeral port that waits for the
 * browser's GET /callback?... and answers it with a short page.
 *
 * Blocking and bounded: the bridge signs in before anything else goes to
 * the server. The query string returned is malloc'd (caller frees). */
#ifndef MCP_BRIDGE_OAUTH_REDIRECT_H
#define MCP_BRIDGE_OAUTH_REDIRECT_H

struct oauth_redirect {
    int fd;
    int port;
};

/* Opens the listener. 0, or -1. */
int oauth_redirect_open(struct oauth_redirect *rd);

/* Waits up to timeout_ms for GET /callback; returns its query string
 * (possibly ""), or NULL on timeout or error. Other requests (a favicon)
 * get a 404 and the wait goes on. */
char *oauth_redirect_wait(struct oauth_redirect *rd, long timeout_ms);

void oauth_redirect_close(struct oauth_redirect *rd);

#endif
