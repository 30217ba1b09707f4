/* first_message — see first_message.h. */
#include "first_message.h"
#include "core.h"
#include "greeting.h"
#include "jsonrpc.h"
#include "log.h"

#include <stdio.h>

/* The log event "<transport>_<what>" in buf. */
static const char *event(const struct first_message *fm, const char *what, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s_%s", fm->io.transport, what);
    return buf;
}

static void send_msg(struct first_message *fm, json_t *msg)
{
    fmutex_lock(fm->wmu);
    fm->send_locked(fm->io.io, msg);
    fmutex_unlock(fm->wmu);
}

static void send_error(struct first_message *fm, json_t *id, int code, const char *message,
                       const char *reason)
{
    send_msg(fm, greeting_error(id, code, message, fm->io.transport, reason));
}

/* Opens the connection; with g's sessionId, a reconnect (a refusal in
 * *refused). */
static int open_push(struct first_message *fm, const struct auth_grant *grant,
                     const struct greeting *g, struct core_reply *refused)
{
    /* The token is held from here: a revocation before the next read is
     * seen by it. */
    fm->io.grant = *grant;
    fm->io.resume_session = g ? g->session_id : NULL;
    fm->io.resume_event = g ? g->last_event_id : NULL;
    *fm->push = push_open(&fm->io, refused);
    fm->io.resume_session = fm->io.resume_event = NULL;
    if (!*fm->push)
        return -1;
    *fm->served = 1;
    return 0;
}

/* mcpd/connect: authenticates, opens the connection and, with a
 * sessionId, resumes the session. Returns 1 when the connection is to
 * end. */
static int on_connect(struct first_message *fm, json_t *msg)
{
    char ev[48];
    struct greeting g;
    struct auth_grant grant;
    json_t *refusal;
    int fatal;
    if (greeting_accept(msg, fm->io.transport, fm->client, &g, &grant, &refusal, &fatal) != 0) {
        log_event(LOG_INFO, NULL, event(fm, "connect_refused", ev, sizeof ev), "%s %s: %s",
                  fm->noun, fm->name,
                  json_string_value(json_object_get(json_object_get(refusal, "error"), "message")));
        send_msg(fm, refusal);
        return fatal || fm->auth_required;
    }
    /* The answer goes out before anything of a resumed stream: push's
     * writer sends through wmu, held until the answer is out. */
    fmutex_lock(fm->wmu);
    struct core_reply refused;
    if (open_push(fm, &grant, &g, &refused) != 0) {
        fmutex_unlock(fm->wmu);
        send_error(fm, g.id, JSONRPC_INTERNAL_ERROR, "Out of memory", NULL);
        return 1;
    }
    if (refused.kind == CORE_REJECTED) {
        json_t *err = json_deep_copy(refused.error);
        core_reply_clear(&refused);
        if (err)
            json_object_set(err, "id", g.id);
        fm->send_locked(fm->io.io, err);
        fmutex_unlock(fm->wmu);
        log_event(LOG_INFO, NULL, event(fm, "resume_refused", ev, sizeof ev), "%s %s", fm->noun,
                  fm->name);
        return 0;
    }
    const char *sid = g.session_id; /* resumed, or none before initialize */
    fm->send_locked(fm->io.io, greeting_answer(g.id, fm->io.transport, sid));
    fmutex_unlock(fm->wmu);
    char principal[80] = "";
    if (fm->log_principal)
        snprintf(principal, sizeof principal, " principal=%s",
                 grant.principal[0] ? grant.principal : "-");
    log_event(LOG_INFO, sid, event(fm, "connected", ev, sizeof ev), "%s %s%s%s%s", fm->noun,
              fm->name, principal, g.session_id ? " resumed its session" : "",
              g.last_event_id ? " from an event id" : "");
    return 0;
}

int first_message_serve(struct first_message *fm, const char *data, size_t len)
{
    struct jsonrpc_error perr;
    json_t *msg = jsonrpc_parse(data, len, &perr);
    int rc = 0;
    if (greeting_is(msg)) {
        rc = on_connect(fm, msg);
    } else if (fm->auth_required) {
        char ev[48];
        log_event(LOG_INFO, NULL, event(fm, "unauthorized", ev, sizeof ev),
                  "%s %s: no mcpd/connect first", fm->noun, fm->name);
        json_t *id = json_object_get(msg, "id");
        send_error(
            fm, json_is_string(id) || json_is_integer(id) ? id : NULL, JSONRPC_SESSION_NOT_FOUND,
            "Unauthorized: the first message must be mcpd/connect with a token", "unauthorized");
        rc = 1;
    } else {
        struct auth_grant none = {0};
        if (open_push(fm, &none, NULL, NULL) != 0) {
            send_error(fm, NULL, JSONRPC_INTERNAL_ERROR, "Out of memory", NULL);
            rc = 1;
        } else {
            push_receive(*fm->push, data, len);
        }
    }
    json_decref(msg);
    return rc;
}
