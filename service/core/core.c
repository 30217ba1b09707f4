/* core — see core.h. */
#include "core.h"
#include "core_int.h"
#include "call.h"
#include "call_life.h"
#include "clock.h"
#include "listen.h"
#include "log.h"
#include "metrics.h"
#include "kill_watch.h"
#include "longpoll.h"
#include "protocol.h"
#include "reaper.h"
#include "replica.h"
#include "relay.h"
#include "request_state.h"
#include "session.h"
#include "store.h"
#include "stream.h"
#include "task.h"
#include "workers.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* How long tasks/result waits for a task to end. */
#define TASK_RESULT_WAIT_MS (5 * 60 * 1000)
/* The reaper runs at least this often: it also checkpoints the WAL. */
#define REAP_INTERVAL_MAX_MS 1000

static struct {
    struct core_config cfg;
    struct store *store;
    const struct backend_ops *ops;
    void *backend;
    _Atomic int accepting;
} core;

void core_reply_clear(struct core_reply *r)
{
    stream_unref(r->stream);
    session_unref(r->session);
    json_decref(r->error);
    json_decref(r->ack);
    memset(r, 0, sizeof *r);
}

void core_reject(struct core_reply *out, enum core_reason why, json_t *id, int code,
                 const char *message)
{
    metrics_add(METRIC_REJECTED, 1);
    out->kind = CORE_REJECTED;
    out->reason = why;
    out->error = jsonrpc_error(id, code, message, NULL);
}

/* Appends the single final message of a request answered on the spot. */
static void answer_now(struct session *s, json_t *id, json_t *msg, struct core_reply *out)
{
    size_t len;
    char *text = jsonrpc_dump(msg, &len);
    int failed = json_object_get(msg, "error") != NULL;
    json_decref(msg);
    struct stream *st = text ? stream_create(session_id(s), STREAM_REQUEST, id) : NULL;
    if (st)
        session_charge_always(s, len); /* never refused: a quick reply is small and final */
    if (!st || stream_append(st, text, len, failed ? STREAM_ERROR : STREAM_FINISHED) < 0) {
        free(text);
        stream_unref(st);
        core_reject(out, CORE_UNAVAILABLE, id, JSONRPC_INTERNAL_ERROR, "Could not store the reply");
        return;
    }
    free(text);
    out->kind = CORE_STREAM;
    out->stream = st;
}

/* ---- restart repair ---- */

struct unfinished {
    char *stream_id, *request_id;
    struct unfinished *next;
};

static void collect_unfinished(void *arg, const char *stream_id, const char *session_id,
                               const char *request_id, int64_t next_seq)
{
    (void)session_id;
    (void)next_seq;
    struct unfinished **head = arg, *u = calloc(1, sizeof *u);
    if (!u)
        return;
    u->stream_id = strdup(stream_id);
    u->request_id = request_id ? strdup(request_id) : NULL;
    u->next = *head;
    *head = u;
}

/* Ends each collected stream with an error saying why, so its reader
 * sees an end instead of waiting for a process that is gone. */
static void end_interrupted(struct unfinished *list, const char *why, const char *event)
{
    for (struct unfinished *u = list, *next; u; u = next) {
        next = u->next;
        struct stream *st = u->stream_id ? stream_find(u->stream_id) : NULL;
        json_t *id = u->request_id ? json_loads(u->request_id, JSON_DECODE_ANY, NULL) : NULL;
        if (st && stream_state(st) == STREAM_ACTIVE) {
            json_t *err = jsonrpc_error(id, JSONRPC_INTERNAL_ERROR, why, NULL);
            size_t len;
            char *text = jsonrpc_dump(err, &len);
            if (text)
                stream_append(st, text, len, STREAM_ERROR);
            free(text);
            json_decref(err);
            log_event(LOG_INFO, stream_session(st), event, "stream=%s ended with an error",
                      u->stream_id);
        }
        stream_unref(st);
        json_decref(id);
        free(u->stream_id);
        free(u->request_id);
        free(u);
    }
}

static void repair_interrupted(void)
{
    struct unfinished *list = NULL;
    store_streams_unfinished(core.store, collect_unfinished, &list);
    end_interrupted(list, "Request interrupted by server restart; retry it", "request_interrupted");
}

/* ---- several processes on one store (replica.h) ---- */

static void replica_orphans(int64_t alive_since_ms)
{
    struct unfinished *list = NULL;
    store_streams_orphaned(core.store, alive_since_ms, collect_unfinished, &list);
    end_interrupted(
        list, "Request interrupted by server restart: the process running it stopped; retry it",
        "request_orphaned");
}

void core_probe_elsewhere(struct session *s)
{
    if (replica_shared())
        store_signal(core.store, STORE_SIGNAL_PROBE, session_id(s), NULL);
}

/* Another process wants the GET stream of a session whose reader is here. */
static void replica_probe(const char *id)
{
    struct session *s = session_find_loaded(id);
    struct stream *st = s ? session_standalone(s) : NULL;
    if (st)
        stream_probe_readers(st);
    stream_unref(st);
    session_unref(s);
}

/* Another process changed or ended a session this one holds. */
static void replica_session_changed(const char *id)
{
    struct session *s = session_find_loaded(id);
    if (!s)
        return;
    struct store_session row;
    int rc = store_session_get(core.store, id, &row);
    if (rc == 1) {
        log_event(LOG_INFO, id, "session_ended_elsewhere", "by another mcpd process");
        core_end_session(s);
    } else if (rc == 0) {
        session_apply_stored(s, protocol_log_level(row.log_level), row.initialized,
                             row.last_active_ms);
        store_session_free(&row);
    }
    session_unref(s);
}

