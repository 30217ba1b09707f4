/* options — see options.h. */
#include "options.h"

#include "cmdline.h"
#include "oauth_options.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_TOKEN_FILE (64 * 1024)

static const char usage_text[] =
    "usage: mcp-bridge [options] URL\n"
    "\n"
    "Connects an MCP client that speaks stdio (Claude Desktop, an IDE) to a remote\n"
    "MCP server over HTTP(S). stdin/stdout carry JSON-RPC (newline-delimited JSON or\n"
    "Content-Length frames, detected from the first bytes); logs go to stderr.\n"
    "Every request gets exactly one reply: when the server cannot answer, a JSON-RPC\n"
    "error says what happened and what to check.\n"
    "\n"
    "options:\n"
    "  --header 'Name: value'     extra HTTP header on every request (repeatable);\n"
    "                             ${NAME} in the value is taken from the environment\n"
    "  --token-env NAME           bearer token from environment variable NAME\n"
    "  --token-file FILE          bearer token from FILE (first line); never logged\n"
    "  --cacert FILE              trust the CA certificates in FILE (PEM) as well\n"
    "                             (TLS verification is always on)\n"
    "  --transport http|ws|poll|sse\n"
    "                             http: Streamable HTTP, falling back to HTTP+SSE\n"
    "                             (2024-11-05) when the server answers 404/405;\n"
    "                             poll: mcpd's long-polling mode; sse: HTTP+SSE\n"
    "                             only; ws: mcpd's WebSocket transport, URL\n"
    "                             wss://host/mcp/ws, which alone selects it\n"
    "                             (default http); a tcp://host:port URL selects\n"
    "                             mcpd's raw TCP transport (--tcp-listen; no TLS:\n"
    "                             loopback only unless --allow-http), a\n"
    "                             udp://host:port URL its UDP transport\n"
    "                             (--udp-listen; the same rule)\n"
    "  --connect-timeout-ms N     time to connect, TLS included (default 10000)\n"
    "  --response-timeout-ms N    time to the first byte of a response, and the\n"
    "                             longest silence on a response stream (default 60000)\n"
    "  --allow-http               allow plain http:// to a host that is not loopback\n"
    "  --log-level LEVEL          debug|info|warn|error (default info)\n"
    "  --version                  print the version and exit\n"
    "  --help                     print this help and exit\n"
    "\n"
    "example (Claude Desktop, claude_desktop_config.json):\n"
    "  \"mcpServers\": { \"mcpd\": { \"command\": \"mcp-bridge\",\n"
    "      \"args\": [\"--token-env\", \"MCPD_TOKEN\", \"https://mcp.example.com/mcp\"],\n"
    "      \"env\": { \"MCPD_TOKEN\": \"...\" } } }\n";

char *options_expand_env(const char *s, const char **err)
{
    size_t cap = strlen(s) + 1, len = 0;
    char *out = malloc(cap);
    if (!out) {
        *err = "out of memory";
        return NULL;
    }
    for (const char *p = s; *p;) {
        const char *piece = p;
        size_t piece_len = 1;
        char name[256];
        if (p[0] == '$' && p[1] == '{') {
            const char *end = strchr(p + 2, '}');
            size_t n = end ? (size_t)(end - (p + 2)) : 0;
            if (!end || n == 0 || n >= sizeof name) {
                *err = "a ${NAME} reference is not closed or its name is empty or too long";
                free(out);
                return NULL;
            }
            memcpy(name, p + 2, n);
            name[n] = '\0';
            piece = getenv(name);
            if (!piece) {
                *err = "a ${NAME} reference names an environment variable that is not set";
                free(out);
                return NULL;
            }
            piece_len = strlen(piece);
            p = end + 1;
        } else {
            p++;
        }
        if (len + piece_len + 1 > cap) {
            cap = (len + piece_len + 1) * 2;
            char *bigger = realloc(out, cap);
            if (!bigger) {
                *err = "out of memory";
                free(out);
                return NULL;
            }
            out = bigger;
        }
        memcpy(out + len, piece, piece_len);
        len += piece_len;
    }
    out[len] = '\0';
    return out;
}

const char *options_check_header(const char *h)
{
    const char *colon = strchr(h, ':');
    if (!colon || colon == h)
        return "expected 'Name: value'";
    for (const char *p = h; p < colon; p++) {
        unsigned char c = (unsigned char)*p;
        if (c <= ' ' || c >= 127 || strchr("\"(),/:;<=>?@[\\]{}", c))
            return "the header name has a character that is not allowed";
    }
    for (const char *p = colon + 1; *p; p++) {
        if (*p == '\r' || *p == '\n')
            return "the header contains a line break";
    }
    return NULL;
}

