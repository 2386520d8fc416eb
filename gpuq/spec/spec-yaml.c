#include "gpuq/spec/spec-yaml.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "gpuq/core/job.h"
#include "gpuq/spec/job-spec.h"
#include "gpuq/spec/quantity.h"
#include "gpuq/spec/yaml-tree.h"
#include "lib/macro.h"
#include "lib/strv.h"

#define LABEL_QUEUE      "kueue.x-k8s.io/queue-name"
#define LABEL_PRIORITY   "kueue.x-k8s.io/priority-class"
#define SELECTOR_PRODUCT "nvidia.com/gpu.product"
#define RESOURCE_GPU     "nvidia.com/gpu"
#define RESOURCE_MIG     "nvidia.com/mig-"
#define PATH_MAX_LEN     256
/* Kubernetes cuts a generateName prefix to 58 bytes: 63 with its 5 random characters. */
#define GENERATE_PREFIX_MAX 58
#define GENERATE_SUFFIX_LEN 5

/* What one of requests and limits asks for. */
struct yres {
    long gpus;                     /* nvidia.com/gpu; -1: not given */
    long mig;                      /* nvidia.com/mig-<profile>; -1: not given */
    char profile[JOB_PROFILE_MAX]; /* with mig */
    bool has_cpu, has_mem;
    unsigned cpu_milli;
    uint64_t mem_bytes;
};

/* The Job while it is read. Values checked alone go to req at once; what depends on other fields
 * waits here until the end. */
struct yjob {
    json_t *req;
    bool api_version, kind, named, restart_policy, containers;
    bool prio_label;
    char generated[GENERATE_PREFIX_MAX + GENERATE_SUFFIX_LEN + 1]; /* from generateName */
    char *pod_priority;                                            /* priorityClassName */
    char gpu_product[JOB_MODEL_MAX];                               /* nodeSelector's */
    unsigned gpu_product_line;
    char resources_path[PATH_MAX_LEN];
    unsigned resources_line;
    /* the container */
    bool container_name, container_image;
    char **command, **args;
    char **env; /* "K=V", expanded as Kubernetes does */
    struct yres requests, limits;
};

static void yjob_done(struct yjob *j)
{
    json_decref(j->req);
    free(j->pod_priority);
    strv_free(j->command);
    strv_free(j->args);
    strv_free(j->env);
}