static void on_response(struct session *s, json_t *msg, const struct jsonrpc_msg *m,
                        struct core_reply *out);
static void on_notification(struct session *s, json_t *msg, const struct jsonrpc_msg *m);

static int start_call(struct session *s, struct stream *st, json_t *msg,
                      const struct jsonrpc_msg *m, const char *key, struct core_reply *out);
static int bound_elsewhere(struct session *s, char **owner);
static int hand_over(struct session *s, json_t *msg, struct stream *st, const char *owner);

/* A request another process handed over (its session is bound to this
 * one): run on the stream that process made for it, where its client
 * reads. A refusal ends the stream with it. */
static void run_handed_over(struct session *s, json_t *fw)
{
    json_t *msg = json_object_get(fw, "message");
    const char *sid = json_string_value(json_object_get(fw, "stream"));
    struct jsonrpc_msg m;
    struct jsonrpc_error jerr;
    if (!msg || jsonrpc_classify(msg, &m, &jerr) != 0)
        return;
    if (!sid) {
        if (m.kind == JSONRPC_NOTIFICATION && core.ops->notify)
            core.ops->notify(core.backend, session_id(s), msg);
        return;
    }
    struct stream *st = stream_find(sid);
    if (!st)
        return;
    char key[96];
    struct core_reply out = {0};
    if (m.kind == JSONRPC_REQUEST && strncmp(m.method, "tasks/", 6) == 0) {
        /* A task's request, for the process that runs its call. */
        const char *principal = json_string_value(json_object_get(fw, "principal"));
        if (strcmp(m.method, "tasks/get") == 0)
            task_get(principal, m.id, m.params, core.cfg.session_idle_ms, &out);
        else if (strcmp(m.method, "tasks/update") == 0)
            task_update(principal, m.id, m.params, &out);
        else
            task_cancel(principal, m.id, m.params, &out);
    }
    if (out.kind == CORE_ANSWERED || out.kind == CORE_REJECTED) {
        size_t len = 0;
        char *text = out.error ? jsonrpc_dump(out.error, &len) : NULL;
        if (text)
            stream_append(st, text, len, STREAM_FINISHED);
        else
            stream_end(st, STREAM_ERROR);
        free(text);
    } else if (m.kind != JSONRPC_REQUEST || jsonrpc_id_key(m.id, key, sizeof key) != 0 ||
               start_call(s, st, msg, &m, key, &out) != 0) {
        json_t *err = out.error ? json_pack("{s:s,s:O,s:O}", "jsonrpc", "2.0", "id",
                                            m.id ? m.id : json_null(), "error", out.error)
                                : NULL;
        size_t len = 0;
        char *text = err ? jsonrpc_dump(err, &len) : NULL;
        if (text)
            stream_append(st, text, len, STREAM_ERROR);
        else
            stream_end(st, STREAM_ERROR);
        free(text);
        json_decref(err);
    }
    core_reply_clear(&out);
    stream_unref(st);
}

/* A client message another process put in the inbox: taken (by one
 * process only) when it is for this one. */
static void replica_inbox(const char *session_id, int64_t inbox_id, const char *target)
{
    char key[96];
    int handed = target[0] == REPLICA_HAND_OVER;
    /* A session bound here may not be in memory (after a restart). */
    struct session *s =
        handed ? (strcmp(target + 1, replica_tag()) == 0 ? session_find(session_id) : NULL)
               : session_find_loaded(session_id);
    if (!s)
        return;
    int mine = handed || (target[0] == REPLICA_TO_PROCESS
                              ? strcmp(target + 1, replica_tag()) == 0
                              : target[0] == REPLICA_TO_CALL &&
                                    replica_unhex(target + 1, key, sizeof key) == 0 &&
                                    session_with_tracked(s, key, NULL, NULL) == 0);
    char *text = NULL;
    size_t len = 0;
    if (mine && store_inbox_take(core.store, inbox_id, &text, &len) == 0) {
        json_t *msg = json_loadb(text, len, 0, NULL);
        struct jsonrpc_msg m;
        struct jsonrpc_error jerr;
        if (handed && msg) {
            run_handed_over(s, msg);
        } else if (msg && jsonrpc_classify(msg, &m, &jerr) == 0) {
            struct core_reply out = {0};
            if (m.kind == JSONRPC_RESPONSE)
                on_response(s, msg, &m, &out);
            else if (m.kind == JSONRPC_NOTIFICATION)
                on_notification(s, msg, &m);
            core_reply_clear(&out);
        }
        json_decref(msg);
        free(text);
    }
    session_unref(s);
}

/* Puts payload in the inbox for the process that `target` names
 * (replica.h: REPLICA_TO_PROCESS, REPLICA_TO_CALL or REPLICA_HAND_OVER,
 * then its argument) and signals it. 0, or -1. */
static int inbox_send(const char *sid, json_t *payload, const char *target)
{
    char *text = json_dumps(payload, JSON_COMPACT);
    int64_t id = 0;
    int rc = text ? store_inbox_put(core.store, sid, text, strlen(text), clock_wall_ms(), &id) : -1;
    free(text);
    char extra[256];
    if (rc != 0 ||
        snprintf(extra, sizeof extra, "%lld.%s", (long long)id, target) >= (int)sizeof extra)
        return -1;
    return store_signal(core.store, STORE_SIGNAL_INBOX, sid, extra) == 0 ? 0 : -1;
}

/* A client message for a call that runs in another process: to the
 * process whose tag ends the request id it answers (REPLICA_TO_PROCESS),
 * or whichever runs the call with this id key (REPLICA_TO_CALL). */
