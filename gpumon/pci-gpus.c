/* The GPUs bound to the nvidia driver, read from sysfs. */
#include "pci-gpus.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/macro.h"

static int hex_digits(const char *s, size_t min, size_t max, uint64_t *ret, const char **end)
{
    uint64_t v = 0;
    size_t n = 0;
    for (; n < max; n++) {
        char c = s[n];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            break;
        v = v * 16 + (uint64_t)d;
    }
    if (n < min)
        return -EINVAL;
    *ret = v;
    *end = s + n;
    return 0;
}

int pci_address_parse(const char *s, uint64_t *ret)
{
    uint64_t domain, bus, dev, fn;
    const char *p = s;
    if (hex_digits(p, 4, 8, &domain, &p) < 0 || *p++ != ':' || hex_digits(p, 2, 2, &bus, &p) < 0 ||
        *p++ != ':' || hex_digits(p, 2, 2, &dev, &p) < 0 || *p++ != '.' ||
        hex_digits(p, 1, 1, &fn, &p) < 0 || *p != '\0' || dev > 0x1f || fn > 7)
        return -EINVAL;
    *ret = domain << 16 | bus << 8 | dev << 3 | fn;
    return 0;
}

/* Whether the device directory dir (in the driver's directory dfd) is a display controller. */
static bool is_display_class(int dfd, const char *dir)
{
    char path[300], buf[16] = "";
    snprintf(path, sizeof(path), "%s/class", dir);
    _cleanup_close_ int fd = openat(dfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, buf, sizeof(buf) - 1) < 4)
        return false;
    return strncmp(buf, "0x03", 4) == 0;
}

static int cmp_addr(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int pci_gpus_read(const char *sysfs_root, struct pci_gpus *ret)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/bus/pci/drivers/nvidia", sysfs_root);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int r = -errno;
        close(fd);
        return r;
    }
    struct pci_gpus set = {0};
    for (struct dirent *de; (de = readdir(d)) && set.n < PCI_GPUS_MAX;) {
        uint64_t a;
        /* The driver's directory also holds bind, module, new_id, ...: only addresses count. */
        if (pci_address_parse(de->d_name, &a) == 0 && is_display_class(fd, de->d_name))
            set.addr[set.n++] = a;
    }
    closedir(d);
    qsort(set.addr, set.n, sizeof(set.addr[0]), cmp_addr);
    *ret = set;
    return 0;
}

bool pci_gpus_equal(const struct pci_gpus *a, const struct pci_gpus *b)
{
    return a->n == b->n && memcmp(a->addr, b->addr, a->n * sizeof(a->addr[0])) == 0;
}

bool pci_gpus_has(const struct pci_gpus *set, const char *bus_id)
{
    uint64_t a;
    if (pci_address_parse(bus_id, &a) < 0)
        return false;
    return bsearch(&a, set->addr, set->n, sizeof(set->addr[0]), cmp_addr) != NULL;
}
