/* The session commands: sessions, session show/kill, streams, chunks. */
#include "admin.h"
#include "duration.h"
#include "safe_text.h"
#include "table.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FOLLOW_MS 250

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void sessions_table(json_t *list)
{
    static const char *const h[] = {"SESSION", "PRINCIPAL", "CLIENT",  "PROTOCOL", "TRANSPORT",
                                    "CREATED", "ACTIVE",    "STREAMS", "STORED",   "STATE"};
    struct table_out *t = table_out_new(10, h);
    size_t i;
    json_t *s;
    json_array_foreach(list, i, s)
    {
        char client[160], streams[24], bytes[32];
        snprintf(client, sizeof client, "%s %s", admin_or(admin_str(s, "client_name"), "-"),
                 admin_or(admin_str(s, "client_version"), ""));
        snprintf(streams, sizeof streams, "%lld", (long long)admin_int(s, "open_streams"));
        duration_bytes(admin_int(s, "stored_bytes"), bytes, sizeof bytes);
        const char *state = json_is_null(json_object_get(s, "ended_ms"))
                                ? "live"
                                : (admin_str(s, "kill_reason") ? "killed" : "ended");
        const char *row[] = {admin_str(s, "id"),
                             admin_str(s, "principal"),
                             client,
                             admin_str(s, "protocol"),
                             admin_str(s, "transport"),
                             admin_ago(s, "created_ms", 0),
                             admin_ago(s, "last_active_ms", 1),
                             streams,
                             bytes,
                             state};
        table_out_row(t, row);
    }
    table_out_print(t, stdout, 0);
}

/* --active, --ended and --all: the last one given wins. */
static int take_which(void *base, const struct cmdline_option *opt, const char *value, char *err,
                      size_t errcap)
{
    (void)value, (void)err, (void)errcap;
    struct store_admin_sessions_filter *f = base;
    f->which = strcmp(opt->name, "all") == 0     ? SESSIONS_ALL
               : strcmp(opt->name, "ended") == 0 ? SESSIONS_ENDED
                                                 : SESSIONS_ACTIVE;
    return 0;
}

#define SF(field) offsetof(struct store_admin_sessions_filter, field)
static const struct cmdline_option sessions_options[] = {
    {"active", CMDLINE_ACTION, SF(which), NULL, NULL, take_which},
    {"ended", CMDLINE_ACTION, SF(which), NULL, NULL, take_which},
    {"all", CMDLINE_ACTION, SF(which), NULL, NULL, take_which},
    {"principal", CMDLINE_ARG, SF(principal), NULL, NULL, NULL},
    {"since", CMDLINE_FUNC, SF(active_since_ms), NULL, NULL, admin_take_since},
    {"limit", CMDLINE_INT, SF(limit), "100", NULL, NULL},
};

int cmd_sessions(const struct admin *a, int argc, char **argv)
{
    struct store_admin_sessions_filter f = {.which = SESSIONS_ACTIVE};
    const size_t n = sizeof sessions_options / sizeof sessions_options[0];
    if (admin_parse("sessions", sessions_options, n, &f, &argc, argv, 0) != ADMIN_OK)
        return ADMIN_USAGE;
    struct store_admin *s = admin_open(a, STORE_ADMIN_READ);
    if (!s)
        return ADMIN_FAILED;
    char *err = NULL;
    json_t *list = store_admin_sessions(s, &f, &err);
    store_admin_close(s);
    return admin_show(a, list, err, sessions_table);
}

static void streams_table(json_t *list)
{
    static const char *const h[] = {"STREAM", "KIND",   "STATE",  "REQUEST",
                                    "CHUNKS", "STORED", "CREATED"};
    struct table_out *t = table_out_new(7, h);
    size_t i;
    json_t *st;
    json_array_foreach(list, i, st)
    {
        char chunks[24], bytes[32];
        snprintf(chunks, sizeof chunks, "%lld", (long long)admin_int(st, "chunks"));
        duration_bytes(admin_int(st, "bytes"), bytes, sizeof bytes);
        const char *row[] = {admin_str(st, "id"),
                             admin_str(st, "kind"),
                             admin_str(st, "state"),
                             admin_str(st, "request_id"),
                             chunks,
                             bytes,
                             admin_ago(st, "created_ms", 0)};
        table_out_row(t, row);
    }
    table_out_print(t, stdout, 0);
}

