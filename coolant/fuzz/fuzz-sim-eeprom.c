/* libFuzzer target: arbitrary EEPROM images. Loading either fails cleanly or yields settings
 * that pass the controller's own checks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sim-eeprom.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    struct ctl_settings s;
    struct errmsg e;
    char why[200];

    if (!path[0])
        snprintf(path, sizeof(path), "/tmp/fuzz-sim-eeprom.%ld", (long)getpid());
    FILE *f = fopen(path, "we");
    if (!f)
        abort();
    fwrite(data, 1, size, f);
    fclose(f);
    if (sim_eeprom_load(path, 2, &s, &e) == 0 &&
        (s.n_pumps != 2 || ctl_settings_check(&s, why, sizeof(why)) != 0))
        abort();
    unlink(path);
    return 0;
}
