/* Namespaces for unit tests that make mounts: a test that mounts does it in a child process of
 * its own, after enter_mount_namespace(). */
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
#include <unistd.h>

/* In a child process: a private mount namespace, inside a user namespace when not root (as
 * capsule itself runs). Returns 0, or -1 where this kernel or configuration does not allow it. */
static inline int enter_mount_namespace(void)
{
    if (geteuid() != 0) {
        char map[64];
        uid_t uid = geteuid();
        gid_t gid = getegid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
            return -1;
        int fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "deny", 4) != 4)
            return -1;
        close(fd);
        const char *files[] = {"/proc/self/uid_map", "/proc/self/gid_map"};
        unsigned ids[] = {uid, gid};
        for (int i = 0; i < 2; i++) {
            int n = snprintf(map, sizeof(map), "%u %u 1\n", ids[i], ids[i]);
            fd = open(files[i], O_WRONLY | O_CLOEXEC);
            if (fd < 0 || write(fd, map, n) != n)
                return -1;
            close(fd);
        }
    } else if (unshare(CLONE_NEWNS) < 0) {
        return -1;
    }
    return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
}
