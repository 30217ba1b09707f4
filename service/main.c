/* mcpd — entry point: read the settings, open the store, start the core and
 * the HTTP transport, and wait for SIGTERM/SIGINT to shut down gracefully
 * (refuse new work, let running requests finish within a grace period, flush
 * the store, exit 0). */
#include "backend.h"
#include "builtin.h"
#include "auth.h"
#include "introspect.h"
#include "json_fetch.h"
#include "oauth.h"
#include "config.h"
#include "core.h"
#include "http.h"
#include "log.h"
#include "loop.h"
#include "malloc_tune.h"
#include "origin.h"
#include "replica.h"
#include "stdio_transport.h"
#include "store.h"
#include "tcp.h"
#include "udp.h"
#include "upstream.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* A descriptor 0-2 left closed by whoever started mcpd would be handed to
 * the next open (the database, a socket) and logs written to stderr would
 * land in it: hold them with /dev/null. */
static void guard_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        int n = open("/dev/null", O_RDWR);
        if (n >= 0 && n != fd) {
            dup2(n, fd);
            close(n);
        }
    }
}

/* Every client connection needs a descriptor: take the hard limit. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Descriptors kept for everything but client connections: the store's
 * three connections to the database, its log and shared memory, the
 * listening socket, stdio, and the pipes of each upstream child. */
#define FD_RESERVE 64
/* Memory mappings kept for everything but waiting connections' fibers. */
#define MAP_RESERVE 4096

/* The connection cap that `limit` resources allow when each connection
 * costs `per` of them: libmicrohttpd's own cap sits up to an eighth (at
 * most 1024) above ours so that mcpd can answer 503 there (conn_guard). */
static int64_t cap_within(int64_t limit, int64_t per)
{
    int64_t n = limit / per;
    int64_t headroom = n / 9 < 16 ? 16 : n / 9 > 1024 ? 1024 : n / 9;
    return n - headroom;
}

/* A connection costs a descriptor, and while its request waits (an open
 * GET stream, most of all) a fiber's stack: two memory mappings with its
 * guard page. With --tcp-listen the cap holds for HTTP and for TCP each
 * (tcp.h), and a TCP connection has two fibers (its reader and push's
 * writer), so a slot costs two descriptors and six mappings; with
 * --udp-listen a UDP peer (no descriptor of its own: the socket is shared)
 * adds two fibers, four mappings. A connection
 * past either limit would wait unanswered in the kernel's accept queue
 * instead of getting 503, so the cap comes down to what the process can
 * hold, and says so. */
static void fit_connection_cap(struct config *cfg)
{
    int64_t cap = cfg->max_connections;
    int tcp = cfg->tcp_listen != NULL;
    int64_t per_slot_maps = (tcp ? 6 : 2) + (cfg->udp_listen ? 4 : 0);
    const char *why = NULL;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        int64_t fds =
            (int64_t)rl.rlim_cur - FD_RESERVE - (cfg->upstream ? 4 * cfg->upstream_max : 0);
        if (cap_within(fds, tcp ? 2 : 1) < cap) {
            cap = cap_within(fds, tcp ? 2 : 1);
            why = tcp ? "the open-files limit (ulimit -n), shared by HTTP and TCP"
                      : "the open-files limit (ulimit -n)";
        }
    }
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    long long maps = 0;
    if (f) {
        if (fscanf(f, "%lld", &maps) == 1 && cap_within(maps - MAP_RESERVE, per_slot_maps) < cap) {
            cap = cap_within(maps - MAP_RESERVE, per_slot_maps);
            why = "vm.max_map_count";
        }
        fclose(f);
    }
    if (cap < 1)
        cap = 1;
    if (why && cap < cfg->max_connections) {
        log_event(LOG_WARN, NULL, "max_connections_lowered",
                  "--max-connections %lld lowered to %lld: %s allows no more (a thread, a "
                  "descriptor and two memory mappings per connection)",
                  (long long)cfg->max_connections, (long long)cap, why);
        cfg->max_connections = cap;
    }
}

