/* builtin_mrtr — the built-in tools and prompt that ask for input the
 * 2026-07-28 way (SEP-2322, multi-round-trip requests).
 *
 * A stateless server cannot send the client a request of its own and wait:
 * it answers with an InputRequiredResult ({resultType: "input_required",
 * inputRequests: {key: {method, params}}, requestState?}), and the client
 * calls again with params.inputResponses (one answer per key) and the
 * requestState it was given. Each round is a whole request; what a tool
 * must remember between rounds travels in the requestState, sealed by the
 * core (call_state_seal, request_state.h: tamper-evident, bound to the
 * principal, the request and the questions it went out with, valid across
 * restarts, used once). A tool that carries a state reads only the answers
 * to the questions that state asked, and keeps in its next state what it
 * has been told so far. Answers that are missing or malformed are asked for
 * again; inputResponses that is not an object, and a state that does not
 * open, are JSON-RPC errors (-32602); the same retry sent twice gets the
 * first answer again. These serve the conformance suite's
 * input-required-result-* scenarios and show how a tool asks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin_int.h"

/* ---- the pieces of a round ---- */

static json_t *elicit_request(const char *message, const char *field, const char *type)
{
    return json_pack("{s:s, s:{s:s, s:{s:s, s:{s:{s:s}}, s:[s]}}}", "method", "elicitation/create",
                     "params", "message", message, "requestedSchema", "type", "object",
                     "properties", field, "type", type, "required", field);
}

static json_t *sampling_request(const char *text, int max_tokens)
{
    return json_pack("{s:s, s:{s:[{s:s, s:{s:s, s:s}}], s:i}}", "method", "sampling/createMessage",
                     "params", "messages", "role", "user", "content", "type", "text", "text", text,
                     "maxTokens", max_tokens);
}

static json_t *roots_request(void)
{
    return json_pack("{s:s, s:{}}", "method", "roots/list", "params");
}

/* Answers with an InputRequiredResult asking for `requests` (stolen), with
 * a requestState carrying state (borrowed) when state is not NULL. */
static void ask(struct call *c, json_t *requests, json_t *state)
{
    json_t *result =
        json_pack("{s:s, s:o}", "resultType", "input_required", "inputRequests", requests);
    if (result && state) {
        char *sealed = call_state_seal(c, requests, state);
        if (!sealed) {
            json_decref(result);
            call_fail(c, -32603, "Internal error: cannot seal the requestState", NULL);
            return;
        }
        json_object_set_new(result, "requestState", json_string(sealed));
        free(sealed);
    }
    builtin_reply(c, result);
}

/* params.inputResponses: NULL when absent; ends the call with -32602 and
 * sets *bad when present but not an object (a protocol error, unlike an
 * answer that is merely missing or malformed, which is asked again). */
static json_t *responses(struct call *c, int *bad)
{
    json_t *r = json_object_get(call_params(c), "inputResponses");
    *bad = r && !json_is_object(r);
    if (*bad)
        call_fail(c, -32602, "Invalid params: inputResponses must be an object", NULL);
    return *bad ? NULL : r;
}

/* The accepted elicitation's string field, or NULL. */
static const char *elicited(json_t *answers, const char *key, const char *field)
{
    json_t *a = json_object_get(answers, key);
    const char *action = json_string_value(json_object_get(a, "action"));
    if (!action || strcmp(action, "accept") != 0)
        return NULL;
    return json_string_value(json_object_get(json_object_get(a, "content"), field));
}

/* The text of a sampling answer (CreateMessageResult), or NULL. */
static const char *sampled(json_t *answers, const char *key)
{
    json_t *content = json_object_get(json_object_get(answers, key), "content");
    if (json_is_array(content))
        content = json_array_get(content, 0);
    return json_string_value(json_object_get(content, "text"));
}

/* The roots of a roots/list answer, as "uri, uri", or NULL. */
static char *roots_text(json_t *answers, const char *key)
{
    json_t *roots = json_object_get(json_object_get(answers, key), "roots");
    if (!json_is_array(roots))
        return NULL;
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    size_t i;
    json_t *r;
    json_array_foreach(roots, i, r)
    {
        const char *uri = json_string_value(json_object_get(r, "uri"));
        fprintf(f, "%s%s", i ? ", " : "", uri ? uri : "(no uri)");
    }
    fclose(f);
    return out;
}

