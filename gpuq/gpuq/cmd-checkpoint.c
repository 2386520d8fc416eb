/* gpuq checkpoint [ID]: tells gpuqd that a job has just saved its work, so that a preemption
 * counts only what was done since. Meant to be run from inside the job right after it wrote a
 * checkpoint; then no id is needed. */
#include "gpuq/gpuq/cli.h"
#include "gpuq/gpuq/render.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>

#include "lib/names.h"

/* The body of POST /v1/checkpoint: {"id": $GPUQ_JOB_ID} when the variable holds an id, else
 * {} and gpuqd finds the job by the caller's cgroup. A malformed variable is an error rather
 * than ignored: it would name no job, or the wrong one. */
static int self_body(json_t **ret, struct errmsg *e)
{
    const char *env = getenv(NAMES_ENV_GPUQ_JOB_ID);
    uint64_t id = 0;
    if (env && *env && gpuq_parse_id("checkpoint", env, &id, NULL) < 0)
        return errmsg_set(e, -EINVAL, "checkpoint: $%s is '%s', not a job id",
                          NAMES_ENV_GPUQ_JOB_ID, env);
    json_t *body = id ? json_pack("{s:I}", "id", (json_int_t)id) : json_object();
    if (!body)
        return errmsg_set(e, -ENOMEM, "out of memory");
    *ret = body;
    return 0;
}

int cmd_checkpoint(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e)
{
    int opt, r;
    opterr = 0;
    while ((opt = getopt(argc, argv, "+:")) != -1)
        return gpuq_option_error("checkpoint", opt, argv, e);
    if (argc - optind > 1)
        return errmsg_set(e, -GPUQ_E_USAGE, "checkpoint: wants at most one job id");

    char path[96] = "/v1/checkpoint";
    json_t *body = NULL;
    uint64_t id = 0;
    if (optind < argc) {
        if ((r = gpuq_parse_id("checkpoint", argv[optind], &id, e)) < 0)
            return r;
        snprintf(path, sizeof(path), "/v1/jobs/%" PRIu64 "/checkpoint", id);
    } else if ((r = self_body(&body, e)) < 0)
        return r;

    json_t *doc = NULL;
    r = gpuq_call(c, "POST", path, body, &doc, e);
    json_decref(body);
    if (r < 0)
        return r;
    json_t *jid = json_object_get(json_object_get(doc, "job"), "id");
    if (c->json)
        render_json(c->out, doc);
    else if (json_is_integer(jid))
        fprintf(c->out, "Checkpoint recorded for job %" JSON_INTEGER_FORMAT "\n",
                json_integer_value(jid));
    else
        fputs("Checkpoint recorded\n", c->out);
    json_decref(doc);
    return GPUQ_EXIT_OK;
}
