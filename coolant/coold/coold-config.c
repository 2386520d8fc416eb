#include "coold-config.h"

#include <stdlib.h>
#include <string.h>

#include "lib/config.h"
#include "lib/macro.h"

/* Baud rates termios can set; anything else is a typo worth catching at load time. */
static const unsigned valid_bauds[] = {9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600};

static int dup_string(struct config *c, const char *sec, const char *key, const char *def,
                      char **ret)
{
    const char *v;
    int r = config_get_string(c, sec, key, def, &v);
    if (r < 0)
        return r;
    *ret = v ? strdup(v) : NULL;
    return (v && !*ret) ? -ENOMEM : 0;
}

static int load_controller(struct config *c, struct coold_config *cfg, struct errmsg *e)
{
    unsigned long baud;
    int r = dup_string(c, "controller", "device", "/dev/ttyACM0", &cfg->device);
    if (r < 0)
        return r;
    r = config_get_uint(c, "controller", "baud", 115200, 1, 4000000, &baud, e);
    if (r < 0)
        return r;
    bool ok = false;
    for (size_t i = 0; i < ELEMENTSOF(valid_bauds); i++)
        ok = ok || valid_bauds[i] == baud;
    if (!ok)
        return errmsg_set(e, -EINVAL, "%s:%u: [controller] baud %lu is not a serial speed",
                          config_path(c), config_line(c, "controller", "baud"), baud);
    cfg->baud = (unsigned)baud;
    if ((r = config_get_duration(c, "controller", "poll_interval", 1.0, &cfg->poll_interval_s, e)) <
            0 ||
        (r = config_get_duration(c, "controller", "stale_after", 3.0, &cfg->stale_after_s, e)) <
            0 ||
        (r = config_get_duration(c, "controller", "dead_after", 10.0, &cfg->dead_after_s, e)) < 0)
        return r;
    if (cfg->poll_interval_s < 0.05 || cfg->poll_interval_s > 60)
        return errmsg_set(e, -EINVAL, "%s: [controller] poll_interval must be 50ms..60s",
                          config_path(c));
    if (!(cfg->stale_after_s < cfg->dead_after_s))
        return errmsg_set(e, -EINVAL, "%s: [controller] stale_after must be below dead_after",
                          config_path(c));
    /* Data polled less often than it goes stale would always look stale. */
    if (!(cfg->poll_interval_s < cfg->stale_after_s))
        return errmsg_set(e, -EINVAL, "%s: [controller] poll_interval must be below stale_after",
                          config_path(c));
    /* The controller's heartbeat comes every second: a shorter dead time would declare a healthy
     * controller lost between two heartbeats, and losing it while hot shuts the node down. */
    if (cfg->dead_after_s < 3 || cfg->dead_after_s < 2 * cfg->poll_interval_s)
        return errmsg_set(e, -EINVAL,
                          "%s: [controller] dead_after must be at least 3s and twice poll_interval",
                          config_path(c));
    return 0;
}

static int load_control(struct config *c, struct coold_config *cfg, struct errmsg *e)
{
    char host[256];
    uint16_t port;
    int r;
    if ((r = dup_string(c, "metrics", "listen", "127.0.0.1:9420", &cfg->metrics_listen)) < 0 ||
        (r = dup_string(c, "control", "socket", "/run/coold/coold.sock", &cfg->control_socket)) <
            0 ||
        (r = dup_string(c, "control", "admin_group", NULL, &cfg->admin_group)) < 0 ||
        (r = dup_string(c, "control", "audit_log", "/var/log/coold/audit.log", &cfg->audit_log)) <
            0)
        return r;
    /* Checked here, not only when the server starts, so the message can name file and line. */
    r = parse_listen_address(cfg->metrics_listen, host, sizeof(host), &port, e);
    if (r < 0)
        return errmsg_prefix(e, r, "%s:%u: [metrics] listen", config_path(c),
                             config_line(c, "metrics", "listen"));
    if (!*cfg->control_socket)
        return errmsg_set(e, -EINVAL, "%s: [control] socket must not be empty", config_path(c));
    return 0;
}

static int load_shutdown(struct config *c, struct coold_config *cfg, struct errmsg *e)
{
    int r;
    if ((r = dup_string(c, "shutdown", "command", "systemctl poweroff", &cfg->shutdown_command)) <
            0 ||
        (r = dup_string(c, "shutdown", "hooks_dir", "/etc/coold/hooks.d", &cfg->hooks_dir)) < 0 ||
        (r = dup_string(c, "shutdown", "docker_socket", "/run/docker.sock", &cfg->docker_socket)) <
            0 ||
        (r = dup_string(c, "shutdown", "gpuqd_socket", "/run/gpuq/gpuq.sock", &cfg->gpuqd_socket)) <
            0)
        return r;
    if ((r = config_get_duration(c, "shutdown", "container_grace", 20.0, &cfg->container_grace_s,
                                 e)) < 0 ||
        (r = config_get_duration(c, "shutdown", "halt_within", 60.0, &cfg->halt_within_s, e)) < 0 ||
        (r = config_get_duration(c, "shutdown", "halt_reserve", 3.0, &cfg->halt_reserve_s, e)) <
            0 ||
        (r = config_get_bool(c, "shutdown", "drill", false, &cfg->drill, e)) < 0)
        return r;
    /* A relative path would depend on coold's working directory, which systemd sets to /. */
    if (*cfg->gpuqd_socket && cfg->gpuqd_socket[0] != '/')
        return errmsg_set(
            e, -EINVAL, "%s:%u: [shutdown] gpuqd_socket '%s' must be an absolute path or empty",
            config_path(c), config_line(c, "shutdown", "gpuqd_socket"), cfg->gpuqd_socket);
    if (!*cfg->shutdown_command)
        return errmsg_set(e, -EINVAL, "%s: [shutdown] command must not be empty", config_path(c));
    /* The reserve comes off every stage's budget; more than a minute would leave none. */
    if (cfg->halt_reserve_s > 60)
        return errmsg_set(e, -EINVAL, "%s: [shutdown] halt_reserve must be at most 1m",
                          config_path(c));
    if (cfg->halt_within_s < 1 || cfg->halt_within_s > 900)
        return errmsg_set(e, -EINVAL, "%s: [shutdown] halt_within must be 1s..15m", config_path(c));
    return 0;
}

int coold_config_load(const char *path, struct coold_config *ret, struct errmsg *e)
{
    _cleanup_(config_freep) struct config *c = NULL;
    struct coold_config cfg = {0};
    int r = config_load(path, &c, e);
    if (r < 0)
        return r;
    if ((r = load_controller(c, &cfg, e)) < 0 || (r = load_control(c, &cfg, e)) < 0 ||
        (r = load_shutdown(c, &cfg, e)) < 0 || (r = config_check_unused(c, e)) < 0) {
        coold_config_done(&cfg);
        return r == -ENOMEM ? errmsg_set(e, r, "out of memory") : r;
    }
    *ret = cfg;
    return 0;
}

void coold_config_done(struct coold_config *c)
{
    free(c->device);
    free(c->metrics_listen);
    free(c->control_socket);
    free(c->admin_group);
    free(c->audit_log);
    free(c->shutdown_command);
    free(c->hooks_dir);
    free(c->docker_socket);
    free(c->gpuqd_socket);
    memset(c, 0, sizeof(*c));
}
