#include "gpuq/run/run-spec.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq/run/run-file.h"
#include "lib/macro.h"
#include "lib/strv-json.h"
#include "lib/strv.h"

enum field_kind {
    FIELD_U64,  /* uint64_t, up to JSON's (jansson's) largest integer */
    FIELD_UINT, /* unsigned */
    FIELD_ID,   /* uid_t/gid_t; (uid_t)-1 is "no change" to setresuid and refused */
    FIELD_NAME, /* a non-empty string */
    FIELD_PATH, /* an absolute path */
    FIELD_IMAGE,
    FIELD_ARGV, /* an array of strings */
    FIELD_ENV,  /* an array of "K=V" */
};

struct field {
    const char *name;
    enum field_kind kind;
    size_t offset;
    bool required;
};

#define F(name, kind, required)                                                                    \
    {                                                                                              \
#name, kind, offsetof(struct run_spec, name), required                                     \
    }
static const struct field fields[] = {
    F(job_id, FIELD_U64, true),
    F(run, FIELD_UINT, true),
    F(uid, FIELD_ID, true),
    F(gid, FIELD_ID, true),
    F(user, FIELD_NAME, true),
    F(home, FIELD_PATH, true),
    F(shell, FIELD_PATH, false),
    F(argv, FIELD_ARGV, true),
    F(env, FIELD_ENV, true),
    F(cwd, FIELD_PATH, false),
    F(image, FIELD_IMAGE, false),
    F(capsule, FIELD_PATH, false),
    F(cgroup_parent, FIELD_PATH, false),
    F(cpu_milli, FIELD_UINT, false),
    F(mem_bytes, FIELD_U64, false),
    F(umask, FIELD_UINT, false),
    F(log_path, FIELD_PATH, true),
    F(exit_path, FIELD_PATH, true),
    F(pid_path, FIELD_PATH, true),
};
#undef F

static bool is_string_kind(enum field_kind k)
{
    return k == FIELD_NAME || k == FIELD_PATH || k == FIELD_IMAGE;
}

static bool is_strv_kind(enum field_kind k)
{
    return k == FIELD_ARGV || k == FIELD_ENV;
}

static char **str_at(struct run_spec *s, const struct field *f)
{
    return (char **)((char *)s + f->offset);
}

static char ***strv_at(struct run_spec *s, const struct field *f)
{
    return (char ***)((char *)s + f->offset);
}

void run_spec_done(struct run_spec *s)
{
    for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
        if (is_string_kind(fields[i].kind))
            free(*str_at(s, &fields[i]));
        else if (is_strv_kind(fields[i].kind))
            strv_free(*strv_at(s, &fields[i]));
    }
    *s = (struct run_spec){0};
}

/* The rules on a string field's value; NULL when it is fine, else what is wrong. */
static const char *string_problem(enum field_kind kind, const char *v)
{
    if (!*v)
        return "empty";
    if (kind == FIELD_PATH && v[0] != '/')
        return "not an absolute path";
    if (kind == FIELD_PATH && strlen(v) >= PATH_MAX)
        return "longer than PATH_MAX";
    /* capsule would read an image name that starts with '-' as an option. */
    if ((kind == FIELD_IMAGE || kind == FIELD_NAME) && v[0] == '-')
        return "starts with '-'";
    return NULL;
}

static int validate(const struct run_spec *cs, struct errmsg *e)
{
    struct run_spec *s = (struct run_spec *)cs;
    for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
        const struct field *f = &fields[i];
        if (is_string_kind(f->kind)) {
            const char *v = *str_at(s, f), *why = v ? string_problem(f->kind, v) : NULL;
            if (!v && f->required)
                return errmsg_set(e, -EINVAL, "run spec: \"%s\" is missing", f->name);
            if (why)
                return errmsg_set(e, -EINVAL, "run spec: \"%s\": '%.200s': %s", f->name, v, why);
        } else if (is_strv_kind(f->kind) && !*strv_at(s, f)) {
            return errmsg_set(e, -EINVAL, "run spec: \"%s\" is missing", f->name);
        }
    }
    if (s->uid == (uid_t)-1 || s->gid == (gid_t)-1)
        return errmsg_set(e, -EINVAL, "run spec: uid or gid %lu is not an id",
                          (unsigned long)(uid_t)-1);
    for (size_t i = 0; s->env[i]; i++) {
        const char *eq = strchr(s->env[i], '=');
        if (!eq || eq == s->env[i])
            return errmsg_set(e, -EINVAL, "run spec: \"env\" entry %zu '%.100s': not K=V", i,
                              s->env[i]);
    }
    if (!s->image && !s->argv[0])
        return errmsg_set(e, -EINVAL, "run spec: \"argv\" is empty and there is no image");
    if (s->image && !s->capsule)
        return errmsg_set(e, -EINVAL, "run spec: \"image\" needs \"capsule\", the program");
    return 0;
}

static int strv_from_array(const json_t *a, const struct field *f, char ***ret, struct errmsg *e)
{
    if (!json_is_array(a))
        return errmsg_set(e, -EINVAL, "run spec: \"%s\": not an array", f->name);
    _cleanup_strv_free_ char **v = strv_new();
    if (!v)
        return -ENOMEM;
    size_t i;
    json_t *s;
    json_array_foreach(a, i, s)
    {
        if (!json_is_string(s))
            return errmsg_set(e, -EINVAL, "run spec: \"%s\" entry %zu: not a string", f->name, i);
        if (strv_push(&v, json_string_value(s)) < 0)
            return -ENOMEM;
    }
    *ret = TAKE_PTR(v);
    return 0;
}

