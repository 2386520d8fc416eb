/* Process attribution from /proc; see procs.h. */
#include "procs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/fileio.h"
#include "lib/macro.h"
#include "lib/names.h"

/* status is ~1.5 KiB; its Uid: line comes early, so a cut beyond this loses nothing we read. */
#define STATUS_MAX   (8 * 1024)
#define COMM_MAX     64
#define NAME_MAX_LEN 63
#define JOBID_MAX    20
#define HEX_ID_LEN   64
#define SHORT_ID_LEN 12

/* A piece of a larger text: a cgroup path component, an environment value. */
struct span {
    const char *p;
    size_t n;
};

static bool span_eq(struct span s, const char *lit)
{
    return s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

static bool span_has_prefix(struct span s, const char *prefix)
{
    size_t m = strlen(prefix);
    return s.n >= m && memcmp(s.p, prefix, m) == 0;
}

/* The middle of s between prefix and suffix, if s has both; else an empty span with p NULL. */
static struct span span_between(struct span s, const char *prefix, const char *suffix)
{
    size_t a = strlen(prefix), b = strlen(suffix);
    if (s.n < a + b || memcmp(s.p, prefix, a) != 0 || memcmp(s.p + s.n - b, suffix, b) != 0)
        return (struct span){NULL, 0};
    return (struct span){s.p + a, s.n - a - b};
}

/* Container ids as runtimes write them into cgroup names: 64 lower-case hex digits. */
static bool is_hex_id(struct span s)
{
    if (!s.p || s.n != HEX_ID_LEN)
        return false;
    for (size_t i = 0; i < s.n; i++)
        if (!((s.p[i] >= '0' && s.p[i] <= '9') || (s.p[i] >= 'a' && s.p[i] <= 'f')))
            return false;
    return true;
}

/* Capsule names and gpuq job ids: a safe charset, and never "." or ".." so the value cannot be
 * mistaken for a path by whoever reads the label. */
static bool is_name(struct span s)
{
    if (!s.p || s.n < 1 || s.n > NAME_MAX_LEN || span_eq(s, ".") || span_eq(s, ".."))
        return false;
    for (size_t i = 0; i < s.n; i++) {
        char c = s.p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

static bool is_digits(struct span s, size_t max)
{
    if (!s.p || s.n < 1 || s.n > max)
        return false;
    for (size_t i = 0; i < s.n; i++)
        if (s.p[i] < '0' || s.p[i] > '9')
            return false;
    return true;
}

/* Writes "<scheme>://<value>" into a label field. The callers have validated value's length, so
 * the result always fits. */
static void set_label(char *field, size_t size, const char *scheme, struct span value)
{
    snprintf(field, size, "%s://%.*s", scheme, (int)value.n, value.p);
}

/* Recognises the container a cgroup path component names; prev is the component above it. */
static bool container_from(struct span c, struct span prev, struct proc_sample *p)
{
    static const struct {
        const char *prefix, *scheme;
    } runtimes[] = {
        {"docker-", "docker"},
        {"libpod-", "podman"},
        {"cri-containerd-", "containerd"},
    };
    for (size_t i = 0; i < ELEMENTSOF(runtimes); i++) {
        struct span id = span_between(c, runtimes[i].prefix, ".scope");
        if (is_hex_id(id)) {
            set_label(p->container, sizeof(p->container), runtimes[i].scheme,
                      (struct span){id.p, SHORT_ID_LEN});
            return true;
        }
    }
    /* cgroupfs driver (v1, and v2 without systemd): /docker/<id>. */
    if (span_eq(prev, "docker") && is_hex_id(c)) {
        set_label(p->container, sizeof(p->container), "docker", (struct span){c.p, SHORT_ID_LEN});
        return true;
    }
    struct span name = span_between(c, NAMES_SCOPE_CAPSULE, NAMES_SCOPE_SUFFIX);
    if (is_name(name)) {
        set_label(p->container, sizeof(p->container), "capsule", name);
        return true;
    }
    return false;
}

/* Recognises the job a component names. prev and prev2 are the two components above it;
 * under_stepd tells whether a slurmstepd component came earlier in the path. */
static bool job_from(struct span c, struct span prev, struct span prev2, bool under_stepd,
                     struct proc_sample *p)
{
    struct span id = span_between(c, NAMES_SCOPE_GPUQ_JOB, NAMES_SCOPE_SUFFIX);
    if (is_name(id)) {
        set_label(p->job, sizeof(p->job), "gpuq", id);
        return true;
    }
    id = span_between(c, "job_", "");
    if (!is_digits(id, JOBID_MAX))
        return false;
    /* Slurm's v1 layout /slurm/uid_<n>/job_<id>/..., or v2's
     * /system.slice/slurmstepd.scope/job_<id>/...: a bare job_<n> elsewhere is someone else's. */
    bool v1 = span_eq(prev2, "slurm") && is_digits(span_between(prev, "uid_", ""), JOBID_MAX);
    if (!v1 && !under_stepd)
        return false;
    set_label(p->job, sizeof(p->job), "slurm", id);
    return true;
}

static int scan_path(struct span path, struct proc_sample *p)
{
    struct span prev = {"", 0}, prev2 = {"", 0};
    bool under_stepd = false;
    int filled = 0;
    const char *end = path.p + path.n;
    for (const char *s = path.p; s < end;) {
        const char *slash = memchr(s, '/', (size_t)(end - s));
        struct span c = {s, slash ? (size_t)(slash - s) : (size_t)(end - s)};
        s = slash ? slash + 1 : end;
        if (c.n == 0)
            continue;
        if (!p->container[0] && container_from(c, prev, p))
            filled++;
        if (!p->job[0] && job_from(c, prev, prev2, under_stepd, p))
            filled++;
        if (span_has_prefix(c, "slurmstepd"))
            under_stepd = true;
        prev2 = prev;
        prev = c;
    }
    return filled;
}

int procs_parse_cgroup(const char *text, size_t len, struct proc_sample *p)
{
    int filled = 0;
    const char *end = text + len;
    for (const char *line = text; line < end && (!p->container[0] || !p->job[0]);) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *eol = nl ? nl : end;
        /* "<hierarchy>:<controllers>:<path>"; the path itself may contain ':'. */
        const char *c1 = memchr(line, ':', (size_t)(eol - line));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
        if (c2)
            filled += scan_path((struct span){c2 + 1, (size_t)(eol - c2 - 1)}, p);
        line = nl ? nl + 1 : end;
    }
    return filled;
}

/* The value of key in an environ entry, or a span with p NULL. */
static struct span env_value(struct span entry, const char *key)
{
    size_t k = strlen(key);
    if (entry.n <= k || memcmp(entry.p, key, k) != 0 || entry.p[k] != '=')
        return (struct span){NULL, 0};
    return (struct span){entry.p + k + 1, entry.n - k - 1};
}

int procs_parse_environ(const char *block, size_t len, struct proc_sample *p)
{
    enum { ENV_CAPSULE, ENV_GPUQ, ENV_SLURM, ENV_COUNT };
    static const char *const keys[ENV_COUNT] = {NAMES_ENV_CAPSULE_NAME, NAMES_ENV_GPUQ_JOB_ID,
                                                NAMES_ENV_SLURM_JOB_ID};
    struct span val[ENV_COUNT] = {{NULL, 0}};
    bool seen[ENV_COUNT] = {false};

    const char *end = block + len;
    for (const char *s = block; s < end;) {
        const char *nul = memchr(s, '\0', (size_t)(end - s));
        if (!nul)
            break; /* unterminated: possibly cut by the read bound */
        struct span entry = {s, (size_t)(nul - s)};
        s = nul + 1;
        for (int k = 0; k < ENV_COUNT; k++) {
            struct span v = env_value(entry, keys[k]);
            if (!v.p || seen[k])
                continue;
            seen[k] = true; /* the first definition counts, even an invalid one */
            val[k] = v;
        }
    }

    int filled = 0;
    if (!p->container[0] && is_name(val[ENV_CAPSULE])) {
        set_label(p->container, sizeof(p->container), "capsule", val[ENV_CAPSULE]);
        filled++;
    }
    if (!p->job[0]) {
        /* gpuq hands jobs to Slurm, so its jobs carry both; gpuq's id is the one users know. */
        if (is_name(val[ENV_GPUQ]))
            set_label(p->job, sizeof(p->job), "gpuq", val[ENV_GPUQ]);
        else if (is_digits(val[ENV_SLURM], JOBID_MAX))
            set_label(p->job, sizeof(p->job), "slurm", val[ENV_SLURM]);
        filled += p->job[0] != '\0';
    }
    return filled;
}

/* Length of the valid UTF-8 sequence at s (1 to 4), or 0 if s does not start one. */
static size_t utf8_len(const unsigned char *s)
{
    size_t n;
    uint32_t cp;
    if (s[0] < 0x80)
        return 1;
    if ((s[0] & 0xe0) == 0xc0) {
        n = 2;
        cp = s[0] & 0x1f;
    } else if ((s[0] & 0xf0) == 0xe0) {
        n = 3;
        cp = s[0] & 0x0f;
    } else if ((s[0] & 0xf8) == 0xf0) {
        n = 4;
        cp = s[0] & 0x07;
    } else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

size_t procs_sanitize_label(char *s)
{
    size_t replaced = 0;
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        size_t n = utf8_len(p);
        if (n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f))) {
            *p = '?';
            replaced++;
            n = 1;
        }
        p += n;
    }
    return replaced;
}

