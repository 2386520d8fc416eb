/* Finding the NVIDIA driver's files under a driver root (see driver-files.h). */
#include "capsule/gpu/driver-files.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/fileio.h"
#include "lib/macro.h"
#include "lib/process.h"
#include "lib/strv.h"

/* As the kernel's own limit on links followed in one lookup. */
#define RESOLVE_LINKS_MAX 40
/* A real ld cache prints a few hundred KiB; more means something else is talking. */
#define LDCACHE_OUTPUT_MAX (64u << 20)
/* /proc/driver/nvidia capability files are a few lines. */
#define NVCAPS_FILE_MAX 4096
/* Device minors are 20 bits on Linux. */
#define MINOR_LIMIT (1u << 20)

const unsigned driver_caps_ordered[6] = {
    DRIVER_CAP_UTILITY,  DRIVER_CAP_COMPUTE, DRIVER_CAP_VIDEO,
    DRIVER_CAP_GRAPHICS, DRIVER_CAP_DISPLAY, DRIVER_CAP_NGX,
};

static const char *const cap_names[] = {"utility",  "compute", "video",
                                        "graphics", "display", "ngx"};

/* The lists libnvidia-container uses for each capability (its nvc_info.c), by library stem. */
static const char *const utility_libs[] = {"libnvidia-ml", "libnvidia-cfg", NULL};
static const char *const compute_libs[] = {
    "libcuda",
    "libcudadebugger",
    "libnvidia-opencl",
    "libnvidia-ptxjitcompiler",
    "libnvidia-fatbinaryloader",
    "libnvidia-allocator",
    "libnvidia-compiler",
    "libnvidia-nvvm",
    "libnvidia-gpucomp",
    NULL,
};
static const char *const video_libs[] = {"libvdpau_nvidia", "libnvidia-encode",
                                         "libnvidia-opticalflow", "libnvcuvid", NULL};
static const char *const graphics_libs[] = {
    "libnvidia-eglcore",   "libnvidia-glcore",
    "libnvidia-tls",       "libnvidia-glsi",
    "libnvidia-fbc",       "libnvidia-ifr",
    "libnvidia-rtcore",    "libnvoptix",
    "libGLX_nvidia",       "libEGL_nvidia",
    "libGLESv2_nvidia",    "libGLESv1_CM_nvidia",
    "libnvidia-glvkspirv", NULL,
};
static const char *const utility_bins[] = {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
                                           NULL};
static const char *const compute_bins[] = {"nvidia-cuda-mps-control", "nvidia-cuda-mps-server",
                                           NULL};
static const char *const no_files[] = {NULL};

/* Where drivers put their libraries: NVIDIA's container images and the GPU machine
 * (/usr/local/nvidia), Debian/Ubuntu, Debian's packaged driver, Red Hat, the rest. */
static const char *const lib_dirs[] = {
    "/usr/local/nvidia/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu/nvidia/current",
    "/usr/lib64",
    "/usr/lib",
    "/lib/x86_64-linux-gnu",
    "/lib64",
};
static const char *const bin_dirs[] = {
    "/usr/local/nvidia/bin", "/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin",
};

static int cap_slot(unsigned cap)
{
    for (size_t i = 0; i < ELEMENTSOF(driver_caps_ordered); i++)
        if (driver_caps_ordered[i] == cap)
            return (int)i;
    return -1;
}

const char *driver_cap_name(unsigned cap)
{
    int i = cap_slot(cap);
    return i < 0 ? "?" : cap_names[i];
}

const char *const *driver_cap_libraries(unsigned cap)
{
    switch (cap) {
    case DRIVER_CAP_UTILITY:
        return utility_libs;
    case DRIVER_CAP_COMPUTE:
        return compute_libs;
    case DRIVER_CAP_VIDEO:
        return video_libs;
    case DRIVER_CAP_GRAPHICS:
        return graphics_libs;
    default:
        return no_files;
    }
}

const char *const *driver_cap_binaries(unsigned cap)
{
    switch (cap) {
    case DRIVER_CAP_UTILITY:
        return utility_bins;
    case DRIVER_CAP_COMPUTE:
        return compute_bins;
    default:
        return no_files;
    }
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n';
}

