/* Pump curves: "T:D,T:D,..." (docs/protocol.md §6). */
#include <stdint.h>
#include <string.h>

#include "ctl-internal.h"
#include "ctl-proto.h"

/* Duties outside this are surely typos; 0..100 itself is a rule, checked by ctl_curve_check. */
#define DUTY_SYNTAX_MAX 9999

/* Parses one "T:D" point of n bytes at s into *ret. Returns 0 or -CTL_E_BADVALUE. */
static int parse_point(const char *s, size_t n, unsigned index, struct ctl_curve_point *ret,
                       char *why, size_t why_size)
{
    char tmp[32];
    const char *colon = memchr(s, ':', n);
    long temp, duty;

    if (n >= sizeof(tmp) || !colon) {
        CTL_WHY(why, why_size, "curve point %u: expected temperature:duty, e.g. 45:70", index);
        return -CTL_E_BADVALUE;
    }
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    tmp[colon - s] = '\0';
    if (ctl_parse_centi(tmp, &temp) < 0) {
        CTL_WHY(why, why_size,
                "curve point %u: temperature %s is not a number with at most two decimals", index,
                tmp);
        return -CTL_E_BADVALUE;
    }
    if (ctl_parse_long(tmp + (colon - s) + 1, -DUTY_SYNTAX_MAX, DUTY_SYNTAX_MAX, &duty) < 0) {
        CTL_WHY(why, why_size, "curve point %u: duty %s is not a whole percent", index,
                tmp + (colon - s) + 1);
        return -CTL_E_BADVALUE;
    }
    ret->temp_centi = temp;
    ret->duty = (int)duty;
    return 0;
}

int ctl_curve_parse(const char *s, struct ctl_curve *ret, char *why, size_t why_size)
{
    struct ctl_curve c = {0};
    const char *p = s;
    int r;

    if (!s || *s == '\0') {
        CTL_WHY(why, why_size, "curve: empty; expected points like 30:40,45:70,55:100");
        return -CTL_E_BADVALUE;
    }
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);

        if (c.n == CTL_CURVE_POINTS_MAX) {
            CTL_WHY(why, why_size, "curve: more than %d points", CTL_CURVE_POINTS_MAX);
            return -CTL_E_BADVALUE;
        }
        r = parse_point(p, n, c.n + 1, &c.p[c.n], why, why_size);
        if (r < 0)
            return r;
        c.n++;
        if (!comma)
            break;
        p = comma + 1;
    }
    *ret = c;
    return 0;
}

int ctl_curve_format(const struct ctl_curve *c, char *buf, size_t size)
{
    size_t len = 0;

    if (size == 0)
        return -CTL_E_OVERFLOW;
    buf[0] = '\0';
    for (unsigned i = 0; i < c->n && i < CTL_CURVE_POINTS_MAX; i++) {
        char temp[16];
        int n;

        if (ctl_format_centi(c->p[i].temp_centi, true, temp, sizeof(temp)) < 0)
            return -CTL_E_OVERFLOW;
        n = snprintf(buf + len, size - len, "%s%s:%d", i ? "," : "", temp, c->p[i].duty);
        if (n < 0 || (size_t)n >= size - len)
            return -CTL_E_OVERFLOW;
        len += (size_t)n;
    }
    return (int)len;
}

/* Checks the rules that concern single points and neighbours, in point order. */
static int check_points(const struct ctl_curve *c, unsigned pump, int min_duty, char *why,
                        size_t why_size)
{
    char a[16], b[16];

    for (unsigned i = 0; i < c->n; i++) {
        const struct ctl_curve_point *p = &c->p[i], *prev = i ? &c->p[i - 1] : NULL;

        if (p->duty < 0 || p->duty > 100) {
            CTL_WHY(why, why_size, "pump %u curve point %u: duty %d%%; must be 0 to 100%%", pump,
                    i + 1, p->duty);
            return -CTL_E_BADVALUE;
        }
        if (prev && p->temp_centi <= prev->temp_centi) {
            CTL_WHY(why, why_size, "pump %u curve point %u: %s C after %s C; points must rise",
                    pump, i + 1, ctl_temp_str(p->temp_centi, a), ctl_temp_str(prev->temp_centi, b));
            return -CTL_E_BADVALUE;
        }
        if (prev && p->duty < prev->duty) {
            CTL_WHY(why, why_size,
                    "pump %u curve point %u: duty %d%% after %d%%; duty must not fall", pump, i + 1,
                    p->duty, prev->duty);
            return -CTL_E_BADVALUE;
        }
        if (p->duty < min_duty) {
            CTL_WHY(why, why_size,
                    "pump %u curve point %u: duty %d%% is below the pump's min_duty %d%%", pump,
                    i + 1, p->duty, min_duty);
            return -CTL_E_BADVALUE;
        }
    }
    return 0;
}

int ctl_curve_check(const struct ctl_curve *c, unsigned pump, int min_duty, long critical_centi,
                    char *why, size_t why_size)
{
    char t[16];
    int r, duty;

    if (c->n < 2 || c->n > CTL_CURVE_POINTS_MAX) {
        CTL_WHY(why, why_size, "pump %u curve: needs 2 to %d points, has %u", pump,
                CTL_CURVE_POINTS_MAX, c->n);
        return -CTL_E_BADVALUE;
    }
    r = check_points(c, pump, min_duty, why, why_size);
    if (r < 0)
        return r;
    /* What the pump is commanded at the critical temperature is what protects the tank. */
    duty = ctl_curve_duty(c, critical_centi);
    if (duty != 100) {
        CTL_WHY(why, why_size,
                "pump %u curve: duty %d%% at the critical temperature %s C; must be 100%%", pump,
                duty, ctl_temp_str(critical_centi, t));
        return -CTL_E_BADVALUE;
    }
    return 0;
}

int ctl_curve_duty(const struct ctl_curve *c, long temp_centi)
{
    unsigned n = c->n < CTL_CURVE_POINTS_MAX ? c->n : CTL_CURVE_POINTS_MAX;

    if (n == 0)
        return 0;
    if (temp_centi <= c->p[0].temp_centi)
        return c->p[0].duty;
    for (unsigned i = 1; i < n; i++) {
        const struct ctl_curve_point *a = &c->p[i - 1], *b = &c->p[i];
        int64_t num, den;

        if (temp_centi >= b->temp_centi)
            continue;
        if (b->temp_centi <= a->temp_centi)
            return b->duty; /* not rising: an unchecked curve; avoid dividing by <= 0 */
        /* Round to the nearest whole percent, halves away from a's duty. */
        num = (int64_t)(b->duty - a->duty) * (temp_centi - a->temp_centi);
        den = b->temp_centi - a->temp_centi;
        if (num >= 0)
            return a->duty + (int)((num * 2 + den) / (den * 2));
        return a->duty - (int)((-num * 2 + den) / (den * 2));
    }
    return c->p[n - 1].duty;
}