/* Reads file name of the process directory dfd, at most max bytes, NUL-terminated. Sets *ret_cut
 * when the file had more. Returns 0, -ESRCH when the process is gone, -ENOMEM or -errno. */
static int read_at(int dfd, const char *name, size_t max, char **ret, size_t *ret_len,
                   bool *ret_cut)
{
    _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return errno == ENOENT || errno == ESRCH ? -ESRCH : negative_errno();
    /* One byte more than max tells a file of exactly max bytes from a longer one. */
    _cleanup_free_ char *buf = malloc(max + 2);
    if (!buf)
        return -ENOMEM;
    size_t len = 0;
    int r = fd_read_up_to(fd, buf, max + 1, &len);
    if (r < 0)
        return r;
    *ret_cut = len > max;
    if (len > max)
        len = max;
    buf[len] = '\0';
    *ret_len = len;
    *ret = TAKE_PTR(buf);
    return 0;
}

/* The real uid from status' "Uid:\t<real>\t<effective>..." line; -EBADMSG without one. */
static int parse_status_uid(const char *text, uid_t *ret)
{
    const char *l = strncmp(text, "Uid:", 4) == 0 ? text : strstr(text, "\nUid:");
    if (!l)
        return -EBADMSG;
    l += l == text ? 4 : 5;
    l += strspn(l, " \t");
    char *end;
    errno = 0;
    unsigned long long v = strtoull(l, &end, 10);
    if (errno != 0 || end == l || (*end != '\t' && *end != ' ' && *end != '\n') ||
        v >= (unsigned long long)(uid_t)-1 || *l == '-')
        return -EBADMSG;
    *ret = (uid_t)v;
    return 0;
}

