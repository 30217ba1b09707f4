/* session — see session.h. */
#include "session.h"

#include "bridge_log.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void session_free(struct session *s)
{
    free(s->id);
    free(s->protocol_version);
    free(s->init_body);
    free(s->initialized_body);
    memset(s, 0, sizeof *s);
}

static int replace(char **slot, const char *v, size_t len)
{
    char *copy = NULL;
    if (v) {
        copy = malloc(len + 1);
        if (!copy)
            return -1;
        memcpy(copy, v, len);
        copy[len] = '\0';
    }
    free(*slot);
    *slot = copy;
    return 0;
}

int session_remember_initialize(struct session *s, const char *body, size_t len)
{
    return replace(&s->init_body, body, len);
}

int session_remember_initialized(struct session *s, const char *body, size_t len)
{
    return replace(&s->initialized_body, body, len);
}

int session_header_safe(const char *v)
{
    if (!*v)
        return 0;
    for (; *v; v++)
        if ((unsigned char)*v < 0x21 || (unsigned char)*v > 0x7e)
            return 0;
    return 1;
}

int session_adopt(struct session *s, const char *id)
{
    if (id && !session_header_safe(id)) {
        bridge_log(LOG_WARN, "bad_session_id",
                   "the server's session id has characters a header cannot carry; ignored");
        return -1;
    }
    if (replace(&s->id, id, id ? strlen(id) : 0) < 0)
        return -1;
    s->generation++;
    return 0;
}

int session_set_version(struct session *s, const char *version)
{
    if (version && !session_header_safe(version)) {
        bridge_log(LOG_WARN, "bad_protocol_version",
                   "the server's protocolVersion has characters a header cannot carry; ignored");
        return -1;
    }
    return replace(&s->protocol_version, version, version ? strlen(version) : 0);
}

/* The remembered initialize with its id replaced by a bridge id, whose key
 * goes into s->reinit_key. NULL: nothing remembered or out of memory. */
static char *replay_initialize(struct session *s)
{
    if (!s->init_body)
        return NULL;
    json_t *m = json_loads(s->init_body, JSON_ALLOW_NUL, NULL);
    if (!m)
        return NULL;
    char id[48];
    snprintf(id, sizeof id, "mcp-bridge-reinit-%u", ++s->reinit_count);
    snprintf(s->reinit_key, sizeof s->reinit_key, "\"%s\"", id);
    json_object_set_new(m, "id", json_string(id));
    char *body = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    return body;
}

void session_rebuild_start(struct session *s, const struct session_rebuild *rb)
{
    char *body = replay_initialize(s);
    if (!body) {
        session_rebuild_end(s, rb,
                            "mcp-bridge: the server lost the session, and without the client's "
                            "initialize the bridge cannot start a new one; restart the client");
        return;
    }
    bridge_log(LOG_INFO, "session_lost", "the server no longer knows the session; re-initializing");
    s->state = SESSION_REINIT;
    rb->send(rb->ud, SESSION_REPLAY_INITIALIZE, body, strlen(body));
    free(body);
}

int session_rebuild_is_reply(const struct session *s, const char *key)
{
    return s->state == SESSION_REINIT && strcmp(key, s->reinit_key) == 0;
}

void session_rebuild_result(struct session *s, const struct session_rebuild *rb, const json_t *m,
                            const char *new_id)
{
    if (!json_object_get(m, "result")) {
        char msg[512];
        snprintf(msg, sizeof msg,
                 "mcp-bridge: the session with %s was lost and the server refused to start a "
                 "new one",
                 rb->host);
        session_rebuild_end(s, rb, msg);
        return;
    }
    session_adopt(s, new_id);
    bridge_log(LOG_INFO, "session_reinitialized", "new session adopted");
    if (s->initialized_body)
        rb->send(rb->ud, SESSION_REPLAY_INITIALIZED, s->initialized_body,
                 strlen(s->initialized_body));
    else
        session_rebuild_end(s, rb, NULL);
}

void session_rebuild_end(struct session *s, const struct session_rebuild *rb, const char *failure)
{
    /* after a failure the old session id stays: the next 404 tries again */
    s->state = SESSION_READY;
    rb->end(rb->ud, failure);
}

void session_rebuild_needed(struct session *s, const struct session_rebuild *rb,
                            unsigned generation)
{
    if (s->state == SESSION_REINIT)
        return;
    if (generation != s->generation) {
        session_rebuild_end(s, rb, NULL); /* rebuilt since: just send again */
        return;
    }
    session_rebuild_start(s, rb);
}