static int route_elsewhere(struct session *s, json_t *msg, char kind, const char *what)
{
    char target[220] = {kind};
    if (kind == REPLICA_TO_CALL
            ? replica_hex(what, target + 1, sizeof target - 1) != 0
            : snprintf(target + 1, sizeof target - 1, "%s", what) >= (int)sizeof target - 1)
        return -1;
    return inbox_send(session_id(s), msg, target);
}

/* ---- reaper ---- */

static void expire_session(struct session *s, void *arg)
{
    (void)arg;
    /* Idle here is not idle everywhere: another process may serve it. */
    struct store_session row;
    if (replica_shared() && store_session_get(core.store, session_id(s), &row) == 0) {
        int64_t last = row.last_active_ms;
        store_session_free(&row);
        if (last >= clock_wall_ms() - core.cfg.session_idle_ms) {
            session_apply_stored(s, -1, 0, last);
            session_unref(s);
            return;
        }
    }
    log_event(LOG_INFO, session_id(s), "session_expired", "idle past %lld ms",
              (long long)core.cfg.session_idle_ms);
    core_end_session(s);
    session_unref(s);
}

static void freed(void *arg, const char *session_id, int64_t bytes)
{
    (void)arg;
    session_uncharge(session_id, bytes);
}

static void reap(void *arg)
{
    (void)arg;
    int64_t now = clock_wall_ms();
    int64_t session_cutoff = now - core.cfg.session_idle_ms;
    int64_t stream_cutoff = now - core.cfg.stream_retention_ms;
    session_each_idle(session_cutoff, expire_session, NULL);
    session_expire_dormant(session_cutoff);
    struct store_purge_cutoffs cut = {session_cutoff, now - STORE_ENDED_KEEP_MS, stream_cutoff,
                                      now - core.cfg.log_retention_ms, core.cfg.log_max_rows};
    /* Purging is the store's, once for all processes: the leader's. */
    if (store_leader(core.store) == 1)
        store_purge(core.store, &cut, freed, NULL);
    store_checkpoint(core.store);
}

/* A session an operator killed, or whose token was revoked (kill_watch). */
static void end_from_outside(const char *session_id, const char *why)
{
    struct session *s = session_find_loaded(session_id);
    if (!s)
        return;
    log_event(LOG_INFO, session_id, "session_killed", "%s", why);
    core_end_session(s);
    session_unref(s);
}

int core_start(const struct core_config *cfg, struct store *st, const struct backend_ops *ops,
               void *backend, char **err)
{
    core.cfg = *cfg;
    core.store = st;
    core.ops = ops;
    core.backend = backend;
    struct session_limits limits = {cfg->session_idle_ms, cfg->session_max_bytes,
                                    cfg->max_sessions,    cfg->max_init_params,
                                    cfg->max_inflight,    cfg->max_sessions_per_principal};
    stream_registry_init(st);
    stream_on_change(listen_task_changed);
    session_registry_init(st, &limits);
    if (request_state_init(st, replica_run()) != 0) {
        *err = strdup("cannot load or create the requestState key in the store");
        return -1;
    }
    /* On a shared store the streams still active are other processes'
     * calls: only those whose process died are ended, by the leader. */
    if (store_backend_of(st) == STORE_POSTGRES) {
        session_registry_shared(replica_tag());
        struct replica_hooks hooks = {
            .session_changed = replica_session_changed,
            .inbox = replica_inbox,
            .orphans = replica_orphans,
            .beat = session_renew_get_claims,
            .list_changed = listen_list_changed,
            .resource_updated = listen_resource_updated,
            .probe = replica_probe,
        };
        if (replica_start(st, cfg->replica_lease_ms, &hooks) != 0) {
            *err = strdup("cannot start the replica thread");
            return -1;
        }
    } else {
        repair_interrupted();
    }
    if (workers_start(cfg->max_workers) != 0 || poll_lot_start() != 0 ||
        relay_start(core.store) != 0) {
        *err = strdup("cannot start the worker pool");
        return -1;
    }
    int64_t shortest = cfg->session_idle_ms < cfg->stream_retention_ms ? cfg->session_idle_ms
                                                                       : cfg->stream_retention_ms;
    int64_t interval = shortest / 4;
    if (interval > REAP_INTERVAL_MAX_MS)
        interval = REAP_INTERVAL_MAX_MS;
    if (interval < 100)
        interval = 100;
    if (reaper_start(interval, reap, NULL) != 0 || kill_watch_start(st, end_from_outside) != 0) {
        *err = strdup("cannot start the reaper");
        return -1;
    }
    core.accepting = 1;
    return 0;
}

enum core_state core_state(void)
{
    if (!core.store)
        return CORE_STOPPING;
    if (!store_ready(core.store))
        return CORE_STORE_AWAY;
    return core.accepting ? CORE_SERVING : CORE_STOPPING;
}

char *core_metrics(void)
{
    struct store_stats ss;
    store_stats(core.store, &ss);
    const struct metrics_value values[] = {
        {"mcpd_sessions_loaded", "Sessions in memory", 0, session_count()},
        {"mcpd_streams_open", "Streams being written", 0, stream_count()},
        {"mcpd_store_commits_total", "Store transactions committed", 1, ss.commits},
        {"mcpd_store_writes_total", "Store writes committed", 1, ss.writes},
        {"mcpd_store_write_failures_total", "Store writes that failed", 1, ss.failures},
        {"mcpd_store_purged_total", "Expired sessions and streams the reaper removed", 1,
         ss.purged},
        {"mcpd_store_ready", "Whether the store accepts writes", 0,
         (uint64_t)(store_ready(core.store) != 0)},
    };
    double le[STORE_HOLD_BUCKETS];
    for (int i = 0; i < STORE_HOLD_BUCKETS; i++)
        le[i] = (double)store_hold_bounds_us[i] / 1e6;
    const struct metrics_histogram hold = {
        "mcpd_store_commit_lock_seconds",
        "How long each commit (or a checkpoint's second phase) held the store's commit lock, which "
        "every reply waits for",
        STORE_HOLD_BUCKETS,
        le,
        ss.hold,
        (double)ss.hold_sum_us / 1e6,
    };
    return metrics_render(values, sizeof values / sizeof values[0], &hold, 1);
}