/* "line N: path: why". */
static int yerr(struct errmsg *e, int r, const struct ytree *at, const char *path, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));
static int yerr(struct errmsg *e, int r, const struct ytree *at, const char *path, const char *fmt,
                ...)
{
    char why[ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    return errmsg_set(e, r, "line %u: %s: %s", at->line, path, why);
}

static void path_join(char *buf, const char *path, const char *key)
{
    /* A path deeper than messages need is cut short: it only names a field in an error. */
    if (snprintf(buf, PATH_MAX_LEN, "%s%s%.128s", path, *path ? "." : "", key) >= PATH_MAX_LEN)
        buf[PATH_MAX_LEN - 1] = '\0';
}

static void path_index(char *buf, const char *path, size_t i)
{
    snprintf(buf, PATH_MAX_LEN, "%s[%zu]", path, i);
}

/* ---- scalars ---- */

static int y_string(const struct ytree *v, const char *path, const char **ret, struct errmsg *e)
{
    if (v->kind != YTREE_SCALAR)
        return yerr(e, -EINVAL, v, path, "must be a string");
    *ret = v->text;
    return 0;
}

/* An integer written plain (a quoted one is a string to Kubernetes), min..max. */
static int y_int(const struct ytree *v, const char *path, long long min, long long max,
                 long long *ret, struct errmsg *e)
{
    if (v->kind != YTREE_SCALAR || !v->plain)
        return yerr(e, -EINVAL, v, path, "must be a number");
    const char *s = v->text;
    bool neg = *s == '-';
    if (*s == '-' || *s == '+')
        s++;
    if (!*s || strspn(s, "0123456789") != strlen(s))
        return yerr(e, -EINVAL, v, path, "'%.64s' is not an integer", v->text);
    long long n = 0;
    for (; *s; s++) {
        n = n * 10 + (*s - '0');
        /* Stopping here keeps n far from overflow: the bounds are below 2^32. */
        if (n > max && n > -min)
            break;
    }
    n = neg ? -n : n;
    if (*s || n < min || n > max)
        return yerr(e, -EINVAL, v, path, "%.64s is out of range %lld..%lld", v->text, min, max);
    *ret = n;
    return 0;
}

static int y_bool(const struct ytree *v, const char *path, bool *ret, struct errmsg *e)
{
    static const char *const yes[] = {"true", "True", "TRUE"};
    static const char *const no[] = {"false", "False", "FALSE"};
    for (size_t i = 0; v->kind == YTREE_SCALAR && v->plain && i < ELEMENTSOF(yes); i++)
        if (strcmp(v->text, yes[i]) == 0 || strcmp(v->text, no[i]) == 0) {
            *ret = strcmp(v->text, yes[i]) == 0;
            return 0;
        }
    return yerr(e, -EINVAL, v, path, "must be true or false");
}

/* Sets the request's key to value (stolen), checked by job-spec.c; its reason goes under the
 * YAML path. */
static int yset(struct yjob *j, const struct ytree *at, const char *path, const char *key,
                json_t *value, struct errmsg *e)
{
    if (!value)
        return -ENOMEM;
    struct errmsg why = {""};
    int r = job_spec_check_field(key, value, &why);
    if (r < 0) {
        json_decref(value);
        return r == -ENOMEM ? r : yerr(e, r, at, path, "%s", why.text);
    }
    return json_object_set_new(j->req, key, value) < 0 ? -ENOMEM : 0;
}

static int yset_string(struct yjob *j, const struct ytree *v, const char *path, const char *key,
                       struct errmsg *e)
{
    const char *s = NULL;
    int r = y_string(v, path, &s, e);
    return r < 0 ? r : yset(j, v, path, key, json_string(s), e);
}

/* ---- mappings ---- */

typedef int (*yfield_fn)(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e);

struct yfield {
    const char *key;
    yfield_fn fn;
};

/* Every pair of the mapping to its field's function; a key not in fields is an error naming its
 * path, unless its value says nothing (null, {} or []). A null value is an absent field, as
 * Kubernetes reads it. */
static int walk_map(struct yjob *j, const struct ytree *m, const char *path,
                    const struct yfield *fields, size_t n_fields, struct errmsg *e)
{
    if (m->kind != YTREE_MAP)
        return yerr(e, -EINVAL, m, *path ? path : "the Job", "must be a mapping");
    for (size_t i = 0; i < m->n; i++) {
        const struct ytree *k = m->items[2 * i], *v = m->items[2 * i + 1];
        char sub[PATH_MAX_LEN];
        path_join(sub, path, k->text);
        const struct yfield *f = NULL;
        for (size_t x = 0; x < n_fields && !f; x++)
            if (strcmp(fields[x].key, k->text) == 0)
                f = &fields[x];
        if (!f && ytree_is_empty(v))
            continue;
        if (!f)
            return yerr(e, -EINVAL, k, sub, "not supported by gpuq");
        if (ytree_is_null(v))
            continue;
        int r = f->fn(j, v, sub, e);
        if (r < 0)
            return r;
    }
    return 0;
}

#define WALK(j, m, path, fields, e) walk_map((j), (m), (path), (fields), ELEMENTSOF(fields), (e))

/* A mapping of strings to strings whose values are read by fn for the keys it knows (NULL:
 * none); labels and annotations carry no behaviour in gpuq, so others are only checked for
 * form. */
static int string_map(struct yjob *j, const struct ytree *m, const char *path,
                      int (*fn)(struct yjob *j, const struct ytree *k, const struct ytree *v,
                                const char *path, struct errmsg *e),
                      struct errmsg *e)
{
    if (m->kind != YTREE_MAP)
        return yerr(e, -EINVAL, m, path, "must be a mapping of strings");
    for (size_t i = 0; i < m->n; i++) {
        const struct ytree *k = m->items[2 * i], *v = m->items[2 * i + 1];
        char sub[PATH_MAX_LEN];
        path_join(sub, path, k->text);
        if (v->kind != YTREE_SCALAR)
            return yerr(e, -EINVAL, v, sub, "must be a string");
        int r = fn ? fn(j, k, v, sub, e) : 0;
        if (r < 0)
            return r;
    }
    return 0;
}

/* ---- metadata ---- */

static int job_label(struct yjob *j, const struct ytree *k, const struct ytree *v, const char *path,
                     struct errmsg *e)
{
    if (strcmp(k->text, LABEL_QUEUE) == 0)
        return yset_string(j, v, path, "queue", e);
    if (strcmp(k->text, LABEL_PRIORITY) == 0) {
        j->prio_label = true;
        return yset_string(j, v, path, "priority_class", e);
    }
    return 0;
}

static int m_labels(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    return string_map(j, v, path, job_label, e);
}

static int m_annotations(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    return string_map(j, v, path, NULL, e);
}

static int m_name(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    j->named = true;
    return yset_string(j, v, path, "name", e);
}

/* Kubernetes' alphabet for generated names: no vowels (no words by chance) and no characters
 * that are easily confused. */
static const char name_alphabet[] = "bcdfghjklmnpqrstvwxz2456789";

static int random_suffix(char buf[static GENERATE_SUFFIX_LEN + 1])
{
    size_t n = 0;
    while (n < GENERATE_SUFFIX_LEN) {
        unsigned char bytes[16];
        ssize_t got = getrandom(bytes, sizeof(bytes), 0);
        if (got < 0)
            return negative_errno();
        /* Rejection keeps every character equally likely: 243 = 9 * 27. */
        for (ssize_t i = 0; i < got && n < GENERATE_SUFFIX_LEN; i++)
            if (bytes[i] < 243)
                buf[n++] = name_alphabet[bytes[i] % (sizeof(name_alphabet) - 1)];
    }
    buf[n] = '\0';
    return 0;
}

/* The name is made here and used at the end, unless metadata.name is given too: that one wins,
 * as in Kubernetes. */
static int m_generate_name(struct yjob *j, const struct ytree *v, const char *path,
                           struct errmsg *e)
{
    const char *prefix = NULL;
    int r = y_string(v, path, &prefix, e);
    if (r < 0)
        return r;
    char suffix[GENERATE_SUFFIX_LEN + 1];
    r = random_suffix(suffix);
    if (r < 0)
        return yerr(e, r, v, path, "no random suffix: %s", strerror(-r));
    snprintf(j->generated, sizeof(j->generated), "%.*s%s", GENERATE_PREFIX_MAX, prefix, suffix);
    json_auto_t *name = json_string(j->generated);
    struct errmsg why = {""};
    if (!name)
        return -ENOMEM;
    r = job_spec_check_field("name", name, &why);
    if (r < 0)
        return r == -ENOMEM ? r : yerr(e, r, v, path, "%s", why.text);
    return 0;
}

static int m_namespace(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    const char *s = NULL;
    int r = y_string(v, path, &s, e);
    if (r < 0)
        return r;
    if (strcmp(s, "default") != 0)
        return yerr(e, -EINVAL, v, path,
                    "'%.64s': gpuq has no namespaces (leave it out, or write default)", s);
    return 0;
}

static const struct yfield metadata_fields[] = {
    {"name", m_name},           {"generateName", m_generate_name},
    {"labels", m_labels},       {"annotations", m_annotations},
    {"namespace", m_namespace},
};

static int j_metadata(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    return WALK(j, v, path, metadata_fields, e);
}

/* ---- the container ---- */

static int y_strv(const struct ytree *v, const char *path, char ***ret, struct errmsg *e)
{
    if (v->kind != YTREE_SEQ)
        return yerr(e, -EINVAL, v, path, "must be a list of strings");
    _cleanup_strv_free_ char **l = strv_new();
    if (!l)
        return -ENOMEM;
    for (size_t i = 0; i < v->n; i++) {
        char sub[PATH_MAX_LEN];
        path_index(sub, path, i);
        if (v->items[i]->kind != YTREE_SCALAR)
            return yerr(e, -EINVAL, v->items[i], sub, "must be a string");
        if (strv_push(&l, v->items[i]->text) < 0)
            return -ENOMEM;
    }
    strv_free(*ret);
    *ret = TAKE_PTR(l);
    return 0;
}

static int c_command(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    return y_strv(v, path, &j->command, e);
}

static int c_args(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    return y_strv(v, path, &j->args, e);
}

static int c_name(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    const char *s = NULL;
    int r = y_string(v, path, &s, e);
    if (r < 0)
        return r;
    if (!*s)
        return yerr(e, -EINVAL, v, path, "must not be empty");
    j->container_name = true;
    return 0;
}

static int c_image(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    j->container_image = true;
    return yset_string(j, v, path, "image", e);
}

static int c_working_dir(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    return yset_string(j, v, path, "cwd", e);
}

static int c_image_pull_policy(struct yjob *j, const struct ytree *v, const char *path,
                               struct errmsg *e)
{
    const char *s = NULL;
    int r = y_string(v, path, &s, e);
    if (r < 0)
        return r;
    if (strcmp(s, "IfNotPresent") == 0)
        return 0;
    if (strcmp(s, "Always") == 0 || strcmp(s, "Never") == 0)
        return yerr(e, -EINVAL, v, path,
                    "%s is not supported: gpuq pulls an image once and runs the copy it has "
                    "(IfNotPresent)",
                    s);
    return yerr(e, -EINVAL, v, path, "'%.64s' is not Always, IfNotPresent or Never", s);
}

/* Kubernetes' $(VAR) references: $(NAME) of a variable set before (in env, the last setting
 * winning) becomes its value, an unknown one stays as written, "$$" is one '$' and any other
 * '$' stays. The result may not outgrow a request's strings. */
struct sbuf {
    char *p;
    size_t len, cap;
};

static int sbuf_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > SPEC_STRINGS_MAX)
        return -E2BIG;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

