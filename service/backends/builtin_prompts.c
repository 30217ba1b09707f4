/* builtin_prompts — prompts/list, prompts/get and completion/complete.
 *
 * One constant table holds the prompts: name, title, description, up to
 * MAX_ARGS declared arguments, and a function that builds the messages from
 * the (already checked) arguments. prompts/get rejects an unknown prompt, a
 * missing required argument or a non-string argument with -32602.
 *
 * completion/complete is table-driven too: a {ref type, ref name or uri,
 * argument} row lists candidate values, answered filtered by the typed
 * prefix (ASCII case-insensitive). Any well-formed request for something
 * without a row gets an empty list. */
#include <stdio.h>
#include <string.h>

#include "builtin_int.h"

#define MAX_ARGS 2
#define MAX_COMPLETIONS 100

struct prompt_arg {
    const char *name;
    const char *description;
    int required;
};

struct prompt {
    const char *name;
    const char *title;
    const char *description;
    struct prompt_arg args[MAX_ARGS];
    json_t *(*messages)(json_t *args); /* new reference, NULL on OOM */
};

static const char *arg(json_t *args, const char *name)
{
    return json_string_value(json_object_get(args, name));
}

static json_t *simple_messages(json_t *args)
{
    (void)args;
    return json_pack("[{s:s,s:{s:s,s:s}}]", "role", "user", "content", "type", "text", "text",
                     "This is a simple prompt for testing.");
}

static json_t *with_arguments_messages(json_t *args)
{
    json_t *text = json_sprintf("Prompt with arguments: arg1='%s', arg2='%s'", arg(args, "arg1"),
                                arg(args, "arg2"));

    return json_pack("[{s:s,s:{s:s,s:o}}]", "role", "user", "content", "type", "text", "text",
                     text);
}

static json_t *embedded_resource_messages(json_t *args)
{
    return json_pack("[{s:s,s:{s:s,s:{s:s,s:s,s:s}}}, {s:s,s:{s:s,s:s}}]", "role", "user",
                     "content", "type", "resource", "resource", "uri", arg(args, "resourceUri"),
                     "mimeType", "text/plain", "text", "Embedded resource content for testing.",
                     "role", "user", "content", "type", "text", "text",
                     "Please process the embedded resource above.");
}

static json_t *image_messages(json_t *args)
{
    (void)args;
    return json_pack("[{s:s,s:{s:s,s:s,s:s}}, {s:s,s:{s:s,s:s}}]", "role", "user", "content",
                     "type", "image", "data", builtin_png_base64, "mimeType", "image/png", "role",
                     "user", "content", "type", "text", "text", "Please analyze the image above.");
}

static const struct prompt prompts[] = {
    {"test_simple_prompt",
     "Simple Test Prompt",
     "A simple prompt without arguments",
     {{0}},
     simple_messages},
    {"test_prompt_with_arguments",
     "Prompt With Arguments",
     "A prompt with required arguments",
     {{"arg1", "First test argument", 1}, {"arg2", "Second test argument", 1}},
     with_arguments_messages},
    {"test_prompt_with_embedded_resource",
     "Prompt With Embedded Resource",
     "A prompt that includes an embedded resource",
     {{"resourceUri", "URI of the resource to embed", 1}},
     embedded_resource_messages},
    {"test_prompt_with_image",
     "Prompt With Image",
     "A prompt that includes image content",
     {{0}},
     image_messages},
};

#define NPROMPTS (sizeof prompts / sizeof prompts[0])

static json_t *prompt_json(const struct prompt *p)
{
    json_t *o = json_pack("{s:s,s:s,s:s}", "name", p->name, "title", p->title, "description",
                          p->description);
    json_t *args = json_array();
    size_t i;

    for (i = 0; o != NULL && args != NULL && i < MAX_ARGS && p->args[i].name != NULL; i++) {
        if (json_array_append_new(args, json_pack("{s:s,s:s,s:b}", "name", p->args[i].name,
                                                  "description", p->args[i].description, "required",
                                                  p->args[i].required)) != 0) {
            json_decref(o);
            o = NULL;
        }
    }
    if (o != NULL && args != NULL && json_array_size(args) > 0) {
        json_object_set(o, "arguments", args);
    } else if (args == NULL) {
        json_decref(o);
        o = NULL;
    }
    json_decref(args);
    return o;
}

