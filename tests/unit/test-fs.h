/* Small file and process helpers that several components' unit tests use. Include after
 * <cmocka.h>: they assert. */
#pragma once

#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Whether anything (a dangling link too) is at path. */
static inline bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Creates or replaces path (0644) with data. */
static inline void write_file(const char *path, const char *data)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
    close(fd);
}

/* Waits for the child pid, which must exit normally; returns its exit status. */
static inline int child_status(pid_t pid)
{
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}
