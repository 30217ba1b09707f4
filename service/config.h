/* config — mcpd's settings and where they come from.
 *
 * Every setting has one entry in a table (name, environment variable, type,
 * default, help: a cmdline.h table, which also walks argv as mcp-bridge's
 * and mcp-admin's do), and the table drives all three sources, in rising
 * priority: the config file (`key = value` lines, keys named like the long
 * options without dashes), the MCPD_* environment, and the command line.
 * `mcpd --help` prints the same table, so the documentation cannot drift
 * from the code. */
#ifndef MCPD_CONFIG_H
#define MCPD_CONFIG_H

#include <stdint.h>
#include <stdio.h>

struct config {
    char *listen;
    char *db;
    char *config_file;
    char *log_level;
    char *reply_mode;
    char *allowed_hosts;
    char *allowed_origins;
    int64_t sse_poll_ms;
    int64_t sse_retry_ms;
    int64_t keepalive_ms;
    int64_t session_idle_ms;
    int64_t stream_retention_ms;
    int64_t session_max_bytes;
    int64_t max_sessions;
    int64_t max_sessions_per_principal;
    int64_t max_init_params;
    int64_t max_body;
    int64_t ws_max_message;
    int64_t ws_ping_ms;
    int64_t max_connections;
    int64_t max_connections_per_ip;
    int64_t request_timeout_ms;
    char *tcp_listen; /* HOST:PORT for raw TCP, or NULL (off) */
    int64_t tcp_idle_ms;
    int64_t tcp_handshake_ms;
    char *udp_listen; /* HOST:PORT for UDP, or NULL (off) */
    int64_t udp_idle_ms;
    int64_t udp_max_datagram;
    int64_t udp_rate_per_ip;
    char *trusted_proxies; /* addresses and networks whose X-Forwarded-For is believed */
    int64_t max_workers;
    int64_t loop_threads;
    int64_t max_inflight_per_session;
    int64_t shutdown_grace_ms;
    char *upstream;      /* the command line of a stdio MCP server to put behind mcpd */
    char *upstream_mode; /* per-session | shared */
    char *upstream_cwd;
    char *upstream_env; /* NAME=VALUE words */
    int64_t upstream_pool;
    int64_t upstream_max;
    int64_t upstream_idle_ms;
    int64_t upstream_start_timeout_ms;
    int64_t upstream_max_pending;
    int64_t upstream_relay_timeout_ms;
    int64_t replica_lease_ms;
    int64_t upstream_log_rate;
    int64_t log_retention_ms;
    int64_t log_max_rows;
    char *auth; /* none | token | oauth | token,oauth */
    char *oauth_issuer;   /* the authorization server whose JWTs are accepted */
    char *oauth_resource; /* this server's resource identifier; derived from listen when NULL */
    char *oauth_scopes;   /* space-separated scopes every token must hold */
    char *oauth_audience; /* what aud must hold, when not the resource (Entra ID) */
    char *oauth_introspection_url; /* RFC 7662, for opaque tokens */
    char *oauth_client_id;         /* mcpd's credentials there */
    char *oauth_client_secret;
    char *bootstrap_token_file;
    int allow_unauthenticated;
    int stdio;
    int help;
    int version;
    /* derived from listen */
    char host[64];
    int port;
    /* derived from tcp_listen */
    char tcp_host[64];
    int tcp_port;
    /* derived from udp_listen */
    char udp_host[64];
    int udp_port;
};

/* Fills cfg from defaults, file, environment and argv. Returns 0, or -1
 * with a one-line message in err (bad usage: exit status 2). */
int config_load(struct config *cfg, int argc, char **argv, char *err, size_t errcap);
void config_free(struct config *cfg);

/* Splits a command line into words as a POSIX shell would for simple
 * cases: blanks separate words; '...' quotes literally; "..." quotes with
 * \ escaping " and \; \ outside quotes escapes the next character. No
 * expansion of any kind. Returns a NULL-terminated vector the caller frees
 * with config_words_free, or NULL with a message in err (unbalanced quote,
 * or no words when `nonempty`). */
char **config_split_words(const char *line, int nonempty, char *err, size_t errcap);
void config_words_free(char **words);
void config_usage(FILE *out);

#endif
