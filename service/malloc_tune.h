/* malloc_tune — glibc malloc settings that only take effect at exec time.
 *
 * A request's life runs on one libmicrohttpd thread and makes some two
 * hundred small allocations (ulfius's header maps, jansson, the store's
 * queued writes), many of one size at once. glibc's per-thread cache holds
 * only 7 chunks per size, so the rest go to a shared arena under its lock.
 * A deeper cache (glibc.malloc.tcache_count) keeps them on the thread; it
 * can only be set through GLIBC_TUNABLES, which the dynamic loader reads
 * before main. So mcpd execs itself once with the setting added, unless
 * GLIBC_TUNABLES already names it (an operator's own choice wins), and then
 * gives its environment back the caller's GLIBC_TUNABLES, so child
 * processes (stdio upstreams) start as the caller would start them.
 * PERFORMANCE.md has the figures. A build that links tcmalloc (the
 * default, MCPD_TCMALLOC in CMakeLists.txt) does not use glibc's malloc:
 * there this does nothing. */
#ifndef MCPD_MALLOC_TUNE_H
#define MCPD_MALLOC_TUNE_H

/* Call first in main. Returns when nothing is to be done, after the
 * re-exec, or when the exec failed (mcpd then runs on glibc's defaults). */
void malloc_tune_reexec(char **argv);

#endif
