#include "lib/audit.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/macro.h"

/* Attempts that changed nothing (denied, refused as malformed, failed) are recorded at most this
 * often a second; the rest are counted, so a local user cannot fill the disk under the log
 * (which would then refuse the admins' changes). */
#define DENIED_PER_SECOND 10
/* A request recorded whole up to this size; a larger one as its size alone, so that one record
 * cannot be a megabyte. */
#define REQUEST_MAX 16384

struct audit {
    int fd;
    pthread_mutex_t lock;
    time_t denied_second;
    unsigned denied_in_second;
    unsigned long denied_suppressed;
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
    *a = (struct audit){.fd = fd};
    pthread_mutex_init(&a->lock, NULL);
    *ret = a;
    return 0;
}

void audit_close(struct audit *a)
{
    if (!a)
        return;
    close(a->fd);
    pthread_mutex_destroy(&a->lock);
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

/* Returns false when a refused attempt is over the rate; else true, with the number of refused
 * attempts left out since the last one recorded in *ret_suppressed. */
static bool denied_admitted(struct audit *a, time_t now, unsigned long *ret_suppressed)
{
    pthread_mutex_lock(&a->lock);
    if (now != a->denied_second) {
        a->denied_second = now;
        a->denied_in_second = 0;
    }
    bool ok = a->denied_in_second < DENIED_PER_SECOND;
    if (ok) {
        a->denied_in_second++;
        *ret_suppressed = a->denied_suppressed;
        a->denied_suppressed = 0;
    } else {
        a->denied_suppressed++;
    }
    pthread_mutex_unlock(&a->lock);
    return ok;
}

int audit_record(struct audit *a, uid_t uid, gid_t gid, pid_t pid, const char *method,
                 const char *path, json_t *request, unsigned status, const char *outcome)
{
    unsigned long suppressed = 0;
    bool changed = strcmp(outcome, "requested") == 0 || strcmp(outcome, "applied") == 0;
    if (!changed && !denied_admitted(a, time(NULL), &suppressed))
        return 0;
    _cleanup_free_ char *body = request ? json_dumps(request, JSON_COMPACT) : NULL;
    json_t *big = body && strlen(body) > REQUEST_MAX
                      ? json_pack("{s:I}", "omitted_bytes", (json_int_t)strlen(body))
                      : NULL;
    char stamp[32], user[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
    user_name(uid, user, sizeof(user));

    json_t *rec = json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:s, s:O, s:i, s:s}", "time", stamp,
                            "user", user, "uid", (json_int_t)uid, "gid", (json_int_t)gid, "pid",
                            (json_int_t)pid, "method", method, "path", path, "request",
                            big       ? big
                            : request ? request
                                      : json_null(),
                            "status", (int)status, "outcome", outcome);
    json_decref(big);
    if (!rec)
        return -ENOMEM;
    if (suppressed)
        json_object_set_new(rec, "denied_not_recorded", json_integer((json_int_t)suppressed));
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