static enum http_reply_mode reply_mode(const char *name)
{
    return strcmp(name, "json") == 0  ? HTTP_REPLY_JSON
           : strcmp(name, "sse") == 0 ? HTTP_REPLY_SSE
                                      : HTTP_REPLY_AUTO;
}

/* The built-in toolset, or the configured stdio upstream server. */
static int start_backend(const struct config *cfg, const struct backend_ops **ops, void **backend)
{
    if (!cfg->upstream) {
        *ops = builtin_backend_ops();
        *backend = builtin_backend_new();
        if (!*backend)
            fprintf(stderr, "mcpd: out of memory\n");
        return *backend ? 0 : -1;
    }
    char msg[256];
    char **argv = config_split_words(cfg->upstream, 1, msg, sizeof msg);
    char **env =
        argv ? config_split_words(cfg->upstream_env ? cfg->upstream_env : "", 0, msg, sizeof msg)
             : NULL;
    char *why = NULL;
    if (argv && env) {
        struct upstream_config uc = {
            .argv = argv,
            .env = env,
            .cwd = cfg->upstream_cwd,
            .shared = strcmp(cfg->upstream_mode, "shared") == 0,
            .pool = (int)cfg->upstream_pool,
            .max_children = (int)cfg->upstream_max,
            .idle_ms = cfg->upstream_idle_ms,
            .start_timeout_ms = cfg->upstream_start_timeout_ms,
            .relay_timeout_ms = cfg->upstream_relay_timeout_ms,
            .max_pending = (int)cfg->upstream_max_pending,
            .max_message = (size_t)cfg->max_body,
            .log_rate = (double)cfg->upstream_log_rate,
        };
        *ops = upstream_backend_ops();
        *backend = upstream_backend_new(&uc, &why);
    }
    if (!*backend)
        fprintf(stderr, "mcpd: upstream: %s\n", why ? why : msg);
    free(why);
    config_words_free(argv);
    config_words_free(env);
    return *backend ? 0 : -1;
}

/* Signals are taken by sigwait (or stdio's signalfd) in the main thread
 * only; every thread started from here inherits the mask. SIGPIPE must never
 * kill the server when a client vanishes mid-write. */