static void cancel_for_shutdown(void *value, void *arg)
{
    (void)arg;
    call_cancel(value, CALL_CANCEL_SHUTDOWN);
}

static void cancel_session_calls(struct session *s, void *arg)
{
    (void)arg;
    session_each_tracked(s, cancel_for_shutdown, NULL);
    session_unref(s);
}

/* What the backend changes reaches the listeners of every process. */
void core_list_changed(const char *what)
{
    listen_list_changed(what);
    if (replica_shared())
        store_signal(core.store, STORE_SIGNAL_LIST, what, NULL);
}

void core_resource_updated(const char *uri)
{
    listen_resource_updated(uri);
    /* A signal is short (PostgreSQL's NOTIFY takes 8000 bytes). */
    char hex[2048];
    if (replica_shared() && replica_hex(uri, hex, sizeof hex) == 0)
        store_signal(core.store, STORE_SIGNAL_RESOURCE, hex, NULL);
}

void core_stop(int64_t grace_ms)
{
    listen_close_all();
    core.accepting = 0;
    reaper_stop();
    kill_watch_stop();
    session_each(cancel_session_calls, NULL);
    int left = workers_stop(grace_ms);
    if (left)
        log_event(LOG_WARN, NULL, "shutdown_handlers_running", "%d handlers still running", left);
    replica_stop();
    poll_lot_stop();
    stream_registry_detach_all();
}

void core_cleanup(void)
{
    relay_stop();
    session_registry_shutdown();
    stream_registry_shutdown();
}

static void cancel_for_session_end(void *value, void *arg)
{
    (void)arg;
    call_cancel(value, CALL_CANCEL_SESSION_END);
}

int64_t core_relay_to_standalone(struct session *s, const char *msg, size_t len,
                                 const char *source_id, int64_t copied)
{
    struct stream *st = session_standalone(s);
    int64_t seq = !st || session_charge(s, len) != 0 ? -1
                  : source_id ? stream_append_relayed(st, msg, len, source_id, copied)
                              : stream_append(st, msg, len, STREAM_ACTIVE);
    stream_unref(st);
    return seq;
}

static void answer_for_client(void *arg, const char *key, void *value)
{
    (void)arg;
    struct call *c = value;
    json_t *id = json_loads(key, JSON_DECODE_ANY, NULL);
    json_t *err = jsonrpc_error(id, JSONRPC_INTERNAL_ERROR,
                                "The client closed its input before answering", NULL);
    json_decref(id);
    if (err)
        call_deliver_answer(c, err);
    json_decref(err);
    call_unref(c);
}

void core_client_gone(struct session *s)
{
    session_client_gone(s, answer_for_client, NULL);
}

void core_end_session(struct session *s)
{
    /* Gone first, so nothing new reaches the backend for it while the
     * backend tears it down; once, however many ways it ends at once (a
     * DELETE, expiry, a stateless request's follow letting go). */
    if (!session_end(s))
        return;
    task_legacy_forget(session_id(s));
    session_each_tracked(s, cancel_for_session_end, NULL);
    if (core.ops->session_close)
        core.ops->session_close(core.backend, session_id(s));
}

/* ---- initialize ---- */

/* The InitializeResult fields of mcpd's own backend. */
static json_t *initialize_result(void)
{
    json_t *caps = core.ops->capabilities(core.backend);
    json_t *result =
        json_pack("{s:o, s:{s:s, s:s}}", "capabilities", caps ? caps : json_object(), "serverInfo",
                  "name", core.cfg.server_name, "version", core.cfg.server_version);
    const char *instructions = core.ops->instructions ? core.ops->instructions(core.backend) : NULL;
    if (instructions)
        json_object_set_new(result, "instructions", json_string(instructions));
    return result;
}

/* The core serves logging/setLevel itself, whatever the backend is. */
static json_t *with_logging(json_t *result)
{
    json_t *caps = json_object_get(result, "capabilities");
    if (!json_is_object(caps)) {
        caps = json_object();
        json_object_set_new(result, "capabilities", caps);
    }
    json_object_set_new(caps, "logging", json_object());
    return result;
}

int core_task_support(const char *method, json_t *params)
{
    return core.ops->task_support ? core.ops->task_support(core.backend, method, params) : 0;
}

int64_t core_session_idle_ms(void)
{
    return core.cfg.session_idle_ms;
}

json_t *core_extensions(void)
{
    return core.ops->extensions ? core.ops->extensions(core.backend) : NULL;
}

int core_tells_list_changes(void)
{
    return core.ops->tells_list_changes;
}

json_t *core_header_params(const char *method, json_t *params)
{
    return core.ops->header_params ? core.ops->header_params(core.backend, method, params) : NULL;
}

json_t *core_requires(const char *method, json_t *params)
{
    return core.ops->requires ? core.ops->requires(core.backend, method, params) : NULL;
}

json_t *core_server_fields(void)
{
    return with_logging(initialize_result());
}

