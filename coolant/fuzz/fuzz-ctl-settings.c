/* libFuzzer target: settings from fuzzed text. The first line is a pump curve for
 * ctl_curve_parse/check/duty; the other lines are key=value fields for ctl_settings_apply. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Compares member by member: struct padding makes memcmp unreliable after struct copies. */
static bool curve_equal(const struct ctl_curve *a, const struct ctl_curve *b)
{
    if (a->n != b->n)
        return false;
    for (unsigned i = 0; i < a->n; i++)
        if (a->p[i].temp_centi != b->p[i].temp_centi || a->p[i].duty != b->p[i].duty)
            return false;
    return true;
}

static bool settings_equal(const struct ctl_settings *a, const struct ctl_settings *b)
{
    const struct ctl_limits *x = &a->limits, *y = &b->limits;

    if (a->n_pumps != b->n_pumps || a->host_timeout_s != b->host_timeout_s ||
        x->warning_centi != y->warning_centi || x->precritical_centi != y->precritical_centi ||
        x->critical_centi != y->critical_centi || x->flow_min_centi != y->flow_min_centi ||
        x->cut_delay_s != y->cut_delay_s || x->halt_max_s != y->halt_max_s)
        return false;
    for (unsigned i = 0; i < a->n_pumps; i++)
        if (a->min_duty[i] != b->min_duty[i] || !curve_equal(&a->curve[i], &b->curve[i]))
            return false;
    return true;
}

static void fuzz_curve(const char *s)
{
    struct ctl_curve c, back;
    char why[160], buf[256];
    int n;

    if (ctl_curve_parse(s, &c, why, sizeof(why)) < 0)
        return;
    n = ctl_curve_format(&c, buf, sizeof(buf));
    if (n < 0 || ctl_curve_parse(buf, &back, why, sizeof(why)) < 0 || !curve_equal(&c, &back))
        abort();
    if (ctl_curve_check(&c, 1, 0, 6000, why, sizeof(why)) < 0) {
        if (why[0] == '\0' || strpbrk(why, "\"$*"))
            abort();
        return;
    }
    /* A checked curve gives a duty that never falls, within 0..100 and 100 at 60 C. */
    for (unsigned i = 0, prev = 0; i <= 200; i++) {
        long t = c.p[0].temp_centi - 100 +
                 (long)i * (c.p[c.n - 1].temp_centi - c.p[0].temp_centi + 200) / 200;
        int d = ctl_curve_duty(&c, t);
        if (d < 0 || d > 100 || (unsigned)d < prev)
            abort();
        prev = (unsigned)d;
    }
    if (ctl_curve_duty(&c, 6000) != 100)
        abort();
}

/* Re-applies every setting as GET reports it: that must be accepted and change nothing. */
static void check_get_round_trip(const struct ctl_settings *s)
{
    const char *names[] = {"pump.1.curve",    "pump.1.min_duty", "pump.2.curve",
                           "pump.2.min_duty", "limit.warning",   "limit.precritical",
                           "limit.critical",  "limit.flow_min",  "limit.cut_delay",
                           "limit.halt_max",  "host.timeout"};
    char values[11][128], why[160];
    struct ctl_field fields[11];
    struct ctl_settings copy = *s;

    for (unsigned i = 0; i < 11; i++) {
        if (ctl_settings_get(s, names[i], values[i], sizeof(values[i])) < 0)
            abort();
        fields[i].key = names[i];
        fields[i].value = values[i];
    }
    if (ctl_settings_apply(&copy, fields, 11, why, sizeof(why)) < 0 || !settings_equal(&copy, s))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[2048], why[160];
    struct ctl_field fields[CTL_FIELDS_MAX];
    struct ctl_settings s, before;
    unsigned n = 0;
    char *line, *next;
    int r;

    if (size >= sizeof(text))
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    next = strchr(text, '\n');
    if (next)
        *next++ = '\0';
    fuzz_curve(text);

    for (line = next; line && n < CTL_FIELDS_MAX; line = next) {
        char *eq;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        fields[n].key = line;
        fields[n].value = eq + 1;
        n++;
    }
    ctl_settings_defaults(&s, 2);
    before = s;
    why[0] = '\0';
    r = ctl_settings_apply(&s, fields, n, why, sizeof(why));
    if (r < 0) {
        /* All or none, and a reason that can travel in msg="...". */
        if (!settings_equal(&s, &before) || why[0] == '\0' || strpbrk(why, "\"$*"))
            abort();
        return 0;
    }
    if (ctl_settings_check(&s, why, sizeof(why)) < 0)
        abort();
    check_get_round_trip(&s);
    return 0;
}
