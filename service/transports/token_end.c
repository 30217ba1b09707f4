/* token_end — see token_end.h. */
#include "token_end.h"
#include "stream.h"

/* auth's callback, on the watcher's thread under its lock: the stream named
 * last is alive (the transport lets go of it only after token_end_stop). */
static void ended(void *ud, const char *why)
{
    struct token_end *t = ud;
    atomic_store(&t->why, why);
    struct stream *s = atomic_load(&t->reading);
    if (s)
        stream_probe_readers(s);
    if (t->wake)
        t->wake();
}

void token_end_start(struct token_end *t, const struct auth_grant *grant, void (*wake)(void))
{
    atomic_store(&t->why, NULL);
    atomic_store(&t->reading, NULL);
    t->wake = wake;
    auth_hold(&t->hold, grant, ended, t);
}

const char *token_end_check(struct token_end *t, struct stream *s)
{
    if (s && atomic_load(&t->reading) != s)
        atomic_store(&t->reading, s);
    return atomic_load(&t->why);
}

void token_end_stop(struct token_end *t)
{
    auth_release(&t->hold);
}
