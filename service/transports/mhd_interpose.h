/* mhd_interpose — the one place mcpd steps between ulfius and
 * libmicrohttpd.
 *
 * Why: ulfius (2.7.13) hands libmicrohttpd its own access handler and
 * offers no hook between a request's headers and its body, and none around
 * the handler's calls. mcpd needs both: to refuse a body from its headers
 * (body_gate.h) and to run a request's code on a fiber (request_host.h).
 * Writing an access handler in place of ulfius's would mean rewriting its
 * dispatcher (endpoint matching, maps, responses, streams).
 *
 * How: this file defines MHD_start_daemon. An executable's definition of a
 * symbol comes before a shared library's for every reference in the
 * process (ELF interposition), including the call inside
 * ulfius_start_framework_with_mhd_options. It records ulfius's access
 * handler and starts the daemon through MHD_start_daemon_va (the real one,
 * another symbol) with the handler routed here instead, which calls
 * ulfius's for whatever it does not answer itself. Should a future ulfius
 * stop calling MHD_start_daemon (a static link, -Bsymbolic),
 * mhd_interpose_installed says so and mcpd refuses to serve. See NOTES.md.
 *
 * Not thread-safe: route before starting ulfius, from one thread. */
#ifndef MCPD_MHD_INTERPOSE_H
#define MCPD_MHD_INTERPOSE_H

#include <microhttpd.h>

/* The access handler the next daemon (only) gets in place of ulfius's. */
void mhd_interpose_route(MHD_AccessHandlerCallback outer);
/* 1 once ulfius's daemon was started through here. */
int mhd_interpose_installed(void);
/* ulfius's access handler and its argument (NULL before the start). */
MHD_AccessHandlerCallback mhd_interpose_inner(void **cls);

#endif
