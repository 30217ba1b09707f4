/* builtin_int — what the builtin*.c files share; not a public API.
 *
 * builtin.c owns struct builtin (the backend's self pointer) and the method
 * table; each other file serves one family of methods and exports only the
 * functions declared here. Every builtin_<family>_<method>() ends the call
 * it is given (call_reply or call_fail) before returning. */
#ifndef MCPD_BUILTIN_INT_H
#define MCPD_BUILTIN_INT_H

#include <pthread.h>
#include <stddef.h>

#include <jansson.h>

#include "call.h"

struct builtin_subs;

struct builtin {
    pthread_mutex_t mu;            /* guards subs and watched_updates */
    struct builtin_subs *subs;     /* resource subscriptions, one node per session */
    unsigned long watched_updates; /* times test://watched-resource changed */
    json_t **tool_schemas;         /* parsed inputSchema per tool; read-only after new() */
};

/* ---- builtin.c: helpers for every family ---- */

/* 0 when params carry no cursor (or a null one). Otherwise ends the call
 * with -32602 "Invalid cursor" (this backend never issues cursors) and
 * returns -1. */
int builtin_check_cursor(struct call *c);

/* A CallToolResult with one text item; isError:true when is_error. Text
 * that is not UTF-8 goes out with U+FFFD for each byte that is not. New
 * reference, NULL on allocation failure. */
json_t *builtin_text_result(const char *text, int is_error);

/* call_reply(c, result), or -32603 when result is NULL (allocation failed). */
void builtin_reply(struct call *c, json_t *result);

/* s, or its longest prefix of whole UTF-8 characters that fits in buf
 * (size > 0), for quoting client-supplied names in error messages. */
const char *builtin_clip(const char *s, char *buf, size_t size);

/* call_fail with a printf-formatted message. `data` is stolen. */
void builtin_failf(struct call *c, int code, json_t *data, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- builtin_tools.c ---- */
int builtin_tools_init(struct builtin *b);
void builtin_tools_free(struct builtin *b);
void builtin_tools_list(struct builtin *b, struct call *c);
void builtin_tools_call(struct builtin *b, struct call *c);
/* {"<header name>": "<argument>"} for the named tool's x-mcp-header
 * arguments (new reference), or NULL. */
json_t *builtin_tools_header_params(struct builtin *b, const char *name);
/* The client capabilities the named tool needs (new reference), or NULL. */
json_t *builtin_tools_requires(const char *name);
/* 1 if the named tool sleeps or emits messages before its reply. */
int builtin_tools_may_block(const char *name);

/* 1 when the call speaks a stateless revision (2026-07-28). */
int builtin_stateless_call(struct call *c);

/* ---- builtin_mrtr.c: input-required results (2026-07-28) ---- */
void builtin_mrtr_elicitation(struct call *c, json_t *args);
void builtin_mrtr_sampling(struct call *c, json_t *args);
void builtin_mrtr_list_roots(struct call *c, json_t *args);
void builtin_mrtr_request_state(struct call *c, json_t *args);
void builtin_mrtr_multiple_inputs(struct call *c, json_t *args);
void builtin_mrtr_multi_round(struct call *c, json_t *args);
void builtin_mrtr_capabilities(struct call *c, json_t *args);
void builtin_mrtr_prompt(struct call *c);
#define BUILTIN_MRTR_PROMPT "test_input_required_result_prompt"
/* The tasks extension's fixtures. */
void builtin_task_greet(struct call *c, json_t *args);
void builtin_task_slow_compute(struct call *c, json_t *args);
void builtin_task_failing_job(struct call *c, json_t *args);
void builtin_task_protocol_error_job(struct call *c, json_t *args);
void builtin_task_confirm_delete(struct call *c, json_t *args);
void builtin_task_multi_input(struct call *c, json_t *args);
void builtin_task_tool_with_task(struct call *c, json_t *args);
/* 0, 1 or 2: may the named tool run as a task (backend_ops.task_support). */
int builtin_tools_task_support(const char *name, json_t *params);

/* ---- builtin_skills.c: the skills extension (2026-07-28) ---- */
#define BUILTIN_SKILLS_EXTENSION "io.modelcontextprotocol/skills"
void builtin_skills_list(struct builtin *b, struct call *c);
void builtin_skills_get(struct builtin *b, struct call *c);
void builtin_skills_directory_read(struct builtin *b, struct call *c);
/* The skills' files as resources/list entries (new reference). */
json_t *builtin_skills_resources(void);
/* Answers resources/read of a skill file: 0, or -1 when uri names none. */
int builtin_skills_read(struct call *c, const char *uri);

/* ---- builtin_resources.c ---- */
void builtin_resources_list(struct builtin *b, struct call *c);
void builtin_resources_read(struct builtin *b, struct call *c);
void builtin_resources_templates_list(struct builtin *b, struct call *c);
void builtin_resources_subscribe(struct builtin *b, struct call *c);
void builtin_resources_unsubscribe(struct builtin *b, struct call *c);
/* The test_trigger_resource_update tool: changes test://watched-resource
 * and tells its subscribers, of both eras. */
void builtin_resources_trigger_update(struct builtin *b, struct call *c);
/* Forget a session's subscriptions (takes b->mu). */
void builtin_subs_drop_session(struct builtin *b, const char *session_id);
/* Free every subscription (destroy; no locking). */
void builtin_subs_free_all(struct builtin *b);

/* ---- builtin_prompts.c ---- */
void builtin_prompts_list(struct builtin *b, struct call *c);
void builtin_prompts_get(struct builtin *b, struct call *c);
void builtin_completion_complete(struct builtin *b, struct call *c);

/* ---- builtin_schema.c ---- */
/* Checks `value` against a JSON Schema subset (type, enum, const,
 * minimum/maximum, minLength/maxLength, properties, required,
 * additionalProperties, items, minItems/maxItems, local $ref into $defs or
 * definitions). Unknown keywords are ignored. Returns 0 if valid, else -1
 * with a message naming the offending location (rooted at `what`) in err. */
int builtin_schema_validate(const json_t *schema, const json_t *value, const char *what, char *err,
                            size_t errlen);

/* ---- builtin_assets.c ---- */
extern const char builtin_png_base64[]; /* 4x4 RGB PNG */
extern const char builtin_wav_base64[]; /* 5 ms 440 Hz mono 16-bit PCM WAV */

#endif
