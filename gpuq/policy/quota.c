/* Quotas: limits by resource key, and the words of GPU model names; see quota.h. */
#include "gpuq/policy/quota.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/config.h"
#include "lib/macro.h"

/* Kinds whose key carries a name after a dot ("gpus.H100", "mig.1g.10gb"). */
static bool kind_has_what(enum quota_kind kind)
{
    return kind == QUOTA_GPU_MODEL || kind == QUOTA_MIG;
}

/* Model names and MIG profiles are matched case-insensitively everywhere (a job's "h100" and a
 * quota's "H100" are one model), so two limits whose names differ only in case are one key. */
static bool same_key(const struct quota_limit *l, enum quota_kind kind, const char *what)
{
    if (l->kind != kind)
        return false;
    return !kind_has_what(kind) || strcasecmp(l->what, what ? what : "") == 0;
}

uint64_t quota_get(const struct quota *q, enum quota_kind kind, const char *what)
{
    for (unsigned i = 0; i < q->n; i++)
        if (same_key(&q->l[i], kind, what))
            return q->l[i].limit;
    return UINT64_MAX;
}

int quota_set(struct quota *q, enum quota_kind kind, const char *what, uint64_t limit)
{
    if (!kind_has_what(kind))
        what = "";
    else if (!what || !what[0])
        return -EINVAL;
    if (strlen(what) >= QUOTA_WHAT_MAX)
        return -ENAMETOOLONG;
    for (unsigned i = 0; i < q->n; i++)
        if (same_key(&q->l[i], kind, what)) {
            q->l[i].limit = limit;
            return 0;
        }
    if (q->n >= QUOTA_MAX)
        return -E2BIG;
    struct quota_limit *l = &q->l[q->n++];
    *l = (struct quota_limit){.kind = kind, .limit = limit};
    strcpy(l->what, what);
    return 0;
}

int quota_overlay(struct quota *base, const struct quota *over)
{
    /* Into a copy, so that a failure leaves base as it was. */
    struct quota out = *base;
    for (unsigned i = 0; i < over->n; i++) {
        const struct quota_limit *l = &over->l[i];
        int r = quota_set(&out, l->kind, l->what, l->limit);
        if (r < 0)
            return r;
    }
    *base = out;
    return 0;
}

char *quota_key(const struct quota_limit *l, char *buf, unsigned size)
{
    switch (l->kind) {
    case QUOTA_GPUS:
        snprintf(buf, size, "gpus");
        break;
    case QUOTA_GPU_MODEL:
        snprintf(buf, size, "gpus.%s", l->what);
        break;
    case QUOTA_MIG:
        snprintf(buf, size, "mig.%s", l->what);
        break;
    case QUOTA_CPUS:
        snprintf(buf, size, "cpus");
        break;
    case QUOTA_MEMORY:
        snprintf(buf, size, "memory");
        break;
    case QUOTA_JOBS:
        snprintf(buf, size, "jobs");
        break;
    default:
        snprintf(buf, size, "?");
        break;
    }
    return buf;
}

/* Model names ("A100-80GB") and MIG profiles ("1g.10gb", "1g.10gb+me", "1c.2g.20gb"). */
static bool valid_what(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= QUOTA_WHAT_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("._-+", s[i]))
            return false;
    return true;
}

int quota_parse_key(const char *key, enum quota_kind *ret_kind, char ret_what[QUOTA_WHAT_MAX])
{
    static const struct {
        const char *name;
        enum quota_kind kind;
    } plain[] = {
        {"gpus", QUOTA_GPUS}, {"cpus", QUOTA_CPUS}, {"memory", QUOTA_MEMORY}, {"jobs", QUOTA_JOBS}};
    for (size_t i = 0; i < ELEMENTSOF(plain); i++)
        if (strcmp(key, plain[i].name) == 0) {
            *ret_kind = plain[i].kind;
            ret_what[0] = '\0';
            return 0;
        }
    enum quota_kind kind;
    const char *what;
    if (strncmp(key, "gpus.", 5) == 0) {
        kind = QUOTA_GPU_MODEL;
        what = key + 5;
    } else if (strncmp(key, "mig.", 4) == 0) {
        kind = QUOTA_MIG;
        what = key + 4;
    } else
        return -EINVAL;
    if (!valid_what(what))
        return -EINVAL;
    *ret_kind = kind;
    strcpy(ret_what, what);
    return 0;
}

/* The next word of s at or after *pos, words split at ' ', '-' and '_'. Returns its length (0 at
 * the end) and leaves *pos at its start. */
static size_t next_word(const char *s, size_t *pos)
{
    size_t i = *pos;
    while (s[i] && strchr(" -_", s[i]))
        i++;
    size_t n = 0;
    while (s[i + n] && !strchr(" -_", s[i + n]))
        n++;
    *pos = i;
    return n;
}

bool quota_model_matches(const char *gpu_name, const char *model)
{
    size_t mp = 0, np = 0;
    for (;;) {
        size_t mn = next_word(model, &mp);
        if (mn == 0)
            return true;
        /* The model's word must be one of the name's words still ahead. */
        for (;;) {
            size_t nn = next_word(gpu_name, &np);
            if (nn == 0)
                return false;
            bool same = nn == mn && strncasecmp(gpu_name + np, model + mp, mn) == 0;
            np += nn;
            if (same)
                break;
        }
        mp += mn;
    }
}

int quota_parse_cpus(const char *s, uint64_t *ret_milli)
{
    if (!s)
        return -EINVAL;
    /* Whole CPUs (or millicores) and up to three decimals, digits collected by hand: strtod()
     * would round "0.1" and take signs, exponents and a locale's decimal comma. */
    uint64_t whole = 0, frac = 0;
    size_t n_int = 0, n_frac = 0;
    const char *p = s;
    for (; isdigit((unsigned char)*p); p++, n_int++)
        if ((whole = whole * 10 + (uint64_t)(*p - '0')) > QUOTA_CPUS_MAX_MILLI)
            return -ERANGE;
    if (n_int == 0)
        return -EINVAL;
    if (*p == 'm' && p[1] == '\0') {
        /* Kubernetes' millicores: "500m". */
        *ret_milli = whole;
        return 0;
    }
    if (*p == '.') {
        for (p++; isdigit((unsigned char)*p); p++, n_frac++) {
            if (n_frac == 3)
                return -EINVAL; /* finer than a thousandth of a CPU */
            frac = frac * 10 + (uint64_t)(*p - '0');
        }
        if (n_frac == 0)
            return -EINVAL;
    }
    if (*p != '\0')
        return -EINVAL;
    for (; n_frac < 3; n_frac++)
        frac *= 10;
    if (whole > QUOTA_CPUS_MAX_MILLI / 1000)
        return -ERANGE;
    uint64_t v = whole * 1000 + frac;
    if (v > QUOTA_CPUS_MAX_MILLI)
        return -ERANGE;
    *ret_milli = v;
    return 0;
}

int quota_parse_memory(const char *s, uint64_t *ret)
{
    if (!s)
        return -EINVAL;
    /* Kubernetes writes the powers of 1024 as "Ki", "Mi", "Gi", "Ti", "Pi": parse_size() reads
     * them once the "i" has a "B" after it. */
    size_t n = strlen(s);
    if (n >= 2 && s[n - 1] == 'i' && strchr("KMGTP", s[n - 2]) && n < 64) {
        char buf[66];
        memcpy(buf, s, n);
        memcpy(buf + n, "B", 2);
        return parse_size(buf, ret);
    }
    return parse_size(s, ret);
}
