/* test_log — the event log's stderr line (log.c): whatever text a client
 * puts in a session id or a message, one call writes exactly one line
 * whose fields parse as logfmt, in order ts, level, session, event, msg,
 * and read back as the original bytes; a plain token stays bare; the sink
 * gets the original text, as UTF-8. stderr is sent to a temporary file and read back. */
#include "check.h"
#include "log.h"

#include <unistd.h>

/* Everything written to stderr since the last call. */
static size_t take(char *buf, size_t cap)
{
    fflush(stderr);
    ssize_t n = pread(STDERR_FILENO, buf, cap - 1, 0);
    if (n < 0 || ftruncate(STDERR_FILENO, 0) != 0 || lseek(STDERR_FILENO, 0, SEEK_SET) != 0)
        n = 0;
    buf[n] = '\0';
    return (size_t)n;
}

struct field {
    char key[16];
    char val[8192];
    size_t len;
    int quoted;
};

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A strict logfmt reader: key=bare or key="quoted" separated by one space,
 * bare values of [A-Za-z0-9._:/@+-] only, and in quotes only the escapes
 * log.c writes. Returns the number of fields, -1 when the line is not
 * logfmt. */
static int parse(const char *line, size_t len, struct field *f, int max)
{
    size_t i = 0;
    int nf = 0;
    while (i < len) {
        if (nf == max)
            return -1;
        struct field *x = &f[nf];
        size_t k = 0;
        while (i < len && line[i] != '=' && line[i] != ' ' && line[i] != '"') {
            if (k + 1 >= sizeof x->key)
                return -1;
            x->key[k++] = line[i++];
        }
        x->key[k] = '\0';
        if (k == 0 || i == len || line[i] != '=')
            return -1;
        i++;
        x->len = 0;
        x->quoted = i < len && line[i] == '"';
        if (x->quoted) {
            for (i++;; i++) {
                if (i == len)
                    return -1;
                unsigned char c = (unsigned char)line[i];
                if (c == '"')
                    break;
                if (c < 0x20 || c == 0x7f)
                    return -1;
                if (c == '\\') {
                    char e = i + 1 < len ? line[++i] : 0;
                    if (e == 'n')
                        c = '\n';
                    else if (e == 'r')
                        c = '\r';
                    else if (e == 't')
                        c = '\t';
                    else if (e == '"' || e == '\\')
                        c = (unsigned char)e;
                    else if (e == 'x' && i + 2 < len && hexval(line[i + 1]) >= 0 &&
                             hexval(line[i + 2]) >= 0) {
                        c = (unsigned char)(hexval(line[i + 1]) * 16 + hexval(line[i + 2]));
                        i += 2;
                    } else
                        return -1;
                }
                x->val[x->len++] = (char)c;
            }
            i++;
        } else {
            while (i < len && line[i] != ' ') {
                char c = line[i++];
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/@+-",
                            c))
                    return -1;
                x->val[x->len++] = c;
            }
            if (x->len == 0)
                return -1;
        }
        x->val[x->len] = '\0';
        nf++;
        if (i < len && line[i++] != ' ')
            return -1;
    }
    return nf;
}

static struct field fields[8];

/* Checks that out is one line of the five fields; returns 1 when it is. */
static int one_line(const char *out, size_t n, const char *what)
{
    int ok = n > 0 && out[n - 1] == '\n' && memchr(out, '\n', n) == out + n - 1;
    if (!check_record(ok, __FILE__, __LINE__, what)) {
        printf("     not one line: %s", out);
        return 0;
    }
    int nf = parse(out, n - 1, fields, 8);
    static const char *const keys[] = {"ts", "level", "session", "event", "msg"};
    ok = nf == 5;
    for (int i = 0; ok && i < 5; i++)
        ok = strcmp(fields[i].key, keys[i]) == 0;
    if (!check_record(ok, __FILE__, __LINE__, what))
        printf("     not ts, level, session, event, msg (%d fields): %s", nf, out);
    return ok;
}