int driver_caps_parse(const char *value, unsigned *ret_caps, struct errmsg *e)
{
    unsigned caps = 0;
    const char *p = value ? value : "";
    for (;;) {
        while (is_blank(*p))
            p++;
        size_t n = strcspn(p, ",");
        size_t len = n;
        while (len > 0 && is_blank(p[len - 1]))
            len--;
        if (len == 3 && memcmp(p, "all", 3) == 0) {
            caps |= DRIVER_CAP_ALL;
        } else if (len > 0) {
            int found = -1;
            for (size_t i = 0; i < ELEMENTSOF(cap_names); i++)
                if (strlen(cap_names[i]) == len && memcmp(p, cap_names[i], len) == 0)
                    found = (int)i;
            if (found < 0)
                return errmsg_set(e, -EINVAL,
                                  "unknown driver capability '%.*s' (known: all, utility, "
                                  "compute, video, graphics, display, ngx)",
                                  (int)(len > 64 ? 64 : len), p);
            caps |= driver_caps_ordered[found];
        }
        if (!p[n])
            break;
        p += n + 1;
    }
    *ret_caps = caps;
    return 0;
}

char *driver_root_prefix(const char *root)
{
    if (!root)
        root = "";
    size_t len = strlen(root);
    while (len > 0 && root[len - 1] == '/')
        len--;
    return strndup(root, len);
}

static char *host_path(const char *prefix, const char *path)
{
    char *s;
    if (asprintf(&s, "%s%s", prefix, path) < 0)
        return NULL;
    return s;
}

static int read_link(const char *path, char **ret)
{
    char buf[PATH_MAX];
    ssize_t n = readlink(path, buf, sizeof(buf));
    if (n < 0)
        return negative_errno();
    if ((size_t)n >= sizeof(buf))
        return -ENAMETOOLONG;
    char *s = strndup(buf, (size_t)n);
    if (!s)
        return -ENOMEM;
    *ret = s;
    return 0;
}

/* Replaces *todo by "target/rest": the rest of the path still to walk after a link. */
static int splice_link(char **todo, const char *target, const char *rest)
{
    char *s;
    if (asprintf(&s, "%s%s%s", target, *rest ? "/" : "", rest) < 0)
        return -ENOMEM;
    free(*todo);
    *todo = s;
    return 0;
}

int driver_resolve(const char *prefix, const char *path, char **ret)
{
    _cleanup_free_ char *todo = strdup(path);
    _cleanup_free_ char *done = strdup(""); /* "" is the root itself */
    if (!todo || !done)
        return -ENOMEM;
    unsigned links = 0;
    size_t pos = 0;
    for (;;) {
        while (todo[pos] == '/')
            pos++;
        if (!todo[pos])
            break;
        const char *comp = todo + pos;
        size_t n = strcspn(comp, "/");
        pos += n;
        if (n == 1 && comp[0] == '.')
            continue;
        if (n == 2 && comp[0] == '.' && comp[1] == '.') {
            char *slash = strrchr(done, '/');
            if (slash)
                *slash = '\0';
            continue;
        }
        _cleanup_free_ char *cand = NULL;
        if (asprintf(&cand, "%s/%.*s", done, (int)n, comp) < 0)
            return -ENOMEM;
        _cleanup_free_ char *host = host_path(prefix, cand);
        if (!host)
            return -ENOMEM;
        struct stat st;
        if (lstat(host, &st) < 0)
            return negative_errno();
        if (S_ISLNK(st.st_mode)) {
            if (++links > RESOLVE_LINKS_MAX)
                return -ELOOP;
            _cleanup_free_ char *target = NULL;
            int r = read_link(host, &target);
            if (r < 0)
                return r;
            if (target[0] == '/')
                done[0] = '\0';
            r = splice_link(&todo, target, todo + pos);
            if (r < 0)
                return r;
            pos = 0;
            continue;
        }
        if (todo[pos + strspn(todo + pos, "/")] && !S_ISDIR(st.st_mode))
            return -ENOTDIR;
        free(done);
        done = TAKE_PTR(cand);
    }
    char *s = strdup(done[0] ? done : "/");
    if (!s)
        return -ENOMEM;
    *ret = s;
    return 0;
}

bool driver_path_exists(const char *prefix, const char *path)
{
    _cleanup_free_ char *host = host_path(prefix, path);
    struct stat st;
    return host && lstat(host, &st) == 0;
}

void ldcache_free(struct ldcache_entry *entries, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(entries[i].name);
        free(entries[i].path);
    }
    free(entries);
}

/* One line "\tNAME (FLAGS) => /PATH" without its newline; false if it has another form or is
 * not an x86-64 entry. */