/* Why session_create said no, as the client hears it. */
static void refuse_session(struct core_reply *out, json_t *id, int why)
{
    char msg[160];
    if (why == SESSION_AT_CAP) {
        metrics_refused("session_cap");
        snprintf(msg, sizeof msg,
                 "Too many sessions: the server holds its limit of %lld live sessions; retry "
                 "later",
                 (long long)core.cfg.max_sessions);
        core_reject(out, CORE_AT_CAPACITY, id, JSONRPC_TOO_MANY_SESSIONS, msg);
    } else if (why == SESSION_PRINCIPAL_AT_CAP) {
        metrics_refused("principal_session_cap");
        snprintf(msg, sizeof msg,
                 "Too many sessions for this token: the limit is %lld live sessions "
                 "(--max-sessions-per-principal); end some (DELETE) or retry later",
                 (long long)core.cfg.max_sessions_per_principal);
        core_reject(out, CORE_TOO_MANY, id, JSONRPC_TOO_MANY_SESSIONS, msg);
    } else if (why == SESSION_PARAMS_TOO_LARGE) {
        metrics_refused("init_params_too_large");
        snprintf(msg, sizeof msg, "initialize params too large: the limit is %lld bytes",
                 (long long)core.cfg.max_init_params);
        core_reject(out, CORE_TOO_LARGE, id, JSONRPC_INIT_PARAMS_TOO_LARGE, msg);
    } else {
        core_reject(out, CORE_UNAVAILABLE, id, JSONRPC_INTERNAL_ERROR,
                    "Could not create a session");
    }
}

struct session *core_open_session(const char *version, json_t *params,
                                  const struct session_origin *origin, json_t *id, json_t **fields,
                                  struct core_reply *out)
{
    memset(out, 0, sizeof *out);
    if (!core.accepting) {
        core_reject(out, CORE_UNAVAILABLE, id, JSONRPC_SERVER_ERROR, "Server is shutting down");
        return NULL;
    }
    struct session *s;
    int created = session_create(version, params, origin, &s);
    if (created != 0) {
        refuse_session(out, id, created);
        return NULL;
    }
    char *why = NULL;
    *fields = NULL;
    /* A session bound to a process is this one's, which opens its child. */
    char *owner = NULL;
    bound_elsewhere(s, &owner);
    free(owner);
    if (core.ops->session_open &&
        core.ops->session_open(core.backend, session_id(s), params, fields, &why) != 0) {
        core_reject(out, CORE_UNAVAILABLE, id, JSONRPC_INTERNAL_ERROR,
                    why ? why : "The backend refused the session");
        free(why);
        session_end(s);
        session_unref(s);
        return NULL;
    }
    metrics_add(METRIC_SESSIONS, 1);
    return s;
}

void core_initialize(json_t *msg, const struct jsonrpc_msg *m, const struct session_origin *origin,
                     struct core_reply *out)
{
    (void)msg;
    memset(out, 0, sizeof *out);
    json_t *params = m->params;
    json_t *requested = json_object_get(params, "protocolVersion");
    if (!json_is_object(params) || !json_is_string(requested)) {
        core_reject(out, CORE_BAD_REQUEST, m->id, JSONRPC_INVALID_PARAMS,
                    "Invalid params: initialize needs params.protocolVersion");
        return;
    }
    const char *version = protocol_negotiate(json_string_value(requested));
    json_t *fields;
    struct session *s = core_open_session(version, params, origin, m->id, &fields, out);
    if (!s)
        return;
    json_t *result = json_is_object(fields) ? with_logging(fields) : core_server_fields();
    if (fields && !json_is_object(fields))
        json_decref(fields);
    json_object_set_new(result, "protocolVersion", json_string(version));
    if (strcmp(version, PROTOCOL_TASKS_EXPERIMENTAL) == 0 && core.ops->task_support)
        json_object_set_new(
            json_object_get(result, "capabilities"), "tasks",
            json_pack("{s:{}, s:{}, s:{s:{s:{}}}}", "list", "cancel", "requests", "tools", "call"));
    log_event(LOG_INFO, session_id(s), "session_created", "protocol=%s", version);
    answer_now(s, m->id, jsonrpc_result(m->id, result), out);
    if (out->kind == CORE_STREAM)
        out->session = s;
    else
        session_unref(s);
}

/* ---- everything else ---- */

/* Runs the handler; arg is the runner's own reference to the call. */
static void run_call(void *arg)
{
    struct call *c = arg;
    core.ops->handle(core.backend, c);
    call_unref(c);
}

static void notify_cancel(void *value, void *arg)
{
    (void)arg;
    call_cancel(value, CALL_CANCEL_CLIENT);
}

static void on_notification(struct session *s, json_t *msg, const struct jsonrpc_msg *m)
{
    if (strcmp(m->method, "notifications/initialized") == 0) {
        session_set_initialized(s);
        return;
    }
    if (strcmp(m->method, "notifications/cancelled") == 0) {
        char key[96];
        json_t *rid = json_object_get(m->params, "requestId");
        /* Unknown or finished ids are ignored, as the spec asks; on a
         * shared store the call may run in another process. */
        if (jsonrpc_id_key(rid, key, sizeof key) == 0) {
            if (session_with_tracked(s, key, notify_cancel, NULL) == 0)
                log_event(LOG_DEBUG, session_id(s), "request_cancelled", "id=%s", key);
            else if (replica_shared() && route_elsewhere(s, msg, REPLICA_TO_CALL, key) == 0)
                return; /* whoever runs the call tells its backend */
        }
    }
    char *owner = NULL;
    if (core.ops->notify && bound_elsewhere(s, &owner))
        hand_over(s, msg, NULL, owner);
    else if (core.ops->notify)
        core.ops->notify(core.backend, session_id(s), msg);
    free(owner);
}