/* The session and the message both come back byte for byte. */
static void round_trip(const char *text, const char *what)
{
    char out[16384];
    log_event(LOG_WARN, text, "request", "%s", text);
    size_t n = take(out, sizeof out);
    if (!one_line(out, n, what))
        return;
    CHECK_STR(fields[1].val, "warn");
    CHECK_STR(fields[3].val, "request");
    if (!check_record(strcmp(fields[2].val, text) == 0, __FILE__, __LINE__, what))
        printf("     session did not read back: %s", out);
    if (!check_record(strcmp(fields[4].val, text) == 0, __FILE__, __LINE__, what))
        printf("     msg did not read back: %s", out);
}

static char sink_session[256], sink_row[256];
static int sink_calls;

static void sink(void *ud, int64_t ts_ms, const char *level, const char *session, const char *row)
{
    (void)ud;
    (void)ts_ms;
    (void)level;
    sink_calls++;
    snprintf(sink_session, sizeof sink_session, "%s", session ? session : "(null)");
    snprintf(sink_row, sizeof sink_row, "%s", row);
}

int main(void)
{
    FILE *capture = tmpfile();
    if (!capture || dup2(fileno(capture), STDERR_FILENO) < 0) {
        printf("cannot capture stderr\n");
        return 1;
    }
    setvbuf(stderr, NULL, _IONBF, 0);
    log_set_level(LOG_DEBUG);
    char out[16384];
    size_t n;

    /* A header value built to forge fields stays inside session. */
    const char *forged = "x level=error event=token_revoked_used msg=\"forged line\"";
    log_event(LOG_INFO, forged, "request", "POST /mcp status=404");
    n = take(out, sizeof out);
    if (one_line(out, n, "forged session")) {
        CHECK_STR(fields[1].val, "info");
        CHECK_STR(fields[2].val, forged);
        CHECK_STR(fields[3].val, "request");
        CHECK_STR(fields[4].val, "POST /mcp status=404");
    }
    CHECK(strstr(out, " session=\"x level=error event=token_revoked_used msg=\\\"forged line\\\"\" "
                      "event=request ") != NULL);

    /* A plain token is written bare, as before; no session is a bare "-". */
    log_event(LOG_INFO, "0123456789abcdef0123456789abcdef", "session_created", "protocol=%s",
              "2025-11-25");
    n = take(out, sizeof out);
    CHECK(strstr(out, " level=info session=0123456789abcdef0123456789abcdef "
                      "event=session_created msg=\"protocol=2025-11-25\"\n") != NULL);
    log_event(LOG_INFO, "a.b_c:d/e@f+g-h", "e", NULL);
    n = take(out, sizeof out);
    CHECK(strstr(out, " session=a.b_c:d/e@f+g-h event=e msg=\"\"\n") != NULL);
    log_event(LOG_INFO, NULL, "listening", "x");
    n = take(out, sizeof out);
    CHECK(strstr(out, " session=- event=listening ") != NULL);
    log_event(LOG_INFO, "-", "e", "x");
    n = take(out, sizeof out);
    CHECK(strstr(out, " session=\"-\" event=e ") != NULL);
    log_event(LOG_INFO, "", "e", "x");
    n = take(out, sizeof out);
    CHECK(strstr(out, " session=\"\" event=e ") != NULL);

    /* log_quote, for mcp-bridge's own lines: the same escaping, cut short
     * at cap and never inside an escape. */
    char q[32];
    CHECK_INT(log_quote(q, sizeof q, "a\"b\n\xff\xc3\xa9", 7), 14);
    CHECK_STR(q, "\"a\\\"b\\n\\xff\xc3\xa9\"");
    CHECK_INT(log_quote(q, 8, "\n\n\n\n", 4), 6);
    CHECK_STR(q, "\"\\n\\n\"");
    CHECK_INT(log_quote(q, 2, "x", 1), 0);
    CHECK_STR(q, "");
    /* log_value: bare for a plain token, quoted otherwise, as session= is. */
    CHECK_INT(log_value(q, sizeof q, "tools/call"), 10);
    CHECK_STR(q, "tools/call");
    CHECK_INT(log_value(q, sizeof q, "a status=1"), 12);
    CHECK_STR(q, "\"a status=1\"");
    CHECK_INT(log_value(q, sizeof q, "-"), 3);
    CHECK_STR(q, "\"-\"");
    /* log_enabled follows the level. */
    CHECK(log_enabled(LOG_DEBUG));
    log_set_level(LOG_ERROR);
    CHECK(!log_enabled(LOG_INFO) && log_enabled(LOG_ERROR));
    log_set_level(LOG_DEBUG);

    /* Separators, quotes, escapes, line breaks, control bytes, bytes that
     * are not UTF-8 and valid UTF-8 all read back. */
    static const char *const nasty[] = {
        "a b",
        "k=v",
        "\"",
        "\\",
        "\\\"",
        "line\nts=0 level=error session=- event=token_revoked_used msg=\"x\"",
        "cr\rlf\n\ttab",
        "\x01\x02\x1b[31m\x7f",
        "\xff\xfe",
        "\xc0\xaf",     /* overlong '/' */
        "\xed\xa0\x80", /* a surrogate */
        "\xe2\x82",     /* cut short */
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
        "nel\xc2\x85here",              /* U+0085 */
        "ls\xe2\x80\xa8ps\xe2\x80\xa9", /* U+2028, U+2029 */
        "=",
        " ",
    };
    for (size_t i = 0; i < sizeof nasty / sizeof nasty[0]; i++)
        round_trip(nasty[i], nasty[i]);

    /* Valid UTF-8 stays as it is; what is not UTF-8 is \xNN. */
    log_event(LOG_INFO, NULL, "e", "caf\xc3\xa9 \xff");
    n = take(out, sizeof out);
    CHECK(strstr(out, "msg=\"caf\xc3\xa9 \\xff\"\n") != NULL);
    log_event(LOG_INFO, NULL, "e", "a\nb\"c\\d\x01");
    n = take(out, sizeof out);
    CHECK(strstr(out, "msg=\"a\\nb\\\"c\\\\d\\x01\"\n") != NULL);

    /* Long values are cut, but the line stays one line of five fields: a
     * session of line breaks, and a message escaped in full. */
    char big[4000];
    memset(big, '\n', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    log_event(LOG_INFO, big, "e", "%s", big);
    n = take(out, sizeof out);
    if (one_line(out, n, "long session and msg")) {
        CHECK(fields[2].len > 0 && fields[2].len < sizeof big - 1);
        CHECK(fields[4].len > 0 && fields[4].len < sizeof big - 1);
        CHECK_STR(fields[3].val, "e");
    }
    char ff[1024];
    memset(ff, 0xff, sizeof ff - 1);
    ff[sizeof ff - 1] = '\0';
    log_event(LOG_INFO, "s", "e", "%s", ff);
    n = take(out, sizeof out);
    if (one_line(out, n, "msg of 1023 escaped bytes"))
        CHECK_STR(fields[4].val, ff);

    /* The sink, and so the logs table, gets the text as it was, unescaped,
     * except for bytes that are not UTF-8: a TEXT column read back into
     * JSON (mcp-admin logs --json) must be UTF-8. */
    log_set_sink(sink, NULL);
    log_event(LOG_INFO, forged, "request", "a\nb \xff");
    n = take(out, sizeof out);
    one_line(out, n, "with a sink");
    CHECK_INT(sink_calls, 1);
    CHECK_STR(sink_session, forged);
    CHECK_STR(sink_row, "request a\nb \xef\xbf\xbd");
    log_event(LOG_INFO, "id\xc3", "request", "cut \xe2\x82");
    take(out, sizeof out);
    CHECK_INT(sink_calls, 2);
    CHECK_STR(sink_session, "id\xef\xbf\xbd");
    CHECK_STR(sink_row, "request cut \xef\xbf\xbd\xef\xbf\xbd");
    log_local(LOG_INFO, forged, "local", "x");
    n = take(out, sizeof out);
    one_line(out, n, "log_local");
    CHECK_INT(sink_calls, 2);
    log_set_sink(NULL, NULL);

    /* Below the level: nothing at all. */
    log_set_level(LOG_WARN);
    log_event(LOG_INFO, forged, "e", "x");
    CHECK_INT(take(out, sizeof out), 0);

    return check_summary();
}
