/* NVIDIA_REQUIRE_* constraints (nvidia-container-toolkit's syntax) against the host's driver. */
#include "capsule/image/require.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/macro.h"

/* Longer values are refused: real ones are a few hundred bytes. */
#define REQUIRE_VALUE_MAX 4096
#define REQUIRE_PREFIX    "NVIDIA_REQUIRE_"

/* From NVIDIA's CUDA Toolkit release notes (table "CUDA Toolkit and Minimum Required Driver
 * Version"): the first Linux driver of each CUDA release. */
static const struct {
    const char *cuda, *driver;
} cuda_drivers[] = {
    {"10.0", "410.48"},    {"10.1", "418.39"},    {"10.2", "440.33"},    {"11.0", "450.36.06"},
    {"11.1", "455.23"},    {"11.2", "460.27.03"}, {"11.3", "465.19.01"}, {"11.4", "470.42.01"},
    {"11.5", "495.29.05"}, {"11.6", "510.39.01"}, {"11.7", "515.43.04"}, {"11.8", "520.61.05"},
    {"12.0", "525.60.13"}, {"12.1", "530.30.02"}, {"12.2", "535.54.03"}, {"12.3", "545.23.06"},
    {"12.4", "550.54.14"}, {"12.5", "555.42.02"}, {"12.6", "560.28.03"}, {"12.8", "570.26"},
    {"12.9", "575.51.03"}, {"13.0", "580.65.06"},
};

enum req_key { KEY_CUDA, KEY_DRIVER, KEY_ARCH, KEY_BRAND };
enum req_op { OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE };

static const char *const key_names[] = {"cuda", "driver", "arch", "brand"};

struct condition {
    enum req_key key;
    enum req_op op;
    const char *value; /* NUL-terminated inside the caller's copy */
    const char *text;  /* the whole condition, for messages */
};

/* Compares two digit strings of any length numerically. */
static int cmp_digits(const char *a, size_t an, const char *b, size_t bn)
{
    while (an > 1 && *a == '0')
        a++, an--;
    while (bn > 1 && *b == '0')
        b++, bn--;
    if (an != bn)
        return an < bn ? -1 : 1;
    int c = memcmp(a, b, an);
    return c < 0 ? -1 : c > 0;
}

int require_version_cmp(const char *a, const char *b)
{
    for (;;) {
        size_t an = strcspn(a, "."), bn = strcspn(b, ".");
        /* A missing part counts as "0", so that "1.0" equals "1". */
        const char *ap = an ? a : "0", *bp = bn ? b : "0";
        size_t al = an ? an : 1, bl = bn ? bn : 1;
        int c;
        if (strspn(ap, "0123456789") >= al && strspn(bp, "0123456789") >= bl)
            c = cmp_digits(ap, al, bp, bl);
        else {
            c = strncmp(ap, bp, al < bl ? al : bl);
            if (c == 0 && al != bl)
                c = al < bl ? -1 : 1;
            c = c < 0 ? -1 : c > 0;
        }
        if (c != 0)
            return c;
        a += an;
        b += bn;
        if (!*a && !*b)
            return 0;
        if (*a)
            a++;
        if (*b)
            b++;
    }
}

/* "12.4.1" -> the entry for "12.4"; exact major.minor only. */
const char *require_min_driver_for_cuda(const char *cuda)
{
    if (!cuda)
        return NULL;
    for (size_t i = 0; i < ELEMENTSOF(cuda_drivers); i++) {
        size_t n = strlen(cuda_drivers[i].cuda);
        if (strncmp(cuda, cuda_drivers[i].cuda, n) == 0 && (cuda[n] == '\0' || cuda[n] == '.'))
            return cuda_drivers[i].driver;
    }
    return NULL;
}

/* The driver of the first CUDA release at or above cuda ("12.7" -> 12.8's), for advice. */
static const char *driver_at_least(const char *cuda)
{
    for (size_t i = 0; i < ELEMENTSOF(cuda_drivers); i++)
        if (require_version_cmp(cuda_drivers[i].cuda, cuda) >= 0)
            return cuda_drivers[i].driver;
    return NULL;
}

