/* The handlers that change a job: cancel, hold, release, checkpoint (by id, or for the job the
 * caller runs in), and the job's log. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpuq/gpuqd/api.h"
#include "gpuq/store/store.h"
#include "lib/fileio.h"
#include "lib/log.h"
#include "lib/clock.h"
#include "lib/macro.h"
#include "lib/names.h"
#include "lib/utf8.h"

#define LOG_CHUNK (256u * 1024u)

/* A pending job ends at once; a running one gets SIGTERM and its grace. */
static int cancel(struct gpuqd *d, struct qjob *q, struct errmsg *e)
{
    if (q->j.state == JOB_PENDING) {
        q->j.state = JOB_CANCELLED;
        q->j.end_time = clock_wall_sec();
        snprintf(q->j.reason, sizeof(q->j.reason), "Cancelled");
        return jobs_save(d, q, "cancelled while pending", e);
    }
    return runs_stop(d, q, JOB_STOP_CANCEL, 0);
}

/* Applies one action to a job of the caller's (checked). Returns the HTTP status. */
static unsigned act(struct api_call *c, struct qjob *q, const char *action, char *msg, size_t size)
{
    struct gpuqd *d = c->d;
    struct errmsg e = {{0}};
    struct job *j = &q->j;
    int r = 0;
    if (strcmp(action, "cancel") == 0) {
        r = cancel(d, q, &e);
    } else if (strcmp(action, "hold") == 0 || strcmp(action, "release") == 0) {
        bool hold = action[0] == 'h';
        if (j->state != JOB_PENDING) {
            snprintf(msg, size, "job %llu is %s; only pending jobs can be %s",
                     (unsigned long long)j->id, job_state_name(j->state),
                     hold ? "held" : "released");
            return 409;
        }
        j->held = hold;
        r = jobs_save(d, q, hold ? "held" : "released", &e);
    } else {
        if (j->state != JOB_RUNNING && j->state != JOB_STOPPING) {
            snprintf(msg, size, "job %llu is %s; only a running job checkpoints",
                     (unsigned long long)j->id, job_state_name(j->state));
            return 409;
        }
        j->last_checkpoint = clock_wall_sec();
        r = jobs_save(d, q, "checkpoint reported", &e);
    }
    if (r < 0) {
        snprintf(msg, size, "%s", e.text);
        return r == -ENOSPC ? 507 : 500;
    }
    return 200;
}

static int copy_owner(struct job *j, const char *spec_json, void *userdata)
{
    struct job *to = userdata;
    to->uid = j->uid;
    to->state = j->state;
    return 0;
}

/* Finds an active job; replies 404 or 409 (finished) when there is none. Called locked. */
static struct qjob *active_job(struct api_call *c, uint64_t id)
{
    struct qjob *q = jobs_find(c->d, id);
    if (q)
        return q;
    /* A finished job is still known to the store. */
    struct job stored = {0};
    if (store_job_get(c->d->store, id, copy_owner, &stored, NULL) == 0)
        http_reply_error(c->reply, 409, "job %llu has already finished", (unsigned long long)id);
    else
        http_reply_error(c->reply, 404, "no job %llu", (unsigned long long)id);
    return NULL;
}

static void act_on(struct api_call *c, uint64_t id, const char *action)
{
    struct gpuqd *d = c->d;
    char msg[ERRMSG_MAX] = "";
    pthread_mutex_lock(&d->lock);
    struct qjob *q = active_job(c, id);
    if (!q || !api_may_act(c, q->j.uid)) {
        pthread_mutex_unlock(&d->lock);
        api_audit(c, "denied");
        return;
    }
    unsigned status = act(c, q, action, msg, sizeof(msg));
    json_t *job = status == 200 ? jobs_to_json(d, &q->j, q->queue, q, JOBS_JSON_PRIVATE) : NULL;
    pthread_mutex_unlock(&d->lock);
    if (status == 200) {
        log_info("job %llu: %s by uid %u", (unsigned long long)id, action,
                 (unsigned)c->req->peer.uid);
        schedule_wake(d);
        http_reply_json(c->reply, 200, json_pack("{s:o*}", "job", job));
    } else {
        http_reply_error(c->reply, status, "%s", msg);
    }
    api_audit(c, status == 200 ? "applied" : "failed");
}

