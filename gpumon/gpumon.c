/* gpumon: GPU telemetry exporter for Prometheus. Parses arguments, loads the config, wires the
 * sampler to the HTTP server, logs what changes and waits for a stop signal. */
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpumon-config.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/service.h"
#include "sampler.h"
#include "server.h"

static void usage(FILE *out)
{
    fprintf(
        out,
        "Usage: gpumon [OPTIONS]\n"
        "\n"
        "Exports GPU telemetry read through NVML on /metrics, with dcgm-exporter's metric\n"
        "names, for Prometheus.\n"
        "\n"
        "  -c, --config FILE          configuration file ([gpumon] section, see docs/gpumon.md)\n"
        "  -l, --listen ADDR:PORT     where to serve /metrics (default " GPUMON_DEFAULT_LISTEN ")\n"
        "  -i, --interval DUR         fast sampling interval (default 1s)\n"
        "      --slow-interval DUR    energy, remapped rows, PCIe throughput, MIG layout\n"
        "                             (default 10s)\n"
        "      --nvml-library PATH    NVML to load (default libnvidia-ml.so.1 via the loader)\n"
        "      --hostname NAME        the Hostname label (default: this host's name)\n"
        "      --proc-root DIR        where to look up GPU processes (default /proc)\n"
        "  -f, --collectors FILE      show only the DCGM fields this dcgm-exporter collectors\n"
        "                             CSV lists (default: all gpumon has)\n"
        "      --log-level LEVEL      err, warning, notice, info (default) or debug\n"
        "      --check-config         check the configuration, report errors and exit\n"
        "  -V, --version\n"
        "  -h, --help\n");
}

enum {
    OPT_SLOW_INTERVAL = 0x100,
    OPT_NVML_LIBRARY,
    OPT_HOSTNAME,
    OPT_PROC_ROOT,
    OPT_LOG_LEVEL,
    OPT_CHECK_CONFIG,
};

/* Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct gpumon_flags *f, int *level, bool *check)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"listen", required_argument, NULL, 'l'},
        {"interval", required_argument, NULL, 'i'},
        {"slow-interval", required_argument, NULL, OPT_SLOW_INTERVAL},
        {"nvml-library", required_argument, NULL, OPT_NVML_LIBRARY},
        {"hostname", required_argument, NULL, OPT_HOSTNAME},
        {"proc-root", required_argument, NULL, OPT_PROC_ROOT},
        {"collectors", required_argument, NULL, 'f'},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"check-config", no_argument, NULL, OPT_CHECK_CONFIG},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "c:l:i:f:Vh", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            f->config_path = optarg;
            break;
        case 'l':
            f->listen = optarg;
            break;
        case 'i':
            f->interval = optarg;
            break;
        case OPT_SLOW_INTERVAL:
            f->slow_interval = optarg;
            break;
        case OPT_NVML_LIBRARY:
            f->nvml_library = optarg;
            break;
        case OPT_HOSTNAME:
            f->hostname = optarg;
            break;
        case OPT_PROC_ROOT:
            f->proc_root = optarg;
            break;
        case 'f':
            f->collectors = optarg;
            break;
        case OPT_LOG_LEVEL:
            *level = log_level_from_string(optarg);
            if (*level < 0) {
                fprintf(stderr, "gpumon: unknown log level '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_CHECK_CONFIG:
            *check = true;
            break;
        case 'V':
            printf("gpumon %s\n", GPUNODE_VERSION);
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
    return -1;
}

/* What the log has said so far, so that only changes are logged. */
struct watch {
    bool logged;
    bool up;
    unsigned n_gpu, n_lost;
};

static void log_changes(struct watch *w, const struct snapshot *s)
{
    unsigned lost = 0;
    for (unsigned i = 0; i < s->n_gpu; i++)
        lost += s->gpu[i].lost;
    if (!w->logged || s->up != w->up || s->n_gpu != w->n_gpu) {
        if (s->up)
            log_info("NVML is up: %u GPU(s), driver %s", s->n_gpu,
                     s->driver_version[0] ? s->driver_version : "unknown");
        else
            log_warning("NVML is not available, retrying: %s", s->reason);
    }
    if (s->up && (lost != w->n_lost || !w->logged))
        for (unsigned i = 0; i < s->n_gpu; i++)
            if (s->gpu[i].lost)
                log_warning("GPU %u (%s) is lost", s->gpu[i].id.index,
                            s->gpu[i].id.uuid[0] ? s->gpu[i].id.uuid : "UUID unknown");
    if (s->up && w->logged && lost < w->n_lost)
        log_notice("%u GPU(s) answer again, %u lost", w->n_lost - lost, lost);
    *w = (struct watch){.logged = true, .up = s->up, .n_gpu = s->n_gpu, .n_lost = lost};
}

