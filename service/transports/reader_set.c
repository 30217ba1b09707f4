/* reader_set — see reader_set.h. */
#include "reader_set.h"

#include <stddef.h>

void reader_set_enter(struct reader_set *s, struct reader *r, void *conn)
{
    pthread_mutex_lock(&s->mu);
    r->fiber = fiber_current();
    r->conn = conn;
    r->next = s->head;
    if (s->head)
        s->head->prev = &r->next;
    r->prev = &s->head;
    s->head = r;
    pthread_mutex_unlock(&s->mu);
}

void reader_set_leave(struct reader_set *s, struct reader *r)
{
    pthread_mutex_lock(&s->mu);
    *r->prev = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->fiber = NULL;
    pthread_mutex_unlock(&s->mu);
}

void reader_set_wake(struct reader_set *s, struct reader *r)
{
    pthread_mutex_lock(&s->mu);
    if (r->fiber)
        fiber_wake(r->fiber);
    pthread_mutex_unlock(&s->mu);
}

void reader_set_wake_all(struct reader_set *s)
{
    pthread_mutex_lock(&s->mu);
    for (struct reader *r = s->head; r; r = r->next)
        fiber_wake(r->fiber);
    pthread_mutex_unlock(&s->mu);
}

void reader_set_each(struct reader_set *s, void (*fn)(void *conn))
{
    pthread_mutex_lock(&s->mu);
    for (struct reader *r = s->head; r; r = r->next)
        fn(r->conn);
    pthread_mutex_unlock(&s->mu);
}
