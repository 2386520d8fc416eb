#include "gpuq/spec/spec-args.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gpuq/spec/job-spec.h"
#include "gpuq/spec/quantity.h"
#include "lib/config.h"
#include "lib/macro.h"

const char spec_args_usage[] =
    "Usage: gpuq submit [OPTIONS] COMMAND [ARGS...]\n"
    "       gpuq submit [OPTIONS] --image IMAGE [COMMAND [ARGS...]]\n"
    "       gpuq submit [-q QUEUE] [--priority-class P] [-J NAME] [--hold] -f JOB.yaml\n"
    "\n"
    "  -q, --queue QUEUE            the queue (default: the default queue)\n"
    "  -J, --name NAME              the job's name ([A-Za-z0-9._-])\n"
    "  -G, --gpus N|MODEL:N         whole GPUs, of any model or of one (H100:2; any:2)\n"
    "      --mig PROFILE:N          MIG instances of one profile (1g.10gb:2)\n"
    "  -c, --cpus N                 CPUs: 2, 0.5, 500m\n"
    "      --mem SIZE               memory: 512M, 64G (powers of 1024, as Slurm), 32Gi, 129e6\n"
    "  -t, --time TIME              time limit of a run: MIN, MIN:SEC, H:MIN:SEC, D-H,\n"
    "                               D-H:MIN, D-H:MIN:SEC (as sbatch), or 30s, 2h, 1d\n"
    "      --active-deadline TIME   limit on the wall time over every retry\n"
    "      --image IMAGE            run in this container image (through capsule)\n"
    "  -I, --interactive            an interactive job\n"
    "      --priority-class P       the priority class (default: the queue's)\n"
    "      --backoff-limit N        failed runs retried, 0..100 (default 6)\n"
    "      --checkpoint-signal SIG  sent before a preemption (default TERM)\n"
    "      --grace SECONDS          from that signal to SIGKILL (default 30)\n"
    "  -e, --env K=V                set a variable (repeatable)\n"
    "      --restart-policy P       OnFailure (default) or Never\n"
    "      --hold                   submit held: it starts once released\n"
    "  -f, --file JOB.yaml          a Kubernetes batch/v1 Job\n"
    "  -h, --help                   this help\n";

enum {
    OPT_MIG = 0x100,
    OPT_MEM,
    OPT_ACTIVE_DEADLINE,
    OPT_IMAGE,
    OPT_PRIORITY_CLASS,
    OPT_BACKOFF_LIMIT,
    OPT_CHECKPOINT_SIGNAL,
    OPT_GRACE,
    OPT_HOLD,
    OPT_RESTART_POLICY,
};

static const struct option long_options[] = {
    {"queue", required_argument, NULL, 'q'},
    {"name", required_argument, NULL, 'J'},
    {"gpus", required_argument, NULL, 'G'},
    {"mig", required_argument, NULL, OPT_MIG},
    {"cpus", required_argument, NULL, 'c'},
    {"mem", required_argument, NULL, OPT_MEM},
    {"time", required_argument, NULL, 't'},
    {"active-deadline", required_argument, NULL, OPT_ACTIVE_DEADLINE},
    {"image", required_argument, NULL, OPT_IMAGE},
    {"interactive", no_argument, NULL, 'I'},
    {"priority-class", required_argument, NULL, OPT_PRIORITY_CLASS},
    {"backoff-limit", required_argument, NULL, OPT_BACKOFF_LIMIT},
    {"checkpoint-signal", required_argument, NULL, OPT_CHECKPOINT_SIGNAL},
    {"grace", required_argument, NULL, OPT_GRACE},
    {"env", required_argument, NULL, 'e'},
    {"hold", no_argument, NULL, OPT_HOLD},
    {"restart-policy", required_argument, NULL, OPT_RESTART_POLICY},
    {"file", required_argument, NULL, 'f'},
    {"help", no_argument, NULL, 'h'},
    {0},
};

/* '+': stop at the first non-option (the command); ':': report a missing value as ':'. */
static const char short_options[] = "+:q:J:G:c:t:Ie:f:h";

/* What the options have said so far. */
struct args {
    json_t *req;
    json_t *env;
    char *file;
    bool gpus;
    bool mig;
    const char *not_with_file; /* the first option a Job file cannot be combined with */
};

static void args_done(struct args *a)
{
    json_decref(a->req);
    json_decref(a->env);
    free(a->file);
}

/* Sets key to v (stolen) once job-spec.c has found it good; the message is its reason. */
static int set_checked(struct args *a, const char *key, json_t *v, struct errmsg *e)
{
    if (!v)
        return -ENOMEM;
    int r = job_spec_check_field(key, v, e);
    if (r < 0) {
        json_decref(v);
        return r;
    }
    return json_object_set_new(a->req, key, v) < 0 ? -ENOMEM : 0;
}

