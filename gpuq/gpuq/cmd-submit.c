/* gpuq submit: a job from options and a command (spec-args.h) or from a Kubernetes Job file
 * (spec-yaml.h), with the caller's directory and environment, as sbatch sends them; then, with
 * --wait, the job's end. */
#include "gpuq/gpuq/submit.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/clock.h"

#include "gpuq/gpuq/render.h"
#include "gpuq/spec/job-spec.h"
#include "gpuq/spec/spec-args.h"
#include "gpuq/spec/spec-yaml.h"
#include "lib/fileio.h"
#include "lib/macro.h"
#include "lib/utf8.h"
#include "lib/names.h"

/* --wait: the first look comes soon (a job that fails at once), later ones at most a second
 * apart; gpuqd being away (a restart) is waited out this long. */
#define WAIT_FIRST_S       0.2
#define WAIT_MAX_S         1.0
#define WAIT_UNREACHABLE_S 300.0

const char gpuq_submit_help[] =
    "gpuq's own options (anywhere before the command):\n"
    "      --wait                   wait until the job has ended and exit with its status\n"
    "                               (128+N when signal N ended it; 1 when it never ran)\n"
    "      --parsable               print only the job id\n"
    "      --json                   print gpuqd's reply\n\n"
    "A command job runs in the current directory with the whole current environment (as\n"
    "sbatch --export=ALL; -e adds to it). A Job file's job gets the file's env and workingDir.\n";

/* Variables that name the caller's own job, container or GPUs: passed on, they would make the
 * new job look like the caller's or use GPUs it was not given. gpuqd sets them for the job. */
static const char *const not_inherited[] = {
    NAMES_ENV_GPUQ_JOB_ID,    NAMES_ENV_CAPSULE_NAME, "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
};

static bool inherited(const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || !spec_env_name_valid(kv, (size_t)(eq - kv)))
        return false;
    for (size_t i = 0; i < ELEMENTSOF(not_inherited); i++) {
        size_t n = strlen(not_inherited[i]);
        if ((size_t)(eq - kv) == n && strncmp(kv, not_inherited[i], n) == 0)
            return false;
    }
    return true;
}

/* Index of the assignment of kv's name in array env, or -1. */
static ssize_t env_find(json_t *env, const char *kv)
{
    size_t n = strcspn(kv, "=");
    size_t i;
    json_t *v;
    json_array_foreach(env, i, v)
    {
        const char *s = json_string_value(v);
        if (s && strncmp(s, kv, n) == 0 && s[n] == '=')
            return (ssize_t)i;
    }
    return -1;
}

int gpuq_submit_env(char *const *environ_, json_t *extra, json_t **ret, struct errmsg *e)
{
    json_t *env = json_array();
    if (!env)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int r = 0;
    for (size_t i = 0; r == 0 && environ_ && environ_[i]; i++) {
        if (!inherited(environ_[i]) || env_find(env, environ_[i]) >= 0)
            continue;
        /* JSON holds UTF-8 only: a variable that is not (OLDPWD of a Latin-1 folder) is left
         * out, and said so, rather than failing the submit. */
        if (!utf8_valid(environ_[i])) {
            fprintf(stderr, "gpuq: not passing %.*s to the job: its value is not UTF-8\n",
                    (int)strcspn(environ_[i], "="), environ_[i]);
            continue;
        }
        r = json_array_append_new(env, json_string(environ_[i]));
    }
    size_t i;
    json_t *v;
    json_array_foreach(extra, i, v)
    {
        const char *s = json_string_value(v);
        if (r < 0 || !s)
            continue;
        ssize_t at = env_find(env, s);
        r = at >= 0 ? json_array_set(env, (size_t)at, v) : json_array_append(env, v);
    }
    if (r < 0) {
        json_decref(env);
        return errmsg_set(e, -ENOMEM, "out of memory");
    }
    *ret = env;
    return 0;
}

