/* cmdline — the command-line parser of mcpd, mcp-bridge and mcp-admin.
 *
 * A binary describes its options in a table of struct cmdline_option (name,
 * kind, where the value goes, default, help), and cmdline_parse walks argv
 * against it, by the same rules in all three:
 *   - `--name`, `--name=value` and `--name value`; names are exact (no
 *     abbreviations) and there are no one-dash options: `-h` is an unknown
 *     option (where no operands are taken, an unexpected argument);
 *   - a later option overrides an earlier one (a CMDLINE_FUNC option sees
 *     every occurrence, so it may collect them);
 *   - every other word (`-` too) is an operand: collected in order where
 *     the caller takes operands, and then `--` ends the options (every later
 *     word is an operand, even one with dashes); an error where it takes
 *     none (mcpd), and `--` is then an unknown option like any other;
 *   - the word after `--name` is its value, whatever it looks like.
 *
 * Values land at base + offset, in a struct of the caller's; cmdline_set
 * stores one from elsewhere (mcpd's config file and environment) by the same
 * rules, and cmdline_defaults stores every default through it.
 *
 * Errors are returned, never exit(): a negative enum cmdline_status and one
 * line in err, without the program's name or a hint such as "(see --help)",
 * which each binary adds its own way.
 *
 * Ownership: a CMDLINE_STR value is a malloc'd copy, freed by cmdline_free
 * (and when a later value replaces it); a CMDLINE_ARG value points into argv
 * (or the caller's string), so it lives as long as that. */
#ifndef MCPD_CMDLINE_H
#define MCPD_CMDLINE_H

#include <stddef.h>
#include <stdio.h>

enum cmdline_kind {
    CMDLINE_FLAG,   /* int: 1 when given; `--name=N` (N a non-negative number) stores N != 0 */
    CMDLINE_INT,    /* int64_t: a non-negative decimal number */
    CMDLINE_STR,    /* char *: a malloc'd copy of the value */
    CMDLINE_ARG,    /* const char *: the value itself, not copied */
    CMDLINE_FUNC,   /* take(base, option, value) checks and stores the value */
    CMDLINE_ACTION, /* take(base, option, NULL): a flag with an effect of its own */
};

struct cmdline_option {
    const char *name; /* without the dashes */
    enum cmdline_kind kind;
    size_t offset;   /* of the value in the caller's struct */
    const char *def; /* the default as it would be typed, or NULL (none) */
    /* One line for cmdline_usage; NULL where the binary writes its usage by
     * hand. */
    const char *help;
    /* CMDLINE_FUNC and CMDLINE_ACTION: 0, or -1 with one line in err. */
    int (*take)(void *base, const struct cmdline_option *opt, const char *value, char *err,
                size_t errcap);
};

enum cmdline_status {
    CMDLINE_OK = 0,
    CMDLINE_UNKNOWN = -1,    /* "unknown option '--x'" */
    CMDLINE_UNEXPECTED = -2, /* "unexpected argument 'x'": an operand where none is taken */
    CMDLINE_NO_VALUE = -3,   /* "option --x needs a value" */
    CMDLINE_BAD_VALUE = -4,  /* "--x: x needs a non-negative number, got 'y'", "option --x
                                takes no value" (an action), a take's own line, or "out of
                                memory" */
};

/* Lets unknown `--options` through as operands (and `--` with every word
 * after it), for a command line parsed twice: mcp-admin's global options,
 * then its command's. Needs operands. */
#define CMDLINE_PASS_UNKNOWN 1u

/* Parses argv[1..argc) against opts[0..n) into base. With operands, the
 * operands go there in order (room for argc - 1 words; argv + 1 itself will
 * do: they are moved to its front) and their count to *noperands; with
 * operands NULL, an operand is an error. Stops at the first error. Returns
 * CMDLINE_OK or a negative enum cmdline_status with err set. */
int cmdline_parse(const struct cmdline_option *opts, size_t n, void *base, int argc, char **argv,
                  unsigned flags, char **operands, int *noperands, char *err, size_t errcap);

/* Stores value for opt (NULL only for CMDLINE_FLAG and CMDLINE_ACTION).
 * source names where it came from in a bad number's message: the argv word,
 * "MCPD_MAX_BODY", "file:12". Returns 0, or -1 with err set. */
int cmdline_set(const struct cmdline_option *opt, void *base, const char *value, const char *source,
                char *err, size_t errcap);

/* Stores every option's default, in table order. Returns 0, or -1 with err
 * set (a table's mistake). */
int cmdline_defaults(const struct cmdline_option *opts, size_t n, void *base, char *err,
                     size_t errcap);

/* The option named by the len bytes at name, or NULL. */
const struct cmdline_option *cmdline_find(const struct cmdline_option *opts, size_t n,
                                          const char *name, size_t len);

/* Frees every CMDLINE_STR value in base and sets it to NULL. */
void cmdline_free(const struct cmdline_option *opts, size_t n, void *base);

/* One line an option that has help: "  --name VALUE   help (default def)". */
void cmdline_usage(FILE *out, const struct cmdline_option *opts, size_t n);

#endif
