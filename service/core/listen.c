/* listen — see listen.h. */
#include "listen.h"
#include "jsonrpc.h"
#include "log.h"
#include "protocol.h"
#include "session.h"
#include "stream.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SUBSCRIPTION_ID_KEY "io.modelcontextprotocol/subscriptionId"

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
    json_t *id; /* the listen request's id, for the final result */
    int wants[NKINDS];
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
    free(l);
}

/* Appends msg (stolen) to l's stream, tagged with the subscription id. */
static int send_tagged(struct listener *l, json_t *msg, enum stream_state end)
{
    json_t *holder = json_object_get(msg, "params");
    if (!holder)
        holder = json_object_get(msg, "result");
    json_t *meta = json_object();
    json_object_set_new(meta, SUBSCRIPTION_ID_KEY, json_string(stream_id(l->stream)));
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

void listen_list_changed(const char *what)
{
    size_t k = 0;
    while (k < NKINDS && strcmp(kinds[k].what, what) != 0)
        k++;
    if (k == NKINDS)
        return;
    pthread_mutex_lock(&reg.mu);
    for (struct listener **lp = &reg.list; *lp;) {
        struct listener *l = *lp;
        /* A client that closed its stream ended the session with it. */
        if (session_ended(l->session)) {
            *lp = l->next;
            listener_free(l);
            continue;
        }
        if (l->wants[k] && send_tagged(l,
                                       json_pack("{s:s, s:s, s:{}}", "jsonrpc", "2.0", "method",
                                                 kinds[k].method, "params"),
                                       STREAM_ACTIVE) != 0)
            log_event(LOG_WARN, session_id(l->session), "listen_failed",
                      "a %s notification did not reach subscription %s", kinds[k].method,
                      stream_id(l->stream));
        lp = &l->next;
    }
    pthread_mutex_unlock(&reg.mu);
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
