/* Protection levels, alarm causes and the power-cut schedule of docs/protocol.md §7. */
#include "sim-protect.h"

#include <string.h>

struct cause {
    enum sim_level level;
    enum sim_reason reason;
    unsigned pump;   /* from 1, 0 = none */
    unsigned sensor; /* from 1, 0 = none */
};

void sim_protect_init(struct sim_protect *p)
{
    memset(p, 0, sizeof(*p));
}

bool sim_reading_hottest(const struct sim_reading *r, long *ret_centi)
{
    bool found = false;
    long hottest = 0;

    for (unsigned i = 0; i < r->n_sensors; i++)
        if (r->sensor_ok[i] && (!found || r->temp_centi[i] > hottest)) {
            hottest = r->temp_centi[i];
            found = true;
        }
    if (found)
        *ret_centi = hottest;
    return found;
}

static long threshold(const struct ctl_limits *l, enum sim_level level)
{
    switch (level) {
    case SIM_LEVEL_WARNING:
        return l->warning_centi;
    case SIM_LEVEL_PRECRITICAL:
        return l->precritical_centi;
    case SIM_LEVEL_CRITICAL:
        return l->critical_centi;
    default:
        return 0;
    }
}

/* The temperature's level: rises as soon as a threshold is reached, and falls one level at a
 * time only once the temperature is SIM_HYSTERESIS_CENTI below that level's threshold, so a
 * reading that hovers around a threshold does not make the level flap. */
static enum sim_level temp_level(const struct ctl_limits *l, enum sim_level held, long t)
{
    enum sim_level raw = SIM_LEVEL_NORMAL;

    for (enum sim_level lv = SIM_LEVEL_WARNING; lv <= SIM_LEVEL_CRITICAL; lv++)
        if (t >= threshold(l, lv))
            raw = lv;
    if (raw >= held)
        return raw;
    while (held > raw && t <= threshold(l, held) - SIM_HYSTERESIS_CENTI)
        held--;
    return held;
}

/* Updates the stopped-pump and low-flow states; each clears only past its hysteresis. */
static void update_hardware(struct sim_protect *p, const struct ctl_limits *l,
                            const struct sim_reading *r)
{
    for (unsigned i = 0; i < CTL_PUMPS_MAX; i++) {
        if (i >= r->n_pumps || r->duty[i] <= 0)
            p->pump_stopped[i] = false;
        else if (r->rpm[i] < SIM_PUMP_STOPPED_RPM)
            p->pump_stopped[i] = true;
        else if (r->rpm[i] >= SIM_PUMP_RUNNING_RPM)
            p->pump_stopped[i] = false;
    }
    if (r->flow_centi < l->flow_min_centi)
        p->flow_low = true;
    else if (r->flow_centi >= l->flow_min_centi + SIM_FLOW_CLEAR_CENTI)
        p->flow_low = false;
}

/* Adopts c when it is more severe than *best; on a tie the earlier cause stays, which makes the
 * order of the checks below the order of precedence between reasons of one level. */
static void consider(struct cause *best, struct cause c)
{
    if (c.level > best->level)
        *best = c;
}

/* The most severe cause in a reading. Hardware causes come before temperature at each level:
 * they say why the temperature will move, which is what a person reading the alarm needs. */
static struct cause find_cause(const struct sim_protect *p, const struct sim_reading *r)
{
    struct cause best = {SIM_LEVEL_NORMAL, SIM_REASON_NONE, 0, 0};
    unsigned faulted = 0, first_faulted = 0;

