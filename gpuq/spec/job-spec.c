#include "gpuq/spec/job-spec.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gpuq/spec/quantity.h"
#include "lib/macro.h"
#include "lib/strv.h"
#include "lib/strv-json.h"

/* A request while it is read: the job_spec, and what only the checks across keys need. */
struct spec_parse {
    struct job_spec s;
    bool held;
    unsigned gpus;
    bool has_model;
    bool has_profile;
    bool has_command;
};

static void spec_parse_done(struct spec_parse *p)
{
    job_spec_done(&p->s);
}

/* ---- signals ---- */

static const struct {
    const char *name;
    int sig;
} signal_names[] = {
    /* Primary names first: spec_signal_name() takes the first match. */
    {"HUP", SIGHUP},       {"INT", SIGINT},       {"QUIT", SIGQUIT}, {"ILL", SIGILL},
    {"TRAP", SIGTRAP},     {"ABRT", SIGABRT},     {"BUS", SIGBUS},   {"FPE", SIGFPE},
    {"KILL", SIGKILL},     {"USR1", SIGUSR1},     {"SEGV", SIGSEGV}, {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE},     {"ALRM", SIGALRM},     {"TERM", SIGTERM},
#ifdef SIGSTKFLT
    {"STKFLT", SIGSTKFLT},
#endif
    {"CHLD", SIGCHLD},     {"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},
    {"TTIN", SIGTTIN},     {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},
    {"XFSZ", SIGXFSZ},     {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH},
    {"IO", SIGIO},
#ifdef SIGPWR
    {"PWR", SIGPWR},
#endif
    {"SYS", SIGSYS},       {"IOT", SIGABRT},      {"POLL", SIGIO},   {"CLD", SIGCHLD},
};

/* "RTMIN", "RTMIN+n", "RTMAX", "RTMAX-n" (after "SIG"): 0 and the signal, or -EINVAL. */
static int rt_signal_parse(const char *s, int *ret)
{
    int base, dir;
    if (strncasecmp(s, "RTMIN", 5) == 0) {
        base = SIGRTMIN;
        dir = 1;
    } else if (strncasecmp(s, "RTMAX", 5) == 0) {
        base = SIGRTMAX;
        dir = -1;
    } else {
        return -EINVAL;
    }
    s += 5;
    if (*s == '\0') {
        *ret = base;
        return 0;
    }
    if (*s != (dir > 0 ? '+' : '-') || !isdigit((unsigned char)s[1]) || strlen(s + 1) > 2)
        return -EINVAL;
    char *end;
    long n = strtol(s + 1, &end, 10);
    if (*end || n > SIGRTMAX - SIGRTMIN)
        return -EINVAL;
    *ret = base + dir * (int)n;
    return 0;
}

int spec_signal_parse(const char *s, int *ret_sig, struct errmsg *e)
{
    if (isdigit((unsigned char)s[0])) {
        char *end;
        errno = 0;
        long n = strtol(s, &end, 10);
        if (*end || errno || n < 1 || n > SIGRTMAX)
            return errmsg_set(e, -EINVAL, "'%s' is not a signal number 1..%d", s, SIGRTMAX);
        *ret_sig = (int)n;
        return 0;
    }
    const char *name = strncasecmp(s, "SIG", 3) == 0 ? s + 3 : s;
    for (size_t i = 0; i < ELEMENTSOF(signal_names); i++)
        if (strcasecmp(name, signal_names[i].name) == 0) {
            *ret_sig = signal_names[i].sig;
            return 0;
        }
    if (rt_signal_parse(name, ret_sig) == 0)
        return 0;
    return errmsg_set(e, -EINVAL, "'%s' is not a signal (like TERM, SIGUSR1, RTMIN+2, 10)", s);
}

const char *spec_signal_name(int sig, char buf[static SPEC_SIGNAL_NAME_MAX])
{
    for (size_t i = 0; i < ELEMENTSOF(signal_names); i++)
        if (signal_names[i].sig == sig) {
            snprintf(buf, SPEC_SIGNAL_NAME_MAX, "SIG%s", signal_names[i].name);
            return buf;
        }
    if (sig == SIGRTMAX)
        snprintf(buf, SPEC_SIGNAL_NAME_MAX, "SIGRTMAX");
    else if (sig >= SIGRTMIN && sig < SIGRTMAX)
        snprintf(buf, SPEC_SIGNAL_NAME_MAX, sig == SIGRTMIN ? "SIGRTMIN" : "SIGRTMIN+%d",
                 sig - SIGRTMIN);
    else
        return NULL;
    return buf;
}

/* ---- values ---- */

bool spec_env_name_valid(const char *name, size_t len)
{
    if (len == 0 || isdigit((unsigned char)name[0]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '_')
            return false;
    return true;
}

/* A JSON string without NUL: its text, or -EINVAL. */
static int get_string(json_t *v, const char **ret, struct errmsg *e)
{
    if (!json_is_string(v))
        return errmsg_set(e, -EINVAL, "must be a string");
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v))
        return errmsg_set(e, -EINVAL, "must not contain NUL");
    *ret = s;
    return 0;
}

