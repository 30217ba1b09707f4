/* test_config — mcpd's settings (config.c): config_split_words (the
 * --upstream command line: blanks, '...', "..." with \" and \\, \ outside
 * quotes, no expansion, unbalanced quotes, empty commands), then config_load
 * with a clean MCPD_* environment: every default, the --name=value,
 * --name value and flag forms, each usage error's exact message, --listen
 * (ports, brackets, localhost, non-loopback refused without auth), the
 * config file (comments, blanks, CRLF, '=' in values, errors with their line
 * numbers), the environment, and the precedence file < environment < argv;
 * finally config_usage lists every option once.
 *
 * file_blanks_and_long_lines keeps the two bugs these tests found (blanks
 * after a value, lines over 1023 bytes). */
#include "check.h"
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

/* ---- config_split_words ---- */

struct split_case {
    const char *line;
    int nonempty;
    const char *err; /* NULL: the words below are wanted */
    const char *words[8];
};

static const struct split_case split_cases[] = {
    {"node server.js", 1, NULL, {"node", "server.js"}},
    {"  a \t b\n c  ", 1, NULL, {"a", "b", "c"}},
    {"", 0, NULL, {NULL}},
    {" \t\n", 0, NULL, {NULL}},
    {"", 1, "the command is empty", {NULL}},
    {"   ", 1, "the command is empty", {NULL}},
    {"'a b' c", 1, NULL, {"a b", "c"}},
    {"''", 1, NULL, {""}},
    {"\"\"", 1, NULL, {""}},
    {"'' \"\"", 1, NULL, {"", ""}},
    {"a''b", 1, NULL, {"ab"}},
    {"'it''s'", 1, NULL, {"its"}},
    {"pre'mid dle'post", 1, NULL, {"premid dlepost"}},
    {"\"a \\\" b\"", 1, NULL, {"a \" b"}},     /* "a \" b" */
    {"\"a\\\\b\"", 1, NULL, {"a\\b"}},         /* "a\\b" */
    {"\"a\\nb\\$x\"", 1, NULL, {"a\\nb\\$x"}}, /* other escapes stay as written */
    {"'a\\b' '\\''", 0, "unbalanced ' in: 'a\\b' '\\''", {NULL}}, /* no escapes in '' */
    {"'a\\b'", 1, NULL, {"a\\b"}},
    {"a\\ b", 1, NULL, {"a b"}},
    {"\\'x \\\"y", 1, NULL, {"'x", "\"y"}},
    {"a\\\\b", 1, NULL, {"a\\b"}},
    {"a\\", 1, NULL, {"a\\"}}, /* a final backslash is kept */
    {"\"'\" '\"'", 1, NULL, {"'", "\""}},
    {"a 'b\"c' d", 1, NULL, {"a", "b\"c", "d"}},
    {"x=\"1 2\" y='3 4'", 1, NULL, {"x=1 2", "y=3 4"}},
    {"$HOME *.c ~ `id` $(id) ;|&", 1, NULL, {"$HOME", "*.c", "~", "`id`", "$(id)", ";|&"}},
    {"a\rb", 1, NULL, {"a\rb"}}, /* only space, tab and LF separate */
    {"h\xc3\xa9llo w\xc3\xb6rld", 1, NULL, {"h\xc3\xa9llo", "w\xc3\xb6rld"}},
    {"'unbalanced", 1, "unbalanced ' in: 'unbalanced", {NULL}},
    {"ok 'open", 0, "unbalanced ' in: ok 'open", {NULL}},
    {"\"unbalanced", 1, "unbalanced \" in: \"unbalanced", {NULL}},
    {"\"a\\\"", 1, "unbalanced \" in: \"a\\\"", {NULL}}, /* the only " is escaped */
    {"'", 1, "unbalanced ' in: '", {NULL}},
    {"\"", 1, "unbalanced \" in: \"", {NULL}},
};

static void test_split(void)
{
    for (size_t i = 0; i < sizeof split_cases / sizeof split_cases[0]; i++) {
        const struct split_case *c = &split_cases[i];
        char err[128] = "unchanged";
        char **w = config_split_words(c->line, c->nonempty, err, sizeof err);
        if (c->err) {
            if (!check_record(w == NULL, __FILE__, __LINE__, c->line))
                printf("     case %zu: words returned, want error \"%s\"\n", i, c->err);
            CHECK_STR(err, c->err);
            config_words_free(w);
            continue;
        }
        if (!check_record(w != NULL, __FILE__, __LINE__, c->line)) {
            printf("     case %zu: error \"%s\"\n", i, err);
            continue;
        }
        CHECK_STR(err, "");
        size_t n = 0;
        while (c->words[n])
            n++;
        size_t got = 0;
        while (w[got])
            got++;
        if (!check_record(got == n, __FILE__, __LINE__, c->line))
            printf("     case %zu: %zu words, want %zu\n", i, got, n);
        for (size_t k = 0; k < n && k < got; k++)
            CHECK_STR(w[k], c->words[k]);
        config_words_free(w);
    }
}

