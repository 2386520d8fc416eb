/* Routing of gpuqd's control API, its authorisation and its audit records. Reads are open to
 * every local user (as squeue is); a user changes only their own jobs; root and the admin group
 * change every job and drain or resume the node. */
#include "gpuq/gpuqd/api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/audit.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/roles.h"

#define JOBS_PREFIX "/v1/jobs/"

/* What the audit log keeps of a request: all of it but a job's environment, of which only the
 * size (a user's environment holds tokens and passwords, and is the bulk of a submit). A new
 * reference, or NULL for none. */
static json_t *audit_body(json_t *body)
{
    json_t *env = json_is_object(body) ? json_object_get(body, "env") : NULL;
    if (!env)
        return json_incref(body);
    json_t *copy = json_copy(body);
    if (copy)
        json_object_set_new(copy, "env",
                            json_pack("{s:I}", "variables", (json_int_t)json_array_size(env)));
    return copy;
}

int api_audit(const struct api_call *c, const char *outcome)
{
    if (!c->d->audit)
        return 0;
    const struct http_request *req = c->req;
    json_t *body = audit_body(c->body);
    int r = audit_record(c->d->audit, req->peer.uid, req->peer.gid, req->peer.pid, req->method,
                         req->path, body, c->reply->status, outcome);
    json_decref(body);
    if (r < 0)
        log_error_errno(r, "Cannot write the audit log");
    return r;
}

bool api_may_act(const struct api_call *c, uid_t owner)
{
    if (c->admin || c->req->peer.uid == owner)
        return true;
    http_reply_error(c->reply, 403,
                     "job belongs to another user; only its owner, root%s%s%s may do that",
                     roles_admin_group(c->d->roles) ? " and members of group '" : "",
                     roles_admin_group(c->d->roles) ? roles_admin_group(c->d->roles) : "",
                     roles_admin_group(c->d->roles) ? "'" : "");
    return false;
}

/* "/v1/jobs/12/cancel" -> 12 and "cancel"; "/v1/jobs/12" -> 12 and "". */
static int parse_job_path(const char *path, uint64_t *ret_id, const char **ret_rest)
{
    const char *p = path + strlen(JOBS_PREFIX);
    char *end;
    errno = 0;
    unsigned long long id = strtoull(p, &end, 10);
    if (end == p || errno || id == 0 || (*end && *end != '/') || *p == '+' || *p == '-')
        return -EINVAL;
    *ret_id = id;
    *ret_rest = *end ? end + 1 : "";
    return 0;
}

static void route_job(struct api_call *c)
{
    uint64_t id;
    const char *rest;
    bool get = strcmp(c->req->method, "GET") == 0, post = strcmp(c->req->method, "POST") == 0;
    if (parse_job_path(c->req->path, &id, &rest) < 0) {
        http_reply_error(c->reply, 404, "no such resource: %s", c->req->path);
        return;
    }
    if (get && strcmp(rest, "") == 0)
        api_show(c, id);
    else if (get && strcmp(rest, "log") == 0)
        api_log(c, id);
    else if (post && (strcmp(rest, "cancel") == 0 || strcmp(rest, "hold") == 0 ||
                      strcmp(rest, "release") == 0 || strcmp(rest, "checkpoint") == 0))
        api_job_action(c, id, rest);
    else
        http_reply_error(c->reply, 404, "no such resource: %s %s", c->req->method, c->req->path);
}

static bool parse_body(struct api_call *c)
{
    if (c->req->body_len == 0)
        return true;
    json_error_t err;
    c->body = json_loadb(c->req->body, c->req->body_len, JSON_REJECT_DUPLICATES, &err);
    if (!c->body) {
        http_reply_error(c->reply, 400, "the body is not JSON: %s (at %d:%d)", err.text, err.line,
                         err.column);
        return false;
    }
    return true;
}

static void route(struct api_call *c)
{
    const char *m = c->req->method, *p = c->req->path;
    bool get = strcmp(m, "GET") == 0, post = strcmp(m, "POST") == 0;
    if (strncmp(p, JOBS_PREFIX, strlen(JOBS_PREFIX)) == 0)
        route_job(c);
    else if (strcmp(p, "/v1/jobs") == 0 && post)
        api_submit(c);
    else if (strcmp(p, "/v1/jobs") == 0 && get)
        api_list(c);
    else if (strcmp(p, "/v1/checkpoint") == 0 && post)
        api_checkpoint_self(c);
    else if (strcmp(p, "/v1/queues") == 0 && get)
        api_queues(c);
    else if (strcmp(p, "/v1/status") == 0 && get)
        api_status(c);
    else if (strcmp(p, "/v1/drain") == 0 && post)
        api_drain(c);
    else if (strcmp(p, "/v1/resume") == 0 && post)
        api_resume(c);
    else
        http_reply_error(c->reply, 404, "no such resource: %s %s", m, p);
}

static void handle(const struct http_request *req, struct http_reply *reply, void *userdata)
{
    struct api_call c = {.d = userdata, .req = req, .reply = reply};
    if (!req->peer.is_unix) {
        http_reply_error(reply, 403, "the control API is served on the Unix socket only");
        return;
    }
    c.admin = roles_is_admin(c.d->roles, req->peer.uid, req->peer.gid);
    if (parse_body(&c))
        route(&c);
    json_decref(c.body);
}

/* A submit carries the user's environment, which module systems make long (tens of KiB); more
 * than this is kept from the root daemon, which holds every pending job in memory. */
#define API_MAX_BODY (256u << 10)

int api_start(struct gpuqd *d, struct errmsg *e)
{
    int r = http_server_new_unix(d->cfg.socket, 0666, handle, d, &d->api, e);
    if (r == 0)
        http_server_set_max_body(d->api, API_MAX_BODY);
    return r;
}
