#include "metrics.h"

#include <stdio.h>

#include "lib/macro.h"

/* Families with one unlabelled sample. */
static int gauge1(struct prom_writer *w, const char *name, const char *help, double value)
{
    int r = prom_family(w, name, PROM_TYPE_GAUGE, help);
    return r < 0 ? r : prom_sample(w, NULL, value);
}

static int counter1(struct prom_writer *w, const char *name, const char *help, double value)
{
    int r = prom_family(w, name, PROM_TYPE_COUNTER, help);
    return r < 0 ? r : prom_sample(w, NULL, value);
}

static int render_temperatures(struct prom_writer *w, const struct coold_view *v)
{
    int r = prom_family(w, "coold_coolant_temperature_celsius", PROM_TYPE_GAUGE,
                        "Coolant temperature at each sensor of the controller.");
    for (unsigned i = 0; r >= 0 && v->tel.has_status && i < v->tel.n_temps; i++) {
        if (v->tel.temps[i].fault)
            continue; /* a faulty sensor has no value; coold_sensor_fault says so */
        const char *labels[] = {"sensor", v->sensors[i], NULL};
        r = prom_sample(w, labels, v->tel.temps[i].celsius_centi / 100.0);
    }
    if (r < 0)
        return r;
    r = prom_family(w, "coold_sensor_fault", PROM_TYPE_GAUGE,
                    "1 when the controller reports a temperature sensor as faulty.");
    for (unsigned i = 0; r >= 0 && v->tel.has_status && i < v->tel.n_temps; i++) {
        const char *labels[] = {"sensor", v->sensors[i], NULL};
        r = prom_sample(w, labels, v->tel.temps[i].fault ? 1 : 0);
    }
    return r;
}

static int render_pumps(struct prom_writer *w, const struct coold_view *v)
{
    char num[COOL_PUMPS_MAX][12];
    unsigned n = v->tel.has_status ? v->tel.n_pumps : 0;
    for (unsigned i = 0; i < n; i++)
        snprintf(num[i], sizeof(num[i]), "%u", i + 1);
    int r = prom_family(w, "coold_pump_speed_rpm", PROM_TYPE_GAUGE, "Pump speed.");
    for (unsigned i = 0; r >= 0 && i < n; i++)
        r = prom_sample(w, (const char *[]){"pump", num[i], NULL}, (double)v->tel.pumps[i].rpm);
    if (r < 0)
        return r;
    r = prom_family(w, "coold_pump_duty_ratio", PROM_TYPE_GAUGE,
                    "Pump duty commanded by the controller, 0 to 1.");
    for (unsigned i = 0; r >= 0 && i < n; i++)
        r = prom_sample(w, (const char *[]){"pump", num[i], NULL}, v->tel.pumps[i].duty / 100.0);
    return r;
}

static int render_states(struct prom_writer *w, const struct coold_view *v)
{
    int r = prom_family(w, "coold_safety_state", PROM_TYPE_GAUGE,
                        "The daemon's safety state: 1 for the current state, 0 for the others.");
    for (int s = 0; r >= 0 && s < _SAFETY_STATE_MAX; s++)
        r = prom_sample(w, (const char *[]){"state", safety_state_to_string(s), NULL},
                        v->safety == (enum safety_state)s);
    if (r < 0)
        return r;
    r = prom_family(w, "coold_controller_level", PROM_TYPE_GAUGE,
                    "The controller's protection level: 1 for the current level.");
    for (int l = 0; r >= 0 && l < _COOL_LEVEL_MAX; l++)
        r = prom_sample(w, (const char *[]){"level", cool_level_to_string(l), NULL},
                        v->tel.level == (enum cool_level)l);
    return r;
}

static int render_controller(struct prom_writer *w, const struct coold_view *v)
{
    int r;
    if ((r = gauge1(w, "coold_controller_up", "1 when the controller answers on its serial line.",
                    v->controller_up)) < 0 ||
        (r = gauge1(w, "coold_controller_last_success_timestamp_seconds",
                    "Unix time of the last telemetry read from the controller.",
                    v->last_success_unix_s)) < 0 ||
        (r = gauge1(w, "coold_telemetry_stale", "1 when the telemetry is too old to trust.",
                    v->stale)) < 0 ||
        (r = counter1(w, "coold_frames_rejected_total",
                      "Frames from the controller rejected (checksum, syntax, length).",
                      (double)v->frames_rejected)) < 0 ||
        (r = counter1(w, "coold_reconnects_total", "Times the serial line was reopened.",
                      (double)v->reconnects)) < 0)
        return r;
    if (v->tel.has_flow && (r = gauge1(w, "coold_coolant_flow_liters_per_minute", "Coolant flow.",
                                       v->tel.flow_centi / 100.0)) < 0)
        return r;
    return gauge1(w, "coold_power_cut_in_seconds",
                  "Seconds until the controller cuts host power; -1 when none is scheduled.",
                  v->cut_in_s < 0 ? -1 : v->cut_in_s);
}

int metrics_render(const struct coold_view *v, enum prom_format format, char **ret_text,
                   size_t *ret_len)
{
    _cleanup_(prom_writer_freep) struct prom_writer *w = NULL;
    int r = prom_writer_new(format, &w);
    if (r < 0)
        return r;
    if ((r = render_controller(w, v)) < 0 || (r = render_temperatures(w, v)) < 0 ||
        (r = render_pumps(w, v)) < 0 || (r = render_states(w, v)) < 0 ||
        (r = gauge1(w, "coold_shutdown_stage",
                    "Shutdown stage: 0 idle, 1 jobs, 2 announce, 3 containers, 4 wait, 5 halt, "
                    "6 command, 7 done.",
                    v->shutdown_stage)) < 0)
        return r;
    r = prom_family(w, "coold_build_info", PROM_TYPE_GAUGE, "coold's version; always 1.");
    if (r >= 0)
        r = prom_sample(w, (const char *[]){"version", GPUNODE_VERSION, NULL}, 1);
    if (r < 0)
        return r;
    return prom_writer_finish(TAKE_PTR(w), ret_text, ret_len);
}