int options_is_loopback(const char *host)
{
    if (!host)
        return 0;
    if (strcasecmp(host, "localhost") == 0 || strcmp(host, "::1") == 0 ||
        strcmp(host, "[::1]") == 0)
        return 1;
    /* 127.0.0.0/8, written as a dotted quad */
    unsigned a, b, c, d;
    char tail;
    if (sscanf(host, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4)
        return a == 127 && b < 256 && c < 256 && d < 256;
    return 0;
}

int options_check_url(const char *url, enum bridge_transport t, int allow_http, char *err,
                      size_t cap)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL;
    int rc = -1;
    if (!u) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    if (curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        snprintf(err, cap, "'%s' is not a valid URL (expected https://host/path)", url);
        goto out;
    }
    int ws = strcmp(scheme, "ws") == 0 || strcmp(scheme, "wss") == 0;
    int tcp = strcmp(scheme, "tcp") == 0 || strcmp(scheme, "udp") == 0;
    int plain = strcmp(scheme, "http") == 0 || strcmp(scheme, "ws") == 0 || tcp;
    if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0 && !(ws && t == TRANSPORT_WS) &&
        !(tcp && (t == TRANSPORT_TCP || t == TRANSPORT_UDP))) {
        snprintf(err, cap, "the URL's scheme '%s' is not supported (use https://%s)", scheme,
                 t == TRANSPORT_WS ? " or wss://" : "");
        goto out;
    }
    if (plain && !allow_http && !options_is_loopback(host)) {
        snprintf(err, cap,
                 "refusing plain %s to %s: the token and the conversation would travel "
                 "unencrypted (use https://, or --allow-http on a trusted network)",
                 scheme, host);
        goto out;
    }
    rc = 0;
out:
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(u);
    return rc;
}

/* The first line of the file, without surrounding white space. */
static char *read_token_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "mcp-bridge: cannot read --token-file %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char *buf = calloc(1, MAX_TOKEN_FILE + 1);
    size_t n = buf ? fread(buf, 1, MAX_TOKEN_FILE, f) : 0;
    fclose(f);
    if (!buf)
        return NULL;
    buf[n] = '\0';
    char *start = buf;
    while (*start && isspace((unsigned char)*start))
        start++;
    size_t len = strcspn(start, "\r\n");
    while (len && isspace((unsigned char)start[len - 1]))
        len--;
    memmove(buf, start, len);
    buf[len] = '\0';
    if (!len) {
        fprintf(stderr, "mcp-bridge: --token-file %s is empty\n", path);
        free(buf);
        return NULL;
    }
    return buf;
}

static int token_ok(const char *t)
{
    for (const char *p = t; *p; p++) {
        if ((unsigned char)*p < ' ' || *p == 127)
            return 0;
    }
    return *t != '\0';
}

/* What the command line holds beside the options themselves. */
struct bridge_args {
    struct bridge_options o;
    const char *token_env, *token_file;
    int transport_given, help, version;
};

static int take_header(void *base, const struct cmdline_option *opt, const char *arg, char *err,
                       size_t cap)
{
    (void)opt;
    struct bridge_options *o = &((struct bridge_args *)base)->o;
    const char *why = options_check_header(arg);
    if (why) {
        snprintf(err, cap, "bad --header (%s)", why);
        return -1;
    }
    char *h = options_expand_env(arg, &why);
    if (!h) {
        snprintf(err, cap, "bad --header: %s", why);
        return -1;
    }
    /* the expansion must not have smuggled a line break in */
    if ((why = options_check_header(h)) != NULL) {
        snprintf(err, cap, "bad --header after ${} expansion (%s)", why);
        free(h);
        return -1;
    }
    char **more = realloc(o->headers, sizeof *more * (size_t)(o->n_headers + 2));
    if (!more) {
        snprintf(err, cap, "out of memory");
        free(h);
        return -1;
    }
    o->headers = more;
    o->headers[o->n_headers++] = h;
    o->headers[o->n_headers] = NULL;
    return 0;
}

static int take_transport(void *base, const struct cmdline_option *opt, const char *arg, char *err,
                          size_t cap)
{
    (void)opt;
    static const struct {
        const char *name;
        enum bridge_transport t;
    } names[] = {{"http", TRANSPORT_HTTP},
                 {"ws", TRANSPORT_WS},
                 {"poll", TRANSPORT_POLL},
                 {"sse", TRANSPORT_SSE}};
    struct bridge_args *b = base;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(arg, names[i].name) == 0) {
            b->o.transport = names[i].t;
            b->transport_given = 1;
            return 0;
        }
    snprintf(err, cap, "--transport is http, ws, poll or sse, not '%s'", arg);
    return -1;
}

static int take_ms(void *base, const struct cmdline_option *opt, const char *arg, char *err,
                   size_t cap)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v <= 0 || v > 24L * 3600 * 1000) {
        snprintf(err, cap, "--%s wants a positive number of milliseconds, not '%s'", opt->name,
                 arg);
        return -1;
    }
    *(long *)((char *)base + opt->offset) = v;
    return 0;
}

static int take_log_level(void *base, const struct cmdline_option *opt, const char *arg, char *err,
                          size_t cap)
{
    if (log_level_parse(arg, (enum log_level *)((char *)base + opt->offset)) < 0) {
        snprintf(err, cap, "--log-level is debug, info, warn or error");
        return -1;
    }
    return 0;
}

