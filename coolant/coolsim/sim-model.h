/* The thermal model of an immersion tank, as seen by the controller's sensors.
 *
 * Topology (the constants are in sim-model.c): the GPUs and the host heat the tank's dielectric
 * fluid. Pump 1 circulates that fluid from the tank's hot outlet through a plate heat exchanger
 * and back to the inlet; the flow meter sits in this loop. Pumps 2..n drive the external water
 * loop, in parallel, from the heat exchanger to a dry cooler outside. Heat leaves only through
 * both loops in series, so either kind of pump stopping collapses heat rejection and the tank
 * heats by several degrees a minute. With one pump the primary loop runs through an air radiator.
 *
 * The model is plain arithmetic on doubles with no clock of its own: the caller steps it by
 * seconds. params.speed makes the thermal part (tank and ambient temperatures) run faster than
 * that, for short test runs; pumps and flow keep real time, so what the controller sees of them
 * (a pump spinning down below 200 rpm) takes as long as it would on real hardware. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "ctl-proto.h"
#include "sim-rng.h"

#define SIM_SENSORS      3 /* inlet, outlet, tank */
#define SIM_SENSOR_NAMES "inlet,outlet,tank"
#define SIM_RPM_MAX      4400.0

enum sim_sensor {
    SIM_SENSOR_INLET,
    SIM_SENSOR_OUTLET,
    SIM_SENSOR_TANK,
};

/* One sample of everything the controller measures. Pumps and sensors are indexed from 0 here;
 * the protocol numbers them from 1. */
struct sim_reading {
    unsigned n_sensors;
    unsigned n_pumps;
    bool sensor_ok[CTL_SENSORS_MAX];
    long temp_centi[CTL_SENSORS_MAX]; /* meaningful only where sensor_ok */
    int duty[CTL_PUMPS_MAX];          /* commanded duty, % */
    long rpm[CTL_PUMPS_MAX];
    long flow_centi; /* primary loop flow, L/min * 100 */
};

struct sim_model_params {
    unsigned n_pumps;  /* 1..CTL_PUMPS_MAX */
    unsigned n_gpus;   /* 0..16 */
    double gpu_watts;  /* heat per GPU under load */
    double host_watts; /* CPUs, boards, PSU losses in the tank */
    double ambient_c;  /* air temperature at the dry cooler */
    double speed;      /* thermal time per step time; 1 = real time */
    uint64_t seed;     /* sensor noise */
    bool noise;        /* false for exact, reproducible values in tests */
};

struct sim_model {
    struct sim_model_params params;
    double tank_c;           /* bulk fluid temperature */
    double ambient_c;        /* current ambient */
    double ambient_target_c; /* ambient drifts towards this (weather, a failed dry-cooler fan) */
    double restriction;      /* primary loop flow factor, 1 = clean; drifts to the target */
    double restriction_target;
    double rpm[CTL_PUMPS_MAX];
    int duty[CTL_PUMPS_MAX];
    bool pump_failed[CTL_PUMPS_MAX];
    bool sensor_fault[SIM_SENSORS];
    struct sim_rng rng;
};

/* Fills the default parameters: 2 pumps, 4 GPUs x 450 W, 300 W host, 25 C ambient, speed 1,
 * seed 1, noise on. */
void sim_model_params_default(struct sim_model_params *p);

/* Starts the model at ambient temperature with pumps stopped. Parameters out of range are
 * clamped (n_pumps to 1..CTL_PUMPS_MAX). */
void sim_model_init(struct sim_model *m, const struct sim_model_params *p);

/* Commands pump `pump` (from 0) to `duty` percent, clamped to 0..100. */
void sim_model_set_duty(struct sim_model *m, unsigned pump, int duty);

/* Advances the model by dt_s seconds, the thermal part by dt_s x params.speed (any size: it is
 * cut into small steps). */
void sim_model_step(struct sim_model *m, double dt_s);

/* Samples the sensors, with noise when enabled. Faulted sensors read sensor_ok = false. */
void sim_model_read(struct sim_model *m, struct sim_reading *ret);

/* Runs the model for `seconds` seconds at speed 1, without noise, with pump duties chosen by
 * duty_fn (the duty of pump `pump`, from 0, for a reading) once a simulated second, so that a
 * simulation can start from the tank's steady state. */
void sim_model_settle(struct sim_model *m, double seconds,
                      int (*duty_fn)(const struct sim_reading *r, unsigned pump, void *userdata),
                      void *userdata);

/* Failure injection, all from the scenarios. Pump and sensor numbers are from 0; out-of-range
 * numbers are ignored. */
void sim_model_fail_pump(struct sim_model *m, unsigned pump, bool failed);
void sim_model_fail_sensor(struct sim_model *m, unsigned sensor, bool faulted);
/* Sets the primary-loop flow factor the loop drifts to (0..1; 1 = clean filter). */
void sim_model_restrict_flow(struct sim_model *m, double factor);
/* Sets the ambient temperature the dry cooler's air drifts to. */
void sim_model_set_ambient(struct sim_model *m, double celsius);

/* Heat input, W: GPUs plus host. */
double sim_model_heat_watts(const struct sim_model *m);
