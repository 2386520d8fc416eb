#include "capsule/runtime/tty.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "lib/fileio.h"
#include "lib/macro.h"

bool tty_wanted(bool force)
{
    /* A background job (capsule run ... &) must not take the terminal: raw mode and reading it
     * would stop the job (SIGTTOU, SIGTTIN) although its command may never read. */
    return force ||
           (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp());
}

int tty_channel(bool want, int fds[2], struct errmsg *e)
{
    fds[0] = fds[1] = -1;
    if (want && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
        return errmsg_set(e, negative_errno(), "socketpair: %m");
    return 0;
}

static int send_fd(int sock, int fd)
{
    char byte = 't';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u = {0};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : negative_errno();
}

static int recv_fd(int sock, int *ret)
{
    char byte;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    ssize_t n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0)
        return negative_errno();
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (n != 1 || !c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
        return -EBADMSG;
    memcpy(ret, CMSG_DATA(c), sizeof(int));
    return 0;
}

/* The caller's window size onto a terminal of the container (either end sets it). */
static void winsize_copy(int to)
{
    struct winsize ws;
    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 || ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0)
        (void)ioctl(to, TIOCSWINSZ, &ws);
}

int tty_child_attach(int sock, bool force, struct errmsg *e)
{
    bool was_tty[3];
    for (int fd = 0; fd < 3; fd++)
        was_tty[fd] = force || isatty(fd);
    _cleanup_close_ int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0)
        return errmsg_set(e, negative_errno(), "open a terminal in the container: %m");
    char name[64];
    if (ptsname_r(master, name, sizeof(name)) != 0)
        return errmsg_set(e, negative_errno(), "open a terminal in the container: %m");
    _cleanup_close_ int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0)
        return errmsg_set(e, negative_errno(), "open the container's terminal %s: %m", name);
    /* Here, before the command starts: capsule's copy on receiving the terminal may come after
     * the command has asked for its size and found none. */
    winsize_copy(slave);
    int r = send_fd(sock, master);
    close(sock);
    if (r < 0)
        return errmsg_set(e, r, "hand the container's terminal to capsule: %s", strerror(-r));
    if (setsid() < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
        return errmsg_set(e, negative_errno(), "make %s the command's terminal: %m", name);
    for (int fd = 0; fd < 3; fd++)
        if (was_tty[fd] && dup2(slave, fd) < 0)
            return errmsg_set(e, negative_errno(), "put %s on descriptor %d: %m", name, fd);
    return 0;
}

struct tty_relay {
    int master;
    int in; /* stdin, -1 once it ended */
    bool raw;
    struct termios saved;
};

int tty_relay_start(int sock, struct tty_relay **ret, struct errmsg *e)
{
    struct tty_relay *t = calloc(1, sizeof(*t));
    if (!t)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int r = recv_fd(sock, &t->master);
    if (r < 0) {
        free(t);
        return errmsg_set(e, r, "receive the container's terminal: %s", strerror(-r));
    }
    t->in = STDIN_FILENO;
    tty_relay_resize(t);
    if (tcgetattr(STDIN_FILENO, &t->saved) == 0) {
        struct termios raw = t->saved;
        cfmakeraw(&raw);
        t->raw = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    *ret = t;
    return 0;
}

void tty_relay_fds(const struct tty_relay *t, int fds[2])
{
    fds[0] = t->master;
    fds[1] = t->in;
}

bool tty_relay_pump(struct tty_relay *t, bool master_ready, bool stdin_ready)
{
    char buf[16384];
    if (stdin_ready && t->in >= 0) {
        ssize_t n = read(t->in, buf, sizeof(buf));
        if (n > 0)
            (void)fd_write_all(t->master, buf, (size_t)n);
        else if (n == 0 || errno != EINTR) {
            /* Input ended (a pipe with -t): the terminal's end-of-file character says so. */
            if (!t->raw) {
                struct termios tio;
                char eof = tcgetattr(t->master, &tio) == 0 ? (char)tio.c_cc[VEOF] : 4;
                (void)fd_write_all(t->master, &eof, 1);
            }
            t->in = -1;
        }
    }
    if (!master_ready)
        return true;
    ssize_t n = read(t->master, buf, sizeof(buf));
    if (n > 0) {
        /* A closed stdout loses the output, as it would without a terminal. */
        (void)fd_write_all(STDOUT_FILENO, buf, (size_t)n);
        return true;
    }
    /* EIO: the last process that had the terminal open has closed it. */
    return n < 0 && errno == EINTR;
}

void tty_relay_resize(struct tty_relay *t)
{
    winsize_copy(t->master);
}

void tty_relay_end(struct tty_relay *t)
{
    if (!t)
        return;
    /* What the command wrote last (its exit message) may still be in the master. */
    for (int i = 0; i < 1000; i++) {
        struct pollfd p = {.fd = t->master, .events = POLLIN};
        if (poll(&p, 1, 0) <= 0 || !tty_relay_pump(t, true, false))
            break;
    }
    if (t->raw)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &t->saved);
    close(t->master);
    free(t);
}