/* Many words and one long word: the vector and the word buffer grow. */
static void test_split_growth(void)
{
    char line[4096] = "";
    size_t o = 0;
    for (int i = 0; i < 300; i++)
        o += (size_t)snprintf(line + o, sizeof line - o, "w%d ", i);
    char err[64];
    char **w = config_split_words(line, 1, err, sizeof err);
    if (!CHECK(w != NULL))
        return;
    int ok = 1;
    size_t n = 0;
    for (; w[n]; n++) {
        char want[32];
        snprintf(want, sizeof want, "w%zu", n);
        ok &= strcmp(w[n], want) == 0;
    }
    CHECK(ok);
    CHECK_INT(n, 300);
    config_words_free(w);

    char longw[3000];
    longw[0] = '"';
    memset(longw + 1, 'x', 2000);
    strcpy(longw + 2001, " y\" z");
    w = config_split_words(longw, 1, err, sizeof err);
    if (!CHECK(w != NULL))
        return;
    CHECK_INT(strlen(w[0]), 2002);
    CHECK(w[0][0] == 'x' && strcmp(w[0] + 2000, " y") == 0);
    CHECK_STR(w[1], "z");
    CHECK(w[2] == NULL);
    config_words_free(w);
    config_words_free(NULL); /* harmless */

    /* A small error buffer gets a truncated, terminated message. */
    char small[10];
    CHECK(config_split_words("'x", 1, small, sizeof small) == NULL);
    CHECK_STR(small, "unbalance");
}

/* ---- config_load ---- */

static void clear_env(void)
{
    for (;;) {
        char **e = environ;
        while (*e && strncmp(*e, "MCPD_", 5) != 0)
            e++;
        if (!*e)
            return;
        char name[256];
        size_t n = strcspn(*e, "=");
        snprintf(name, sizeof name, "%.*s", (int)n, *e);
        unsetenv(name);
    }
}

static char file_path[64];

/* Writes content to the scratch config file; returns its path. */
static const char *write_file(const char *content)
{
    FILE *f = fopen(file_path, "w");
    if (!f)
        return file_path;
    fputs(content, f);
    fclose(f);
    return file_path;
}

static struct config cfg;
static char err[512];

/* config_load over "mcpd" and the given arguments (NULL-terminated). */
static int load_v(char *const *args)
{
    char *argv[32] = {"mcpd"};
    int argc = 1;
    while (args[argc - 1] && argc < 31) {
        argv[argc] = args[argc - 1];
        argc++;
    }
    err[0] = '\0';
    config_free(&cfg);
    return config_load(&cfg, argc, argv, err, sizeof err);
}

#define LOAD(...) load_v((char *[]){__VA_ARGS__, NULL})
#define LOAD0() load_v((char *[]){NULL})

static void test_defaults(void)
{
    CHECK_INT(LOAD0(), 0);
    CHECK_STR(err, "");
    CHECK_STR(cfg.listen, "127.0.0.1:8080");
    CHECK_STR(cfg.host, "127.0.0.1");
    CHECK_INT(cfg.port, 8080);
    CHECK_STR(cfg.db, "./data/mcpd.db");
    CHECK(cfg.config_file == NULL);
    CHECK_STR(cfg.log_level, "info");
    CHECK_STR(cfg.reply_mode, "auto");
    CHECK_STR(cfg.allowed_hosts, "localhost,127.0.0.1,[::1]");
    CHECK_STR(cfg.allowed_origins, "localhost,127.0.0.1,[::1]");
    CHECK_INT(cfg.sse_poll_ms, 0);
    CHECK_INT(cfg.sse_retry_ms, 1000);
    CHECK_INT(cfg.keepalive_ms, 15000);
    CHECK_INT(cfg.session_idle_ms, 1800000);
    CHECK_INT(cfg.stream_retention_ms, 300000);
    CHECK_INT(cfg.session_max_bytes, 67108864);
    CHECK_INT(cfg.max_sessions, 10000);
    CHECK_INT(cfg.max_sessions_per_principal, 1000);
    CHECK_INT(cfg.max_init_params, 65536);
    CHECK_INT(cfg.max_body, 4194304);
    CHECK_INT(cfg.ws_max_message, 1048576);
    CHECK_INT(cfg.ws_ping_ms, 15000);
    CHECK_INT(cfg.max_connections, 16384);
    CHECK_INT(cfg.max_connections_per_ip, 256);
    CHECK_INT(cfg.request_timeout_ms, 30000);
    CHECK(cfg.trusted_proxies == NULL);
    CHECK_INT(cfg.max_workers, 512);
    CHECK_INT(cfg.max_inflight_per_session, 128);
    CHECK_INT(cfg.shutdown_grace_ms, 5000);
    CHECK(cfg.upstream == NULL);
    CHECK_STR(cfg.upstream_mode, "per-session");
    CHECK(cfg.upstream_cwd == NULL);
    CHECK(cfg.upstream_env == NULL);
    CHECK_INT(cfg.upstream_pool, 2);
    CHECK_INT(cfg.upstream_max, 64);
    CHECK_INT(cfg.upstream_idle_ms, 300000);
    CHECK_INT(cfg.upstream_start_timeout_ms, 10000);
    CHECK_INT(cfg.upstream_max_pending, 16);
    CHECK_INT(cfg.upstream_log_rate, 20);
    CHECK_INT(cfg.log_retention_ms, 86400000);
    CHECK_INT(cfg.log_max_rows, 100000);
    CHECK_STR(cfg.auth, "none");
    CHECK(cfg.bootstrap_token_file == NULL);
    CHECK_INT(cfg.allow_unauthenticated, 0);
    CHECK_INT(cfg.stdio, 0);
    CHECK_INT(cfg.help, 0);
    CHECK_INT(cfg.version, 0);
}

