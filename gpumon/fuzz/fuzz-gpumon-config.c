/* libFuzzer target: gpumon's settings (gpumon/gpumon-config.c) on a fuzzed config file and
 * fuzzed flag values. The input up to the first NUL is the file, loaded from a memfd through its
 * /proc/self/fd path as gpumon loads its file; NUL-separated strings after it become the values
 * of --listen, --interval, --slow-interval and --hostname, in that order.
 *
 * Checked: on success every string is set and terminated, interval is 100 ms..1 h, slow_interval
 * from interval to 1 h, rescan_interval 100 ms..1 h, the listen address parses, proc_root is
 * absolute, the hostname is 1..255 bytes; on failure a message explains it. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/config.h"
#include "gpumon-config.h"
#include "lib/fuzz-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool in_range(double d, double lo, double hi)
{
    return isfinite(d) && d >= lo && d <= hi;
}

static void check_config(const struct gpumon_config *c)
{
    CHECK(c->listen && c->hostname && c->nvml_library && c->proc_root);
    CHECK(in_range(c->interval_s, GPUMON_INTERVAL_MIN, GPUMON_INTERVAL_MAX));
    CHECK(in_range(c->slow_interval_s, c->interval_s, GPUMON_INTERVAL_MAX));
    CHECK(in_range(c->rescan_interval_s, GPUMON_INTERVAL_MIN, GPUMON_INTERVAL_MAX));
    char host[256];
    uint16_t port;
    CHECK(parse_listen_address(c->listen, host, sizeof(host), &port, NULL) == 0);
    CHECK(c->proc_root[0] == '/');
    size_t n = strlen(c->hostname);
    CHECK(n >= 1 && n <= 255);
    /* Read to the end, so that ASan catches an unterminated string. */
    CHECK(strlen(c->nvml_library) < (size_t)-1);
}

/* The next NUL-terminated string of the flag part, or NULL when none is left. The buffer is a
 * copy ending in a NUL, so each string is terminated. */
static const char *next_flag(char **p, const char *end)
{
    if (*p >= end)
        return NULL;
    const char *s = *p;
    *p += strlen(s) + 1;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    if (fd < 0)
        fd = memfd_create("fuzz-gpumon-config", MFD_CLOEXEC);
    const uint8_t *nul = memchr(data, '\0', size);
    size_t file_len = nul ? (size_t)(nul - data) : size;
    if (fd < 0 || ftruncate(fd, 0) < 0 || pwrite(fd, data, file_len, 0) != (ssize_t)file_len)
        abort();
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

    size_t rest = nul ? size - file_len - 1 : 0;
    char *flags_buf = malloc(rest + 1);
    if (!flags_buf)
        abort();
    if (rest)
        memcpy(flags_buf, nul + 1, rest);
    flags_buf[rest] = '\0';
    char *p = flags_buf;
    const char *end = flags_buf + rest;
    struct gpumon_flags f = {.config_path = path};
    f.listen = next_flag(&p, end);
    f.interval = next_flag(&p, end);
    f.slow_interval = next_flag(&p, end);
    f.hostname = next_flag(&p, end);

    struct gpumon_config c;
    memset(&c, 0xaa, sizeof(c));
    struct errmsg e = {""};
    int r = gpumon_config_load(&f, &c, &e);
    if (r < 0) {
        CHECK(e.text[0] != '\0');
    } else {
        CHECK(r == 0);
        check_config(&c);
        gpumon_config_done(&c);
    }
    free(flags_buf);
    return 0;
}
