/* log — see log.h. */
#include "log.h"
#include "clock.h"
#include "utf8.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Atomic int min_level = LOG_INFO;
/* Read through one pointer, so a logging thread never pairs a sink with
 * another sink's ud. Slots alternate: the one being replaced may still be
 * in use. */
struct sink {
    log_sink_fn fn;
    void *ud;
};
static struct sink sinks[2];
static struct sink *_Atomic sink;

void log_set_level(enum log_level min)
{
    min_level = min;
}

int log_enabled(enum log_level level)
{
    return (int)level >= min_level;
}

void log_set_sink(log_sink_fn fn, void *ud)
{
    if (!fn) {
        sink = NULL;
        return;
    }
    struct sink *next = atomic_load(&sink) == &sinks[0] ? &sinks[1] : &sinks[0];
    next->fn = fn;
    next->ud = ud;
    sink = next;
}

/* What a field may hold bare: nothing a logfmt reader could take for a
 * separator, a quote, an escape or a key's '='. */
static int token_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '/' || c == '@' || c == '+' || c == '-';
}

/* Valid UTF-8 that some readers still split lines on (Python's
 * splitlines, JavaScript): C1 controls, NEL among them, and U+2028/U+2029. */
static int breaks_lines(const unsigned char *s, size_t k)
{
    return (k == 2 && s[0] == 0xc2 && s[1] < 0xa0) ||
           (k == 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9));
}

/* The longest escape of one unit: a 3-byte sequence as \xNN each. */
#define ESCAPE_MAX 12

/* The unit (a byte, or a whole UTF-8 sequence) that starts s, n bytes
 * left, as it goes between quotes, into e; returns the bytes it took from
 * s. Called for every byte that is not printable ASCII, '"' or '\\'. Valid
 * UTF-8 stays as it is; every other byte is escaped, so that nothing can
 * end the value, the field or the line, and the value reads back as
 * exactly these bytes. */
static size_t escape_unit(const unsigned char *s, size_t n, char *e, size_t *elen)
{
    static const char hex[] = "0123456789abcdef";
    size_t k = 1;
    if (s[0] >= 0x80) {
        k = utf8_seq_len(s, n);
        if (k && !breaks_lines(s, k)) {
            memcpy(e, s, k);
            *elen = k;
            return k;
        }
        if (!k)
            k = 1;
    }
    const char *two = s[0] == '"'    ? "\\\""
                      : s[0] == '\\' ? "\\\\"
                      : s[0] == '\n' ? "\\n"
                      : s[0] == '\r' ? "\\r"
                      : s[0] == '\t' ? "\\t"
                                     : NULL;
    if (two) {
        memcpy(e, two, 2);
        *elen = 2;
        return 1;
    }
    for (size_t i = 0; i < k; i++) {
        e[4 * i] = '\\';
        e[4 * i + 1] = 'x';
        e[4 * i + 2] = hex[s[i] >> 4];
        e[4 * i + 3] = hex[s[i] & 15];
    }
    *elen = 4 * k;
    return k;
}

/* Output budgets: each field is cut to its own, so that a long one cannot
 * crowd out the ones after it, and the line buffer has room for all of
 * them. msg's fits the whole detail even when every byte is escaped. */
#define DETAIL_MAX 1024
#define SESSION_OUT 512
#define EVENT_OUT 128
#define MSG_OUT (4 * DETAIL_MAX + 2)
#define FIXED_OUT 96 /* ts, level and the keys: about 60 */

struct line {
    char buf[FIXED_OUT + SESSION_OUT + EVENT_OUT + MSG_OUT];
    size_t n;
};

static void put(struct line *l, const char *s)
{
    size_t k = strlen(s);
    memcpy(l->buf + l->n, s, k);
    l->n += k;
}

/* Writes through locals, not through l: a char store may alias l->n, and
 * the compiler would reload it at every byte. */
/* Writes v quoted into o, at most budget (>= 2) bytes; returns the end. */
static char *quote_into(char *o, size_t budget, const char *v, size_t n)
{
    char *end = o + budget - 1; /* room for the closing quote */
    const unsigned char *s = (const unsigned char *)v;
    *o++ = '"';
    char e[ESCAPE_MAX];
    size_t elen;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            if (o == end)
                break;
            *o++ = (char)c;
            i++;
            continue;
        }
        size_t took = escape_unit(s + i, n - i, e, &elen);
        if ((size_t)(end - o) < elen)
            break;
        memcpy(o, e, elen);
        o += elen;
        i += took;
    }
    *o++ = '"';
    return o;
}

