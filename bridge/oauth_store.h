/* oauth_store — mcp-bridge's sign-ins, kept between runs.
 *
 * One JSON file, $XDG_CONFIG_HOME/mcp-bridge/oauth.json (~/.config when
 * XDG_CONFIG_HOME is unset), mode 0600 in a 0700 directory: an object whose
 * keys are server URLs and whose values hold the client (id, secret) and
 * its tokens. Writes go to a new file renamed over the old one, so a crash
 * never leaves half a file. Nothing here logs a token.
 *
 * Ownership: oauth_store_get returns a new reference (json_decref it). */
#ifndef MCP_BRIDGE_OAUTH_STORE_H
#define MCP_BRIDGE_OAUTH_STORE_H

#include <jansson.h>

/* The file's path (malloc'd), or NULL when neither XDG_CONFIG_HOME nor HOME
 * is set. */
char *oauth_store_path(void);

/* The entry of url, or NULL. */
json_t *oauth_store_get(const char *url);

/* Replaces the entry of url (entry NULL: forgets it). 0, or -1 with errno. */
int oauth_store_put(const char *url, json_t *entry);

#endif
