/* libFuzzer target: loads a fuzzed config file and reads it the way a daemon does. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/config.h"

/* Asks for a few keys with every typed getter, as a daemon's config loader does. */
static void read_all(struct config *c)
{
    struct errmsg e;
    for (const char *s = config_next_section(c, NULL); s; s = config_next_section(c, s)) {
        unsigned long u;
        bool b;
        double d;
        const char *str;
        (void)config_get_uint(c, s, "port", 1, 1, 65535, &u, &e);
        (void)config_get_bool(c, s, "enable", false, &b, &e);
        (void)config_get_duration(c, s, "timeout", 1.0, &d, &e);
        if (config_get_duration(c, s, "grace", 1.0, &d, &e) >= 0 && !(d >= 0))
            __builtin_trap();
        (void)config_get_string(c, s, "path", NULL, &str);
        const char *v = config_get(c, s, "listen");
        char host[256];
        uint16_t port;
        if (v)
            (void)parse_listen_address(v, host, sizeof(host), &port, &e);
    }
    (void)config_check_unused(c, &e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A memfd gives config_load() a real file to open and read, without touching the disk. */
    static int fd = -1;
    if (fd < 0)
        fd = memfd_create("fuzz-config", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        return 0;
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    struct config *c = NULL;
    struct errmsg e;
    if (config_load(path, &c, &e) == 0) {
        read_all(c);
        config_free(c);
    } else if (strlen(e.text) == 0)
        __builtin_trap(); /* every failure explains itself */
    return 0;
}
