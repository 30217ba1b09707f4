/* admin — what mcp-admin's commands share: the parsed global options, the
 * database opened the way a command needs it, and output helpers.
 *
 * Every command prints a human table by default and the same data as JSON
 * with --json (one document, or one line per row for --follow). Text from
 * clients, upstream children and the database reaches the terminal only
 * escaped: through safe_text in the human output, as ASCII-only JSON
 * escapes in --json (see safe_text.h). Errors are
 * one line on stderr; exit status 0 on success, 1 on failure, 2 on bad
 * usage, 3 when the thing named does not exist. */
#ifndef MCPD_ADMIN_H
#define MCPD_ADMIN_H

#include <jansson.h>
#include <stdint.h>

#include "cmdline.h"
#include "store_admin.h"

enum { ADMIN_OK = 0, ADMIN_FAILED = 1, ADMIN_USAGE = 2, ADMIN_NOT_FOUND = 3 };

struct admin {
    const char *db;
    int json;
};

/* Parses a command's words (argv[0] its name) against the command's options
 * (a cmdline.h table) into base, after the table's defaults. Its operands are moved to
 * argv[1..*argc) where it takes them (operands != 0); elsewhere an operand is refused. Returns
 * ADMIN_OK, or ADMIN_USAGE after printing why, prefixed with what
 * ("gc", "session kill"). */
int admin_parse(const char *what, const struct cmdline_option *opts, size_t n, void *base,
                int *argc, char **argv, int operands);
/* A cmdline.h take: a duration ("30d", "10m") into the int64_t field as
 * milliseconds. */
int admin_take_duration(void *base, const struct cmdline_option *opt, const char *value, char *err,
                        size_t errcap);
/* The same, stored as the wall-clock time that long ago (ms): --since. */
int admin_take_since(void *base, const struct cmdline_option *opt, const char *value, char *err,
                     size_t errcap);

/* Opens the database or prints why not (NULL). */
struct store_admin *admin_open(const struct admin *a, enum store_admin_mode mode);
/* Prints v as JSON (pretty unless compact; every non-ASCII character, and
 * every control, as a \uXXXX escape) and decrefs it. */
void admin_print_json(json_t *v, int compact);
/* Prints "mcp-admin: <msg>" on stderr, frees msg, returns status. */
int admin_fail(int status, char *msg);
int admin_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "mcp-admin: <formatted>" on stderr; returns ADMIN_NOT_FOUND. */
int admin_not_found(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints a query's rows: as JSON with --json, else through table() once
 * safe_text_json made them safe to print; an error (rows NULL) is reported
 * from err. Takes rows. */
int admin_show(const struct admin *a, json_t *rows, char *err, void (*table)(json_t *rows));
/* The string value of key in obj, or NULL. */
const char *admin_str(json_t *obj, const char *key);
int64_t admin_int(json_t *obj, const char *key);
/* s, or def when s is NULL. */
const char *admin_or(const char *s, const char *def);
/* "3m ago" for key's time in obj (a static buffer per slot 0..3). */
const char *admin_ago(json_t *obj, const char *key, int slot);

/* The commands: argv[0] is the command's own name. */
int cmd_sessions(const struct admin *a, int argc, char **argv);
int cmd_session(const struct admin *a, int argc, char **argv);
int cmd_streams(const struct admin *a, int argc, char **argv);
int cmd_chunks(const struct admin *a, int argc, char **argv);
int cmd_logs(const struct admin *a, int argc, char **argv);
int cmd_stats(const struct admin *a, int argc, char **argv);
int cmd_tokens(const struct admin *a, int argc, char **argv);
int cmd_gc(const struct admin *a, int argc, char **argv);
int cmd_vacuum(const struct admin *a, int argc, char **argv);
int cmd_backup(const struct admin *a, int argc, char **argv);
int cmd_check(const struct admin *a, int argc, char **argv);
int cmd_health(const struct admin *a, int argc, char **argv);

#endif
