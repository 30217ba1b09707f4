/* json_fetch — one HTTP exchange with an authorization server whose answer
 * is a JSON object: the issuer's metadata and keys (jwks.c) and token
 * introspection (introspect.c).
 *
 * libcurl, http and https only, no redirects (a server that moved must be
 * configured anew, not followed), a deadline for the whole exchange, and a
 * cap on the answer's size, checked as it arrives. A GET, or a POST of a
 * form (with HTTP Basic credentials when given). On failure it logs one
 * warning, `event` with the URL and what went wrong, and never the form
 * (it may hold a token) or the credentials. Thread-safe (curl_global_init
 * is the caller's, once). */
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
    const char *event;   /* the warning's event name */
};

/* The answer (a new reference, the caller's) when the status is 200 and the
 * body a JSON object; else NULL, after the warning. */
json_t *json_fetch(const struct json_fetch *f);

#endif