static void put_quoted(struct line *l, const char *v, size_t n, size_t budget)
{
    l->n = (size_t)(quote_into(l->buf + l->n, budget, v, n) - l->buf);
}

size_t log_quote(char *out, size_t cap, const char *v, size_t n)
{
    if (cap < 3) {
        if (cap)
            out[0] = '\0';
        return 0;
    }
    char *end = quote_into(out, cap - 1, v, n);
    *end = '\0';
    return (size_t)(end - out);
}

/* A value bare when it is a plain token, else quoted: a client's text can
 * then never add a field or a line. A plain token costs one pass; "-", which
 * stands for no value, is quoted when it is the value itself. */
/* Writes v into o (at most budget >= 2 bytes) bare or quoted; returns the
 * end. */
static char *value_into(char *o, size_t budget, const char *v)
{
    char *start = o, *end = o + budget;
    const unsigned char *s = (const unsigned char *)v;
    for (; *s && token_byte(*s); s++)
        if (o != end)
            *o++ = (char)*s;
    if (!*s && s != (const unsigned char *)v && strcmp(v, "-") != 0)
        return o;
    return quote_into(start, budget, v, strlen(v));
}

static void put_value(struct line *l, const char *v, size_t budget)
{
    l->n = (size_t)(value_into(l->buf + l->n, budget, v) - l->buf);
}

size_t log_value(char *out, size_t cap, const char *v)
{
    if (cap < 3) {
        if (cap)
            out[0] = '\0';
        return 0;
    }
    char *end = value_into(out, cap - 1, v);
    *end = '\0';
    return (size_t)(end - out);
}

/* The sink stores text that readers take for UTF-8 (a TEXT column, JSON):
 * a session id from a header or a child's stderr may be any bytes, and a
 * detail cut at DETAIL_MAX may end inside a character. A copy with U+FFFD
 * for each byte that is not UTF-8 (caller frees), or NULL when s is valid
 * (the common case: nothing to copy) or memory is short. */
static char *repaired(const char *s)
{
    size_t n = strlen(s);
    if (utf8_valid(s, n))
        return NULL;
    char *out = malloc(UTF8_REPAIR_CAP(n));
    if (out)
        utf8_repair(s, n, out);
    return out;
}

__attribute__((format(printf, 5, 0))) static void emit(enum log_level level, const char *session,
                                                       const char *event, int to_sink,
                                                       const char *fmt, va_list ap)
{
    char detail[DETAIL_MAX] = "";
    int len = fmt ? vsnprintf(detail, sizeof detail, fmt, ap) : 0;
    size_t detail_len = len < 0 ? 0 : (size_t)len < sizeof detail ? (size_t)len : sizeof detail - 1;

    int64_t now = clock_wall_ms();
    time_t secs = (time_t)(now / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    struct line l;
    l.n = strftime(l.buf, 32, "ts=%Y-%m-%dT%H:%M:%S", &tm);
    l.n += (size_t)snprintf(l.buf + l.n, 16, ".%03dZ level=", (int)(now % 1000));
    put(&l, log_level_name(level));
    put(&l, " session=");
    if (session)
        put_value(&l, session, SESSION_OUT);
    else
        put(&l, "-");
    put(&l, " event=");
    put_value(&l, event, EVENT_OUT);
    put(&l, " msg=");
    put_quoted(&l, detail, detail_len, MSG_OUT);
    l.buf[l.n++] = '\n';
    fwrite(l.buf, 1, l.n, stderr);

    struct sink *s = to_sink ? atomic_load(&sink) : NULL;
    if (s) {
        char row[1200];
        snprintf(row, sizeof row, "%s %s", event, detail);
        char *fixed_row = repaired(row), *fixed_session = session ? repaired(session) : NULL;
        s->fn(s->ud, now, log_level_name(level), fixed_session ? fixed_session : session,
              fixed_row ? fixed_row : row);
        free(fixed_row);
        free(fixed_session);
    }
}

void log_event(enum log_level level, const char *session, const char *event, const char *fmt, ...)
{
    if ((int)level < min_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(level, session, event, 1, fmt, ap);
    va_end(ap);
}

void log_local(enum log_level level, const char *session, const char *event, const char *fmt, ...)
{
    if ((int)level < min_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    emit(level, session, event, 0, fmt, ap);
    va_end(ap);
}
