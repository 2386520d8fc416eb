#include "capsule/runtime/id-filter.h"

#include <errno.h>
#include <seccomp.h>
#include <string.h>

#include "lib/macro.h"

int id_filter_install(struct errmsg *e)
{
    static const int calls[] = {
        SCMP_SYS(chown),       SCMP_SYS(fchown),      SCMP_SYS(lchown),     SCMP_SYS(fchownat),
        SCMP_SYS(setuid),      SCMP_SYS(setgid),      SCMP_SYS(setreuid),   SCMP_SYS(setregid),
        SCMP_SYS(setresuid),   SCMP_SYS(setresgid),   SCMP_SYS(setfsuid),   SCMP_SYS(setfsgid),
        SCMP_SYS(setgroups),   SCMP_SYS(chown32),     SCMP_SYS(fchown32),   SCMP_SYS(lchown32),
        SCMP_SYS(setuid32),    SCMP_SYS(setgid32),    SCMP_SYS(setreuid32), SCMP_SYS(setregid32),
        SCMP_SYS(setresuid32), SCMP_SYS(setresgid32), SCMP_SYS(setfsuid32), SCMP_SYS(setfsgid32),
        SCMP_SYS(setgroups32),
    };
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return errmsg_set(e, -ENOMEM, "seccomp filter: out of memory");
    int r = 0;
    /* i386 programs in the image too, where this machine runs them. */
    if (seccomp_arch_native() == SCMP_ARCH_X86_64) {
        int k = seccomp_arch_add(ctx, SCMP_ARCH_X86);
        if (k < 0 && k != -EEXIST)
            r = k;
    }
    /* ERRNO(0): the call returns 0, nothing done. A call this architecture lacks (the 32-bit
     * variants on x86-64 alone) is not an error. */
    for (size_t i = 0; r >= 0 && i < ELEMENTSOF(calls); i++) {
        int k = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(0), calls[i], 0);
        if (k < 0 && k != -EDOM && k != -EFAULT)
            r = k;
    }
    if (r >= 0)
        r = seccomp_load(ctx);
    seccomp_release(ctx);
    if (r < 0)
        return errmsg_set(e, r, "install the seccomp filter of --remap-root: %s", strerror(-r));
    return 0;
}