void api_job_action(struct api_call *c, uint64_t id, const char *action)
{
    if (api_audit(c, "requested") < 0) {
        http_reply_error(c->reply, 503, "the audit log cannot be written; nothing was changed");
        return;
    }
    act_on(c, id, action);
}

/* The job the peer process runs in, by its cgroup: "gpuq-job-ID.scope" in /proc/PID/cgroup.
 * 0 when it is in none. */
static uint64_t job_of_pid(pid_t pid)
{
    char path[64], text[4096];
    snprintf(path, sizeof(path), "/proc/%ld/cgroup", (long)pid);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t n = 0;
    if (fd < 0 || fd_read_up_to(fd, text, sizeof(text) - 1, &n) < 0)
        return 0;
    text[n] = '\0';
    const char *p = strstr(text, "/" NAMES_SCOPE_GPUQ_JOB);
    if (!p)
        return 0;
    char *end;
    unsigned long long id = strtoull(p + strlen("/" NAMES_SCOPE_GPUQ_JOB), &end, 10);
    return strncmp(end, NAMES_SCOPE_SUFFIX, strlen(NAMES_SCOPE_SUFFIX)) == 0 ? id : 0;
}

void api_checkpoint_self(struct api_call *c)
{
    uint64_t id = job_of_pid(c->req->peer.pid);
    json_t *given = c->body ? json_object_get(c->body, "id") : NULL;
    if (id == 0 && json_is_integer(given) && json_integer_value(given) > 0)
        id = (uint64_t)json_integer_value(given);
    if (id == 0) {
        http_reply_error(c->reply, 400,
                         "not called from inside a job: give the job's id "
                         "(GPUQ_JOB_ID)");
        return;
    }
    if (api_audit(c, "requested") < 0) {
        http_reply_error(c->reply, 503, "the audit log cannot be written; nothing was changed");
        return;
    }
    act_on(c, id, "checkpoint");
}

void api_log(struct api_call *c, uint64_t id)
{
    struct gpuqd *d = c->d;
    char path[512];
    uid_t uid = 0;
    const char *state = NULL;
    pthread_mutex_lock(&d->lock);
    struct qjob *q = jobs_find(d, id);
    struct job stored = {0};
    bool active = q != NULL; /* the job may still write */
    if (q) {
        uid = q->j.uid;
        state = job_state_name(q->j.state);
    } else if (store_job_get(d->store, id, copy_owner, &stored, NULL) == 0) {
        uid = stored.uid;
        state = job_state_name(stored.state);
    }
    pthread_mutex_unlock(&d->lock);
    if (!state) {
        http_reply_error(c->reply, 404, "no job %llu", (unsigned long long)id);
        return;
    }
    if (!api_may_act(c, uid))
        return;
    const char *off = http_request_query(c->req, "offset");
    long long offset = off ? strtoll(off, NULL, 10) : 0;
    if (offset < 0)
        offset = 0;
    runs_log_path(d, id, path, sizeof(path));
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    _cleanup_free_ char *buf = malloc(LOG_CHUNK + 1);
    ssize_t n = fd >= 0 && buf ? pread(fd, buf, LOG_CHUNK, offset) : 0;
    if (n < 0)
        n = 0;
    bool eof = (size_t)n < LOG_CHUNK;
    /* Bytes that are not UTF-8 show as '?' (a binary log still reads); a character cut at the
     * chunk's end is left for the next read, while more may come. */
    if (buf)
        n = (ssize_t)utf8_sanitize(buf, (size_t)n, !eof || active);
    http_reply_json(c->reply, 200,
                    json_pack("{s:s%, s:I, s:b, s:s}", "data", buf ? buf : "", (size_t)n, "offset",
                              (json_int_t)(offset + n), "eof", eof, "state", state));
}
