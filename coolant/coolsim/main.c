/* coolsim: a stand-in for the immersion tank's cooling controller, driven by named scenarios.
 * Argument parsing and wiring only; the simulator lives in the sim-*.c files. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "sim-report.h"
#include "sim-run.h"
#include "sim-scenario.h"

/* A mistake on the command line: said once, without an errno text that would add nothing. */
#define usage_error(...) (log_error(__VA_ARGS__), -EINVAL)

static void help(void)
{
    printf("Usage: coolsim --list-scenarios\n"
           "       coolsim --scenario NAME --link PATH [options]\n"
           "\n"
           "Simulates the cooling controller of an immersion tank on a pseudo-terminal, for\n"
           "testing the coold daemon against it.\n"
           "\n"
           "  --scenario NAME     what happens during the run (see --list-scenarios)\n"
           "  --link PATH         symlink to the pty slave that the daemon opens; a stale\n"
           "                      symlink is replaced, and the link is removed at exit\n"
           "  --eeprom FILE       keep settings in FILE across SET, reboots and restarts;\n"
           "                      without it they live in memory\n"
           "  --speed X           run the tank's temperatures X times faster than real time\n"
           "                      (default 1, at most 1000). Only heating and cooling speed\n"
           "                      up: heartbeats, cut delays, HALT deferrals, host timeouts,\n"
           "                      pump spin-down and the scenario's timeline stay in real\n"
           "                      seconds, as the daemon would see them\n"
           "  --duration SECONDS  end the run normally after SECONDS (default: until\n"
           "                      SIGTERM/SIGINT or a power cut)\n"
           "  --report FILE       also write the end-of-run report to FILE as JSON\n"
           "  --seed N            seed for sensor noise and line garbage (default 1)\n"
           "  --gpus N            GPUs in the tank (default 4)\n"
           "  --gpu-watts W       heat per GPU under load (default 450)\n"
           "  --pumps N           pumps, 1-%d (default 2): pump 1 circulates the tank,\n"
           "                      the others drive the dry-cooler water loop\n"
           "  --log-level LEVEL   err, warning, notice, info (default) or debug\n"
           "  --list-scenarios    list the scenarios and exit\n"
           "\n"
           "Exit status: 0 when no power cut hit a running host (no cut, or a cut after\n"
           "HALT), 2 when power was cut under a host that never sent HALT, 1 on errors.\n",
           CTL_PUMPS_MAX);
}

static void list_scenarios(void)
{
    size_t n;
    const struct sim_scenario *s = sim_scenarios(&n);

    for (size_t i = 0; i < n; i++)
        printf("%-18s %s\n", s[i].name, s[i].description);
}

static int parse_double(const char *s, double min, double max, double *ret)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= min && v <= max))
        return -EINVAL;
    *ret = v;
    return 0;
}

enum {
    OPT_LIST = 0x100,
    OPT_SCENARIO,
    OPT_LINK,
    OPT_EEPROM,
    OPT_SPEED,
    OPT_DURATION,
    OPT_REPORT,
    OPT_SEED,
    OPT_GPUS,
    OPT_GPU_WATTS,
    OPT_PUMPS,
    OPT_LOG_LEVEL,
};

struct args {
    struct sim_run_config run;
    const char *scenario;
    const char *report;
    bool list;
};

/* Parses one numeric option into its field; returns 0 or -EINVAL. */
static int parse_number(struct args *a, int opt, const char *v)
{
    double d;

    switch (opt) {
    case OPT_SPEED:
        return parse_double(v, 0.001, 1000, &a->run.speed);
    case OPT_DURATION:
        return parse_double(v, 0.001, 1e9, &a->run.duration_s);
    case OPT_SEED:
        if (parse_double(v, 0, 1e18, &d) < 0)
            return -EINVAL;
        a->run.model.seed = (uint64_t)d;
        return 0;
    case OPT_GPUS:
        if (parse_double(v, 0, 16, &d) < 0 || d != (unsigned)d)
            return -EINVAL;
        a->run.model.n_gpus = (unsigned)d;
        return 0;
    case OPT_GPU_WATTS:
        return parse_double(v, 0, 2000, &a->run.model.gpu_watts);
    case OPT_PUMPS:
        if (parse_double(v, 1, CTL_PUMPS_MAX, &d) < 0 || d != (unsigned)d)
            return -EINVAL;
        a->run.model.n_pumps = (unsigned)d;
        return 0;
    default:
        return -EINVAL;
    }
}

static int parse_args(int argc, char **argv, struct args *a)
{
    static const struct option options[] = {
        {"help", no_argument, NULL, 'h'},
        {"list-scenarios", no_argument, NULL, OPT_LIST},
        {"scenario", required_argument, NULL, OPT_SCENARIO},
        {"link", required_argument, NULL, OPT_LINK},
        {"eeprom", required_argument, NULL, OPT_EEPROM},
        {"speed", required_argument, NULL, OPT_SPEED},
        {"duration", required_argument, NULL, OPT_DURATION},
        {"report", required_argument, NULL, OPT_REPORT},
        {"seed", required_argument, NULL, OPT_SEED},
        {"gpus", required_argument, NULL, OPT_GPUS},
        {"gpu-watts", required_argument, NULL, OPT_GPU_WATTS},
        {"pumps", required_argument, NULL, OPT_PUMPS},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {},
    };
    int opt, level, idx = 0;

    while ((opt = getopt_long(argc, argv, "h", options, &idx)) >= 0) {
        switch (opt) {
        case 'h':
            help();
            exit(SIM_EXIT_OK);
        case OPT_LIST:
            a->list = true;
            break;
        case OPT_SCENARIO:
            a->scenario = optarg;
            break;
        case OPT_LINK:
            a->run.link = optarg;
            break;
        case OPT_EEPROM:
            a->run.eeprom = optarg;
            break;
        case OPT_REPORT:
            a->report = optarg;
            break;
        case OPT_LOG_LEVEL:
            level = log_level_from_string(optarg);
            if (level < 0)
                return usage_error("unknown log level '%s'", optarg);
            log_setup("coolsim", (enum log_level)level);
            break;
        case '?':
            return -EINVAL;
        default:
            if (parse_number(a, opt, optarg) < 0)
                return usage_error("bad value '%s' for --%s", optarg, options[idx].name);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    return 0;
}

static int check_args(struct args *a)
{
    if (a->list)
        return 0;
    if (!a->scenario || !a->run.link)
        return usage_error("--scenario and --link are required (see --help)");
    a->run.scenario = sim_scenario_find(a->scenario);
    if (!a->run.scenario)
        return usage_error("unknown scenario '%s' (see --list-scenarios)", a->scenario);
    return 0;
}

int main(int argc, char **argv)
{
    struct args a = {.run.speed = 1};
    struct sim_report report;
    struct errmsg e = {""};

    log_setup("coolsim", LOG_LEVEL_INFO);
    sim_model_params_default(&a.run.model);
    if (parse_args(argc, argv, &a) < 0 || check_args(&a) < 0)
        return SIM_EXIT_ERROR;
    if (a.list) {
        list_scenarios();
        return SIM_EXIT_OK;
    }
    int r = sim_run(&a.run, &report, &e);
    if (r < 0) {
        log_error("%s", e.text);
        return SIM_EXIT_ERROR;
    }
    sim_report_print(&report, stdout);
    fflush(stdout);
    if (a.report) {
        r = sim_report_write_json(&report, a.report, &e);
        if (r < 0) {
            log_error("%s", e.text);
            return SIM_EXIT_ERROR;
        }
    }
    return sim_report_exit_status(&report);
}