/* Where a tool that carries a requestState stands: what its state carried
 * (NULL: none, the first round) and the answers to the questions that state
 * asked (NULL without a state: a first round reads no answers). */
struct round {
    json_t *data, *answers;
};

/* Opens params.requestState into *r (round_end it): 0, or -1 after ending
 * the call, with -32602 when inputResponses is not an object or the state
 * does not open (-32603 when the store failed), or with the result that an earlier use of the state
 * with the same answers ended with (the same retry, sent again). */
static int round_begin(struct call *c, struct round *r)
{
    r->data = r->answers = NULL;
    int bad;
    responses(c, &bad);
    json_t *s = json_object_get(call_params(c), "requestState");
    if (bad || !s)
        return bad ? -1 : 0;
    const char *why = "Invalid params: requestState must be a string";
    json_t *data = NULL, *answers = NULL;
    int rc =
        json_is_string(s) ? call_state_open(c, json_string_value(s), &data, &answers, &why) : -1;
    if (rc == 1)
        builtin_reply(c, data);
    else if (rc != 0) /* the store failing is not the client's fault */
        call_fail(c, strncmp(why, "Internal error", 14) == 0 ? -32603 : -32602, why, NULL);
    if (rc != 0)
        return -1;
    r->data = data;
    r->answers = answers;
    return 0;
}

static void round_end(struct round *r)
{
    json_decref(r->data);
    json_decref(r->answers);
}

/* ---- the tools ---- */

void builtin_mrtr_elicitation(struct call *c, json_t *args)
{
    (void)args;
    int bad;
    json_t *answers = responses(c, &bad);
    if (bad)
        return;
    const char *name = elicited(answers, "user_name", "name");
    if (!name) {
        ask(c,
            json_pack("{s:o}", "user_name", elicit_request("What is your name?", "name", "string")),
            NULL);
        return;
    }
    char text[300];
    snprintf(text, sizeof text, "Hello, %.200s!", name);
    builtin_reply(c, builtin_text_result(text, 0));
}

void builtin_mrtr_sampling(struct call *c, json_t *args)
{
    (void)args;
    int bad;
    json_t *answers = responses(c, &bad);
    if (bad)
        return;
    const char *said = sampled(answers, "capital_question");
    if (!said) {
        ask(c,
            json_pack("{s:o}", "capital_question",
                      sampling_request("What is the capital of France?", 100)),
            NULL);
        return;
    }
    char text[600];
    snprintf(text, sizeof text, "The model answered: %.500s", said);
    builtin_reply(c, builtin_text_result(text, 0));
}

void builtin_mrtr_list_roots(struct call *c, json_t *args)
{
    (void)args;
    int bad;
    json_t *answers = responses(c, &bad);
    if (bad)
        return;
    char *roots = roots_text(answers, "client_roots");
    if (!roots) {
        ask(c, json_pack("{s:o}", "client_roots", roots_request()), NULL);
        return;
    }
    char text[1200];
    snprintf(text, sizeof text, "Client roots: %.1100s", roots);
    free(roots);
    builtin_reply(c, builtin_text_result(text, 0));
}

/* The round-trip of a sealed state: used by the request-state and the
 * tampered-state tools alike (the latter's point is the refusal). */
void builtin_mrtr_request_state(struct call *c, json_t *args)
{
    (void)args;
    struct round r;
    if (round_begin(c, &r) != 0)
        return;
    json_t *ok =
        json_object_get(json_object_get(json_object_get(r.answers, "confirm"), "content"), "ok");
    const char *round = json_string_value(json_object_get(r.data, "round"));
    if (!json_is_boolean(ok) || !round || strcmp(round, "confirm") != 0) {
        json_t *st = json_pack("{s:s}", "round", "confirm");
        ask(c, json_pack("{s:o}", "confirm", elicit_request("Please confirm", "ok", "boolean")),
            st);
        json_decref(st);
        round_end(&r);
        return;
    }
    const char *text = json_is_true(ok) ? "state-ok: confirmed" : "state-ok: declined";
    round_end(&r);
    builtin_reply(c, builtin_text_result(text, 0));
}

/* Asks for a name, a greeting and the roots, in as many rounds as the
 * client takes: the answers so far travel in the state, and each round
 * asks only for what is still missing. */
