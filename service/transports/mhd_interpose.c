/* mhd_interpose — see mhd_interpose.h. */
#include "mhd_interpose.h"

#include <stdarg.h>
#include <stddef.h>

static struct {
    MHD_AccessHandlerCallback outer, inner;
    void *inner_cls;
} route;

void mhd_interpose_route(MHD_AccessHandlerCallback outer)
{
    route.outer = outer;
}

int mhd_interpose_installed(void)
{
    return route.inner != NULL;
}

MHD_AccessHandlerCallback mhd_interpose_inner(void **cls)
{
    *cls = route.inner_cls;
    return route.inner;
}

struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc,
                                    void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
    va_list ap;
    va_start(ap, dh_cls);
    if (route.outer) {
        /* Once: another daemon in the process is not ulfius's. */
        route.inner = dh;
        route.inner_cls = dh_cls;
        dh = route.outer;
        dh_cls = NULL;
        route.outer = NULL;
    }
    struct MHD_Daemon *d = MHD_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
    va_end(ap);
    return d;
}
