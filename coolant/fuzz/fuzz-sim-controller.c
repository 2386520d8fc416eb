/* libFuzzer target: arbitrary bytes from the host into the controller, with ticks and failing
 * hardware mixed in. Whatever arrives, every frame the controller sends must be a valid frame
 * that fits the protocol's size limit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim-controller.h"

static void check_frame(const char *frame, size_t len, void *userdata)
{
    struct ctl_frame f;

    if (len > CTL_FRAME_MAX || ctl_frame_parse(frame, len, &f) != 0)
        abort();
    if (f.kind != CTL_KIND_REPLY && f.kind != CTL_KIND_EVENT)
        abort();
}

static int save(const struct ctl_settings *s, void *userdata, struct errmsg *e)
{
    char why[200];
    /* The controller must only ever store settings that pass the whole-configuration check. */
    if (ctl_settings_check(s, why, sizeof(why)) != 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct sim_ctl_ops ops = {.send = check_frame, .save = save};
    struct ctl_settings s;
    struct sim_reading r = {.n_sensors = 3, .n_pumps = 2, .flow_centi = 1200};
    struct sim_ctl c;
    uint64_t now = 1000;
    size_t start = 0;

    for (unsigned i = 0; i < 3; i++) {
        r.sensor_ok[i] = true;
        r.temp_centi[i] = 3800;
    }
    r.duty[0] = r.duty[1] = 60;
    r.rpm[0] = r.rpm[1] = 2600;
    ctl_settings_defaults(&s, 2);
    sim_ctl_init(&c, &s, &ops, NULL, now);

    /* Bytes 0xf8..0xff are not printable protocol bytes: use them as clock and hardware
     * commands so that the input also explores alarms, cuts, reboots and host timeouts. */
    for (size_t i = 0; i <= size; i++) {
        if (i < size && data[i] < 0xf8)
            continue;
        sim_ctl_feed(&c, data + start, i - start, now);
        start = i + 1;
        if (i == size)
            break;
        switch (data[i]) {
        case 0xf8:
            r.rpm[1] = r.rpm[1] ? 0 : 2600;
            break;
        case 0xf9:
            r.sensor_ok[i % 3] = !r.sensor_ok[i % 3];
            break;
        case 0xfa:
            r.temp_centi[1] += 500;
            break;
        case 0xfb:
            sim_ctl_reboot(&c, 2000, now);
            break;
        default:
            now += (uint64_t)(data[i] - 0xfb) * 700;
            sim_ctl_tick(&c, &r, now);
        }
    }
    return 0;
}