static void block_signals(sigset_t *sigs)
{
    sigemptyset(sigs);
    sigaddset(sigs, SIGTERM);
    sigaddset(sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static int start_core(const struct config *cfg, struct store *st, const struct backend_ops *ops,
                      void *backend, char **why)
{
    struct core_config cc = {
        .session_idle_ms = cfg->session_idle_ms,
        .stream_retention_ms = cfg->stream_retention_ms,
        .session_max_bytes = cfg->session_max_bytes,
        .max_sessions = cfg->max_sessions,
        .max_init_params = cfg->max_init_params,
        .log_retention_ms = cfg->log_retention_ms,
        .log_max_rows = cfg->log_max_rows,
        .replica_lease_ms = cfg->replica_lease_ms,
        .max_workers = (int)cfg->max_workers,
        .max_inflight = cfg->max_inflight_per_session,
        .max_sessions_per_principal = cfg->max_sessions_per_principal,
        .server_name = "mcpd",
        .server_version = MCPD_VERSION,
    };
    return core_start(&cc, st, ops, backend, why);
}

/* MCP on stdin/stdout until EOF or a signal. stdout is the protocol
 * channel: no HTTP, and logs stay on stderr. */
static int serve_stdio(const struct config *cfg, const sigset_t *sigs)
{
    struct stdio_config sc = {.max_message = (size_t)cfg->max_body,
                              .grace_ms = cfg->shutdown_grace_ms};
    int status = stdio_serve(0, 1, &sc, sigs);
    loop_stop();
    core_stop(cfg->shutdown_grace_ms);
    core_cleanup();
    return status;
}

/* The --db value as logs show it: a PostgreSQL connection string may hold
 * a password, so of a URL only its host, port and database (between '@'
 * or "://" and '?'), and of a key=value string nothing. */
static const char *db_shown(const char *db)
{
    static char shown[256];
    if (!store_path_is_postgres(db))
        return db;
    const char *from = strstr(db, "://");
    if (!from)
        return "(a PostgreSQL key=value connection string)";
    const char *at = strrchr(db, '@');
    from = at ? at + 1 : from + 3;
    snprintf(shown, sizeof shown, "postgres://%.*s", (int)strcspn(from, "?"), from);
    return shown;
}

/* HTTP (and WebSocket) until SIGTERM or SIGINT. */
static int serve_http(const struct config *cfg, struct origin_policy *origins, const sigset_t *sigs,
                      char **why)
{
    struct http_config hc = {
        .host = cfg->host,
        .port = cfg->port,
        .max_body = (size_t)cfg->max_body,
        .reply_mode = reply_mode(cfg->reply_mode),
        .sse_poll_ms = cfg->sse_poll_ms,
        .keepalive_ms = cfg->keepalive_ms,
        .retry_ms = cfg->sse_retry_ms,
        .connection_limit = (unsigned)cfg->max_connections,
        .connection_limit_per_ip = (unsigned)cfg->max_connections_per_ip,
        .request_timeout_ms = cfg->request_timeout_ms,
        .trusted_proxies = cfg->trusted_proxies,
        .origins = origins,
        .ws_max_message = (size_t)cfg->ws_max_message,
        .ws_ping_ms = cfg->ws_ping_ms,
    };
    /* Made once: the settings it says do not change while serving. */
    char *metadata = oauth_enabled() ? oauth_resource_metadata() : NULL;
    hc.resource_metadata = metadata;
    struct tcp_config tc = {
        .host = cfg->tcp_host,
        .port = cfg->tcp_port,
        .max_message = (size_t)cfg->max_body,
        .max_connections = (unsigned)cfg->max_connections,
        .max_per_ip = (unsigned)cfg->max_connections_per_ip,
        .idle_ms = cfg->tcp_idle_ms,
        .handshake_ms = cfg->tcp_handshake_ms,
        .write_timeout_ms = cfg->request_timeout_ms,
        .auth_required = auth_required(),
    };
    struct udp_config uc = {
        .host = cfg->udp_host,
        .port = cfg->udp_port,
        .max_message = (size_t)cfg->max_body,
        .max_datagram = (size_t)cfg->udp_max_datagram,
        .max_peers = (unsigned)cfg->max_connections,
        .max_per_ip = (unsigned)cfg->max_connections_per_ip,
        .idle_ms = cfg->udp_idle_ms,
        .rate_per_ip = (double)cfg->udp_rate_per_ip,
        .auth_required = auth_required(),
    };
    /* The raw listeners first: once /healthz answers, every way in is
     * open (a client told "ready" must not find the TCP port closed). */
    const char *failed = NULL;
    if (oauth_enabled() && !metadata)
        failed = "out of memory";
    else if (cfg->tcp_listen && tcp_start(&tc, why) != 0)
        failed = "cannot listen on --tcp-listen";
    else if (cfg->udp_listen && udp_start(&uc, why) != 0)
        failed = "cannot listen on --udp-listen";
    else if (http_start(&hc, why) != 0)
        failed = "cannot start the HTTP server";
    if (failed) {
        fprintf(stderr, "mcpd: %s\n", *why ? *why : failed);
        core_stop(0);
        udp_stop();
        tcp_stop();
        loop_stop();
        core_cleanup();
        free(metadata);
        return 1;
    }
    log_event(LOG_INFO, NULL, "listening", "http://%s/mcp db=%s reply-mode=%s", cfg->listen,
              db_shown(cfg->db), cfg->reply_mode);
    int sig = 0;
    sigwait(sigs, &sig);
    log_event(LOG_INFO, NULL, "shutting_down", "signal %d", sig);
    core_stop(cfg->shutdown_grace_ms);
    udp_stop();  /* UDP peers end here, before the loop stops */
    tcp_stop();  /* TCP connections end here, before the loop stops */
    http_stop(); /* WebSocket sessions end here, before the loop stops */
    loop_stop();
    core_cleanup();
    free(metadata);
    return 0;
}

/* The event log's sink: each event also becomes a row of the logs table. */
static void log_to_store(void *ud, int64_t ts_ms, const char *level, const char *session,
                         const char *row)
{
    store_log(ud, ts_ms, level, session, row);
}

int main(int argc, char **argv)
{
    malloc_tune_reexec(argv);
    guard_std_fds();
    struct config cfg;
    char err[512];
    if (config_load(&cfg, argc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "mcpd: %s\n", err);
        config_free(&cfg);
        return 2;
    }
    if (cfg.help || cfg.version) {
        if (cfg.help)
            config_usage(stdout);
        else
            printf("mcpd %s\n", MCPD_VERSION);
        config_free(&cfg);
        return 0;
    }
    enum log_level level;
    log_level_parse(cfg.log_level, &level);
    log_set_level(level);
    raise_fd_limit();
    fit_connection_cap(&cfg);

    sigset_t sigs;
    block_signals(&sigs);

    int status = 1;
    struct store *st = NULL;
    void *backend = NULL;
    const struct backend_ops *ops = NULL;
    struct origin_policy *origins = NULL;
    char *why = NULL;
    if (store_open(cfg.db, &st, &why) != 0) {
        fprintf(stderr, "mcpd: %s\n", why ? why : "cannot open the store");
        goto out;
    }
    /* This process's run id: what it writes into a shared store (the
     * streams it owns, its node row) and what its signals carry. */
    store_set_run(st, replica_run());
    log_set_sink(log_to_store, st);
    if (strstr(cfg.auth, "oauth") && oauth_configure(cfg.oauth_issuer, cfg.oauth_resource,
                                                     cfg.oauth_audience, cfg.oauth_scopes) != 0) {
        fprintf(stderr, "mcpd: cannot set up OAuth\n");
        goto out;
    }
    if (strstr(cfg.auth, "oauth") && cfg.oauth_introspection_url && *cfg.oauth_introspection_url &&
        introspect_configure(cfg.oauth_introspection_url, cfg.oauth_client_id,
                             cfg.oauth_client_secret) != 0) {
        fprintf(stderr, "mcpd: cannot set up token introspection\n");
        goto out;
    }
    if (auth_configure(cfg.auth, st) != 0 ||
        (cfg.bootstrap_token_file && auth_bootstrap(cfg.bootstrap_token_file, &why) != 0)) {
        fprintf(stderr, "mcpd: %s\n", why ? why : "cannot set up authentication");
        goto out;
    }
    if (start_backend(&cfg, &ops, &backend) != 0)
        goto out;
    origins = origin_policy_new(cfg.allowed_hosts, cfg.allowed_origins);
    if (!origins) {
        fprintf(stderr, "mcpd: out of memory\n");
        goto out;
    }
    /* Connections' fibers (WebSocket, push writers): a fixed number of
     * threads, however many connections. */
    if (loop_start((int)cfg.loop_threads) != 0) {
        fprintf(stderr, "mcpd: cannot start the event loop: %s\n", strerror(errno));
        goto out;
    }
    if (start_core(&cfg, st, ops, backend, &why) != 0) {
        fprintf(stderr, "mcpd: %s\n", why ? why : "cannot start");
        goto out;
    }
    status = cfg.stdio ? serve_stdio(&cfg, &sigs) : serve_http(&cfg, origins, &sigs, &why);
out:
    loop_stop(); /* when serving never began */
    free(why);
    if (backend)
        ops->destroy(backend);
    origin_policy_free(origins);
    auth_shutdown();
    oauth_shutdown();
    introspect_shutdown();
    json_fetch_shutdown();
    log_set_sink(NULL, NULL);
    if (st && store_flush(st) != 0)
        status = 1;
    store_close(st);
    if (status == 0)
        log_event(LOG_INFO, NULL, "stopped", "clean shutdown");
    config_free(&cfg);
    return status;
}
