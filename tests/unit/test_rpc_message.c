/* test_rpc_message — the id of a message too large to parse whole, read
 * from its first bytes only (bridge/rpc_message.c): found wherever it sits
 * at the top level, never taken from inside params, and never guessed from
 * a prefix that cuts it short. And the error the bridge answers with is one
 * even when its message quotes bytes that are not UTF-8. */
#include "check.h"
#include "rpc_message.h"

#include <stdlib.h>

/* The id found in the first len bytes of text, as compact JSON, or NULL. */
static char *id_of(const char *text, size_t len)
{
    json_t *id = rpc_id_from_prefix(text, len);
    char *s = id ? json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    json_decref(id);
    return s;
}

static void check_id(const char *text, size_t len, const char *want, int line)
{
    char *got = id_of(text, len);
    int ok = want ? got && strcmp(got, want) == 0 : got == NULL;
    check_record(ok, __FILE__, line, text);
    if (!ok)
        printf("     got %s, want %s\n", got ? got : "(none)", want ? want : "(none)");
    free(got);
}

#define ID(text, want) check_id(text, strlen(text), want, __LINE__)

int main(void)
{
    ID("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"a\":\"yyy", "5");
    ID(" \r\n{ \"id\" : \"big-5\" , \"params\":{", "\"big-5\"");
    ID("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":-12,\"params\":", "-12");
    /* after values of every kind, with brackets and quotes inside strings */
    ID("{\"a\":{\"id\":1,\"b\":[1,{\"c\":\"}\\\"]\"}]},\"n\":null,\"t\":true,\"f\":2.5e3,\"id\":7,",
       "7");
    /* not the id: nested, cut short, or of a kind JSON-RPC does not allow */
    ID("{\"params\":{\"id\":3,\"message\":\"yyyy", NULL);
    ID("{\"jsonrpc\":\"2.0\",\"id\":12", NULL);
    ID("{\"id\":\"abc", NULL);
    ID("{\"id\":null,\"method\":\"x\"", NULL);
    ID("{\"id\":1.5,\"method\":\"x\"", NULL);
    ID("{\"id\":{\"x\":1},\"method\":\"x\"", NULL);
    ID("[{\"id\":1}]", NULL);
    ID("garbage \"id\":1,", NULL);
    ID("", NULL);
    /* the bytes given, not the string: the id lies past the prefix */
    const char *t = "{\"method\":\"x\",\"id\":9,\"params\":{}}";
    check_id(t, 14, NULL, __LINE__);
    check_id(t, strlen(t), "9", __LINE__);

    /* a server's error body cut mid-character, or not text at all */
    json_t *id = json_integer(4);
    char *reply = rpc_error_reply(id, -32000, "HTTP 500 (body: x\xc3\xa9\xc3 \xff)");
    CHECK_STR(reply, "{\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":-32000,"
                     "\"message\":\"HTTP 500 (body: x\xc3\xa9\xef\xbf\xbd \xef\xbf\xbd)\"}}");
    free(reply);
    json_decref(id);
    return check_summary();
}