/* gpuq's own options among submit's: 1 for a single token, 2 for --socket PATH, 0 for none. */
static int own_option(int argc, char **argv, int i)
{
    const char *a = argv[i];
    if (strcmp(a, "--wait") == 0 || strcmp(a, "--parsable") == 0 || strcmp(a, "--json") == 0 ||
        strncmp(a, "--socket=", 9) == 0)
        return 1;
    if (strcmp(a, "--socket") == 0)
        return i + 1 < argc ? 2 : 1;
    return 0;
}

static int own_apply(struct gpuq_submit_opts *o, int argc, char **argv, int i, struct errmsg *e)
{
    const char *a = argv[i];
    if (strcmp(a, "--wait") == 0)
        o->wait = true;
    else if (strcmp(a, "--parsable") == 0)
        o->parsable = true;
    else if (strcmp(a, "--json") == 0)
        o->json = true;
    else if (strncmp(a, "--socket=", 9) == 0)
        o->socket = a + 9;
    else if (i + 1 < argc)
        o->socket = argv[i + 1];
    else
        return errmsg_set(e, -GPUQ_E_USAGE, "submit: option '--socket' needs a value");
    return 0;
}

/* Copies argv without gpuq's own options among the first `end` elements (the options; a "--"
 * ends them too), applying them to o when o is not NULL. Returns the new argc; map (may be NULL)
 * gets the original index of each kept element. */
static int strip_own(int argc, char **argv, int end, char **out, int *map,
                     struct gpuq_submit_opts *o, struct errmsg *e)
{
    int n = 0;
    bool rest = false;
    for (int i = 0; i < argc; i++) {
        int k = i > 0 && i < end && !rest ? own_option(argc, argv, i) : 0;
        if (i > 0 && strcmp(argv[i], "--") == 0)
            rest = true;
        if (k == 0) {
            if (map)
                map[n] = i;
            out[n++] = argv[i];
            continue;
        }
        if (o && own_apply(o, argc, argv, i, e) < 0)
            return -GPUQ_E_USAGE;
        i += k - 1;
    }
    out[n] = NULL;
    return n;
}

/* spec_args_parse() with its errors as usage errors (exit status 2), as a bad option is. */
static int spec_parse(int argc, char **argv, json_t **ret, char **ret_yaml, struct errmsg *e)
{
    int r = spec_args_parse(argc, argv, ret, ret_yaml, e);
    return r == -EINVAL ? -GPUQ_E_USAGE : r;
}

int gpuq_submit_parse(int argc, char **argv, struct gpuq_submit_opts *ret_opts,
                      json_t **ret_request, char **ret_yaml_path, struct errmsg *e)
{
    /* Where the options end is spec-args' knowledge (which take a value). So: a first parse
     * without everything that looks like gpuq's own, whose command tells where it starts; then
     * gpuq's options are taken from before it only, and the command goes through untouched
     * (`gpuq submit --wait ./run.sh --json` hands --json to run.sh). */
    _cleanup_free_ char **pass = calloc((size_t)argc + 1, sizeof(*pass));
    _cleanup_free_ int *map = calloc((size_t)argc + 1, sizeof(*map));
    if (!pass || !map)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int n = strip_own(argc, argv, argc, pass, map, NULL, e);
    json_t *req = NULL;
    char *yaml = NULL;
    int r = spec_parse(n, pass, &req, &yaml, e);
    if (r != 0)
        return r;
    size_t cmd = json_array_size(json_object_get(req, "command"));
    int end = cmd > 0 && (size_t)n > cmd ? map[n - cmd] : argc;
    json_decref(req);
    free(yaml);

    struct gpuq_submit_opts o = {0};
    n = strip_own(argc, argv, end, pass, NULL, &o, e);
    if (n < 0)
        return n;
    r = spec_parse(n, pass, &req, &yaml, e);
    if (r != 0)
        return r;
    *ret_opts = o;
    *ret_request = req;
    *ret_yaml_path = yaml;
    return 0;
}

