#include "capsule/capsule-config.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capsule/image/capsule-limits.h"
#include "capsule/image/mirror.h"
#include "lib/config.h"
#include "lib/macro.h"
#include "lib/strv.h"

#define SECTION "capsule"

/* The caller's home: $HOME if set, else the passwd entry (a job started without a login shell
 * may have no HOME). */
static const char *home_dir(void)
{
    const char *h = getenv("HOME");
    if (h && *h == '/')
        return h;
    struct passwd *pw = getpwuid(getuid());
    return pw && pw->pw_dir ? pw->pw_dir : "/";
}

/* "$XDG_X_HOME/capsule", or "~/<fallback>/capsule" when the variable is unset or relative (the
 * XDG spec says to ignore relative values). */
static char *xdg_dir(const char *var, const char *fallback)
{
    const char *x = getenv(var);
    char *p = NULL;
    int r = (x && *x == '/') ? asprintf(&p, "%s/capsule", x)
                             : asprintf(&p, "%s/%s/capsule", home_dir(), fallback);
    return r < 0 ? NULL : p;
}

/* Expands a leading "~/" or "$HOME/". */
static char *expand_home(const char *v)
{
    const char *rest = NULL;
    if (strncmp(v, "~/", 2) == 0)
        rest = v + 1;
    else if (strncmp(v, "$HOME/", 6) == 0)
        rest = v + 5;
    if (!rest)
        return strdup(v);
    char *p = NULL;
    return asprintf(&p, "%s%s", home_dir(), rest) < 0 ? NULL : p;
}

static int set_defaults(struct capsule_config *c)
{
    *c = (struct capsule_config){.parallel_downloads = 4,
                                 .retries = 4,
                                 .max_layer_size = CAPSULE_LAYER_SIZE_DEFAULT,
                                 .max_unpacked_size = CAPSULE_UNPACKED_SIZE_DEFAULT};
    c->cache_dir = xdg_dir("XDG_CACHE_HOME", ".cache");
    c->data_dir = xdg_dir("XDG_DATA_HOME", ".local/share");
    char *cfg = xdg_dir("XDG_CONFIG_HOME", ".config");
    if (cfg && asprintf(&c->credentials, "%s/credentials", cfg) < 0)
        c->credentials = NULL;
    free(cfg);
    if (asprintf(&c->docker_config, "%s/.docker/config.json", home_dir()) < 0)
        c->docker_config = NULL;
    c->driver_root = strdup("/");
    c->insecure_registries = strv_new();
    c->registry_mirrors = strv_new();
    c->mounts = strv_new();
    if (!c->cache_dir || !c->data_dir || !c->credentials || !c->docker_config || !c->driver_root ||
        !c->insecure_registries || !c->registry_mirrors || !c->mounts)
        return -ENOMEM;
    return 0;
}

/* Replaces *dst with the key's value (home-expanded) when the file sets it. Paths must be
 * absolute: a relative cache dir would depend on where the user happens to stand. */
static int take_path(struct config *f, const char *key, char **dst, struct errmsg *e)
{
    const char *v = config_get(f, SECTION, key);
    if (!v)
        return 0;
    _cleanup_free_ char *p = expand_home(v);
    if (!p)
        return -ENOMEM;
    if (p[0] != '/')
        return errmsg_set(e, -EINVAL, "%s:%u: [capsule] %s: '%s' is not an absolute path",
                          config_path(f), config_line(f, SECTION, key), key, v);
    free(*dst);
    *dst = TAKE_PTR(p);
    return 0;
}

static int take_list(struct config *f, const char *key, char ***dst)
{
    const char *v = config_get(f, SECTION, key);
    if (!v)
        return 0;
    char **list = NULL;
    int r = strv_split_blanks(v, &list);
    if (r < 0)
        return r;
    strv_free(*dst);
    *dst = list;
    return 0;
}

static int take_rootfs(struct config *f, struct capsule_config *c, struct errmsg *e)
{
    const char *v = config_get(f, SECTION, "rootfs");
    if (!v)
        return 0;
    if (strcmp(v, "auto") == 0)
        c->rootfs_mode = RUNTIME_ROOTFS_AUTO;
    else if (strcmp(v, "overlay") == 0)
        c->rootfs_mode = RUNTIME_ROOTFS_OVERLAY;
    else if (strcmp(v, "copy") == 0)
        c->rootfs_mode = RUNTIME_ROOTFS_COPY;
    else
        return errmsg_set(e, -EINVAL, "%s:%u: [capsule] rootfs: '%s' is not auto, overlay or copy",
                          config_path(f), config_line(f, SECTION, "rootfs"), v);
    return 0;
}