void builtin_mrtr_multiple_inputs(struct call *c, json_t *args)
{
    (void)args;
    struct round r;
    if (round_begin(c, &r) != 0)
        return;
    json_t *got = json_deep_copy(json_object_get(r.data, "got"));
    if (!json_is_object(got)) {
        json_decref(got);
        got = json_object();
    }
    json_object_update(got, r.answers);
    round_end(&r);
    const char *name = elicited(got, "user_name", "name");
    const char *greeting = sampled(got, "greeting");
    char *roots = roots_text(got, "client_roots");
    if (!name || !greeting || !roots) {
        json_t *requests = json_object();
        if (!name)
            json_object_set_new(requests, "user_name",
                                elicit_request("What is your name?", "name", "string"));
        if (!greeting)
            json_object_set_new(requests, "greeting", sampling_request("Generate a greeting", 50));
        if (!roots)
            json_object_set_new(requests, "client_roots", roots_request());
        json_t *st = json_pack("{s:s, s:o}", "round", "all", "got", got);
        ask(c, requests, st);
        json_decref(st);
        free(roots);
        return;
    }
    char text[1500];
    snprintf(text, sizeof text, "%.200s, %.200s! Your roots: %.1000s", greeting, name, roots);
    free(roots);
    json_decref(got);
    builtin_reply(c, builtin_text_result(text, 0));
}

void builtin_mrtr_multi_round(struct call *c, json_t *args)
{
    (void)args;
    struct round r;
    if (round_begin(c, &r) != 0)
        return;
    const char *round = json_string_value(json_object_get(r.data, "round"));
    int second = round && strcmp(round, "2") == 0;
    /* The name from round 1 travels in the state of round 2. */
    const char *name = second ? json_string_value(json_object_get(r.data, "name"))
                       : round && strcmp(round, "1") == 0 ? elicited(r.answers, "step1", "name")
                                                          : NULL;
    const char *color = second ? elicited(r.answers, "step2", "color") : NULL;
    if (second && name && color) {
        char text[400];
        snprintf(text, sizeof text, "%.150s's favorite color is %.150s", name, color);
        builtin_reply(c, builtin_text_result(text, 0));
    } else if (name) {
        json_t *st = json_pack("{s:s, s:s}", "round", "2", "name", name);
        ask(c,
            json_pack("{s:o}", "step2",
                      elicit_request("Step 2: What is your favorite color?", "color", "string")),
            st);
        json_decref(st);
    } else {
        json_t *st = json_pack("{s:s}", "round", "1");
        ask(c,
            json_pack("{s:o}", "step1",
                      elicit_request("Step 1: What is your name?", "name", "string")),
            st);
        json_decref(st);
    }
    round_end(&r);
}

void builtin_mrtr_capabilities(struct call *c, json_t *args)
{
    (void)args;
    int bad;
    json_t *answers = responses(c, &bad);
    if (bad)
        return;
    if (json_object_size(answers) > 0) {
        builtin_reply(c, builtin_text_result("thanks for the input", 0));
        return;
    }
    /* Only what the client said it can answer. */
    json_t *requests = json_object();
    if (call_client_has(c, "sampling"))
        json_object_set_new(requests, "summary", sampling_request("Summarize the weather", 50));
    if (call_client_has(c, "elicitation"))
        json_object_set_new(requests, "user_name",
                            elicit_request("What is your name?", "name", "string"));
    if (call_client_has(c, "roots"))
        json_object_set_new(requests, "client_roots", roots_request());
    if (json_object_size(requests) == 0) {
        json_decref(requests);
        builtin_reply(c, builtin_text_result(
                             "the client declared no capability to ask with; nothing asked", 0));
        return;
    }
    ask(c, requests, NULL);
}

/* prompts/get of test_input_required_result_prompt. */
void builtin_mrtr_prompt(struct call *c)
{
    int bad;
    json_t *answers = responses(c, &bad);
    if (bad)
        return;
    const char *context = elicited(answers, "user_context", "context");
    if (!context) {
        ask(c,
            json_pack("{s:o}", "user_context",
                      elicit_request("What context should the prompt use?", "context", "string")),
            NULL);
        return;
    }
    char text[600];
    snprintf(text, sizeof text, "Answer with this context in mind: %.500s", context);
    builtin_reply(c, json_pack("{s:s, s:[{s:s, s:{s:s, s:s}}]}", "description",
                               "A prompt built from the context the user gave", "messages", "role",
                               "user", "content", "type", "text", "text", text));
}

