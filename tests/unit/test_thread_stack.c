/* test_thread_stack — a thread started with thread_stack_attr has the
 * stack size it asked for and, right below its stack, STACK_GUARD_SIZE of
 * address space that no access may touch (a "---p" range in
 * /proc/self/maps), where glibc's default is one page; detached or not as
 * asked. */
#include "check.h"
#include "thread_stack.h"

#include <stdint.h>
#include <stdio.h>

struct seen {
    size_t stack, guard;
    int detached;
    int guard_mapped; /* [lo - STACK_GUARD_SIZE, lo) is one inaccessible range */
};

/* Whether [from, to) lies inside one mapping with no access rights. */
static int inaccessible(uintptr_t from, uintptr_t to)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return 0;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && lo <= from && to <= hi)
            found = perms[0] == '-' && perms[1] == '-' && perms[2] == '-';
    }
    fclose(f);
    return found;
}

static void *probe(void *arg)
{
    struct seen *s = arg;
    pthread_attr_t a;
    if (pthread_getattr_np(pthread_self(), &a) != 0)
        return NULL;
    void *lo;
    int state;
    pthread_attr_getstack(&a, &lo, &s->stack);
    pthread_attr_getguardsize(&a, &s->guard);
    pthread_attr_getdetachstate(&a, &state);
    s->detached = state == PTHREAD_CREATE_DETACHED;
    pthread_attr_destroy(&a);
    uintptr_t base = (uintptr_t)lo;
    s->guard_mapped = inaccessible(base - STACK_GUARD_SIZE, base);
    return NULL;
}

static void test_guard(size_t stack)
{
    pthread_attr_t attr;
    CHECK_INT(thread_stack_attr(&attr, stack, 0), 0);
    struct seen s = {0};
    pthread_t t;
    CHECK_INT(pthread_create(&t, &attr, probe, &s), 0);
    pthread_attr_destroy(&attr);
    pthread_join(t, NULL);
    if (stack)
        CHECK(s.stack >= stack);
    CHECK(s.guard >= STACK_GUARD_SIZE);
    CHECK(s.guard_mapped);
    CHECK_INT(s.detached, 0);
}

static void test_detached(void)
{
    pthread_attr_t attr;
    CHECK_INT(thread_stack_attr(&attr, 128 * 1024, 1), 0);
    int state = 0;
    pthread_attr_getdetachstate(&attr, &state);
    CHECK_INT(state, PTHREAD_CREATE_DETACHED);
    size_t guard = 0;
    pthread_attr_getguardsize(&attr, &guard);
    CHECK_INT(guard, STACK_GUARD_SIZE);
    pthread_attr_destroy(&attr);
}

int main(void)
{
    test_guard(128 * 1024);
    test_guard(256 * 1024);
    test_guard(0);
    test_detached();
    return check_summary();
}
