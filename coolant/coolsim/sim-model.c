/* The tank's thermal model: one lumped fluid mass, two loops of series thermal resistances.
 *
 * The heat path from tank to air is a chain of conductances: the primary flow's heat capacity
 * rate (flow x volumetric heat capacity), the heat exchanger, the water flow's capacity rate,
 * the dry cooler. Adding their resistances is the usual first-order approximation of a loop
 * whose effectiveness is limited by whichever element is weakest, and it makes the rejected
 * heat fall to zero when either flow stops, which is what a stopped pump does to a real tank. */
#include "sim-model.h"

#include <math.h>
#include <string.h>

#define CP_OIL           1700.0  /* J/(L K), synthetic dielectric fluid */
#define CP_WATER         4180.0  /* J/(L K) */
#define TANK_CAPACITY    20000.0 /* J/K: about 10 L of fluid plus boards and tank walls */
#define FLOW_PRIMARY_MAX 22.0    /* L/min through the primary loop at full speed */
#define FLOW_WATER_MAX   16.0    /* L/min per water-loop pump at full speed */
#define UA_EXCHANGER     1000.0  /* W/K, plate heat exchanger */
#define UA_DRY_COOLER    900.0   /* W/K, dry cooler with its fans */
#define UA_RADIATOR      300.0   /* W/K, air radiator of a one-pump tank */
#define G_PASSIVE        8.0     /* W/K lost through the tank walls with every pump stopped */
#define HOT_FRACTION     0.3     /* share of the heat input that shows up as outlet excess */
#define G_MIXING         100.0   /* W/K of natural convection mixing the tank without flow */
#define RPM_TAU_S        1.0     /* a pump's speed follows its duty with this lag */
#define RESTRICTION_TAU  0.5     /* a filter clogs or a leak opens within a second */
#define AMBIENT_TAU_S    60.0    /* outside air warms or cools slowly */
#define STEP_S           0.1     /* integration step; far below every time constant */

void sim_model_params_default(struct sim_model_params *p)
{
    *p = (struct sim_model_params){
        .n_pumps = 2,
        .n_gpus = 4,
        .gpu_watts = 450,
        .host_watts = 300,
        .ambient_c = 25,
        .speed = 1,
        .seed = 1,
        .noise = true,
    };
}

void sim_model_init(struct sim_model *m, const struct sim_model_params *p)
{
    memset(m, 0, sizeof(*m));
    m->params = *p;
    if (m->params.n_pumps < 1)
        m->params.n_pumps = 1;
    if (m->params.n_pumps > CTL_PUMPS_MAX)
        m->params.n_pumps = CTL_PUMPS_MAX;
    m->tank_c = p->ambient_c;
    m->ambient_c = p->ambient_c;
    m->ambient_target_c = p->ambient_c;
    m->restriction = 1.0;
    m->restriction_target = 1.0;
    sim_rng_seed(&m->rng, p->seed);
}

void sim_model_set_duty(struct sim_model *m, unsigned pump, int duty)
{
    if (pump >= m->params.n_pumps)
        return;
    m->duty[pump] = duty < 0 ? 0 : duty > 100 ? 100 : duty;
}

double sim_model_heat_watts(const struct sim_model *m)
{
    return m->params.n_gpus * m->params.gpu_watts + m->params.host_watts;
}

/* Primary loop flow in L/min: proportional to pump 1's speed, times the loop's restriction. */
static double primary_flow(const struct sim_model *m)
{
    return FLOW_PRIMARY_MAX * m->rpm[0] / SIM_RPM_MAX * m->restriction;
}

/* Water loop flow in L/min: the water pumps run in parallel, so their flows add. */
static double water_flow(const struct sim_model *m)
{
    double f = 0;
    for (unsigned i = 1; i < m->params.n_pumps; i++)
        f += FLOW_WATER_MAX * m->rpm[i] / SIM_RPM_MAX;
    return f;
}

/* Conductance (W/K) from the tank fluid to the ambient air through the loops. */
static double loop_conductance(const struct sim_model *m)
{
    double c_primary = primary_flow(m) / 60.0 * CP_OIL;
    if (c_primary <= 0)
        return 0;
    double resistance = 1.0 / c_primary;
    if (m->params.n_pumps == 1) {
        resistance += 1.0 / UA_RADIATOR;
    } else {
        double c_water = water_flow(m) / 60.0 * CP_WATER;
        if (c_water <= 0)
            return 0;
        resistance += 1.0 / UA_EXCHANGER + 1.0 / c_water + 1.0 / UA_DRY_COOLER;
    }
    return 1.0 / resistance;
}

/* Moves x towards target with time constant tau over dt (exact for a first-order lag). */
static double approach(double x, double target, double tau, double dt)
{
    return target + (x - target) * exp(-dt / tau);
}

/* One integration step: dt of real time for the pumps and the flow, dt_thermal for the
 * temperatures. */