static bool chars_in(const char *s, const char *extra)
{
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr(extra, *s))
            return false;
    return true;
}

/* A name of [A-Za-z0-9] and extra, min..max bytes, copied into *dst. */
static int set_name_string(json_t *v, char **dst, const char *extra, size_t min, size_t max,
                           struct errmsg *e)
{
    const char *s = NULL;
    int r = get_string(v, &s, e);
    if (r < 0)
        return r;
    if (strlen(s) < min)
        return errmsg_set(e, -EINVAL, "must not be empty");
    if (strlen(s) > max)
        return errmsg_set(e, -EINVAL, "'%.64s...' is longer than %zu bytes", s, max);
    if (!chars_in(s, extra))
        return errmsg_set(e, -EINVAL, "'%s' may hold only letters, digits and \"%s\"", s, extra);
    char *copy = strdup(s);
    if (!copy)
        return -ENOMEM;
    free(*dst);
    *dst = copy;
    return 0;
}

static int get_uint(json_t *v, json_int_t max, const char *what, json_int_t *ret, struct errmsg *e)
{
    if (!json_is_integer(v))
        return errmsg_set(e, -EINVAL, "must be an integer (%s)", what);
    json_int_t n = json_integer_value(v);
    if (n < 0 || n > max)
        return errmsg_set(e, -EINVAL, "%lld is out of range (%s)", (long long)n, what);
    *ret = n;
    return 0;
}

/* Seconds: a finite number, above 0 (or at least 0 with zero_ok), at most SPEC_DURATION_MAX_S. */
static int get_seconds(json_t *v, bool zero_ok, double *ret, struct errmsg *e)
{
    if (!json_is_number(v))
        return errmsg_set(e, -EINVAL, "must be a number of seconds");
    double d = json_number_value(v);
    if (!isfinite(d) || d < 0 || (!zero_ok && d == 0))
        return errmsg_set(e, -EINVAL, "%g seconds: must be %s 0", d,
                          zero_ok ? "at least" : "above");
    if (d > SPEC_DURATION_MAX_S)
        return errmsg_set(e, -EINVAL, "%g seconds is more than 100 years", d);
    *ret = d;
    return 0;
}

static int get_bool(json_t *v, bool *ret, struct errmsg *e)
{
    if (!json_is_boolean(v))
        return errmsg_set(e, -EINVAL, "must be true or false");
    *ret = json_is_true(v);
    return 0;
}

/* "1g.10gb", "1g.5gb+me", "1c.2g.20gb", "1g.24gb+gfx", "1g.10gb+me.all": NVIDIA's profile names,
 * an optional compute-instance part, then "<n>g.<n>gb" and a suffix of lowercase words. */
static bool mig_profile_valid(const char *s)
{
    const char *p = s;
    size_t n = strspn(p, "0123456789");
    if (n >= 1 && n <= 2 && p[n] == 'c' && p[n + 1] == '.')
        p += n + 2;
    n = strspn(p, "0123456789");
    if (n < 1 || n > 2 || p[n] != 'g' || p[n + 1] != '.')
        return false;
    p += n + 2;
    n = strspn(p, "0123456789");
    if (n < 1 || n > 4 || strncmp(p + n, "gb", 2) != 0)
        return false;
    p += n + 2;
    if (*p == '\0')
        return true;
    if (*p != '+' && *p != '-')
        return false;
    for (p++; *p; p++) {
        size_t w = strspn(p, "abcdefghijklmnopqrstuvwxyz");
        if (w == 0)
            return false;
        p += w;
        if (*p == '\0')
            return true;
        if (*p != '.')
            return false;
    }
    return false;
}