/* ---- the tasks extension's fixtures (2026-07-28) ---- */

void builtin_task_greet(struct call *c, json_t *args)
{
    char text[300];
    snprintf(text, sizeof text, "Hello, %.200s!", json_string_value(json_object_get(args, "name")));
    builtin_reply(c, builtin_text_result(text, 0));
}

void builtin_task_slow_compute(struct call *c, json_t *args)
{
    json_int_t seconds = json_integer_value(json_object_get(args, "seconds"));
    const char *label = json_string_value(json_object_get(args, "label"));
    if (call_sleep(c, (int)(seconds * 1000)) != 0) {
        call_fail(c, -32800, "Request cancelled", NULL);
        return;
    }
    char text[300];
    snprintf(text, sizeof text, "computed %.200s in %lld s", label ? label : "the answer",
             (long long)seconds);
    builtin_reply(c, builtin_text_result(text, 0));
}

void builtin_task_failing_job(struct call *c, json_t *args)
{
    (void)args;
    if (call_sleep(c, 1000) != 0) {
        call_fail(c, -32800, "Request cancelled", NULL);
        return;
    }
    builtin_reply(c, builtin_text_result("the job failed: nothing to process", 1));
}

void builtin_task_protocol_error_job(struct call *c, json_t *args)
{
    (void)args;
    call_sleep(c, 200);
    call_fail(c, -32603, "Internal error: the job crashed", NULL);
}

void builtin_task_confirm_delete(struct call *c, json_t *args)
{
    const char *file = json_string_value(json_object_get(args, "filename"));
    char message[300];
    snprintf(message, sizeof message, "Delete %.200s?", file ? file : "the file");
    json_t *answer = NULL;
    json_t *req = elicit_request(message, "confirm", "boolean");
    int rc =
        call_request_client(c, "elicitation/create", json_incref(json_object_get(req, "params")),
                            60 * 60 * 1000, &answer);
    json_decref(req);
    if (rc != 0) {
        json_decref(answer);
        if (call_cancelled(c))
            call_fail(c, -32800, "Request cancelled", NULL);
        else
            builtin_reply(c, builtin_text_result("no confirmation arrived", 1));
        return;
    }
    int yes = json_is_true(json_object_get(json_object_get(answer, "content"), "confirm"));
    json_decref(answer);
    snprintf(message, sizeof message, "%s %.200s", yes ? "deleted" : "kept",
             file ? file : "the file");
    builtin_reply(c, builtin_text_result(message, 0));
}

void builtin_task_multi_input(struct call *c, json_t *args)
{
    (void)args;
    json_t *requests =
        json_pack("{s:o, s:o}", "name", elicit_request("Your name?", "name", "string"), "color",
                  elicit_request("Your favorite color?", "color", "string"));
    json_t *answers = NULL;
    int rc = call_request_client_all(c, requests, 60 * 60 * 1000, &answers);
    json_decref(requests);
    if (rc != 0) {
        if (call_cancelled(c))
            call_fail(c, -32800, "Request cancelled", NULL);
        else
            builtin_reply(c, builtin_text_result("not every answer arrived", 1));
        return;
    }
    char text[400];
    snprintf(text, sizeof text, "%.150s likes %.150s",
             json_string_value(json_object_get(
                 json_object_get(json_object_get(answers, "name"), "content"), "name")),
             json_string_value(json_object_get(
                 json_object_get(json_object_get(answers, "color"), "content"), "color")));
    json_decref(answers);
    builtin_reply(c, builtin_text_result(text, 0));
}

/* Input first (round 1, an InputRequiredResult), then a task (round 2). */
void builtin_task_tool_with_task(struct call *c, json_t *args)
{
    (void)args;
    struct round r;
    if (round_begin(c, &r) != 0)
        return;
    const char *name = r.data ? elicited(r.answers, "user_name", "name") : NULL;
    if (!name) {
        json_t *st = json_pack("{s:s}", "round", "1");
        ask(c,
            json_pack("{s:o}", "user_name", elicit_request("What is your name?", "name", "string")),
            st);
        json_decref(st);
        round_end(&r);
        return;
    }
    call_sleep(c, 100);
    char text[300];
    snprintf(text, sizeof text, "Hello, %.200s! (from a task)", name);
    round_end(&r);
    builtin_reply(c, builtin_text_result(text, 0));
}