static void on_response(struct session *s, json_t *msg, const struct jsonrpc_msg *m,
                        struct core_reply *out)
{
    char key[96];
    struct call *c = NULL;
    if (jsonrpc_id_key(m->id, key, sizeof key) == 0)
        c = session_pending_take(s, key);
    /* A request another process sent: its id ends with that process's tag. */
    const char *tag = !c && replica_shared() && json_is_string(m->id)
                          ? session_request_id_tag(json_string_value(m->id))
                          : NULL;
    if (tag && strcmp(tag, replica_tag()) != 0 && replica_tag_alive(tag) &&
        route_elsewhere(s, msg, REPLICA_TO_PROCESS, tag) == 0) {
        out->kind = CORE_ACCEPTED;
        return;
    }
    if (!c) {
        core_reject(out, CORE_BAD_REQUEST, NULL, JSONRPC_INVALID_REQUEST,
                    "Invalid Request: no server request is waiting for a response with this id");
        return;
    }
    call_deliver_answer(c, msg);
    call_unref(c);
    out->kind = CORE_ACCEPTED;
}

/* The spec's "MUST NOT reuse an id" for a request while the first one with
 * that id still runs: its replies could not be told apart. */
static void refuse_dup(struct core_reply *out, json_t *id)
{
    core_reject(out, CORE_BAD_REQUEST, id, JSONRPC_INVALID_REQUEST,
                "Invalid Request: a request with this id is already in flight");
}

static void refuse_busy(struct core_reply *out, json_t *id)
{
    char msg[160];
    snprintf(msg, sizeof msg,
             "Too many requests in flight for this session: the limit is %lld "
             "(--max-inflight-per-session)",
             (long long)core.cfg.max_inflight);
    metrics_refused("session_inflight");
    core_reject(out, CORE_TOO_MANY, id, JSONRPC_TOO_MANY_IN_FLIGHT, msg);
}

/* mcpd/poll: answered on an ephemeral stream, at once or by the poll lot
 * (a waiting poll holds no thread). */
static void submit_poll(struct session *s, const struct jsonrpc_msg *m, const char *transport,
                        struct core_reply *out)
{
    struct stream *reply = stream_create(session_id(s), STREAM_EPHEMERAL, m->id);
    if (!reply) {
        core_reject(out, CORE_UNAVAILABLE, m->id, JSONRPC_INTERNAL_ERROR, "Out of memory");
        return;
    }
    json_t *params = m->params ? json_incref(m->params) : json_object();
    enum session_track_rc rc = poll_submit(s, m->id, params, transport, reply);
    json_decref(params);
    if (rc != SESSION_TRACK_OK) {
        stream_end(reply, STREAM_ERROR);
        stream_unref(reply);
        if (rc == SESSION_TRACK_BUSY)
            refuse_busy(out, m->id);
        else
            core_reject(out, CORE_NOT_FOUND, m->id, JSONRPC_SESSION_NOT_FOUND, "Session not found");
        return;
    }
    out->kind = CORE_STREAM;
    out->stream = reply;
    out->single = 1;
}

/* The request as the backend should see it: without the transport-level
 * "stream" opt-in. New reference. */
static json_t *without_opt_in(json_t *msg)
{
    json_t *copy = json_copy(msg);
    json_t *params = json_copy(json_object_get(msg, "params"));
    json_object_del(params, "stream");
    json_object_set_new(copy, "params", params);
    return copy;
}

/* A request answered on the spot honours "stream": true like any other. */
static void opt_in(const struct jsonrpc_msg *m, const char *transport, struct core_reply *out)
{
    if (out->kind == CORE_STREAM && poll_opted_in(m->params))
        out->ack = poll_ack(m->id, out->stream, transport);
}

static void on_initialize_again(struct session *s, const struct jsonrpc_msg *m,
                                const char *transport, struct core_reply *out)
{
    (void)s;
    (void)transport;
    core_reject(out, CORE_BAD_REQUEST, m->id, JSONRPC_INVALID_REQUEST,
                "Invalid Request: this session is already initialized");
}

static void on_ping(struct session *s, const struct jsonrpc_msg *m, const char *transport,
                    struct core_reply *out)
{
    answer_now(s, m->id, jsonrpc_result(m->id, json_object()), out);
    opt_in(m, transport, out);
}

static void on_set_level(struct session *s, const struct jsonrpc_msg *m, const char *transport,
                         struct core_reply *out)
{
    int level = protocol_log_level(json_string_value(json_object_get(m->params, "level")));
    if (level < 0) {
        answer_now(s, m->id,
                   jsonrpc_error(m->id, JSONRPC_INVALID_PARAMS,
                                 "Invalid params: level must be one of debug, info, notice, "
                                 "warning, error, critical, alert, emergency",
                                 NULL),
                   out);
        return;
    }
    session_set_log_level(s, level);
    answer_now(s, m->id, jsonrpc_result(m->id, json_object()), out);
    opt_in(m, transport, out);
}

/* subscriptions/listen (2026-07-28): a stream that stays open for the
 * list-changed notifications the client asked for (listen.c). */
static void on_listen(struct session *s, const struct jsonrpc_msg *m, const char *transport,
                      struct core_reply *out)
{
    (void)transport;
    if (!protocol_is_stateless(session_protocol(s))) {
        answer_now(s, m->id,
                   jsonrpc_error(m->id, JSONRPC_METHOD_NOT_FOUND, "Method not found", NULL), out);
        return;
    }
    struct stream *st = stream_create(session_id(s), STREAM_REQUEST, m->id);
    if (!st || listen_open(s, st, m->id, m->params) != 0) {
        if (st) {
            stream_end(st, STREAM_ERROR);
            stream_unref(st);
        }
        core_reject(out, CORE_UNAVAILABLE, m->id, JSONRPC_INTERNAL_ERROR,
                    "Could not open the subscription");
        return;
    }
    out->kind = CORE_STREAM;
    out->stream = st;
}

