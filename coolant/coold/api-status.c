/* The /v1/status document, built from a view. */
#include "api-status.h"

#include <time.h>

static json_t *iso_time(double unix_s)
{
    if (unix_s <= 0)
        return json_null();
    time_t t = (time_t)unix_s;
    struct tm tm;
    char stamp[32];
    gmtime_r(&t, &tm);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(stamp);
}

static json_t *controller_json(const struct coold_view *v)
{
    json_t *sensors = json_array();
    for (unsigned i = 0; i < v->n_sensors; i++)
        json_array_append_new(sensors, json_string(v->sensors[i]));
    return json_pack("{s:s, s:b, s:o, s:o, s:o, s:i, s:o, s:o, s:I, s:I}", "link", v->link_state,
                     "stale", v->stale, "fw", v->has_info ? json_string(v->fw) : json_null(),
                     "model", v->has_info ? json_string(v->model) : json_null(), "serial",
                     v->has_info ? json_string(v->serial) : json_null(), "pumps", (int)v->n_pumps,
                     "sensors", sensors, "last_frame_age_seconds",
                     v->last_frame_age_s < 0 ? json_null() : json_real(v->last_frame_age_s),
                     "reconnects", (json_int_t)v->reconnects, "frames_rejected",
                     (json_int_t)v->frames_rejected);
}

static json_t *telemetry_json(const struct coold_view *v)
{
    const struct cool_telemetry *t = &v->tel;
    if (!t->has_status)
        return json_null();
    json_t *temps = json_array(), *pumps = json_array();
    for (unsigned i = 0; i < t->n_temps; i++)
        json_array_append_new(
            temps, json_pack("{s:s, s:o, s:b}", "sensor", v->sensors[i], "celsius",
                             t->temps[i].fault ? json_null()
                                               : json_real(t->temps[i].celsius_centi / 100.0),
                             "fault", t->temps[i].fault));
    for (unsigned i = 0; i < t->n_pumps; i++)
        json_array_append_new(pumps,
                              json_pack("{s:i, s:I, s:i}", "pump", (int)i + 1, "rpm",
                                        (json_int_t)t->pumps[i].rpm, "duty", t->pumps[i].duty));
    return json_pack("{s:s, s:s, s:o, s:b, s:s, s:o, s:I, s:o, s:o}", "level",
                     cool_level_to_string(t->level), "reason",
                     t->reason == COOL_REASON_UNKNOWN ? t->reason_text
                                                      : cool_reason_to_string(t->reason),
                     "cut_in_seconds", v->cut_in_s < 0 ? json_null() : json_real(v->cut_in_s),
                     "halt", t->halt, "host", t->host_ok ? "ok" : "lost", "flow_lpm",
                     t->has_flow ? json_real(t->flow_centi / 100.0) : json_null(), "uptime_seconds",
                     (json_int_t)t->uptime_s, "temperatures", temps, "pumps", pumps);
}

json_t *api_status_json(const struct coold_view *v)
{
    return json_pack("{s:o, s:o, s:{s:s, s:o}, s:{s:s, s:i, s:b}}", "controller",
                     controller_json(v), "telemetry", telemetry_json(v), "safety", "state",
                     safety_state_to_string(v->safety), "since", iso_time(v->safety_since_unix_s),
                     "shutdown", "stage", v->shutdown_stage_name, "stage_number", v->shutdown_stage,
                     "drill", v->drill);
}