/* A lookup that failed (NSS error, not "no such user") is cached this long only, so a directory
 * server that was down is asked again soon, but not for every new process. */
#define USER_CACHE_ERROR_TTL_S 30.0

/* Login names by uid. Entries with expires == 0 are free. */
static struct {
    pthread_mutex_t lock;
    struct user_entry {
        uid_t uid;
        double expires;
        char name[sizeof(((struct proc_sample *)0)->user)]; /* "" when uid has none */
    } e[PROCS_USER_CACHE_MAX];
} user_cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Asks NSS for uid's login name (sanitised; "" when it has none, or one that does not fit).
 * Returns 0, or a positive errno of getpwuid_r() when the lookup itself failed. */
static int user_lookup(uid_t uid, char *name, size_t size)
{
    long hint = sysconf(_SC_GETPW_R_SIZE_MAX);
    size_t bufsize = hint > 0 ? (size_t)hint : 16384;
    name[0] = '\0';
    for (;;) {
        _cleanup_free_ char *b = malloc(bufsize);
        if (!b)
            return ENOMEM;
        struct passwd pw, *res = NULL;
        int r = getpwuid_r(uid, &pw, b, bufsize, &res);
        if (r == ERANGE && bufsize < 1024 * 1024) {
            bufsize *= 2;
            continue;
        }
        if (r == 0 && res && res->pw_name && strlen(res->pw_name) < size) {
            strcpy(name, res->pw_name);
            procs_sanitize_label(name);
        }
        return r;
    }
}

/* The entry of uid if cached and fresh, else NULL. Called with the lock held. */
static struct user_entry *user_cache_find(uid_t uid, double now)
{
    for (size_t i = 0; i < PROCS_USER_CACHE_MAX; i++) {
        struct user_entry *u = &user_cache.e[i];
        if (u->expires > 0 && u->uid == uid)
            return now < u->expires ? u : NULL;
    }
    return NULL;
}

/* Stores a lookup: over the old entry of uid, else a free one, else the one that expires first.
 * Called with the lock held. */
