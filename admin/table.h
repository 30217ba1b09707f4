/* table_out — mcp-admin's human output: rows as an aligned table that fits
 * the terminal.
 *
 * Columns are sized to their widest cell; when the total is wider than the
 * terminal ($COLUMNS, the tty's width, else 120), the widest columns but
 * the first (the row's id, never cut) are narrowed and their cells cut with
 * "…" until it fits. Cells are plain text, escaped by safe_text so that
 * a stored message cannot drive the terminal. */
#ifndef MCPD_ADMIN_TABLE_H
#define MCPD_ADMIN_TABLE_H

#include <stdio.h>

struct table_out;

struct table_out *table_out_new(int ncols, const char *const *headers);
/* Adds a row of ncols cells (copied; NULL shows as "-"). */
void table_out_row(struct table_out *t, const char *const *cells);
/* Prints and frees. width 0: the terminal's. */
void table_out_print(struct table_out *t, FILE *f, int width);

#endif