int gpuq_job_exit_status(json_t *job)
{
    json_t *code = json_object_get(job, "exit_code"), *sig = json_object_get(job, "signal");
    const char *state = json_string_value(json_object_get(job, "state"));
    if (json_is_integer(code))
        return (int)(json_integer_value(code) & 0xff);
    if (json_is_integer(sig) && json_integer_value(sig) > 0 && json_integer_value(sig) < 128)
        return 128 + (int)json_integer_value(sig);
    return state && strcmp(state, "COMPLETED") == 0 ? 0 : 1;
}

/* Reads a Job file and makes it the request, with the command line's overrides laid over it. */
static int request_from_file(const char *path, json_t *overrides, json_t **ret, struct errmsg *e)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "%s: %s", path, strerror(errno));
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = fd_read_all(fd, SPEC_YAML_MAX, &text, &len);
    if (r == -EFBIG)
        return errmsg_set(e, r, "%s: larger than %d bytes; not a Job file", path, SPEC_YAML_MAX);
    if (r < 0)
        return errmsg_set(e, r, "%s: %s", path, strerror(-r));
    json_t *req = NULL;
    r = spec_yaml_parse(text, len, &req, e);
    if (r < 0)
        return errmsg_prefix(e, r == -EINVAL ? -GPUQ_E_USAGE : r, "%s", path);
    if (json_object_update(req, overrides) < 0) {
        json_decref(req);
        return errmsg_set(e, -ENOMEM, "out of memory");
    }
    *ret = req;
    return 0;
}

/* A command job runs where it was submitted, with the caller's environment. */
static int request_complete(json_t *req, struct errmsg *e)
{
    extern char **environ;
    /* The caller's umask, as sbatch passes it: files the job makes get the modes they would. */
    if (!json_object_get(req, "umask")) {
        mode_t mask = umask(022);
        umask(mask);
        if (json_object_set_new(req, "umask", json_integer(mask)) < 0)
            return errmsg_set(e, -ENOMEM, "out of memory");
    }
    if (!json_object_get(req, "cwd")) {
        _cleanup_free_ char *cwd = getcwd(NULL, 0);
        if (!cwd)
            return errmsg_set(e, negative_errno(),
                              "cannot tell the current directory, where the job would run: %s",
                              strerror(errno));
        if (json_object_set_new(req, "cwd", json_string(cwd)) < 0)
            return errmsg_set(e, -EINVAL, "the current directory '%s' is not UTF-8", cwd);
    }
    json_t *env = NULL;
    int r = gpuq_submit_env(environ, json_object_get(req, "env"), &env, e);
    if (r < 0)
        return r;
    return json_object_set_new(req, "env", env) < 0 ? errmsg_set(e, -ENOMEM, "out of memory") : 0;
}

/* Waits for the job's end; returns its exit status (gpuq_job_exit_status) or an error. */
static int wait_for_end(const struct gpuq_cli *c, json_int_t id, bool quiet, struct errmsg *e)
{
    char path[64];
    snprintf(path, sizeof(path), "/v1/jobs/%" JSON_INTEGER_FORMAT, id);
    double delay = WAIT_FIRST_S, away_since = 0;
    for (;;) {
        gpuq_sleep(delay);
        delay = delay * 1.5 < WAIT_MAX_S ? delay * 1.5 : WAIT_MAX_S;
        json_t *doc = NULL;
        int r = gpuq_call(c, "GET", path, NULL, &doc, e);
        if (r == -GPUQ_E_UNREACHABLE || r == -ETIMEDOUT) {
            double now = clock_wall_sec();
            if (away_since == 0)
                away_since = now;
            if (now - away_since < WAIT_UNREACHABLE_S)
                continue;
        }
        if (r < 0)
            return r;
        json_t *job = json_object_get(doc, "job");
        const char *state = json_string_value(json_object_get(job, "state"));
        away_since = 0;
        if (state && strcmp(state, "PENDING") != 0 && strcmp(state, "RUNNING") != 0 &&
            strcmp(state, "STOPPING") != 0) {
            int status = gpuq_job_exit_status(job);
            if (!quiet)
                fprintf(c->out, "Job %" JSON_INTEGER_FORMAT " ended: %s, exit status %d\n", id,
                        state, status);
            json_decref(doc);
            return status;
        }
        json_decref(doc);
    }
}

