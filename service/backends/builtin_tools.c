/* builtin_tools — tools/list and tools/call for the built-in toolset.
 *
 * One constant table holds every tool: name, title, description, its
 * inputSchema as JSON text, and the function that runs it. builtin_tools_init
 * parses each schema once (a broken schema is a bug: init fails); tools/list
 * sends deep copies, tools/call checks the arguments against the parsed
 * schema (builtin_schema.c) and then runs the tool. Every run function ends
 * the call itself (call_reply or call_fail) before returning.
 *
 * Errors, as the 2025-11-25 spec asks: an unknown tool or a malformed
 * request is a JSON-RPC error (-32602); arguments that don't fit the schema,
 * and failures inside a tool, are a result with isError:true. A cancelled
 * call ends with -32800, which the core drops. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin_int.h"
#include "core.h"
#include "protocol.h"

#define NO_ARGS "{\"type\":\"object\",\"properties\":{}}"
#define CLIENT_TIMEOUT_MS 60000

/* ---- small helpers ---- */

/* Ends a call that was cancelled; the core drops this error. */
static void end_cancelled(struct call *c)
{
    call_fail(c, -32800, "Request cancelled", NULL);
}

static void reply_text(struct call *c, const char *text, int is_error)
{
    builtin_reply(c, builtin_text_result(text, is_error));
}

