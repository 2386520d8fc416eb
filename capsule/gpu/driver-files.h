/* Finding the NVIDIA driver's files under a driver root: libraries by capability through the
 * root's ld cache and the usual driver directories, matched to the running driver's version;
 * utility and compute binaries; MIG capability minors from /proc/driver/nvidia.
 *
 * Paths come in two kinds: "in-root" paths are absolute paths as seen from inside the driver
 * root ("/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04"), and host paths are the in-root path
 * with the root in front. Symlinks are always resolved inside the root, never on the host, so a
 * stand-in tree with absolute links behaves like the real thing. Internal to capsule. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "lib/errmsg.h"

/* NVIDIA_DRIVER_CAPABILITIES, as libnvidia-container names them. */
enum {
    DRIVER_CAP_UTILITY = 1 << 0,
    DRIVER_CAP_COMPUTE = 1 << 1,
    DRIVER_CAP_VIDEO = 1 << 2,
    DRIVER_CAP_GRAPHICS = 1 << 3,
    DRIVER_CAP_DISPLAY = 1 << 4, /* only /dev/nvidia-modeset: no libraries of its own here */
    DRIVER_CAP_NGX = 1 << 5,     /* accepted and ignored */
    DRIVER_CAP_ALL = (1 << 6) - 1,
};
/* The capabilities in the order lines and lists use. */
extern const unsigned driver_caps_ordered[6];

/* The lower-case name of one capability bit ("compute"). */
const char *driver_cap_name(unsigned cap);

/* Parses a NVIDIA_DRIVER_CAPABILITIES value: comma-separated names, blanks around them allowed,
 * or "all". Returns 0 and *ret_caps (may be 0 for ""), or -EINVAL with a message that quotes the
 * unknown name and lists the known ones; what names the variable is the caller's prefix. */
int driver_caps_parse(const char *value, unsigned *ret_caps, struct errmsg *e);

/* The library stems ("libcuda") and binaries ("nvidia-smi") of one capability bit;
 * NULL-terminated, never NULL (empty for display and ngx). */
const char *const *driver_cap_libraries(unsigned cap);
const char *const *driver_cap_binaries(unsigned cap);

/* "" for "/" (or NULL, or ""), else root without trailing slashes; NULL on ENOMEM. Host paths are
 * this prefix followed by an in-root path. */
char *driver_root_prefix(const char *root);

/* Resolves an absolute in-root path, following every symlink inside the root ("/" and ".." stop
 * at the root). Returns 0 and *ret (the in-root path of what it names, which exists), -ENOENT,
 * -ELOOP (more than 40 links), -ENOMEM or another -errno of lstat/readlink. */
int driver_resolve(const char *prefix, const char *path, char **ret);

/* One line of `ldconfig -p`: a library name the dynamic loader looks up ("libcuda.so.1") and
 * the in-root path it gives ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", usually a symlink). */
struct ldcache_entry {
    char *name;
    char *path;
};

/* Parses the output of `ldconfig -p` (len bytes, need not be terminated). Only x86-64 entries
 * are kept, in the cache's order; lines that do not have the form "\tNAME (FLAGS) => /PATH" are
 * skipped. Returns 0 with *ret (free with ldcache_free; NULL when *ret_n is 0), or -ENOMEM. */
int ldcache_parse(const char *text, size_t len, struct ldcache_entry **ret, size_t *ret_n,
                  struct errmsg *e);
void ldcache_free(struct ldcache_entry *entries, size_t n);

/* Reads the driver root's ld cache (PREFIX/etc/ld.so.cache) with the host's
 * `ldconfig -p -C FILE`. A root without a cache gives 0 entries (the directories are searched
 * anyway). Returns 0, -ENOMEM, or -errno with a message when ldconfig cannot be run or fails. */
int ldcache_load(const char *prefix, struct ldcache_entry **ret, size_t *ret_n, struct errmsg *e);

/* How a library file's real name relates to the driver version. */
enum driver_lib_match {
    DRIVER_LIB_OTHER,       /* not this stem, or carries another driver's version */
    DRIVER_LIB_VERSIONED,   /* STEM.so.VERSION */
    DRIVER_LIB_UNVERSIONED, /* STEM.so or STEM.so.N: no driver version in the name */
};
/* Classifies file name name for stem and driver version ("libcuda.so.580.159.04"). */
enum driver_lib_match driver_lib_classify(const char *name, const char *stem, const char *version);

/* A library chosen for injection. */
struct driver_lib {
    char *path;   /* in-root path of the real file */
    char *name;   /* its file name, "libcuda.so.580.159.04" */
    char *soname; /* the link name the loader asks for ("libcuda.so.1"); NULL if none is known
                   * or it is the file name itself */
    unsigned cap; /* the capability bit it was found for */
};

/* A binary chosen for injection. */
struct driver_bin {
    char *path; /* in-root path of the real file */
    char *name; /* the name it goes by in /usr/bin ("nvidia-smi") */
    unsigned cap;
};

/* Everything of the driver found for a set of capabilities. */
struct driver_files {
    struct driver_lib *libs;
    size_t n_libs;
    struct driver_bin *bins;
    size_t n_bins;
    char **skipped; /* in-root paths of libraries of another driver, NULL-terminated, never NULL */
    unsigned missing; /* bits of capabilities whose libraries were all missing */
};

/* Finds the libraries and binaries of caps under the driver root: the root's ld cache entries
 * (cache, from ldcache_load) first, then the usual library directories
 * (/usr/local/nvidia/lib64, /usr/lib/x86_64-linux-gnu, ...); only 64-bit x86 ELF files whose
 * name carries version (or, when no such file exists for a stem, one whose name carries no
 * version at all, logged at debug level). The first file of each name wins. Missing libraries
 * are not an error here (see missing). Returns 0 and *ret (free with driver_files_done), or
 * -ENOMEM / another -errno of reading a directory, with a message. */
int driver_files_find(const char *prefix, const struct ldcache_entry *cache, size_t n_cache,
                      unsigned caps, const char *version, struct driver_files *ret,
                      struct errmsg *e);
void driver_files_done(struct driver_files *f);

/* Finds the in-root path of libnvidia-ml.so.1 under the root (the ld cache's entry first, then
 * the library directories), before the driver version is known. Returns 0 and *ret, -ENOENT
 * with "libnvidia-ml.so.1 not found under ROOT: is the NVIDIA driver installed?", or -ENOMEM. */
int driver_find_nvml(const char *prefix, const struct ldcache_entry *cache, size_t n_cache,
                     char **ret, struct errmsg *e);

/* Parses a /proc/driver/nvidia/capabilities/.../access file: its "DeviceFileMinor: N" line.
 * Returns 0 and *ret_minor, or -EINVAL when there is none or N is not a number below 2^20. */
int nvcaps_parse_minor(const char *text, size_t len, unsigned *ret_minor, struct errmsg *e);

/* Reads the minor of one MIG capability of GPU minor gpu_minor: GPU instance gi, and compute
 * instance ci when ci >= 0 (/proc/driver/nvidia/capabilities/gpuM/mig/giG[/ciC]/access).
 * Returns 0 and *ret_minor, -ENOENT with a message naming the file, -EINVAL, or -errno. */
int nvcaps_read_minor(const char *prefix, unsigned gpu_minor, unsigned gi, int ci,
                      unsigned *ret_minor, struct errmsg *e);

/* Whether the in-root path exists under the root (without following its last component when
 * that is a link: a dangling link exists). */
bool driver_path_exists(const char *prefix, const char *path);
