/* `gpuq submit`'s options, made into the API's job request (job-spec.h), which the CLI sends.
 *
 *   gpuq submit [OPTIONS] COMMAND [ARGS...]
 *   gpuq submit [OPTIONS] --image IMAGE [COMMAND [ARGS...]]
 *   gpuq submit [--queue Q] [--priority-class P] [--name N] [--hold] --file JOB.yaml
 *
 * Options end at the first argument that is not one, or at "--": the rest is the command, so
 * that the command's own options stay its own (`gpuq submit -G 1 python train.py -c 3`). Sizes,
 * times and counts take Slurm's and Kubernetes' spellings (see spec_args_usage). The CLI adds
 * cwd and the environment itself.
 *
 * Pure: no I/O (the Job file is only named here; spec-yaml.h reads its text). */
#pragma once

#include <jansson.h>

#include "lib/errmsg.h"

/* What spec_args_parse() returns for -h/--help: print spec_args_usage. */
#define SPEC_ARGS_HELP 1

/* The options' help text, lines ending in '\n', for `gpuq submit --help`. */
extern const char spec_args_usage[];

/* Parses argv (argv[0] is "submit", the rest its arguments; argv is not changed, getopt's
 * globals are reset first). Returns:
 *   0 and *ret_request, a new JSON object (the request; with --file, only the overrides it may
 *     carry: queue, priority_class, name, held, to lay over the Job file's request with
 *     json_object_update()) and *ret_yaml_path (malloc'd; NULL without --file);
 *   SPEC_ARGS_HELP for -h/--help, writing nothing;
 *   -EINVAL with a message that names the option and its value ("--gpus 'H100:x': ..."), or
 *   -E2BIG (a command past the limits) or -ENOMEM. Outputs are written only on success. */
int spec_args_parse(int argc, char **argv, json_t **ret_request, char **ret_yaml_path,
                    struct errmsg *e);

/* A time limit as sbatch --time takes it: "minutes", "minutes:seconds",
 * "hours:minutes:seconds", "days-hours", "days-hours:minutes", "days-hours:minutes:seconds";
 * or a duration with a unit, "30s", "90m", "2h", "1d", "1.5h" (lib's parse_duration). Fields
 * after the first are below 60 (hours below 24 after days). Returns 0 and *ret_s > 0, or
 * -EINVAL: malformed, zero, or "UNLIMITED"/"infinite" (Slurm's no-limit, which gpuq does not
 * offer: every job has the queue's limit at most), with a message; -ERANGE past 100 years. */
int spec_time_parse(const char *s, double *ret_s, struct errmsg *e);
