#include "capsule/slurm/plugin-config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "lib/macro.h"

static int parse_bool(const char *key, const char *v, bool *ret, struct errmsg *e)
{
    static const char *const yes[] = {"1", "true", "yes", "y"}, *const no[] = {"0", "false", "no",
                                                                               "n"};
    for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
        if (strcmp(v, yes[i]) == 0)
            return *ret = true, 0;
        if (strcmp(v, no[i]) == 0)
            return *ret = false, 0;
    }
    return errmsg_set(e, -EINVAL, "%s: invalid value: %s (use 1 or 0)", key, v);
}

static int set_path(const char *key, const char *v, char **dst, struct errmsg *e)
{
    if (v[0] != '/' || strlen(v) >= PATH_MAX / 2)
        return errmsg_set(e, -EINVAL, "%s: '%s' is not an absolute path of a sane length", key, v);
    free(*dst);
    *dst = strdup(v);
    return *dst ? 0 : -ENOMEM;
}

static int apply(struct plugin_config *c, const char *key, const char *v, struct errmsg *e)
{
    if (strcmp(key, "runtime_path") == 0)
        return set_path(key, v, &c->runtime_path, e);
    if (strcmp(key, "capsule") == 0)
        return set_path(key, v, &c->capsule, e);
    if (strcmp(key, "sbatch_support") == 0)
        return parse_bool(key, v, &c->sbatch_support, e);
    if (strcmp(key, "execute_entrypoint") == 0)
        return parse_bool(key, v, &c->execute_entrypoint, e);
    if (strcmp(key, "container_scope") == 0) {
        if (strcmp(v, "job") == 0)
            c->scope = PLUGIN_SCOPE_JOB;
        else if (strcmp(v, "global") == 0)
            c->scope = PLUGIN_SCOPE_GLOBAL;
        else
            return errmsg_set(e, -EINVAL, "container_scope: invalid value: %s (job or global)", v);
        return 0;
    }
    return errmsg_set(e, -EINVAL,
                      "unknown configuration option: %s (runtime_path, container_scope, "
                      "sbatch_support, execute_entrypoint, capsule are known)",
                      key);
}

int plugin_config_parse(int argc, char *const *argv, struct plugin_config *ret, struct errmsg *e)
{
    struct plugin_config c = {.scope = PLUGIN_SCOPE_JOB, .sbatch_support = true};
    int r = 0;
    for (int i = 0; r >= 0 && i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        _cleanup_free_ char *key = eq ? strndup(argv[i], (size_t)(eq - argv[i])) : NULL;
        if (!eq)
            r = errmsg_set(e, -EINVAL, "'%s': arguments are KEY=VALUE", argv[i]);
        else if (!key)
            r = -ENOMEM;
        else
            r = apply(&c, key, eq + 1, e);
    }
    if (r >= 0 && !c.runtime_path && !(c.runtime_path = strdup(PLUGIN_RUNTIME_PATH_DEFAULT)))
        r = -ENOMEM;
    if (r < 0) {
        plugin_config_done(&c);
        return r == -ENOMEM ? errmsg_set(e, r, "out of memory") : r;
    }
    *ret = c;
    return 0;
}

void plugin_config_done(struct plugin_config *c)
{
    free(c->runtime_path);
    free(c->capsule);
    *c = (struct plugin_config){0};
}