static int integer_field(const json_t *v, const struct field *f, struct run_spec *s,
                         struct errmsg *e)
{
    json_int_t n = json_integer_value(v);
    json_int_t max = f->kind == FIELD_U64  ? (json_int_t)INT64_MAX
                     : f->kind == FIELD_ID ? (json_int_t)UINT32_MAX - 1
                                           : (json_int_t)UINT_MAX;
    if (!json_is_integer(v) || n < 0 || n > max)
        return errmsg_set(e, -EINVAL, "run spec: \"%s\": not an integer from 0 to %lld", f->name,
                          (long long)max);
    void *p = (char *)s + f->offset;
    if (f->kind == FIELD_U64)
        *(uint64_t *)p = (uint64_t)n;
    else if (f->kind == FIELD_ID)
        *(uid_t *)p = (uid_t)n; /* uid_t and gid_t are both 32-bit unsigned on Linux */
    else
        *(unsigned *)p = (unsigned)n;
    return 0;
}

static int set_field(const json_t *v, const struct field *f, struct run_spec *s, struct errmsg *e)
{
    if (json_is_null(v))
        return f->required ? errmsg_set(e, -EINVAL, "run spec: \"%s\" is missing (null)", f->name)
                           : 0;
    if (is_strv_kind(f->kind))
        return strv_from_array(v, f, strv_at(s, f), e);
    if (!is_string_kind(f->kind))
        return integer_field(v, f, s, e);
    if (!json_is_string(v))
        return errmsg_set(e, -EINVAL, "run spec: \"%s\": not a string", f->name);
    char **dst = str_at(s, f);
    *dst = strdup(json_string_value(v));
    return *dst ? 0 : -ENOMEM;
}

static const struct field *field_named(const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(fields); i++)
        if (strcmp(fields[i].name, name) == 0)
            return &fields[i];
    return NULL;
}

static int from_object(const json_t *o, struct run_spec *s, struct errmsg *e)
{
    if (!json_is_object(o))
        return errmsg_set(e, -EINVAL, "run spec: not a JSON object");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v)
    {
        const struct field *f = field_named(key);
        if (!f)
            return errmsg_set(e, -EINVAL, "run spec: unknown key \"%.64s\"", key);
        int r = set_field(v, f, s, e);
        if (r < 0)
            return r == -ENOMEM ? errmsg_set(e, r, "out of memory") : r;
    }
    for (size_t i = 0; i < ELEMENTSOF(fields); i++)
        if (fields[i].required && !json_object_get(o, fields[i].name))
            return errmsg_set(e, -EINVAL, "run spec: \"%s\" is missing", fields[i].name);
    return validate(s, e);
}

int run_spec_from_json(const char *text, size_t len, struct run_spec *ret, struct errmsg *e)
{
    json_error_t je;
    json_auto_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return errmsg_set(e, -EINVAL, "run spec: line %d: %s", je.line, je.text);
    struct run_spec s = {.umask = RUN_UMASK_DEFAULT};
    int r = from_object(o, &s, e);
    if (r == 0 && s.umask > 0777)
        r = errmsg_set(e, -EINVAL, "run spec: \"umask\": %#o is not a file mode mask", s.umask);
    if (r < 0) {
        run_spec_done(&s);
        return r;
    }
    *ret = s;
    return 0;
}

static json_t *field_to_json(const struct run_spec *cs, const struct field *f)
{
    struct run_spec *s = (struct run_spec *)cs;
    const void *p = (const char *)s + f->offset;
    if (is_string_kind(f->kind)) {
        const char *v = *str_at(s, f);
        return v ? json_string(v) : json_null();
    }
    if (is_strv_kind(f->kind))
        return strv_to_json(*strv_at(s, f));
    if (f->kind == FIELD_U64)
        return json_integer((json_int_t) * (const uint64_t *)p);
    if (f->kind == FIELD_ID)
        return json_integer((json_int_t) * (const uid_t *)p);
    return json_integer((json_int_t) * (const unsigned *)p);
}

int run_spec_to_json(const struct run_spec *s, char **ret_text, struct errmsg *e)
{
    int r = validate(s, e);
    if (r < 0)
        return r;
    if (s->job_id > INT64_MAX || s->mem_bytes > INT64_MAX)
        return errmsg_set(e, -EINVAL, "run spec: job_id or mem_bytes beyond 2^63-1");
    json_auto_t *o = json_object();
    for (size_t i = 0; o && i < ELEMENTSOF(fields); i++)
        if (json_object_set_new(o, fields[i].name, field_to_json(s, &fields[i])) < 0)
            return errmsg_set(e, -ENOMEM, "out of memory");
    char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    if (!text)
        return errmsg_set(e, -ENOMEM, "out of memory");
    *ret_text = text;
    return 0;
}

int run_spec_write(const char *path, const struct run_spec *s, struct errmsg *e)
{
    _cleanup_free_ char *text = NULL;
    int r = run_spec_to_json(s, &text, e);
    return r < 0 ? r : run_file_write_atomic(path, text, strlen(text), 0600, e);
}

int run_spec_read(const char *path, struct run_spec *ret, struct errmsg *e)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = run_file_read(path, RUN_SPEC_MAX, true, &text, &len, e);
    if (r < 0)
        return r;
    r = run_spec_from_json(text, len, ret, e);
    return r < 0 ? errmsg_prefix(e, r, "%s", path) : 0;
}
