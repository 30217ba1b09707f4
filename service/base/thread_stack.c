/* thread_stack — see thread_stack.h. */
#include "thread_stack.h"

int thread_stack_attr(pthread_attr_t *attr, size_t stack, int detached)
{
    int rc = pthread_attr_init(attr);
    if (rc != 0)
        return rc;
    if (stack)
        rc = pthread_attr_setstacksize(attr, stack);
    if (rc == 0)
        rc = pthread_attr_setguardsize(attr, STACK_GUARD_SIZE);
    if (rc == 0 && detached)
        rc = pthread_attr_setdetachstate(attr, PTHREAD_CREATE_DETACHED);
    if (rc != 0)
        pthread_attr_destroy(attr);
    return rc;
}
