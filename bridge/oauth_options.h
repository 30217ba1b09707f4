/* oauth_options — mcp-bridge's OAuth flags, parsed for options.c (which
 * keeps the getopt loop): OAUTH_LONG_OPTIONS goes into its table, and
 * options_parse hands every code from OPT_OAUTH_FIRST on to
 * oauth_options_take. The values live in struct bridge_options (options.h)
 * and are freed by oauth_options_free. A client secret is a secret: ${NAME}
 * in it is taken from the environment, and nothing logs it. */
#ifndef MCP_BRIDGE_OAUTH_OPTIONS_H
#define MCP_BRIDGE_OAUTH_OPTIONS_H

#include "options.h"

#include <getopt.h>

enum {
    OPT_OAUTH_FIRST = 512,
    OPT_OAUTH_CLIENT_ID = OPT_OAUTH_FIRST,
    OPT_OAUTH_CLIENT_SECRET,
    OPT_OAUTH_CLIENT_METADATA_URL,
    OPT_OAUTH_OPEN_COMMAND,
    OPT_OAUTH_SCOPE,
    OPT_OAUTH_CLIENT_CREDENTIALS,
    OPT_OAUTH_OFF,
    OPT_LOGOUT,
    OPT_OAUTH_CLIENT_KEY,
    OPT_OAUTH_JWT_BEARER,
    OPT_OAUTH_IDP_TOKEN_ENDPOINT,
    OPT_OAUTH_IDP_ID_TOKEN,
    OPT_OAUTH_IDP_CLIENT_ID,
};

#define OAUTH_LONG_OPTIONS                                                                         \
    {"oauth-client-id", required_argument, NULL, OPT_OAUTH_CLIENT_ID},                             \
        {"oauth-client-secret", required_argument, NULL, OPT_OAUTH_CLIENT_SECRET},                 \
        {"oauth-client-metadata-url", required_argument, NULL, OPT_OAUTH_CLIENT_METADATA_URL},     \
        {"oauth-open-command", required_argument, NULL, OPT_OAUTH_OPEN_COMMAND},                   \
        {"oauth-scope", required_argument, NULL, OPT_OAUTH_SCOPE},                                 \
        {"oauth-client-credentials", no_argument, NULL, OPT_OAUTH_CLIENT_CREDENTIALS},             \
        {"no-oauth", no_argument, NULL, OPT_OAUTH_OFF}, {"logout", no_argument, NULL, OPT_LOGOUT}, \
        {"oauth-client-key", required_argument, NULL, OPT_OAUTH_CLIENT_KEY},                       \
        {"oauth-jwt-bearer", required_argument, NULL, OPT_OAUTH_JWT_BEARER},                       \
        {"oauth-idp-token-endpoint", required_argument, NULL, OPT_OAUTH_IDP_TOKEN_ENDPOINT},       \
        {"oauth-idp-id-token", required_argument, NULL, OPT_OAUTH_IDP_ID_TOKEN},                   \
        {"oauth-idp-client-id", required_argument, NULL, OPT_OAUTH_IDP_CLIENT_ID},

extern const char oauth_options_usage[];

/* Takes one OAuth flag (code c, argument arg). 0, or -1 after printing
 * the reason on stderr. */
int oauth_options_take(struct bridge_options *o, int c, const char *arg);

void oauth_options_free(struct bridge_options *o);

#endif
