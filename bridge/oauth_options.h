/* oauth_options — mcp-bridge's OAuth flags, for options.c's table:
 * OAUTH_CMDLINE_OPTIONS(at) are its cmdline.h entries, for a struct
 * bridge_options `at` bytes into the struct options.c parses into. The
 * values live in struct bridge_options (options.h) and are freed by
 * oauth_options_free. A client secret is a secret: ${NAME} in it is taken
 * from the environment, and nothing logs it. */
#ifndef MCP_BRIDGE_OAUTH_OPTIONS_H
#define MCP_BRIDGE_OAUTH_OPTIONS_H

#include "cmdline.h"
#include "options.h"

#include <stddef.h>

#define OAUTH_OPT(name, kind, field, at, take)                                                     \
    {                                                                                              \
        name, kind, (at) + offsetof(struct bridge_options, field), NULL, NULL, take                \
    }
#define OAUTH_CMDLINE_OPTIONS(at)                                                                  \
    OAUTH_OPT("oauth-client-id", CMDLINE_FUNC, oauth_client_id, at, oauth_options_take_expanded),  \
        OAUTH_OPT("oauth-client-secret", CMDLINE_FUNC, oauth_client_secret, at,                    \
                  oauth_options_take_expanded),                                                    \
        OAUTH_OPT("oauth-client-metadata-url", CMDLINE_STR, oauth_client_metadata_url, at, NULL),  \
        OAUTH_OPT("oauth-open-command", CMDLINE_STR, oauth_open_command, at, NULL),                \
        OAUTH_OPT("oauth-scope", CMDLINE_STR, oauth_scope, at, NULL),                              \
        OAUTH_OPT("oauth-client-credentials", CMDLINE_FLAG, oauth_client_credentials, at, NULL),   \
        OAUTH_OPT("no-oauth", CMDLINE_FLAG, oauth_off, at, NULL),                                  \
        OAUTH_OPT("logout", CMDLINE_FLAG, logout, at, NULL),                                       \
        OAUTH_OPT("oauth-client-key", CMDLINE_STR, oauth_client_key, at, NULL),                    \
        OAUTH_OPT("oauth-jwt-bearer", CMDLINE_STR, oauth_jwt_bearer, at, NULL),                    \
        OAUTH_OPT("oauth-idp-token-endpoint", CMDLINE_STR, oauth_idp_token_endpoint, at, NULL),    \
        OAUTH_OPT("oauth-idp-id-token", CMDLINE_STR, oauth_idp_id_token, at, NULL),                \
        OAUTH_OPT("oauth-idp-client-id", CMDLINE_FUNC, oauth_idp_client_id, at,                    \
                  oauth_options_take_expanded)

extern const char oauth_options_usage[];

/* A cmdline.h take for the values that may hold secrets: stores the value
 * with ${NAME} taken from the environment (a malloc'd string, replacing the
 * one before). */
int oauth_options_take_expanded(void *base, const struct cmdline_option *opt, const char *value,
                                char *err, size_t errcap);

void oauth_options_free(struct bridge_options *o);

#endif