/* ---- keys ---- */

static int f_name(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    return set_name_string(v, &p->s.name, "._-", 0, JOB_NAME_MAX - 1, e);
}

static int f_queue(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    return set_name_string(v, &p->s.queue, "._-", 1, JOB_QUEUE_MAX - 1, e);
}

static int f_priority_class(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    return set_name_string(v, &p->s.priority_class, "._-", 1, JOB_PRIOCLASS_MAX - 1, e);
}

static int f_gpus(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    json_int_t n = 0;
    int r = get_uint(v, SPEC_GPUS_MAX, "a count 0.." STRINGIFY(SPEC_GPUS_MAX), &n, e);
    if (r < 0)
        return r;
    p->gpus = (unsigned)n;
    return 0;
}

static int f_gpu_model(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    _cleanup_free_ char *m = NULL;
    int r = set_name_string(v, &m, "._ -", 0, JOB_MODEL_MAX - 1, e);
    if (r < 0)
        return r;
    strcpy(p->s.res.model, m);
    p->has_model = true;
    return 0;
}

static int f_mig_profile(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    const char *s = NULL;
    int r = get_string(v, &s, e);
    if (r < 0)
        return r;
    if (strlen(s) >= JOB_PROFILE_MAX || !mig_profile_valid(s))
        return errmsg_set(e, -EINVAL,
                          "'%.64s' is not a MIG profile (like 1g.10gb, 1g.5gb+me, 3g.40gb)", s);
    strcpy(p->s.res.profile, s);
    p->has_profile = true;
    return 0;
}

static int f_cpu_milli(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    json_int_t n = 0;
    int r = get_uint(v, QUANTITY_CPU_MAX_MILLI, "thousandths of a CPU, 0 = no limit", &n, e);
    if (r >= 0)
        p->s.res.cpu_milli = (unsigned)n;
    return r;
}

static int f_mem_bytes(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    json_int_t n = 0;
    int r = get_uint(v, (json_int_t)QUANTITY_MEMORY_MAX, "bytes, 0 = no limit", &n, e);
    if (r >= 0)
        p->s.res.mem_bytes = (uint64_t)n;
    return r;
}

static int f_time_limit(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    return get_seconds(v, false, &p->s.time_limit_s, e);
}

static int f_active_deadline(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    return get_seconds(v, false, &p->s.active_deadline_s, e);
}

static int f_image(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    const char *s = NULL;
    int r = get_string(v, &s, e);
    if (r < 0)
        return r;
    if (!*s)
        return errmsg_set(e, -EINVAL, "must not be empty");
    if (strlen(s) > SPEC_IMAGE_MAX)
        return errmsg_set(e, -EINVAL, "longer than %d bytes", SPEC_IMAGE_MAX);
    for (const char *c = s; *c; c++)
        if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f)
            return errmsg_set(e, -EINVAL,
                              "'%s' is not an image reference: blank or control "
                              "character at byte %zu",
                              s, (size_t)(c - s));
    /* capsule run would take it for an option. */
    if (s[0] == '-')
        return errmsg_set(e, -EINVAL, "'%s' is not an image reference", s);
    char *copy = strdup(s);
    if (!copy)
        return -ENOMEM;
    free(p->s.image);
    p->s.image = copy;
    return 0;
}

/* An array of at most max strings without NUL, each checked by check (may be NULL). */
static int get_strv(json_t *v, size_t max, int (*check)(const char *s, size_t i, struct errmsg *e),
                    char ***ret, struct errmsg *e)
{
    if (!json_is_array(v))
        return errmsg_set(e, -EINVAL, "must be an array of strings");
    if (json_array_size(v) > max)
        return errmsg_set(e, -E2BIG, "%zu elements, more than %zu", json_array_size(v), max);
    _cleanup_strv_free_ char **l = strv_new();
    if (!l)
        return -ENOMEM;
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x)
    {
        const char *s = NULL;
        int r = get_string(x, &s, e);
        if (r == 0 && check)
            r = check(s, i, e);
        if (r < 0)
            return r == -ENOMEM ? r : errmsg_prefix(e, r, "[%zu]", i);
        if (strv_push(&l, s) < 0)
            return -ENOMEM;
    }
    strv_free(*ret);
    *ret = TAKE_PTR(l);
    return 0;
}

