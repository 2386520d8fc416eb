#include "audit.h"

#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"

struct audit {
    int fd;
};

int audit_open(const char *path, struct audit **ret, struct errmsg *e)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "cannot open audit log '%s': %m", path);
    struct audit *a = malloc(sizeof(*a));
    if (!a) {
        close(fd);
        return errmsg_set(e, -ENOMEM, "out of memory");
    }
    a->fd = fd;
    *ret = a;
    return 0;
}

void audit_close(struct audit *a)
{
    if (!a)
        return;
    close(a->fd);
    free(a);
}

static void user_name(uid_t uid, char *buf, size_t size)
{
    struct passwd pw, *found = NULL;
    char scratch[1024];
    if (getpwuid_r(uid, &pw, scratch, sizeof(scratch), &found) == 0 && found)
        snprintf(buf, size, "%s", found->pw_name);
    else
        snprintf(buf, size, "%u", (unsigned)uid);
}

int audit_record(struct audit *a, uid_t uid, gid_t gid, pid_t pid, const char *method,
                 const char *path, json_t *request, unsigned status, const char *outcome)
{
    char stamp[32], user[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
    user_name(uid, user, sizeof(user));

    json_t *rec =
        json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:s, s:O, s:i, s:s}", "time", stamp, "user", user,
                  "uid", (json_int_t)uid, "gid", (json_int_t)gid, "pid", (json_int_t)pid, "method",
                  method, "path", path, "request", request ? request : json_null(), "status",
                  (int)status, "outcome", outcome);
    if (!rec)
        return -ENOMEM;
    _cleanup_free_ char *line = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(rec);
    if (!line)
        return -ENOMEM;
    size_t len = strlen(line);
    line[len] = '\n'; /* replaces the NUL: the buffer is written by length */
    ssize_t n = write(a->fd, line, len + 1);
    if (n < 0)
        return negative_errno();
    return (size_t)n == len + 1 ? 0 : -EIO;
}