/* A decimal count without sign or blanks, at most max. */
static int parse_count(const char *s, unsigned long max, unsigned long *ret)
{
    if (!isdigit((unsigned char)s[0]) || strlen(s) > 9)
        return -EINVAL;
    unsigned long v = 0;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s))
            return -EINVAL;
        v = v * 10 + (unsigned long)(*s - '0');
    }
    if (v > max)
        return -ERANGE;
    *ret = v;
    return 0;
}

/* "N" (what == NULL allowed) or "WHAT:N": the count after the last ':' and the part before. */
static int split_count(const char *v, const char *form, char **ret_what, unsigned long *ret_n,
                       struct errmsg *e)
{
    const char *colon = strrchr(v, ':');
    unsigned long n;
    if (parse_count(colon ? colon + 1 : v, SPEC_GPUS_MAX, &n) < 0)
        return errmsg_set(e, -EINVAL, "expected %s with N 0..%d", form, SPEC_GPUS_MAX);
    char *what = NULL;
    if (colon && !(what = strndup(v, (size_t)(colon - v))))
        return -ENOMEM;
    *ret_what = what;
    *ret_n = n;
    return 0;
}

static int opt_gpus(struct args *a, const char *v, struct errmsg *e)
{
    _cleanup_free_ char *model = NULL;
    unsigned long n;
    int r = split_count(v, "N or MODEL:N (like 2 or H100:2)", &model, &n, e);
    if (r < 0)
        return r;
    json_object_del(a->req, "gpu_model"); /* the last --gpus wins, whole */
    if (model && strcasecmp(model, "any") != 0) {
        if (n == 0)
            return errmsg_set(e, -EINVAL, "a GPU model needs a count above 0");
        r = set_checked(a, "gpu_model", json_string(model), e);
        if (r < 0)
            return r;
    }
    a->gpus = true;
    return set_checked(a, "gpus", json_integer((json_int_t)n), e);
}

static int opt_mig(struct args *a, const char *v, struct errmsg *e)
{
    _cleanup_free_ char *profile = NULL;
    unsigned long n;
    int r = split_count(v, "PROFILE:N (like 1g.10gb:2)", &profile, &n, e);
    if (r < 0)
        return r;
    if (!profile)
        return errmsg_set(e, -EINVAL, "expected PROFILE:N (like 1g.10gb:2)");
    if (n == 0)
        return errmsg_set(e, -EINVAL, "the count of MIG instances must be above 0");
    r = set_checked(a, "mig_profile", json_string(profile), e);
    if (r < 0)
        return r;
    a->mig = true;
    return set_checked(a, "gpus", json_integer((json_int_t)n), e);
}

static int opt_cpus(struct args *a, const char *v, struct errmsg *e)
{
    unsigned milli;
    int r = quantity_parse_cpu(v, &milli, e);
    if (r < 0)
        return r;
    if (milli == 0)
        return errmsg_set(e, -EINVAL, "must be more than 0 CPUs");
    return set_checked(a, "cpu_milli", json_integer(milli), e);
}

/* Slurm's and gpunode's sizes first ("512M" is 512 MiB, as sbatch --mem reads it), then
 * Kubernetes' quantities with the same reading of single letters. */
static int opt_mem(struct args *a, const char *v, struct errmsg *e)
{
    uint64_t bytes;
    if (parse_size(v, &bytes) < 0) {
        int r = quantity_parse_memory(v, QUANTITY_LETTERS_BINARY, &bytes, e);
        if (r < 0)
            return r;
    }
    if (bytes > QUANTITY_MEMORY_MAX)
        return errmsg_set(e, -ERANGE, "too large");
    /* A bare number is bytes, not sbatch's megabytes: "--mem 4096" would kill the job at once. */
    if (bytes < 1024 * 1024)
        return errmsg_set(e, -EINVAL,
                          "less than 1 MiB (a number without unit is bytes; write "
                          "%sM for megabytes)",
                          v);
    return set_checked(a, "mem_bytes", json_integer((json_int_t)bytes), e);
}

/* A number as JSON: an integer when it is one, so that the request reads as written. */
static json_t *json_seconds(double s)
{
    return s == (double)(json_int_t)s ? json_integer((json_int_t)s) : json_real(s);
}

static int opt_time(struct args *a, const char *v, struct errmsg *e)
{
    double s;
    int r = spec_time_parse(v, &s, e);
    return r < 0 ? r : set_checked(a, "time_limit", json_seconds(s), e);
}

