/* table_out — see table.h. */
#include "table.h"
#include "safe_text.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define MIN_COL 6

struct table_out {
    int ncols;
    char **cells; /* row-major, headers first */
    size_t nrows, cap;
};

static char *clean(const char *s)
{
    return safe_text(s ? s : "-");
}

static void add(struct table_out *t, const char *const *cells)
{
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **c = realloc(t->cells, cap * (size_t)t->ncols * sizeof *c);
        if (!c)
            return;
        t->cells = c;
        t->cap = cap;
    }
    for (int i = 0; i < t->ncols; i++)
        t->cells[t->nrows * (size_t)t->ncols + (size_t)i] = clean(cells[i]);
    t->nrows++;
}

struct table_out *table_out_new(int ncols, const char *const *headers)
{
    struct table_out *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->ncols = ncols;
    add(t, headers);
    return t;
}

void table_out_row(struct table_out *t, const char *const *cells)
{
    if (t)
        add(t, cells);
}

/* Display width of UTF-8 text: code points, not bytes. */
static size_t width_of(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

/* Prints s in exactly w columns: cut with "…" or padded. */
static void put_cell(FILE *f, const char *s, size_t w, int last)
{
    size_t have = width_of(s);
    if (have <= w) {
        fputs(s, f);
        if (!last)
            for (size_t i = have; i < w; i++)
                fputc(' ', f);
        return;
    }
    size_t shown = 0;
    const char *p = s;
    while (*p && shown < w - 1) {
        const char *q = p + 1;
        while ((*q & 0xc0) == 0x80)
            q++;
        fwrite(p, 1, (size_t)(q - p), f);
        p = q;
        shown++;
    }
    fputs("…", f);
}

void table_out_print(struct table_out *t, FILE *f, int width)
{
    if (!t)
        return;
    if (width <= 0) {
        const char *env = getenv("COLUMNS");
        struct winsize ws;
        width = env && atoi(env) > 0                                          ? atoi(env)
                : ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col
                                                                              : INT_MAX;
    }
    size_t *w = calloc((size_t)t->ncols, sizeof *w);
    for (size_t r = 0; w && r < t->nrows; r++)
        for (int c = 0; c < t->ncols; c++) {
            size_t cw = width_of(t->cells[r * (size_t)t->ncols + (size_t)c]);
            if (cw > w[c])
                w[c] = cw;
        }
    /* Narrow the widest column, one character at a time, until it fits.
     * The first column names the row (an id to copy): it is never cut. */
    for (;;) {
        size_t total = 0;
        int widest = t->ncols > 1 ? 1 : 0;
        for (int c = 0; w && c < t->ncols; c++) {
            total += w[c] + (c ? 2 : 0);
            if (c > 0 && w[c] > w[widest])
                widest = c;
        }
        if (!w || total <= (size_t)width || w[widest] <= MIN_COL)
            break;
        w[widest]--;
    }
    for (size_t r = 0; w && r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            if (c)
                fputs("  ", f);
            put_cell(f, t->cells[r * (size_t)t->ncols + (size_t)c], w[c], c == t->ncols - 1);
        }
        fputc('\n', f);
    }
    for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(w);
    free(t);
}