static void test_argv_forms(void)
{
    CHECK_INT(LOAD("--max-body=10", "--db", ":memory:", "--stdio", "--upstream", "node 'a b'"), 0);
    CHECK_INT(cfg.max_body, 10);
    CHECK_STR(cfg.db, ":memory:");
    CHECK_INT(cfg.stdio, 1);
    CHECK_STR(cfg.upstream, "node 'a b'");
    /* A flag does not take the next argument as its value. */
    CHECK_INT(LOAD("--stdio", "--max-body", "7"), 0);
    CHECK_INT(cfg.stdio, 1);
    CHECK_INT(cfg.max_body, 7);
    CHECK_INT(LOAD("--stdio=0"), 0);
    CHECK_INT(cfg.stdio, 0);
    CHECK_INT(LOAD("--stdio=7"), 0);
    CHECK_INT(cfg.stdio, 1);
    /* The last one wins. */
    CHECK_INT(LOAD("--max-body=1", "--max-body", "2", "--listen=127.0.0.1:1", "--listen=[::1]:2"),
              0);
    CHECK_INT(cfg.max_body, 2);
    CHECK_STR(cfg.host, "::1");
    CHECK_INT(cfg.port, 2);
    /* A value may start with dashes or hold '='. */
    CHECK_INT(LOAD("--upstream", "--weird", "--upstream-env=A=1 B==2"), 0);
    CHECK_STR(cfg.upstream, "--weird");
    CHECK_STR(cfg.upstream_env, "A=1 B==2");
    CHECK_INT(LOAD("--allowed-hosts="), 0); /* an empty string is a value */
    CHECK_STR(cfg.allowed_hosts, "");
    CHECK_INT(LOAD("--max-body=9223372036854775807", "--sse-poll-ms=0"), 0);
    CHECK_INT(cfg.max_body, INT64_MAX);
    CHECK_INT(cfg.sse_poll_ms, 0);
    CHECK_INT(LOAD("--keepalive-ms=100", "--session-idle-ms=100", "--stream-retention-ms=100",
                   "--max-workers=1", "--max-connections=1", "--max-body=1"),
              0); /* the smallest limits allowed */
    CHECK_INT(
        LOAD("--reply-mode=json", "--log-level=debug", "--upstream-mode=shared", "--auth=token"),
        0);
    CHECK_STR(cfg.reply_mode, "json");
    CHECK_STR(cfg.log_level, "debug");
    CHECK_STR(cfg.upstream_mode, "shared");
    CHECK_STR(cfg.auth, "token");
    /* --help and --version skip the checks of the other settings. */
    CHECK_INT(LOAD("--reply-mode=xml", "--help"), 0);
    CHECK_INT(cfg.help, 1);
    CHECK_INT(LOAD("--version", "--listen=nonsense", "--max-workers=0"), 0);
    CHECK_INT(cfg.version, 1);
}

struct usage_case {
    const char *args[4];
    const char *err;
};