static void step_once(struct sim_model *m, double dt, double dt_thermal)
{
    for (unsigned i = 0; i < m->params.n_pumps; i++) {
        double target = m->pump_failed[i] ? 0 : SIM_RPM_MAX * m->duty[i] / 100.0;
        m->rpm[i] = approach(m->rpm[i], target, RPM_TAU_S, dt);
    }
    m->restriction = approach(m->restriction, m->restriction_target, RESTRICTION_TAU, dt);
    m->ambient_c = approach(m->ambient_c, m->ambient_target_c, AMBIENT_TAU_S, dt_thermal);

    double excess = m->tank_c - m->ambient_c;
    double rejected = (loop_conductance(m) + G_PASSIVE) * excess;
    m->tank_c += (sim_model_heat_watts(m) - rejected) * dt_thermal / TANK_CAPACITY;
}

void sim_model_step(struct sim_model *m, double dt_s)
{
    double speed = m->params.speed > 0 ? m->params.speed : 1;
    double longest = dt_s * (speed > 1 ? speed : 1);

    if (!(dt_s > 0))
        return;
    /* Both clocks must stay far below their time constants in every step. */
    double n = ceil(longest / STEP_S);
    double dt = dt_s / n;
    for (double i = 0; i < n; i++)
        step_once(m, dt, dt * speed);
}

/* The true (noise-free) temperatures of the three sensors. The outlet draws the fluid that just
 * passed the GPUs, hotter than the bulk by a share of the heat input over the mixing; the inlet
 * returns cooled by what the primary loop carried away. */
static void true_temps(const struct sim_model *m, double ret[SIM_SENSORS])
{
    double c_primary = primary_flow(m) / 60.0 * CP_OIL;
    double outlet = m->tank_c + HOT_FRACTION * sim_model_heat_watts(m) / (c_primary + G_MIXING);
    double inlet = m->tank_c;
    if (c_primary > 1.0)
        inlet = outlet - loop_conductance(m) * (m->tank_c - m->ambient_c) / c_primary;
    ret[SIM_SENSOR_INLET] = inlet;
    ret[SIM_SENSOR_OUTLET] = outlet;
    ret[SIM_SENSOR_TANK] = m->tank_c;
}

static double noise(struct sim_model *m, double sd)
{
    return m->params.noise ? sd * sim_rng_noise(&m->rng) : 0;
}

void sim_model_read(struct sim_model *m, struct sim_reading *ret)
{
    struct sim_reading r = {.n_sensors = SIM_SENSORS, .n_pumps = m->params.n_pumps};
    double t[SIM_SENSORS];

    true_temps(m, t);
    for (unsigned i = 0; i < SIM_SENSORS; i++) {
        r.sensor_ok[i] = !m->sensor_fault[i];
        r.temp_centi[i] = r.sensor_ok[i] ? lround((t[i] + noise(m, 0.05)) * 100) : 0;
    }
    for (unsigned i = 0; i < m->params.n_pumps; i++) {
        double rpm = m->rpm[i] + (m->rpm[i] > 100 ? noise(m, 8) : 0);
        r.rpm[i] = rpm < 0 ? 0 : lround(rpm);
        r.duty[i] = m->duty[i];
    }
    double flow = primary_flow(m);
    flow += flow > 0.5 ? noise(m, 0.05) : 0;
    r.flow_centi = flow < 0 ? 0 : lround(flow * 100);
    *ret = r;
}

void sim_model_settle(struct sim_model *m, double seconds,
                      int (*duty_fn)(const struct sim_reading *r, unsigned pump, void *userdata),
                      void *userdata)
{
    bool noise_was = m->params.noise;
    double speed_was = m->params.speed;

    m->params.noise = false;
    m->params.speed = 1;
    for (double t = 0; t < seconds; t += 1.0) {
        struct sim_reading r;
        sim_model_read(m, &r);
        for (unsigned i = 0; i < m->params.n_pumps; i++)
            sim_model_set_duty(m, i, duty_fn(&r, i, userdata));
        sim_model_step(m, 1.0);
    }
    m->params.noise = noise_was;
    m->params.speed = speed_was;
}

void sim_model_fail_pump(struct sim_model *m, unsigned pump, bool failed)
{
    if (pump < m->params.n_pumps)
        m->pump_failed[pump] = failed;
}

void sim_model_fail_sensor(struct sim_model *m, unsigned sensor, bool faulted)
{
    if (sensor < SIM_SENSORS)
        m->sensor_fault[sensor] = faulted;
}

void sim_model_restrict_flow(struct sim_model *m, double factor)
{
    m->restriction_target = factor < 0 ? 0 : factor > 1 ? 1 : factor;
}

void sim_model_set_ambient(struct sim_model *m, double celsius)
{
    m->ambient_target_c = celsius;
}