static const char *env_lookup(char *const *env, const char *name, size_t len)
{
    for (size_t i = strv_length(env); i > 0; i--)
        if (strncmp(env[i - 1], name, len) == 0 && env[i - 1][len] == '=')
            return env[i - 1] + len + 1;
    return NULL;
}

static int expand_vars(const char *s, char *const *env, char **ret)
{
    struct sbuf b = {0};
    int r = sbuf_add(&b, "", 0);
    while (r == 0 && *s) {
        const char *dollar = strchr(s, '$');
        if (!dollar || !dollar[1]) {
            r = sbuf_add(&b, s, strlen(s));
            break;
        }
        r = sbuf_add(&b, s, (size_t)(dollar - s));
        const char *close = dollar[1] == '(' ? strchr(dollar + 2, ')') : NULL;
        if (r < 0)
            break;
        if (dollar[1] == '$') {
            r = sbuf_add(&b, "$", 1);
            s = dollar + 2;
        } else if (close) {
            const char *value = env_lookup(env, dollar + 2, (size_t)(close - dollar - 2));
            r = value ? sbuf_add(&b, value, strlen(value))
                      : sbuf_add(&b, dollar, (size_t)(close + 1 - dollar));
            s = close + 1;
        } else {
            r = sbuf_add(&b, dollar, 2);
            s = dollar + 2;
        }
    }
    if (r < 0) {
        free(b.p);
        return r;
    }
    *ret = b.p;
    return 0;
}

