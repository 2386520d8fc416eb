#include "gpuq/spec/quantity.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* A parsed quantity: mant * 10^exp10 * 1024^pow1024, exactly. */
struct qnum {
    uint64_t mant;
    int exp10;
    int pow1024;
    bool milli; /* the suffix was "m" (memory gives it a message of its own) */
};

/* More digits than any CPU count or memory size needs; it keeps the mantissa in 64 bits. */
#define QUANTITY_SIG_DIGITS 19
#define QUANTITY_NUM_MAX    64   /* characters of the number before its suffix */
#define QUANTITY_EXP_MAX    9999 /* exponents are clamped here: far past any resource */

/* The number: digits with at most one '.', at least one digit. Leading and trailing zeros are
 * folded away so that "0.000500" and "5e-4" give the same mantissa. */
static int parse_number(const char **pp, struct qnum *q)
{
    char digits[QUANTITY_NUM_MAX];
    size_t nd = 0;
    int frac = 0;
    bool point = false;
    const char *p = *pp;
    for (;; p++) {
        if (isdigit((unsigned char)*p)) {
            if (nd == sizeof(digits))
                return -ERANGE;
            digits[nd++] = *p;
            frac += point;
        } else if (*p == '.' && !point) {
            point = true;
        } else {
            break;
        }
    }
    if (nd == 0)
        return -EINVAL;
    size_t lo = 0, hi = nd;
    while (lo < hi && digits[lo] == '0')
        lo++;
    int trailing = 0;
    while (hi > lo && digits[hi - 1] == '0') {
        hi--;
        trailing++;
    }
    if (hi - lo > QUANTITY_SIG_DIGITS)
        return -ERANGE;
    q->mant = 0;
    for (size_t i = lo; i < hi; i++)
        q->mant = q->mant * 10 + (uint64_t)(digits[i] - '0');
    q->exp10 = q->mant ? trailing - frac : 0;
    *pp = p;
    return 0;
}

/* "e3", "E-2", "e+4": the exponent after the letter. -EINVAL if what follows is no number. */
static int parse_exponent(const char *p, int *ret)
{
    bool neg = *p == '-';
    if (*p == '-' || *p == '+')
        p++;
    if (!isdigit((unsigned char)*p))
        return -EINVAL;
    /* Clamped: past it, any value is too large for a resource or rounds to nothing, which
     * the scaling below says in its own words. */
    int v = 0;
    for (; isdigit((unsigned char)*p); p++) {
        v = v * 10 + (*p - '0');
        if (v > QUANTITY_EXP_MAX)
            v = QUANTITY_EXP_MAX;
    }
    if (*p)
        return -EINVAL;
    *ret = neg ? -v : v;
    return 0;
}

static int parse_suffix(const char *p, enum quantity_letters letters, struct qnum *q)
{
    static const char binary[] = "KMGTPE";
    static const char decimal[] = "kMGTPE";
    if (*p == '\0')
        return 0;
    if (p[0] && p[1] == 'i' && p[2] == '\0') {
        const char *b = strchr(binary, p[0]);
        if (!b)
            return -EINVAL;
        q->pow1024 = (int)(b - binary) + 1;
        return 0;
    }
    if ((p[0] == 'e' || p[0] == 'E') && p[1] != '\0') {
        int x;
        int r = parse_exponent(p + 1, &x);
        if (r < 0)
            return r;
        q->exp10 += x;
        return 0;
    }
    if (p[1] != '\0')
        return -EINVAL;
    if (p[0] == 'm') {
        q->exp10 -= 3;
        q->milli = true;
        return 0;
    }
    if (letters == QUANTITY_LETTERS_BINARY && strchr(binary, p[0])) {
        q->pow1024 = (int)(strchr(binary, p[0]) - binary) + 1;
        return 0;
    }
    if (letters == QUANTITY_LETTERS_BINARY && p[0] == 'k') {
        q->pow1024 = 1;
        return 0;
    }
    const char *d = strchr(decimal, p[0]);
    if (!d)
        return -EINVAL;
    q->exp10 += 3 * ((int)(d - decimal) + 1);
    return 0;
}

static int parse_quantity(const char *s, enum quantity_letters letters, struct qnum *ret)
{
    struct qnum q = {0};
    const char *p = s;
    if (*p == '+')
        p++;
    int r = parse_number(&p, &q);
    if (r < 0)
        return r;
    r = parse_suffix(p, letters, &q);
    if (r < 0)
        return r;
    *ret = q;
    return 0;
}

/* q scaled by 10^shift10, as an integer: -ERANGE above max, and *ret_exact false when a fraction
 * was cut off. */
static int quantity_value(const struct qnum *q, int shift10, uint64_t max, uint64_t *ret,
                          bool *ret_exact)
{
    /* The mantissa is below 10^19 < 2^64 and the binary factor at most 2^60: 128 bits hold it. */
    unsigned __int128 v = q->mant;
    for (int i = 0; i < q->pow1024; i++)
        v *= 1024;
    bool exact = true;
    int e = q->exp10 + shift10;
    for (; v && e > 0; e--) {
        if (v > max / 10)
            return -ERANGE;
        v *= 10;
    }
    for (; v && e < 0; e++) {
        if (v % 10)
            exact = false;
        v /= 10;
    }
    if (e < 0 && q->mant)
        exact = false; /* everything was cut off */
    if (v > max)
        return -ERANGE;
    *ret = (uint64_t)v;
    *ret_exact = exact;
    return 0;
}

int quantity_parse_cpu(const char *s, unsigned *ret_milli, struct errmsg *e)
{
    struct qnum q;
    if (s[0] == '-')
        return errmsg_set(e, -EINVAL, "'%s' is negative", s);
    int r = parse_quantity(s, QUANTITY_LETTERS_DECIMAL, &q);
    if (r == -ERANGE)
        return errmsg_set(e, r, "'%s' has too many digits", s);
    if (r < 0)
        return errmsg_set(e, r, "'%s' is not a CPU quantity (like 500m, 2, 1.5)", s);
    uint64_t v;
    bool exact;
    if (quantity_value(&q, 3, QUANTITY_CPU_MAX_MILLI, &v, &exact) < 0)
        return errmsg_set(e, -ERANGE, "'%s' is more CPUs than can be counted", s);
    if (!exact)
        return errmsg_set(e, -EINVAL, "'%s' is finer than 1m (a thousandth of a CPU)", s);
    *ret_milli = (unsigned)v;
    return 0;
}

int quantity_parse_memory(const char *s, enum quantity_letters letters, uint64_t *ret_bytes,
                          struct errmsg *e)
{
    struct qnum q;
    if (s[0] == '-')
        return errmsg_set(e, -EINVAL, "'%s' is negative", s);
    int r = parse_quantity(s, letters, &q);
    if (r == -ERANGE)
        return errmsg_set(e, r, "'%s' has too many digits", s);
    if (r < 0)
        return errmsg_set(e, r,
                          "'%s' is not a memory quantity (like 128974848, 129e6, 129M, 123Mi, "
                          "1Gi)",
                          s);
    uint64_t v;
    bool exact;
    if (quantity_value(&q, 0, QUANTITY_MEMORY_MAX, &v, &exact) < 0)
        return errmsg_set(e, -ERANGE, "'%s' is too large", s);
    if (!exact && q.milli)
        return errmsg_set(e, -EINVAL,
                          "'%s' is a fraction of a byte ('m' is milli): write Mi or M for "
                          "mebibytes or megabytes",
                          s);
    if (!exact)
        return errmsg_set(e, -EINVAL, "'%s' is not a whole number of bytes", s);
    *ret_bytes = v;
    return 0;
}
