/* config — see config.h. */
#include "config.h"

#include "cmdline.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define S(field) offsetof(struct config, field)

static const struct cmdline_option settings[] = {
    {"listen", CMDLINE_STR, S(listen), "127.0.0.1:8080", "HOST:PORT to serve HTTP on", NULL},
    {"db", CMDLINE_STR, S(db), "./data/mcpd.db",
     "SQLite database file (created with its folder); :memory: for a throwaway store; or a "
     "PostgreSQL connection string (postgres://user@host:port/db, or key=value with host= or "
     "dbname=) shared by several mcpd; for PostgreSQL the environment's MCPD_DB_WRITERS and "
     "MCPD_DB_READERS (1 to 64) size the pool and MCPD_DB_TIMEOUT_MS (100 to 600000) bounds "
     "a call's silence",
     NULL},
    {"config", CMDLINE_STR, S(config_file), NULL, "config file of `key = value` lines", NULL},
    {"log-level", CMDLINE_STR, S(log_level), "info", "debug, info, warn or error", NULL},
    {"reply-mode", CMDLINE_STR, S(reply_mode), "auto",
     "auto (JSON for single-message replies, SSE otherwise), json or sse", NULL},
    {"allowed-hosts", CMDLINE_STR, S(allowed_hosts), "localhost,127.0.0.1,[::1]",
     "Host header names accepted (DNS-rebinding protection); * for any", NULL},
    {"allowed-origins", CMDLINE_STR, S(allowed_origins), "localhost,127.0.0.1,[::1]",
     "Origin host names or full origins accepted; * for any", NULL},
    {"sse-poll-ms", CMDLINE_INT, S(sse_poll_ms), "0",
     "close SSE connections of 2025-11-25 clients after this long (they resume); 0 = never", NULL},
    {"sse-retry-ms", CMDLINE_INT, S(sse_retry_ms), "1000",
     "the retry: hint sent to polling clients", NULL},
    {"keepalive-ms", CMDLINE_INT, S(keepalive_ms), "15000", "SSE keepalive comment interval", NULL},
    {"session-idle-ms", CMDLINE_INT, S(session_idle_ms), "1800000",
     "expire sessions idle this long", NULL},
    {"stream-retention-ms", CMDLINE_INT, S(stream_retention_ms), "300000",
     "keep ended streams (for resumption) this long", NULL},
    {"session-max-bytes", CMDLINE_INT, S(session_max_bytes), "67108864",
     "stored message bytes a session may hold", NULL},
    {"max-sessions", CMDLINE_INT, S(max_sessions), "10000",
     "live sessions at most, all clients together (503 beyond); 0 = no cap", NULL},
    {"max-sessions-per-principal", CMDLINE_INT, S(max_sessions_per_principal), "1000",
     "live sessions one token may hold (with --auth token); 429 beyond; 0 = no cap", NULL},
    {"max-init-params", CMDLINE_INT, S(max_init_params), "65536",
     "bytes of initialize params a session may store (413 beyond); 0 = no cap", NULL},
    {"log-retention-ms", CMDLINE_INT, S(log_retention_ms), "86400000",
     "rows of the logs table are kept this long", NULL},
    {"log-max-rows", CMDLINE_INT, S(log_max_rows), "100000",
     "the logs table keeps at most this many rows (the newest); 0 = no limit", NULL},
    {"max-body", CMDLINE_INT, S(max_body), "4194304", "largest POST body accepted (413 beyond)",
     NULL},
    {"ws-max-message", CMDLINE_INT, S(ws_max_message), "1048576", "largest WebSocket message",
     NULL},
    {"ws-ping-ms", CMDLINE_INT, S(ws_ping_ms), "15000", "WebSocket ping interval", NULL},
    {"max-connections", CMDLINE_INT, S(max_connections), "16384",
     "concurrent HTTP connections (503 beyond)", NULL},
    {"max-connections-per-ip", CMDLINE_INT, S(max_connections_per_ip), "256",
     "concurrent HTTP connections per client address (429 beyond); 0 = no limit", NULL},
    {"request-timeout-ms", CMDLINE_INT, S(request_timeout_ms), "30000",
     "a request (headers and body) must arrive within this long of the connection opening or "
     "of the previous response, and a client that stops reading a response is cut after as "
     "long; 0 = no limit",
     NULL},
    {"tcp-listen", CMDLINE_STR, S(tcp_listen), NULL,
     "HOST:PORT to serve MCP on over raw TCP (NDJSON or Content-Length, detected; README "
     "\"TCP wire rules\"); off by default; the HTTP caps and --auth apply",
     NULL},
    {"tcp-idle-ms", CMDLINE_INT, S(tcp_idle_ms), "300000",
     "close a TCP connection that sent no complete message and has nothing in flight for this "
     "long",
     NULL},
    {"tcp-handshake-ms", CMDLINE_INT, S(tcp_handshake_ms), "10000",
     "close a TCP connection whose first message (with --auth token: a successful "
     "mcpd/connect) has not arrived within this long",
     NULL},
    {"udp-listen", CMDLINE_STR, S(udp_listen), NULL,
     "HOST:PORT to serve MCP on over UDP (one message per datagram, made reliable; README "
     "\"UDP wire rules\"); off by default; the HTTP caps and --auth apply",
     NULL},
    {"udp-idle-ms", CMDLINE_INT, S(udp_idle_ms), "300000",
     "drop a UDP peer that sent no datagram and has nothing in flight for this long", NULL},
    {"udp-max-datagram", CMDLINE_INT, S(udp_max_datagram), "1200",
     "largest UDP payload mcpd sends (a larger message goes in fragments); at least 256", NULL},
    {"udp-rate-per-ip", CMDLINE_INT, S(udp_rate_per_ip), "2000",
     "UDP datagrams a second taken from one address (more are dropped unread); 0 = no limit", NULL},
    {"trusted-proxies", CMDLINE_STR, S(trusted_proxies), NULL,
     "addresses and networks (CIDR; or loopback, private) whose X-Forwarded-For names the client",
     NULL},
    {"max-workers", CMDLINE_INT, S(max_workers), "512",
     "request handlers that may wait (fibers on the event loop) running at once; more queue", NULL},
    {"loop-threads", CMDLINE_INT, S(loop_threads), "2",
     "event-loop threads serving WebSocket connections, push writers and upstream children's "
     "pipes (however many connections or children)",
     NULL},
    {"max-inflight-per-session", CMDLINE_INT, S(max_inflight_per_session), "128",
     "requests one session may have in flight (running handlers and waiting long-polls); "
     "429 beyond; 0 = no cap",
     NULL},
    {"shutdown-grace-ms", CMDLINE_INT, S(shutdown_grace_ms), "5000",
     "on SIGTERM, how long running requests may take to finish", NULL},
    {"upstream", CMDLINE_STR, S(upstream), NULL,
     "'CMD ARGS...': serve this stdio MCP server instead of the built-in tools", NULL},
    {"upstream-mode", CMDLINE_STR, S(upstream_mode), "per-session",
     "per-session (a child per session) or shared (a pool for all sessions)", NULL},
    {"upstream-pool", CMDLINE_INT, S(upstream_pool), "2", "children in shared mode", NULL},
    {"upstream-cwd", CMDLINE_STR, S(upstream_cwd), NULL, "working directory of the upstream", NULL},
    {"upstream-env", CMDLINE_STR, S(upstream_env), NULL,
     "'NAME=VALUE ...' added to its environment", NULL},
    {"upstream-log-rate", CMDLINE_INT, S(upstream_log_rate), "20",
     "stderr lines and malformed messages of one upstream logged per second (bursts of 10x); "
     "the rest are counted; 0 = no limit",
     NULL},
    {"upstream-max", CMDLINE_INT, S(upstream_max), "64", "upstream processes running at most",
     NULL},
    {"upstream-idle-ms", CMDLINE_INT, S(upstream_idle_ms), "300000",
     "stop a session's upstream idle this long (restarted on its next request); at the "
     "--upstream-max cap, one idle for 10 s (or this, if shorter) gives way to a new session; "
     "0 = never",
     NULL},
    {"upstream-start-timeout-ms", CMDLINE_INT, S(upstream_start_timeout_ms), "10000",
     "how long an upstream may take to answer initialize", NULL},
    {"upstream-max-pending", CMDLINE_INT, S(upstream_max_pending), "16",
     "requests (roots, sampling...) an upstream may have waiting for the client at once; "
     "more are refused at once",
     NULL},
    {"upstream-relay-timeout-ms", CMDLINE_INT, S(upstream_relay_timeout_ms), "300000",
     "how long an upstream's request (roots, sampling, elicitation) waits for the client's "
     "answer; for a 2026-07-28 client, how long its held call waits for the retry that "
     "answers",
     NULL},
    {"replica-lease-ms", CMDLINE_INT, S(replica_lease_ms), "5000",
     "with several mcpd on one PostgreSQL database: a process silent this long (at least 1000) "
     "is dead, and "
     "another ends its running calls (their streams get an error) and takes over its sessions",
     NULL},
    {"stdio", CMDLINE_FLAG, S(stdio), "0",
     "serve MCP on stdin/stdout (NDJSON or Content-Length, detected) instead of HTTP; "
     "--max-body limits a message",
     NULL},
    {"auth", CMDLINE_STR, S(auth), "none",
     "none, or token: every request needs a bearer token issued by mcp-admin tokens add; "
     "oauth: a JWT access token from --oauth-issuer; token,oauth: either",
     NULL},
    {"oauth-issuer", CMDLINE_STR, S(oauth_issuer), NULL,
     "with --auth oauth: the authorization server's issuer URL (its keys are found through "
     "its OpenID or RFC 8414 metadata)",
     NULL},
    {"oauth-resource", CMDLINE_STR, S(oauth_resource), NULL,
     "with --auth oauth: this server's resource identifier, which tokens must name in aud; "
     "default http://HOST:PORT/mcp from --listen (set it to the public URL behind a proxy)",
     NULL},
    {"oauth-audience", CMDLINE_STR, S(oauth_audience), NULL,
     "with --auth oauth: the value a token's aud must hold, when the provider puts something "
     "else there than the resource (Entra ID: the API's application ID); default "
     "--oauth-resource",
     NULL},
    {"oauth-introspection-url", CMDLINE_STR, S(oauth_introspection_url), NULL,
     "with --auth oauth: the authorization server's introspection endpoint (RFC 7662), to "
     "accept opaque access tokens too; needs --oauth-client-id and --oauth-client-secret",
     NULL},
    {"oauth-client-id", CMDLINE_STR, S(oauth_client_id), NULL,
     "with --oauth-introspection-url: mcpd's client ID at the authorization server", NULL},
    {"oauth-client-secret", CMDLINE_STR, S(oauth_client_secret), NULL,
     "with --oauth-introspection-url: mcpd's client secret (better given as "
     "MCPD_OAUTH_CLIENT_SECRET or in the config file than on the command line)",
     NULL},
    {"oauth-scopes", CMDLINE_STR, S(oauth_scopes), NULL,
     "with --auth oauth: space-separated scopes every token must hold (403 "
     "insufficient_scope otherwise)",
     NULL},
    {"bootstrap-token-file", CMDLINE_STR, S(bootstrap_token_file), NULL,
     "a file holding a token to accept as the one named 'bootstrap' (only its hash is stored)",
     NULL},
    {"allow-unauthenticated", CMDLINE_FLAG, S(allow_unauthenticated), "0",
     "allow listening on a non-loopback address without authentication", NULL},
    {"help", CMDLINE_FLAG, S(help), "0", "print this help", NULL},
    {"version", CMDLINE_FLAG, S(version), "0", "print the version", NULL},
};
#define NSETTINGS (sizeof settings / sizeof settings[0])

