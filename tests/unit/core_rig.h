/* core_rig — a real core for the unit tests of its request path
 * (test_receive, test_longpoll): a SQLite store in a temporary folder, the
 * built-in toolset as the backend, core_start with the caller's limits, and
 * the few steps a transport takes, done as service/transports/http.c does
 * them: a message parsed and handed to core_receive, its reply followed
 * with follow.h.
 *
 * What driving the core needs: core_start (the long-poll lot and the relay
 * thread) and the event loop, where the tools that wait run (workers.h).
 * The tests themselves need no fiber: core_receive and every follow.h wait
 * also run on a plain thread (fcond waits on a condition variable there,
 * and parks only on a fiber), which is how these tests call them.
 *
 * One core per process: its state (core.c's configuration, the session and
 * stream registries, the workers, the long-poll lot, the relay) belongs to
 * the process, so a test file starts it once, with one set of limits, and
 * its tests share it, each on sessions of its own.
 *
 * Header-only (each test is one file); every function is static inline so
 * a test that uses only some of them builds without warnings. */
#ifndef MCPD_TEST_CORE_RIG_H
#define MCPD_TEST_CORE_RIG_H

#include "builtin.h"
#include "check.h"
#include "clock.h"
#include "core.h"
#include "follow.h"
#include "loop.h"
#include "session.h"
#include "store.h"
#include "stream.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long a test waits for a worker to do what it must (generous: only
 * a hung core would use it up). */
#define RIG_WAIT_MS 20000

static struct {
    char dir[64];
    struct store *store;
    void *backend;
} rig;

/* 0, or -1 (and the reason printed) when the core could not start. */
static inline int rig_start(const char *name, const struct core_config *cfg)
{
    snprintf(rig.dir, sizeof rig.dir, "/tmp/mcpd-%s-XXXXXX", name);
    if (!mkdtemp(rig.dir)) {
        perror("mkdtemp");
        return -1;
    }
    char path[128], *err = NULL;
    snprintf(path, sizeof path, "%s/mcpd.db", rig.dir);
    if (store_open(path, &rig.store, &err) != 0) {
        printf("store_open(%s): %s\n", path, err ? err : "?");
        free(err);
        return -1;
    }
    rig.backend = builtin_backend_new();
    if (core_start(cfg, rig.store, builtin_backend_ops(), rig.backend, &err) != 0) {
        printf("core_start: %s\n", err ? err : "?");
        free(err);
        return -1;
    }
    if (loop_start(2) != 0) {
        perror("loop_start");
        return -1;
    }
    return 0;
}

/* After core_stop (rig_stop does both). */
static inline void rig_cleanup(void)
{
    loop_stop();
    core_cleanup();
    builtin_backend_ops()->destroy(rig.backend);
    store_close(rig.store);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", rig.dir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", rig.dir);
}

static inline void rig_stop(void)
{
    core_stop(5000);
    rig_cleanup();
}

/* A caller as HTTP describes one: a principal (NULL: none) and the session
 * the client names (NULL: none). */
static inline struct core_caller rig_http(const char *principal, const char *sid)
{
    return (struct core_caller){.principal = principal, .transport = "http", .session_id = sid};
}

/* Parses text and hands it to core_receive; *r is the caller's to clear. */
static inline void rig_send(const struct core_caller *c, const char *text, struct core_reply *r)
{
    json_error_t jerr;
    json_t *msg = json_loads(text, 0, &jerr);
    if (!msg) {
        printf("bad test JSON: %s: %s\n", jerr.text, text);
        memset(r, 0, sizeof *r);
        r->kind = CORE_REJECTED;
        return;
    }
    core_receive(c, msg, r);
    json_decref(msg);
}

/* printf-style rig_send. */
static inline void rig_sendf(const struct core_caller *c, struct core_reply *r, const char *fmt,
                             ...) __attribute__((format(printf, 3, 4)));
static inline void rig_sendf(const struct core_caller *c, struct core_reply *r, const char *fmt,
                             ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    rig_send(c, text, r);
}

/* Reads f until its stream ends (or RIG_WAIT_MS passes): every message, in
 * order, as JSON (new reference). *last: the read that stopped it
 * (FOLLOW_STREAM_ENDED once the end was read). */