static bool valid_version(const char *s)
{
    if (!isdigit((unsigned char)*s))
        return false;
    for (const char *p = s; *p; p++) {
        if (*p == '.' && (p[1] == '\0' || p[1] == '.'))
            return false;
        if (*p != '.' && !isalnum((unsigned char)*p))
            return false;
    }
    return true;
}

static bool valid_brand(const char *s)
{
    if (!*s)
        return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
            return false;
    return true;
}

/* One "key<op>value" (text is modified: the value is cut out in place). */
static int condition_parse(char *text, const char *whole, struct condition *ret, struct errmsg *e)
{
    static const struct {
        const char *s;
        enum req_op op;
    } ops[] = {{"==", OP_EQ}, {"!=", OP_NE}, {"<=", OP_LE}, {">=", OP_GE},
               {"=", OP_EQ},  {"<", OP_LT},  {">", OP_GT}};
    size_t klen = strcspn(text, "=!<>");
    struct condition c = {.text = text};
    size_t i;

    for (i = 0; i < ELEMENTSOF(key_names); i++)
        if (strlen(key_names[i]) == klen && strncasecmp(text, key_names[i], klen) == 0)
            break;
    if (i == ELEMENTSOF(key_names))
        return errmsg_set(e, -EINVAL,
                          "'%.200s': condition '%.80s': unknown key '%.*s' (cuda, "
                          "driver, arch and brand are known)",
                          whole, text, (int)(klen > 40 ? 40 : klen), text);
    c.key = (enum req_key)i;
    const char *rest = text + klen;
    for (i = 0; i < ELEMENTSOF(ops); i++)
        if (strncmp(rest, ops[i].s, strlen(ops[i].s)) == 0)
            break;
    if (i == ELEMENTSOF(ops))
        return errmsg_set(e, -EINVAL,
                          "'%.200s': condition '%.80s': expected one of =, !=, <, "
                          "<=, >, >= after '%s'",
                          whole, text, key_names[c.key]);
    c.op = ops[i].op;
    c.value = rest + strlen(ops[i].s);
    if (c.key == KEY_BRAND ? !valid_brand(c.value) : !valid_version(c.value))
        return errmsg_set(e, -EINVAL, "'%.200s': condition '%.80s': '%.80s' is not a %s", whole,
                          text, c.value, c.key == KEY_BRAND ? "brand name" : "version");
    if (c.key == KEY_BRAND && c.op != OP_EQ && c.op != OP_NE)
        return errmsg_set(e, -EINVAL,
                          "'%.200s': condition '%.80s': brands compare only with = "
                          "and !=",
                          whole, text);
    *ret = c;
    return 0;
}

struct requirement {
    char *buf;               /* the value, cut into conditions */
    struct condition *conds; /* alternatives' conditions in order */
    unsigned *alt;           /* the alternative of each condition */
    size_t n;
};

static void requirement_done(struct requirement *r)
{
    free(r->buf);
    free(r->conds);
    free(r->alt);
    *r = (struct requirement){};
}