static bool ldcache_split(const char *line, size_t len, const char **name, size_t *name_len,
                          const char **path, size_t *path_len)
{
    if (len < 2 || line[0] != '\t')
        return false;
    line++, len--;
    const char *open = memchr(line, '(', len);
    if (!open || open == line || open[-1] != ' ')
        return false;
    const char *end = line + len;
    const char *close = memchr(open, ')', (size_t)(end - open));
    if (!close || end - close < 6 || memcmp(close, ") => /", 6) != 0)
        return false;
    /* The flags start with the ABI ("libc6,x86-64"); "libc6" alone is a 32-bit library. */
    size_t flags_len = (size_t)(close - open - 1);
    const char *flags = open + 1;
    bool x86_64 = false;
    for (size_t i = 0; i + 6 <= flags_len; i++)
        if (memcmp(flags + i, "x86-64", 6) == 0)
            x86_64 = true;
    if (!x86_64)
        return false;
    *name = line;
    *name_len = (size_t)(open - 1 - line);
    *path = close + 5;
    *path_len = (size_t)(end - *path);
    if (*name_len == 0 || memchr(*name, '/', *name_len) || memchr(*name, ' ', *name_len) ||
        memchr(*name, '\0', *name_len) || memchr(*path, '\0', *path_len))
        return false;
    return true;
}

int ldcache_parse(const char *text, size_t len, struct ldcache_entry **ret, size_t *ret_n,
                  struct errmsg *e)
{
    struct ldcache_entry *v = NULL;
    size_t n = 0, cap = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = nl ? nl : end;
        const char *name, *path;
        size_t name_len, path_len;
        if (ldcache_split(p, (size_t)(line_end - p), &name, &name_len, &path, &path_len)) {
            if (n == cap) {
                size_t ncap = cap ? 2 * cap : 64;
                struct ldcache_entry *nv = realloc(v, ncap * sizeof(*v));
                if (!nv)
                    goto oom;
                v = nv;
                cap = ncap;
            }
            v[n].name = strndup(name, name_len);
            v[n].path = strndup(path, path_len);
            n++;
            if (!v[n - 1].name || !v[n - 1].path)
                goto oom;
        }
        p = line_end + 1;
    }
    *ret = v;
    *ret_n = n;
    return 0;
oom:
    ldcache_free(v, n);
    return errmsg_set(e, -ENOMEM, "out of memory reading the ld cache");
}

static const char *find_ldconfig(void)
{
    static const char *const candidates[] = {"/sbin/ldconfig", "/usr/sbin/ldconfig",
                                             "/sbin/ldconfig.real", "/usr/sbin/ldconfig.real"};
    for (size_t i = 0; i < ELEMENTSOF(candidates); i++)
        if (access(candidates[i], X_OK) == 0)
            return candidates[i];
    return NULL;
}

/* Runs argv with stdout into a buffer; returns the wait status in *ret_status. */
static int run_capture(char *const *argv, char **ret_out, size_t *ret_len, int *ret_status)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return negative_errno();
    _cleanup_close_ int rfd = pipefd[0];
    _cleanup_close_ int wfd = pipefd[1];
    pid_t pid = -1;
    char *const env[] = {"LC_ALL=C", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    struct process_opts o = {.in = PROCESS_NULL, .out = wfd, .err = PROCESS_NULL, .envp = env};
    int r = process_spawn(argv[0], argv, &o, &pid);
    if (r < 0)
        return r;
    closep(&wfd);
    wfd = -1;
    _cleanup_free_ char *out = NULL;
    size_t len = 0;
    int rr = fd_read_all(rfd, LDCACHE_OUTPUT_MAX, &out, &len);
    closep(&rfd);
    rfd = -1;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        /* A caller that ignores SIGCHLD has its children reaped for it: the output says
         * enough. */
        if (errno == ECHILD)
            break;
        if (errno != EINTR)
            return negative_errno();
    }
    if (rr < 0)
        return rr;
    *ret_out = TAKE_PTR(out);
    *ret_len = len;
    *ret_status = status;
    return 0;
}