static int check_argv(const char *s, size_t i, struct errmsg *e)
{
    return i == 0 && !*s ? errmsg_set(e, -EINVAL, "the program must not be empty") : 0;
}

static int f_command(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    if (json_is_array(v) && json_array_size(v) == 0)
        return errmsg_set(e, -EINVAL, "must hold at least the program");
    int r = get_strv(v, SPEC_ARGV_MAX, check_argv, &p->s.argv, e);
    if (r >= 0)
        p->has_command = true;
    return r;
}

static int check_env(const char *s, size_t i, struct errmsg *e)
{
    const char *eq = strchr(s, '=');
    if (!eq)
        return errmsg_set(e, -EINVAL, "'%.64s' is not K=V", s);
    if (!spec_env_name_valid(s, (size_t)(eq - s)))
        return errmsg_set(e, -EINVAL, "'%.*s' is not a variable name",
                          (int)(eq - s < 64 ? eq - s : 64), s);
    return 0;
}

static int f_env(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    return get_strv(v, SPEC_ENV_MAX, check_env, &p->s.env, e);
}

static int f_cwd(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    const char *s = NULL;
    int r = get_string(v, &s, e);
    if (r < 0)
        return r;
    if (s[0] != '/')
        return errmsg_set(e, -EINVAL, "'%.64s' is not an absolute path", s);
    if (strlen(s) >= PATH_MAX)
        return errmsg_set(e, -EINVAL, "longer than %d bytes", PATH_MAX - 1);
    char *copy = strdup(s);
    if (!copy)
        return -ENOMEM;
    free(p->s.cwd);
    p->s.cwd = copy;
    return 0;
}

static int f_interactive(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    return get_bool(v, &p->s.interactive, e);
}

static int f_backoff_limit(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    json_int_t n = 0;
    int r =
        get_uint(v, SPEC_BACKOFF_LIMIT_MAX, "retries 0.." STRINGIFY(SPEC_BACKOFF_LIMIT_MAX), &n, e);
    if (r >= 0)
        p->s.backoff_limit = (unsigned)n;
    return r;
}

static int f_checkpoint_signal(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    int sig;
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 1 || n > SIGRTMAX)
            return errmsg_set(e, -EINVAL, "%lld is not a signal number 1..%d", (long long)n,
                              SIGRTMAX);
        sig = (int)n;
    } else {
        const char *s = NULL;
        int r = get_string(v, &s, e);
        if (r < 0)
            return errmsg_set(e, r, "must be a signal name or number");
        r = spec_signal_parse(s, &sig, e);
        if (r < 0)
            return r;
    }
    if (sig == SIGKILL || sig == SIGSTOP)
        return errmsg_set(e, -EINVAL, "%s cannot be caught, so it cannot ask a job to checkpoint",
                          sig == SIGKILL ? "SIGKILL" : "SIGSTOP");
    p->s.checkpoint_signal = sig;
    return 0;
}

static int f_grace(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    return get_seconds(v, true, &p->s.grace_s, e);
}

static const char *const restart_names[] = {
    [JOB_RESTART_ON_FAILURE] = "OnFailure",
    [JOB_RESTART_NEVER] = "Never",
};

static int f_restart_policy(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    const char *s = NULL;
    int r = get_string(v, &s, e);
    if (r < 0)
        return r;
    for (size_t i = 0; i < ELEMENTSOF(restart_names); i++)
        if (strcmp(s, restart_names[i]) == 0) {
            p->s.restart = (enum job_restart)i;
            return 0;
        }
    return errmsg_set(e, -EINVAL, "'%.64s' is not OnFailure or Never", s);
}

static int f_umask(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0777)
        return errmsg_set(e, -EINVAL, "must be a file mode mask, 0 to 0777 (511)");
    p->s.umask = (int)json_integer_value(v);
    return 0;
}

