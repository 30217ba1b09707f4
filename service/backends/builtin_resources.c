/* builtin_resources — the resources/... methods of the built-in toolset.
 *
 * Static resources are one constant table (uri, name, title, description,
 * mimeType, and either text or a base64 blob); the only template is
 * test://template/{id}/data, read as a small JSON document naming the id.
 * Reading an unknown URI is -32002 "Resource not found" with data {uri}.
 *
 * Subscriptions are kept per session: a list of nodes {session id, set of
 * URIs} behind b->mu, dropped when the core reports the session closed.
 * Only known URIs (static or matching the template) may be subscribed, at
 * most MAX_SUBS per session, so a client cannot grow the set without bound.
 * subscribe/unsubscribe answer exactly {} as the SDK's strict schema
 * requires.
 *
 * One resource changes: test://watched-resource, each time a client calls
 * the 2026-07-28 tool test_trigger_resource_update, so that resource
 * subscriptions can be exercised for real. Its text then names the count of
 * changes (b->watched_updates), and notifications/resources/updated goes to
 * the 2025 sessions subscribed to it (on their standalone stream, through
 * call_channel) and to the subscriptions/listen streams that follow it
 * (core_resource_updated). The other resources never change. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin_int.h"
#include "core.h"

#define MAX_SUBS 64
#define TEMPLATE_PREFIX "test://template/"
#define TEMPLATE_SUFFIX "/data"
#define WATCHED_URI "test://watched-resource"
#define WATCHED_TEXT "Watched resource content"

struct resource {
    const char *uri;
    const char *name;
    const char *title;
    const char *description;
    const char *mime_type;
    const char *text; /* either text */
    const char *blob; /* or base64 blob */
};

static const struct resource resources[] = {
    {"test://static-text", "static-text", "Static Text Resource",
     "A static text resource for testing", "text/plain",
     "This is the content of the static text resource.", NULL},
    {"test://static-binary", "static-binary", "Static Binary Resource",
     "A static binary resource (image) for testing", "image/png", NULL, builtin_png_base64},
    {WATCHED_URI, "watched-resource", "Watched Resource",
     "A resource clients may subscribe to for updates", "text/plain", WATCHED_TEXT, NULL},
    {"test://example-resource", "example-resource", "Example Resource",
     "An example resource, e.g. for test_prompt_with_embedded_resource", "text/plain",
     "Embedded resource content for testing.", NULL},
};

#define NRESOURCES (sizeof resources / sizeof resources[0])

struct builtin_subs {
    char *session_id;
    char **uris;
    size_t n;
    struct builtin_subs *next;
};

static char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);

    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

static const struct resource *find_resource(const char *uri)
{
    size_t i;

    for (i = 0; i < NRESOURCES; i++)
        if (strcmp(resources[i].uri, uri) == 0)
            return &resources[i];
    return NULL;
}

/* Length of the {id} part when uri matches the template, else 0. The id is
 * one non-empty path segment. */
static size_t template_id_len(const char *uri)
{
    size_t plen = strlen(TEMPLATE_PREFIX), slen = strlen(TEMPLATE_SUFFIX), n = strlen(uri), idlen;

    if (n <= plen + slen || strncmp(uri, TEMPLATE_PREFIX, plen) != 0 ||
        strcmp(uri + n - slen, TEMPLATE_SUFFIX) != 0)
        return 0;
    idlen = n - plen - slen;
    if (memchr(uri + plen, '/', idlen) != NULL)
        return 0;
    return idlen;
}

/* The request's params.uri, or NULL after ending the call with -32602. */
static const char *param_uri(struct call *c)
{
    json_t *uri = json_object_get(call_params(c), "uri");

    if (!json_is_string(uri)) {
        call_fail(c, -32602, "Invalid params: a string \"uri\" is required", NULL);
        return NULL;
    }
    return json_string_value(uri);
}

static void not_found(struct call *c, const char *uri)
{
    call_fail(c, -32002, "Resource not found", json_pack("{s:s}", "uri", uri));
}