static const struct usage_case usage_cases[] = {
    {{"foo"}, "unexpected argument 'foo' (see --help)"},
    {{"-h"}, "unexpected argument '-h' (see --help)"},
    {{"--nope"}, "unknown option '--nope' (see --help)"},
    {{"--nope=1"}, "unknown option '--nope=1' (see --help)"},
    {{"--"}, "unknown option '--' (see --help)"},
    {{"--list=x"}, "unknown option '--list=x' (see --help)"}, /* no prefixes */
    {{"--LISTEN=x"}, "unknown option '--LISTEN=x' (see --help)"},
    {{"--max_body=1"}, "unknown option '--max_body=1' (see --help)"},
    {{"--help", "--nope"}, "unknown option '--nope' (see --help)"},
    {{"--max-body"}, "option --max-body needs a value"},
    {{"--stdio", "--upstream"}, "option --upstream needs a value"},
    {{"--max-body=abc"}, "--max-body=abc: max-body needs a non-negative number, got 'abc'"},
    {{"--max-body=-1"}, "--max-body=-1: max-body needs a non-negative number, got '-1'"},
    {{"--max-body="}, "--max-body=: max-body needs a non-negative number, got ''"},
    {{"--max-body=10k"}, "--max-body=10k: max-body needs a non-negative number, got '10k'"},
    {{"--max-body=1.5"}, "--max-body=1.5: max-body needs a non-negative number, got '1.5'"},
    {{"--upstream-relay-timeout-ms=-5"},
     "--upstream-relay-timeout-ms=-5: upstream-relay-timeout-ms needs a non-negative number, got "
     "'-5'"},
    {{"--replica-lease-ms=-1000"},
     "--replica-lease-ms=-1000: replica-lease-ms needs a non-negative number, got '-1000'"},
    {{"--replica-lease-ms=0"},
     "--replica-lease-ms must be at least 1000 (a process beats once a second), got 0"},
    {{"--replica-lease-ms=999"},
     "--replica-lease-ms must be at least 1000 (a process beats once a second), got 999"},
    {{"--max-body=9223372036854775808"},
     "--max-body=9223372036854775808: max-body needs a non-negative number, got "
     "'9223372036854775808'"},
    {{"--max-body", "x"}, "--max-body: max-body needs a non-negative number, got 'x'"},
    {{"--stdio=yes"}, "--stdio=yes: stdio needs a non-negative number, got 'yes'"},
    {{"--help="}, "--help=: help needs a non-negative number, got ''"},
    {{"--reply-mode=xml"}, "--reply-mode must be auto, json or sse, got 'xml'"},
    {{"--reply-mode=JSON"}, "--reply-mode must be auto, json or sse, got 'JSON'"},
    {{"--upstream-mode=pool"}, "--upstream-mode must be per-session or shared, got 'pool'"},
    {{"--log-level=trace"}, "--log-level must be debug, info, warn or error, got 'trace'"},
    {{"--log-level=INFO"}, "--log-level must be debug, info, warn or error, got 'INFO'"},
    {{"--upstream="}, "the command is empty"},
    {{"--upstream", "  "}, "the command is empty"},
    {{"--upstream=node 'x"}, "unbalanced ' in: node 'x"},
    {{"--auth=basic"}, "--auth must be none, token, oauth or token,oauth, got 'basic'"},
    {{"--auth=oauth"}, "--auth oauth needs --oauth-issuer URL"},
    {{"--auth=token,oauth", "--oauth-issuer=id.example"}, "--auth oauth needs --oauth-issuer URL"},
    {{"--auth=oauth", "--oauth-issuer=https://id.example", "--oauth-resource=mcp"},
     "--oauth-resource must be an http(s) URL"},
    {{"--auth=oauth", "--oauth-issuer=https://id.example",
      "--oauth-introspection-url=https://id.example/introspect"},
     "--oauth-introspection-url needs an http(s) URL, --oauth-client-id and "
     "--oauth-client-secret"},
    {{"--keepalive-ms=99"},
     "a limit is too small (timeouts must be at least 100 ms, counts at "
     "least 1)"},
    {{"--session-idle-ms=0"},
     "a limit is too small (timeouts must be at least 100 ms, counts at "
     "least 1)"},
    {{"--stream-retention-ms=99"},
     "a limit is too small (timeouts must be at least 100 ms, "
     "counts at least 1)"},
    {{"--max-workers=0"},
     "a limit is too small (timeouts must be at least 100 ms, counts at "
     "least 1)"},
    {{"--loop-threads=0"},
     "a limit is too small (timeouts must be at least 100 ms, counts at "
     "least 1)"},
    {{"--loop-threads=1025"}, "--loop-threads must be at most 1024"},
    {{"--max-connections=0"},
     "a limit is too small (timeouts must be at least 100 ms, counts "
     "at least 1)"},
    {{"--max-body=0"},
     "a limit is too small (timeouts must be at least 100 ms, counts at least "
     "1)"},
};

/* --auth oauth: the resource defaults to the /mcp URL of --listen. */
static void test_oauth(void)
{
    char *a[] = {"--auth=oauth", "--oauth-issuer=https://id.example", "--listen=localhost:9000",
                 NULL};
    CHECK_INT(load_v(a), 0);
    CHECK_STR(cfg.oauth_resource, "http://127.0.0.1:9000/mcp");
    char *b[] = {"--auth=oauth", "--oauth-issuer=https://id.example", "--listen=[::1]:9000", NULL};
    CHECK_INT(load_v(b), 0);
    CHECK_STR(cfg.oauth_resource, "http://[::1]:9000/mcp");
    char *c[] = {"--auth=token,oauth", "--oauth-issuer=https://id.example",
                 "--oauth-resource=https://mcp.example.com/mcp", "--listen=0.0.0.0:80", NULL};
    CHECK_INT(load_v(c), 0); /* authenticated: a public address is fine */
    CHECK_STR(cfg.oauth_resource, "https://mcp.example.com/mcp");
}

static void test_usage_errors(void)
{
    for (size_t i = 0; i < sizeof usage_cases / sizeof usage_cases[0]; i++) {
        const struct usage_case *c = &usage_cases[i];
        int rc = load_v((char *const *)c->args);
        if (!check_record(rc == -1, __FILE__, __LINE__, c->err))
            printf("     case %zu (%s) was accepted\n", i, c->args[0]);
        CHECK_STR(err, c->err);
    }
}

struct listen_case {
    const char *listen, *extra; /* extra: one more argument, or NULL */
    const char *host;           /* NULL: refused with err */
    int port;
    const char *err;
};