static int check_mirrors(struct config *f, char *const *mirrors, struct errmsg *e)
{
    for (size_t i = 0; mirrors[i]; i++) {
        int r = mirror_check(mirrors[i], e);
        if (r < 0)
            return errmsg_prefix(e, r, "%s:%u: [capsule] registry_mirrors", config_path(f),
                                 config_line(f, SECTION, "registry_mirrors"));
    }
    return 0;
}

/* Checks every mounts entry now, so a typo names the file and line instead of failing a run. */
static int check_mounts(struct config *f, char *const *mounts, struct errmsg *e)
{
    for (size_t i = 0; mounts[i]; i++) {
        struct mount_entry m = {0};
        int r = capsule_parse_mount(mounts[i], &m, e);
        mount_entry_done(&m);
        if (r < 0)
            return errmsg_prefix(e, r, "%s:%u: [capsule] mounts", config_path(f),
                                 config_line(f, SECTION, "mounts"));
    }
    return 0;
}

static int apply_numbers(struct config *f, struct capsule_config *c, struct errmsg *e)
{
    unsigned long v;
    int r = config_get_uint(f, SECTION, "parallel_downloads", c->parallel_downloads, 1, 32, &v, e);
    if (r < 0)
        return r;
    c->parallel_downloads = (unsigned)v;
    r = config_get_uint(f, SECTION, "retries", c->retries, 1, 20, &v, e);
    if (r < 0)
        return r;
    c->retries = (unsigned)v;
    r = config_get_size(f, SECTION, "max_layer_size", c->max_layer_size, &c->max_layer_size, e);
    if (r < 0)
        return r;
    r = config_get_size(f, SECTION, "max_unpacked_size", c->max_unpacked_size,
                        &c->max_unpacked_size, e);
    if (r < 0)
        return r;
    return config_get_bool(f, SECTION, "remap_root", c->remap_root, &c->remap_root, e);
}

/* Applies one file over c. A missing file is not an error: both files are optional. */
static int apply_file(const char *path, struct capsule_config *c, int slot, struct errmsg *e)
{
    _cleanup_(config_freep) struct config *f = NULL;
    int r = config_load(path, &f, e);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    if ((r = take_path(f, "cache_dir", &c->cache_dir, e)) < 0 ||
        (r = take_path(f, "data_dir", &c->data_dir, e)) < 0 ||
        (r = take_path(f, "credentials", &c->credentials, e)) < 0 ||
        (r = take_path(f, "docker_config", &c->docker_config, e)) < 0 ||
        (r = take_path(f, "ca_file", &c->ca_file, e)) < 0 ||
        (r = take_path(f, "driver_root", &c->driver_root, e)) < 0 ||
        (r = take_path(f, "node_cache", &c->node_cache, e)) < 0 ||
        (r = take_path(f, "fuse_overlayfs", &c->fuse_overlayfs, e)) < 0 ||
        (r = take_list(f, "insecure_registries", &c->insecure_registries)) < 0 ||
        (r = take_list(f, "registry_mirrors", &c->registry_mirrors)) < 0 ||
        (r = check_mirrors(f, c->registry_mirrors, e)) < 0 ||
        (r = take_list(f, "mounts", &c->mounts)) < 0 || (r = check_mounts(f, c->mounts, e)) < 0 ||
        (r = take_rootfs(f, c, e)) < 0 || (r = apply_numbers(f, c, e)) < 0)
        return r;
    if ((r = config_check_unused(f, e)) < 0)
        return r;
    c->loaded_from[slot] = strdup(path);
    return c->loaded_from[slot] ? 0 : -ENOMEM;
}

int capsule_config_load(const char *system_path, const char *user_path, struct capsule_config *ret,
                        struct errmsg *e)
{
    struct capsule_config c;
    _cleanup_free_ char *user_default = NULL;
    int r = set_defaults(&c);
    if (r < 0)
        goto fail;
    if (!user_path) {
        _cleanup_free_ char *dir = xdg_dir("XDG_CONFIG_HOME", ".config");
        if (!dir || asprintf(&user_default, "%s/capsule.conf", dir) < 0) {
            r = -ENOMEM;
            goto fail;
        }
        user_path = user_default;
    }
    /* CAPSULE_SYSTEM_CONFIG: another file in place of /etc/capsule.conf, for a user who wants
     * none of the node's settings (a test suite on a node whose capsule uses a node cache). */
    if (!system_path && !(system_path = getenv("CAPSULE_SYSTEM_CONFIG")))
        system_path = "/etc/capsule.conf";
    if ((r = apply_file(system_path, &c, 0, e)) < 0 || (r = apply_file(user_path, &c, 1, e)) < 0)
        goto fail;
    const char *slash = strrchr(user_path, '/');
    c.user_config_dir = slash && slash != user_path
                            ? strndup(user_path, (size_t)(slash - user_path))
                            : strdup(slash ? "/" : ".");
    if (!c.user_config_dir) {
        r = -ENOMEM;
        goto fail;
    }
    *ret = c;
    return 0;
fail:
    if (r == -ENOMEM)
        errmsg_set(e, r, "out of memory");
    capsule_config_done(&c);
    return r;
}

