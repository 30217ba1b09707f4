/* session — see session.h. */
#include "session.h"

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

int session_adopt(struct session *s, const char *id)
{
    if (replace(&s->id, id, id ? strlen(id) : 0) < 0)
        return -1;
    s->generation++;
    return 0;
}

int session_set_version(struct session *s, const char *version)
{
    return replace(&s->protocol_version, version, version ? strlen(version) : 0);
}

char *session_replay_initialize(struct session *s, char *id_key, size_t cap)
{
    if (!s->init_body)
        return NULL;
    json_t *m = json_loads(s->init_body, 0, NULL);
    if (!m)
        return NULL;
    char id[64];
    snprintf(id, sizeof id, "mcp-bridge-reinit-%u", ++s->reinit_count);
    snprintf(id_key, cap, "\"%s\"", id);
    json_object_set_new(m, "id", json_string(id));
    char *body = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    return body;
}