static const struct listen_case listen_cases[] = {
    {"localhost:80", NULL, "127.0.0.1", 80, NULL},
    {"127.0.0.1:0", NULL, "127.0.0.1", 0, NULL},
    {"127.0.0.1:65535", NULL, "127.0.0.1", 65535, NULL},
    {"127.9.8.7:1", NULL, "127.9.8.7", 1, NULL},
    {"[::1]:8080", NULL, "::1", 8080, NULL},
    {"::1:8080", NULL, "::1", 8080, NULL}, /* the last ':' splits */
    {"0.0.0.0:80", "--auth=token", "0.0.0.0", 80, NULL},
    {"0.0.0.0:80", "--allow-unauthenticated", "0.0.0.0", 80, NULL},
    {"[::]:443", "--auth=token", "::", 443, NULL},
    {"127.0.0.1:65536", NULL, NULL, 0, "--listen needs HOST:PORT, got '127.0.0.1:65536'"},
    {"127.0.0.1", NULL, NULL, 0, "--listen needs HOST:PORT, got '127.0.0.1'"},
    {"127.0.0.1:", NULL, NULL, 0, "--listen needs HOST:PORT, got '127.0.0.1:'"},
    {":8080", NULL, NULL, 0, "--listen needs HOST:PORT, got ':8080'"},
    {"127.0.0.1:80x", NULL, NULL, 0, "--listen needs HOST:PORT, got '127.0.0.1:80x'"},
    {"127.0.0.1:-1", NULL, NULL, 0, "--listen needs HOST:PORT, got '127.0.0.1:-1'"},
    {"[::1]", NULL, NULL, 0, "--listen needs HOST:PORT, got '[::1]'"},
    {"[::1]8080", NULL, NULL, 0, "--listen needs HOST:PORT, got '[::1]8080'"},
    {"[]:80", NULL, NULL, 0, "--listen needs HOST:PORT, got '[]:80'"},
    {"", NULL, NULL, 0, "--listen needs HOST:PORT, got ''"},
    {"1234567890123456789012345678901234567890123456789012345678901234:1", NULL, NULL, 0,
     "--listen needs HOST:PORT, got "
     "'1234567890123456789012345678901234567890123456789012345678901234:1'"},
    {"example.com:80", NULL, NULL, 0,
     "--listen host must be a numeric address or localhost, got 'example.com'"},
    {"LOCALHOST:80", NULL, NULL, 0,
     "--listen host must be a numeric address or localhost, got 'LOCALHOST'"},
    {"127.0.0.1.nip.io:80", NULL, NULL, 0,
     "--listen host must be a numeric address or localhost, got '127.0.0.1.nip.io'"},
    {"0.0.0.0:80", NULL, NULL, 0,
     "refusing to listen on non-loopback 0.0.0.0 without authentication; pass --auth token "
     "(tokens from mcp-admin), or --allow-unauthenticated"},
    {"128.0.0.1:80", NULL, NULL, 0,
     "refusing to listen on non-loopback 128.0.0.1 without authentication; pass --auth token "
     "(tokens from mcp-admin), or --allow-unauthenticated"},
    {"126.255.255.255:80", NULL, NULL, 0,
     "refusing to listen on non-loopback 126.255.255.255 without authentication; pass --auth "
     "token (tokens from mcp-admin), or --allow-unauthenticated"},
    {"[::]:80", NULL, NULL, 0,
     "refusing to listen on non-loopback :: without authentication; pass --auth token (tokens "
     "from mcp-admin), or --allow-unauthenticated"},
    {"[::ffff:127.0.0.1]:80", NULL, NULL, 0,
     "refusing to listen on non-loopback ::ffff:127.0.0.1 without authentication; pass --auth "
     "token (tokens from mcp-admin), or --allow-unauthenticated"},
    {"[::2]:80", "--allow-unauthenticated=0", NULL, 0,
     "refusing to listen on non-loopback ::2 without authentication; pass --auth token (tokens "
     "from mcp-admin), or --allow-unauthenticated"},
};

static void test_listen(void)
{
    for (size_t i = 0; i < sizeof listen_cases / sizeof listen_cases[0]; i++) {
        const struct listen_case *c = &listen_cases[i];
        char arg[128];
        snprintf(arg, sizeof arg, "--listen=%s", c->listen);
        int rc = c->extra ? LOAD(arg, (char *)c->extra) : LOAD(arg);
        if (c->host) {
            if (!check_record(rc == 0, __FILE__, __LINE__, c->listen))
                printf("     refused: %s\n", err);
            CHECK_STR(cfg.host, c->host);
            CHECK_INT(cfg.port, c->port);
        } else {
            if (!check_record(rc == -1, __FILE__, __LINE__, c->listen))
                printf("     accepted, want \"%s\"\n", c->err);
            CHECK_STR(err, c->err);
        }
    }
}

/* --tcp-listen: off by default; the same HOST:PORT rules as --listen,
 * named after its own option; off loopback it needs --auth token too. */
