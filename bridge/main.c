/* mcp-bridge — stdio on one side (a desktop MCP client that spawned us), a
 * remote MCP server over HTTP(S) on the other. One thread, one poll loop:
 * stdin, a signalfd and libcurl's sockets. See README "mcp-bridge". */
#include "bridge_log.h"
#include "remote.h"
#include "oauth.h"
#include "options.h"
#include "rpc_message.h"
#include "stdio_side.h"
#include "translate.h"

#include "clock.h"
#include "stdio_frame.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

/* After EOF on stdin, requests in flight may finish for this long; after
 * SIGTERM or SIGINT, for less: the client wants us gone. */
#define EOF_GRACE_MS 10000
#define SIGNAL_GRACE_MS 2000

struct bridge {
    struct stdio_side *io;
    struct remote remote;
    struct translate *tr; /* a 2025 client before a 2026-07-28-only server */
    int out_gone;
};

static void emit_to_client(void *ud, const char *json, size_t len)
{
    struct bridge *b = ud;
    if (stdio_side_write(b->io, json, len) < 0 && !b->out_gone) {
        b->out_gone = 1;
        bridge_log(LOG_INFO, "stdout_closed", "the client stopped reading; stopping");
    }
}

static void reply_error(struct bridge *b, const json_t *id, int code, const char *message)
{
    char *reply = rpc_error_reply(id, code, message);
    if (reply) {
        emit_to_client(b, reply, strlen(reply));
        free(reply);
    }
}

static void client_one(struct bridge *b, const char *text, size_t len, json_t *m)
{
    if (rpc_classify(m) == RPC_INVALID) {
        const json_t *id = json_object_get(m, "id");
        reply_error(b, json_is_string(id) || json_is_integer(id) ? id : NULL, RPC_INVALID_REQUEST,
                    "mcp-bridge: not a JSON-RPC 2.0 request, notification or response");
        return;
    }
    if (translate_from_client(b->tr, m))
        return;
    if (text && !memchr(text, '\n', len)) {
        remote_send(&b->remote, text, len, m);
        return;
    }
    char *compact = json_dumps(m, JSON_COMPACT);
    if (compact) {
        remote_send(&b->remote, compact, strlen(compact), m);
        free(compact);
    }
}

static void on_client_message(void *ud, const char *data, size_t len)
{
    struct bridge *b = ud;
    json_error_t err;
    json_t *m = json_loadb(data, len, 0, &err);
    if (!m) {
        char msg[256];
        snprintf(msg, sizeof msg, "mcp-bridge: parse error: %s", err.text);
        reply_error(b, NULL, RPC_PARSE_ERROR, msg);
        return;
    }
    if (json_is_array(m)) {
        /* a batch (2025-03-26): each member travels on its own */
        size_t i;
        json_t *e;
        if (json_array_size(m) == 0)
            reply_error(b, NULL, RPC_INVALID_REQUEST, "mcp-bridge: empty batch");
        json_array_foreach(m, i, e) client_one(b, NULL, 0, e);
    } else {
        client_one(b, data, len, m);
    }
    json_decref(m);
}

static void on_frame_error(void *ud, const json_t *id, int code, const char *message)
{
    bridge_log(LOG_WARN, "stdin_bad_message", "%s", message);
    reply_error(ud, id, code, message);
}

static int signal_fd(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -1;
    return signalfd(-1, &set, SFD_CLOEXEC);
}

/* The server's URL as the log shows it: without user info, query or
 * fragment, where a credential may ride (https://user:secret@host/,
 * /mcp?api_key=...); stderr often ends in a desktop client's log files. */
static void log_ready(const char *url)
{
    static const CURLUPart drop[] = {CURLUPART_USER, CURLUPART_PASSWORD, CURLUPART_OPTIONS,
                                     CURLUPART_QUERY, CURLUPART_FRAGMENT};
    CURLU *u = curl_url();
    char *shown = NULL;
    int ok = u && curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK;
    for (size_t i = 0; ok && i < sizeof drop / sizeof drop[0]; i++)
        ok = curl_url_set(u, drop[i], NULL, 0) == CURLUE_OK;
    if (ok && curl_url_get(u, CURLUPART_URL, &shown, 0) != CURLUE_OK)
        shown = NULL;
    bridge_log(LOG_INFO, "bridge_ready", "relaying stdio to %s", shown ? shown : "the server");
    curl_free(shown);
    curl_url_cleanup(u);
}

