/* task — the tasks extension of 2026-07-28 (io.modelcontextprotocol/tasks,
 * SEP-2663): a tool call the client can come back to.
 *
 * A task is what mcpd already has for every request: a durable stream in
 * the store, in a session of its own. The task id is the stream's id (random,
 * 128 bits) and the task belongs to the session's principal. The call runs
 * as any other; its status is read off the stream: still being written
 * (working, or input_required while server→client requests on it await
 * answers), ended with a result (completed, tool errors included), with an
 * error (failed: a protocol error, or "interrupted by server restart",
 * which core_start writes to every stream a killed process left active), or
 * without a final message (cancelled). tasks/update answers the pending
 * requests by key; tasks/cancel cancels the call. A task is kept for ttlMs
 * (the session idle timeout) after its last activity, across restarts. */
#ifndef MCPD_TASK_H
#define MCPD_TASK_H

#include <jansson.h>
#include <stdint.h>

#include "core.h"

#define TASK_EXTENSION "io.modelcontextprotocol/tasks"

struct session;
struct stream;

/* The CreateTaskResult for a task just started on stream st of session s
 * (the stream is persisted first, so an immediate tasks/get finds it). */
void task_created(struct session *s, struct stream *st, json_t *id, int64_t ttl_ms,
                  struct core_reply *out);
/* tasks/get, tasks/update, tasks/cancel for principal (NULL: none). */
void task_get(const char *principal, json_t *id, json_t *params, int64_t ttl_ms,
              struct core_reply *out);
void task_update(const char *principal, json_t *id, json_t *params, struct core_reply *out);
void task_cancel(const char *principal, json_t *id, json_t *params, struct core_reply *out);
/* The task as tasks/get shows it, less resultType (new reference; the
 * caller owns it), or NULL when task_id names no task of principal's. */
json_t *task_snapshot(const char *principal, const char *task_id, int64_t ttl_ms);

/* 2025-11-25 experimental tasks, within session s (borrowed). */
void task_legacy_created(struct session *s, struct stream *st, json_t *id, json_t *task,
                         struct core_reply *out);
void task_legacy_get(struct session *s, json_t *id, json_t *params, struct core_reply *out);
/* Waits up to wait_ms for the task to end, then answers with its result. */
void task_legacy_result(struct session *s, json_t *id, json_t *params, int64_t wait_ms,
                        struct core_reply *out);
void task_legacy_list(struct session *s, json_t *id, struct core_reply *out);
void task_legacy_cancel(struct session *s, json_t *id, json_t *params, struct core_reply *out);
/* The session ended: forget its list of tasks. */
void task_legacy_forget(const char *session);

#endif
