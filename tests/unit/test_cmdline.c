/* test_cmdline — the option parser of mcpd, mcp-bridge and mcp-admin
 * (service/base/cmdline.c, pure): each kind of option (flag, number, copied
 * string, borrowed string, take function, action) in the `--name value`,
 * `--name=value` and flag forms; defaults; a repeated option (the last value
 * wins, the copy before is freed, a take function sees each); operands,
 * `--`, one-dash words and `-`; each error's status and exact line
 * (unknown option, unexpected argument, missing value, bad number, a take's
 * refusal, a value given to an action); the pass-through of unknown options
 * for a two-level command line; cmdline_set's source in messages; and
 * cmdline_usage's lines. */
#include "check.h"
#include "cmdline.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct opts {
    int verbose;
    int64_t count;
    char *name;
    const char *note;
    int level;
    int seen; /* how many times --level was given */
    int actions;
};

static int take_level(void *base, const struct cmdline_option *opt, const char *value, char *err,
                      size_t errcap)
{
    struct opts *o = base;
    o->seen++;
    if (strcmp(value, "low") == 0 || strcmp(value, "high") == 0) {
        o->level = value[0] == 'h' ? 2 : 1;
        return 0;
    }
    snprintf(err, errcap, "--%s is low or high, not '%s'", opt->name, value);
    return -1;
}

static int take_action(void *base, const struct cmdline_option *opt, const char *value, char *err,
                       size_t errcap)
{
    (void)opt, (void)err, (void)errcap;
    struct opts *o = base;
    o->actions += value == NULL; /* an action never sees a value */
    return 0;
}

#define O(field) offsetof(struct opts, field)
static const struct cmdline_option table[] = {
    {"verbose", CMDLINE_FLAG, O(verbose), NULL, "say more", NULL},
    {"count", CMDLINE_INT, O(count), "7", "how many", NULL},
    {"name", CMDLINE_STR, O(name), "anon", "who", NULL},
    {"note", CMDLINE_ARG, O(note), NULL, NULL, NULL},
    {"level", CMDLINE_FUNC, O(level), NULL, "low or high", take_level},
    {"poke", CMDLINE_ACTION, O(actions), NULL, "poke it", take_action},
};
#define N (sizeof table / sizeof table[0])

/* Parses the words (NULL-terminated, argv[0] added) into *o after the
 * defaults. With operands, they land in ops and their count in *nops. */
static int parse(struct opts *o, unsigned flags, int take_operands, char **ops, int *nops,
                 char *err, size_t errcap, const char *const *words)
{
    char *argv[32] = {"prog"};
    int argc = 1;
    while (words[argc - 1] && argc < 31)
        argv[argc] = (char *)words[argc - 1], argc++;
    memset(o, 0, sizeof *o);
    if (cmdline_defaults(table, N, o, err, errcap) != 0)
        return 99;
    return cmdline_parse(table, N, o, argc, argv, flags, take_operands ? ops : NULL, nops, err,
                         errcap);
}

#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_defaults(void)
{
    struct opts o;
    char err[128] = "";
    CHECK_INT(parse(&o, 0, 0, NULL, NULL, err, sizeof err, (const char *const[]){NULL}),
              CMDLINE_OK);
    CHECK_INT(o.verbose, 0);
    CHECK_INT(o.count, 7);
    CHECK_STR(o.name, "anon");
    CHECK(o.note == NULL);
    CHECK_INT(o.seen, 0);
    cmdline_free(table, N, &o);
    CHECK(o.name == NULL);
}

static void test_each_kind(void)
{
    struct opts o;
    char err[128] = "";
    /* the separate-value form */
    CHECK_INT(parse(&o, 0, 0, NULL, NULL, err, sizeof err,
                    WORDS("--verbose", "--count", "42", "--name", "ann", "--note", "hi", "--level",
                          "high", "--poke")),
              CMDLINE_OK);
    CHECK_INT(o.verbose, 1);
    CHECK_INT(o.count, 42);
    CHECK_STR(o.name, "ann");
    CHECK_STR(o.note, "hi");
    CHECK_INT(o.level, 2);
    CHECK_INT(o.actions, 1);
    cmdline_free(table, N, &o);

    /* the --name=value form; '=' after the first is the value's */
    CHECK_INT(parse(&o, 0, 0, NULL, NULL, err, sizeof err,
                    WORDS("--count=0", "--name=a=b", "--note=", "--level=low", "--verbose=0")),
              CMDLINE_OK);
    CHECK_INT(o.count, 0);
    CHECK_STR(o.name, "a=b");
    CHECK_STR(o.note, "");
    CHECK_INT(o.level, 1);
    CHECK_INT(o.verbose, 0);
    cmdline_free(table, N, &o);
    CHECK_INT(parse(&o, 0, 0, NULL, NULL, err, sizeof err, WORDS("--verbose=3")), CMDLINE_OK);
    CHECK_INT(o.verbose, 1);
    cmdline_free(table, N, &o);

    /* the word after an option is its value, whatever it looks like */
    CHECK_INT(
        parse(&o, 0, 0, NULL, NULL, err, sizeof err, WORDS("--note", "--verbose", "--name", "-x")),
        CMDLINE_OK);
    CHECK_STR(o.note, "--verbose");
    CHECK_INT(o.verbose, 0);
    CHECK_STR(o.name, "-x");
    cmdline_free(table, N, &o);

    /* the largest number */
    CHECK_INT(parse(&o, 0, 0, NULL, NULL, err, sizeof err, WORDS("--count", "9223372036854775807")),
              CMDLINE_OK);
    CHECK(o.count == INT64_MAX);
    cmdline_free(table, N, &o);
}

