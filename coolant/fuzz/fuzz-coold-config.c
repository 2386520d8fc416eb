/* libFuzzer target: coold's configuration layer (coolant/coold/coold-config.c) on fuzzed file
 * contents, loaded from a memfd through its /proc/self/fd path as coold loads its file.
 *
 * Checked: on success every string field but admin_group (NULL: root only) is set, the baud rate
 * is one termios has, the durations are finite and not negative and the documented ranges hold
 * (poll_interval 50 ms..60 s, stale_after below dead_after, halt_within 1 s..15 min, a non-empty
 * shutdown command and control socket, a metrics listen address that parses); on failure a message
 * explains it. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/config.h"
#include "coold-config.h"
#include "lib/fuzz-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool duration_ok(double d)
{
    return isfinite(d) && d >= 0;
}

static void check_config(const struct coold_config *c)
{
    static const unsigned bauds[] = {9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600};
    bool baud_ok = false;

    CHECK(c->device && c->metrics_listen && c->control_socket && c->audit_log);
    CHECK(c->shutdown_command && c->hooks_dir && c->docker_socket);
    CHECK(c->shutdown_command[0] != '\0' && c->control_socket[0] != '\0');
    char host[256];
    uint16_t port;
    CHECK(parse_listen_address(c->metrics_listen, host, sizeof(host), &port, NULL) == 0);
    for (size_t i = 0; i < sizeof(bauds) / sizeof(bauds[0]); i++)
        baud_ok = baud_ok || c->baud == bauds[i];
    CHECK(baud_ok);
    CHECK(duration_ok(c->poll_interval_s) && duration_ok(c->stale_after_s));
    CHECK(duration_ok(c->dead_after_s) && duration_ok(c->container_grace_s));
    CHECK(duration_ok(c->halt_within_s) && duration_ok(c->halt_reserve_s));
    CHECK(c->poll_interval_s >= 0.05 && c->poll_interval_s <= 60);
    CHECK(c->poll_interval_s < c->stale_after_s && c->stale_after_s < c->dead_after_s);
    CHECK(c->dead_after_s >= 3 && c->dead_after_s >= 2 * c->poll_interval_s);
    CHECK(c->halt_within_s >= 1 && c->halt_within_s <= 900 && c->halt_reserve_s <= 60);
    /* Strings are read to their end, so ASan catches an unterminated one. */
    CHECK(strlen(c->device) + strlen(c->metrics_listen) + strlen(c->control_socket) +
              strlen(c->audit_log) + strlen(c->hooks_dir) + strlen(c->docker_socket) +
              (c->admin_group ? strlen(c->admin_group) : 0) <
          (size_t)-1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A memfd gives coold_config_load() a real file to open, without touching the disk. */
    static int fd = -1;
    if (fd < 0)
        fd = memfd_create("fuzz-coold-config", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

    struct coold_config c;
    memset(&c, 0xaa, sizeof(c));
    struct errmsg e = {""};
    int r = coold_config_load(path, &c, &e);
    if (r < 0) {
        CHECK(e.text[0] != '\0');
        return 0;
    }
    CHECK(r == 0);
    check_config(&c);
    coold_config_done(&c);
    return 0;
}
