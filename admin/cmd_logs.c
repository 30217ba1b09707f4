/* The observing commands: logs (and --follow), stats. */
#include "admin.h"
#include "duration.h"
#include "log_level.h"
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

static void print_log(const struct admin *a, json_t *row)
{
    if (a->json) {
        admin_print_json(json_incref(row), 1);
        return;
    }
    safe_text_json(row);
    time_t secs = (time_t)(admin_int(row, "ts_ms") / 1000);
    struct tm tm;
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", gmtime_r(&secs, &tm));
    const char *sid = admin_str(row, "session_id");
    printf("%s.%03lldZ %-5s %s %s\n", when, (long long)(admin_int(row, "ts_ms") % 1000),
           admin_str(row, "level"), sid ? sid : "-", admin_str(row, "event"));
}

struct logs_args {
    struct store_admin_logs_filter f;
    int follow;
};

static int take_level(void *base, const struct cmdline_option *opt, const char *value, char *err,
                      size_t errcap)
{
    enum log_level lv;
    if (log_level_parse(value, &lv) != 0) {
        snprintf(err, errcap, "--%s takes debug, info, warn or error", opt->name);
        return -1;
    }
    ((struct logs_args *)base)->f.min_level = (int)lv;
    return 0;
}

#define L(field) offsetof(struct logs_args, field)
static const struct cmdline_option logs_options[] = {
    {"follow", CMDLINE_FLAG, L(follow), NULL, NULL, NULL},
    {"level", CMDLINE_FUNC, L(f.min_level), NULL, NULL, take_level},
    {"session", CMDLINE_ARG, L(f.session), NULL, NULL, NULL},
    {"principal", CMDLINE_ARG, L(f.principal), NULL, NULL, NULL},
    {"grep", CMDLINE_ARG, L(f.grep), NULL, NULL, NULL},
    {"limit", CMDLINE_INT, L(f.limit), "100", NULL, NULL},
    {"since", CMDLINE_FUNC, L(f.since_ms), NULL, NULL, admin_take_since},
};

int cmd_logs(const struct admin *a, int argc, char **argv)
{
    struct logs_args args = {.follow = 0};
    const size_t n = sizeof logs_options / sizeof logs_options[0];
    if (admin_parse("logs", logs_options, n, &args, &argc, argv, 0) != ADMIN_OK)
        return ADMIN_USAGE;
    struct store_admin_logs_filter f = args.f;
    int follow = args.follow;
    struct store_admin *s = admin_open(a, STORE_ADMIN_READ);
    if (!s)
        return ADMIN_FAILED;
    signal(SIGINT, on_sigint);
    signal(SIGTERM, on_sigint);
    int rc = ADMIN_OK;
    json_t *all = a->json && !follow ? json_array() : NULL;
    for (;;) {
        char *err = NULL;
        json_t *list = store_admin_logs(s, &f, &err);
        if (!list) {
            rc = admin_fail(ADMIN_FAILED, err);
            break;
        }
        size_t i;
        json_t *row;
        json_array_foreach(list, i, row)
        {
            if (all)
                json_array_append(all, row);
            else
                print_log(a, row);
            f.after_id = admin_int(row, "id");
        }
        json_decref(list);
        fflush(stdout);
        if (!follow || interrupted)
            break;
        f.limit = 0; /* following: everything new */
        struct timespec ts = {0, FOLLOW_MS * 1000000L};
        nanosleep(&ts, NULL);
        if (interrupted)
            break;
    }
    if (all)
        admin_print_json(all, 0);
    store_admin_close(s);
    return rc;
}

int cmd_stats(const struct admin *a, int argc, char **argv)
{
    (void)argv;
    if (argc != 1)
        return admin_usage("stats takes no arguments");
    struct store_admin *s = admin_open(a, STORE_ADMIN_READ);
    if (!s)
        return ADMIN_FAILED;
    char *err = NULL;
    json_t *v = store_admin_stats(s, &err);
    store_admin_close(s);
    if (!v)
        return admin_fail(ADMIN_FAILED, err);
    if (a->json) {
        admin_print_json(v, 0);
        return ADMIN_OK;
    }
    safe_text_json(v);
    char db[32], wal[32], stored[32];
    duration_bytes(admin_int(v, "database_bytes"), db, sizeof db);
    duration_bytes(admin_int(v, "wal_bytes"), wal, sizeof wal);
    duration_bytes(admin_int(v, "stored_bytes"), stored, sizeof stored);
    int64_t requests = 0;
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(v, "requests_per_minute"), i, m) requests +=
        admin_int(m, "requests");
    /* PostgreSQL's WAL is the server's: no figure of this database's. */
    if (json_is_null(json_object_get(v, "wal_bytes")))
        snprintf(wal, sizeof wal, "-");
    printf("sessions      %lld live, %lld stored\n"
           "streams       %lld open, %lld stored\n"
           "chunks        %lld (%s)\n"
           "database      %s, WAL %s\n"
           "log rows      %lld\n"
           "tokens        %lld active\n"
           "requests      %lld in the last hour (%.1f a minute)\n",
           (long long)admin_int(v, "sessions_live"), (long long)admin_int(v, "sessions"),
           (long long)admin_int(v, "streams_open"), (long long)admin_int(v, "streams"),
           (long long)admin_int(v, "chunks"), stored, db, wal, (long long)admin_int(v, "log_rows"),
           (long long)admin_int(v, "tokens"), (long long)requests, (double)requests / 60.0);
    json_t *warns = json_object_get(v, "warnings_last_hour");
    if (json_array_size(warns)) {
        printf("\nwarnings and refusals in the last hour:\n");
        static const char *const h[] = {"EVENT", "COUNT"};
        struct table_out *t = table_out_new(2, h);
        json_array_foreach(warns, i, m)
        {
            char n[24];
            snprintf(n, sizeof n, "%lld", (long long)admin_int(m, "n"));
            const char *row[] = {admin_str(m, "reason"), n};
            table_out_row(t, row);
        }
        table_out_print(t, stdout, 0);
    }
    json_decref(v);
    return ADMIN_OK;
}