    if (p->have_temp && p->temp_level == SIM_LEVEL_CRITICAL)
        consider(&best, (struct cause){SIM_LEVEL_CRITICAL, SIM_REASON_TEMP_HIGH, 0, 0});
    for (unsigned i = 0; i < r->n_pumps; i++)
        if (p->pump_stopped[i])
            consider(&best,
                     (struct cause){SIM_LEVEL_PRECRITICAL, SIM_REASON_PUMP_STOPPED, i + 1, 0});
    if (p->flow_low)
        consider(&best, (struct cause){SIM_LEVEL_PRECRITICAL, SIM_REASON_FLOW_LOW, 0, 0});
    for (unsigned i = 0; i < r->n_sensors; i++)
        if (!r->sensor_ok[i] && faulted++ == 0)
            first_faulted = i + 1;
    if (!p->have_temp)
        consider(&best, (struct cause){SIM_LEVEL_PRECRITICAL, SIM_REASON_SENSORS_LOST, 0, 0});
    if (p->have_temp && p->temp_level == SIM_LEVEL_PRECRITICAL)
        consider(&best, (struct cause){SIM_LEVEL_PRECRITICAL, SIM_REASON_TEMP_HIGH, 0, 0});
    if (faulted > 0)
        consider(&best,
                 (struct cause){SIM_LEVEL_WARNING, SIM_REASON_SENSOR_FAULT, 0, first_faulted});
    if (p->have_temp && p->temp_level == SIM_LEVEL_WARNING)
        consider(&best, (struct cause){SIM_LEVEL_WARNING, SIM_REASON_TEMP_HIGH, 0, 0});
    return best;
}

int sim_protect_update(struct sim_protect *p, const struct ctl_limits *l,
                       const struct sim_reading *r, uint64_t now_ms)
{
    int ret = 0;
    long t;

    if (p->cut)
        return 0;
    p->have_temp = sim_reading_hottest(r, &t);
    if (p->have_temp) {
        p->temp_centi = t;
        p->temp_level = temp_level(l, p->temp_level, t);
    }
    update_hardware(p, l, r);
    /* Without any sensor the temperature level keeps its last value: sensors_lost already
     * raises precritical, and the hysteresis resumes when a sensor comes back. */

    struct cause c = find_cause(p, r);
    if (c.level != p->level || c.reason != p->reason || c.pump != p->pump || c.sensor != p->sensor)
        ret |= SIM_PROTECT_CHANGED;
    p->level = c.level;
    p->reason = c.reason;
    p->pump = c.pump;
    p->sensor = c.sensor;

    if (p->level == SIM_LEVEL_CRITICAL) {
        p->cut = true;
        return ret | SIM_PROTECT_CUT;
    }
    if (p->level == SIM_LEVEL_PRECRITICAL && !p->cut_scheduled) {
        p->cut_scheduled = true;
        p->cut_at_ms = now_ms + (uint64_t)l->cut_delay_s * 1000;
    } else if (p->level < SIM_LEVEL_PRECRITICAL) {
        p->cut_scheduled = false;
    }
    if (p->cut_scheduled && now_ms >= p->cut_at_ms) {
        p->cut = true;
        ret |= SIM_PROTECT_CUT;
    }
    return ret;
}

long sim_protect_halt(struct sim_protect *p, const struct ctl_limits *l, unsigned long within_s,
                      uint64_t now_ms)
{
    p->halt = true;
    if (p->cut_scheduled && !p->cut) {
        unsigned long delay = within_s < l->halt_max_s ? within_s : l->halt_max_s;
        p->cut_at_ms = now_ms + (uint64_t)delay * 1000;
    }
    return sim_protect_cut_in(p, now_ms);
}

long sim_protect_cut_in(const struct sim_protect *p, uint64_t now_ms)
{
    if (!p->cut_scheduled)
        return -1;
    if (now_ms >= p->cut_at_ms)
        return 0;
    /* Rounded down, as protocol §5 asks: the host may plan on every second it is told. */
    return (long)((p->cut_at_ms - now_ms) / 1000);
}

int sim_protect_duty(const struct sim_protect *p, const struct ctl_settings *s, unsigned pump)
{
    if (pump >= s->n_pumps)
        return 0;
    if (p->level >= SIM_LEVEL_WARNING || !p->have_temp)
        return 100;
    int duty = ctl_curve_duty(&s->curve[pump], p->temp_centi);
    return duty < s->min_duty[pump] ? s->min_duty[pump] : duty;
}

const char *sim_level_name(enum sim_level level)
{
    static const char *const names[] = {"normal", "warning", "precritical", "critical"};
    return (unsigned)level < (sizeof(names) / sizeof(names[0])) ? names[level] : "unknown";
}

const char *sim_reason_name(enum sim_reason reason)
{
    static const char *const names[] = {"none",     "temp_high",    "pump_stopped",
                                        "flow_low", "sensor_fault", "sensors_lost"};
    return (unsigned)reason < (sizeof(names) / sizeof(names[0])) ? names[reason] : "unknown";
}
