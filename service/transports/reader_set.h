/* reader_set — the running readers of a stream transport's connections
 * (WebSocket sessions, raw TCP connections), so that whoever ends a
 * connection from outside (a token's end, the session's end, the
 * transport's stop) can wake its reader, or all of them.
 *
 * Each connection embeds a struct reader; its reader fiber enters the set
 * when it starts and leaves before it ends, so nobody wakes a fiber that
 * is gone. The set's mutex guards every member's fiber and links.
 * Thread-safe. */
#ifndef MCPD_READER_SET_H
#define MCPD_READER_SET_H

#include "fiber.h"

#include <pthread.h>

struct reader {
    struct fiber *fiber; /* while in the set */
    void *conn;          /* the connection, for reader_set_each */
    struct reader *next, **prev;
};

struct reader_set {
    pthread_mutex_t mu;
    struct reader *head;
};

#define READER_SET_INIT                                                                            \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, NULL                                                            \
    }

/* On the reader fiber: r (of connection conn) joins the set. */
void reader_set_enter(struct reader_set *s, struct reader *r, void *conn);
/* Before the reader fiber ends: nobody wakes it from here on. */
void reader_set_leave(struct reader_set *s, struct reader *r);
/* Wakes r's fiber, if it is in the set. */
void reader_set_wake(struct reader_set *s, struct reader *r);
/* Wakes every reader in the set. */
void reader_set_wake_all(struct reader_set *s);
/* Calls fn with each member's conn, under the set's mutex (fn must not
 * block nor touch the set). */
void reader_set_each(struct reader_set *s, void (*fn)(void *conn));

#endif