static int load_file(struct config *cfg, const char *path, char *err, size_t errcap)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errcap, "cannot read config file %s: %s", path, strerror(errno));
        return -1;
    }
    /* Whole lines, however long (an upstream command can be): a line read
     * in pieces would cut a value short or make its tail a setting. */
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, rc = 0;
    while (rc == 0 && getline(&line, &cap, f) >= 0) {
        lineno++;
        char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\n' || !*p)
            continue;
        char *eq = strchr(p, '=');
        if (!eq) {
            snprintf(err, errcap, "%s:%d: expected key = value", path, lineno);
            rc = -1;
            break;
        }
        char *kend = eq;
        while (kend > p && (kend[-1] == ' ' || kend[-1] == '\t'))
            kend--;
        char *v = eq + 1 + strspn(eq + 1, " \t");
        v[strcspn(v, "\r\n")] = '\0';
        /* Blanks around a value are not part of it, at either end. */
        size_t vl = strlen(v);
        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            v[--vl] = '\0';
        const struct cmdline_option *s = cmdline_find(settings, NSETTINGS, p, (size_t)(kend - p));
        if (!s) {
            snprintf(err, errcap, "%s:%d: unknown setting '%.*s'", path, lineno, (int)(kend - p),
                     p);
            rc = -1;
            break;
        }
        char source[300];
        snprintf(source, sizeof source, "%s:%d", path, lineno);
        rc = cmdline_set(s, cfg, v, source, err, errcap);
    }
    free(line);
    fclose(f);
    return rc;
}