static int f_held(struct spec_parse *p, json_t *v, struct errmsg *e)
{
    return get_bool(v, &p->held, e);
}

static const struct spec_field {
    const char *key;
    int (*parse)(struct spec_parse *p, json_t *v, struct errmsg *e);
} spec_fields[] = {
    {"name", f_name},
    {"queue", f_queue},
    {"priority_class", f_priority_class},
    {"gpus", f_gpus},
    {"gpu_model", f_gpu_model},
    {"mig_profile", f_mig_profile},
    {"cpu_milli", f_cpu_milli},
    {"mem_bytes", f_mem_bytes},
    {"time_limit", f_time_limit},
    {"active_deadline", f_active_deadline},
    {"image", f_image},
    {"command", f_command},
    {"env", f_env},
    {"cwd", f_cwd},
    {"interactive", f_interactive},
    {"backoff_limit", f_backoff_limit},
    {"checkpoint_signal", f_checkpoint_signal},
    {"grace", f_grace},
    {"restart_policy", f_restart_policy},
    {"held", f_held},
    {"umask", f_umask},
};

static const struct spec_field *field_find(const char *key)
{
    for (size_t i = 0; i < ELEMENTSOF(spec_fields); i++)
        if (strcmp(spec_fields[i].key, key) == 0)
            return &spec_fields[i];
    return NULL;
}

/* ---- the whole request ---- */

static void spec_parse_init(struct spec_parse *p)
{
    *p = (struct spec_parse){0};
    p->s.backoff_limit = SPEC_BACKOFF_LIMIT_DEFAULT;
    p->s.checkpoint_signal = SIGTERM;
    p->s.grace_s = SPEC_GRACE_DEFAULT_S;
    p->s.umask = -1;
    p->s.restart = JOB_RESTART_ON_FAILURE;
}

static size_t strv_bytes(char *const *v)
{
    size_t n = 0;
    for (size_t i = 0; v && v[i]; i++)
        n += strlen(v[i]) + 1;
    return n;
}

static size_t str_bytes(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

static int resolve_gpus(struct spec_parse *p, struct errmsg *e)
{
    struct job_resources *res = &p->s.res;
    if (p->has_profile && p->has_model)
        return errmsg_set(e, -EINVAL,
                          "mig_profile and gpu_model cannot be combined: a MIG "
                          "instance is of the GPU that holds it");
    if (p->has_profile && p->gpus == 0)
        return errmsg_set(e, -EINVAL, "mig_profile: needs gpus > 0 (the number of MIG instances)");
    if (p->has_model && res->model[0] && p->gpus == 0)
        return errmsg_set(e, -EINVAL, "gpu_model: needs gpus > 0");
    res->gpus = p->gpus;
    res->gpu_kind = p->gpus == 0 ? JOB_GPU_NONE : p->has_profile ? JOB_GPU_MIG : JOB_GPU_WHOLE;
    return 0;
}

/* Defaults and the checks that span keys. */
static int spec_parse_finish(struct spec_parse *p, struct errmsg *e)
{
    int r = resolve_gpus(p, e);
    if (r < 0)
        return r;
    if (!p->has_command && !p->s.image)
        return errmsg_set(e, -EINVAL, "command: required unless image is given");
    if (!p->s.name && !(p->s.name = strdup("")))
        return -ENOMEM;
    if (!p->s.env && !(p->s.env = strv_new()))
        return -ENOMEM;
    size_t total = str_bytes(p->s.name) + str_bytes(p->s.queue) + str_bytes(p->s.priority_class) +
                   str_bytes(p->s.image) + str_bytes(p->s.cwd) + strv_bytes(p->s.argv) +
                   strv_bytes(p->s.env);
    if (total > SPEC_STRINGS_MAX)
        return errmsg_set(e, -E2BIG, "the request's strings take %zu bytes, more than %d", total,
                          SPEC_STRINGS_MAX);
    return 0;
}

int job_spec_from_json(json_t *j, struct job_spec *ret, bool *ret_held, struct errmsg *e)
{
    if (!json_is_object(j))
        return errmsg_set(e, -EINVAL, "a job request must be a JSON object");
    _cleanup_(spec_parse_done) struct spec_parse p;
    spec_parse_init(&p);
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v)
    {
        const struct spec_field *f = field_find(key);
        if (!f)
            return errmsg_set(e, -EINVAL, "unknown key '%.64s'", key);
        int r = f->parse(&p, v, e);
        if (r < 0)
            return r == -ENOMEM ? r : errmsg_prefix(e, r, "%s", key);
    }
    int r = spec_parse_finish(&p, e);
    if (r < 0)
        return r;
    *ret = p.s;
    p.s = (struct job_spec){0};
    if (ret_held)
        *ret_held = p.held;
    return 0;
}