static int env_var(struct yjob *j, const struct ytree *item, const char *path, struct errmsg *e)
{
    if (item->kind != YTREE_MAP)
        return yerr(e, -EINVAL, item, path, "must be a mapping of name and value");
    const char *name = NULL, *value = "";
    for (size_t i = 0; i < item->n; i++) {
        const struct ytree *k = item->items[2 * i], *v = item->items[2 * i + 1];
        char sub[PATH_MAX_LEN];
        path_join(sub, path, k->text);
        if (strcmp(k->text, "name") == 0 && y_string(v, sub, &name, e) < 0)
            return -EINVAL;
        else if (strcmp(k->text, "value") == 0 && !ytree_is_null(v) &&
                 y_string(v, sub, &value, e) < 0)
            return -EINVAL;
        else if (strcmp(k->text, "name") != 0 && strcmp(k->text, "value") != 0)
            return yerr(e, -EINVAL, k, sub, "not supported by gpuq");
    }
    if (!name)
        return yerr(e, -EINVAL, item, path, "name is required");
    if (!spec_env_name_valid(name, strlen(name)))
        return yerr(e, -EINVAL, item, path, "'%.64s' is not a variable name", name);
    _cleanup_free_ char *expanded = NULL;
    int r = expand_vars(value, j->env, &expanded);
    if (r < 0)
        return r == -ENOMEM ? r : yerr(e, r, item, path, "the value grows too large");
    _cleanup_free_ char *kv = NULL;
    if (asprintf(&kv, "%s=%s", name, expanded) < 0)
        return -ENOMEM;
    if (strv_length(j->env) >= SPEC_ENV_MAX)
        return yerr(e, -E2BIG, item, path, "more than %d variables", SPEC_ENV_MAX);
    return strv_consume(&j->env, TAKE_PTR(kv));
}

static int c_env(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    if (v->kind != YTREE_SEQ)
        return yerr(e, -EINVAL, v, path, "must be a list");
    for (size_t i = 0; i < v->n; i++) {
        char sub[PATH_MAX_LEN];
        path_index(sub, path, i);
        int r = env_var(j, v->items[i], sub, e);
        if (r < 0)
            return r;
    }
    return 0;
}

/* A count of devices: an integer quantity, plain or quoted ("1" is how many write it). */
static int device_count(const struct ytree *v, const char *path, long *ret, struct errmsg *e)
{
    if (v->kind != YTREE_SCALAR || !*v->text || strspn(v->text, "0123456789") != strlen(v->text))
        return yerr(e, -EINVAL, v, path, "must be a whole number of devices");
    if (strlen(v->text) > 6 || atol(v->text) > SPEC_GPUS_MAX)
        return yerr(e, -EINVAL, v, path, "%.64s is more than %d", v->text, SPEC_GPUS_MAX);
    *ret = atol(v->text);
    return 0;
}

