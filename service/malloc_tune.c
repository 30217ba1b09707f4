#include "malloc_tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define TCACHE_SETTING "glibc.malloc.tcache_count"
#define TCACHE_COUNT "32"
/* Carries the caller's GLIBC_TUNABLES ("-" when it had none) across the
 * exec, so the second run knows it is the second and can restore it. */
#define ORIGINAL_ENV "MCPD_ORIGINAL_GLIBC_TUNABLES"

void malloc_tune_reexec(char **argv)
{
#if defined(__GLIBC__) && !defined(MCPD_TCMALLOC)
    const char *original = getenv(ORIGINAL_ENV);
    if (original) {
        if (strcmp(original, "-") == 0)
            unsetenv("GLIBC_TUNABLES");
        else
            setenv("GLIBC_TUNABLES", original, 1);
        unsetenv(ORIGINAL_ENV);
        /* The exec of /proc/self/exe named the process "exe" (ps, top):
         * it gets its own name back. */
        const char *slash = argv[0] ? strrchr(argv[0], '/') : NULL;
        if (argv[0])
            prctl(PR_SET_NAME, slash ? slash + 1 : argv[0]);
        return;
    }
    const char *tunables = getenv("GLIBC_TUNABLES");
    /* Valgrind would lose the process at the exec. */
    const char *preload = getenv("LD_PRELOAD");
    if ((tunables && strstr(tunables, TCACHE_SETTING)) || (preload && strstr(preload, "vgpreload")))
        return;
    char value[4096];
    int n = snprintf(value, sizeof value, "%s%s" TCACHE_SETTING "=" TCACHE_COUNT,
                     tunables ? tunables : "", tunables && *tunables ? ":" : "");
    if (n < 0 || (size_t)n >= sizeof value)
        return;
    if (setenv(ORIGINAL_ENV, tunables ? tunables : "-", 1) == 0 &&
        setenv("GLIBC_TUNABLES", value, 1) == 0)
        execv("/proc/self/exe", argv);
    /* Still here: run as we are, with the environment as it came. */
    unsetenv(ORIGINAL_ENV);
    if (tunables)
        setenv("GLIBC_TUNABLES", tunables, 1);
    else
        unsetenv("GLIBC_TUNABLES");
#else
    (void)argv;
#endif
}
