/* json_fetch — one HTTP exchange with an authorization server whose answer
 * is a JSON object: the issuer's metadata and keys (jwks.c) and token
 * introspection (introspect.c).
 *
 * libcurl, http and https only, no redirects (a server that moved must be
 * configured anew, not followed), a deadline for the whole exchange, and a
 * cap on the answer's size, checked as it arrives. A GET, or a POST of a
 * form (with HTTP Basic credentials when given). On failure it logs one
 * warning, `event` with the URL and what went wrong, and never the form
 * (it may hold a token) or the credentials.
 *
 * The exchanges run on one fetcher thread (started on first use) that
 * drives them all at once with libcurl's multi interface; the caller waits
 * on an fcond. So a request's fiber that needs a token checked parks, and
 * the pool or loop thread it runs on goes on serving every other
 * connection, instead of being held for up to the whole deadline by a slow
 * authorization server. A plain thread simply blocks. A caller that gives up
 * early (its fiber cancelled: the connection is going away) leaves the
 * exchange to finish, and be freed, on the fetcher.
 *
 * Thread-safe. curl_global_init is the caller's, once, before the first
 * fetch. */
#ifndef MCPD_JSON_FETCH_H
#define MCPD_JSON_FETCH_H

#include <jansson.h>
#include <stddef.h>

struct json_fetch {
    const char *url;
    const char *form;    /* NULL: GET; else POSTed as application/x-www-form-urlencoded */
    const char *userpwd; /* "id:secret" for HTTP Basic, or NULL */
    long timeout_ms;     /* the whole exchange; <= 0: fail at once */
    size_t max;          /* the answer's bytes, at most */
    const char *event;   /* the warning's event name (static storage) */
};

/* The answer (a new reference, the caller's) when the status is 200 and the
 * body a JSON object; else NULL, after the warning. The strings of f are
 * copied: the caller may free them as soon as this returns. */
json_t *json_fetch(const struct json_fetch *f);

/* Stops the fetcher thread: exchanges still running fail at once. Later
 * fetches start it again. For shutdown; safe when it never started. */
void json_fetch_shutdown(void);

#endif
