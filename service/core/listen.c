/* listen — see listen.h. */
#include "listen.h"
#include "core_int.h"
#include "fcond.h"
#include "jsonrpc.h"
#include "log.h"
#include "protocol.h"
#include "session.h"
#include "stream.h"
#include "task.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define SUBSCRIPTION_ID_KEY "io.modelcontextprotocol/subscriptionId"
#define RESOURCES_FILTER "resourceSubscriptions"
#define TASKS_FILTER "taskIds"

/* The filter keys mcpd can honour, and the notification each stands for. */
static const struct {
    const char *filter, *what, *method;
} kinds[] = {
    {"toolsListChanged", "tools", "notifications/tools/list_changed"},
    {"promptsListChanged", "prompts", "notifications/prompts/list_changed"},
    {"resourcesListChanged", "resources", "notifications/resources/list_changed"},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

/* What is fixed at open (session, stream, id, wants, uris, task_ids) is
 * read without a lock. */
struct listener {
    atomic_int refs; /* the list's, and each sender's */
    /* One sender at a time, the acknowledgement first: an append may park
     * the fiber (it waits for its commit), so this is a fiber mutex, and no
     * pthread lock is held while it is taken or held. Guards tasks and
     * closed. */
    struct fmutex send_mu;
    int closed; /* the ack failed, or the final result went: nothing more */
    struct session *session;
    struct stream *stream;
    json_t *id; /* the listen request's id: the subscription id, verbatim */
    int wants[NKINDS];
    json_t *uris;     /* the resource URIs it follows (array of strings), or NULL */
    json_t *task_ids; /* the tasks it follows ({task id: true}), or NULL */
    /* What was last sent of each task it follows ({task id: "" before the
     * first}). */
    json_t *tasks;
    struct listener *next; /* under reg.mu */
};

static struct {
    /* Guards list only: held for no append (an append would park under it,
     * and an append's change comes back here, listen_task_changed). */
    pthread_mutex_t mu;
    struct listener *list;
    /* The task ids any listener follows ({id: listeners}), apart from mu:
     * every append to every request stream asks (listen_task_changed),
     * and the notification's own append must not wait for mu. Lock order:
     * mu, then fmu. */
    pthread_mutex_t fmu;
    json_t *followed;
    atomic_int nfollowed;
} reg = {.mu = PTHREAD_MUTEX_INITIALIZER, .fmu = PTHREAD_MUTEX_INITIALIZER};

static void follow(json_t *tasks, int delta)
{
    const char *id;
    json_t *v;
    pthread_mutex_lock(&reg.fmu);
    if (!reg.followed)
        reg.followed = json_object();
    json_object_foreach(tasks, id, v)
    {
        json_int_t n = json_integer_value(json_object_get(reg.followed, id)) + delta;
        if (n > 0)
            json_object_set_new(reg.followed, id, json_integer(n));
        else
            json_object_del(reg.followed, id);
    }
    atomic_store(&reg.nfollowed, (int)json_object_size(reg.followed));
    pthread_mutex_unlock(&reg.fmu);
}

static void listener_unref(struct listener *l)
{
    if (!l || atomic_fetch_sub(&l->refs, 1) != 1)
        return;
    if (l->task_ids)
        follow(l->task_ids, -1);
    json_decref(l->task_ids);
    json_decref(l->tasks);
    stream_unref(l->stream);
    session_unref(l->session);
    json_decref(l->id);
    json_decref(l->uris);
    fmutex_destroy(&l->send_mu);
    free(l);
}

/* The live listeners for which wanted(l, arg) holds, each with a reference
 * (listener_unref each, free the array), *n of them; NULL when none. The
 * list loses those whose client has gone (a client that closed its stream
 * ended the session with it). */
static struct listener **take(int (*wanted)(const struct listener *l, const void *arg),
                              const void *arg, size_t *n)
{
    struct listener *gone = NULL, **out = NULL;
    size_t cap = 0;
    *n = 0;
    pthread_mutex_lock(&reg.mu);
    for (struct listener **lp = &reg.list; *lp;) {
        struct listener *l = *lp;
        if (session_ended(l->session)) {
            *lp = l->next;
            l->next = gone;
            gone = l;
            continue;
        }
        lp = &l->next;
        if (!wanted(l, arg))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            struct listener **grown = realloc(out, cap * sizeof *out);
            if (!grown)
                break; /* the ones taken so far are told */
            out = grown;
        }
        atomic_fetch_add(&l->refs, 1);
        out[(*n)++] = l;
    }
    pthread_mutex_unlock(&reg.mu);
    /* outside the lock: the last reference frees a session */
    while (gone) {
        struct listener *next = gone->next;
        listener_unref(gone);
        gone = next;
    }
    return out;
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

/* The client's taskIds that name tasks of its principal's ({id: ""}, new
 * reference), or NULL when it asked for none or did not declare the tasks
 * extension on this request. */
static json_t *kept_tasks(struct session *s, json_t *filter, json_t *params)
{
    json_t *asked = json_object_get(filter, TASKS_FILTER);
    json_t *caps = json_object_get(json_object_get(params, "_meta"), PROTOCOL_META_CAPABILITIES);
    if (!json_is_array(asked) ||
        !json_object_get(json_object_get(caps, "extensions"), TASK_EXTENSION))
        return NULL;
    json_t *tasks = json_object();
    size_t i;
    json_t *t;
    json_array_foreach(asked, i, t)
    {
        if (!tasks || json_object_size(tasks) == LISTEN_MAX_TASKS)
            break;
        const char *tid = json_string_value(t);
        json_t *snap = tid ? task_snapshot(session_principal(s), tid, 0) : NULL;
        if (snap)
            json_object_set_new(tasks, tid, json_string(""));
        json_decref(snap);
    }
    return tasks;
}

static int terminal(const char *status)
{
    return strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0 ||
           strcmp(status, "cancelled") == 0;
}

/* Tells l of task tid as tasks/get would show it now, unless that is what
 * it was last told: a status, and for input_required the requests asked.
 * Nothing after a terminal status, which never changes. Under l->send_mu. */
static void tell_task(struct listener *l, const char *tid)
{
    const char *last = json_string_value(json_object_get(l->tasks, tid));
    if (!last || terminal(last))
        return;
    json_t *snap = task_snapshot(session_principal(l->session), tid, core_session_idle_ms());
    const char *status = json_string_value(json_object_get(snap, "status"));
    char *asked = status ? json_dumps(json_object_get(snap, "inputRequests"),
                                      JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY)
                         : NULL;
    json_t *seen = status ? json_pack("s+", status, asked ? asked : "") : NULL;
    free(asked);
    if (!seen || strcmp(json_string_value(seen), last) == 0) {
        json_decref(seen);
        json_decref(snap);
        return;
    }
    /* The key names the status alone once terminal (terminal() reads it). */
    json_object_set_new(l->tasks, tid, terminal(status) ? json_string(status) : seen);
    if (terminal(status))
        json_decref(seen);
    json_t *msg = json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", "notifications/tasks",
                            "params", snap);
    if (msg && send_tagged(l, msg, STREAM_ACTIVE) != 0)
        log_event(LOG_WARN, session_id(l->session), "listen_failed",
                  "a task notification did not reach subscription %s", stream_id(l->stream));
}