static void env_name(const struct cmdline_option *s, char *out, size_t cap)
{
    size_t o = (size_t)snprintf(out, cap, "MCPD_");
    for (const char *p = s->name; *p && o + 1 < cap; p++)
        out[o++] = *p == '-' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    out[o] = '\0';
}

/* Splits the HOST:PORT ([v6]:PORT allowed) of option `opt` into host
 * (cap bytes) and port; "localhost" means 127.0.0.1. Refuses a
 * non-loopback host without authentication, as for every way in. */
static int parse_hostport(const struct config *cfg, const char *opt, const char *l, char *host,
                          size_t cap, int *port_out, char *err, size_t errcap)
{
    const char *colon = l[0] == '[' ? strstr(l, "]:") : strrchr(l, ':');
    if (!colon) {
        snprintf(err, errcap, "--%s needs HOST:PORT, got '%s'", opt, l);
        return -1;
    }
    const char *hs = l[0] == '[' ? l + 1 : l;
    size_t hlen = (size_t)(colon - hs);
    const char *ps = colon + (l[0] == '[' ? 2 : 1);
    char *end;
    long port = strtol(ps, &end, 10);
    if (hlen == 0 || hlen >= cap || *end || end == ps || port < 0 || port > 65535) {
        snprintf(err, errcap, "--%s needs HOST:PORT, got '%s'", opt, l);
        return -1;
    }
    memcpy(host, hs, hlen);
    host[hlen] = '\0';
    if (strcmp(host, "localhost") == 0)
        snprintf(host, cap, "127.0.0.1");
    *port_out = (int)port;
    struct in_addr a4;
    struct in6_addr a6;
    int loop4 = inet_pton(AF_INET, host, &a4) == 1;
    int loop6 = !loop4 && inet_pton(AF_INET6, host, &a6) == 1;
    if (!loop4 && !loop6) {
        snprintf(err, errcap, "--%s host must be a numeric address or localhost, got '%s'", opt,
                 host);
        return -1;
    }
    int loopback = loop4 ? (ntohl(a4.s_addr) >> 24) == 127 : IN6_IS_ADDR_LOOPBACK(&a6);
    if (!loopback && strcmp(cfg->auth, "none") == 0 && !cfg->allow_unauthenticated) {
        snprintf(err, errcap,
                 "refusing to listen on non-loopback %s without authentication; pass "
                 "--auth token (tokens from mcp-admin), or --allow-unauthenticated",
                 host);
        return -1;
    }
    return 0;
}

