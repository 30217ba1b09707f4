/* test_malloc_tune — mcpd's exec-time malloc setting (malloc_tune.c): the
 * process runs again with glibc.malloc.tcache_count raised, its environment
 * given back as the caller set it (so child processes see the caller's
 * GLIBC_TUNABLES), and an operator's own tcache_count left alone, with no
 * exec, and the process keeps its own name rather than the "exe" of the
 * /proc/self/exe it was run again from. The test runs itself as the child
 * in each case. */
#include "check.h"
#include "malloc_tune.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

/* 1 when this process image was started by malloc_tune's exec: its initial
 * environment (which /proc keeps) carries the marker. */
static int started_by_reexec(void)
{
    FILE *f = fopen("/proc/self/environ", "r");
    if (!f)
        return -1;
    static char env[1 << 16];
    size_t n = fread(env, 1, sizeof env - 1, f);
    fclose(f);
    env[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(env + i) + 1)
        if (strncmp(env + i, "MCPD_ORIGINAL_GLIBC_TUNABLES=", 29) == 0)
            return 1;
    return 0;
}

/* Frees 20 chunks of one size: with glibc's default cache of 7 per size,
 * 13 land in the shared fastbins; with the raised one, none do. */
static size_t fastbin_bytes_after_burst(void)
{
    void *p[20];
    for (int i = 0; i < 20; i++)
        p[i] = malloc(32);
    for (int i = 0; i < 20; i++)
        free(p[i]);
    return mallinfo2().fsmblks;
}

static int child(char **argv)
{
    malloc_tune_reexec(argv);
    const char *t = getenv("GLIBC_TUNABLES"), *o = getenv("MCPD_ORIGINAL_GLIBC_TUNABLES");
    char comm[32] = "-";
    FILE *f = fopen("/proc/self/comm", "r");
    if (f) {
        if (fscanf(f, "%31s", comm) != 1)
            strcpy(comm, "-");
        fclose(f);
    }
    printf("%d %zu %s %s %s\n", started_by_reexec(), fastbin_bytes_after_burst(), t ? t : "-",
           o ? o : "-", comm);
    return 0;
}

struct outcome {
    int reexec;
    size_t fastbin;
    char tunables[256], marker[256];
    char comm[32]; /* the process's name, as ps shows it */
};

static int run(const char *tunables, struct outcome *out)
{
    if (tunables)
        setenv("GLIBC_TUNABLES", tunables, 1);
    else
        unsetenv("GLIBC_TUNABLES");
    /* popen's shell would be /proc/self/exe: name this binary itself. */
    char self[4096], cmd[4200];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return -1;
    self[len] = '\0';
    snprintf(cmd, sizeof cmd, "exec '%s' child", self);
    FILE *p = popen(cmd, "r");
    unsetenv("GLIBC_TUNABLES");
    if (!p)
        return -1;
    int n = fscanf(p, "%d %zu %255s %255s %31s", &out->reexec, &out->fastbin, out->tunables,
                   out->marker, out->comm);
    return pclose(p) == 0 && n == 5 ? 0 : -1;
}

static void test_default(void)
{
    struct outcome o;
    if (!CHECK(run(NULL, &o) == 0))
        return;
    CHECK_INT(o.reexec, 1);
    CHECK_STR(o.tunables, "-"); /* given back: the caller had none */
    CHECK_STR(o.marker, "-");
    CHECK_STR(o.comm, "test_malloc_tun"); /* its own name (15 bytes), not "exe" */
#ifndef SANITIZED
    CHECK_INT(o.fastbin, 0);
#endif
}

static void test_callers_tunables_kept(void)
{
    struct outcome o;
    if (!CHECK(run("glibc.malloc.perturb=0", &o) == 0))
        return;
    CHECK_INT(o.reexec, 1);
    CHECK_STR(o.tunables, "glibc.malloc.perturb=0");
    CHECK_STR(o.marker, "-");
#ifndef SANITIZED
    CHECK_INT(o.fastbin, 0);
#endif
}

static void test_operator_choice_wins(void)
{
    struct outcome o;
    if (!CHECK(run("glibc.malloc.tcache_count=7", &o) == 0))
        return;
    CHECK_INT(o.reexec, 0);
    CHECK_STR(o.tunables, "glibc.malloc.tcache_count=7");
    CHECK_STR(o.comm, "test_malloc_tun");
#ifndef SANITIZED
    CHECK(o.fastbin > 0);
#endif
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "child") == 0)
        return child(argv);
    test_default();
    test_callers_tunables_kept();
    test_operator_choice_wins();
    return check_summary();
}