int ldcache_load(const char *prefix, struct ldcache_entry **ret, size_t *ret_n, struct errmsg *e)
{
    _cleanup_free_ char *cache = host_path(prefix, "/etc/ld.so.cache");
    if (!cache)
        return -ENOMEM;
    if (access(cache, F_OK) < 0) {
        log_debug("%s: no ld cache, searching the library directories only", cache);
        *ret = NULL;
        *ret_n = 0;
        return 0;
    }
    const char *ldconfig = find_ldconfig();
    if (!ldconfig)
        return errmsg_set(e, -ENOENT, "cannot read %s: no ldconfig in /sbin or /usr/sbin", cache);
    char *const argv[] = {(char *)ldconfig, "-p", "-C", cache, NULL};
    _cleanup_free_ char *out = NULL;
    size_t len;
    int status;
    int r = run_capture(argv, &out, &len, &status);
    if (r < 0)
        return errmsg_set(e, r, "running %s -p -C %s: %s", ldconfig, cache, strerror(-r));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return errmsg_set(e, -EIO, "%s -p -C %s failed (status %d): is it an ld cache?", ldconfig,
                          cache, status);
    return ldcache_parse(out, len, ret, ret_n, e);
}

enum driver_lib_match driver_lib_classify(const char *name, const char *stem, const char *version)
{
    size_t sl = strlen(stem);
    if (strncmp(name, stem, sl) != 0 || strncmp(name + sl, ".so", 3) != 0)
        return DRIVER_LIB_OTHER;
    const char *suffix = name + sl + 3;
    if (!*suffix)
        return DRIVER_LIB_UNVERSIONED;
    if (suffix[0] != '.' || !suffix[1])
        return DRIVER_LIB_OTHER;
    suffix++;
    if (version && *version && strcmp(suffix, version) == 0)
        return DRIVER_LIB_VERSIONED;
    /* One plain number is an ABI version ("libnvidia-opticalflow.so.1"); anything with a dot
     * ("470.256.02") is some driver's version, and not ours. */
    if (strspn(suffix, "0123456789") == strlen(suffix))
        return DRIVER_LIB_UNVERSIONED;
    return DRIVER_LIB_OTHER;
}

/* Whether name is STEM.so or STEM.so.SOMETHING. */
static bool name_has_stem(const char *name, const char *stem)
{
    size_t sl = strlen(stem);
    return strncmp(name, stem, sl) == 0 && strncmp(name + sl, ".so", 3) == 0 &&
           (name[sl + 3] == '\0' || name[sl + 3] == '.');
}

/* A 64-bit little-endian x86 ELF file (a library of the right architecture). */
static bool is_elf_x86_64(const char *path)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return false;
    unsigned char h[20];
    if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h))
        return false;
    return memcmp(h, ELFMAG, SELFMAG) == 0 && h[EI_CLASS] == ELFCLASS64 &&
           h[EI_DATA] == ELFDATA2LSB && (h[18] | h[19] << 8) == EM_X86_64;
}

/* A file found for a library stem, by the name it was found under. */
struct candidate {
    size_t stem;
    char *link; /* the name in the ld cache or directory ("libcuda.so.1") */
    char *real; /* in-root path of the file it names */
};

struct stem_ref {
    const char *stem;
    unsigned cap;
};

struct finder {
    const char *prefix;
    struct stem_ref stems[64];
    size_t n_stems;
    struct candidate *v;
    size_t n, cap;
};

static void finder_done(struct finder *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->v[i].link);
        free(f->v[i].real);
    }
    free(f->v);
}

static void finder_add_stems(struct finder *f, unsigned caps)
{
    for (size_t i = 0; i < ELEMENTSOF(driver_caps_ordered); i++) {
        unsigned cap = driver_caps_ordered[i];
        if (!(caps & cap))
            continue;
        for (const char *const *s = driver_cap_libraries(cap); *s; s++)
            if (f->n_stems < ELEMENTSOF(f->stems))
                f->stems[f->n_stems++] = (struct stem_ref){*s, cap};
    }
}

/* Records that path (in-root, maybe a link) was found under the name link for stem. A dangling
 * link is skipped: it is no library. */