static inline json_t *rig_read_follow(struct follow *f, enum follow_event *last)
{
    json_t *msgs = json_array();
    int64_t deadline = clock_mono_ms() + RIG_WAIT_MS;
    enum follow_event w;
    for (;;) {
        struct stream_chunk ch;
        w = follow_read(f, deadline, &ch);
        if (w == FOLLOW_POLL || w == FOLLOW_PROBED)
            continue;
        if (w != FOLLOW_MESSAGE)
            break;
        json_array_append_new(msgs, json_loadb(ch.msg, ch.len, 0, NULL));
    }
    if (last)
        *last = w;
    return msgs;
}

/* The next message of f (new reference), or NULL when its stream ended
 * or RIG_WAIT_MS passed first. */
static inline json_t *rig_next(struct follow *f)
{
    int64_t deadline = clock_mono_ms() + RIG_WAIT_MS;
    for (;;) {
        struct stream_chunk ch;
        enum follow_event w = follow_read(f, deadline, &ch);
        if (w == FOLLOW_POLL || w == FOLLOW_PROBED)
            continue;
        return w == FOLLOW_MESSAGE ? json_loadb(ch.msg, ch.len, 0, NULL) : NULL;
    }
}

/* Follows a reply of kind CORE_STREAM to its end (r is cleared): its
 * messages, as rig_read_follow. */
static inline json_t *rig_read_reply(struct core_reply *r, enum follow_event *last)
{
    if (r->kind != CORE_STREAM) {
        core_reply_clear(r);
        if (last)
            *last = FOLLOW_DETACHED; /* nothing to follow */
        return json_array();
    }
    struct follow f = {0};
    follow_reply(&f, r, 0);
    core_reply_clear(r);
    json_t *msgs = rig_read_follow(&f, last);
    follow_end(&f);
    return msgs;
}

/* The one message of a reply that carries one (a quick answer, a poll's
 * result), or NULL. New reference. */
static inline json_t *rig_one(struct core_reply *r)
{
    enum follow_event last;
    json_t *msgs = rig_read_reply(r, &last);
    json_t *m = json_array_size(msgs) == 1 && last == FOLLOW_STREAM_ENDED
                    ? json_incref(json_array_get(msgs, 0))
                    : NULL;
    json_decref(msgs);
    return m;
}

/* error.code of a JSON-RPC message (0 when it has none). */
static inline long long rig_code(const json_t *msg)
{
    return json_integer_value(json_object_get(json_object_get(msg, "error"), "code"));
}

static inline const char *rig_message(const json_t *msg)
{
    return json_string_value(json_object_get(json_object_get(msg, "error"), "message"));
}

/* The text of a tools/call result's first content item. */
static inline const char *rig_text(const json_t *msg)
{
    json_t *content = json_object_get(json_object_get(msg, "result"), "content");
    return json_string_value(json_object_get(json_array_get(content, 0), "text"));
}

/* Initializes a session over HTTP for principal (NULL: none) with the
 * client capabilities caps (JSON text) at `version`, from `transport`;
 * returns the session (a reference the caller releases), or NULL. */
static inline struct session *rig_session_on(const char *principal, const char *version,
                                             const char *caps, const char *transport)
{
    struct core_caller c = rig_http(principal, NULL);
    c.transport = transport;
    struct core_reply r;
    rig_sendf(&c, &r,
              "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
              "\"protocolVersion\":\"%s\",\"capabilities\":%s,"
              "\"clientInfo\":{\"name\":\"unit\",\"version\":\"1\"}}}",
              version, caps);
    struct session *s = r.kind == CORE_STREAM ? r.session : NULL;
    r.session = NULL;
    core_reply_clear(&r);
    return s;
}

static inline struct session *rig_session(const char *principal, const char *caps)
{
    return rig_session_on(principal, "2025-06-18", caps, "http");
}

/* A session with caps (principal none) and its HTTP caller, as most tests
 * open them: 0, or -1 (a failed check recorded) when it could not be made.
 * *s is the caller's to rig_end. */
static inline int rig_open(const char *caps, struct session **s, struct core_caller *c)
{
    *s = rig_session(NULL, caps);
    CHECK(*s != NULL);
    if (!*s)
        return -1;
    *c = rig_http(NULL, session_id(*s));
    return 0;
}

/* Ends a session as DELETE does and drops the caller's reference. */
static inline void rig_end(struct session *s)
{
    if (!s)
        return;
    core_end_session(s);
    session_unref(s);
}

#endif