static void reply_textf(struct call *c, int is_error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void reply_textf(struct call *c, int is_error, const char *fmt, ...)
{
    char *text;
    va_list ap;

    va_start(ap, fmt);
    /* any length; what a client sent, cut short, is made UTF-8 by reply_text */
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    reply_text(c, n >= 0 ? text : "(text unavailable)", is_error);
    if (n >= 0)
        free(text);
}

/* Compact JSON text of x (malloc'd, caller frees), or a copy of "{}". */
static char *dump(const json_t *x)
{
    char *s = x != NULL ? json_dumps(x, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

    if (s == NULL) {
        s = malloc(3);
        if (s != NULL)
            memcpy(s, "{}", 3);
    }
    return s;
}

/* Text from a sampling result: content (object or array of blocks), or the
 * older message.content shape. NULL when there is no text block. */
static const char *sampling_text(const json_t *result)
{
    json_t *content = json_object_get(result, "content");
    json_t *item;
    size_t i;

    if (content == NULL)
        content = json_object_get(json_object_get(result, "message"), "content");
    if (json_is_object(content))
        return json_string_value(json_object_get(content, "text"));
    json_array_foreach(content, i, item)
    {
        const char *t = json_string_value(json_object_get(item, "text"));
        if (t != NULL)
            return t;
    }
    return NULL;
}

/* Reply for a server→client request that did not return a result (rc 1:
 * *answer is the JSON-RPC error; rc -1: timeout / cancel / shutdown). */
static void reply_client_failure(struct call *c, const char *what, int rc, json_t *answer)
{
    if (rc == 1) {
        json_t *msg = json_object_get(answer, "message");
        reply_textf(c, 1, "%s failed: the client answered with error %lld: %s", what,
                    (long long)json_integer_value(json_object_get(answer, "code")),
                    json_is_string(msg) ? json_string_value(msg) : "(no message)");
    } else if (call_cancelled(c)) {
        end_cancelled(c);
    } else {
        reply_textf(c, 1, "%s failed: the client did not answer in time", what);
    }
    json_decref(answer);
}

/* Sends elicitation/create with `params` (stolen) and replies with
 * "<prefix>action=..., content=...". */
static void elicit(struct call *c, json_t *params, const char *prefix)
{
    json_t *answer = NULL;
    char *content;
    const char *action;
    int rc;

    if (params == NULL) {
        call_fail(c, -32603, "Internal error", NULL);
        return;
    }
    if (!call_client_has(c, "elicitation")) {
        json_decref(params);
        reply_text(c,
                   "Elicitation not supported: the client did not declare the elicitation "
                   "capability",
                   1);
        return;
    }
    rc = call_request_client(c, "elicitation/create", params, CLIENT_TIMEOUT_MS, &answer);
    if (rc != 0) {
        reply_client_failure(c, "Elicitation", rc, answer);
        return;
    }
    action = json_string_value(json_object_get(answer, "action"));
    content = dump(json_object_get(answer, "content"));
    reply_textf(c, 0, "%saction=%s, content=%s", prefix, action != NULL ? action : "(none)",
                content != NULL ? content : "{}");
    free(content);
    json_decref(answer);
}

/* ---- the tools ---- */

static void run_simple_text(struct call *c, json_t *args)
{
    (void)args;
    reply_text(c, "This is a simple text response for testing.", 0);
}

static void run_image_content(struct call *c, json_t *args)
{
    (void)args;
    builtin_reply(c, json_pack("{s:[{s:s,s:s,s:s}]}", "content", "type", "image", "data",
                               builtin_png_base64, "mimeType", "image/png"));
}

static void run_audio_content(struct call *c, json_t *args)
{
    (void)args;
    builtin_reply(c, json_pack("{s:[{s:s,s:s,s:s}]}", "content", "type", "audio", "data",
                               builtin_wav_base64, "mimeType", "audio/wav"));
}

static void run_embedded_resource(struct call *c, json_t *args)
{
    (void)args;
    builtin_reply(c, json_pack("{s:[{s:s,s:{s:s,s:s,s:s}}]}", "content", "type", "resource",
                               "resource", "uri", "test://embedded-resource", "mimeType",
                               "text/plain", "text", "This is an embedded resource content."));
}

static void run_multiple_content_types(struct call *c, json_t *args)
{
    (void)args;
    builtin_reply(c,
                  json_pack("{s:[{s:s,s:s}, {s:s,s:s,s:s}, {s:s,s:{s:s,s:s,s:s}}]}", "content",
                            "type", "text", "text", "Multiple content types test:", "type", "image",
                            "data", builtin_png_base64, "mimeType", "image/png", "type", "resource",
                            "resource", "uri", "test://mixed-content-resource", "mimeType",
                            "application/json", "text", "{\"test\":\"data\",\"value\":123}"));
}

static void run_tool_with_logging(struct call *c, json_t *args)
{
    static const char *const lines[] = {"Tool execution started", "Tool processing data",
                                        "Tool execution completed"};
    size_t i;

    (void)args;
    for (i = 0; i < 3; i++) {
        if (i > 0 && call_sleep(c, 50) != 0) {
            end_cancelled(c);
            return;
        }
        call_log(c, "info", NULL, json_string(lines[i]));
    }
    reply_text(c, "Tool with logging executed successfully", 0);
}

static void run_tool_with_progress(struct call *c, json_t *args)
{
    static const double steps[] = {0, 50, 100};
    char msg[64];
    size_t i;

    (void)args;
    for (i = 0; i < 3; i++) {
        if (i > 0 && call_sleep(c, 50) != 0) {
            end_cancelled(c);
            return;
        }
        snprintf(msg, sizeof msg, "Completed step %.0f of 100", steps[i]);
        call_progress(c, steps[i], 100, msg);
    }
    reply_text(c, "Tool with progress executed successfully", 0);
}

static void run_error_handling(struct call *c, json_t *args)
{
    (void)args;
    reply_text(c, "This tool intentionally returns an error for testing", 1);
}

static void run_reconnection(struct call *c, json_t *args)
{
    (void)args;
    /* SEP-1699: let the transport attach and prime the stream, then ask it
     * to close the connection; the client reconnects with Last-Event-ID
     * while we finish, and gets the result from the stream. */
    if (call_sleep(c, 50) != 0) {
        end_cancelled(c);
        return;
    }
    call_detach_readers(c);
    if (call_sleep(c, 100) != 0) {
        end_cancelled(c);
        return;
    }
    reply_text(c,
               "Reconnection test completed successfully. If you received this, the client "
               "properly reconnected after stream closure.",
               0);
}

static void run_sampling(struct call *c, json_t *args)
{
    json_t *params, *answer = NULL;
    const char *text;
    int rc;

    if (!call_client_has(c, "sampling")) {
        reply_text(c, "Sampling not supported: the client did not declare the sampling capability",
                   1);
        return;
    }
    params = json_pack("{s:[{s:s,s:{s:s,s:O}}],s:i}", "messages", "role", "user", "content", "type",
                       "text", "text", json_object_get(args, "prompt"), "maxTokens", 100);
    if (params == NULL) {
        call_fail(c, -32603, "Internal error", NULL);
        return;
    }
    rc = call_request_client(c, "sampling/createMessage", params, CLIENT_TIMEOUT_MS, &answer);
    if (rc != 0) {
        reply_client_failure(c, "Sampling", rc, answer);
        return;
    }
    text = sampling_text(answer);
    reply_textf(c, 0, "LLM response: %s", text != NULL ? text : "(no text content)");
    json_decref(answer);
}

static void run_elicitation(struct call *c, json_t *args)
{
    elicit(c,
           json_pack("{s:O,s:{s:s,s:{s:{s:s,s:s},s:{s:s,s:s}},s:[s,s]}}", "message",
                     json_object_get(args, "message"), "requestedSchema", "type", "object",
                     "properties", "username", "type", "string", "description", "User's response",
                     "email", "type", "string", "description", "User's email address", "required",
                     "username", "email"),
           "User response: ");
}

static const char sep1034_params[] =
    "{\"message\":\"Please review and update the form fields with defaults\","
    "\"requestedSchema\":{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"description\":\"User name\",\"default\":\"John Doe\"},"
    "\"age\":{\"type\":\"integer\",\"description\":\"User age\",\"default\":30},"
    "\"score\":{\"type\":\"number\",\"description\":\"User score\",\"default\":95.5},"
    "\"status\":{\"type\":\"string\",\"description\":\"User status\","
    "\"enum\":[\"active\",\"inactive\",\"pending\"],\"default\":\"active\"},"
    "\"verified\":{\"type\":\"boolean\",\"description\":\"Verification status\","
    "\"default\":true}},\"required\":[]}}";

static const char sep1330_params[] =
    "{\"message\":\"Please select options from the enum fields\","
    "\"requestedSchema\":{\"type\":\"object\",\"properties\":{"
    "\"untitledSingle\":{\"type\":\"string\",\"description\":\"Select one option\","
    "\"enum\":[\"option1\",\"option2\",\"option3\"]},"
    "\"titledSingle\":{\"type\":\"string\",\"description\":\"Select one option with titles\","
    "\"oneOf\":[{\"const\":\"value1\",\"title\":\"First Option\"},"
    "{\"const\":\"value2\",\"title\":\"Second Option\"},"
    "{\"const\":\"value3\",\"title\":\"Third Option\"}]},"
    "\"legacyEnum\":{\"type\":\"string\",\"description\":\"Select one option (legacy)\","
    "\"enum\":[\"opt1\",\"opt2\",\"opt3\"],"
    "\"enumNames\":[\"Option One\",\"Option Two\",\"Option Three\"]},"
    "\"untitledMulti\":{\"type\":\"array\",\"description\":\"Select multiple options\","
    "\"minItems\":1,\"maxItems\":3,"
    "\"items\":{\"type\":\"string\",\"enum\":[\"option1\",\"option2\",\"option3\"]}},"
    "\"titledMulti\":{\"type\":\"array\",\"description\":\"Select multiple options with titles\","
    "\"minItems\":1,\"maxItems\":3,\"items\":{\"anyOf\":["
    "{\"const\":\"value1\",\"title\":\"First Choice\"},"
    "{\"const\":\"value2\",\"title\":\"Second Choice\"},"
    "{\"const\":\"value3\",\"title\":\"Third Choice\"}]}}},\"required\":[]}}";

static void run_elicitation_sep1034(struct call *c, json_t *args)
{
    (void)args;
    elicit(c, json_loads(sep1034_params, 0, NULL), "Elicitation completed: ");
}

static void run_elicitation_sep1330(struct call *c, json_t *args)
{
    (void)args;
    elicit(c, json_loads(sep1330_params, 0, NULL), "Elicitation completed: ");
}

static void run_json_schema_2020_12(struct call *c, json_t *args)
{
    char *s = dump(args);

    reply_textf(c, 0, "JSON Schema 2020-12 tool called with: %s", s != NULL ? s : "{}");
    free(s);
}

static void run_echo(struct call *c, json_t *args)
{
    /* The message goes back as the same JSON string, so text with an
     * escaped NUL round-trips whole. */
    builtin_reply(c, json_pack("{s:[{s:s, s:O}]}", "content", "type", "text", "text",
                               json_object_get(args, "message")));
}

static void run_countdown(struct call *c, json_t *args)
{
    long long n = (long long)json_number_value(json_object_get(args, "n"));
    int interval = (int)json_number_value(json_object_get(args, "interval_ms"));
    char msg[64];
    long long k;

    for (k = 1; k <= n; k++) {
        if ((interval > 0 ? call_sleep(c, interval) : call_cancelled(c)) != 0) {
            end_cancelled(c);
            return;
        }
        snprintf(msg, sizeof msg, "%lld of %lld", k, n);
        /* Whether it was stored or not, the call ends as every call does,
         * by its cancel or its reply: a progress message that could not be
         * stored (the stream ended under it, the store failed) is no end. */
        call_progress(c, (double)k, (double)n, msg);
    }
    reply_text(c, "countdown finished", 0);
}

/* ---- 2026-07-28 diagnostics (the conformance suite's server-stateless) ---- */

/* Needs sampling: the core refuses it up front (-32021) for a client that
 * did not declare it (builtin_tools_requires). */
static void run_missing_capability(struct call *c, json_t *args)
{
    (void)args;
    /* Refused here too for a session the core does not check up front:
     * a gateway's 2025 child serving a 2026-07-28 client passes it on. */
    if (!call_client_has(c, "sampling")) {
        call_fail(c, JSONRPC_MISSING_CAPABILITY, "Missing required client capability",
                  json_pack("{s:{s:{}}}", "requiredCapabilities", "sampling"));
        return;
    }
    reply_text(c, "the client declared the sampling capability", 0);
}

/* Logs twice; a stateless request that set no _meta logLevel gets none. */
static void run_logging_tool(struct call *c, json_t *args)
{
    (void)args;
    call_log(c, "info", "test_logging_tool", json_string("first log message"));
    call_log(c, "info", "test_logging_tool", json_string("second log message"));
    reply_text(c, "logged twice", 0);
}

/* Streams progress, then asks for input the 2026-07-28 way: an
 * InputRequiredResult, never an elicitation request on the stream. */
static void run_streaming_elicitation(struct call *c, json_t *args)
{
    (void)args;
    json_t *answer = json_object_get(json_object_get(call_params(c), "inputResponses"), "confirm");
    if (json_is_object(answer)) {
        const char *action = json_string_value(json_object_get(answer, "action"));
        reply_textf(c, 0, "confirmed: %s", action ? action : "(no action)");
        return;
    }
    call_progress(c, 1, 2, "asking for confirmation");
    builtin_reply(c, json_pack("{s:s, s:{s:{s:s, s:{s:s, s:{s:s, s:{s:{s:s}}}}}}}", "resultType",
                               "input_required", "inputRequests", "confirm", "method",
                               "elicitation/create", "params", "message", "Continue?",
                               "requestedSchema", "type", "object", "properties", "ok", "type",
                               "boolean"));
}

static void run_trigger_tool_change(struct call *c, json_t *args)
{
    (void)args;
    core_list_changed("tools");
    reply_text(c, "tools/list_changed sent to subscribers", 0);
}

static void run_trigger_prompt_change(struct call *c, json_t *args)
{
    (void)args;
    core_list_changed("prompts");
    reply_text(c, "prompts/list_changed sent to subscribers", 0);
}

/* Its argument also travels in the Mcp-Param-Region header (x-mcp-header):
 * the transport has checked the two agree before this runs. */
static void run_header_param(struct call *c, json_t *args)
{
    reply_textf(c, 0, "region: %s", json_string_value(json_object_get(args, "region")));
}

/* ---- the table ---- */

struct tool {
    const char *name;
    const char *title;
    const char *description;
    const char *input_schema; /* JSON text */
    void (*run)(struct call *c, json_t *args);
    int blocks;           /* sleeps, or emits before replying: must run on a worker */
    int stateless;        /* a 2026-07-28 tool: listed and served for those requests only */
    const char *requires; /* the client capability it needs, or NULL */
    int task;             /* tasks extension: 1 may run as a task, 2 only as one */
};

static const struct tool tools[] = {
    {"test_simple_text", "Simple Text", "Tests simple text content response", NO_ARGS,
     run_simple_text, 0, 0, NULL, 0},
    {"test_image_content", "Image Content", "Tests image content response", NO_ARGS,
     run_image_content, 0, 0, NULL, 0},
    {"test_audio_content", "Audio Content", "Tests audio content response", NO_ARGS,
     run_audio_content, 0, 0, NULL, 0},
    {"test_embedded_resource", "Embedded Resource", "Tests embedded resource content response",
     NO_ARGS, run_embedded_resource, 0, 0, NULL, 0},
    {"test_multiple_content_types", "Multiple Content Types",
     "Tests response with multiple content types (text, image, resource)", NO_ARGS,
     run_multiple_content_types, 0, 0, NULL, 0},
    {"test_tool_with_logging", "Tool With Logging",
     "Tests tool that emits log messages during execution", NO_ARGS, run_tool_with_logging, 1, 0,
     NULL, 0},
    {"test_tool_with_progress", "Tool With Progress",
     "Tests tool that reports progress notifications", NO_ARGS, run_tool_with_progress, 1, 0, NULL,
     0},
    {"test_error_handling", "Error Handling", "Tests error response handling", NO_ARGS,
     run_error_handling, 0, 0, NULL, 0},
    {"test_reconnection", "Reconnection",
     "Tests SSE stream disconnection and client reconnection (SEP-1699). Server will close the "
     "stream mid-call and send the result after client reconnects.",
     NO_ARGS, run_reconnection, 1, 0, NULL, 0},
    {"test_sampling", "Sampling", "Tests server-initiated sampling (LLM completion request)",
     "{\"type\":\"object\",\"properties\":{\"prompt\":{\"type\":\"string\","
     "\"description\":\"The prompt to send to the LLM\"}},\"required\":[\"prompt\"]}",
     run_sampling, 1, 0, NULL, 0},
    {"test_elicitation", "Elicitation", "Tests server-initiated elicitation (user input request)",
     "{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\","
     "\"description\":\"The message to show the user\"}},\"required\":[\"message\"]}",
     run_elicitation, 1, 0, NULL, 0},
    {"test_elicitation_sep1034_defaults", "Elicitation Defaults",
     "Tests elicitation with default values per SEP-1034", NO_ARGS, run_elicitation_sep1034, 1, 0,
     NULL, 0},
    {"test_elicitation_sep1330_enums", "Elicitation Enums",
     "Tests elicitation with enum schema improvements per SEP-1330", NO_ARGS,
     run_elicitation_sep1330, 1, 0, NULL, 0},
    {"json_schema_2020_12_tool", "JSON Schema 2020-12",
     "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
     "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\","
     "\"$defs\":{\"address\":{\"$anchor\":\"address\",\"type\":\"object\","
     "\"properties\":{\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"}}}},"
     "\"properties\":{\"name\":{\"type\":\"string\"},"
     "\"address\":{\"$ref\":\"#/$defs/address\"}},\"additionalProperties\":false,"
     /* SEP-2106: composition and conditional keywords reach the client as
      * written (the validator here ignores them; every branch accepts). */
     "\"allOf\":[{\"anyOf\":[{\"type\":\"object\"},{\"required\":[\"name\"]}]}],"
     "\"if\":{\"required\":[\"address\"]},\"then\":{\"type\":\"object\"},"
     "\"else\":{\"type\":\"object\"}}",
     run_json_schema_2020_12, 0, 0, NULL, 0},
    {"echo", "Echo", "Returns the given message as text content",
     "{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\","
     "\"description\":\"Text to echo back\"}},\"required\":[\"message\"]}",
     run_echo, 0, 0, NULL, 0},
    {"countdown", "Countdown",
     "Counts down: sends n progress notifications (progress 1..n, total n), one every "
     "interval_ms milliseconds, then returns \"countdown finished\"",
     "{\"type\":\"object\",\"properties\":{"
     "\"n\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":10000,"
     "\"description\":\"Number of progress notifications\"},"
     "\"interval_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":60000,"
     "\"description\":\"Milliseconds between notifications\"}},"
     "\"required\":[\"n\",\"interval_ms\"]}",
     run_countdown, 1, 0, NULL, 1},
    {"test_missing_capability", "Missing Capability",
     "Needs the sampling client capability; refused with -32021 without it", NO_ARGS,
     run_missing_capability, 0, 1, "sampling", 0},
    {"test_logging_tool", "Logging Tool",
     "Emits log messages, which a request receives only when its _meta sets a logLevel", NO_ARGS,
     run_logging_tool, 1, 1, NULL, 0},
    {"test_streaming_elicitation", "Streaming Elicitation",
     "Streams progress, then asks for confirmation with an InputRequiredResult", NO_ARGS,
     run_streaming_elicitation, 1, 1, NULL, 0},
    {"test_trigger_tool_change", "Trigger Tool Change",
     "Tells subscriptions/listen streams that the tool list changed", NO_ARGS,
     run_trigger_tool_change, 0, 1, NULL, 0},
    {"test_trigger_prompt_change", "Trigger Prompt Change",
     "Tells subscriptions/listen streams that the prompt list changed", NO_ARGS,
     run_trigger_prompt_change, 0, 1, NULL, 0},
    /* No run: it changes the backend's own state (builtin_tools_call). */
    {"test_trigger_resource_update", "Trigger Resource Update",
     "Changes test://watched-resource and tells its subscribers (notifications/resources/updated)",
     NO_ARGS, NULL, 0, 1, NULL, 0},
    {"test_header_param", "Header Parameter",
     "Its region argument is mirrored in the Mcp-Param-Region header (x-mcp-header)",
     "{\"type\":\"object\",\"properties\":{\"region\":{\"type\":\"string\","
     "\"x-mcp-header\":\"Region\",\"description\":\"Where to run\"}},"
     "\"required\":[\"region\"]}",
     run_header_param, 0, 1, NULL, 0},
    {"test_input_required_result_elicitation", "Input Required: Elicitation",
     "Asks the user's name with an InputRequiredResult, then greets them", NO_ARGS,
     builtin_mrtr_elicitation, 0, 1, NULL, 0},
    {"test_input_required_result_sampling", "Input Required: Sampling",
     "Asks the client's model a question with an InputRequiredResult", NO_ARGS,
     builtin_mrtr_sampling, 0, 1, NULL, 0},
    {"test_input_required_result_list_roots", "Input Required: Roots",
     "Asks for the client's roots with an InputRequiredResult", NO_ARGS, builtin_mrtr_list_roots, 0,
     1, NULL, 0},
    {"test_input_required_result_request_state", "Input Required: Request State",
     "Asks for a confirmation and carries a sealed requestState to the next round", NO_ARGS,
     builtin_mrtr_request_state, 0, 1, NULL, 0},
    {"test_input_required_result_multiple_inputs", "Input Required: Multiple Inputs",
     "Asks for a name, a sampled greeting and the roots in one round", NO_ARGS,
     builtin_mrtr_multiple_inputs, 0, 1, NULL, 0},
    {"test_input_required_result_multi_round", "Input Required: Multi Round",
     "Asks twice, carrying the first answer to the second round in the requestState", NO_ARGS,
     builtin_mrtr_multi_round, 0, 1, NULL, 0},
    {"test_input_required_result_tampered_state", "Input Required: Tampered State",
     "Like the request-state tool: a modified requestState is refused with -32602", NO_ARGS,
     builtin_mrtr_request_state, 0, 1, NULL, 0},
    {"test_input_required_result_capabilities", "Input Required: Capabilities",
     "Asks only with what the client declared (sampling, elicitation, roots)", NO_ARGS,
     builtin_mrtr_capabilities, 0, 1, NULL, 0},
    {"greet", "Greet", "Greets by name, at once (never a task)",
     "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}},"
     "\"required\":[\"name\"]}",
     builtin_task_greet, 0, 1, NULL, 0},
    {"slow_compute", "Slow Compute",
     "Works for the given seconds; a task for a client with the tasks extension",
     "{\"type\":\"object\",\"properties\":{\"seconds\":{\"type\":\"integer\","
     "\"minimum\":0,\"maximum\":3600},\"label\":{\"type\":\"string\"}},"
     "\"required\":[\"seconds\"]}",
     builtin_task_slow_compute, 1, 1, NULL, 1},
    {"failing_job", "Failing Job", "A task that completes with a tool error (tasks only)", NO_ARGS,
     builtin_task_failing_job, 1, 1, NULL, 2},
    {"protocol_error_job", "Protocol Error Job", "A task that fails with a protocol error", NO_ARGS,
     builtin_task_protocol_error_job, 1, 1, NULL, 1},
    {"confirm_delete", "Confirm Delete",
     "A task that asks for a confirmation (input_required) before it deletes",
     "{\"type\":\"object\",\"properties\":{\"filename\":{\"type\":\"string\"}}}",
     builtin_task_confirm_delete, 1, 1, NULL, 2},
    {"multi_input", "Multi Input", "A task that asks two questions at once", NO_ARGS,
     builtin_task_multi_input, 1, 1, NULL, 2},
    {"test_tool_with_task", "Tool With Task",
     "Asks for a name with an input-required result, then runs as a task", NO_ARGS,
     builtin_task_tool_with_task, 1, 1, NULL, 2},
};

