/* listen — see listen.h. */
#include "listen.h"
#include "core_int.h"
#include "jsonrpc.h"
#include "log.h"
#include "protocol.h"
#include "session.h"
#include "stream.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SUBSCRIPTION_ID_KEY "io.modelcontextprotocol/subscriptionId"
#define RESOURCES_FILTER "resourceSubscriptions"

/* The filter keys mcpd can honour, and the notification each stands for. */
static const struct {
    const char *filter, *what, *method;
} kinds[] = {
    {"toolsListChanged", "tools", "notifications/tools/list_changed"},
    {"promptsListChanged", "prompts", "notifications/prompts/list_changed"},
    {"resourcesListChanged", "resources", "notifications/resources/list_changed"},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

struct listener {
    struct session *session;
    struct stream *stream;
    json_t *id; /* the listen request's id: the subscription id, verbatim */
    int wants[NKINDS];
    json_t *uris; /* the resource URIs it follows (array of strings), or NULL */
    struct listener *next;
};

static struct {
    pthread_mutex_t mu; /* guards list; appends happen under it, in order */
    struct listener *list;
} reg = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void listener_free(struct listener *l)
{
    stream_unref(l->stream);
    session_unref(l->session);
    json_decref(l->id);
    json_decref(l->uris);
    free(l);
}

/* Appends msg (stolen) to l's stream, tagged with the subscription id. */
static int send_tagged(struct listener *l, json_t *msg, enum stream_state end)
{
    json_t *holder = json_object_get(msg, "params");
    if (!holder)
        holder = json_object_get(msg, "result");
    json_t *meta = json_object();
    json_object_set(meta, SUBSCRIPTION_ID_KEY, l->id);
    json_object_set_new(holder, "_meta", meta);
    size_t len;
    char *text = jsonrpc_dump(msg, &len);
    json_decref(msg);
    int64_t seq = text && session_charge(l->session, len) == 0
                      ? stream_append(l->stream, text, len, end)
                      : -1;
    free(text);
    return seq < 0 ? -1 : 0;
}

/* Whether a change to a resource reaches the core: the backend says it
 * reports changes and that resources may be subscribed to. */
static int resources_honoured(void)
{
    if (!core_tells_list_changes())
        return 0;
    json_t *fields = core_server_fields();
    int yes = json_is_true(json_object_get(
        json_object_get(json_object_get(fields, "capabilities"), "resources"), "subscribe"));
    json_decref(fields);
    return yes;
}

static int has_uri(json_t *uris, const char *uri)
{
    size_t i;
    json_t *u;
    json_array_foreach(uris, i, u)
    {
        if (strcmp(json_string_value(u), uri) == 0)
            return 1;
    }
    return 0;
}

/* The URIs of the client's resourceSubscriptions that mcpd keeps (new
 * reference), or NULL when it asked for none or they cannot be honoured. */
static json_t *kept_uris(json_t *filter)
{
    json_t *asked = json_object_get(filter, RESOURCES_FILTER);
    if (!json_is_array(asked) || !resources_honoured())
        return NULL;
    json_t *uris = json_array();
    size_t i;
    json_t *u;
    json_array_foreach(asked, i, u)
    {
        if (!uris || json_array_size(uris) == LISTEN_MAX_URIS)
            break;
        if (json_is_string(u) && json_string_length(u) > 0 && !has_uri(uris, json_string_value(u)))
            json_array_append(uris, u);
    }
    return uris;
}

int listen_open(struct session *s, struct stream *st, json_t *id, json_t *params)
{
    struct listener *l = calloc(1, sizeof *l);
    if (!l)
        return -1;
    json_t *filter = json_object_get(params, "notifications");
    json_t *agreed = json_object();
    for (size_t i = 0; i < NKINDS; i++)
        if (json_is_true(json_object_get(filter, kinds[i].filter))) {
            l->wants[i] = 1;
            json_object_set_new(agreed, kinds[i].filter, json_true());
        }
    l->uris = kept_uris(filter);
    if (l->uris)
        json_object_set(agreed, RESOURCES_FILTER, l->uris);
    session_ref(s);
    l->session = s;
    l->id = json_incref(id);
    l->stream = st;
    stream_ref(st);
    json_t *ack =
        json_pack("{s:s, s:s, s:{s:o}}", "jsonrpc", "2.0", "method",
                  "notifications/subscriptions/acknowledged", "params", "notifications", agreed);
    pthread_mutex_lock(&reg.mu);
    int rc = send_tagged(l, ack, STREAM_ACTIVE);
    if (rc == 0) {
        l->next = reg.list;
        reg.list = l;
    }
    pthread_mutex_unlock(&reg.mu);
    if (rc != 0)
        listener_free(l);
    return rc;
}

/* Sends a copy of msg (borrowed) to every live subscription for which
 * wanted(l, arg) holds, and forgets those whose client has gone. */
static void send_to_all(json_t *msg, int (*wanted)(const struct listener *l, const void *arg),
                        const void *arg)
{
    pthread_mutex_lock(&reg.mu);
    for (struct listener **lp = &reg.list; *lp;) {
        struct listener *l = *lp;
        /* A client that closed its stream ended the session with it. */
        if (session_ended(l->session)) {
            *lp = l->next;
            listener_free(l);
            continue;
        }
        if (wanted(l, arg) && send_tagged(l, json_deep_copy(msg), STREAM_ACTIVE) != 0)
            log_event(LOG_WARN, session_id(l->session), "listen_failed",
                      "a %s notification did not reach subscription %s",
                      json_string_value(json_object_get(msg, "method")), stream_id(l->stream));
        lp = &l->next;
    }
    pthread_mutex_unlock(&reg.mu);
}

static int wants_kind(const struct listener *l, const void *arg)
{
    return l->wants[*(const size_t *)arg];
}

static int follows_uri(const struct listener *l, const void *arg)
{
    return l->uris && has_uri(l->uris, arg);
}

void listen_list_changed(const char *what)
{
    size_t k = 0;
    while (k < NKINDS && strcmp(kinds[k].what, what) != 0)
        k++;
    if (k == NKINDS)
        return;
    json_t *msg =
        json_pack("{s:s, s:s, s:{}}", "jsonrpc", "2.0", "method", kinds[k].method, "params");
    if (msg)
        send_to_all(msg, wants_kind, &k);
    json_decref(msg);
}

void listen_resource_updated(const char *uri)
{
    json_t *msg = json_pack("{s:s, s:s, s:{s:s}}", "jsonrpc", "2.0", "method",
                            "notifications/resources/updated", "params", "uri", uri);
    if (msg)
        send_to_all(msg, follows_uri, uri);
    json_decref(msg);
}

void listen_close_all(void)
{
    pthread_mutex_lock(&reg.mu);
    struct listener *l = reg.list;
    reg.list = NULL;
    pthread_mutex_unlock(&reg.mu);
    while (l) {
        struct listener *next = l->next;
        if (!session_ended(l->session)) {
            json_t *done = jsonrpc_result(l->id, json_object());
            json_object_set_new(json_object_get(done, "result"), "resultType",
                                json_string("complete"));
            send_tagged(l, done, STREAM_FINISHED);
        }
        listener_free(l);
        l = next;
    }
}