static void user_cache_store(uid_t uid, const char *name, double expires)
{
    struct user_entry *slot = NULL;
    for (size_t i = 0; i < PROCS_USER_CACHE_MAX; i++) {
        struct user_entry *u = &user_cache.e[i];
        if (u->expires > 0 && u->uid == uid) {
            slot = u;
            break;
        }
        if (!slot || u->expires < slot->expires)
            slot = u;
    }
    slot->uid = uid;
    slot->expires = expires;
    snprintf(slot->name, sizeof(slot->name), "%s", name);
}

void procs_user_name(uid_t uid, double now, char *buf, size_t size)
{
    char name[sizeof(user_cache.e[0].name)];
    pthread_mutex_lock(&user_cache.lock);
    struct user_entry *u = user_cache_find(uid, now);
    if (u)
        memcpy(name, u->name, sizeof(name));
    pthread_mutex_unlock(&user_cache.lock);
    if (!u) {
        /* NSS may be slow (a network directory): no lock held meanwhile. */
        int r = user_lookup(uid, name, sizeof(name));
        double ttl = r == 0 ? PROCS_USER_CACHE_TTL_S : USER_CACHE_ERROR_TTL_S;
        pthread_mutex_lock(&user_cache.lock);
        /* now + ttl is never 0, which marks a free entry: now is a monotonic time, ttl > 0. */
        user_cache_store(uid, name, now + ttl);
        pthread_mutex_unlock(&user_cache.lock);
    }
    if (name[0] && strlen(name) < size)
        snprintf(buf, size, "%s", name);
    else
        snprintf(buf, size, "%u", (unsigned)uid);
}

static void proc_sample_unknown(struct proc_sample *p)
{
    p->uid = (uid_t)-1;
    p->user[0] = p->comm[0] = p->container[0] = p->job[0] = '\0';
}

static int read_comm(int dfd, struct proc_sample *p)
{
    _cleanup_free_ char *t = NULL;
    size_t len;
    bool cut;
    int r = read_at(dfd, "comm", COMM_MAX, &t, &len, &cut);
    if (r < 0)
        return r;
    t[strcspn(t, "\n")] = '\0';
    snprintf(p->comm, sizeof(p->comm), "%s", t);
    procs_sanitize_label(p->comm);
    return 0;
}

static int read_owner(int dfd, struct proc_sample *p)
{
    _cleanup_free_ char *t = NULL;
    size_t len;
    bool cut;
    int r = read_at(dfd, "status", STATUS_MAX, &t, &len, &cut);
    if (r < 0)
        return r;
    uid_t uid;
    if (parse_status_uid(t, &uid) < 0)
        return 0; /* not a status file we understand: owner unknown */
    p->uid = uid;
    procs_user_name(uid, clock_now_sec(), p->user, sizeof(p->user));
    return 0;
}

static int read_labels(int dfd, struct proc_sample *p)
{
    _cleanup_free_ char *t = NULL;
    size_t len;
    bool cut;
    /* Owner and comm were read, so the process existed: if it exits now, what we have is still
     * its description. Any failure here (no cgroups, another user's environ without root, an
     * exit) only leaves labels out. */
    int r = read_at(dfd, "cgroup", PROCS_CGROUP_MAX, &t, &len, &cut);
    if (r == -ENOMEM)
        return r;
    if (r >= 0 && procs_parse_cgroup(t, len, p) > 0)
        return 0;
    free(TAKE_PTR(t));
    r = read_at(dfd, "environ", PROCS_ENVIRON_MAX, &t, &len, &cut);
    if (r == -ENOMEM)
        return r;
    if (r >= 0)
        procs_parse_environ(t, len, p);
    return 0;
}

int procs_describe(const char *proc_root, pid_t pid, struct proc_sample *p)
{
    proc_sample_unknown(p);
    if (pid <= 0)
        return -ESRCH;
    char path[PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/%d", proc_root ? proc_root : "/proc", (int)pid);
    if (n < 0 || (size_t)n >= sizeof(path))
        return -ENAMETOOLONG;
    /* Every file is read relative to this one directory fd: if the pid is reused by another
     * process meanwhile, the reads fail with ESRCH instead of describing the newcomer. */
    _cleanup_close_ int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return errno == ENOENT || errno == ESRCH ? -ESRCH : negative_errno();

    /* Only a vanished process and ENOMEM end the description; a file that cannot be read for
     * another reason leaves its fields unknown. */
    int r = read_owner(dfd, p);
    if (r != -ESRCH && r != -ENOMEM)
        r = read_comm(dfd, p);
    if (r != -ESRCH && r != -ENOMEM)
        r = read_labels(dfd, p);
    if (r == -ESRCH || r == -ENOMEM) {
        proc_sample_unknown(p);
        return r;
    }
    return 0;
}