int listen_open(struct session *s, struct stream *st, json_t *id, json_t *params)
{
    struct listener *l = calloc(1, sizeof *l);
    if (!l || fmutex_init(&l->send_mu) != 0) {
        free(l);
        return -1;
    }
    atomic_init(&l->refs, 2); /* the list's and this call's */
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
    l->tasks = kept_tasks(s, filter, params);
    if (l->tasks) {
        json_t *ids = json_array();
        l->task_ids = json_object();
        const char *tid;
        json_t *v;
        json_object_foreach(l->tasks, tid, v)
        {
            json_array_append_new(ids, json_string(tid));
            json_object_set_new(l->task_ids, tid, json_true());
        }
        json_object_set_new(agreed, TASKS_FILTER, ids);
        follow(l->task_ids, 1);
    }
    session_ref(s);
    l->session = s;
    l->id = json_incref(id);
    l->stream = st;
    stream_ref(st);
    json_t *ack =
        json_pack("{s:s, s:s, s:{s:o}}", "jsonrpc", "2.0", "method",
                  "notifications/subscriptions/acknowledged", "params", "notifications", agreed);
    /* Listed before the ack is sent, so that no change after the ack is
     * missed; a sender that finds it waits for send_mu, held until the ack
     * and the tasks' first notifications are out. */
    fmutex_lock(&l->send_mu);
    pthread_mutex_lock(&reg.mu);
    l->next = reg.list;
    reg.list = l;
    pthread_mutex_unlock(&reg.mu);
    int rc = send_tagged(l, ack, STREAM_ACTIVE);
    if (rc == 0) {
        /* Where each task stands now: a change before the subscription is
         * not missed, and a client need not poll once. */
        const char *tid;
        json_t *v;
        json_object_foreach(l->task_ids, tid, v)
        {
            tell_task(l, tid);
        }
    } else {
        l->closed = 1;
        pthread_mutex_lock(&reg.mu);
        for (struct listener **lp = &reg.list; *lp; lp = &(*lp)->next)
            if (*lp == l) {
                *lp = l->next;
                atomic_fetch_sub(&l->refs, 1); /* the list's; this call's remains */
                break;
            }
        pthread_mutex_unlock(&reg.mu);
    }
    fmutex_unlock(&l->send_mu);
    listener_unref(l);
    return rc;
}