static double unix_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Waits for SIGTERM/SIGINT, logging sampler changes and pinging the watchdog meanwhile. The
 * watchdog is pinged only while samples stay fresh, so a sampler stuck in the driver gets
 * gpumon restarted. */
static void run(struct sampler *s, const struct gpumon_config *cfg, int signal_fd)
{
    struct service_watchdog wd;
    service_watchdog_init(&wd);
    double wd_s = (double)wd.interval_usec / 1e6;
    int tick_ms = (int)(cfg->interval_s * 1000);
    double fresh = 3 * cfg->interval_s > wd_s / 2 ? 3 * cfg->interval_s : wd_s / 2;
    struct watch w = {0};
    for (;;) {
        struct snapshot *snap = sampler_current(s);
        log_changes(&w, snap);
        bool stale = unix_now() - snap->taken_at > fresh;
        snapshot_unref(snap);
        uint64_t now = clock_now_usec();
        /* Stale: no ping, and no hurry either (the watchdog is meant to run out). */
        int timeout = -1;
        if (!stale) {
            service_watchdog_ping(&wd, now);
            timeout = service_watchdog_timeout_ms(&wd, now);
        }
        struct pollfd p = {.fd = signal_fd, .events = POLLIN};
        if (poll(&p, 1, timeout < 0 || timeout > tick_ms ? tick_ms : timeout) <= 0)
            continue;
        enum service_signal sig = service_signals_read(signal_fd);
        if (sig == SERVICE_SIGNAL_RELOAD)
            log_info("SIGHUP ignored: restart gpumon to reload its configuration");
        else if (sig == SERVICE_SIGNAL_STOP)
            return;
    }
}

static int start(const struct gpumon_config *cfg, int signal_fd)
{
    struct sampler_config sc = {
        .nvml_library = cfg->nvml_library,
        .hostname = cfg->hostname,
        .proc_root = cfg->proc_root,
        .sysfs_root = cfg->sysfs_root,
        .interval_s = cfg->interval_s,
        .slow_interval_s = cfg->slow_interval_s,
        .rescan_interval_s = cfg->rescan_interval_s,
        .process_metrics = cfg->process_metrics,
        .pcie_throughput = cfg->pcie_throughput,
        .profiling = expose_wants_profiling(&cfg->selection),
    };
    struct errmsg e = {""};
    _cleanup_(sampler_freep) struct sampler *s = NULL;
    int r = sampler_new(&sc, &s, &e);
    if (r < 0)
        return log_error_errno(r, "%s", e.text);
    _cleanup_(server_freep) struct server *srv = NULL;
    struct expose_opts eo = {.sel = &cfg->selection};
    r = server_new(cfg->listen, s, cfg->interval_s, &eo, &srv, &e);
    if (r < 0)
        return log_error_errno(r, "%s", e.text);
    log_info("gpumon %s serving /metrics on %s (port %u), sampling every %gs", GPUNODE_VERSION,
             cfg->listen, server_port(srv), cfg->interval_s);
    /* dcgm-exporter skips such rows too; a site's file must load, but not silently. */
    for (char **k = cfg->collectors_skipped; k && *k; k++)
        log_warning("%s: %s is a DCGM field gpumon does not offer; skipped", cfg->collectors, *k);
    /* An empty file (a ConfigMap mounted under the wrong key) would silently hide every GPU. */
    if (cfg->collectors[0] && !cfg->selection.fields && !cfg->selection.xid_errors)
        log_warning("%s selects no DCGM field gpumon offers: only gpumon_* metrics are shown",
                    cfg->collectors);
    service_ready("Exporting GPU metrics");
    run(s, cfg, signal_fd);
    service_stopping();
    /* The server goes first: it holds references into the sampler. */
    server_free(TAKE_PTR(srv));
    return 0;
}

int main(int argc, char **argv)
{
    struct gpumon_flags flags = {0};
    int level = LOG_LEVEL_INFO;
    bool check = false;
    int status = parse_args(argc, argv, &flags, &level, &check);
    if (status >= 0)
        return status;
    log_setup("gpumon", (enum log_level)level);
    log_enable_journal();

    struct gpumon_config cfg;
    struct errmsg e = {""};
    if (gpumon_config_load(&flags, &cfg, &e) < 0) {
        log_error("%s", e.text);
        return 1;
    }
    if (check) {
        printf("%s: OK\n", flags.config_path ? flags.config_path : "configuration");
        gpumon_config_done(&cfg);
        return 0;
    }
    /* Before any thread starts: only the signalfd that run() polls sees them. */
    _cleanup_close_ int signal_fd = service_signals_open();
    if (signal_fd < 0) {
        log_error_errno(signal_fd, "cannot create a signalfd");
        gpumon_config_done(&cfg);
        return 1;
    }
    int r = start(&cfg, signal_fd);
    gpumon_config_done(&cfg);
    return r < 0 ? 1 : 0;
}
