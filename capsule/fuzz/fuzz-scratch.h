/* For fuzz targets that write files (layer unpacks, archive imports): they run as nobody when
 * started as root, so that a bug cannot write where root may, in a scratch folder removed at
 * exit. */
#pragma once

#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/fuzz-check.h"
#include "lib/rm-tree.h"

static char fuzz_scratch[64];

static inline void fuzz_scratch_remove(void)
{
    rm_tree(fuzz_scratch);
}

/* Drops root for nobody, then makes /tmp/NAME.XXXXXX; returns its path. */
static inline const char *fuzz_scratch_make(const char *name)
{
    if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
                           setresuid(65534, 65534, 65534) < 0))
        abort();
    snprintf(fuzz_scratch, sizeof(fuzz_scratch), "/tmp/%s.XXXXXX", name);
    CHECK(mkdtemp(fuzz_scratch));
    atexit(fuzz_scratch_remove);
    return fuzz_scratch;
}
