/* The pty behind the link. */
#include "sim-line.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "lib/macro.h"

/* Opens a pty master in raw mode. Setting termios through the master sets the slave's on
 * Linux, and the setting outlives the daemon closing and reopening the slave. */
static int open_pty(char *ret_slave, size_t size, struct errmsg *e)
{
    _cleanup_close_ int fd = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    struct termios t;

    if (fd < 0)
        return errmsg_set(e, negative_errno(), "cannot open a pty: %m");
    if (grantpt(fd) < 0 || unlockpt(fd) < 0)
        return errmsg_set(e, negative_errno(), "cannot unlock the pty: %m");
    int r = ptsname_r(fd, ret_slave, size);
    if (r != 0)
        return errmsg_set(e, -r, "cannot name the pty slave");
    if (tcgetattr(fd, &t) < 0)
        return errmsg_set(e, negative_errno(), "cannot read the pty's modes: %m");
    cfmakeraw(&t);
    if (tcsetattr(fd, TCSANOW, &t) < 0)
        return errmsg_set(e, negative_errno(), "cannot set raw mode: %m");
    /* A slave that was never opened does not report a hangup on the master, so open and close
     * it once: from then on POLLHUP tells whether anybody listens, and nothing written before
     * the daemon opens the line piles up as stale data. */
    _cleanup_close_ int slave = open(ret_slave, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0)
        return errmsg_set(e, negative_errno(), "cannot open '%s': %m", ret_slave);
    return TAKE_FD(fd);
}

/* Points link at target atomically: a symlink under a temporary name, renamed over the link. */
static int make_link(const char *link, const char *target, struct errmsg *e)
{
    struct stat st;
    _cleanup_free_ char *tmp = NULL;

    if (lstat(link, &st) == 0 && !S_ISLNK(st.st_mode))
        return errmsg_set(e, -EEXIST, "'%s' exists and is not a symlink; not replacing it", link);
    if (asprintf(&tmp, "%s.tmp%ld", link, (long)getpid()) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    (void)unlink(tmp);
    if (symlink(target, tmp) < 0)
        return errmsg_set(e, negative_errno(), "cannot create '%s': %m", tmp);
    if (rename(tmp, link) < 0) {
        int r = negative_errno();
        (void)unlink(tmp);
        errno = -r;
        return errmsg_set(e, r, "cannot rename '%s' to '%s': %m", tmp, link);
    }
    return 0;
}

/* Removes the link only while it still points at our slave: another simulator may own it. */
static void remove_link(const struct sim_line *l)
{
    char target[sizeof(l->slave)];
    ssize_t n = readlink(l->link, target, sizeof(target) - 1);

    if (n < 0)
        return;
    target[n] = '\0';
    if (strcmp(target, l->slave) == 0)
        (void)unlink(l->link);
}

static int plug(struct sim_line *l, struct errmsg *e)
{
    _cleanup_close_ int fd = open_pty(l->slave, sizeof(l->slave), e);
    if (fd < 0)
        return fd;
    int r = make_link(l->link, l->slave, e);
    if (r < 0)
        return r;
    l->fd = TAKE_FD(fd);
    l->hup = true;
    return 0;
}

int sim_line_open(struct sim_line *l, const char *link, struct errmsg *e)
{
    *l = (struct sim_line){.fd = -1};
    l->link = strdup(link);
    if (!l->link)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int r = plug(l, e);
    if (r < 0) {
        free(l->link);
        l->link = NULL;
    }
    return r;
}

void sim_line_unplug(struct sim_line *l)
{
    if (l->fd < 0)
        return;
    remove_link(l);
    close(l->fd);
    l->fd = -1;
    l->hup = true;
}

int sim_line_replug(struct sim_line *l, struct errmsg *e)
{
    if (l->fd >= 0)
        return 0;
    return plug(l, e);
}

void sim_line_close(struct sim_line *l)
{
    if (l->link)
        sim_line_unplug(l);
    free(l->link);
    l->link = NULL;
}

bool sim_line_check(struct sim_line *l)
{
    struct pollfd p = {.fd = l->fd, .events = POLLIN};

    if (l->fd < 0)
        return false;
    if (poll(&p, 1, 0) >= 0)
        l->hup = (p.revents & POLLHUP) != 0;
    return !l->hup;
}

ssize_t sim_line_read(struct sim_line *l, void *buf, size_t size)
{
    if (l->fd < 0)
        return 0;
    ssize_t n = read(l->fd, buf, size);
    if (n >= 0)
        return n;
    if (errno == EAGAIN || errno == EINTR)
        return 0;
    if (errno == EIO) {
        /* The daemon closed the slave: a hangup, not an error of ours. */
        l->hup = true;
        return 0;
    }
    return negative_errno();
}

void sim_line_write(struct sim_line *l, const void *buf, size_t len)
{
    if (l->fd < 0 || l->hup) {
        l->bytes_dropped += len;
        return;
    }
    ssize_t n = write(l->fd, buf, len);
    if (n < 0) {
        if (errno == EIO)
            l->hup = true;
        n = 0;
    }
    l->bytes_dropped += len - (size_t)n;
}
