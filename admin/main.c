/* mcp-admin — inspects and controls an mcpd database, also while mcpd runs.
 * The command line and presentation live here; the SQL is store_admin's. */
#include "admin.h"
#include "clock.h"
#include "duration.h"
#include "safe_text.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int (*run)(const struct admin *a, int argc, char **argv);
    const char *usage;
} commands[] = {
    {"sessions", cmd_sessions,
     "sessions [--active|--ended|--all] [--principal NAME] [--since 1h] [--limit N]"},
    {"session", cmd_session, "session show ID | session kill ID [--reason TEXT]"},
    {"streams", cmd_streams, "streams SESSION"},
    {"chunks", cmd_chunks, "chunks STREAM [--from SEQ] [--follow]"},
    {"logs", cmd_logs,
     "logs [--follow] [--level warn] [--session ID] [--principal NAME] [--since 10m] "
     "[--grep TEXT] [--limit N]"},
    {"stats", cmd_stats, "stats"},
    {"tokens", cmd_tokens,
     "tokens add NAME [--expires 30d] [--note TEXT] | tokens list | tokens revoke NAME"},
    {"gc", cmd_gc,
     "gc [--session-idle 30m] [--stream-retention 5m] [--log-retention 1d] [--log-max-rows N]"},
    {"vacuum", cmd_vacuum, "vacuum"},
    {"backup", cmd_backup, "backup FILE"},
    {"check", cmd_check, "check"},
    {"health", cmd_health, "health [--url http://127.0.0.1:8080]"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void help(FILE *f)
{
    fprintf(f,
            "usage: mcp-admin [--db PATH|URL] [--json] COMMAND ...\n\n"
            "  --db PATH   the mcpd database (default $MCPD_DB, else ./data/mcpd.db): an SQLite\n"
            "              file, or PostgreSQL as a libpq connection string\n"
            "              (postgres://user@host:5432/db, or host=... dbname=...)\n"
            "  --json      machine-readable output\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %s\n", commands[i].usage);
    fprintf(f,
            "\nbackup FILE writes a new SQLite file (created 0600) of mcpd's schema, which mcpd\n"
            "and mcp-admin open like any: from SQLite, the online backup; from PostgreSQL,\n"
            "every table read in one REPEATABLE READ transaction, a consistent snapshot.\n"
            "On PostgreSQL, vacuum is VACUUM (ANALYZE) of mcpd's tables, and check counts\n"
            "rows that should not exist and invalid indexes (SQLite: PRAGMA integrity_check).\n"
            "\nexit status: 0 ok, 1 failed, 2 bad usage, 3 not found\n");
}

/* The global options, before the command or after it. */
struct admin_args {
    struct admin a;
    int help, version;
};

static const struct cmdline_option global_options[] = {
    {"db", CMDLINE_ARG, offsetof(struct admin_args, a.db), NULL, NULL, NULL},
    {"json", CMDLINE_FLAG, offsetof(struct admin_args, a.json), NULL, NULL, NULL},
    {"help", CMDLINE_FLAG, offsetof(struct admin_args, help), NULL, NULL, NULL},
    {"version", CMDLINE_FLAG, offsetof(struct admin_args, version), NULL, NULL, NULL},
};

int admin_parse(const char *what, const struct cmdline_option *opts, size_t n, void *base,
                int *argc, char **argv, int operands)
{
    char err[512];
    int count = 0;
    if (cmdline_defaults(opts, n, base, err, sizeof err) != 0 ||
        cmdline_parse(opts, n, base, *argc, argv, 0, operands ? argv + 1 : NULL, &count, err,
                      sizeof err) != CMDLINE_OK)
        return admin_usage("%s: %s", what, err);
    *argc = 1 + count;
    return ADMIN_OK;
}

int admin_take_duration(void *base, const struct cmdline_option *opt, const char *value, char *err,
                        size_t errcap)
{
    if (duration_parse(value, (int64_t *)((char *)base + opt->offset)) != 0) {
        snprintf(err, errcap, "--%s takes a duration such as 90s, 10m, 1h or 30d, got %s",
                 opt->name, value);
        return -1;
    }
    return 0;
}

int admin_take_since(void *base, const struct cmdline_option *opt, const char *value, char *err,
                     size_t errcap)
{
    if (admin_take_duration(base, opt, value, err, errcap) != 0)
        return -1;
    int64_t *field = (int64_t *)((char *)base + opt->offset);
    *field = clock_wall_ms() - *field;
    return 0;
}

struct store_admin *admin_open(const struct admin *a, enum store_admin_mode mode)
{
    struct store_admin *s = NULL;
    char *err = NULL;
    if (store_admin_open(a->db, mode, &s, &err) != 0)
        admin_fail(ADMIN_FAILED, err);
    return s;
}

void admin_print_json(json_t *v, int compact)
{
    /* ASCII only, so that a client's C1 controls and bidirectional
     * overrides reach the terminal as \uXXXX escapes, as jansson writes C0
     * controls. It leaves DEL raw; in JSON text DEL can only stand inside
     * a string, where \u007f is the same character. */
    char *text =
        json_dumps(v, JSON_ENSURE_ASCII | (compact ? JSON_COMPACT : (size_t)JSON_INDENT(2)));
    for (const char *p = text; p && *p;) {
        size_t n = strcspn(p, "\x7f");
        fwrite(p, 1, n, stdout);
        p += n;
        if (*p) {
            fputs("\\u007f", stdout);
            p++;
        }
    }
    if (text)
        putchar('\n');
    free(text);
    json_decref(v);
    fflush(stdout);
}

int admin_fail(int status, char *msg)
{
    /* Messages may quote the database (an integrity problem, a name). */
    char *safe = safe_text(msg);
    fprintf(stderr, "mcp-admin: %s\n", safe ? safe : "out of memory");
    free(safe);
    free(msg);
    return status;
}

int admin_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("mcp-admin: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see mcp-admin --help)\n", stderr);
    va_end(ap);
    return ADMIN_USAGE;
}

int admin_not_found(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("mcp-admin: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return ADMIN_NOT_FOUND;
}

int admin_show(const struct admin *a, json_t *rows, char *err, void (*table)(json_t *rows))
{
    if (!rows)
        return admin_fail(ADMIN_FAILED, err);
    if (a->json) {
        admin_print_json(rows, 0);
    } else {
        safe_text_json(rows);
        table(rows);
        json_decref(rows);
    }
    return ADMIN_OK;
}

const char *admin_str(json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

const char *admin_or(const char *s, const char *def)
{
    return s ? s : def;
}

int64_t admin_int(json_t *obj, const char *key)
{
    return json_integer_value(json_object_get(obj, key));
}

const char *admin_ago(json_t *obj, const char *key, int slot)
{
    static char buf[4][32];
    duration_relative(admin_int(obj, key), clock_wall_ms(), buf[slot & 3], sizeof buf[0]);
    return buf[slot & 3];
}

int main(int argc, char **argv)
{
    struct admin_args g = {.a.db = getenv("MCPD_DB") ? getenv("MCPD_DB") : "./data/mcpd.db"};
    /* Global options may stand anywhere: the command and the words they
     * leave are moved to argv[1..n), for the command to parse its own. */
    char err[512];
    int n = 0;
    if (cmdline_parse(global_options, sizeof global_options / sizeof global_options[0], &g, argc,
                      argv, CMDLINE_PASS_UNKNOWN, argv + 1, &n, err, sizeof err) != CMDLINE_OK)
        return admin_usage("%s", err);
    char **words = argv + 1;
    if (g.help || (n > 0 && strcmp(words[0], "-h") == 0)) {
        help(stdout);
        return ADMIN_OK;
    }
    if (g.version) {
        printf("mcp-admin %s\n", MCPD_VERSION);
        return ADMIN_OK;
    }
    if (n == 0) {
        help(stderr);
        return ADMIN_USAGE;
    }
    /* An option the global table passed on, before any command. */
    if (words[0][0] == '-' && words[0][1])
        return admin_usage("unknown option '%s'", words[0]);
    for (size_t c = 0; c < NCOMMANDS; c++)
        if (strcmp(words[0], commands[c].name) == 0)
            return commands[c].run(&g.a, n, words);
    return admin_usage("unknown command %s", words[0]);
}