static void test_repeated(void)
{
    struct opts o;
    char err[128] = "";
    /* the last value wins; the copy before it is freed (ASan would see a
     * leak); a take function is called for each */
    CHECK_INT(
        parse(&o, 0, 0, NULL, NULL, err, sizeof err,
              WORDS("--name", "one", "--count", "1", "--name=two", "--count=2", "--level", "high",
                    "--level", "low", "--poke", "--poke", "--note", "a", "--note", "b")),
        CMDLINE_OK);
    CHECK_STR(o.name, "two");
    CHECK_INT(o.count, 2);
    CHECK_INT(o.level, 1);
    CHECK_INT(o.seen, 2);
    CHECK_INT(o.actions, 2);
    CHECK_STR(o.note, "b");
    cmdline_free(table, N, &o);
}

struct error_case {
    const char *const *words;
    int take_operands;
    int status;
    const char *err;
};

static void test_errors(void)
{
    const struct error_case cases[] = {
        {WORDS("--nope"), 0, CMDLINE_UNKNOWN, "unknown option '--nope'"},
        {WORDS("--nope=1"), 0, CMDLINE_UNKNOWN, "unknown option '--nope=1'"},
        {WORDS("--verbose", "--nope"), 0, CMDLINE_UNKNOWN, "unknown option '--nope'"},
        {WORDS("--coun", "1"), 0, CMDLINE_UNKNOWN, "unknown option '--coun'"}, /* no prefixes */
        {WORDS("--COUNT=1"), 0, CMDLINE_UNKNOWN, "unknown option '--COUNT=1'"},
        {WORDS("--"), 0, CMDLINE_UNKNOWN, "unknown option '--'"},
        {WORDS("-v"), 1, CMDLINE_UNKNOWN, "unknown option '-v'"}, /* no one-dash options */
        {WORDS("---count=1"), 1, CMDLINE_UNKNOWN, "unknown option '---count=1'"},
        {WORDS("word"), 0, CMDLINE_UNEXPECTED, "unexpected argument 'word'"},
        {WORDS("-v"), 0, CMDLINE_UNEXPECTED, "unexpected argument '-v'"},
        {WORDS("-"), 0, CMDLINE_UNEXPECTED, "unexpected argument '-'"},
        {WORDS("--count"), 0, CMDLINE_NO_VALUE, "option --count needs a value"},
        {WORDS("--verbose", "--name"), 1, CMDLINE_NO_VALUE, "option --name needs a value"},
        {WORDS("--note"), 0, CMDLINE_NO_VALUE, "option --note needs a value"},
        {WORDS("--level"), 0, CMDLINE_NO_VALUE, "option --level needs a value"},
        {WORDS("--count", "x"), 0, CMDLINE_BAD_VALUE,
         "--count: count needs a non-negative number, got 'x'"},
        {WORDS("--count=-1"), 0, CMDLINE_BAD_VALUE,
         "--count=-1: count needs a non-negative number, got '-1'"},
        {WORDS("--count="), 0, CMDLINE_BAD_VALUE,
         "--count=: count needs a non-negative number, got ''"},
        {WORDS("--count=10k"), 0, CMDLINE_BAD_VALUE,
         "--count=10k: count needs a non-negative number, got '10k'"},
        {WORDS("--count=1.5"), 0, CMDLINE_BAD_VALUE,
         "--count=1.5: count needs a non-negative number, got '1.5'"},
        {WORDS("--count=9223372036854775808"), 0, CMDLINE_BAD_VALUE,
         "--count=9223372036854775808: count needs a non-negative number, got "
         "'9223372036854775808'"},
        {WORDS("--verbose=yes"), 0, CMDLINE_BAD_VALUE,
         "--verbose=yes: verbose needs a non-negative number, got 'yes'"},
        {WORDS("--level", "mid"), 0, CMDLINE_BAD_VALUE, "--level is low or high, not 'mid'"},
        {WORDS("--poke=1"), 0, CMDLINE_BAD_VALUE, "option --poke takes no value"},
        /* the first error stops the walk */
        {WORDS("--count", "x", "--nope"), 0, CMDLINE_BAD_VALUE,
         "--count: count needs a non-negative number, got 'x'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct error_case *c = &cases[i];
        struct opts o;
        char err[128] = "";
        char *ops[16];
        int nops = 0;
        int rc = parse(&o, 0, c->take_operands, ops, &nops, err, sizeof err, c->words);
        if (rc != c->status || strcmp(err, c->err) != 0)
            printf("     case %zu (%s): status %d \"%s\"\n", i, c->words[0], rc, err);
        CHECK_INT(rc, c->status);
        CHECK_STR(err, c->err);
        cmdline_free(table, N, &o);
    }
}

static void test_operands(void)
{
    struct opts o;
    char err[128] = "";
    char *ops[16];
    int nops = -1;
    /* operands anywhere, in order; `-` is one; `--` ends the options */
    CHECK_INT(parse(&o, 0, 1, ops, &nops, err, sizeof err,
                    WORDS("a", "--count", "3", "-", "b", "--", "--verbose", "-x", "--")),
              CMDLINE_OK);
    CHECK_INT(nops, 6);
    if (nops == 6) {
        CHECK_STR(ops[0], "a");
        CHECK_STR(ops[1], "-");
        CHECK_STR(ops[2], "b");
        CHECK_STR(ops[3], "--verbose");
        CHECK_STR(ops[4], "-x");
        CHECK_STR(ops[5], "--");
    }
    CHECK_INT(o.count, 3);
    CHECK_INT(o.verbose, 0);
    cmdline_free(table, N, &o);

    /* in place: the operands move to the front of argv + 1 */
    char *argv[] = {"prog", "--count", "5", "x", "--verbose", "y", NULL};
    memset(&o, 0, sizeof o);
    CHECK_INT(cmdline_parse(table, N, &o, 6, argv, 0, argv + 1, &nops, err, sizeof err),
              CMDLINE_OK);
    CHECK_INT(nops, 2);
    CHECK_STR(argv[1], "x");
    CHECK_STR(argv[2], "y");
    CHECK_INT(o.count, 5);
    CHECK_INT(o.verbose, 1);
    cmdline_free(table, N, &o);
}

static void test_pass_unknown(void)
{
    /* mcp-admin's first pass: its own options anywhere, everything else
     * (unknown options, their values, operands, `--` and what follows) kept
     * in order for the command's parse */
    struct opts o;
    char err[128] = "";
    char *ops[16];
    int nops = 0;
    CHECK_INT(parse(&o, CMDLINE_PASS_UNKNOWN, 1, ops, &nops, err, sizeof err,
                    WORDS("--verbose", "cmd", "--since", "1h", "-h", "--count=2", "--x=y", "--",
                          "--verbose")),
              CMDLINE_OK);
    CHECK_INT(o.verbose, 1);
    CHECK_INT(o.count, 2);
    CHECK_INT(nops, 7);
    if (nops == 7) {
        static const char *const want[] = {"cmd",   "--since", "1h",       "-h",
                                           "--x=y", "--",      "--verbose"};
        for (int i = 0; i < 7; i++)
            CHECK_STR(ops[i], want[i]);
    }
    cmdline_free(table, N, &o);
    /* a known option's errors still count */
    CHECK_INT(parse(&o, CMDLINE_PASS_UNKNOWN, 1, ops, &nops, err, sizeof err, WORDS("--count")),
              CMDLINE_NO_VALUE);
    CHECK_STR(err, "option --count needs a value");
    cmdline_free(table, N, &o);
}

static void test_set_and_find(void)
{
    struct opts o;
    memset(&o, 0, sizeof o);
    char err[128] = "";
    const struct cmdline_option *c = cmdline_find(table, N, "countdown", 5);
    CHECK(c == &table[1]);
    CHECK(cmdline_find(table, N, "coun", 4) == NULL);
    CHECK(cmdline_find(table, N, "", 0) == NULL);
    CHECK_INT(cmdline_set(c, &o, "12", "MCPD_COUNT", err, sizeof err), 0);
    CHECK_INT(o.count, 12);
    CHECK_INT(cmdline_set(c, &o, "x", "file.conf:3", err, sizeof err), -1);
    CHECK_STR(err, "file.conf:3: count needs a non-negative number, got 'x'");
    CHECK_INT(o.count, 12); /* a refused value changes nothing */
    CHECK_INT(cmdline_set(&table[0], &o, NULL, "x", err, sizeof err), 0);
    CHECK_INT(o.verbose, 1);
    CHECK_INT(cmdline_set(&table[0], &o, "0", "x", err, sizeof err), 0);
    CHECK_INT(o.verbose, 0);
}

static void test_usage(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!CHECK(f != NULL))
        return;
    cmdline_usage(f, table, N);
    fclose(f);
    CHECK_STR(text, "  --verbose                      say more\n"
                    "  --count VALUE                  how many (default 7)\n"
                    "  --name VALUE                   who (default anon)\n"
                    "  --level VALUE                  low or high\n"
                    "  --poke                         poke it\n");
    free(text);
}

int main(void)
{
    test_defaults();
    test_each_kind();
    test_repeated();
    test_errors();
    test_operands();
    test_pass_unknown();
    test_set_and_find();
    test_usage();
    return check_summary();
}
