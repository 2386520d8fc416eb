#include "lib/units.h"

#include <stdio.h>

static char *format_size(int64_t bytes, int base, const char *const units[6], char buf[16])
{
    if (bytes < base) {
        snprintf(buf, 16, "%lld B", (long long)(bytes < 0 ? 0 : bytes));
        return buf;
    }
    double v = (double)bytes;
    size_t u = 0;
    while (v >= base && u + 1 < 6) {
        v /= base;
        u++;
    }
    snprintf(buf, 16, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

char *units_format_bytes(int64_t bytes, char buf[static 16])
{
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    return format_size(bytes, 1000, units, buf);
}

char *units_format_binary(int64_t bytes, char buf[static 16])
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    return format_size(bytes, 1024, units, buf);
}