static int finder_add(struct finder *f, size_t stem, const char *link, const char *path)
{
    _cleanup_free_ char *real = NULL;
    int r = driver_resolve(f->prefix, path, &real);
    if (r == -ENOMEM)
        return r;
    if (r < 0) {
        log_debug("%s%s: %s, skipped", f->prefix, path, strerror(-r));
        return 0;
    }
    if (f->n == f->cap) {
        size_t ncap = f->cap ? 2 * f->cap : 32;
        struct candidate *nv = realloc(f->v, ncap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        f->v = nv;
        f->cap = ncap;
    }
    char *l = strdup(link);
    if (!l)
        return -ENOMEM;
    f->v[f->n++] = (struct candidate){stem, l, TAKE_PTR(real)};
    return 0;
}

static int finder_scan_ldcache(struct finder *f, const struct ldcache_entry *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t s = 0; s < f->n_stems; s++)
            if (name_has_stem(c[i].name, f->stems[s].stem)) {
                int r = finder_add(f, s, c[i].name, c[i].path);
                if (r < 0)
                    return r;
            }
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in one directory that belong to a stem, sorted so that results do not depend on
 * the directory's order. */
static int finder_list_dir(struct finder *f, const char *dir, char ***ret)
{
    _cleanup_free_ char *host = host_path(f->prefix, dir);
    if (!host)
        return -ENOMEM;
    DIR *d = opendir(host);
    if (!d)
        return 0;
    _cleanup_strv_free_ char **names = strv_new();
    int r = names ? 0 : -ENOMEM;
    struct dirent *de;
    while (r == 0 && (de = readdir(d)))
        for (size_t s = 0; s < f->n_stems; s++)
            if (name_has_stem(de->d_name, f->stems[s].stem)) {
                r = strv_push(&names, de->d_name);
                break;
            }
    closedir(d);
    if (r < 0)
        return r;
    qsort(names, strv_length(names), sizeof(char *), cmp_str);
    *ret = TAKE_PTR(names);
    return 0;
}

static int finder_scan_dir(struct finder *f, const char *dir)
{
    _cleanup_strv_free_ char **names = NULL;
    int r = finder_list_dir(f, dir, &names);
    if (r < 0 || !names)
        return r;
    for (char **n = names; *n; n++)
        for (size_t s = 0; s < f->n_stems; s++)
            if (name_has_stem(*n, f->stems[s].stem)) {
                _cleanup_free_ char *path = NULL;
                if (asprintf(&path, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, *n) < 0)
                    return -ENOMEM;
                r = finder_add(f, s, *n, path);
                if (r < 0)
                    return r;
            }
    return 0;
}

/* The library directories, each once even where one is a link to another (/lib64 on merged-usr
 * systems). */
static int finder_scan_dirs(struct finder *f)
{
    _cleanup_strv_free_ char **seen = strv_new();
    if (!seen)
        return -ENOMEM;
    for (size_t i = 0; i < ELEMENTSOF(lib_dirs); i++) {
        _cleanup_free_ char *dir = NULL;
        int r = driver_resolve(f->prefix, lib_dirs[i], &dir);
        if (r == -ENOMEM)
            return r;
        if (r < 0 || strv_contains(seen, dir))
            continue;
        r = strv_push(&seen, dir);
        if (r < 0)
            return r;
        r = finder_scan_dir(f, dir);
        if (r < 0)
            return r;
    }
    return 0;
}

static int finder_run(struct finder *f, const struct ldcache_entry *cache, size_t n_cache)
{
    int r = finder_scan_ldcache(f, cache, n_cache);
    if (r < 0)
        return r;
    return finder_scan_dirs(f);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The name the loader asks for that leads to real: a link name with a version ("libcuda.so.1"),
 * not the development link ("libcuda.so") nor the file's own name. */
static const char *finder_soname(const struct finder *f, const char *real)
{
    const char *name = base_name(real);
    for (size_t i = 0; i < f->n; i++) {
        const struct candidate *c = &f->v[i];
        if (strcmp(c->real, real) == 0 && strcmp(c->link, name) != 0 && strstr(c->link, ".so."))
            return c->link;
    }
    return NULL;
}

static bool lib_listed(const struct driver_files *r, const char *name)
{
    for (size_t i = 0; i < r->n_libs; i++)
        if (strcmp(r->libs[i].name, name) == 0)
            return true;
    return false;
}

static int files_add_lib(struct driver_files *r, const struct finder *f, const char *real,
                         unsigned cap)
{
    struct driver_lib *nv = realloc(r->libs, (r->n_libs + 1) * sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    r->libs = nv;
    const char *soname = finder_soname(f, real);
    struct driver_lib *l = &r->libs[r->n_libs];
    *l = (struct driver_lib){strdup(real), strdup(base_name(real)), soname ? strdup(soname) : NULL,
                             cap};
    r->n_libs++;
    if (!l->path || !l->name || (soname && !l->soname))
        return -ENOMEM;
    return 0;
}

/* Picks the files of one stem: those with the driver's version, else those with none. */
static int finder_choose(const struct finder *f, size_t stem, const char *version,
                         struct driver_files *r)
{
    const char *s = f->stems[stem].stem;
    enum driver_lib_match want = DRIVER_LIB_UNVERSIONED;
    for (size_t i = 0; i < f->n; i++)
        if (f->v[i].stem == stem &&
            driver_lib_classify(base_name(f->v[i].real), s, version) == DRIVER_LIB_VERSIONED)
            want = DRIVER_LIB_VERSIONED;
    for (size_t i = 0; i < f->n; i++) {
        const struct candidate *c = &f->v[i];
        const char *name = base_name(c->real);
        if (c->stem != stem || lib_listed(r, name))
            continue;
        enum driver_lib_match m = driver_lib_classify(name, s, version);
        if (m == DRIVER_LIB_OTHER) {
            if (!strv_contains(r->skipped, c->real)) {
                log_debug("%s%s: not of driver %s, skipped", f->prefix, c->real, version);
                if (strv_push(&r->skipped, c->real) < 0)
                    return -ENOMEM;
            }
            continue;
        }
        if (m != want)
            continue;
        _cleanup_free_ char *host = host_path(f->prefix, c->real);
        if (!host)
            return -ENOMEM;
        if (!is_elf_x86_64(host)) {
            log_debug("%s: not an x86-64 ELF file, skipped", host);
            continue;
        }
        if (m == DRIVER_LIB_UNVERSIONED)
            log_debug("%s: no file named %s.so.%s, using this one", host, s, version);
        int rr = files_add_lib(r, f, c->real, f->stems[stem].cap);
        if (rr < 0)
            return rr;
    }
    return 0;
}

static int files_find_bins(const char *prefix, unsigned caps, struct driver_files *r)
{
    for (size_t i = 0; i < ELEMENTSOF(driver_caps_ordered); i++) {
        unsigned cap = driver_caps_ordered[i];
        if (!(caps & cap))
            continue;
        for (const char *const *b = driver_cap_binaries(cap); *b; b++)
            for (size_t d = 0; d < ELEMENTSOF(bin_dirs); d++) {
                _cleanup_free_ char *path = NULL, *real = NULL, *host = NULL;
                if (asprintf(&path, "%s/%s", bin_dirs[d], *b) < 0)
                    return -ENOMEM;
                int rr = driver_resolve(prefix, path, &real);
                if (rr == -ENOMEM)
                    return rr;
                struct stat st;
                if (rr < 0 || !(host = host_path(prefix, real)) || stat(host, &st) < 0 ||
                    !S_ISREG(st.st_mode) || !(st.st_mode & 0111))
                    continue;
                struct driver_bin *nv = realloc(r->bins, (r->n_bins + 1) * sizeof(*nv));
                if (!nv)
                    return -ENOMEM;
                r->bins = nv;
                r->bins[r->n_bins++] = (struct driver_bin){TAKE_PTR(real), strdup(*b), cap};
                if (!r->bins[r->n_bins - 1].name)
                    return -ENOMEM;
                break;
            }
    }
    return 0;
}

void driver_files_done(struct driver_files *f)
{
    for (size_t i = 0; i < f->n_libs; i++) {
        free(f->libs[i].path);
        free(f->libs[i].name);
        free(f->libs[i].soname);
    }
    free(f->libs);
    for (size_t i = 0; i < f->n_bins; i++) {
        free(f->bins[i].path);
        free(f->bins[i].name);
    }
    free(f->bins);
    strv_free(f->skipped);
    *f = (struct driver_files){0};
}

int driver_files_find(const char *prefix, const struct ldcache_entry *cache, size_t n_cache,
                      unsigned caps, const char *version, struct driver_files *ret,
                      struct errmsg *e)
{
    struct finder f = {.prefix = prefix};
    finder_add_stems(&f, caps);
    struct driver_files r = {.skipped = strv_new()};
    int rr = r.skipped ? finder_run(&f, cache, n_cache) : -ENOMEM;
    for (size_t s = 0; rr >= 0 && s < f.n_stems; s++)
        rr = finder_choose(&f, s, version, &r);
    if (rr >= 0)
        rr = files_find_bins(prefix, caps, &r);
    finder_done(&f);
    if (rr < 0) {
        driver_files_done(&r);
        return errmsg_set(e, rr, "finding driver files: %s", strerror(-rr));
    }
    for (size_t i = 0; i < ELEMENTSOF(driver_caps_ordered); i++) {
        unsigned cap = driver_caps_ordered[i];
        bool any = false;
        for (size_t l = 0; l < r.n_libs; l++)
            any = any || r.libs[l].cap == cap;
        if ((caps & cap) && driver_cap_libraries(cap)[0] && !any)
            r.missing |= cap;
    }
    *ret = r;
    return 0;
}

int driver_find_nvml(const char *prefix, const struct ldcache_entry *cache, size_t n_cache,
                     char **ret, struct errmsg *e)
{
    struct finder f = {.prefix = prefix};
    f.stems[f.n_stems++] = (struct stem_ref){"libnvidia-ml", DRIVER_CAP_UTILITY};
    int r = finder_run(&f, cache, n_cache);
    if (r < 0) {
        finder_done(&f);
        return errmsg_set(e, r, "looking for libnvidia-ml.so.1: %s", strerror(-r));
    }
    /* The loader's own choice first: the file the soname leads to, ld cache order. */
    const char *best = NULL;
    for (size_t pass = 0; pass < 2 && !best; pass++)
        for (size_t i = 0; i < f.n && !best; i++) {
            _cleanup_free_ char *host = host_path(prefix, f.v[i].real);
            if ((pass == 1 || strcmp(f.v[i].link, "libnvidia-ml.so.1") == 0) && host &&
                is_elf_x86_64(host))
                best = f.v[i].real;
        }
    char *s = best ? strdup(best) : NULL;
    finder_done(&f);
    if (!best)
        return errmsg_set(e, -ENOENT,
                          "libnvidia-ml.so.1 not found under %s: is the NVIDIA driver installed?",
                          *prefix ? prefix : "/");
    if (!s)
        return errmsg_set(e, -ENOMEM, "out of memory");
    *ret = s;
    return 0;
}

int nvcaps_parse_minor(const char *text, size_t len, unsigned *ret_minor, struct errmsg *e)
{
    static const char key[] = "DeviceFileMinor:";
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if ((size_t)(le - p) > sizeof(key) - 1 && memcmp(p, key, sizeof(key) - 1) == 0) {
            const char *q = p + sizeof(key) - 1;
            while (q < le && (*q == ' ' || *q == '\t'))
                q++;
            unsigned long v = 0;
            const char *digits = q;
            while (q < le && *q >= '0' && *q <= '9' && v < MINOR_LIMIT)
                v = v * 10 + (unsigned long)(*q++ - '0');
            while (q < le && (*q == ' ' || *q == '\t' || *q == '\r'))
                q++;
            if (q == digits || q != le || v >= MINOR_LIMIT)
                return errmsg_set(e, -EINVAL, "DeviceFileMinor: '%.*s' is not a device minor",
                                  (int)(le - digits > 32 ? 32 : le - digits), digits);
            *ret_minor = (unsigned)v;
            return 0;
        }
        p = le + 1;
    }
    return errmsg_set(e, -EINVAL, "no DeviceFileMinor line");
}

int nvcaps_read_minor(const char *prefix, unsigned gpu_minor, unsigned gi, int ci,
                      unsigned *ret_minor, struct errmsg *e)
{
    _cleanup_free_ char *path = NULL;
    int k = ci >= 0
                ? asprintf(&path, "%s/proc/driver/nvidia/capabilities/gpu%u/mig/gi%u/ci%d/access",
                           prefix, gpu_minor, gi, ci)
                : asprintf(&path, "%s/proc/driver/nvidia/capabilities/gpu%u/mig/gi%u/access",
                           prefix, gpu_minor, gi);
    if (k < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int r = negative_errno();
        return errmsg_set(e, r, "%s: %s%s", path, strerror(-r),
                          r == -ENOENT ? " (is the MIG instance still there? nvidia-smi mig -lgi)"
                                       : "");
    }
    char buf[NVCAPS_FILE_MAX];
    size_t len = 0;
    int r = fd_read_up_to(fd, buf, sizeof(buf), &len);
    if (r < 0)
        return errmsg_set(e, r, "reading %s: %s", path, strerror(-r));
    r = nvcaps_parse_minor(buf, len, ret_minor, e);
    if (r < 0)
        return errmsg_prefix(e, r, "%s", path);
    return 0;
}