static void test_tcp_listen(void)
{
    CHECK_INT(LOAD0(), 0);
    CHECK(cfg.tcp_listen == NULL);
    CHECK_INT(cfg.tcp_idle_ms, 300000);
    CHECK_INT(cfg.tcp_handshake_ms, 10000);
    CHECK_INT(LOAD("--tcp-listen=localhost:9000", "--tcp-handshake-ms=250"), 0);
    CHECK_STR(cfg.tcp_host, "127.0.0.1");
    CHECK_INT(cfg.tcp_port, 9000);
    CHECK_INT(cfg.tcp_handshake_ms, 250);
    CHECK_INT(LOAD("--tcp-listen=[::1]:1"), 0);
    CHECK_STR(cfg.tcp_host, "::1");
    CHECK_INT(LOAD("--tcp-listen=0.0.0.0:9000", "--auth=token"), 0);
    CHECK_INT(LOAD("--tcp-listen=9000"), -1);
    CHECK_STR(err, "--tcp-listen needs HOST:PORT, got '9000'");
    CHECK_INT(LOAD("--tcp-listen=example.com:1"), -1);
    CHECK_STR(err, "--tcp-listen host must be a numeric address or localhost, got 'example.com'");
    CHECK_INT(LOAD("--tcp-listen=0.0.0.0:9000"), -1);
    CHECK_STR(err, "refusing to listen on non-loopback 0.0.0.0 without authentication; pass "
                   "--auth token (tokens from mcp-admin), or --allow-unauthenticated");
    CHECK_INT(LOAD("--tcp-listen=127.0.0.1:1", "--tcp-idle-ms=99"), -1);
}

/* --udp-listen: off by default; the same HOST:PORT rules as --listen and
 * --tcp-listen, named after its own option; off loopback it needs --auth
 * token; --udp-max-datagram within what UDP carries. */
static void test_udp_listen(void)
{
    CHECK_INT(LOAD0(), 0);
    CHECK(cfg.udp_listen == NULL);
    CHECK_INT(cfg.udp_idle_ms, 300000);
    CHECK_INT(cfg.udp_max_datagram, 1200);
    CHECK_INT(cfg.udp_rate_per_ip, 2000);
    CHECK_INT(LOAD("--udp-listen=localhost:9001", "--udp-max-datagram=256"), 0);
    CHECK_STR(cfg.udp_host, "127.0.0.1");
    CHECK_INT(cfg.udp_port, 9001);
    CHECK_INT(LOAD("--udp-listen=[::1]:1"), 0);
    CHECK_STR(cfg.udp_host, "::1");
    CHECK_INT(LOAD("--udp-listen=0.0.0.0:9001", "--auth=token"), 0);
    CHECK_INT(LOAD("--udp-listen=9001"), -1);
    CHECK_STR(err, "--udp-listen needs HOST:PORT, got '9001'");
    CHECK_INT(LOAD("--udp-listen=0.0.0.0:9001"), -1);
    CHECK_STR(err, "refusing to listen on non-loopback 0.0.0.0 without authentication; pass "
                   "--auth token (tokens from mcp-admin), or --allow-unauthenticated");
    CHECK_INT(LOAD("--udp-max-datagram=255"), -1);
    CHECK_STR(err, "--udp-max-datagram must be from 256 to 65507, got 255");
    CHECK_INT(LOAD("--udp-max-datagram=65508"), -1);
    CHECK_INT(LOAD("--udp-idle-ms=99"), -1);
    CHECK_INT(LOAD("--udp-rate-per-ip=-1"), -1);
}