static int parse_listen(struct config *cfg, char *err, size_t errcap)
{
    static const char *const modes[] = {"none", "token", "oauth", "token,oauth", "oauth,token"};
    int known = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        known |= strcmp(cfg->auth, modes[i]) == 0;
    if (!known) {
        snprintf(err, errcap, "--auth must be none, token, oauth or token,oauth, got '%s'",
                 cfg->auth);
        return -1;
    }
    if (parse_hostport(cfg, "listen", cfg->listen, cfg->host, sizeof cfg->host, &cfg->port, err,
                       errcap) != 0)
        return -1;
    if (strstr(cfg->auth, "oauth")) {
        if (!cfg->oauth_issuer || strncmp(cfg->oauth_issuer, "http", 4) != 0 ||
            !strstr(cfg->oauth_issuer, "://")) {
            snprintf(err, errcap, "--auth oauth needs --oauth-issuer URL");
            return -1;
        }
        if (!cfg->oauth_resource) {
            /* The /mcp URL as clients on this host reach it. */
            char url[128];
            snprintf(url, sizeof url,
                     strchr(cfg->host, ':') ? "http://[%s]:%d/mcp" : "http://%s:%d/mcp", cfg->host,
                     cfg->port);
            cfg->oauth_resource = strdup(url);
            if (!cfg->oauth_resource) {
                snprintf(err, errcap, "out of memory");
                return -1;
            }
        }
        if (cfg->oauth_introspection_url && *cfg->oauth_introspection_url &&
            (strncmp(cfg->oauth_introspection_url, "http", 4) != 0 ||
             !strstr(cfg->oauth_introspection_url, "://") || !cfg->oauth_client_id ||
             !*cfg->oauth_client_id || !cfg->oauth_client_secret || !*cfg->oauth_client_secret)) {
            snprintf(err, errcap,
                     "--oauth-introspection-url needs an http(s) URL, --oauth-client-id and "
                     "--oauth-client-secret");
            return -1;
        }
        if (strncmp(cfg->oauth_resource, "http", 4) != 0 || !strstr(cfg->oauth_resource, "://")) {
            snprintf(err, errcap, "--oauth-resource must be an http(s) URL");
            return -1;
        }
    }
    if (cfg->tcp_listen && parse_hostport(cfg, "tcp-listen", cfg->tcp_listen, cfg->tcp_host,
                                          sizeof cfg->tcp_host, &cfg->tcp_port, err, errcap) != 0)
        return -1;
    if (cfg->udp_listen && parse_hostport(cfg, "udp-listen", cfg->udp_listen, cfg->udp_host,
                                          sizeof cfg->udp_host, &cfg->udp_port, err, errcap) != 0)
        return -1;
    return 0;
}

