/* capsule's configuration: /etc/capsule.conf ($CAPSULE_SYSTEM_CONFIG names another file in its
 * place), then the user's $XDG_CONFIG_HOME/capsule/capsule.conf
 * (~/.config/capsule/capsule.conf), each key of the later file overriding the earlier one, then
 * command-line flags. INI, section [capsule]:
 *
 *   cache_dir = PATH            image cache (store.h); default $XDG_CACHE_HOME/capsule
 *   data_dir = PATH             named containers; default $XDG_DATA_HOME/capsule
 *   insecure_registries = H H   hosts allowed over plain HTTP (loopback always is)
 *   registry_mirrors = R=URL .. a mirror per registry, tried first by every pull
 *                               (docker.io=http://127.0.0.1:5000 nvcr.io=https://mirror.site;
 *                               image/mirror.h)
 *   credentials = PATH          netrc-style credentials; default ~/.config/capsule/credentials
 *   docker_config = PATH        default ~/.docker/config.json
 *   ca_file = PATH              extra CA bundle (PEM) for registries with a private CA
 *   parallel_downloads = N      1..32, default 4
 *   retries = N                 1..20 extra attempts per request, default 4
 *   driver_root = PATH          default /
 *   rootfs = auto|overlay|copy  default auto
 *   mounts = SRC:DST[:ro] ...   mounted into every container (space-separated)
 *   remap_root = yes|no         default no
 *   max_layer_size = SIZE       the largest layer a pull takes, as its manifest declares it
 *                               (512M, 64G: powers of 1024); 0 = no limit; default 64G
 *   max_unpacked_size = SIZE    the most one layer's files may hold once unpacked; 0 = no
 *                               limit; default 256G
 *   node_cache = SOCKET         the node cache's service (capsule-cached): pulls from
 *                               registries go through it, layers are shared by the node's users;
 *                               default none (every user's own cache)
 *   fuse_overlayfs = PATH       the program that mounts node cache images; default
 *                               fuse-overlayfs from PATH
 *
 * "~/" and "$HOME/" at the start of a path are expanded. Unknown keys are errors. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "lib/errmsg.h"
#include "capsule/runtime/runtime.h"

struct capsule_config {
    char *cache_dir;
    char *data_dir;
    char **insecure_registries; /* NULL-terminated, never NULL */
    char **registry_mirrors;    /* "REGISTRY=URL", NULL-terminated, never NULL */
    char *credentials;
    char *docker_config;
    char *ca_file; /* NULL: the system's CAs only */
    unsigned parallel_downloads;
    unsigned retries;
    char *driver_root;
    enum runtime_rootfs_mode rootfs_mode;
    char **mounts; /* "SRC:DST[:ro]", NULL-terminated, never NULL */
    bool remap_root;
    uint64_t max_layer_size;    /* bytes; 0 = no limit */
    uint64_t max_unpacked_size; /* bytes; 0 = no limit */
    char *node_cache;           /* capsule-cached's socket, NULL: none */
    char *fuse_overlayfs;       /* NULL: fuse-overlayfs from PATH */
    char *loaded_from[2];       /* the files that were read, NULL if not */
    char *user_config_dir;      /* the folder of the user's file, read or not */
};

/* Loads the defaults and the files. system_path/user_path NULL = the standard paths; a missing
 * file is fine, a malformed one is an error naming file:line. Returns 0, -EINVAL, -ENOMEM. */
int capsule_config_load(const char *system_path, const char *user_path, struct capsule_config *ret,
                        struct errmsg *e);
void capsule_config_done(struct capsule_config *c);

/* Parses "SRC:DST[:ro|rw]" (a --mount value or a config mounts entry) into m, or
 * "tmpfs:DST[:OPTIONS]" (a new tmpfs; OPTIONS as mount(8) takes them, "size=1G,mode=1777", plus
 * ro: MOUNT_TMPFS with the options as source). SRC must be an absolute host path, DST an absolute
 * container path other than / and /proc; DST is cleaned as Docker does ("/a/../b/" is "/b").
 * Returns 0 or -EINVAL naming the value. */
int capsule_parse_mount(const char *s, struct mount_entry *ret, struct errmsg *e);