static int opt_active_deadline(struct args *a, const char *v, struct errmsg *e)
{
    double s;
    int r = spec_time_parse(v, &s, e);
    return r < 0 ? r : set_checked(a, "active_deadline", json_seconds(s), e);
}

static int opt_grace(struct args *a, const char *v, struct errmsg *e)
{
    double s;
    int r = parse_duration(v, &s);
    if (r < 0)
        return errmsg_set(e, r, "not a duration (like 30, 90s, 2m)");
    return set_checked(a, "grace", json_seconds(s), e);
}

static int opt_backoff_limit(struct args *a, const char *v, struct errmsg *e)
{
    unsigned long n;
    if (parse_count(v, SPEC_BACKOFF_LIMIT_MAX, &n) < 0)
        return errmsg_set(e, -EINVAL, "not a count 0..%d", SPEC_BACKOFF_LIMIT_MAX);
    return set_checked(a, "backoff_limit", json_integer((json_int_t)n), e);
}

static int opt_checkpoint_signal(struct args *a, const char *v, struct errmsg *e)
{
    int sig;
    int r = spec_signal_parse(v, &sig, e);
    if (r < 0)
        return r;
    char buf[SPEC_SIGNAL_NAME_MAX];
    const char *name = spec_signal_name(sig, buf);
    return set_checked(a, "checkpoint_signal", name ? json_string(name) : json_integer(sig), e);
}

static int opt_restart_policy(struct args *a, const char *v, struct errmsg *e)
{
    const char *policy = strcasecmp(v, "OnFailure") == 0 ? "OnFailure"
                         : strcasecmp(v, "Never") == 0   ? "Never"
                                                         : NULL;
    if (!policy)
        return errmsg_set(e, -EINVAL, "must be OnFailure or Never");
    return set_checked(a, "restart_policy", json_string(policy), e);
}

static int opt_env(struct args *a, const char *v, struct errmsg *e)
{
    const char *eq = strchr(v, '=');
    if (!eq)
        return errmsg_set(e, -EINVAL, "expected K=V");
    if (!spec_env_name_valid(v, (size_t)(eq - v)))
        return errmsg_set(e, -EINVAL, "'%.*s' is not a variable name", (int)(eq - v), v);
    if (!a->env && !(a->env = json_array()))
        return -ENOMEM;
    return json_array_append_new(a->env, json_string(v)) < 0 ? -ENOMEM : 0;
}

static int opt_file(struct args *a, const char *v, struct errmsg *e)
{
    if (!*v)
        return errmsg_set(e, -EINVAL, "empty path");
    char *copy = strdup(v);
    if (!copy)
        return -ENOMEM;
    free(a->file);
    a->file = copy;
    return 0;
}

/* One option: its value to the request. Returns what the handler does; a message names the
 * option and the value. */
static int args_apply(struct args *a, int c, const char *v, struct errmsg *e)
{
    switch (c) {
    case 'q':
        return set_checked(a, "queue", json_string(v), e);
    case 'J':
        return set_checked(a, "name", json_string(v), e);
    case OPT_PRIORITY_CLASS:
        return set_checked(a, "priority_class", json_string(v), e);
    case OPT_HOLD:
        return set_checked(a, "held", json_true(), e);
    case 'f':
        return opt_file(a, v, e);
    }
    /* What a Job file says itself. */
    if (!a->not_with_file)
        for (const struct option *o = long_options; o->name; o++)
            if (o->val == c)
                a->not_with_file = o->name;
    switch (c) {
    case 'G':
        return opt_gpus(a, v, e);
    case OPT_MIG:
        return opt_mig(a, v, e);
    case 'c':
        return opt_cpus(a, v, e);
    case OPT_MEM:
        return opt_mem(a, v, e);
    case 't':
        return opt_time(a, v, e);
    case OPT_ACTIVE_DEADLINE:
        return opt_active_deadline(a, v, e);
    case OPT_IMAGE:
        return set_checked(a, "image", json_string(v), e);
    case 'I':
        return set_checked(a, "interactive", json_true(), e);
    case OPT_BACKOFF_LIMIT:
        return opt_backoff_limit(a, v, e);
    case OPT_CHECKPOINT_SIGNAL:
        return opt_checkpoint_signal(a, v, e);
    case OPT_GRACE:
        return opt_grace(a, v, e);
    case 'e':
        return opt_env(a, v, e);
    case OPT_RESTART_POLICY:
        return opt_restart_policy(a, v, e);
    }
    return -EINVAL;
}