static int resource(struct yres *res, const struct ytree *k, const struct ytree *v,
                    const char *path, struct errmsg *e)
{
    struct errmsg why = {""};
    if (strcmp(k->text, RESOURCE_GPU) == 0)
        return device_count(v, path, &res->gpus, e);
    if (strncmp(k->text, RESOURCE_MIG, strlen(RESOURCE_MIG)) == 0) {
        const char *profile = k->text + strlen(RESOURCE_MIG);
        json_auto_t *p = json_string(profile);
        if (!p)
            return -ENOMEM;
        int r = job_spec_check_field("mig_profile", p, &why);
        if (r < 0)
            return r == -ENOMEM ? r : yerr(e, r, k, path, "%s", why.text);
        if (res->mig >= 0)
            return yerr(e, -EINVAL, k, path, "a job asks for MIG instances of one profile");
        snprintf(res->profile, sizeof(res->profile), "%s", profile);
        return device_count(v, path, &res->mig, e);
    }
    if (v->kind != YTREE_SCALAR)
        return yerr(e, -EINVAL, v, path, "must be a quantity");
    if (strcmp(k->text, "cpu") == 0) {
        int r = quantity_parse_cpu(v->text, &res->cpu_milli, &why);
        res->has_cpu = true;
        return r < 0 ? yerr(e, -EINVAL, v, path, "%s", why.text) : 0;
    }
    if (strcmp(k->text, "memory") == 0) {
        int r = quantity_parse_memory(v->text, QUANTITY_LETTERS_DECIMAL, &res->mem_bytes, &why);
        res->has_mem = true;
        return r < 0 ? yerr(e, -EINVAL, v, path, "%s", why.text) : 0;
    }
    return yerr(e, -EINVAL, k, path, "not supported by gpuq");
}

static int resource_list(struct yres *res, const struct ytree *m, const char *path,
                         struct errmsg *e)
{
    if (m->kind != YTREE_MAP)
        return yerr(e, -EINVAL, m, path, "must be a mapping of resources");
    for (size_t i = 0; i < m->n; i++) {
        char sub[PATH_MAX_LEN];
        path_join(sub, path, m->items[2 * i]->text);
        int r = resource(res, m->items[2 * i], m->items[2 * i + 1], sub, e);
        if (r < 0)
            return r;
    }
    return 0;
}

static int r_requests(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    return resource_list(&j->requests, v, path, e);
}

static int r_limits(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    return resource_list(&j->limits, v, path, e);
}

static const struct yfield resources_fields[] = {
    {"requests", r_requests},
    {"limits", r_limits},
};

static int c_resources(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    snprintf(j->resources_path, sizeof(j->resources_path), "%s", path);
    j->resources_line = v->line;
    return WALK(j, v, path, resources_fields, e);
}

static const struct yfield container_fields[] = {
    {"name", c_name},
    {"image", c_image},
    {"command", c_command},
    {"args", c_args},
    {"env", c_env},
    {"workingDir", c_working_dir},
    {"resources", c_resources},
    {"imagePullPolicy", c_image_pull_policy},
};

/* command and args, one after the other, their $(VAR)s expanded. */
static int container_command(struct yjob *j, const struct ytree *c, const char *path,
                             struct errmsg *e)
{
    bool has_command = strv_length(j->command) > 0, has_args = strv_length(j->args) > 0;
    if (has_args && !has_command)
        return yerr(e, -EINVAL, c, path, "args without command is not supported: give command");
    if (!has_command)
        return 0;
    _cleanup_(json_decrefp) json_t *cmd = json_array();
    if (!cmd)
        return -ENOMEM;
    for (int part = 0; part < 2; part++)
        for (char **s = part ? j->args : j->command; s && *s; s++) {
            char *x;
            int r = expand_vars(*s, j->env, &x);
            if (r < 0)
                return r == -ENOMEM ? r : yerr(e, r, c, path, "the command grows too large");
            if (json_array_append_new(cmd, json_string(x)) < 0) {
                free(x);
                return -ENOMEM;
            }
            free(x);
        }
    return yset(j, c, path, "command", TAKE_PTR(cmd), e);
}

