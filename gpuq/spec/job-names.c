/* The plain helpers of gpuq/core/job.h that every user of a job_spec needs: freeing one, and
 * the names of states and stop reasons (what the API, the store and the CLI write). They live
 * here, beside the code that makes job_specs, so that gpuq-spec links nothing above it. */
#include "gpuq/core/job.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/strv.h"

void job_spec_done(struct job_spec *s)
{
    free(s->name);
    free(s->queue);
    free(s->priority_class);
    free(s->image);
    strv_free(s->argv);
    strv_free(s->env);
    free(s->cwd);
    *s = (struct job_spec){0};
}

static const char *const state_names[JOB_STATE_COUNT] = {
    [JOB_PENDING] = "PENDING",     [JOB_RUNNING] = "RUNNING", [JOB_STOPPING] = "STOPPING",
    [JOB_COMPLETED] = "COMPLETED", [JOB_FAILED] = "FAILED",   [JOB_CANCELLED] = "CANCELLED",
    [JOB_TIMEOUT] = "TIMEOUT",
};

const char *job_state_name(enum job_state s)
{
    return (unsigned)s < JOB_STATE_COUNT ? state_names[s] : NULL;
}

int job_state_from_name(const char *name, enum job_state *ret)
{
    for (unsigned i = 0; i < JOB_STATE_COUNT; i++)
        if (strcmp(state_names[i], name) == 0) {
            *ret = (enum job_state)i;
            return 0;
        }
    return -EINVAL;
}

bool job_state_is_final(enum job_state s)
{
    return s == JOB_COMPLETED || s == JOB_FAILED || s == JOB_CANCELLED || s == JOB_TIMEOUT;
}

static const char *const stop_reason_names[] = {
    [JOB_STOP_NONE] = "NONE",     [JOB_STOP_PREEMPT] = "PREEMPT", [JOB_STOP_DRAIN] = "DRAIN",
    [JOB_STOP_CANCEL] = "CANCEL", [JOB_STOP_TIMEOUT] = "TIMEOUT",
};

const char *job_stop_reason_name(enum job_stop_reason r)
{
    return (unsigned)r < ELEMENTSOF(stop_reason_names) ? stop_reason_names[r] : NULL;
}

int job_stop_reason_from_name(const char *name, enum job_stop_reason *ret)
{
    for (unsigned i = 0; i < ELEMENTSOF(stop_reason_names); i++)
        if (strcmp(stop_reason_names[i], name) == 0) {
            *ret = (enum job_stop_reason)i;
            return 0;
        }
    return -EINVAL;
}