static int run(const struct bridge_options *o)
{
    struct bridge b = {0};
    int sfd = signal_fd();
    b.io = stdio_side_new(STDIN_FILENO, STDOUT_FILENO, STDIO_FRAME_DEFAULT_MAX);
    b.tr = translate_new(&b.remote, (struct remote_sink){emit_to_client, &b},
                         o->transport == TRANSPORT_HTTP);
    int remote_rc = b.tr ? remote_open(&b.remote, o, translate_sink(b.tr)) : -1;
    if (sfd < 0 || !b.io || remote_rc != 0) {
        bridge_log(LOG_ERROR, "start_failed", "out of memory or no signalfd");
        return 1;
    }
    log_ready(o->url);
    const struct stdio_side_handler h = {on_client_message, on_frame_error, &b};
    int eof = 0, stopping = 0;
    int64_t deadline = 0;
    const char *why = NULL;
    for (;;) {
        struct curl_waitfd fds[3] = {{sfd, CURL_WAIT_POLLIN, 0},
                                     {STDIN_FILENO, CURL_WAIT_POLLIN, 0}};
        int nfds = eof || stopping ? 1 : 2;
        short remote_events = 0;
        int rfd = remote_fd(&b.remote, &remote_events);
        if (rfd >= 0)
            fds[nfds++] = (struct curl_waitfd){rfd, remote_events, 0};
        long timeout = remote_timeout_ms(&b.remote);
        if (deadline) {
            int64_t left = deadline - clock_mono_ms();
            if (left < timeout)
                timeout = left < 0 ? 0 : (long)left;
        }
        curl_multi_poll(remote_multi(&b.remote), fds, (unsigned)nfds, (int)timeout, NULL);
        if (fds[0].revents) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si && !stopping) {
                bridge_log(LOG_INFO, "signal", "%s: finishing", strsignal((int)si.ssi_signo));
                stopping = 1;
                why = "mcp-bridge: stopped by a signal before the server answered";
                int64_t d = clock_mono_ms() + SIGNAL_GRACE_MS;
                if (!deadline || d < deadline)
                    deadline = d;
            }
        }
        if (!eof && !stopping && fds[1].revents) {
            if (stdio_side_read(b.io, &h) != 0) {
                bridge_log(LOG_INFO, "stdin_closed", "%d request(s) in flight",
                           remote_pending(&b.remote));
                eof = 1;
                why = "mcp-bridge: the client closed stdin before the server answered";
                translate_stdin_closed(b.tr, why);
                if (!deadline)
                    deadline = clock_mono_ms() + EOF_GRACE_MS;
            }
        }
        remote_run(&b.remote);
        if (b.out_gone)
            break;
        int pending = remote_pending(&b.remote) + translate_pending(b.tr);
        if ((eof || stopping) && (pending == 0 || clock_mono_ms() >= deadline))
            break;
    }
    translate_shutdown(b.tr, why ? why : "mcp-bridge: stopping");
    remote_shutdown(&b.remote, why ? why : "mcp-bridge: stopping");
    remote_free(&b.remote);
    translate_free(b.tr);
    stdio_side_free(b.io);
    close(sfd);
    bridge_log(LOG_INFO, "bridge_exit", NULL);
    return 0;
}

int main(int argc, char **argv)
{
    struct bridge_options o;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "mcp-bridge: cannot initialise libcurl\n");
        return 1;
    }
    enum options_result pr = options_parse(argc, argv, &o);
    if (pr != OPTIONS_OK) {
        curl_global_cleanup();
        return pr == OPTIONS_EXIT_OK ? 0 : 2;
    }
    bridge_log_set_level(o.log_level);
    if (o.logout) {
        int bad = oauth_logout(o.url) < 0;
        fprintf(stderr,
                bad ? "mcp-bridge: could not forget the sign-in for %s\n"
                    : "mcp-bridge: forgot the sign-in for %s\n",
                o.url);
        options_free(&o);
        curl_global_cleanup();
        return bad;
    }
    /* the retry jitter must differ between the bridges a client starts */
    srandom((unsigned)clock_mono_ms() ^ (unsigned)getpid());
    signal(SIGPIPE, SIG_IGN);
    int rc = run(&o);
    options_free(&o);
    curl_global_cleanup();
    return rc;
}