int config_load(struct config *cfg, int argc, char **argv, char *err, size_t errcap)
{
    memset(cfg, 0, sizeof *cfg);
    if (cmdline_defaults(settings, NSETTINGS, cfg, err, errcap) != 0)
        return -1;

    /* The config file's path may come from the environment or argv. */
    const char *file = getenv("MCPD_CONFIG");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            file = argv[i + 1];
        else if (strncmp(argv[i], "--config=", 9) == 0)
            file = argv[i] + 9;
    }
    if (file && load_file(cfg, file, err, errcap) != 0)
        return -1;

    for (size_t i = 0; i < NSETTINGS; i++) {
        char name[64];
        env_name(&settings[i], name, sizeof name);
        const char *v = getenv(name);
        if (v && cmdline_set(&settings[i], cfg, v, name, err, errcap) != 0)
            return -1;
    }

    int rc = cmdline_parse(settings, NSETTINGS, cfg, argc, argv, 0, NULL, NULL, err, errcap);
    if (rc == CMDLINE_UNKNOWN || rc == CMDLINE_UNEXPECTED) {
        size_t len = strlen(err);
        snprintf(err + len, errcap - len, " (see --help)");
    }
    if (rc != CMDLINE_OK)
        return -1;
    if (cfg->help || cfg->version)
        return 0;

    if (strcmp(cfg->reply_mode, "auto") && strcmp(cfg->reply_mode, "json") &&
        strcmp(cfg->reply_mode, "sse")) {
        snprintf(err, errcap, "--reply-mode must be auto, json or sse, got '%s'", cfg->reply_mode);
        return -1;
    }
    if (strcmp(cfg->upstream_mode, "per-session") && strcmp(cfg->upstream_mode, "shared")) {
        snprintf(err, errcap, "--upstream-mode must be per-session or shared, got '%s'",
                 cfg->upstream_mode);
        return -1;
    }
    if (cfg->upstream) {
        char **words = config_split_words(cfg->upstream, 1, err, errcap);
        if (!words)
            return -1;
        config_words_free(words);
    }
    if (strcmp(cfg->log_level, "debug") && strcmp(cfg->log_level, "info") &&
        strcmp(cfg->log_level, "warn") && strcmp(cfg->log_level, "error")) {
        snprintf(err, errcap, "--log-level must be debug, info, warn or error, got '%s'",
                 cfg->log_level);
        return -1;
    }
    if (cfg->keepalive_ms < 100 || cfg->session_idle_ms < 100 || cfg->stream_retention_ms < 100 ||
        cfg->max_workers < 1 || cfg->loop_threads < 1 || cfg->max_connections < 1 ||
        cfg->max_body < 1 || cfg->tcp_idle_ms < 100 || cfg->tcp_handshake_ms < 100 ||
        cfg->udp_idle_ms < 100 || cfg->udp_rate_per_ip < 0) {
        snprintf(err, errcap,
                 "a limit is too small (timeouts must be at least 100 ms, counts at "
                 "least 1)");
        return -1;
    }
    /* Processes beat once a second: a shorter lease would count live ones
     * dead between two beats and end their calls. */
    if (cfg->replica_lease_ms < 1000) {
        snprintf(err, errcap,
                 "--replica-lease-ms must be at least 1000 (a process beats once a "
                 "second), got %lld",
                 (long long)cfg->replica_lease_ms);
        return -1;
    }
    if (cfg->udp_max_datagram < 256 || cfg->udp_max_datagram > 65507) {
        snprintf(err, errcap, "--udp-max-datagram must be from 256 to 65507, got %lld",
                 (long long)cfg->udp_max_datagram);
        return -1;
    }
    if (cfg->loop_threads > 1024) {
        snprintf(err, errcap, "--loop-threads must be at most 1024");
        return -1;
    }
    return parse_listen(cfg, err, errcap);
}

