/* gpuqd: the GPU job queue's daemon. Parses arguments, finds its helpers, runs the daemon. */
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpuq/gpuqd/daemon.h"
#include "gpuq/policy/gpuq-config.h"
#include "lib/log.h"

#ifndef GPUQ_SBINDIR
#define GPUQ_SBINDIR "/usr/local/sbin"
#endif
#ifndef GPUQ_LIBEXECDIR
#define GPUQ_LIBEXECDIR "/usr/local/libexec/gpunode"
#endif
/* Read when --config is not given and it exists; no file: the defaults (one queue, all GPUs). */
#define GPUQD_CONFIG "/etc/gpunode/gpuqd.conf"

#ifndef GPUQ_BINDIR
#define GPUQ_BINDIR "/usr/local/bin"
#endif

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: gpuqd [--config FILE] [options]\n"
            "\n"
            "The GPU job queue: schedules users' jobs onto this node's GPUs by queue,\n"
            "service class, quota calendar and priority, preempts with each job's\n"
            "checkpoint signal and grace, and serves the gpuq command.\n"
            "\n"
            "  -c, --config FILE      configuration (docs/gpuq.md); none: one queue, all GPUs\n"
            "      --nvml-library PATH NVML to load (default libnvidia-ml.so.1)\n"
            "      --run-program PATH gpuq-run, the per-run supervisor\n"
            "      --log-level LEVEL  err, warning, notice, info (default) or debug\n"
            "      --check-config     load the configuration, report errors and exit\n"
            "  -V, --version\n"
            "  -h, --help\n");
}

/* The installed helpers for the installed gpuqd; the build tree's for a build tree's, never a
 * mix (a test of a build must not run an installed gpuq-run). */
static void find_helpers(char *run, char *capsule, size_t size)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    bool installed = n <= 0 || strcmp(self, GPUQ_SBINDIR) == 0;
    /* A path too long to run is cut and then fails to execute with a message naming it. */
    if (snprintf(run, size, "%s%s", installed ? GPUQ_LIBEXECDIR : self,
                 installed ? "/gpuq-run" : "/../run/gpuq-run") >= (int)size ||
        snprintf(capsule, size, "%s%s", installed ? GPUQ_BINDIR : self,
                 installed ? "/capsule" : "/../../capsule/capsule") >= (int)size)
        run[size - 1] = capsule[size - 1] = '\0';
}

int main(int argc, char **argv)
{
    enum { OPT_NVML = 256, OPT_RUN, OPT_LEVEL, OPT_CHECK };
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"nvml-library", required_argument, NULL, OPT_NVML},
        {"run-program", required_argument, NULL, OPT_RUN},
        {"log-level", required_argument, NULL, OPT_LEVEL},
        {"check-config", no_argument, NULL, OPT_CHECK},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    static char run[PATH_MAX], capsule[PATH_MAX];
    find_helpers(run, capsule, sizeof(run));
    struct gpuqd_options o = {.run_program = run, .capsule_program = capsule};
    bool check_only = false;
    int level = LOG_LEVEL_INFO, opt;
    while ((opt = getopt_long(argc, argv, "c:Vh", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            o.config_path = optarg;
            break;
        case OPT_NVML:
            o.nvml_library = optarg;
            break;
        case OPT_RUN:
            o.run_program = optarg;
            break;
        case OPT_LEVEL:
            level = log_level_from_string(optarg);
            if (level < 0) {
                fprintf(stderr, "gpuqd: unknown log level '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_CHECK:
            check_only = true;
            break;
        case 'V':
            printf("gpuqd %s\n", GPUNODE_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    if (!o.config_path && access(GPUQD_CONFIG, F_OK) == 0)
        o.config_path = GPUQD_CONFIG;
    log_setup("gpuqd", (enum log_level)level);
    log_enable_journal();
    struct errmsg e = {{0}};
    if (check_only) {
        struct gpuqd_config cfg;
        if (gpuqd_config_load(o.config_path, &cfg, &e) < 0) {
            log_error("%s", e.text);
            return 1;
        }
        gpuqd_config_done(&cfg);
        printf("%s: OK\n", o.config_path ? o.config_path : "(defaults)");
        return 0;
    }
    if (geteuid() != 0)
        log_warning("not running as root: jobs can run only as gpuqd's own user");
    struct gpuqd *d = NULL;
    if (gpuqd_new(&o, &d, &e) < 0) {
        log_error("%s", e.text);
        return 1;
    }
    int r = gpuqd_run(d);
    gpuqd_free(d);
    return r < 0 ? 1 : 0;
}
