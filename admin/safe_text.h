/* safe_text — text that came from a client, an upstream child or the
 * database, made safe to print on an operator's terminal.
 *
 * Every human output path of mcp-admin goes through here: table cells, the
 * session, log and chunk lines, the capabilities line and error messages.
 * A client name such as "\u001b]0;title\u0007\u001b[2J" (SQLite's
 * json_extract turns the escapes into real ESC and BEL bytes) must show as
 * text, not retitle or clear the terminal. What is escaped, so that the
 * operator still sees what was sent:
 *   - C0 controls and DEL: \n, \r, \t, else \xNN;
 *   - bytes that are not UTF-8 (a stray continuation byte, an overlong
 *     form, a surrogate, a sequence cut short): \xNN for each byte;
 *   - C1 controls U+0080..U+009F (a UTF-8 terminal may act on U+009B, CSI),
 *     the bidirectional embeddings, overrides and isolates (U+202A..U+202E,
 *     U+2066..U+2069) and marks (U+061C, U+200E, U+200F), and the line and
 *     paragraph separators (U+2028, U+2029): \uXXXX.
 * Everything else, backslashes included, is copied unchanged: this output
 * is for reading (--json is the exact one), stored JSON messages stay
 * readable, and escaping escaped text changes nothing.
 *
 * --json output is not passed through here: admin_print_json writes JSON
 * whose strings are ASCII-only escapes for all of the above. */
#ifndef MCPD_ADMIN_SAFE_TEXT_H
#define MCPD_ADMIN_SAFE_TEXT_H

#include <jansson.h>
#include <stddef.h>

/* The n bytes at s, escaped, as a new NUL-terminated string (the caller
 * frees); NULL when out of memory. */
char *safe_text_n(const char *s, size_t n);
/* The same for a NUL-terminated s; NULL for NULL. */
char *safe_text(const char *s);
/* Replaces every string in v, at any depth, by its escaped form (object
 * keys are left alone: the printers show none of a client's). Once done,
 * a printer may print v's strings as they are. */
void safe_text_json(json_t *v);

#endif
