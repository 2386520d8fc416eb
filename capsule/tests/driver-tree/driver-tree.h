/* For the GPU injection tests: a stand-in driver tree (make-driver-tree.sh) in a temp dir, with
 * the fake NVML answering from tests/fixtures/nvml/capsule-h200-mig.json. Header-only because
 * every test program is one source file. */
#pragma once

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/driver-tree/driver-tree-paths.h"

#define DRIVER_TREE_FIXTURE DRIVER_TREE_FIXTURES "/capsule-h200-mig.json"

/* Builds a tree at dir/name; returns its path (malloc'd) or NULL with a message on stderr. */
static inline char *driver_tree_make(const char *dir, const char *name)
{
#ifndef DRIVER_TREE_FAKE_NVML
    fprintf(stderr, "built without the fake NVML\n");
    return NULL;
#else
    char *root, *cmd;
    if (asprintf(&root, "%s/%s", dir, name) < 0)
        return NULL;
    if (asprintf(&cmd, "'%s' '%s' '%s' '%s'", DRIVER_TREE_SCRIPT, root, DRIVER_TREE_STUBS,
                 DRIVER_TREE_FAKE_NVML) < 0) {
        free(root);
        return NULL;
    }
    int rc = system(cmd);
    free(cmd);
    if (rc != 0) {
        fprintf(stderr, "make-driver-tree.sh failed (%d)\n", rc);
        free(root);
        return NULL;
    }
    return root;
#endif
}

/* Runs a shell command, formatted; returns its status (0 ok). */
__attribute__((format(printf, 1, 2))) static inline int driver_tree_sh(const char *fmt, ...)
{
    va_list ap;
    char *cmd;
    va_start(ap, fmt);
    int k = vasprintf(&cmd, fmt, ap);
    va_end(ap);
    if (k < 0)
        return -1;
    int rc = system(cmd);
    free(cmd);
    return rc;
}

/* A temp dir for one test program; NULL on failure. */
static inline char *driver_tree_tmpdir(void)
{
    const char *t = getenv("TMPDIR");
    char *s;
    if (asprintf(&s, "%s/capsule-gpu-XXXXXX", t && *t ? t : "/tmp") < 0)
        return NULL;
    if (!mkdtemp(s)) {
        free(s);
        return NULL;
    }
    return s;
}
