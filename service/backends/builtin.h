/* builtin — the built-in toolset backend.
 *
 * This is the backend mcpd serves when no upstream is configured: every
 * tool, resource, resource template, prompt and completion the official MCP
 * conformance suite (0.1.16, "everything server" names) asks for, plus two
 * small user tools, echo and countdown. It implements struct backend_ops
 * (core/backend.h) and never sees a transport: each request arrives as a
 * struct call and everything it emits (progress, log messages, sampling and
 * elicitation requests, the reply) goes through call.h.
 *
 * How it works: the tools, resources, prompts and completions are constant
 * tables (builtin_tools.c, builtin_resources.c, builtin_prompts.c); handle()
 * looks the method up in a method table and the method looks the name up in
 * its table. Tool arguments are checked against the tool's own inputSchema
 * (builtin_schema.c) before the tool runs; a mismatch is a tool result with
 * isError:true, as the spec asks. The only mutable state is the set of
 * resource subscriptions per session, behind a mutex, so handle() may run on
 * many threads at once (the loop's worker fibers, and the callers of tools
 * that answer at once: builtin_tools_may_block).
 *
 * Ownership: builtin_backend_ops() returns a static table (never freed).
 * builtin_backend_new() returns the self pointer to pass to every op; the
 * ops' destroy() frees it. NULL on allocation failure. */
#ifndef MCPD_BUILTIN_H
#define MCPD_BUILTIN_H

struct backend_ops; /* core/backend.h */

const struct backend_ops *builtin_backend_ops(void);
void *builtin_backend_new(void);

#endif