/* The option's name as the user wrote it, for messages: "--gpus" or "-G". */
static void option_label(int c, const char *argv_elem, char *buf, size_t size)
{
    if (argv_elem && strncmp(argv_elem, "--", 2) == 0) {
        size_t n = strcspn(argv_elem, "=");
        snprintf(buf, size, "%.*s", (int)(n < 64 ? n : 64), argv_elem);
        return;
    }
    for (const struct option *o = long_options; o->name; o++)
        if (o->val == c) {
            snprintf(buf, size, "--%s", o->name);
            return;
        }
    snprintf(buf, size, "-%c", c);
}

static int unknown_option(int argc, char **argv, struct errmsg *e)
{
    const char *bad = optind - 1 < argc ? argv[optind - 1] : "?";
    if (optopt && strncmp(bad, "--", 2) != 0)
        return errmsg_set(e, -EINVAL, "unknown option '-%c'", optopt);
    /* getopt names a known option given a value it does not take ("--hold=1") by optopt. */
    if (optopt && strchr(bad, '='))
        return errmsg_set(e, -EINVAL, "option '%.*s' takes no value", (int)strcspn(bad, "="), bad);
    return errmsg_set(e, -EINVAL, "unknown option '%s'", bad);
}

static int missing_value(int argc, char **argv, struct errmsg *e)
{
    char label[80];
    const char *bad = optind - 1 < argc ? argv[optind - 1] : NULL;
    option_label(optopt, bad, label, sizeof(label));
    return errmsg_set(e, -EINVAL, "option '%s' needs a value", label);
}

static bool reason_quotes(const struct errmsg *e, const char *value)
{
    if (!e)
        return false;
    const char *q = strstr(e->text, value);
    return q && q > e->text && q[-1] == '\'' && q[strlen(value)] == '\'';
}

/* The options, up to the command; sets *ret_optind to the command's index. */
static int args_options(struct args *a, int argc, char **argv, int *ret_optind, struct errmsg *e)
{
    optind = 0; /* glibc: start over, getopt's own state too */
    opterr = 0;
    for (;;) {
        int c = getopt_long(argc, argv, short_options, long_options, NULL);
        if (c == -1)
            break;
        if (c == 'h')
            return SPEC_ARGS_HELP;
        if (c == '?')
            return unknown_option(argc, argv, e);
        if (c == ':')
            return missing_value(argc, argv, e);
        /* The element that held the option: the last one getopt consumed, or the one before
         * for a value in the next element. */
        char *elem = argv[optarg && optarg == argv[optind - 1] ? optind - 2 : optind - 1];
        int r = args_apply(a, c, optarg, e);
        if (r < 0) {
            if (r == -ENOMEM)
                return r;
            if (r != -E2BIG)
                r = -EINVAL; /* a value out of range is a bad value too */
            char label[80];
            option_label(c, elem, label, sizeof(label));
            /* Name the value once: most reasons quote it already. */
            return optarg && !reason_quotes(e, optarg)
                       ? errmsg_prefix(e, r, "%s '%s'", label, optarg)
                       : errmsg_prefix(e, r, "%s", label);
        }
    }
    *ret_optind = optind;
    return 0;
}

static int args_command(struct args *a, int argc, char **argv, int first, struct errmsg *e)
{
    if (first >= argc) {
        if (json_object_get(a->req, "image"))
            return 0;
        return errmsg_set(e, -EINVAL,
                          "no command given: gpuq submit [OPTIONS] COMMAND [ARGS...] "
                          "(or --image IMAGE, or --file JOB.yaml)");
    }
    json_t *cmd = json_array();
    for (int i = first; cmd && i < argc; i++)
        if (json_array_append_new(cmd, json_string(argv[i])) < 0) {
            json_decref(cmd);
            cmd = NULL;
        }
    int r = set_checked(a, "command", cmd, e);
    return r < 0 && r != -ENOMEM ? errmsg_prefix(e, r, "the command") : r;
}

/* The checks across options. */
static int args_finish(struct args *a, int argc, char **argv, int first, struct errmsg *e)
{
    if (a->gpus && a->mig)
        return errmsg_set(e, -EINVAL,
                          "--gpus and --mig cannot be combined: a job asks for whole "
                          "GPUs or for MIG instances");
    if (a->file) {
        if (a->not_with_file)
            return errmsg_set(e, -EINVAL,
                              "--file: --%s cannot be combined with a Job file; set it in the file "
                              "(only --queue, --priority-class, --name and --hold may override it)",
                              a->not_with_file);
        if (first < argc)
            return errmsg_set(e, -EINVAL,
                              "--file: a Job file holds the command; '%.64s' is one too many",
                              argv[first]);
        return 0;
    }
    int r = args_command(a, argc, argv, first, e);
    if (r < 0)
        return r;
    if (a->env && json_object_set(a->req, "env", a->env) < 0)
        return -ENOMEM;
    /* What no option alone can say, in the API's words. */
    struct job_spec s;
    r = job_spec_from_json(a->req, &s, NULL, e);
    if (r < 0)
        return r;
    job_spec_done(&s);
    return 0;
}

