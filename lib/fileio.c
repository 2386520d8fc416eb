#include "lib/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/macro.h"

int fd_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return negative_errno();
        if (n == 0)
            return -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int fd_read_up_to(int fd, void *buf, size_t size, size_t *ret_len)
{
    char *p = buf;
    size_t len = 0;
    while (len < size) {
        ssize_t n = read(fd, p + len, size - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return negative_errno();
        if (n == 0)
            break;
        len += (size_t)n;
    }
    *ret_len = len;
    return 0;
}

int fd_read_all(int fd, size_t max, char **ret, size_t *ret_len)
{
    size_t cap = 4096, len = 0;
    _cleanup_free_ char *buf = malloc(cap + 1);
    if (!buf)
        return -ENOMEM;
    for (;;) {
        size_t n = 0;
        int r = fd_read_up_to(fd, buf + len, cap - len, &n);
        if (r < 0)
            return r;
        len += n;
        if (len < cap)
            break; /* the end came before the buffer was full */
        if (cap > max)
            return -EFBIG;
        char *bigger = realloc(buf, cap * 2 + 1);
        if (!bigger)
            return -ENOMEM;
        buf = bigger;
        cap *= 2;
    }
    if (len > max)
        return -EFBIG;
    buf[len] = '\0';
    *ret = TAKE_PTR(buf);
    *ret_len = len;
    return 0;
}

int file_read_text(const char *path, size_t max, char **ret, size_t *ret_len, struct errmsg *e)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below); it changes
     * nothing for a regular file, or for /dev/null as an empty configuration. */
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0)
        return errmsg_set(e, negative_errno(), "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return errmsg_set(e, -EISDIR, "%s: is a directory", path);
    if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
        return errmsg_set(e, -EINVAL, "%s: a FIFO or socket, not a file", path);
    /* Read to EOF, not to the size fstat() saw: the file may grow meanwhile. */
    int r = fd_read_all(fd, max, ret, ret_len);
    if (r == -EFBIG)
        return errmsg_set(e, r, "%s: larger than %zu bytes", path, max);
    if (r < 0)
        return errmsg_set(e, r, "%s: %s", path, strerror(-r));
    return 0;
}