void builtin_prompts_list(struct builtin *b, struct call *c)
{
    json_t *list = json_array();
    size_t i;

    (void)b;
    if (builtin_check_cursor(c) != 0) {
        json_decref(list);
        return;
    }
    for (i = 0; list != NULL && i < NPROMPTS; i++) {
        if (json_array_append_new(list, prompt_json(&prompts[i])) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    /* A 2026-07-28 client also sees the prompt that asks for input. */
    if (list && builtin_stateless_call(c))
        json_array_append_new(list, json_pack("{s:s, s:s, s:s}", "name", BUILTIN_MRTR_PROMPT,
                                              "title", "Input Required Prompt", "description",
                                              "Asks the user for context with an "
                                              "InputRequiredResult, then builds the prompt"));
    builtin_reply(c, list != NULL ? json_pack("{s:o}", "prompts", list) : NULL);
}

void builtin_prompts_get(struct builtin *b, struct call *c)
{
    json_t *params = call_params(c);
    json_t *name = json_object_get(params, "name");
    json_t *args = json_object_get(params, "arguments");
    json_t *messages, *v;
    const struct prompt *p = NULL;
    const char *key;
    char clip[200];
    size_t i;

    (void)b;
    if (!json_is_string(name)) {
        call_fail(c, -32602, "Invalid params: prompts/get needs a string \"name\"", NULL);
        return;
    }
    if (strcmp(json_string_value(name), BUILTIN_MRTR_PROMPT) == 0 && builtin_stateless_call(c)) {
        builtin_mrtr_prompt(c);
        return;
    }
    for (i = 0; i < NPROMPTS && p == NULL; i++)
        if (strcmp(prompts[i].name, json_string_value(name)) == 0)
            p = &prompts[i];
    if (p == NULL) {
        builtin_failf(c, -32602, NULL, "Unknown prompt: %s",
                      builtin_clip(json_string_value(name), clip, sizeof clip));
        return;
    }
    if (args != NULL && !json_is_null(args) && !json_is_object(args)) {
        call_fail(c, -32602, "Invalid params: \"arguments\" must be an object", NULL);
        return;
    }
    json_object_foreach(args, key, v)
    {
        if (!json_is_string(v)) {
            builtin_failf(c, -32602, NULL, "Invalid params: argument '%s' must be a string",
                          builtin_clip(key, clip, sizeof clip));
            return;
        }
    }
    for (i = 0; i < MAX_ARGS && p->args[i].name != NULL; i++) {
        if (p->args[i].required && json_object_get(args, p->args[i].name) == NULL) {
            builtin_failf(c, -32602, NULL, "Missing required argument '%s' for prompt %s",
                          p->args[i].name, p->name);
            return;
        }
    }
    messages = p->messages(args);
    builtin_reply(c, messages != NULL ? json_pack("{s:s,s:o}", "description", p->description,
                                                  "messages", messages)
                                      : NULL);
}

/* ---- completion/complete ---- */

struct completion {
    const char *ref_type; /* "ref/prompt" or "ref/resource" */
    const char *ref;      /* prompt name or resource template uri */
    const char *argument;
    const char *const *values; /* NULL-terminated */
};

static const char *const arg1_values[] = {"paris", "park",  "party",      "pasta",
                                          "test",  "tests", "test-value", NULL};

/* ASCII case-insensitive: does s start with prefix? */
static int has_prefix(const char *s, const char *prefix)
{
    for (; *prefix != '\0'; s++, prefix++) {
        int a = (unsigned char)*s, p = (unsigned char)*prefix;
        if (a >= 'A' && a <= 'Z')
            a += 'a' - 'A';
        if (p >= 'A' && p <= 'Z')
            p += 'a' - 'A';
        if (a != p)
            return 0;
    }
    return 1;
}

static const struct completion completions[] = {
    {"ref/prompt", "test_prompt_with_arguments", "arg1", arg1_values},
};

void builtin_completion_complete(struct builtin *b, struct call *c)
{
    json_t *params = call_params(c);
    json_t *ref = json_object_get(params, "ref");
    json_t *argument = json_object_get(params, "argument");
    const char *type = json_string_value(json_object_get(ref, "type"));
    const char *arg_name = json_string_value(json_object_get(argument, "name"));
    const char *prefix = json_string_value(json_object_get(argument, "value"));
    const char *target;
    json_t *values = json_array();
    size_t i, j;

    (void)b;
    if (type == NULL || arg_name == NULL || prefix == NULL) {
        json_decref(values);
        call_fail(c, -32602,
                  "Invalid params: completion/complete needs ref.type, argument.name and "
                  "argument.value",
                  NULL);
        return;
    }
    target =
        json_string_value(json_object_get(ref, strcmp(type, "ref/resource") == 0 ? "uri" : "name"));
    for (i = 0; values != NULL && target != NULL && i < sizeof completions / sizeof completions[0];
         i++) {
        const struct completion *k = &completions[i];
        if (strcmp(k->ref_type, type) != 0 || strcmp(k->ref, target) != 0 ||
            strcmp(k->argument, arg_name) != 0)
            continue;
        for (j = 0; k->values[j] != NULL && json_array_size(values) < MAX_COMPLETIONS; j++)
            if (has_prefix(k->values[j], prefix))
                json_array_append_new(values, json_string(k->values[j]));
    }
    builtin_reply(c, values != NULL
                         ? json_pack("{s:{s:o,s:I,s:b}}", "completion", "values", values, "total",
                                     (json_int_t)json_array_size(values), "hasMore", 0)
                         : NULL);
}