static void test_env(void)
{
    setenv("MCPD_MAX_BODY", "123", 1);
    setenv("MCPD_LISTEN", "[::1]:9", 1);
    setenv("MCPD_STDIO", "1", 1);
    setenv("MCPD_MAX_SESSIONS_PER_PRINCIPAL", "7", 1);
    setenv("MCPD_UPSTREAM_ENV", "A=1 B=2", 1);
    setenv("MCPD_ALLOWED_ORIGINS", "", 1);
    CHECK_INT(LOAD0(), 0);
    CHECK_INT(cfg.max_body, 123);
    CHECK_STR(cfg.host, "::1");
    CHECK_INT(cfg.port, 9);
    CHECK_INT(cfg.stdio, 1);
    CHECK_INT(cfg.max_sessions_per_principal, 7);
    CHECK_STR(cfg.upstream_env, "A=1 B=2");
    CHECK_STR(cfg.allowed_origins, "");
    clear_env();

    setenv("MCPD_LISTEN", "0.0.0.0:80", 1);
    setenv("MCPD_ALLOW_UNAUTHENTICATED", "1", 1);
    CHECK_INT(LOAD0(), 0);
    CHECK_INT(cfg.allow_unauthenticated, 1);
    clear_env();

    static const char *const bad[][3] = {
        {"MCPD_MAX_BODY", "x", "MCPD_MAX_BODY: max-body needs a non-negative number, got 'x'"},
        {"MCPD_STDIO", "", "MCPD_STDIO: stdio needs a non-negative number, got ''"},
        {"MCPD_KEEPALIVE_MS", "-100",
         "MCPD_KEEPALIVE_MS: keepalive-ms needs a non-negative number, got '-100'"},
        {"MCPD_REPLY_MODE", "xml", "--reply-mode must be auto, json or sse, got 'xml'"},
        {"MCPD_UPSTREAM", "", "the command is empty"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv(bad[i][0], bad[i][1], 1);
        CHECK_INT(LOAD0(), -1);
        CHECK_STR(err, bad[i][2]);
        clear_env();
    }
    /* Names are exact: other spellings are not read. */
    setenv("MCPD_MAX-BODY", "5", 1);
    setenv("mcpd_max_body", "5", 1);
    setenv("MCPD_MAXBODY", "5", 1);
    CHECK_INT(LOAD0(), 0);
    CHECK_INT(cfg.max_body, 4194304);
    unsetenv("mcpd_max_body");
    clear_env();
}

static void test_file(void)
{
    const char *path = write_file("# a comment\n"
                                  "\n"
                                  "   \t\n"
                                  "  # an indented comment\n"
                                  "max-body = 11\n"
                                  "\tdb\t=\t/tmp/x.db\n"
                                  "listen=127.0.0.1:9001\r\n"
                                  "upstream = node 'my server.js' --flag=x\n"
                                  "upstream-env = A=1 B=\"two words\"\n"
                                  "stdio = 1\n"
                                  "allowed-hosts =\n"
                                  "log-level = warn");
    CHECK_INT(LOAD("--config", (char *)path), 0);
    CHECK_STR(err, "");
    CHECK_STR(cfg.config_file, path);
    CHECK_INT(cfg.max_body, 11);
    CHECK_STR(cfg.db, "/tmp/x.db");
    CHECK_STR(cfg.listen, "127.0.0.1:9001");
    CHECK_INT(cfg.port, 9001);
    CHECK_STR(cfg.upstream, "node 'my server.js' --flag=x");
    CHECK_STR(cfg.upstream_env, "A=1 B=\"two words\"");
    CHECK_INT(cfg.stdio, 1);
    CHECK_STR(cfg.allowed_hosts, "");
    CHECK_STR(cfg.log_level, "warn"); /* the last line needs no LF */

    /* --config=PATH and MCPD_CONFIG name the file too. */
    write_file("max-body = 12\n");
    CHECK_INT(LOAD((char *)"--config=/dev/null", "--stdio"), 0); /* an empty file */
    CHECK_INT(cfg.max_body, 4194304);
    char arg[128];
    snprintf(arg, sizeof arg, "--config=%s", path);
    CHECK_INT(LOAD(arg), 0);
    CHECK_INT(cfg.max_body, 12);
    setenv("MCPD_CONFIG", path, 1);
    CHECK_INT(LOAD0(), 0);
    CHECK_INT(cfg.max_body, 12);
    CHECK_STR(cfg.config_file, path);
    /* The command line's --config wins over MCPD_CONFIG. */
    CHECK_INT(LOAD("--config", "/dev/null"), 0);
    CHECK_INT(cfg.max_body, 4194304);
    CHECK_STR(cfg.config_file, "/dev/null");
    clear_env();

    struct {
        const char *content, *err; /* err after "<path>:" */
    } bad[] = {
        {"max-body = 1\nbogus line\n", "2: expected key = value"},
        {"stdio\n", "1: expected key = value"},
        {"nope = 1\n", "1: unknown setting 'nope'"},
        {"max_body = 1\n", "1: unknown setting 'max_body'"},
        {"--max-body = 1\n", "1: unknown setting '--max-body'"},
        {"MAX-BODY = 1\n", "1: unknown setting 'MAX-BODY'"},
        {"= 5\n", "1: unknown setting ''"},
        {"\n\n# c\nmax-body = x\n", "4: max-body needs a non-negative number, got 'x'"},
        {"max-body =\n", "1: max-body needs a non-negative number, got ''"},
        {"stdio = yes\n", "1: stdio needs a non-negative number, got 'yes'"},
        {"max-body = -3\r\n", "1: max-body needs a non-negative number, got '-3'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(bad[i].content);
        char want[256];
        snprintf(want, sizeof want, "%s:%s", path, bad[i].err);
        CHECK_INT(LOAD("--config", (char *)path), -1);
        CHECK_STR(err, want);
    }
    /* Errors other than the file's own come after it is read. */
    write_file("reply-mode = xml\n");
    CHECK_INT(LOAD("--config", (char *)path), -1);
    CHECK_STR(err, "--reply-mode must be auto, json or sse, got 'xml'");
    /* A file that cannot be read. */
    CHECK_INT(LOAD("--config", "/nonexistent/mcpd.conf"), -1);
    CHECK_STR(err, "cannot read config file /nonexistent/mcpd.conf: No such file or directory");
    setenv("MCPD_CONFIG", "/nonexistent/env.conf", 1);
    CHECK_INT(LOAD("--help"), -1);
    CHECK_STR(err, "cannot read config file /nonexistent/env.conf: No such file or directory");
    clear_env();
}

/* file < environment < command line, per setting. */
static void test_precedence(void)
{
    const char *path = write_file("max-body = 1\n"
                                  "max-workers = 1\n"
                                  "log-level = debug\n"
                                  "listen = 127.0.0.1:1\n"
                                  "stdio = 1\n");
    setenv("MCPD_CONFIG", path, 1);
    setenv("MCPD_MAX_BODY", "2", 1);
    setenv("MCPD_LISTEN", "127.0.0.1:2", 1);
    setenv("MCPD_STDIO", "0", 1);
    CHECK_INT(LOAD("--max-body=3"), 0);
    CHECK_INT(cfg.max_body, 3);        /* argv over env over file */
    CHECK_INT(cfg.max_workers, 1);     /* only in the file */
    CHECK_STR(cfg.log_level, "debug"); /* only in the file */
    CHECK_INT(cfg.port, 2);            /* env over file */
    CHECK_INT(cfg.stdio, 0);           /* env's 0 over the file's 1 */
    CHECK_INT(LOAD0(), 0);
    CHECK_INT(cfg.max_body, 2);
    CHECK_INT(LOAD("--stdio"), 0);
    CHECK_INT(cfg.stdio, 1);
    unsetenv("MCPD_MAX_BODY");
    CHECK_INT(LOAD0(), 0);
    CHECK_INT(cfg.max_body, 1);
    /* A bad value in a lower source fails even when a higher one would
     * replace it: each source is checked as it is read. */
    setenv("MCPD_MAX_BODY", "bad", 1);
    CHECK_INT(LOAD("--max-body=5"), -1);
    CHECK_STR(err, "MCPD_MAX_BODY: max-body needs a non-negative number, got 'bad'");
    /* But a setting's final value alone decides the checks made at the end. */
    unsetenv("MCPD_MAX_BODY");
    setenv("MCPD_REPLY_MODE", "xml", 1);
    CHECK_INT(LOAD("--reply-mode=sse"), 0);
    CHECK_STR(cfg.reply_mode, "sse");
    clear_env();
}

static void test_usage(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!CHECK(f != NULL))
        return;
    config_usage(f);
    fclose(f);
    CHECK(strncmp(text, "usage: mcpd [options]\n", 22) == 0);
    /* Every option appears once, with VALUE unless it is a flag, and the
     * default where there is one. */
    static const char *const lines[] = {
        "  --listen VALUE ",
        "(default 127.0.0.1:8080)\n",
        "  --db VALUE ",
        "(default ./data/mcpd.db)\n",
        "  --config VALUE ",
        "  --max-sessions-per-principal VALUE ",
        "(default 1000)\n",
        "  --upstream VALUE ",
        "  --upstream-mode VALUE ",
        "(default per-session)\n",
        "  --stdio  ",
        "  --allow-unauthenticated  ",
        "  --help  ",
        "  --version  ",
        "\nEndpoints: POST/GET/DELETE /mcp",
        "Exit status: 0 on success, 2 on bad usage, 1 on any other failure.\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        const char *at = strstr(text, lines[i]);
        if (!check_record(at != NULL, __FILE__, __LINE__, lines[i]))
            continue;
        if (strncmp(lines[i], "  --", 4) == 0)
            check_record(strstr(at + 1, lines[i]) == NULL, __FILE__, __LINE__, lines[i]);
    }
    CHECK(strstr(text, "--stdio VALUE") == NULL);
    CHECK(strstr(text, "(default 0)\n") != NULL);     /* sse-poll-ms */
    CHECK(strstr(text, "print this help\n") != NULL); /* flags print no default */
    /* One option line per setting: 61 settings. */
    int options = 0;
    for (const char *p = text; (p = strstr(p, "\n  --")) != NULL; p++)
        options++;
    CHECK_INT(options, 61);
    free(text);
}

/* Once bugs (found by these tests, fixed): trailing blanks after a value
 * were kept ("max-body = 5 " refused, "db = ./x.db<TAB>" a file name with
 * a tab), and lines over 1023 bytes were read in pieces, so the tail of a
 * long upstream line became a setting of its own. */
static void file_blanks_and_long_lines(void)
{
    const char *path = write_file("max-body = 5 \n");
    CHECK_INT(LOAD("--config", (char *)path), 0);
    CHECK_INT(cfg.max_body, 5);
    write_file("db = ./x.db\t\n");
    CHECK_INT(LOAD("--config", (char *)path), 0);
    CHECK_STR(cfg.db, "./x.db");

    char line[1400];
    memset(line, 'x', sizeof line);
    memcpy(line, "upstream = ", 11);
    memcpy(line + 1023, "max-body=7\n", 12);
    write_file(line);
    CHECK_INT(LOAD("--config", (char *)path), 0);
    CHECK_INT(strlen(cfg.upstream), 1033 - 11);
    CHECK_INT(cfg.max_body, 4194304);
}

int main(void)
{
    snprintf(file_path, sizeof file_path, "/tmp/test_config.%ld.conf", (long)getpid());
    clear_env();
    test_split();
    test_split_growth();
    test_defaults();
    test_argv_forms();
    test_usage_errors();
    test_oauth();
    test_listen();
    test_tcp_listen();
    test_udp_listen();
    test_env();
    test_file();
    test_precedence();
    test_usage();
    file_blanks_and_long_lines();
    config_free(&cfg);
    unlink(file_path);
    return check_summary();
}