int job_spec_check_field(const char *key, json_t *value, struct errmsg *e)
{
    const struct spec_field *f = field_find(key);
    if (!f)
        return errmsg_set(e, -EINVAL, "unknown key '%.64s'", key);
    _cleanup_(spec_parse_done) struct spec_parse p;
    spec_parse_init(&p);
    return f->parse(&p, value, e);
}

/* ---- to JSON ---- */

/* Sets key to v (stolen, NULL allowed for a failed constructor). */
static int put(json_t *o, const char *key, json_t *v)
{
    return json_object_set_new(o, key, v) < 0 ? -ENOMEM : 0;
}

static int put_string(json_t *o, const char *key, const char *s)
{
    return s ? put(o, key, json_string(s)) : 0;
}

static int put_resources(json_t *o, const struct job_resources *res)
{
    int r = put(o, "gpus", json_integer(res->gpu_kind == JOB_GPU_NONE ? 0 : res->gpus));
    if (r == 0 && res->gpu_kind == JOB_GPU_WHOLE && res->model[0])
        r = put_string(o, "gpu_model", res->model);
    if (r == 0 && res->gpu_kind == JOB_GPU_MIG)
        r = put_string(o, "mig_profile", res->profile);
    if (r == 0)
        r = put(o, "cpu_milli", json_integer(res->cpu_milli));
    if (r == 0)
        r = put(o, "mem_bytes", json_integer((json_int_t)res->mem_bytes));
    return r;
}

static int put_run(json_t *o, const struct job_spec *s)
{
    char buf[SPEC_SIGNAL_NAME_MAX];
    const char *sig = spec_signal_name(s->checkpoint_signal, buf);
    int r = 0;
    if (s->time_limit_s > 0)
        r = put(o, "time_limit", json_real(s->time_limit_s));
    if (r == 0 && s->active_deadline_s > 0)
        r = put(o, "active_deadline", json_real(s->active_deadline_s));
    if (r == 0)
        r = put_string(o, "image", s->image);
    if (r == 0 && s->argv)
        r = put(o, "command", strv_to_json(s->argv));
    if (r == 0)
        r = put(o, "env", strv_to_json(s->env));
    if (r == 0)
        r = put_string(o, "cwd", s->cwd);
    if (r == 0)
        r = put(o, "interactive", json_boolean(s->interactive));
    if (r == 0)
        r = put(o, "backoff_limit", json_integer(s->backoff_limit));
    if (r == 0)
        r = put(o, "checkpoint_signal",
                sig ? json_string(sig) : json_integer(s->checkpoint_signal));
    if (r == 0)
        r = put(o, "grace", json_real(s->grace_s));
    if (r == 0)
        r = put_string(o, "restart_policy",
                       restart_names[s->restart == JOB_RESTART_NEVER ? JOB_RESTART_NEVER
                                                                     : JOB_RESTART_ON_FAILURE]);
    if (r == 0 && s->umask >= 0)
        r = put(o, "umask", json_integer(s->umask));
    return r;
}

json_t *job_spec_to_json(const struct job_spec *s)
{
    json_auto_t *o = json_object();
    if (!o)
        return NULL;
    int r = put_string(o, "name", s->name ? s->name : "");
    if (r == 0)
        r = put_string(o, "queue", s->queue);
    if (r == 0)
        r = put_string(o, "priority_class", s->priority_class);
    if (r == 0)
        r = put_resources(o, &s->res);
    if (r == 0)
        r = put_run(o, s);
    return r < 0 ? NULL : TAKE_PTR(o);
}