static int container_finish(struct yjob *j, const struct ytree *c, const char *path,
                            struct errmsg *e)
{
    if (!j->container_name)
        return yerr(e, -EINVAL, c, path, "name is required");
    if (!j->container_image)
        return yerr(e, -EINVAL, c, path, "image is required");
    int r = container_command(j, c, path, e);
    if (r < 0)
        return r;
    if (strv_length(j->env) == 0)
        return 0;
    json_t *env = json_array();
    for (char **s = j->env; env && *s; s++)
        if (json_array_append_new(env, json_string(*s)) < 0) {
            json_decref(env);
            env = NULL;
        }
    return yset(j, c, path, "env", env, e);
}

static int p_containers(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    if (v->kind != YTREE_SEQ)
        return yerr(e, -EINVAL, v, path, "must be a list");
    if (v->n != 1)
        return yerr(e, -EINVAL, v, path, "gpuq runs exactly one container, not %zu", v->n);
    char sub[PATH_MAX_LEN];
    path_index(sub, path, 0);
    int r = WALK(j, v->items[0], sub, container_fields, e);
    if (r < 0)
        return r;
    j->containers = true;
    return container_finish(j, v->items[0], sub, e);
}

/* ---- the pod ---- */

static int p_restart_policy(struct yjob *j, const struct ytree *v, const char *path,
                            struct errmsg *e)
{
    const char *s = NULL;
    int r = y_string(v, path, &s, e);
    if (r < 0)
        return r;
    if (strcmp(s, "Always") == 0)
        return yerr(e, -EINVAL, v, path, "Always is not allowed for a Job: OnFailure or Never");
    j->restart_policy = true;
    return yset(j, v, path, "restart_policy", json_string(s), e);
}

static int p_grace(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    long long n = 0;
    int r = y_int(v, path, 0, (long)SPEC_DURATION_MAX_S, &n, e);
    return r < 0 ? r : yset(j, v, path, "grace", json_integer(n), e);
}

static int p_priority_class(struct yjob *j, const struct ytree *v, const char *path,
                            struct errmsg *e)
{
    const char *s = NULL;
    int r = y_string(v, path, &s, e);
    if (r < 0)
        return r;
    json_auto_t *p = json_string(s);
    struct errmsg why = {""};
    if (!p)
        return -ENOMEM;
    r = job_spec_check_field("priority_class", p, &why);
    if (r < 0)
        return r == -ENOMEM ? r : yerr(e, r, v, path, "%s", why.text);
    free(j->pod_priority);
    j->pod_priority = strdup(s);
    return j->pod_priority ? 0 : -ENOMEM;
}

static int node_selector(struct yjob *j, const struct ytree *k, const struct ytree *v,
                         const char *path, struct errmsg *e)
{
    if (strcmp(k->text, SELECTOR_PRODUCT) != 0)
        return yerr(e, -EINVAL, k, path, "not supported by gpuq (only " SELECTOR_PRODUCT ")");
    json_auto_t *m = json_string(v->text);
    struct errmsg why = {""};
    if (!m)
        return -ENOMEM;
    int r = job_spec_check_field("gpu_model", m, &why);
    if (r < 0)
        return r == -ENOMEM ? r : yerr(e, r, v, path, "%s", why.text);
    snprintf(j->gpu_product, sizeof(j->gpu_product), "%s", v->text);
    j->gpu_product_line = v->line;
    return 0;
}

static int p_node_selector(struct yjob *j, const struct ytree *v, const char *path,
                           struct errmsg *e)
{
    return string_map(j, v, path, node_selector, e);
}

static const struct yfield pod_fields[] = {
    {"restartPolicy", p_restart_policy},        {"containers", p_containers},
    {"terminationGracePeriodSeconds", p_grace}, {"priorityClassName", p_priority_class},
    {"nodeSelector", p_node_selector},
};

static int t_spec(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    int r = WALK(j, v, path, pod_fields, e);
    if (r < 0)
        return r;
    if (!j->containers)
        return yerr(e, -EINVAL, v, path, "containers is required");
    if (!j->restart_policy)
        return yerr(e, -EINVAL, v, path, "restartPolicy is required (OnFailure or Never)");
    return 0;
}

static const struct yfield template_metadata_fields[] = {
    {"labels", m_annotations}, /* a pod's labels select nothing here */
    {"annotations", m_annotations},
};

static int t_metadata(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    return WALK(j, v, path, template_metadata_fields, e);
}

static const struct yfield template_fields[] = {
    {"metadata", t_metadata},
    {"spec", t_spec},
};

/* ---- the Job's spec ---- */

static int s_template(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    int r = WALK(j, v, path, template_fields, e);
    if (r < 0)
        return r;
    if (!j->containers)
        return yerr(e, -EINVAL, v, path, "spec is required");
    return 0;
}