/* gpuqd reads requests up to a size; what makes one large is almost always the environment,
 * and the message says so with the numbers. */
static void too_large(json_t *req, struct errmsg *e)
{
    size_t env = 0, i;
    json_t *v;
    json_array_foreach(json_object_get(req, "env"), i, v)
    {
        env += json_string_length(v) + 1;
    }
    char *text = json_dumps(req, JSON_COMPACT);
    size_t all = text ? strlen(text) : 0;
    free(text);
    char why[ERRMSG_MAX];
    memcpy(why, e->text, sizeof(why));
    errmsg_set(e, -EMSGSIZE,
               "the job is too large for gpuqd (%s): its request has %zu KiB, %zu KiB of them the "
               "environment; unset large variables, or submit from a smaller one (env -i ... gpuq "
               "submit -e K=V ...)",
               why, (all + 1023) / 1024, (env + 1023) / 1024);
}

static void submitted(const struct gpuq_cli *c, const struct gpuq_submit_opts *o, json_t *doc)
{
    json_int_t id = json_integer_value(json_object_get(doc, "id"));
    const char *queue = json_string_value(json_object_get(json_object_get(doc, "job"), "queue"));
    if (c->json)
        render_json(c->out, doc);
    else if (o->parsable)
        fprintf(c->out, "%" JSON_INTEGER_FORMAT "\n", id);
    else if (queue)
        fprintf(c->out, "Submitted job %" JSON_INTEGER_FORMAT " to queue %s\n", id, queue);
    else
        fprintf(c->out, "Submitted job %" JSON_INTEGER_FORMAT "\n", id);
    /* --wait may take hours: the id must be out before. */
    fflush(c->out);
}

int cmd_submit(struct gpuq_cli *c, int argc, char *argv[], struct errmsg *e)
{
    struct gpuq_submit_opts o;
    json_t *req = NULL;
    _cleanup_free_ char *yaml = NULL;
    int r = gpuq_submit_parse(argc, argv, &o, &req, &yaml, e);
    if (r == SPEC_ARGS_HELP) {
        fprintf(c->out, "%s\n%s", spec_args_usage, gpuq_submit_help);
        return GPUQ_EXIT_OK;
    }
    if (r < 0)
        return r;
    c->json = c->json || o.json;
    c->socket = o.socket ? o.socket : c->socket;
    if (yaml) {
        json_t *overrides = req;
        r = request_from_file(yaml, overrides, &req, e);
        json_decref(overrides);
        if (r < 0)
            return r;
    } else if ((r = request_complete(req, e)) < 0) {
        json_decref(req);
        return r;
    }

    json_t *doc = NULL;
    r = gpuq_call(c, "POST", "/v1/jobs", req, &doc, e);
    if (r == -EMSGSIZE)
        too_large(req, e);
    json_decref(req);
    if (r < 0)
        return r;
    json_t *id = json_object_get(doc, "id");
    if (!json_is_integer(id)) {
        json_decref(doc);
        return errmsg_set(e, -EBADMSG, "gpuqd's reply to the submission has no job id");
    }
    submitted(c, &o, doc);
    json_int_t jid = json_integer_value(id);
    json_decref(doc);
    return o.wait ? wait_for_end(c, jid, o.parsable || c->json, e) : GPUQ_EXIT_OK;
}
