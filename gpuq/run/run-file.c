#include "gpuq/run/run-file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fileio.h"
#include "lib/macro.h"

/* fsync of the folder that holds path, so that a rename in it is on disk. */
static int sync_folder(const char *path)
{
    _cleanup_free_ char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    _cleanup_close_ int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    return fsync(fd) < 0 ? negative_errno() : 0;
}

int run_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
                          struct errmsg *e)
{
    _cleanup_free_ char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp", path) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    /* A leftover of a crash between open and rename would make O_EXCL fail: it is ours. */
    (void)unlink(tmp);
    _cleanup_close_ int fd =
        open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 07777);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "cannot create %s: %m", tmp);
    int r = fchmod(fd, mode & 07777) < 0 ? negative_errno() : fd_write_all(fd, data, len);
    if (r >= 0 && fsync(fd) < 0)
        r = negative_errno();
    if (r >= 0 && rename(tmp, path) < 0)
        r = negative_errno();
    if (r < 0) {
        (void)unlink(tmp);
        return errmsg_set(e, r, "cannot write %s: %s", path, strerror(-r));
    }
    r = sync_folder(path);
    return r < 0 ? errmsg_set(e, r, "cannot sync the folder of %s: %s", path, strerror(-r)) : 0;
}

int run_file_read(const char *path, size_t max, bool trusted_only, char **ret, size_t *ret_len,
                  struct errmsg *e)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "cannot open %s: %m", path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return errmsg_set(e, negative_errno(), "%s: %m", path);
    if (!S_ISREG(st.st_mode))
        return errmsg_set(e, -EPERM, "%s: not a regular file", path);
    if (trusted_only && (st.st_uid != geteuid() || (st.st_mode & 0022)))
        return errmsg_set(e, -EPERM,
                          "%s: owned by uid %lu with mode %04o; only a file of uid %lu that no "
                          "one else may write is trusted",
                          path, (unsigned long)st.st_uid, (unsigned)(st.st_mode & 07777),
                          (unsigned long)geteuid());
    int r = fd_read_all(fd, max, ret, ret_len);
    if (r == -EFBIG)
        return errmsg_set(e, r, "%s: larger than %zu bytes", path, max);
    return r < 0 ? errmsg_set(e, r, "cannot read %s: %s", path, strerror(-r)) : 0;
}