int spec_args_parse(int argc, char **argv, json_t **ret_request, char **ret_yaml_path,
                    struct errmsg *e)
{
    _cleanup_(args_done) struct args a = {.req = json_object()};
    if (!a.req)
        return -ENOMEM;
    int first = argc;
    int r = args_options(&a, argc, argv, &first, e);
    if (r != 0)
        return r;
    r = args_finish(&a, argc, argv, first, e);
    if (r < 0)
        return r;
    *ret_request = TAKE_PTR(a.req);
    *ret_yaml_path = TAKE_PTR(a.file);
    return 0;
}

/* ---- time limits ---- */

/* A field of a Slurm time: 1..9 digits, at most max (0: any). */
static int time_field(const char *s, size_t len, unsigned long max, unsigned long *ret)
{
    if (len == 0 || len > 9)
        return -EINVAL;
    unsigned long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -EINVAL;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (max && v > max)
        return -ERANGE;
    *ret = v;
    return 0;
}

/* Up to three ':'-separated fields into f[], the last one in f[n-1]; returns n or -EINVAL. */
static int time_fields(const char *s, unsigned long f[3], const unsigned long max[3])
{
    int n = 0;
    for (;;) {
        if (n == 3)
            return -EINVAL;
        size_t len = strcspn(s, ":");
        int r = time_field(s, len, max[n], &f[n]);
        if (r < 0)
            return r;
        n++;
        if (s[len] == '\0')
            return n;
        s += len + 1;
    }
}

/* Slurm's forms, in seconds; -EINVAL malformed, -ERANGE a field past 59 (23 for hours). */
static int slurm_time_parse(const char *s, double *ret)
{
    unsigned long f[3] = {0}, days = 0;
    const char *dash = strchr(s, '-');
    if (dash) {
        int r = time_field(s, (size_t)(dash - s), 0, &days);
        if (r < 0)
            return r;
        /* days-hours[:minutes[:seconds]] */
        static const unsigned long max[3] = {23, 59, 59};
        int n = time_fields(dash + 1, f, max);
        if (n < 0)
            return n;
        *ret = (double)days * 86400 + (double)f[0] * 3600 + (double)f[1] * 60 + (double)f[2];
        return 0;
    }
    static const unsigned long max[3] = {0, 59, 59};
    int n = time_fields(s, f, max);
    if (n < 0)
        return n;
    if (n == 1) /* minutes */
        *ret = (double)f[0] * 60;
    else if (n == 2) /* minutes:seconds */
        *ret = (double)f[0] * 60 + (double)f[1];
    else /* hours:minutes:seconds */
        *ret = (double)f[0] * 3600 + (double)f[1] * 60 + (double)f[2];
    return 0;
}

int spec_time_parse(const char *s, double *ret_s, struct errmsg *e)
{
    static const char *const unlimited[] = {"UNLIMITED", "INFINITE", "INFINITY"};
    for (size_t i = 0; i < ELEMENTSOF(unlimited); i++)
        if (strcasecmp(s, unlimited[i]) == 0)
            return errmsg_set(e, -EINVAL,
                              "'%s': gpuq has no unlimited time limit; leave the time limit out "
                              "to get the queue's",
                              s);
    bool unit = false;
    for (const char *p = s; *p; p++)
        unit |= isalpha((unsigned char)*p) != 0;
    double v;
    int r = unit ? parse_duration(s, &v) : slurm_time_parse(s, &v);
    if (r == -ERANGE && unit)
        return errmsg_set(e, r, "'%s' is more than 100 years", s);
    if (r == -ERANGE)
        return errmsg_set(
            e, -EINVAL, "'%s': minutes and seconds must be below 60, hours below 24 after days", s);
    if (r < 0)
        return errmsg_set(e, r,
                          "'%s' is not a time (minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or a "
                          "duration like 30s, 2h, 1d)",
                          s);
    if (v == 0)
        return errmsg_set(e, -EINVAL,
                          "'%s' is no time (0 means no limit to Slurm, which gpuq does not offer)",
                          s);
    if (v > SPEC_DURATION_MAX_S)
        return errmsg_set(e, -ERANGE, "'%s' is more than 100 years", s);
    *ret_s = v;
    return 0;
}
