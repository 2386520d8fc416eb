#include "capsule/containers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/macro.h"
#include "lib/rm-tree.h"
#include "capsule/store/store.h"
#include "lib/strv.h"
#include "lib/strv-json.h"

#define STATE_MAX (1u << 20)

DEFINE_POINTER_CLEANUP(DIR, closedir)

void container_done(struct container *c)
{
    free(c->name);
    free(c->image);
    free(c->config_digest);
    strv_free(c->layers);
    strv_free(c->layer_paths);
    free(c->entrypoint);
    strv_free(c->args);
    strv_free(c->user_env);
    free(c->workdir);
    strv_free(c->mounts);
    free(c->gpus);
    free(c->driver_root);
    *c = (struct container){0};
}

int container_name_check(const char *name, struct errmsg *e)
{
    size_t n = strlen(name);
    bool ok = n >= 1 && n <= 64 && strchr("._-", name[0]) == NULL;
    for (size_t i = 0; ok && i < n; i++) {
        char ch = name[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             strchr("._-", ch);
    }
    if (!ok)
        return errmsg_set(e, -EINVAL,
                          "container name '%s': use 1 to 64 letters, digits, '.', '_' or '-', "
                          "starting with a letter or digit",
                          name);
    return 0;
}

char *container_dir(const char *data_dir, const char *name)
{
    char *p = NULL;
    return asprintf(&p, "%s/containers/%s", data_dir, name) < 0 ? NULL : p;
}

/* dir + "/" + file into path (PATH_MAX bytes); -ENAMETOOLONG rather than a shortened name. */
static int join(char *path, const char *dir, const char *file)
{
    return snprintf(path, PATH_MAX, "%s/%s", dir, file) >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* A NULL-terminated copy of a JSON array of strings; -EBADMSG if it is anything else. */
static int strv_from_json(json_t *a, char ***ret)
{
    _cleanup_strv_free_ char **v = strv_new();
    if (!v)
        return -ENOMEM;
    if (!json_is_array(a))
        return -EBADMSG;
    size_t i;
    json_t *s;
    json_array_foreach(a, i, s)
    {
        if (!json_is_string(s))
            return -EBADMSG;
        if (strv_push(&v, json_string_value(s)) < 0)
            return -ENOMEM;
    }
    *ret = TAKE_PTR(v);
    return 0;
}

static json_t *state_to_json(const struct container *c)
{
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:o, s:s*, s:o, s:o, s:s*, s:o, s:s*, s:s*, s:b, s:b, s:b, "
        "s:b, s:b, s:I}",
        "name", c->name, "image", c->image, "config_digest", c->config_digest, "layers",
        strv_to_json(c->layers), "entrypoint", c->entrypoint, "args", strv_to_json(c->args), "env",
        strv_to_json(c->user_env), "workdir", c->workdir, "mounts", strv_to_json(c->mounts), "gpus",
        c->gpus, "driver_root", c->driver_root, "writable", c->writable, "remap_root",
        c->remap_root, "pid_ns", c->pid_ns, "no_home", c->no_home, "ephemeral", c->ephemeral,
        "created_at", (json_int_t)c->created_at);
    if (j && c->layer_paths &&
        json_object_set_new(j, "layer_paths", strv_to_json(c->layer_paths)) < 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static int dup_opt(const char *s, char **ret)
{
    *ret = s ? strdup(s) : NULL;
    return s && !*ret ? -ENOMEM : 0;
}

static int state_from_json(json_t *j, struct container *c)
{
    const char *name, *image, *digest, *entrypoint = NULL, *workdir = NULL, *gpus = NULL,
                                       *driver_root = NULL;
    json_t *layers, *args, *env, *mounts;
    json_int_t created;
    int writable, remap_root, pid_ns, no_home, ephemeral;
    if (json_unpack(j,
                    "{s:s, s:s, s:s, s:o, s?s, s:o, s:o, s?s, s:o, s?s, s?s, s:b, s:b, s:b, "
                    "s:b, s:b, s:I}",
                    "name", &name, "image", &image, "config_digest", &digest, "layers", &layers,
                    "entrypoint", &entrypoint, "args", &args, "env", &env, "workdir", &workdir,
                    "mounts", &mounts, "gpus", &gpus, "driver_root", &driver_root, "writable",
                    &writable, "remap_root", &remap_root, "pid_ns", &pid_ns, "no_home", &no_home,
                    "ephemeral", &ephemeral, "created_at", &created) < 0)
        return -EBADMSG;
    int r;
    if ((r = dup_opt(name, &c->name)) < 0 || (r = dup_opt(image, &c->image)) < 0 ||
        (r = dup_opt(digest, &c->config_digest)) < 0 ||
        (r = dup_opt(entrypoint, &c->entrypoint)) < 0 || (r = dup_opt(workdir, &c->workdir)) < 0 ||
        (r = dup_opt(gpus, &c->gpus)) < 0 || (r = dup_opt(driver_root, &c->driver_root)) < 0 ||
        (r = strv_from_json(layers, &c->layers)) < 0 || (r = strv_from_json(args, &c->args)) < 0 ||
        (r = strv_from_json(env, &c->user_env)) < 0 || (r = strv_from_json(mounts, &c->mounts)) < 0)
        return r;
    json_t *paths = json_object_get(j, "layer_paths");
    if (paths && ((r = strv_from_json(paths, &c->layer_paths)) < 0 ||
                  strv_length(c->layer_paths) != strv_length(c->layers)))
        return r < 0 ? r : -EBADMSG;
    c->writable = writable;
    c->remap_root = remap_root;
    c->pid_ns = pid_ns;
    c->no_home = no_home;
    c->ephemeral = ephemeral;
    c->created_at = created;
    return 0;
}

static int mkdir_p(const char *path, mode_t mode)
{
    _cleanup_free_ char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, mode) < 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    return mkdir(p, mode) < 0 && errno != EEXIST ? -errno : 0;
}

int containers_mkdir_p(const char *path, struct errmsg *e)
{
    int r = mkdir_p(path, 0700);
    return r < 0 ? errmsg_set(e, r, "cannot create %s: %s", path, strerror(-r)) : 0;
}

int containers_dir_ensure(const char *data_dir, struct errmsg *e)
{
    _cleanup_free_ char *dir = NULL;
    if (asprintf(&dir, "%s/containers", data_dir) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int r = mkdir_p(dir, 0700);
    return r < 0 ? errmsg_set(e, r, "cannot create %s: %s", dir, strerror(-r)) : 0;
}

/* Writes the new container's files into dir (a fresh .new-* directory); with ret_lock_fd, also
 * its lock file, locked, so the container is never visible unlocked to a sweep. */
static int write_new_dir(const char *dir, const struct container *c, int *ret_lock_fd,
                         struct errmsg *e)
{
    _cleanup_(json_decrefp) json_t *j = state_to_json(c);
    if (!j)
        return errmsg_set(e, -ENOMEM, "out of memory");
    _cleanup_free_ char *state = NULL;
    if (asprintf(&state, "%s/state.json", dir) < 0)
        return -ENOMEM;
    if (json_dump_file(j, state, JSON_INDENT(2)) < 0)
        return errmsg_set(e, -EIO, "cannot write %s", state);
    if (c->writable && !c->ephemeral) {
        char sub[PATH_MAX];
        if (join(sub, dir, "upper") < 0)
            return errmsg_set(e, -ENAMETOOLONG, "%s: path too long", dir);
        if (mkdir(sub, 0755) < 0)
            return errmsg_set(e, negative_errno(), "mkdir %s: %m", sub);
        if (join(sub, dir, "work") < 0)
            return errmsg_set(e, -ENAMETOOLONG, "%s: path too long", dir);
        if (mkdir(sub, 0700) < 0)
            return errmsg_set(e, negative_errno(), "mkdir %s: %m", sub);
    }
    if (ret_lock_fd) {
        char lock[PATH_MAX];
        if (join(lock, dir, "lock") < 0)
            return errmsg_set(e, -ENAMETOOLONG, "%s: path too long", dir);
        int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0 || flock(fd, LOCK_EX) < 0) {
            closep(&fd);
            return errmsg_set(e, negative_errno(), "cannot lock %s: %m", lock);
        }
        *ret_lock_fd = fd;
    }
    return 0;
}

int container_create(const char *data_dir, const struct container *c, int *ret_lock_fd,
                     struct errmsg *e)
{
    _cleanup_free_ char *parent = NULL, *tmp = NULL, *final = container_dir(data_dir, c->name);
    if (!final || asprintf(&parent, "%s/containers", data_dir) < 0 ||
        asprintf(&tmp, "%s/.new-%s-XXXXXX", parent, c->name) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int r = mkdir_p(parent, 0700);
    if (r < 0)
        return errmsg_set(e, r, "cannot create %s: %s", parent, strerror(-r));
    if (!mkdtemp(tmp))
        return errmsg_set(e, negative_errno(), "cannot create a directory in %s: %m", parent);
    _cleanup_close_ int lock_fd = -1;
    r = write_new_dir(tmp, c, ret_lock_fd ? &lock_fd : NULL, e);
    /* rename(2) of a directory onto an existing non-empty one fails: the name stays taken by
     * whoever got there first. */
    if (r >= 0 && rename(tmp, final) < 0) {
        r = negative_errno();
        if (r == -EEXIST || r == -ENOTEMPTY)
            r = errmsg_set(e, -EEXIST, "container '%s' already exists", c->name);
        else
            r = errmsg_set(e, r, "cannot create %s: %s", final, strerror(-r));
    }
    if (r < 0) {
        rm_tree(tmp);
        return r;
    }
    if (ret_lock_fd)
        *ret_lock_fd = TAKE_FD(lock_fd);
    return 0;
}

static int read_int_file(const char *dir, const char *file, long *ret)
{
    char path[PATH_MAX], buf[32];
    if (join(path, dir, file) < 0)
        return -ENAMETOOLONG;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return -EBADMSG;
    buf[n] = '\0';
    char *end;
    *ret = strtol(buf, &end, 10);
    return end == buf ? -EBADMSG : 0;
}

static int write_int_file(const char *dir, const char *file, long v)
{
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    if (join(path, dir, file) < 0)
        return -ENAMETOOLONG;
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    _cleanup_fclose_ FILE *f = fopen(tmp, "we");
    if (!f)
        return -errno;
    fprintf(f, "%ld\n", v);
    if (fflush(f) != 0)
        return -EIO;
    return rename(tmp, path) < 0 ? -errno : 0;
}

/* True if some process holds the container's lock. */
static bool is_locked(const char *dir)
{
    char path[PATH_MAX];
    if (join(path, dir, "lock") < 0)
        return false;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
}

static int load_dir(const char *dir, struct container *ret, struct errmsg *e)
{
    char path[PATH_MAX];
    if (join(path, dir, "state.json") < 0)
        return errmsg_set(e, -ENAMETOOLONG, "%s: path too long", dir);
    json_error_t je;
    _cleanup_(json_decrefp) json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return errno == ENOENT ? -ENOENT : errmsg_set(e, -EBADMSG, "%s: %s", path, je.text);
    struct container c = {.last_exit = -1};
    int r = state_from_json(j, &c);
    if (r < 0) {
        container_done(&c);
        return errmsg_set(e, r, "%s: %s", path, r == -ENOMEM ? "out of memory" : "damaged");
    }
    long v;
    c.running = is_locked(dir);
    if (c.running && read_int_file(dir, "pid", &v) >= 0)
        c.pid = (pid_t)v;
    if (read_int_file(dir, "exit", &v) >= 0)
        c.last_exit = (int)v;
    *ret = c;
    return 0;
}

int container_load(const char *data_dir, const char *name, struct container *ret, struct errmsg *e)
{
    int r = container_name_check(name, e);
    if (r < 0)
        return r;
    _cleanup_free_ char *dir = container_dir(data_dir, name);
    if (!dir)
        return -ENOMEM;
    r = load_dir(dir, ret, e);
    if (r == -ENOENT)
        return errmsg_set(e, r, "no container '%s'", name);
    return r;
}

static int cmp_container(const void *a, const void *b)
{
    return strcmp(((const struct container *)a)->name, ((const struct container *)b)->name);
}

int container_list(const char *data_dir, struct container **ret, size_t *ret_n, struct errmsg *e)
{
    containers_sweep(data_dir);
    char parent[PATH_MAX];
    if (join(parent, data_dir, "containers") < 0)
        return errmsg_set(e, -ENAMETOOLONG, "%s: path too long", data_dir);
    struct container *list = NULL;
    size_t n = 0;
    _cleanup_(closedirp) DIR *d = opendir(parent);
    for (struct dirent *de; d && (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        struct container *nl = realloc(list, (n + 1) * sizeof(*list));
        if (!nl)
            break;
        list = nl;
        char dir[PATH_MAX];
        if (join(dir, parent, de->d_name) < 0)
            continue;
        /* A damaged entry is skipped here; `capsule rm` can still remove it by name. */
        if (load_dir(dir, &list[n], e) >= 0)
            n++;
    }
    if (list)
        qsort(list, n, sizeof(*list), cmp_container);
    *ret = list;
    *ret_n = n;
    return 0;
}

int container_lock(const char *data_dir, const char *name, int *ret_fd, struct errmsg *e)
{
    _cleanup_free_ char *dir = container_dir(data_dir, name);
    char path[PATH_MAX];
    if (!dir)
        return -ENOMEM;
    if (join(path, dir, "lock") < 0)
        return errmsg_set(e, -ENAMETOOLONG, "%s: path too long", dir);
    _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "cannot open %s: %m", path);
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        long pid = 0;
        read_int_file(dir, "pid", &pid);
        return errmsg_set(e, -EBUSY, "container '%s' is already running (pid %ld)", name, pid);
    }
    /* The pid of an earlier run is long gone, and maybe another process's now: until this run
     * records its own, rm -f must have nothing to kill and exec nothing to enter. */
    if (join(path, dir, "pid") == 0 && unlink(path) < 0 && errno != ENOENT)
        return errmsg_set(e, negative_errno(), "cannot remove %s/pid: %m", dir);
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int container_set_pid(const char *data_dir, const char *name, pid_t pid)
{
    _cleanup_free_ char *dir = container_dir(data_dir, name);
    return dir ? write_int_file(dir, "pid", pid) : -ENOMEM;
}

int container_set_exit(const char *data_dir, const char *name, int status)
{
    _cleanup_free_ char *dir = container_dir(data_dir, name);
    return dir ? write_int_file(dir, "exit", status) : -ENOMEM;
}

/* The log of a `run -d` goes with its container, or alone once the run has ended. */
static int remove_log(const char *data_dir, const char *name, struct errmsg *e)
{
    _cleanup_free_ char *path = container_log_path(data_dir, name);
    if (!path)
        return errmsg_set(e, -ENOMEM, "out of memory");
    if (unlink(path) == 0)
        return 0;
    if (errno == ENOENT)
        return errmsg_set(e, -ENOENT, "no container '%s'", name);
    return errmsg_set(e, negative_errno(), "cannot remove %s: %m", path);
}

int container_remove(const char *data_dir, const char *name, struct errmsg *e)
{
    int r = container_name_check(name, e);
    if (r < 0)
        return r;
    _cleanup_free_ char *dir = container_dir(data_dir, name), *doomed = NULL;
    if (!dir || asprintf(&doomed, "%s/containers/.rm-%s-%ld", data_dir, name, (long)getpid()) < 0)
        return -ENOMEM;
    int lock_fd = -1;
    r = container_lock(data_dir, name, &lock_fd, e);
    if (r == -EBUSY)
        return r;
    if (r < 0 && access(dir, F_OK) < 0)
        return remove_log(data_dir, name, e);
    /* Rename first, under the lock: the name is free at once and a half-removed tree is
     * recognisable (.rm-*) for the sweep to finish. */
    /* The log goes first, while the name is still taken: a new run of the name, possible once
     * the rename below frees it, must not lose the log it opens. */
    (void)remove_log(data_dir, name, NULL);
    r = rename(dir, doomed) < 0 ? negative_errno() : 0;
    closep(&lock_fd);
    if (r < 0)
        return r == -ENOENT ? errmsg_set(e, r, "no container '%s'", name)
                            : errmsg_set(e, r, "cannot remove %s: %s", dir, strerror(-r));
    return rm_tree(doomed);
}

/* An ephemeral container or an unfinished .new-/.rm- directory nobody works on. */
static bool is_leftover(const char *dir, const char *entry)
{
    if (strncmp(entry, ".new-", 5) == 0 || strncmp(entry, ".rm-", 4) == 0) {
        struct stat st;
        /* A create in progress is a few milliseconds old; give it a minute. */
        return stat(dir, &st) == 0 && time(NULL) - st.st_mtime > 60;
    }
    if (entry[0] == '.' || is_locked(dir))
        return false;
    struct container c = {0};
    bool ephemeral = load_dir(dir, &c, NULL) >= 0 && c.ephemeral;
    container_done(&c);
    return ephemeral;
}

void containers_sweep(const char *data_dir)
{
    char parent[PATH_MAX];
    if (join(parent, data_dir, "containers") < 0)
        return;
    _cleanup_(closedirp) DIR *d = opendir(parent);
    for (struct dirent *de; d && (de = readdir(d));) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char dir[PATH_MAX];
        if (join(dir, parent, de->d_name) < 0)
            continue;
        if (is_leftover(dir, de->d_name) && rm_tree(dir) < 0)
            log_debug("cannot remove leftover %s", dir);
    }
}

int containers_digests_in_use(const char *data_dir, char ***ret, struct errmsg *e)
{
    struct container *list = NULL;
    size_t n = 0;
    int r = container_list(data_dir, &list, &n, e);
    _cleanup_strv_free_ char **keep = strv_new();
    if (!keep)
        r = -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; r >= 0 && list[i].layers[j]; j++)
            if (!strv_contains(keep, list[i].layers[j]))
                r = strv_push(&keep, list[i].layers[j]);
        /* A start reads the image config again, so its blob must stay too. */
        if (r >= 0 && !strv_contains(keep, list[i].config_digest))
            r = strv_push(&keep, list[i].config_digest);
        container_done(&list[i]);
    }
    free(list);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(keep);
    return 0;
}

char *container_log_path(const char *data_dir, const char *name)
{
    char *p = NULL;
    return asprintf(&p, "%s/logs/%s.log", data_dir, name) < 0 ? NULL : p;
}

int container_log_open(const char *data_dir, const char *name, struct errmsg *e)
{
    _cleanup_free_ char *dir = NULL, *path = container_log_path(data_dir, name);
    if (!path || asprintf(&dir, "%s/logs", data_dir) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int r = mkdir_p(dir, 0700);
    if (r < 0)
        return errmsg_set(e, r, "cannot create %s: %s", dir, strerror(-r));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "cannot create %s: %m", path);
    return fd;
}