#define NTOOLS (sizeof tools / sizeof tools[0])

int builtin_tools_may_block(const char *name)
{
    for (size_t i = 0; name && i < NTOOLS; i++)
        if (strcmp(tools[i].name, name) == 0)
            return tools[i].blocks;
    return 0; /* an unknown tool is answered with an error at once */
}

int builtin_stateless_call(struct call *c)
{
    return protocol_is_stateless(
        json_string_value(json_object_get(call_client_init_params(c), "protocolVersion")));
}

json_t *builtin_tools_header_params(struct builtin *b, const char *name)
{
    for (size_t i = 0; name && i < NTOOLS; i++) {
        if (strcmp(tools[i].name, name) != 0)
            continue;
        json_t *map = json_object();
        const char *param;
        json_t *spec;
        json_object_foreach(json_object_get(b->tool_schemas[i], "properties"), param, spec)
        {
            const char *header = json_string_value(json_object_get(spec, "x-mcp-header"));
            if (header)
                json_object_set_new(map, header, json_string(param));
        }
        if (json_object_size(map) == 0) {
            json_decref(map);
            map = NULL;
        }
        return map;
    }
    return NULL;
}

int builtin_tools_task_support(const char *name, json_t *params)
{
    for (size_t i = 0; name && i < NTOOLS; i++)
        if (strcmp(tools[i].name, name) == 0) {
            /* Its first round answers at once; the task starts with the
             * answers. */
            if (tools[i].run == builtin_task_tool_with_task &&
                !json_object_get(params, "inputResponses"))
                return 0;
            return tools[i].task;
        }
    return 0;
}

