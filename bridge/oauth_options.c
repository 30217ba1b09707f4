/* oauth_options — see oauth_options.h. */
#include "oauth_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char oauth_options_usage[] =
    "\n"
    "signing in (OAuth 2.1, MCP authorization): when the server answers 401 and no\n"
    "static Authorization is given, mcp-bridge discovers its authorization server,\n"
    "opens the browser (or prints the URL) and keeps the tokens, 0600, in\n"
    "$XDG_CONFIG_HOME/mcp-bridge/oauth.json (default ~/.config), refreshing them.\n"
    "  --oauth-client-id ID       a client registered with the authorization server\n"
    "                             (default: dynamic client registration)\n"
    "  --oauth-client-secret S    its secret; write '${NAME}' to take it from the\n"
    "                             environment (it is never logged)\n"
    "  --oauth-client-metadata-url URL\n"
    "                             a client ID metadata document, used as the client\n"
    "                             id where the authorization server supports them\n"
    "  --oauth-scope 'S1 S2'      the scope to ask for (default: the server's)\n"
    "  --oauth-open-command CMD   run CMD URL instead of xdg-open (headless use)\n"
    "  --oauth-client-key FILE    authenticate the client with a JWT signed by this\n"
    "                             private key (PEM; EC P-256: ES256, RSA: RS256)\n"
    "  --oauth-client-credentials sign in unattended with the client credentials\n"
    "                             grant (needs --oauth-client-id, and -secret or -key)\n"
    "  --oauth-jwt-bearer FILE    sign in unattended with the JWT in FILE (a\n"
    "                             workload identity token, read at each sign-in)\n"
    "                             as a JWT-bearer grant (RFC 7523)\n"
    "  --oauth-idp-id-token FILE  enterprise-managed authorization: exchange the\n"
    "                             ID token in FILE at --oauth-idp-token-endpoint URL\n"
    "                             (as --oauth-idp-client-id ID) for an identity\n"
    "                             assertion grant, used as a JWT-bearer grant\n"
    "  --no-oauth                 never sign in: a 401 is an error\n"
    "  --logout                   forget the sign-in kept for URL, then exit\n";

int oauth_options_take_expanded(void *base, const struct cmdline_option *opt, const char *value,
                                char *err, size_t errcap)
{
    const char *why = NULL;
    char *n = options_expand_env(value, &why);
    if (!n) {
        snprintf(err, errcap, "bad --%s: %s", opt->name, why);
        return -1;
    }
    char **slot = (char **)((char *)base + opt->offset);
    free(*slot);
    *slot = n;
    return 0;
}

void oauth_options_free(struct bridge_options *o)
{
    if (o->oauth_client_secret) {
        volatile char *p = o->oauth_client_secret;
        while (*p)
            *p++ = 0;
    }
    free(o->oauth_client_id);
    free(o->oauth_client_secret);
    free(o->oauth_client_metadata_url);
    free(o->oauth_open_command);
    free(o->oauth_scope);
    free(o->oauth_client_key);
    free(o->oauth_jwt_bearer);
    free(o->oauth_idp_token_endpoint);
    free(o->oauth_idp_id_token);
    free(o->oauth_idp_client_id);
}
