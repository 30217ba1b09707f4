/* cmdline — see cmdline.h. */
#include "cmdline.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const struct cmdline_option *cmdline_find(const struct cmdline_option *opts, size_t n,
                                          const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
            return &opts[i];
    return NULL;
}

int cmdline_set(const struct cmdline_option *opt, void *base, const char *value, const char *source,
                char *err, size_t errcap)
{
    void *field = (char *)base + opt->offset;
    switch (opt->kind) {
    case CMDLINE_STR: {
        char *copy = strdup(value);
        if (!copy) {
            snprintf(err, errcap, "out of memory");
            return -1;
        }
        free(*(char **)field);
        *(char **)field = copy;
        return 0;
    }
    case CMDLINE_ARG:
        *(const char **)field = value;
        return 0;
    case CMDLINE_FUNC:
    case CMDLINE_ACTION:
        return opt->take(base, opt, value, err, errcap);
    case CMDLINE_FLAG:
        if (!value) {
            *(int *)field = 1;
            return 0;
        }
        break;
    case CMDLINE_INT:
        break;
    }
    /* A number: decimal digits only, so "10k", "1.5", "" and "-1" are all
     * refused rather than read as a part of themselves. */
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (errno || end == value || *end || v < 0) {
        snprintf(err, errcap, "%s: %s needs a non-negative number, got '%s'", source, opt->name,
                 value);
        return -1;
    }
    if (opt->kind == CMDLINE_FLAG)
        *(int *)field = v != 0;
    else
        *(int64_t *)field = v;
    return 0;
}

int cmdline_defaults(const struct cmdline_option *opts, size_t n, void *base, char *err,
                     size_t errcap)
{
    for (size_t i = 0; i < n; i++)
        if (opts[i].def && cmdline_set(&opts[i], base, opts[i].def, "default", err, errcap) != 0)
            return -1;
    return 0;
}

int cmdline_parse(const struct cmdline_option *opts, size_t n, void *base, int argc, char **argv,
                  unsigned flags, char **operands, int *noperands, char *err, size_t errcap)
{
    int pass = operands && (flags & CMDLINE_PASS_UNKNOWN);
    int k = 0, only_operands = 0;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        int dashed = a[0] == '-' && a[1] != '\0';
        if (!operands && strncmp(a, "--", 2) != 0) {
            snprintf(err, errcap, "unexpected argument '%s'", a);
            return CMDLINE_UNEXPECTED;
        }
        if (only_operands || !dashed) {
            operands[k++] = a;
            continue;
        }
        int long_form = a[1] == '-';
        /* `--` ends the options only where operands are taken: elsewhere
         * it would only hide a mistake. */
        if (long_form && a[2] == '\0' && operands) {
            only_operands = 1;
            if (pass)
                operands[k++] = a; /* for the second parse to end its options too */
            continue;
        }
        /* One dash: there are no short options, but the word is meant as
         * one (a typo, or -h), so it is not taken for an operand. */
        const char *name = a + 2;
        const char *eq = long_form ? strchr(name, '=') : NULL;
        const struct cmdline_option *o =
            long_form ? cmdline_find(opts, n, name, eq ? (size_t)(eq - name) : strlen(name)) : NULL;
        if (!o && pass) {
            operands[k++] = a;
            continue;
        }
        if (!o) {
            snprintf(err, errcap, "unknown option '%s'", a);
            return CMDLINE_UNKNOWN;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (value && o->kind == CMDLINE_ACTION) {
            snprintf(err, errcap, "option --%s takes no value", o->name);
            return CMDLINE_BAD_VALUE;
        }
        if (!value && o->kind != CMDLINE_FLAG && o->kind != CMDLINE_ACTION) {
            if (i + 1 >= argc) {
                snprintf(err, errcap, "option --%s needs a value", o->name);
                return CMDLINE_NO_VALUE;
            }
            value = argv[++i];
        }
        if (cmdline_set(o, base, value, a, err, errcap) != 0)
            return CMDLINE_BAD_VALUE;
    }
    if (noperands)
        *noperands = k;
    return CMDLINE_OK;
}

void cmdline_free(const struct cmdline_option *opts, size_t n, void *base)
{
    for (size_t i = 0; i < n; i++)
        if (opts[i].kind == CMDLINE_STR) {
            char **p = (char **)((char *)base + opts[i].offset);
            free(*p);
            *p = NULL;
        }
}

void cmdline_usage(FILE *out, const struct cmdline_option *opts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct cmdline_option *o = &opts[i];
        if (!o->help)
            continue;
        int flag = o->kind == CMDLINE_FLAG || o->kind == CMDLINE_ACTION;
        char left[64];
        snprintf(left, sizeof left, "--%s%s", o->name, flag ? "" : " VALUE");
        fprintf(out, "  %-30s %s", left, o->help);
        if (o->def && !flag)
            fprintf(out, " (default %s)", o->def);
        fputc('\n', out);
    }
}