/* Cuts one alternative ("a,b,c") into conditions appended to r. */
static int parse_alternative(struct requirement *r, char *alt, unsigned n_alt, const char *whole,
                             struct errmsg *e)
{
    for (char *p = alt;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (!*p)
            return errmsg_set(e, -EINVAL,
                              "'%.200s': alternative %u has an empty condition "
                              "(',' at its start or end, or ',,')",
                              whole, n_alt);
        int k = condition_parse(p, whole, &r->conds[r->n], e);
        if (k < 0)
            return k;
        r->alt[r->n++] = n_alt;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

static int requirement_parse(const char *value, struct requirement *ret, struct errmsg *e)
{
    struct requirement r = {};
    unsigned n_alt = 0;
    char *save = NULL;

    if (strlen(value) > REQUIRE_VALUE_MAX)
        return errmsg_set(e, -EINVAL, "'%.60s...': longer than %d characters", value,
                          REQUIRE_VALUE_MAX);
    /* Every condition but the first follows a ',' or a blank: that bounds their number. */
    size_t max = 1;
    for (const char *p = value; *p; p++)
        max += (*p == ',' || *p == ' ' || *p == '\t');
    r.buf = strdup(value);
    r.conds = calloc(max, sizeof(*r.conds));
    r.alt = calloc(max, sizeof(*r.alt));
    if (!r.buf || !r.conds || !r.alt) {
        requirement_done(&r);
        return -ENOMEM;
    }
    for (char *alt = strtok_r(r.buf, " \t", &save); alt; alt = strtok_r(NULL, " \t", &save)) {
        int k = parse_alternative(&r, alt, ++n_alt, value, e);
        if (k < 0) {
            requirement_done(&r);
            return k;
        }
    }
    *ret = r;
    return 0;
}

int require_parse(const char *value, struct errmsg *e)
{
    struct requirement r = {};
    int k = requirement_parse(value, &r, e);
    requirement_done(&r);
    return k;
}

static bool op_holds(enum req_op op, int cmp)
{
    switch (op) {
    case OP_EQ:
        return cmp == 0;
    case OP_NE:
        return cmp != 0;
    case OP_LT:
        return cmp < 0;
    case OP_LE:
        return cmp <= 0;
    case OP_GT:
        return cmp > 0;
    default:
        return cmp >= 0;
    }
}

/* Whether c holds on host; a fact the host does not report holds. For arch every selected GPU
 * must satisfy it; *ret_arch names one that does not. */
static bool condition_holds(const struct condition *c, const struct require_host *h,
                            const char **ret_arch)
{
    switch (c->key) {
    case KEY_CUDA:
        return !h->cuda || !*h->cuda || op_holds(c->op, require_version_cmp(h->cuda, c->value));
    case KEY_DRIVER:
        return !h->driver || !*h->driver ||
               op_holds(c->op, require_version_cmp(h->driver, c->value));
    case KEY_BRAND:
        return !h->brand || !*h->brand || op_holds(c->op, strcasecmp(h->brand, c->value));
    default:
        for (const char *const *a = h->archs; a && *a; a++)
            if (**a && !op_holds(c->op, require_version_cmp(*a, c->value))) {
                *ret_arch = *a;
                return false;
            }
        return true;
    }
}

/* The major version of a driver ("550.54.14" -> "550"). */
static int driver_branch(const char *driver, char out[32])
{
    return snprintf(out, 32, "%.*s", (int)strcspn(driver, "."), driver);
}

static int fail_cuda(const struct condition *c, const char *var, const struct require_host *h,
                     struct errmsg *e)
{
    char branch[32], have[128];
    snprintf(have, sizeof(have), "this host's driver%s%s supports CUDA %s",
             h->driver && *h->driver ? " " : "", h->driver ? h->driver : "", h->cuda);
    if (c->op == OP_LT || c->op == OP_LE || c->op == OP_NE)
        return errmsg_set(e, -EPERM,
                          "image requires %s (%s); %s: the image was built for an "
                          "older CUDA",
                          c->text, var, have);
    const char *need = driver_at_least(c->value);
    if (!need)
        return errmsg_set(e, -EPERM,
                          "image requires %s (%s); %s: install a driver that "
                          "supports CUDA %s",
                          c->text, var, have, c->value);
    driver_branch(need, branch);
    return errmsg_set(e, -EPERM, "image requires %s (%s); %s: install driver %s or newer", c->text,
                      var, have, branch);
}

static int fail_message(const struct condition *c, const char *var, const struct require_host *h,
                        const char *arch, struct errmsg *e)
{
    switch (c->key) {
    case KEY_CUDA:
        return fail_cuda(c, var, h, e);
    case KEY_DRIVER:
        return errmsg_set(e, -EPERM, "image requires %s (%s); this host's driver is %s", c->text,
                          var, h->driver);
    case KEY_BRAND:
        return errmsg_set(e, -EPERM,
                          "image requires %s (%s); this host's GPUs are of brand "
                          "'%s'",
                          c->text, var, h->brand);
    default:
        return errmsg_set(e, -EPERM,
                          "image requires %s (%s); a selected GPU has compute "
                          "capability %s: select GPUs that satisfy it",
                          c->text, var, arch);
    }
}

/* Checks one variable's value: 0 if any alternative holds (or there are none). */
static int check_value(const char *var, const char *value, const struct require_host *h,
                       struct errmsg *e)
{
    struct requirement r = {};
    size_t first_fail = SIZE_MAX;
    const char *fail_arch = NULL;
    int k;

    if ((k = requirement_parse(value, &r, e)) < 0)
        return k == -ENOMEM ? k : errmsg_prefix(e, k, "%s", var);
    for (size_t i = 0; i < r.n;) {
        unsigned alt = r.alt[i];
        bool holds = true;
        for (; i < r.n && r.alt[i] == alt; i++) {
            const char *arch = NULL;
            if (holds && !condition_holds(&r.conds[i], h, &arch)) {
                holds = false;
                if (first_fail == SIZE_MAX) {
                    first_fail = i;
                    fail_arch = arch;
                }
            }
        }
        if (holds) {
            requirement_done(&r);
            return 0;
        }
    }
    /* The first alternative's failure is the one to explain: images list the plain
     * "cuda>=X.Y" first and the forward-compatibility exceptions after it. */
    k = r.n == 0 ? 0 : fail_message(&r.conds[first_fail], var, h, fail_arch, e);
    requirement_done(&r);
    return k;
}

/* The value of the last "name=" entry in env, or NULL. */
static const char *env_get(char *const *env, const char *name, size_t n)
{
    const char *v = NULL;
    for (char *const *p = env; p && *p; p++)
        if (strncmp(*p, name, n) == 0 && (*p)[n] == '=')
            v = *p + n + 1;
    return v;
}

static bool disabled(char *const *env)
{
    const char *v = env_get(env, "NVIDIA_DISABLE_REQUIRE", strlen("NVIDIA_DISABLE_REQUIRE"));
    return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "t") == 0);
}