void builtin_resources_list(struct builtin *b, struct call *c)
{
    json_t *list = json_array();
    size_t i;

    (void)b;
    if (builtin_check_cursor(c) != 0) {
        json_decref(list);
        return;
    }
    for (i = 0; list != NULL && i < NRESOURCES; i++) {
        const struct resource *r = &resources[i];
        if (json_array_append_new(list, json_pack("{s:s,s:s,s:s,s:s,s:s}", "uri", r->uri, "name",
                                                  r->name, "title", r->title, "description",
                                                  r->description, "mimeType", r->mime_type)) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    /* A 2026-07-28 client (skills extension) also sees the skills' files. */
    if (list != NULL && builtin_stateless_call(c)) {
        json_t *skill_files = builtin_skills_resources();
        json_array_extend(list, skill_files);
        json_decref(skill_files);
    }
    builtin_reply(c, list != NULL ? json_pack("{s:o}", "resources", list) : NULL);
}

void builtin_resources_templates_list(struct builtin *b, struct call *c)
{
    (void)b;
    if (builtin_check_cursor(c) != 0)
        return;
    builtin_reply(c, json_pack("{s:[{s:s,s:s,s:s,s:s,s:s}]}", "resourceTemplates", "uriTemplate",
                               TEMPLATE_PREFIX "{id}" TEMPLATE_SUFFIX, "name", "template", "title",
                               "Resource Template", "description",
                               "A resource template with parameter substitution", "mimeType",
                               "application/json"));
}

static json_t *read_template(const char *uri, size_t idlen)
{
    const char *id = uri + strlen(TEMPLATE_PREFIX);
    json_t *doc = json_object(), *result = NULL;
    char *text = NULL;
    json_t *jid = json_stringn(id, idlen);
    json_t *data = jid != NULL ? json_sprintf("Data for ID: %s", json_string_value(jid)) : NULL;

    if (doc != NULL && jid != NULL && data != NULL) {
        json_object_set(doc, "id", jid);
        json_object_set_new(doc, "templateTest", json_true());
        json_object_set(doc, "data", data);
        text = json_dumps(doc, JSON_COMPACT);
    }
    if (text != NULL)
        result = json_pack("{s:[{s:s,s:s,s:s}]}", "contents", "uri", uri, "mimeType",
                           "application/json", "text", text);
    free(text);
    json_decref(data);
    json_decref(jid);
    json_decref(doc);
    return result;
}

/* test://watched-resource as it is now: its first text until it changes. */
static json_t *read_watched(struct builtin *b)
{
    unsigned long updates;
    json_t *text;

    pthread_mutex_lock(&b->mu);
    updates = b->watched_updates;
    pthread_mutex_unlock(&b->mu);
    text = updates == 0 ? json_string(WATCHED_TEXT)
                        : json_sprintf(WATCHED_TEXT " (update %lu)", updates);
    if (text == NULL)
        return NULL;
    return json_pack("{s:[{s:s,s:s,s:o}]}", "contents", "uri", WATCHED_URI, "mimeType",
                     "text/plain", "text", text);
}

void builtin_resources_read(struct builtin *b, struct call *c)
{
    const char *uri = param_uri(c);
    const struct resource *r;
    size_t idlen;

    if (uri == NULL)
        return;
    r = find_resource(uri);
    if (r != NULL && strcmp(r->uri, WATCHED_URI) == 0) {
        builtin_reply(c, read_watched(b));
        return;
    }
    if (r != NULL) {
        builtin_reply(c, json_pack("{s:[{s:s,s:s,s:s}]}", "contents", "uri", r->uri, "mimeType",
                                   r->mime_type, r->text != NULL ? "text" : "blob",
                                   r->text != NULL ? r->text : r->blob));
        return;
    }
    if (builtin_skills_read(c, uri) == 0)
        return;
    idlen = template_id_len(uri);
    if (idlen == 0) {
        not_found(c, uri);
        return;
    }
    builtin_reply(c, read_template(uri, idlen));
}

/* ---- subscriptions ---- */

static struct builtin_subs **find_node(struct builtin *b, const char *session_id)
{
    struct builtin_subs **p;

    for (p = &b->subs; *p != NULL; p = &(*p)->next)
        if (strcmp((*p)->session_id, session_id) == 0)
            return p;
    return p;
}

static void free_node(struct builtin_subs *s)
{
    size_t i;

    for (i = 0; i < s->n; i++)
        free(s->uris[i]);
    free(s->uris);
    free(s->session_id);
    free(s);
}

static struct builtin_subs *new_node(const char *session_id)
{
    struct builtin_subs *s = calloc(1, sizeof *s);

    if (s == NULL)
        return NULL;
    s->session_id = dupstr(session_id);
    s->uris = calloc(MAX_SUBS, sizeof *s->uris);
    if (s->session_id == NULL || s->uris == NULL) {
        free_node(s);
        return NULL;
    }
    return s;
}

/* 0 added or already there, -1 out of memory, -2 too many. Takes b->mu. */
static int subs_add(struct builtin *b, const char *session_id, const char *uri)
{
    struct builtin_subs **p, *s;
    int rc = 0;
    size_t i;

    pthread_mutex_lock(&b->mu);
    p = find_node(b, session_id);
    if (*p == NULL)
        *p = new_node(session_id);
    s = *p;
    if (s == NULL) {
        rc = -1;
        goto out;
    }
    for (i = 0; i < s->n; i++)
        if (strcmp(s->uris[i], uri) == 0)
            goto out;
    if (s->n == MAX_SUBS) {
        rc = -2;
        goto out;
    }
    s->uris[s->n] = dupstr(uri);
    if (s->uris[s->n] == NULL)
        rc = -1;
    else
        s->n++;
out:
    pthread_mutex_unlock(&b->mu);
    return rc;
}

static void subs_remove(struct builtin *b, const char *session_id, const char *uri)
{
    struct builtin_subs **p, *s;
    size_t i;

    pthread_mutex_lock(&b->mu);
    p = find_node(b, session_id);
    s = *p;
    for (i = 0; s != NULL && i < s->n; i++) {
        if (strcmp(s->uris[i], uri) == 0) {
            free(s->uris[i]);
            s->uris[i] = s->uris[--s->n];
            break;
        }
    }
    if (s != NULL && s->n == 0) {
        *p = s->next;
        free_node(s);
    }
    pthread_mutex_unlock(&b->mu);
}

void builtin_subs_drop_session(struct builtin *b, const char *session_id)
{
    struct builtin_subs **p, *s;

    if (b == NULL || session_id == NULL)
        return;
    pthread_mutex_lock(&b->mu);
    p = find_node(b, session_id);
    s = *p;
    if (s != NULL) {
        *p = s->next;
        free_node(s);
    }
    pthread_mutex_unlock(&b->mu);
}

void builtin_subs_free_all(struct builtin *b)
{
    while (b->subs != NULL) {
        struct builtin_subs *s = b->subs;
        b->subs = s->next;
        free_node(s);
    }
}

void builtin_resources_subscribe(struct builtin *b, struct call *c)
{
    const char *uri = param_uri(c);
    const char *sid = call_session_id(c);
    int rc = 0;

    if (uri == NULL)
        return;
    if (find_resource(uri) == NULL && template_id_len(uri) == 0) {
        not_found(c, uri);
        return;
    }
    if (sid != NULL)
        rc = subs_add(b, sid, uri);
    if (rc == -2)
        builtin_failf(c, -32602, NULL, "Too many subscriptions (at most %d per session)", MAX_SUBS);
    else if (rc != 0)
        call_fail(c, -32603, "Internal error", NULL);
    else
        builtin_reply(c, json_object());
}

void builtin_resources_unsubscribe(struct builtin *b, struct call *c)
{
    const char *uri = param_uri(c);
    const char *sid = call_session_id(c);

    if (uri == NULL)
        return;
    if (sid != NULL)
        subs_remove(b, sid, uri);
    builtin_reply(c, json_object());
}

/* The ids of the 2025 sessions subscribed to uri (copies; NULL-terminated
 * array the caller frees with free_ids), under b->mu. NULL when out of
 * memory: the change then reaches no 2025 session. */
static char **subscribed_sessions(struct builtin *b, const char *uri)
{
    struct builtin_subs *s;
    size_t n = 0, i, k = 0;
    char **ids;

    pthread_mutex_lock(&b->mu);
    for (s = b->subs; s != NULL; s = s->next)
        n++;
    ids = calloc(n + 1, sizeof *ids);
    for (s = b->subs; ids != NULL && s != NULL; s = s->next)
        for (i = 0; i < s->n; i++)
            if (strcmp(s->uris[i], uri) == 0) {
                ids[k] = dupstr(s->session_id);
                if (ids[k] != NULL)
                    k++;
                break;
            }
    pthread_mutex_unlock(&b->mu);
    return ids;
}

static void free_ids(char **ids)
{
    size_t i;

    for (i = 0; ids != NULL && ids[i] != NULL; i++)
        free(ids[i]);
    free(ids);
}

void builtin_resources_trigger_update(struct builtin *b, struct call *c)
{
    json_t *note = json_pack("{s:s, s:s, s:{s:s}}", "jsonrpc", "2.0", "method",
                             "notifications/resources/updated", "params", "uri", WATCHED_URI);
    char **ids, text[128];
    unsigned long updates;
    size_t i;

    pthread_mutex_lock(&b->mu);
    updates = ++b->watched_updates;
    pthread_mutex_unlock(&b->mu);
    ids = subscribed_sessions(b, WATCHED_URI);
    for (i = 0; note != NULL && ids != NULL && ids[i] != NULL; i++) {
        struct call *ch = call_channel(ids[i]);
        if (ch != NULL) {
            call_send(ch, json_incref(note));
            call_release(ch);
        }
    }
    free_ids(ids);
    json_decref(note);
    core_resource_updated(WATCHED_URI);
    snprintf(text, sizeof text, WATCHED_URI " changed (update %lu); its subscribers were told",
             updates);
    builtin_reply(c, builtin_text_result(text, 0));
}