static int s_backoff_limit(struct yjob *j, const struct ytree *v, const char *path,
                           struct errmsg *e)
{
    long long n = 0;
    int r = y_int(v, path, 0, SPEC_BACKOFF_LIMIT_MAX, &n, e);
    return r < 0 ? r : yset(j, v, path, "backoff_limit", json_integer(n), e);
}

static int s_active_deadline(struct yjob *j, const struct ytree *v, const char *path,
                             struct errmsg *e)
{
    long long n = 0;
    int r = y_int(v, path, 1, (long)SPEC_DURATION_MAX_S, &n, e);
    return r < 0 ? r : yset(j, v, path, "active_deadline", json_integer(n), e);
}

static int s_suspend(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    bool b = false;
    int r = y_bool(v, path, &b, e);
    return r < 0 ? r : yset(j, v, path, "held", json_boolean(b), e);
}

/* parallelism and completions: gpuq runs one pod of a Job. */
static int s_one(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    long long n = 0;
    int r = y_int(v, path, 0, INT32_MAX, &n, e);
    if (r < 0)
        return r;
    return n == 1 ? 0 : yerr(e, -EINVAL, v, path, "%lld: gpuq runs a Job as one pod (1 only)", n);
}

static int s_completion_mode(struct yjob *j, const struct ytree *v, const char *path,
                             struct errmsg *e)
{
    const char *s = NULL;
    int r = y_string(v, path, &s, e);
    if (r < 0)
        return r;
    return strcmp(s, "NonIndexed") == 0
               ? 0
               : yerr(e, -EINVAL, v, path, "'%.64s': only NonIndexed is supported", s);
}

static const struct yfield spec_fields[] = {
    {"template", s_template},
    {"backoffLimit", s_backoff_limit},
    {"activeDeadlineSeconds", s_active_deadline},
    {"suspend", s_suspend},
    {"parallelism", s_one},
    {"completions", s_one},
    {"completionMode", s_completion_mode},
};

static int j_spec(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    int r = WALK(j, v, path, spec_fields, e);
    if (r < 0)
        return r;
    if (!j->containers)
        return yerr(e, -EINVAL, v, path, "template is required");
    return 0;
}

static int j_api_version(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    const char *s = NULL;
    int r = y_string(v, path, &s, e);
    if (r < 0)
        return r;
    if (strcmp(s, "batch/v1") != 0)
        return yerr(e, -EINVAL, v, path, "'%.64s': gpuq reads batch/v1 Jobs", s);
    j->api_version = true;
    return 0;
}

static int j_kind(struct yjob *j, const struct ytree *v, const char *path, struct errmsg *e)
{
    const char *s = NULL;
    int r = y_string(v, path, &s, e);
    if (r < 0)
        return r;
    if (strcmp(s, "Job") != 0)
        return yerr(e, -EINVAL, v, path, "'%.64s': gpuq reads Jobs", s);
    j->kind = true;
    return 0;
}

static const struct yfield job_fields[] = {
    {"apiVersion", j_api_version},
    {"kind", j_kind},
    {"metadata", j_metadata},
    {"spec", j_spec},
};

/* ---- what spans fields ---- */

