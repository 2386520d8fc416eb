/* capsule-cached: the node cache's service (cached.h). Parses arguments, opens the node store,
 * serves the socket (and /metrics on TCP when configured) until SIGTERM. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/cached/cached.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/service.h"

static void usage(FILE *out)
{
    fprintf(out, "Usage: capsule-cached [--config FILE] [options]\n"
                 "\n"
                 "capsule's node-wide image cache: pulls and unpacks images once for every user\n"
                 "of the node, with each requester's own registry credentials (docs/capsule.md).\n"
                 "Runs as its own system account (capsule-cache), never as root.\n"
                 "\n"
                 "  -c, --config FILE     configuration (default " CACHED_CONFIG_PATH ")\n"
                 "      --dir PATH        the node store (default " CACHED_DIR_DEFAULT ")\n"
                 "      --socket PATH     the Unix socket (default " CACHED_SOCKET_DEFAULT ")\n"
                 "      --metrics H:P     also serve /metrics on TCP\n"
                 "      --log-level LEVEL err, warning, notice, info (default) or debug\n"
                 "      --check-config    load the configuration, report errors and exit\n"
                 "  -V, --version\n"
                 "  -h, --help\n");
}

struct args {
    const char *config, *dir, *socket, *metrics;
    int level;
    bool check;
};

/* 0 to go on, 1 to exit 0 (--help, --version), 2 on a usage error. */
static int parse_args(int argc, char **argv, struct args *a)
{
    enum { OPT_DIR = 256, OPT_SOCKET, OPT_METRICS, OPT_LEVEL, OPT_CHECK };
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"dir", required_argument, NULL, OPT_DIR},
        {"socket", required_argument, NULL, OPT_SOCKET},
        {"metrics", required_argument, NULL, OPT_METRICS},
        {"log-level", required_argument, NULL, OPT_LEVEL},
        {"check-config", no_argument, NULL, OPT_CHECK},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "c:Vh", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            a->config = optarg;
            break;
        case OPT_DIR:
            a->dir = optarg;
            break;
        case OPT_SOCKET:
            a->socket = optarg;
            break;
        case OPT_METRICS:
            a->metrics = optarg;
            break;
        case OPT_LEVEL:
            if ((a->level = log_level_from_string(optarg)) < 0) {
                fprintf(stderr, "capsule-cached: unknown log level '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_CHECK:
            a->check = true;
            break;
        case 'V':
            printf("capsule-cached %s\n", GPUNODE_VERSION);
            return 1;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    return 0;
}

/* Flags win over the file. */
static int override(char **dst, const char *flag)
{
    if (!flag)
        return 0;
    char *copy = strdup(flag);
    if (!copy)
        return -ENOMEM;
    free(*dst);
    *dst = copy;
    return 0;
}

static int serve(struct cached *c, const struct cached_config *cfg)
{
    struct errmsg e = {{0}};
    int sig = service_signals_open();
    if (sig < 0) {
        log_error_errno(sig, "Cannot set up signals");
        return sig;
    }
    _cleanup_(http_server_freep) struct http_server *api = NULL, *metrics = NULL;
    /* Everyone may connect: what each caller may do is decided by its peer credentials. */
    int r = http_server_new_unix(cfg->socket, 0666, cached_handle, c, &api, &e);
    /* A pull holds its connection for its whole download: one user's job array may start many at
     * once on a node, and they queue on the layers' locks, not on connection slots. */
    if (r >= 0)
        http_server_set_max_per_uid(api, HTTP_SERVER_MAX_UNPRIVILEGED - 8);
    if (r >= 0 && cfg->metrics)
        r = http_server_new_tcp(cfg->metrics, cached_handle_metrics, c, &metrics, &e);
    if (r < 0) {
        log_error("%s", e.text);
        close(sig);
        return r;
    }
    service_ready("serving");
    log_info("Serving the node cache %s on %s", cfg->dir, cfg->socket);
    struct service_watchdog w;
    service_watchdog_init(&w);
    for (;;) {
        service_watchdog_ping(&w, clock_now_usec());
        struct pollfd p = {.fd = sig, .events = POLLIN};
        if (poll(&p, 1, service_watchdog_timeout_ms(&w, clock_now_usec())) > 0 &&
            service_signals_read(sig) == SERVICE_SIGNAL_STOP)
            break;
    }
    service_stopping();
    close(sig);
    return 0;
}

/* A pull holds a lock (an fd) per distinct layer of its image until its record is saved, and
 * the service runs many at once: the soft limit (often 1024) is raised to the hard one. */
static void raise_fd_limit(void)
{
    struct rlimit l;
    if (getrlimit(RLIMIT_NOFILE, &l) == 0 && l.rlim_cur < l.rlim_max) {
        l.rlim_cur = l.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &l) < 0)
            log_warning("cannot raise the open files limit: %m");
    }
}

int main(int argc, char **argv)
{
    struct args a = {.level = LOG_LEVEL_INFO};
    int k = parse_args(argc, argv, &a);
    if (k)
        return k == 1 ? 0 : 2;
    log_setup("capsule-cached", (enum log_level)a.level);
    log_enable_journal();
    struct errmsg e = {{0}};
    struct cached_config cfg;
    if (cached_config_load(a.config, &cfg, &e) < 0) {
        log_error("%s", e.text);
        return 1;
    }
    if (override(&cfg.dir, a.dir) < 0 || override(&cfg.socket, a.socket) < 0 ||
        override(&cfg.metrics, a.metrics) < 0) {
        log_error("out of memory");
        return 1;
    }
    if (a.check) {
        printf("%s: OK\n", a.config ? a.config : CACHED_CONFIG_PATH);
        cached_config_done(&cfg);
        return 0;
    }
    /* Root would make every layer root's and every path reachable: the account exists so that
     * the service holds nothing a user does not. */
    if (geteuid() == 0) {
        log_error("capsule-cached must not run as root: run it as its own account "
                  "(useradd --system capsule-cache; the systemd unit sets User=)");
        cached_config_done(&cfg);
        return 1;
    }
    umask(022);
    raise_fd_limit();
    struct cached c;
    int r = cached_init(&c, &cfg, &e);
    if (r < 0)
        log_error("%s", e.text);
    else
        r = serve(&c, &cfg);
    cached_done(&c);
    cached_config_done(&cfg);
    return r < 0 ? 1 : 0;
}