/* Images from before NVIDIA_REQUIRE_CUDA existed only set CUDA_VERSION; the toolkit then
 * requires cuda>=MAJOR.MINOR of it, and so does this. */
static int check_legacy(char *const *env, const struct require_host *h, struct errmsg *e)
{
    char value[64];
    const char *v = env_get(env, "CUDA_VERSION", strlen("CUDA_VERSION"));
    if (!v || env_get(env, "NVIDIA_REQUIRE_CUDA", strlen("NVIDIA_REQUIRE_CUDA")))
        return 0;
    size_t major = strspn(v, "0123456789");
    if (major == 0 || major > 8)
        return 0;
    size_t minor = v[major] == '.' ? strspn(v + major + 1, "0123456789") : 0;
    snprintf(value, sizeof(value), "cuda>=%.*s%s%.*s", (int)major, v, minor ? "." : "",
             (int)(minor > 8 ? 8 : minor), v + major + 1);
    return check_value("CUDA_VERSION", value, h, e);
}

int require_check(char *const *env, const struct require_host *host, struct errmsg *e)
{
    size_t plen = strlen(REQUIRE_PREFIX);
    int k;

    if (disabled(env))
        return 0;
    for (char *const *p = env; p && *p; p++) {
        const char *eq = strchr(*p, '=');
        if (strncmp(*p, REQUIRE_PREFIX, plen) != 0 || !eq || (size_t)(eq - *p) == plen)
            continue;
        size_t n = (size_t)(eq - *p);
        /* A later assignment of the same name overrides this one: check that one instead. */
        if (env_get(env, *p, n) != eq + 1)
            continue;
        char var[128];
        snprintf(var, sizeof(var), "%.*s", (int)(n > 100 ? 100 : n), *p);
        if ((k = check_value(var, eq + 1, host, e)) < 0)
            return k;
    }
    return check_legacy(env, host, e);
}