json_t *builtin_tools_requires(const char *name)
{
    for (size_t i = 0; name && i < NTOOLS; i++)
        if (strcmp(tools[i].name, name) == 0 && tools[i].requires)
            return json_pack("{s:{}}", tools[i].requires);
    return NULL;
}

int builtin_tools_init(struct builtin *b)
{
    size_t i;

    b->tool_schemas = calloc(NTOOLS, sizeof *b->tool_schemas);
    if (b->tool_schemas == NULL)
        return -1;
    for (i = 0; i < NTOOLS; i++) {
        b->tool_schemas[i] = json_loads(tools[i].input_schema, 0, NULL);
        if (!json_is_object(b->tool_schemas[i])) {
            builtin_tools_free(b);
            return -1;
        }
    }
    return 0;
}

void builtin_tools_free(struct builtin *b)
{
    size_t i;

    if (b->tool_schemas == NULL)
        return;
    for (i = 0; i < NTOOLS; i++)
        json_decref(b->tool_schemas[i]);
    free(b->tool_schemas);
    b->tool_schemas = NULL;
}

void builtin_tools_list(struct builtin *b, struct call *c)
{
    json_t *list = json_array();
    size_t i;

    if (builtin_check_cursor(c) != 0) {
        json_decref(list);
        return;
    }
    int stateless = builtin_stateless_call(c);
    const char *asked =
        json_string_value(json_object_get(call_client_init_params(c), "protocolVersion"));
    int experimental_tasks = asked && strcmp(asked, PROTOCOL_TASKS_EXPERIMENTAL) == 0;
    for (i = 0; list != NULL && i < NTOOLS; i++) {
        if (tools[i].stateless && !stateless)
            continue;
        json_t *t = json_pack("{s:s,s:s,s:s,s:o}", "name", tools[i].name, "title", tools[i].title,
                              "description", tools[i].description, "inputSchema",
                              json_deep_copy(b->tool_schemas[i]));
        /* The client capability it needs, for a gateway in front of this
         * server to refuse a request without it before it runs. */
        if (t && tools[i].requires)
            json_object_set_new(
                t, "_meta",
                json_pack("{s:{s:{}}}", "mcpd/requiredClientCapabilities", tools[i].requires));
        /* 2025-11-25 (experimental tasks) says which tools may run as one. */
        if (t && tools[i].task && experimental_tasks)
            json_object_set_new(
                t, "execution",
                json_pack("{s:s}", "taskSupport", tools[i].task == 2 ? "required" : "optional"));
        if (t == NULL || json_array_append_new(list, t) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    builtin_reply(c, list != NULL ? json_pack("{s:o}", "tools", list) : NULL);
}

void builtin_tools_call(struct builtin *b, struct call *c)
{
    json_t *params = call_params(c);
    json_t *name = json_object_get(params, "name");
    json_t *args = json_object_get(params, "arguments");
    char err[512];
    size_t i;

    if (!json_is_string(name)) {
        call_fail(c, -32602, "Invalid params: tools/call needs a string \"name\"", NULL);
        return;
    }
    int stateless = builtin_stateless_call(c);
    for (i = 0; i < NTOOLS; i++)
        if (strcmp(tools[i].name, json_string_value(name)) == 0 &&
            (!tools[i].stateless || stateless))
            break;
    if (i == NTOOLS) {
        char clip[200];
        builtin_failf(c, -32602, NULL, "Unknown tool: %s",
                      builtin_clip(json_string_value(name), clip, sizeof clip));
        return;
    }
    if (args != NULL && !json_is_null(args) && !json_is_object(args)) {
        call_fail(c, -32602, "Invalid params: \"arguments\" must be an object", NULL);
        return;
    }
    args = json_is_object(args) ? json_incref(args) : json_object();
    if (args == NULL) {
        call_fail(c, -32603, "Internal error", NULL);
        return;
    }
    if (builtin_schema_validate(b->tool_schemas[i], args, "arguments", err, sizeof err) != 0)
        reply_textf(c, 1, "Invalid arguments for tool %s: %s", tools[i].name, err);
    else if (tools[i].run == NULL)
        builtin_resources_trigger_update(b, c);
    else
        tools[i].run(c, args);
    json_decref(args);
}