#define A(field) offsetof(struct bridge_args, field)

/* The usage text above says what each does. */
static const struct cmdline_option table[] = {
    {"header", CMDLINE_FUNC, A(o.headers), NULL, NULL, take_header},
    {"token-env", CMDLINE_ARG, A(token_env), NULL, NULL, NULL},
    {"token-file", CMDLINE_ARG, A(token_file), NULL, NULL, NULL},
    {"cacert", CMDLINE_STR, A(o.cacert), NULL, NULL, NULL},
    {"transport", CMDLINE_FUNC, A(o.transport), NULL, NULL, take_transport},
    {"connect-timeout-ms", CMDLINE_FUNC, A(o.connect_timeout_ms), "10000", NULL, take_ms},
    {"response-timeout-ms", CMDLINE_FUNC, A(o.response_timeout_ms), "60000", NULL, take_ms},
    {"allow-http", CMDLINE_FLAG, A(o.allow_http), NULL, NULL, NULL},
    {"log-level", CMDLINE_FUNC, A(o.log_level), "info", NULL, take_log_level},
    {"version", CMDLINE_FLAG, A(version), NULL, NULL, NULL},
    {"help", CMDLINE_FLAG, A(help), NULL, NULL, NULL},
    OAUTH_CMDLINE_OPTIONS(A(o)),
};
#define NTABLE (sizeof table / sizeof table[0])

enum options_result options_parse(int argc, char **argv, struct bridge_options *out)
{
    struct bridge_args b;
    memset(&b, 0, sizeof b);
    memset(out, 0, sizeof *out);
    struct bridge_options *o = &b.o;
    char err[512];
    int nurl = 0;
    /* The URL, wherever it stands, is moved to argv[1]. */
    int rc = cmdline_defaults(table, NTABLE, &b, err, sizeof err);
    if (rc == 0)
        rc = cmdline_parse(table, NTABLE, &b, argc, argv, 0, argv + 1, &nurl, err, sizeof err);
    if (rc != CMDLINE_OK) {
        fprintf(stderr, "mcp-bridge: %s%s\n", err,
                rc == CMDLINE_UNKNOWN || rc == CMDLINE_NO_VALUE ? " (see --help)" : "");
        goto bad;
    }
    if (b.help || b.version) {
        if (b.help) {
            fputs(usage_text, stdout);
            fputs(oauth_options_usage, stdout);
        } else {
            printf("mcp-bridge %s (%s)\n", MCPD_VERSION, curl_version());
        }
        options_free(o);
        return OPTIONS_EXIT_OK;
    }
    if (nurl != 1) {
        fprintf(stderr, "mcp-bridge: %s\n%s",
                nurl == 0 ? "the server URL is missing" : "only one URL, after the options",
                "usage: mcp-bridge [options] URL (see --help)\n");
        goto bad;
    }
    o->url = strdup(argv[1]);
    if (o->url && strncasecmp(o->url, "tcp://", 6) == 0)
        o->transport = TRANSPORT_TCP; /* the scheme says it all */
    if (o->url && strncasecmp(o->url, "udp://", 6) == 0)
        o->transport = TRANSPORT_UDP;
    /* so does a WebSocket URL, unless another transport was asked for */
    if (o->url && !b.transport_given &&
        (strncasecmp(o->url, "ws://", 5) == 0 || strncasecmp(o->url, "wss://", 6) == 0))
        o->transport = TRANSPORT_WS;
    if (!o->url || options_check_url(o->url, o->transport, o->allow_http, err, sizeof err) < 0) {
        fprintf(stderr, "mcp-bridge: %s\n", o->url ? err : "out of memory");
        goto bad;
    }
    if (b.token_env && b.token_file) {
        fprintf(stderr, "mcp-bridge: give --token-env or --token-file, not both\n");
        goto bad;
    }
    if (b.token_env) {
        const char *v = getenv(b.token_env);
        if (!v || !*v) {
            fprintf(stderr, "mcp-bridge: --token-env %s: that environment variable is not set\n",
                    b.token_env);
            goto bad;
        }
        o->token = strdup(v);
    } else if (b.token_file) {
        o->token = read_token_file(b.token_file);
        if (!o->token)
            goto bad;
    }
    if (o->token && !token_ok(o->token)) {
        fprintf(stderr, "mcp-bridge: the token contains control characters\n");
        goto bad;
    }
    *out = *o;
    return OPTIONS_OK;
bad:
    options_free(o);
    return OPTIONS_EXIT_BAD;
}

void options_free(struct bridge_options *o)
{
    free(o->url);
    for (int i = 0; i < o->n_headers; i++)
        free(o->headers[i]);
    free(o->headers);
    if (o->token) {
        /* the token should not linger in freed memory */
        volatile char *p = o->token;
        while (*p)
            *p++ = 0;
        free(o->token);
    }
    free(o->cacert);
    oauth_options_free(o);
    memset(o, 0, sizeof *o);
}