void config_free(struct config *cfg)
{
    cmdline_free(settings, NSETTINGS, cfg);
}

void config_usage(FILE *out)
{
    fprintf(
        out,
        "usage: mcpd [options]\n\n"
        "Serves the Model Context Protocol over Streamable HTTP, WebSocket,\n"
        "long-polling, raw TCP or stdio, keeping sessions and every server message in SQLite.\n\n"
        "Options (also settable as MCPD_<NAME> in the environment or as\n"
        "`name = value` in the --config file; the command line wins):\n");
    cmdline_usage(out, settings, NSETTINGS);
    fprintf(
        out,
        "\nEndpoints: POST/GET/DELETE /mcp, GET /mcp/ws (WebSocket), GET/HEAD /healthz, /readyz,\n"
        "/metrics; with --tcp-listen, MCP over raw TCP.\n"
        "Exit status: 0 on success, 2 on bad usage, 1 on any other failure.\n");
}

/* Appends c to the word being built. */
static int word_put(char **w, size_t *len, size_t *cap, char c)
{
    if (*len + 2 > *cap) {
        size_t ncap = *cap ? *cap * 2 : 32;
        char *n = realloc(*w, ncap);
        if (!n)
            return -1;
        *w = n;
        *cap = ncap;
    }
    (*w)[(*len)++] = c;
    (*w)[*len] = '\0';
    return 0;
}

char **config_split_words(const char *line, int nonempty, char *err, size_t errcap)
{
    err[0] = '\0';
    size_t n = 0, vcap = 8;
    char **v = calloc(vcap, sizeof *v);
    char *w = NULL;
    size_t len = 0, cap = 0;
    int in_word = 0, ok = v != NULL;
    for (const char *p = line; ok && *p; p++) {
        if (*p == ' ' || *p == '\t' || *p == '\n') {
            if (in_word) {
                if (n + 2 > vcap) {
                    char **nv = realloc(v, (vcap *= 2) * sizeof *v);
                    ok = nv != NULL;
                    if (ok)
                        v = nv;
                }
                if (ok) {
                    v[n++] = w ? w : strdup("");
                    v[n] = NULL;
                    w = NULL;
                    len = cap = 0;
                    in_word = 0;
                }
            }
            continue;
        }
        in_word = 1;
        if (*p == '\'') {
            const char *end = strchr(p + 1, '\'');
            if (!end) {
                snprintf(err, errcap, "unbalanced ' in: %s", line);
                ok = 0;
                break;
            }
            for (p++; ok && p < end; p++)
                ok = word_put(&w, &len, &cap, *p) == 0;
            p = end;
        } else if (*p == '"') {
            for (p++; ok && *p && *p != '"'; p++) {
                if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                    p++;
                ok = word_put(&w, &len, &cap, *p) == 0;
            }
            if (ok && *p != '"') {
                snprintf(err, errcap, "unbalanced \" in: %s", line);
                ok = 0;
                break;
            }
        } else if (*p == '\\' && p[1]) {
            ok = word_put(&w, &len, &cap, *++p) == 0;
        } else {
            ok = word_put(&w, &len, &cap, *p) == 0;
        }
    }
    if (ok && in_word) {
        if (n + 2 > vcap) {
            char **nv = realloc(v, (vcap + 2) * sizeof *v);
            ok = nv != NULL;
            if (ok)
                v = nv;
        }
        if (ok) {
            v[n++] = w ? w : strdup("");
            v[n] = NULL;
            w = NULL;
        }
    }
    free(w);
    if (ok && nonempty && n == 0) {
        snprintf(err, errcap, "the command is empty");
        ok = 0;
    }
    if (!ok) {
        if (!err[0])
            snprintf(err, errcap, "out of memory");
        config_words_free(v);
        return NULL;
    }
    return v;
}

void config_words_free(char **words)
{
    for (char **p = words; p && *p; p++)
        free(*p);
    free(words);
}