/* Sends a copy of msg (borrowed) to every live subscription for which
 * wanted(l, arg) holds. */
static void send_to_all(json_t *msg, int (*wanted)(const struct listener *l, const void *arg),
                        const void *arg)
{
    size_t n;
    struct listener **ls = take(wanted, arg, &n);
    for (size_t i = 0; i < n; i++) {
        struct listener *l = ls[i];
        fmutex_lock(&l->send_mu);
        if (!l->closed && send_tagged(l, json_deep_copy(msg), STREAM_ACTIVE) != 0)
            log_event(LOG_WARN, session_id(l->session), "listen_failed",
                      "a %s notification did not reach subscription %s",
                      json_string_value(json_object_get(msg, "method")), stream_id(l->stream));
        fmutex_unlock(&l->send_mu);
        listener_unref(l);
    }
    free(ls);
}

static int wants_kind(const struct listener *l, const void *arg)
{
    return l->wants[*(const size_t *)arg];
}

static int follows_uri(const struct listener *l, const void *arg)
{
    return l->uris && has_uri(l->uris, arg);
}

static int follows_task(const struct listener *l, const void *arg)
{
    return l->task_ids && json_object_get(l->task_ids, arg) != NULL;
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

void listen_task_changed(const char *task_id)
{
    if (atomic_load(&reg.nfollowed) == 0)
        return;
    pthread_mutex_lock(&reg.fmu);
    int followed = reg.followed && json_object_get(reg.followed, task_id) != NULL;
    pthread_mutex_unlock(&reg.fmu);
    if (!followed)
        return;
    size_t n;
    struct listener **ls = take(follows_task, task_id, &n);
    for (size_t i = 0; i < n; i++) {
        fmutex_lock(&ls[i]->send_mu);
        if (!ls[i]->closed)
            tell_task(ls[i], task_id);
        fmutex_unlock(&ls[i]->send_mu);
        listener_unref(ls[i]);
    }
    free(ls);
}

void listen_close_all(void)
{
    pthread_mutex_lock(&reg.mu);
    struct listener *l = reg.list;
    reg.list = NULL;
    pthread_mutex_unlock(&reg.mu);
    while (l) {
        struct listener *next = l->next;
        fmutex_lock(&l->send_mu);
        if (!l->closed && !session_ended(l->session)) {
            json_t *done = jsonrpc_result(l->id, json_object());
            json_object_set_new(json_object_get(done, "result"), "resultType",
                                json_string("complete"));
            send_tagged(l, done, STREAM_FINISHED);
        }
        l->closed = 1; /* a sender still holding it sends nothing after */
        fmutex_unlock(&l->send_mu);
        listener_unref(l);
        l = next;
    }
}
