/* test_media_type — Accept and Content-Type per RFC 9110 (media_type.c,
 * pure), table-driven: list whitespace, q-values (q=0 refuses), wildcards
 * and their precedence, parameters, quoted strings, case, and malformed
 * elements. */
#include "check.h"
#include "media_type.h"

#define JSON "application/json"
#define SSE "text/event-stream"

struct accept_case {
    const char *accept;
    int json, sse; /* expected media_type_accepts for each */
};

static const struct accept_case accept_cases[] = {
    {"application/json, text/event-stream", 1, 1},
    {"application/json , text/event-stream", 1, 1}, /* space before the comma */
    {"application/json,text/event-stream", 1, 1},
    {"  application/json\t,\ttext/event-stream  ", 1, 1},
    {",, application/json ,, text/event-stream ,", 1, 1}, /* empty list elements */
    {"APPLICATION/JSON, Text/Event-Stream", 1, 1},
    {"application/json", 1, 0},
    {"text/event-stream", 0, 1},
    {"", 0, 0},
    {"*/*", 1, 1},
    {"*/*;q=0.1", 1, 1},
    {"application/*, text/*", 1, 1},
    {"application/*", 1, 0},
    {"*/json, */event-stream", 0, 0}, /* not media ranges */
    {"application/json;q=0, text/event-stream", 0, 1},
    {"application/json; q=0.000, text/event-stream", 0, 1},
    {"application/json;Q=0, */*", 0, 1}, /* the specific range decides */
    {"*/*, application/json;q=0", 0, 1},
    {"application/*;q=0, application/json", 1, 0},
    {"text/*;q=0, */*", 1, 0},
    {"*/*;q=0", 0, 0},
    {"application/json;q=0.9, text/event-stream;q=0.8", 1, 1},
    {"application/json;q=1.000, text/event-stream;q=0.001", 1, 1},
    {"application/json;q=1.5, text/event-stream", 0, 1}, /* bad q: element ignored */
    {"application/json;q=2, text/event-stream", 0, 1},
    {"application/json;q=0.0001, text/event-stream", 0, 1},
    {"application/json;q=-1, text/event-stream", 0, 1},
    {"application/json;q=, text/event-stream", 0, 1},
    {"application/json;q, text/event-stream", 0, 1},
    {"application/json;charset=utf-8, text/event-stream", 1, 1},
    {"application/json ; charset=\"utf-8\" ; q=0.5, text/event-stream", 1, 1},
    {"application/json;x=\"a,b;q=0\", text/event-stream", 1, 1}, /* quoted ',' and ';' */
    {"application/json;x=\"a\\\"b\", text/event-stream", 1, 1},
    {"application/json;x=\"unclosed, text/event-stream", 0, 0},
    {"application/json;;, text/event-stream;", 1, 1},
    {"application/json text/event-stream", 0, 0},
    {"application/jsonx, text/event-streams", 0, 0},
    {"application/, /json, /", 0, 0},
    {"application/json;q=0, application/json;q=0.5, text/event-stream", 1, 1},
    {"application\x01/json, text/event-stream", 0, 1},
};

struct ctype_case {
    const char *ctype;
    int json;
};

static const struct ctype_case ctype_cases[] = {
    {"application/json", 1},
    {"Application/JSON", 1},
    {"application/json; charset=utf-8", 1},
    {"application/json;charset=\"UTF-8\"", 1},
    {" application/json ", 1},
    {"application/json;", 1},
    {"application/json;q=abc", 1}, /* q is no weight here */
    {"application/jsonp", 0},
    {"application/json-seq", 0},
    {"application/*", 0},
    {"text/plain", 0},
    {"application/json charset=utf-8", 0},
    {"application/json;charset", 0},
    {"application/json;charset=\"utf-8", 0},
    {"", 0},
};

int main(void)
{
    for (size_t i = 0; i < sizeof accept_cases / sizeof accept_cases[0]; i++) {
        const struct accept_case *c = &accept_cases[i];
        int json = media_type_accepts(c->accept, JSON), sse = media_type_accepts(c->accept, SSE);
        if (!check_record(json == c->json && sse == c->sse, __FILE__, __LINE__, c->accept))
            printf("     Accept \"%s\": json %d sse %d, want %d %d\n", c->accept, json, sse,
                   c->json, c->sse);
    }
    CHECK_INT(media_type_accepts(NULL, JSON), 0);
    for (size_t i = 0; i < sizeof ctype_cases / sizeof ctype_cases[0]; i++) {
        const struct ctype_case *c = &ctype_cases[i];
        int got = media_type_is(c->ctype, JSON);
        if (!check_record(got == c->json, __FILE__, __LINE__, c->ctype))
            printf("     Content-Type \"%s\": %d, want %d\n", c->ctype, got, c->json);
    }
    CHECK_INT(media_type_is(NULL, JSON), 0);
    return check_summary();
}
