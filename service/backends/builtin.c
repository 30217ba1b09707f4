/* builtin — backend_ops glue for the built-in toolset.
 *
 * Owns struct builtin (see builtin_int.h), maps each MCP method to the file
 * that serves it through one constant table, and holds the small helpers the
 * other builtin*.c files share. Any method not in the table ends with -32601.
 * See builtin.h for what the backend is and who owns what. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "builtin.h"
#include "builtin_int.h"
#include "utf8.h"

/* ---- shared helpers ---- */

int builtin_check_cursor(struct call *c)
{
    json_t *cursor = json_object_get(call_params(c), "cursor");

    if (cursor == NULL || json_is_null(cursor))
        return 0;
    call_fail(c, -32602, "Invalid cursor", NULL);
    return -1;
}

json_t *builtin_text_result(const char *text, int is_error)
{
    /* The text may quote a client's, cut at a byte count ("%.200s"):
     * jansson refuses a string that is not UTF-8, and the call would end
     * with an internal error instead of its result. */
    size_t n = strlen(text);
    char *repaired = utf8_valid(text, n) ? NULL : malloc(UTF8_REPAIR_CAP(n));
    if (repaired) {
        utf8_repair(text, n, repaired);
        text = repaired;
    }
    json_t *r = json_pack("{s:[{s:s,s:s}]}", "content", "type", "text", "text", text);
    free(repaired);

    if (r != NULL && is_error)
        json_object_set_new(r, "isError", json_true());
    return r;
}

void builtin_reply(struct call *c, json_t *result)
{
    if (result == NULL) {
        call_fail(c, -32603, "Internal error", NULL);
        return;
    }
    call_reply(c, result);
}

const char *builtin_clip(const char *s, char *buf, size_t size)
{
    size_t n = strlen(s);

    if (n < size)
        return s;
    n = size - 1;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--; /* s[n] is where the cut falls: back up to a character start */
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

void builtin_failf(struct call *c, int code, json_t *data, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    call_fail(c, code, msg, data);
}

/* ---- method table ---- */

struct method {
    const char *name;
    void (*serve)(struct builtin *b, struct call *c);
};

static const struct method methods[] = {
    {"tools/list", builtin_tools_list},
    {"tools/call", builtin_tools_call},
    {"resources/list", builtin_resources_list},
    {"resources/read", builtin_resources_read},
    {"resources/templates/list", builtin_resources_templates_list},
    {"resources/subscribe", builtin_resources_subscribe},
    {"resources/unsubscribe", builtin_resources_unsubscribe},
    {"prompts/list", builtin_prompts_list},
    {"prompts/get", builtin_prompts_get},
    {"completion/complete", builtin_completion_complete},
    {"skills/list", builtin_skills_list},
    {"skills/get", builtin_skills_get},
    {"resources/directory/read", builtin_skills_directory_read},
};

/* ---- backend_ops ---- */

static json_t *builtin_capabilities(void *self)
{
    (void)self;
    return json_pack("{s:{s:b}, s:{s:b,s:b}, s:{s:b}, s:{}}", "tools", "listChanged", 0,
                     "resources", "subscribe", 1, "listChanged", 0, "prompts", "listChanged", 0,
                     "completions");
}

static const char *builtin_instructions(void *self)
{
    (void)self;
    return NULL;
}

static int builtin_session_open(void *self, const char *session_id, json_t *init_params,
                                json_t **result, char **err)
{
    (void)self;
    (void)session_id;
    (void)init_params;
    (void)result;
    (void)err;
    return 0;
}

static void builtin_session_close(void *self, const char *session_id)
{
    builtin_subs_drop_session(self, session_id);
}

static void builtin_handle(void *self, struct call *c)
{
    const char *method = call_method(c);
    size_t i;

    for (i = 0; method != NULL && i < sizeof methods / sizeof methods[0]; i++) {
        if (strcmp(methods[i].name, method) == 0) {
            methods[i].serve(self, c);
            return;
        }
    }
    call_fail(c, -32601, "Method not found", NULL);
}

static int builtin_may_block(void *self, const char *method, json_t *params)
{
    (void)self;
    if (strcmp(method, "tools/call") != 0)
        return 0; /* listing, reading and completing answer at once */
    return builtin_tools_may_block(json_string_value(json_object_get(params, "name")));
}

static void builtin_notify(void *self, const char *session_id, json_t *msg)
{
    /* Cancellation is handled by the core (call_sleep / call_request_client
     * return early); nothing else needs the backend's attention. */
    (void)self;
    (void)session_id;
    (void)msg;
}

static json_t *builtin_requires(void *self, const char *method, json_t *params)
{
    (void)self;
    if (!method || strcmp(method, "tools/call") != 0)
        return NULL;
    return builtin_tools_requires(json_string_value(json_object_get(params, "name")));
}

static json_t *builtin_header_params(void *self, const char *method, json_t *params)
{
    if (!method || strcmp(method, "tools/call") != 0)
        return NULL;
    return builtin_tools_header_params(self, json_string_value(json_object_get(params, "name")));
}

static json_t *builtin_extensions(void *self)
{
    (void)self;
    return json_pack("{s:{s:b}, s:{}}", BUILTIN_SKILLS_EXTENSION, "directoryRead", 1,
                     "io.modelcontextprotocol/tasks");
}

static int builtin_task_support(void *self, const char *method, json_t *params)
{
    (void)self;
    if (!method || strcmp(method, "tools/call") != 0)
        return 0;
    return builtin_tools_task_support(json_string_value(json_object_get(params, "name")), params);
}

static void builtin_destroy(void *self)
{
    struct builtin *b = self;

    if (b == NULL)
        return;
    builtin_subs_free_all(b);
    builtin_tools_free(b);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

static const struct backend_ops ops = {
    .name = "builtin",
    .capabilities = builtin_capabilities,
    .instructions = builtin_instructions,
    .session_open = builtin_session_open,
    .session_close = builtin_session_close,
    .handle = builtin_handle,
    .may_block = builtin_may_block,
    .notify = builtin_notify,
    .requires = builtin_requires,
    .header_params = builtin_header_params,
    .extensions = builtin_extensions,
    .task_support = builtin_task_support,
    /* Its 2026-07-28 diagnostic tools change the lists (core_list_changed). */
    .tells_list_changes = 1,
    .destroy = builtin_destroy,
};

const struct backend_ops *builtin_backend_ops(void)
{
    return &ops;
}

void *builtin_backend_new(void)
{
    struct builtin *b = calloc(1, sizeof *b);

    if (b == NULL)
        return NULL;
    if (pthread_mutex_init(&b->mu, NULL) != 0) {
        free(b);
        return NULL;
    }
    if (builtin_tools_init(b) != 0) {
        pthread_mutex_destroy(&b->mu);
        free(b);
        return NULL;
    }
    return b;
}
