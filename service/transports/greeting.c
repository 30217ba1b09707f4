/* greeting — see greeting.h. */
#include "greeting.h"
#include "jsonrpc.h"

#include <stdio.h>
#include <string.h>

/* The longest token taken (auth's own buffer: JWTs run to kilobytes). */
#define TOKEN_MAX (AUTH_BEARER_MAX - 1)

int greeting_is(const json_t *msg)
{
    const char *method = json_string_value(json_object_get(msg, "method"));
    return method && strcmp(method, GREETING_METHOD) == 0;
}

json_t *greeting_error(json_t *id, int code, const char *message, const char *transport,
                       const char *reason)
{
    json_t *data = json_pack("{ss}", "transport", transport);
    if (data && reason)
        json_object_set_new(data, "reason", json_string(reason));
    return jsonrpc_error(id, code, message, data);
}

json_t *greeting_answer(json_t *id, const char *transport, const char *session_id)
{
    json_t *result = json_pack("{ss}", "transport", transport);
    if (result)
        json_object_set_new(result, "sessionId",
                            session_id ? json_string(session_id) : json_null());
    return jsonrpc_result(id, result);
}

/* A string member of params, or NULL; *bad is set when it is there but is
 * not a string. */
static const char *param(json_t *params, const char *key, int *bad)
{
    json_t *v = json_object_get(params, key);
    if (v && !json_is_string(v))
        *bad = 1;
    return json_string_value(v);
}

int greeting_accept(json_t *msg, const char *transport, const char *client, struct greeting *g,
                    struct auth_grant *grant, json_t **refusal, int *fatal)
{
    memset(g, 0, sizeof *g);
    *refusal = NULL;
    *fatal = 0;
    g->id = json_object_get(msg, "id");
    json_t *params = json_object_get(msg, "params");
    int bad = params && !json_is_object(params);
    g->token = param(params, "token", &bad);
    g->session_id = param(params, "sessionId", &bad);
    g->last_event_id = param(params, "lastEventId", &bad);
    if (bad || !g->id || (g->last_event_id && !g->session_id)) {
        *refusal = greeting_error(g->id, JSONRPC_INVALID_PARAMS,
                                  "Invalid params: mcpd/connect is a request whose params are "
                                  "strings: token, sessionId, lastEventId (which needs sessionId)",
                                  transport, "bad connect");
        return -1;
    }
    char authz[TOKEN_MAX + 16];
    const char *token = g->token && strlen(g->token) > TOKEN_MAX ? "" : g->token;
    if (token)
        snprintf(authz, sizeof authz, "Bearer %s", token);
    const char *why = NULL;
    struct auth_request req = {.client = client};
    if (auth_check(token ? authz : NULL, NULL, &req, grant, &why) != 0) {
        *refusal = greeting_error(g->id, JSONRPC_SESSION_NOT_FOUND, why, transport, "unauthorized");
        *fatal = 1;
        return -1;
    }
    return 0;
}
