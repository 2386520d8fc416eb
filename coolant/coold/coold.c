/* coold: the cooling-controller daemon. Parses arguments, loads the config, runs the daemon. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon-run.h"
#include "lib/log.h"

static void usage(FILE *out)
{
    fprintf(out, "Usage: coold --config FILE [--drill] [--log-level LEVEL]\n"
                 "\n"
                 "Owns the cooling controller's serial line, exports its telemetry on /metrics,\n"
                 "serves the control API for coolctl, and turns a pre-critical alarm into an\n"
                 "orderly host stop before the controller cuts power.\n"
                 "\n"
                 "  -c, --config FILE     configuration file (see docs/coold.md)\n"
                 "      --drill           run every shutdown stage without stopping anything\n"
                 "      --log-level LEVEL err, warning, notice, info (default) or debug\n"
                 "      --check-config    load the configuration, report errors and exit\n"
                 "  -V, --version\n"
                 "  -h, --help\n");
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"drill", no_argument, NULL, 'd'},
        {"log-level", required_argument, NULL, 'l'},
        {"check-config", no_argument, NULL, 'k'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    const char *config_path = NULL;
    bool drill = false, check_only = false;
    int level = LOG_LEVEL_INFO, opt;
    while ((opt = getopt_long(argc, argv, "c:Vh", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            config_path = optarg;
            break;
        case 'd':
            drill = true;
            break;
        case 'k':
            check_only = true;
            break;
        case 'l':
            level = log_level_from_string(optarg);
            if (level < 0) {
                fprintf(stderr, "coold: unknown log level '%s'\n", optarg);
                return 2;
            }
            break;
        case 'V':
            printf("coold %s\n", GPUNODE_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!config_path || optind < argc) {
        usage(stderr);
        return 2;
    }
    log_setup("coold", (enum log_level)level);
    log_enable_journal();

    struct coold_config cfg;
    struct errmsg e = {{0}};
    int r = coold_config_load(config_path, &cfg, &e);
    if (r < 0) {
        log_error("%s", e.text);
        return 1;
    }
    cfg.drill = cfg.drill || drill;
    if (check_only) {
        coold_config_done(&cfg);
        printf("%s: OK\n", config_path);
        return 0;
    }
    struct daemon *d = NULL;
    r = daemon_new(&cfg, &d, &e);
    if (r < 0) {
        log_error("%s", e.text);
        return 1;
    }
    r = daemon_run(d);
    daemon_free(d);
    return r < 0 ? 1 : 0;
}