/* The GPUs of requests and limits: equal where both say, as the device plugin requires. */
static int resolve_gpus(struct yjob *j, const struct ytree *root, struct errmsg *e)
{
    struct yres *rq = &j->requests, *lm = &j->limits;
    struct ytree at = {.line = j->resources_line ? j->resources_line : root->line};
    const char *path = j->resources_path[0] ? j->resources_path : "spec.template.spec";
    if ((rq->gpus >= 0 || lm->gpus >= 0) && (rq->mig >= 0 || lm->mig >= 0))
        return yerr(e, -EINVAL, &at, path,
                    RESOURCE_GPU " and " RESOURCE_MIG "* cannot be combined");
    if (rq->gpus >= 0 && lm->gpus >= 0 && rq->gpus != lm->gpus)
        return yerr(e, -EINVAL, &at, path,
                    RESOURCE_GPU ": requests (%ld) and limits (%ld) must be equal", rq->gpus,
                    lm->gpus);
    if (rq->mig >= 0 && lm->mig >= 0 &&
        (rq->mig != lm->mig || strcmp(rq->profile, lm->profile) != 0))
        return yerr(e, -EINVAL, &at, path,
                    "MIG requests (%ld of %s) and limits (%ld of %s) must be equal", rq->mig,
                    rq->profile, lm->mig, lm->profile);
    long gpus = lm->gpus >= 0 ? lm->gpus : rq->gpus;
    long mig = lm->mig >= 0 ? lm->mig : rq->mig;
    const char *profile = lm->mig >= 0 ? lm->profile : rq->profile;
    int r = 0;
    if (gpus > 0)
        r = json_object_set_new(j->req, "gpus", json_integer(gpus));
    if (mig > 0 && r == 0)
        r = json_object_set_new(j->req, "gpus", json_integer(mig));
    if (mig > 0 && r == 0)
        r = json_object_set_new(j->req, "mig_profile", json_string(profile));
    if (r < 0)
        return -ENOMEM;
    if (j->gpu_product[0]) {
        struct ytree sel = {.line = j->gpu_product_line};
        if (mig > 0)
            return yerr(e, -EINVAL, &sel, "spec.template.spec.nodeSelector." SELECTOR_PRODUCT,
                        "cannot be combined with MIG resources");
        if (gpus <= 0)
            return yerr(e, -EINVAL, &sel, "spec.template.spec.nodeSelector." SELECTOR_PRODUCT,
                        "needs " RESOURCE_GPU " in the container's resources");
        if (json_object_set_new(j->req, "gpu_model", json_string(j->gpu_product)) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* CPUs and memory: the limit is what the job's cgroup gets; requests alone stand for it. */
static int resolve_resources(struct yjob *j, const struct ytree *root, struct errmsg *e)
{
    int r = resolve_gpus(j, root, e);
    if (r < 0)
        return r;
    struct yres *rq = &j->requests, *lm = &j->limits;
    if ((lm->has_cpu || rq->has_cpu) &&
        json_object_set_new(j->req, "cpu_milli",
                            json_integer(lm->has_cpu ? lm->cpu_milli : rq->cpu_milli)) < 0)
        return -ENOMEM;
    if ((lm->has_mem || rq->has_mem) &&
        json_object_set_new(
            j->req, "mem_bytes",
            json_integer((json_int_t)(lm->has_mem ? lm->mem_bytes : rq->mem_bytes))) < 0)
        return -ENOMEM;
    return 0;
}

static int yjob_finish(struct yjob *j, const struct ytree *root, struct errmsg *e)
{
    if (!j->api_version)
        return errmsg_set(e, -EINVAL, "apiVersion: required (batch/v1)");
    if (!j->kind)
        return errmsg_set(e, -EINVAL, "kind: required (Job)");
    if (!j->named && !j->generated[0])
        return errmsg_set(e, -EINVAL, "metadata: name or generateName is required");
    if (!j->named && json_object_set_new(j->req, "name", json_string(j->generated)) < 0)
        return -ENOMEM;
    if (!j->containers)
        return errmsg_set(e, -EINVAL, "spec: required");
    int r = resolve_resources(j, root, e);
    if (r < 0)
        return r;
    /* Kueue's label wins over the pod's priorityClassName. */
    if (j->pod_priority && !j->prio_label &&
        json_object_set_new(j->req, "priority_class", json_string(j->pod_priority)) < 0)
        return -ENOMEM;
    struct job_spec s;
    r = job_spec_from_json(j->req, &s, NULL, e);
    if (r < 0)
        return r == -ENOMEM ? r : errmsg_prefix(e, r, "the Job as a gpuq request");
    job_spec_done(&s);
    return 0;
}

int spec_yaml_parse(const char *text, size_t len, json_t **ret_request, struct errmsg *e)
{
    if (len > SPEC_YAML_MAX)
        return errmsg_set(e, -E2BIG, "%zu bytes, more than a Job file may hold (%d)", len,
                          SPEC_YAML_MAX);
    _cleanup_(ytree_freep) struct ytree *root = NULL;
    int r = ytree_parse(text, len, &root, e);
    if (r < 0)
        return r;
    _cleanup_(yjob_done) struct yjob j = {
        .req = json_object(),
        .requests = {.gpus = -1, .mig = -1},
        .limits = {.gpus = -1, .mig = -1},
    };
    if (!j.req)
        return -ENOMEM;
    r = WALK(&j, root, "", job_fields, e);
    if (r < 0)
        return r;
    r = yjob_finish(&j, root, e);
    if (r < 0)
        return r;
    /* Kueue creates its Jobs suspended and admits them by unsuspending: with Kueue's queue label,
     * gpuq is that admission, and suspend: true does not hold the job. */
    if (json_is_true(json_object_get(j.req, "held")) && json_object_get(j.req, "queue"))
        json_object_del(j.req, "held");
    *ret_request = TAKE_PTR(j.req);
    return 0;
}