static int session_show(const struct admin *a, const char *id)
{
    struct store_admin *s = admin_open(a, STORE_ADMIN_READ);
    if (!s)
        return ADMIN_FAILED;
    char *err = NULL;
    json_t *v = store_admin_session(s, id, 10, &err);
    store_admin_close(s);
    if (!v)
        return admin_fail(ADMIN_FAILED, err);
    if (json_is_null(v)) {
        json_decref(v);
        return admin_not_found("no session %s", id);
    }
    if (a->json) {
        admin_print_json(v, 0);
        return ADMIN_OK;
    }
    /* The client's capabilities as JSON text (its keys are the client's
     * too), then every string made safe to print. */
    char *caps_json =
        json_dumps(json_object_get(v, "capabilities"), JSON_COMPACT | JSON_ENSURE_ASCII);
    char *caps = safe_text(caps_json);
    free(caps_json);
    safe_text_json(v);
    char bytes[32];
    duration_bytes(admin_int(v, "stored_bytes"), bytes, sizeof bytes);
    printf("session     %s\nprincipal   %s\nclient      %s %s\nprotocol    %s\n"
           "transport   %s\ncreated     %s\nactive      %s\nstate       %s%s%s\nstored      %s\n",
           admin_str(v, "id"), admin_or(admin_str(v, "principal"), "-"),
           admin_or(admin_str(v, "client_name"), "-"), admin_or(admin_str(v, "client_version"), ""),
           admin_str(v, "protocol"), admin_or(admin_str(v, "transport"), "-"),
           admin_ago(v, "created_ms", 0), admin_ago(v, "last_active_ms", 1),
           json_is_null(json_object_get(v, "ended_ms")) ? "live" : "ended",
           admin_str(v, "kill_reason") ? ": " : "", admin_or(admin_str(v, "kill_reason"), ""),
           bytes);
    printf("capabilities %s\n\nstreams:\n", caps ? caps : "{}");
    free(caps);
    streams_table(json_object_get(v, "streams"));
    printf("\nlast messages:\n");
    static const char *const h[] = {"STREAM", "SEQ", "AT", "MESSAGE"};
    struct table_out *t = table_out_new(4, h);
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(v, "last_messages"), i, m)
    {
        char seq[24];
        snprintf(seq, sizeof seq, "%lld", (long long)admin_int(m, "seq"));
        const char *row[] = {admin_str(m, "stream_id"), seq, admin_ago(m, "created_ms", 0),
                             admin_str(m, "message")};
        table_out_row(t, row);
    }
    table_out_print(t, stdout, 0);
    json_decref(v);
    return ADMIN_OK;
}

static int session_kill(const struct admin *a, const char *id, const char *reason)
{
    struct store_admin *s = admin_open(a, STORE_ADMIN_WRITE);
    if (!s)
        return ADMIN_FAILED;
    char *err = NULL;
    int rc = store_admin_session_kill(s, id, reason, &err);
    store_admin_close(s);
    if (rc < 0)
        return admin_fail(ADMIN_FAILED, err);
    if (rc == 1)
        return admin_not_found("no live session %s", id);
    if (a->json)
        admin_print_json(json_pack("{s:s, s:s}", "killed", id, "reason",
                                   reason ? reason : "killed by mcp-admin"),
                         0);
    else
        printf("killed %s; a running mcpd ends it within a second\n", id);
    return ADMIN_OK;
}

int cmd_session(const struct admin *a, int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "show") == 0)
        return session_show(a, argv[2]);
    if (argc >= 2 && strcmp(argv[1], "kill") == 0) {
        static const struct cmdline_option options[] = {
            {"reason", CMDLINE_ARG, 0, NULL, NULL, NULL},
        };
        const char *reason = NULL;
        int n = argc - 1; /* from "kill" on */
        if (admin_parse("session kill", options, 1, &reason, &n, argv + 1, 1) != ADMIN_OK)
            return ADMIN_USAGE;
        if (n == 2)
            return session_kill(a, argv[2], reason);
    }
    return admin_usage("session show ID | session kill ID [--reason TEXT]");
}

int cmd_streams(const struct admin *a, int argc, char **argv)
{
    if (argc != 2)
        return admin_usage("streams SESSION");
    struct store_admin *s = admin_open(a, STORE_ADMIN_READ);
    if (!s)
        return ADMIN_FAILED;
    char *err = NULL;
    json_t *list = store_admin_streams(s, argv[1], &err);
    store_admin_close(s);
    return admin_show(a, list, err, streams_table);
}

int cmd_chunks(const struct admin *a, int argc, char **argv)
{
    struct chunks_args {
        int64_t from;
        int follow;
    } args = {0, 0};
    static const struct cmdline_option options[] = {
        {"from", CMDLINE_INT, offsetof(struct chunks_args, from), NULL, NULL, NULL},
        {"follow", CMDLINE_FLAG, offsetof(struct chunks_args, follow), NULL, NULL, NULL},
    };
    if (admin_parse("chunks", options, 2, &args, &argc, argv, 1) != ADMIN_OK)
        return ADMIN_USAGE;
    if (argc != 2)
        return admin_usage("chunks STREAM [--from SEQ] [--follow]");
    int64_t from = args.from;
    int follow = args.follow;
    struct store_admin *s = admin_open(a, STORE_ADMIN_READ);
    if (!s)
        return ADMIN_FAILED;
    signal(SIGINT, on_sigint);
    int ended = 0, rc = ADMIN_OK;
    do {
        char *err = NULL;
        json_t *list = store_admin_chunks(s, argv[1], from, 1000, &err);
        if (!list) {
            rc = admin_fail(ADMIN_FAILED, err);
            break;
        }
        size_t i;
        json_t *c;
        json_array_foreach(list, i, c)
        {
            if (a->json) {
                admin_print_json(json_incref(c), 1);
            } else {
                safe_text_json(c);
                printf("%lld\t%s\t%s%s\n", (long long)admin_int(c, "seq"),
                       admin_ago(c, "created_ms", 0), admin_str(c, "message"),
                       admin_int(c, "is_end") ? "\t(end)" : "");
            }
            from = admin_int(c, "seq") + 1;
            ended |= admin_int(c, "is_end") != 0;
        }
        fflush(stdout);
        json_decref(list);
        if (follow && !ended && !interrupted)
            sleep_ms(FOLLOW_MS);
    } while (follow && !ended && !interrupted);
    store_admin_close(s);
    return rc;
}