void capsule_config_done(struct capsule_config *c)
{
    free(c->user_config_dir);
    free(c->cache_dir);
    free(c->data_dir);
    strv_free(c->insecure_registries);
    strv_free(c->registry_mirrors);
    free(c->node_cache);
    free(c->fuse_overlayfs);
    free(c->credentials);
    free(c->docker_config);
    free(c->ca_file);
    free(c->driver_root);
    strv_free(c->mounts);
    free(c->loaded_from[0]);
    free(c->loaded_from[1]);
    *c = (struct capsule_config){0};
}

/* The target as Docker cleans it (filepath.Clean): no empty or "." components, ".." taken
 * lexically, so that "/x/../y" is "/y" and not a mount point the runtime cannot create. */
static char *clean_target(const char *path)
{
    char *out = malloc(strlen(path) + 2);
    if (!out)
        return NULL;
    size_t n = 0;
    for (const char *p = path; *p;) {
        size_t len = strcspn(p, "/");
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            while (n > 0 && out[--n] != '/')
                ;
        } else if (len > 0 && !(len == 1 && p[0] == '.')) {
            out[n++] = '/';
            memcpy(out + n, p, len);
            n += len;
        }
        p += len;
        p += strspn(p, "/");
    }
    if (n == 0)
        out[n++] = '/';
    out[n] = '\0';
    return out;
}

/* A tmpfs's options ("size=1G,mode=1777,ro"): "ro" becomes MOUNT_RO, the rest goes to the
 * kernel, which names what it does not take when the container starts. */
static int tmpfs_options(const char *s, const char *opts, char **ret, unsigned *flags,
                         struct errmsg *e)
{
    _cleanup_free_ char *copy = strdup(opts ? opts : ""),
                        *out = malloc(strlen(opts ? opts : "") + 1);
    if (!copy || !out)
        return -ENOMEM;
    out[0] = '\0';
    for (char *save = NULL, *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
        if (strcmp(o, "ro") == 0) {
            *flags |= MOUNT_RO;
            continue;
        }
        if (strcmp(o, "rw") == 0)
            continue;
        if (strpbrk(o, " \t\n"))
            return errmsg_set(e, -EINVAL, "mount '%s': tmpfs option '%s' has blanks", s, o);
        if (*out)
            strcat(out, ",");
        strcat(out, o);
    }
    *ret = TAKE_PTR(out);
    return 0;
}

int capsule_parse_mount(const char *s, struct mount_entry *ret, struct errmsg *e)
{
    _cleanup_free_ char *copy = strdup(s);
    if (!copy)
        return -ENOMEM;
    char *src = copy, *dst = strchr(copy, ':'), *mode = NULL;
    if (!dst)
        return errmsg_set(e, -EINVAL, "mount '%s': expected SRC:DST[:ro|rw] or tmpfs:DST[:OPTIONS]",
                          s);
    *dst++ = '\0';
    bool tmpfs = strcmp(src, "tmpfs") == 0;
    /* A tmpfs's options hold no ':' but may hold '=' and ','; a bind's mode is one word. */
    if ((mode = strchr(dst, ':')))
        *mode++ = '\0';
    if (src[0] != '/' && !tmpfs)
        return errmsg_set(e, -EINVAL, "mount '%s': source '%s' is not an absolute path", s, src);
    if (dst[0] != '/')
        return errmsg_set(e, -EINVAL, "mount '%s': target '%s' is not an absolute path", s, dst);
    unsigned flags = tmpfs ? MOUNT_TMPFS : MOUNT_REC;
    char *source = NULL;
    if (tmpfs) {
        int r = tmpfs_options(s, mode, &source, &flags, e);
        if (r < 0)
            return r;
    } else if (mode && strcmp(mode, "ro") == 0)
        flags |= MOUNT_RO;
    else if (mode && strcmp(mode, "rw") != 0)
        return errmsg_set(e, -EINVAL, "mount '%s': '%s' is not ro or rw", s, mode);
    if (!tmpfs)
        source = strdup(src);
    char *target = clean_target(dst);
    if (!source || !target) {
        free(source);
        free(target);
        return -ENOMEM;
    }
    /* Checked again where the mount is made (a symlink of the image can lead there too); here
     * it fails before anything is pulled. */
    if (strcmp(target, "/") == 0 || strcmp(target, "/proc") == 0) {
        const char *what = strcmp(target, "/") == 0 ? "root" : "/proc";
        free(source);
        free(target);
        return errmsg_set(e, -EINVAL,
                          "mount '%s': the container's %s cannot be replaced; mount it on a "
                          "directory below",
                          s, what);
    }
    *ret = (struct mount_entry){.source = source, .target = target, .flags = flags};
    return 0;
}
