/* gpuq submit's pieces that tests call: its arguments, the environment a job gets, and the exit
 * status --wait ends with. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "gpuq/gpuq/cli.h"
#include "lib/errmsg.h"

/* gpuq's own options among submit's (the job's are spec-args'). */
struct gpuq_submit_opts {
    bool wait;
    bool parsable;
    bool json;
    const char *socket; /* NULL: not given; else points into argv */
};

/* gpuq's own part of `gpuq submit --help`, printed after spec_args_usage. */
extern const char gpuq_submit_help[];

/* Parses submit's arguments (argv[0] is "submit"; argv is not changed): gpuq's own options
 * (--wait, --parsable, --json, --socket PATH) anywhere among the options, and everything else by
 * spec_args_parse(). The command that follows the options is handed on whole, its own
 * "--json" included. Returns 0 with *ret_opts, *ret_request (new reference) and *ret_yaml_path
 * (malloc'd, NULL without --file); SPEC_ARGS_HELP for -h/--help (nothing written);
 * -GPUQ_E_USAGE for a bad option or value (spec-args' message), -E2BIG or -ENOMEM. Outputs are
 * written only on success. */
int gpuq_submit_parse(int argc, char **argv, struct gpuq_submit_opts *ret_opts,
                      json_t **ret_request, char **ret_yaml_path, struct errmsg *e);

/* The "env" of a command job: every "K=V" of environ_ (the first of a name; entries that are no
 * valid variable, such as bash's exported functions, are left out, and so are the variables that
 * name the caller's own job, container and GPUs: GPUQ_JOB_ID, CAPSULE_NAME,
 * CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL), then extra's assignments
 * (a JSON array of "K=V": -e's), each replacing the one of its name. Returns 0 and *ret (a new
 * array), or -ENOMEM. */
int gpuq_submit_env(char *const *environ_, json_t *extra, json_t **ret, struct errmsg *e);

/* The exit status `gpuq submit --wait` ends with, for a job object in a final state: its exit
 * code (0..255); 128+N when signal N ended it; else 0 for COMPLETED and 1 otherwise (cancelled or
 * failed before it ran). */
int gpuq_job_exit_status(json_t *job);
