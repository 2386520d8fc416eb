/* gpuqd's control API (docs/gpuq.md has it): routing, authorisation and the audit log here, the
 * handlers in api-jobs.c and api-node.c. Every handler runs on its connection's thread and takes
 * the daemon's lock for what it reads or changes. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "gpuq/gpuqd/gpuqd.h"
#include "lib/http-server.h"

/* One request as the handlers see it: the parsed body (NULL without one) and whether the peer
 * is an admin. */
struct api_call {
    struct gpuqd *d;
    const struct http_request *req;
    struct http_reply *reply;
    json_t *body;
    bool admin;
};

/* Records a write in the audit log; outcome "requested" before it is applied (a write whose
 * record cannot be written is refused), then how it ended. Returns 0 or -errno. */
int api_audit(const struct api_call *c, const char *outcome);

/* Whether the caller may act on a job of uid; replies 403 when not. */
bool api_may_act(const struct api_call *c, uid_t owner);

/* The handlers reply through c->reply and audit what they change; none fails otherwise. */
/* api-jobs.c: POST /v1/jobs, GET /v1/jobs, GET /v1/jobs/ID */
void api_submit(struct api_call *c);
void api_list(struct api_call *c);
void api_show(struct api_call *c, uint64_t id);
/* api-actions.c: POST /v1/jobs/ID/{cancel,hold,release,checkpoint}, POST /v1/checkpoint,
 * GET /v1/jobs/ID/log */
void api_job_action(struct api_call *c, uint64_t id, const char *action);
void api_checkpoint_self(struct api_call *c);
void api_log(struct api_call *c, uint64_t id);

/* api-node.c: GET /v1/queues, GET /v1/status, POST /v1/drain, POST /v1/resume */
void api_queues(struct api_call *c);
void api_status(struct api_call *c);
void api_drain(struct api_call *c);
void api_resume(struct api_call *c);
