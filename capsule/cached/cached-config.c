/* capsule-cached's configuration file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/cached/cached.h"
#include "capsule/image/capsule-limits.h"
#include "lib/config.h"
#include "lib/macro.h"
#include "lib/strv.h"

#define SECTION "cache"

static int take_string(struct config *f, const char *key, char **dst)
{
    const char *v = config_get(f, SECTION, key);
    if (!v)
        return 0;
    char *copy = strdup(v);
    if (!copy)
        return -ENOMEM;
    free(*dst);
    *dst = copy;
    return 0;
}

static int take_values(struct config *f, struct cached_config *c, struct errmsg *e)
{
    const char *v = config_get(f, SECTION, "insecure_registries");
    if (v) {
        char **list = NULL;
        if (strv_split_blanks(v, &list) < 0)
            return errmsg_set(e, -ENOMEM, "out of memory");
        strv_free(c->insecure);
        c->insecure = list;
    }
    unsigned long n;
    int r = config_get_uint(f, SECTION, "parallel_downloads", c->parallel, 1, 32, &n, e);
    if (r < 0)
        return r;
    c->parallel = (unsigned)n;
    if ((r = config_get_size(f, SECTION, "max_layer_size", c->max_layer_size, &c->max_layer_size,
                             e)) < 0)
        return r;
    if ((r = config_get_size(f, SECTION, "max_unpacked_size", c->max_unpacked_size,
                             &c->max_unpacked_size, e)) < 0)
        return r;
    if ((r = config_get_size(f, SECTION, "max_size", c->max_size, &c->max_size, e)) < 0)
        return r;
    return config_get_size(f, SECTION, "max_user_size", c->max_user_size, &c->max_user_size, e);
}

/* Paths must be absolute: the service starts from / with no home to expand against. */
static int check_paths(struct config *f, const struct cached_config *c, struct errmsg *e)
{
    const char *keys[] = {"dir", "socket", "ca_file"};
    const char *values[] = {c->dir, c->socket, c->ca_file};
    for (size_t i = 0; i < ELEMENTSOF(keys); i++)
        if (values[i] && values[i][0] != '/')
            return errmsg_set(e, -EINVAL, "%s:%u: [%s] %s: '%s' is not an absolute path",
                              config_path(f), config_line(f, SECTION, keys[i]), SECTION, keys[i],
                              values[i]);
    return 0;
}

static int apply_file(const char *path, bool required, struct cached_config *c, struct errmsg *e)
{
    _cleanup_(config_freep) struct config *f = NULL;
    int r = config_load(path, &f, e);
    if (r == -ENOENT && !required)
        return 0;
    if (r < 0)
        return r;
    if (take_string(f, "dir", &c->dir) < 0 || take_string(f, "socket", &c->socket) < 0 ||
        take_string(f, "metrics", &c->metrics) < 0 ||
        take_string(f, "admin_group", &c->admin_group) < 0 ||
        take_string(f, "ca_file", &c->ca_file) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    if ((r = take_values(f, c, e)) < 0 || (r = check_paths(f, c, e)) < 0)
        return r;
    return config_check_unused(f, e);
}

int cached_config_load(const char *path, struct cached_config *ret, struct errmsg *e)
{
    struct cached_config c = {
        .path = strdup(path ? path : CACHED_CONFIG_PATH),
        .dir = strdup(CACHED_DIR_DEFAULT),
        .socket = strdup(CACHED_SOCKET_DEFAULT),
        .insecure = strv_new(),
        .parallel = 4,
        .max_layer_size = CAPSULE_LAYER_SIZE_DEFAULT,
        .max_unpacked_size = CAPSULE_UNPACKED_SIZE_DEFAULT,
    };
    int r = c.path && c.dir && c.socket && c.insecure ? 0 : errmsg_set(e, -ENOMEM, "out of memory");
    if (r >= 0)
        r = apply_file(path ? path : CACHED_CONFIG_PATH, path != NULL, &c, e);
    if (r < 0) {
        cached_config_done(&c);
        return r;
    }
    *ret = c;
    return 0;
}

void cached_config_done(struct cached_config *c)
{
    free(c->path);
    free(c->dir);
    free(c->socket);
    free(c->metrics);
    free(c->admin_group);
    free(c->ca_file);
    strv_free(c->insecure);
    *c = (struct cached_config){0};
}
