/* Scratch directories for runs (store.h): tmp/run-XXXXXX guarded by locks/run-XXXXXX.lock. The
 * lock is made and taken before the directory exists and removed after it is gone, so a run-*
 * directory whose lock is free (or missing) belongs to nobody: gc removes it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/rm-tree.h"
#include "capsule/store/store-private.h"

int store_scratch_new(struct store *s, char **ret_dir, int *ret_lock_fd, struct errmsg *e)
{
    static const char suffix[] = ".lock";
    _cleanup_free_ char *lock = NULL, *dir = NULL;
    if (asprintf(&lock, "%s/locks/%sXXXXXX%s", s->root, STORE_SCRATCH_PREFIX, suffix) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    _cleanup_close_ int fd = mkostemps(lock, (int)strlen(suffix), O_CLOEXEC);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "cannot create a lock in '%s/locks': %m", s->root);
    const char *name = strrchr(lock, '/') + 1;
    int r = flock(fd, LOCK_EX | LOCK_NB) < 0 ? negative_errno() : 0;
    if (r >= 0 &&
        asprintf(&dir, "%s/tmp/%.*s", s->root, (int)(strlen(name) - strlen(suffix)), name) < 0)
        r = -ENOMEM;
    if (r >= 0 && mkdir(dir, 0700) < 0)
        r = negative_errno();
    if (r < 0) {
        unlink(lock);
        return errmsg_set(e, r, "cannot create a scratch directory in '%s/tmp': %s", s->root,
                          strerror(-r));
    }
    *ret_dir = TAKE_PTR(dir);
    *ret_lock_fd = TAKE_FD(fd);
    return 0;
}

void store_scratch_remove(struct store *s, const char *dir, int lock_fd)
{
    char lock[PATH_MAX];
    int r = rm_tree(dir);
    if (r < 0)
        log_debug("scratch directory '%s' stays for gc: %s", dir, strerror(-r));
    else if (snprintf(lock, sizeof(lock), "locks/%s.lock", strrchr(dir, '/') + 1) <
             (int)sizeof(lock))
        unlinkat(s->root_fd, lock, 0);
    if (lock_fd >= 0)
        close(lock_fd);
}
