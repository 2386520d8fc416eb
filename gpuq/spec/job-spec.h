/* The API's job request, a JSON object, to and from struct job_spec (gpuq/core/job.h).
 *
 * Every key is optional except where said; a key this module does not know is an error that
 * names it, so that a typo ("gpu": 2) is never silently a job without GPUs:
 *
 *   "name"              string of [A-Za-z0-9._-], at most JOB_NAME_MAX-1 bytes; "" allowed
 *   "queue"             string of [A-Za-z0-9._-], 1..JOB_QUEUE_MAX-1 bytes (absent: default)
 *   "priority_class"    the same, 1..JOB_PRIOCLASS_MAX-1 bytes
 *   "gpus"              integer 0..SPEC_GPUS_MAX: whole GPUs, or MIG instances with mig_profile
 *   "gpu_model"         string of [A-Za-z0-9._ -], at most JOB_MODEL_MAX-1 ("" = any); needs
 *                       gpus > 0
 *   "mig_profile"       "1g.10gb", "1g.5gb+me", "3g.40gb", "1c.2g.20gb"; needs gpus > 0; not
 *                       with gpu_model
 *   "cpu_milli"         integer 0..QUANTITY_CPU_MAX_MILLI (0 = no limit)
 *   "mem_bytes"         integer 0..INT64_MAX (0 = no limit)
 *   "time_limit"        seconds, a number > 0 (absent: the queue's limit)
 *   "active_deadline"   seconds, a number > 0 (Kubernetes' activeDeadlineSeconds)
 *   "image"             an image reference: printable ASCII without blanks, not starting '-'
 *   "command"           array of 1..SPEC_ARGV_MAX strings, the first not empty; required
 *                       unless image is given (absent with an image: the image's command)
 *   "env"               array of at most SPEC_ENV_MAX "K=V" strings, K a variable name
 *   "cwd"               an absolute path
 *   "interactive"       bool
 *   "backoff_limit"     integer 0..SPEC_BACKOFF_LIMIT_MAX (default 6, as Kubernetes)
 *   "checkpoint_signal" a signal name ("TERM", "SIGUSR1", "RTMIN+2") or number 1..SIGRTMAX,
 *                       not SIGKILL or SIGSTOP (default SIGTERM)
 *   "grace"             seconds >= 0 from the checkpoint signal to SIGKILL (default 30, as
 *                       Kubernetes' terminationGracePeriodSeconds)
 *   "restart_policy"    "OnFailure" (default) or "Never"
 *   "held"              bool: submit held (Kubernetes' suspend: true); not part of job_spec
 *
 * Strings never hold NUL. Durations are at most SPEC_DURATION_MAX_S. All strings of a request
 * together are at most SPEC_STRINGS_MAX bytes.
 *
 * Pure: no I/O. Messages name the key ("gpus: ..."). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "gpuq/core/job.h"
#include "lib/errmsg.h"

#define SPEC_ARGV_MAX    4096
#define SPEC_ENV_MAX     4096
#define SPEC_STRINGS_MAX (1024 * 1024)
#define SPEC_GPUS_MAX                                                                              \
    1024 /* a bound against nonsense; the daemon refuses what                                      \
            the node can never hold */
#define SPEC_IMAGE_MAX             1024
#define SPEC_BACKOFF_LIMIT_DEFAULT 6
#define SPEC_BACKOFF_LIMIT_MAX     100
#define SPEC_GRACE_DEFAULT_S       30.0
#define SPEC_DURATION_MAX_S        (100.0 * 365.0 * 86400.0) /* lib's parse_duration bound */

/* Makes a job_spec from a request. Defaults fill what is absent: name "", queue, priority_class,
 * image and cwd NULL, argv NULL only with an image and no command, env an empty vector (never
 * NULL), backoff_limit 6, checkpoint_signal SIGTERM, grace 30 s, restart OnFailure, *ret_held
 * false. Returns 0 and fills *ret (free with job_spec_done) and *ret_held (ret_held may be
 * NULL); on failure returns -EINVAL (the message names the key: "unknown key 'gpu'", "gpus: -1
 * is not a count 0..1024"), -E2BIG (past the argv, env or strings limits) or -ENOMEM, and
 * leaves *ret and *ret_held untouched. */
int job_spec_from_json(json_t *j, struct job_spec *ret, bool *ret_held, struct errmsg *e);

/* The request that job_spec_from_json() turns back into an identical *s (every field, held
 * aside): defaults written out, NULL strings and zero time limits left out, the signal by name
 * where it has one. New reference, or NULL on ENOMEM. */
json_t *job_spec_to_json(const struct job_spec *s);

/* Checks one key's value alone, as job_spec_from_json() would, for callers that build a request
 * and want to name their own field in the message (`gpuq submit --gpus`, a Job's YAML path).
 * The message does not name the key. Returns 0, -EINVAL (unknown key or bad value), -E2BIG or
 * -ENOMEM. Checks across keys (gpu_model needs gpus) are job_spec_from_json()'s. */
int job_spec_check_field(const char *key, json_t *value, struct errmsg *e);

/* Whether name[0..len) is an environment variable name: [A-Za-z_][A-Za-z0-9_]*. */
bool spec_env_name_valid(const char *name, size_t len);

/* Parses a signal: a name with or without "SIG", in any case ("TERM", "sigusr1", "RTMIN+3",
 * "SIGRTMAX-1"; also IOT, POLL, CLD) or a number 1..SIGRTMAX. Returns 0 and *ret_sig, or -EINVAL
 * ("'FOO' is not a signal"). Any signal is accepted here; job_spec_from_json() refuses SIGKILL
 * and SIGSTOP as checkpoint signals since a job cannot catch them. */
int spec_signal_parse(const char *s, int *ret_sig, struct errmsg *e);

#define SPEC_SIGNAL_NAME_MAX 16
/* The name spec_signal_parse() reads back: "SIGTERM", "SIGRTMIN+3", "SIGRTMAX". Returns a static
 * string or buf; NULL for a number that has no name (32 and 33 under glibc, which keeps them
 * for itself) or is out of range. */
const char *spec_signal_name(int sig, char buf[static SPEC_SIGNAL_NAME_MAX]);