/* 2025-11-25's experimental tasks (task.c); other revisions have no such
 * methods. */
static void on_tasks(struct session *s, const struct jsonrpc_msg *m, const char *transport,
                     struct core_reply *out)
{
    (void)transport;
    if (strcmp(session_protocol(s), PROTOCOL_TASKS_EXPERIMENTAL) != 0 || !core.ops->task_support) {
        answer_now(s, m->id,
                   jsonrpc_error(m->id, JSONRPC_METHOD_NOT_FOUND, "Method not found", NULL), out);
        return;
    }
    if (strcmp(m->method, "tasks/get") == 0)
        task_legacy_get(s, m->id, m->params, out);
    else if (strcmp(m->method, "tasks/result") == 0)
        task_legacy_result(s, m->id, m->params, TASK_RESULT_WAIT_MS, out);
    else if (strcmp(m->method, "tasks/list") == 0)
        task_legacy_list(s, m->id, out);
    else
        task_legacy_cancel(s, m->id, m->params, out);
}

/* The requests the core answers itself, whatever the backend. */
static const struct {
    const char *name;
    void (*fn)(struct session *s, const struct jsonrpc_msg *m, const char *transport,
               struct core_reply *out);
} core_methods[] = {
    {"initialize", on_initialize_again}, {"ping", on_ping},
    {"logging/setLevel", on_set_level},  {POLL_METHOD, submit_poll},
    {"subscriptions/listen", on_listen}, {"tasks/get", on_tasks},
    {"tasks/result", on_tasks},          {"tasks/list", on_tasks},
    {"tasks/cancel", on_tasks},
};

static void submit_to_backend(struct session *s, json_t *msg, const struct jsonrpc_msg *m,
                              const char *key, const char *transport, struct core_reply *out);

void core_submit(struct session *s, json_t *msg, const struct jsonrpc_msg *m, const char *transport,
                 struct core_reply *out)
{
    memset(out, 0, sizeof *out);
    metrics_add(m->kind == JSONRPC_REQUEST        ? METRIC_REQUESTS
                : m->kind == JSONRPC_NOTIFICATION ? METRIC_NOTIFICATIONS
                                                  : METRIC_RESPONSES,
                1);
    session_touch(s);
    if (m->kind == JSONRPC_NOTIFICATION) {
        on_notification(s, msg, m);
        out->kind = CORE_ACCEPTED;
        return;
    }
    if (m->kind == JSONRPC_RESPONSE) {
        on_response(s, msg, m, out);
        return;
    }
    if (!core.accepting) {
        core_reject(out, CORE_UNAVAILABLE, m->id, JSONRPC_SERVER_ERROR, "Server is shutting down");
        return;
    }
    char key[96];
    int keyed = jsonrpc_id_key(m->id, key, sizeof key) == 0;
    /* Only calls on workers are tracked (they can be cancelled), but a
     * quick request must not share an id with one of them either. */
    if (keyed && session_with_tracked(s, key, NULL, NULL) == 0) {
        refuse_dup(out, m->id);
        return;
    }
    for (size_t i = 0; i < sizeof core_methods / sizeof core_methods[0]; i++)
        if (strcmp(m->method, core_methods[i].name) == 0) {
            core_methods[i].fn(s, m, transport, out);
            return;
        }
    json_t *task = json_object_get(m->params, "task");
    int as_task = json_is_object(task) && strcmp(m->method, "tools/call") == 0 &&
                  strcmp(session_protocol(s), PROTOCOL_TASKS_EXPERIMENTAL) == 0 &&
                  core_task_support(m->method, m->params) > 0;
    submit_to_backend(s, msg, m, keyed ? key : NULL, transport, out);
    if (as_task && out->kind == CORE_STREAM && !out->ack) {
        /* The call runs on; the client polls the task. */
        struct stream *st = out->stream;
        out->stream = NULL;
        core_reply_clear(out);
        task_legacy_created(s, st, m->id, task, out);
        stream_unref(st);
    }
}

/* A request for the backend: a stream, a call, and a worker (or the
 * caller's thread, for a handler that never blocks). key: the id's
 * jsonrpc_id_key, NULL when it did not fit. */
/* Runs the request on stream st (the caller's reference stays the
 * caller's). 0, or -1 with *out the refusal. */
static int start_call(struct session *s, struct stream *st, json_t *msg,
                      const struct jsonrpc_msg *m, const char *key, struct core_reply *out)
{
    json_t *request = poll_opted_in(m->params) ? without_opt_in(msg) : json_incref(msg);
    int inline_ok = core.ops->may_block && !core.ops->may_block(core.backend, m->method, m->params);
    enum session_track_rc why;
    struct call *c = call_new(s, st, request, inline_ok ? NULL : key, &why);
    json_decref(request);
    if (!c) {
        if (why == SESSION_TRACK_ENDED)
            core_reject(out, CORE_NOT_FOUND, m->id, JSONRPC_SESSION_NOT_FOUND, "Session not found");
        else if (why == SESSION_TRACK_DUP)
            refuse_dup(out, m->id);
        else if (why == SESSION_TRACK_BUSY)
            refuse_busy(out, m->id);
        else
            core_reject(out, CORE_UNAVAILABLE, m->id, JSONRPC_INTERNAL_ERROR, "Out of memory");
        return -1;
    }
    call_ref(c); /* the runner's */
    if (inline_ok) {
        run_call(c);
    } else if (workers_submit(run_call, c) != 0) {
        call_fail(c, JSONRPC_SERVER_ERROR, "Server busy: too many requests in flight", NULL);
        call_unref(c);
    }
    return 0;
}

/* The process that holds the session, when it is bound to one
 * (backend_ops.session_bound) and that is another: *owner (caller frees).
 * This process claims a session whose holder died. */
static int bound_elsewhere(struct session *s, char **owner)
{
    *owner = NULL;
    if (!replica_shared() || !core.ops->session_bound || !core.ops->session_bound(core.backend))
        return 0;
    char *o = NULL;
    if (store_session_claim(core.store, session_id(s), clock_wall_ms() - core.cfg.replica_lease_ms,
                            &o) != 0 ||
        !o || strcmp(o, replica_run()) == 0) {
        free(o);
        return 0;
    }
    *owner = o;
    return 1;
}

/* Hands msg to the process `owner` through the inbox: with a stream
 * (st, persisted as owner's) for a request, NULL for a notification. */
static int hand_over(struct session *s, json_t *msg, struct stream *st, const char *owner)
{
    json_t *fw = json_pack("{s:O}", "message", msg);
    if (fw && st)
        json_object_set_new(fw, "stream", json_string(stream_id(st)));
    char target[16];
    snprintf(target, sizeof target, "%c%.12s", REPLICA_HAND_OVER, owner);
    int rc = fw ? inbox_send(session_id(s), fw, target) : -1;
    json_decref(fw);
    return rc;
}

int core_task_elsewhere(const char *principal, json_t *msg, const struct jsonrpc_msg *m,
                        struct core_reply *out)
{
    const char *task_id = json_string_value(json_object_get(m->params, "taskId"));
    struct stream *task = replica_shared() && task_id ? stream_find(task_id) : NULL;
    const char *owner = task ? stream_owner(task) : NULL;
    /* Its process died (SIGKILL, say) and the leader has not swept it yet:
     * end it now, so the answer is the task's end and not a hand-over to
     * no one. */
    if (owner && strcmp(owner, replica_run()) != 0 && stream_state(task) == STREAM_ACTIVE &&
        !replica_tag_alive(owner))
        replica_sweep();
    struct session *s =
        owner && strcmp(owner, replica_run()) != 0 && stream_state(task) == STREAM_ACTIVE
            ? session_find(stream_session(task))
            : NULL;
    struct stream *st = s ? stream_create_owned(session_id(s), m->id, owner) : NULL;
    json_t *fw = st && stream_persist(st) == 0
                     ? json_pack("{s:O, s:s, s:s?}", "message", msg, "stream", stream_id(st),
                                 "principal", principal && *principal ? principal : NULL)
                     : NULL;
    char target[16];
    snprintf(target, sizeof target, "%c%.12s", REPLICA_HAND_OVER, owner ? owner : "");
    int handed = fw && inbox_send(session_id(s), fw, target) == 0;
    json_decref(fw);
    stream_unref(task);
    if (!handed) {
        if (st)
            stream_end(st, STREAM_ERROR);
        stream_unref(st);
        session_unref(s);
        return 0;
    }
    memset(out, 0, sizeof *out);
    out->kind = CORE_STREAM;
    out->stream = st;
    out->single = 1;
    out->session = s;
    return 1;
}

/* A request for the backend: a stream, a call, and a worker (or the
 * caller's thread, for a handler that never blocks). key: the id's
 * jsonrpc_id_key, NULL when it did not fit. */
static void submit_to_backend(struct session *s, json_t *msg, const struct jsonrpc_msg *m,
                              const char *key, const char *transport, struct core_reply *out)
{
    if (!key) { /* a call is tracked by its id's key */
        core_reject(out, CORE_BAD_REQUEST, NULL, JSONRPC_INVALID_REQUEST,
                    "Invalid Request: id is too long");
        return;
    }
    char *owner = NULL;
    int elsewhere = bound_elsewhere(s, &owner);
    struct stream *st = elsewhere ? stream_create_owned(session_id(s), m->id, owner)
                                  : stream_create(session_id(s), STREAM_REQUEST, m->id);
    if (!st) {
        free(owner);
        core_reject(out, CORE_UNAVAILABLE, m->id, JSONRPC_INTERNAL_ERROR,
                    "Could not open a stream");
        return;
    }
    if (session_ended(s)) {
        /* Ended (DELETE, expiry) while this request was on its way. */
        free(owner);
        stream_end(st, STREAM_EXPIRED);
        stream_unref(st);
        core_reject(out, CORE_NOT_FOUND, m->id, JSONRPC_SESSION_NOT_FOUND, "Session not found");
        return;
    }
    int opted_in = poll_opted_in(m->params);
    /* The ack names the stream before it has a message: its row must be
     * committed first, or a SIGKILL would leave the client a stream id that
     * no longer exists. A stream handed over is committed before the
     * owner hears of it, so that its owner's death ends it (the leader's
     * sweep) instead of leaving this reader waiting. */
    if ((opted_in || elsewhere) && stream_persist(st) != 0) {
        free(owner);
        stream_end(st, STREAM_ERROR);
        stream_unref(st);
        core_reject(out, CORE_UNAVAILABLE, m->id, JSONRPC_INTERNAL_ERROR,
                    "The store is not writable");
        return;
    }
    int rc = elsewhere ? hand_over(s, msg, st, owner) : start_call(s, st, msg, m, key, out);
    free(owner);
    if (rc != 0) {
        if (elsewhere) {
            /* Never taken: nobody else will write it. Ends in the store,
             * where its owner's sweep would have. */
            core_reject(out, CORE_UNAVAILABLE, m->id, JSONRPC_INTERNAL_ERROR,
                        "Could not hand the request to the process that holds the session");
        }
        stream_end(st, STREAM_ERROR);
        stream_unref(st);
        return;
    }
    out->kind = CORE_STREAM;
    out->stream = st;
    if (opted_in)
        out->ack = poll_ack(m->id, st, transport);
}
