/* Pump readings in STATUS replies: "p<n>=RPM/DUTY" (docs/protocol.md §5). One field per pump
 * instead of two keeps the largest STATUS (8 sensors, 4 pumps) inside one frame. */
#include <stdio.h>
#include <string.h>

#include "ctl-proto.h"

#define RPM_MAX 1000000L

int ctl_pump_parse(const char *s, long *ret_rpm, int *ret_duty)
{
    char rpm_text[16];
    long rpm, duty;

    if (!s)
        return -CTL_E_NUMBER;
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : 0;
    if (!slash || n == 0 || n >= sizeof(rpm_text))
        return -CTL_E_NUMBER;
    memcpy(rpm_text, s, n);
    rpm_text[n] = '\0';
    if (ctl_parse_long(rpm_text, 0, RPM_MAX, &rpm) < 0 ||
        ctl_parse_long(slash + 1, 0, 100, &duty) < 0)
        return -CTL_E_NUMBER;
    *ret_rpm = rpm;
    *ret_duty = (int)duty;
    return 0;
}

int ctl_pump_format(long rpm, int duty, char *buf, size_t size)
{
    if (rpm < 0 || rpm > RPM_MAX || duty < 0 || duty > 100)
        return -CTL_E_NUMBER;
    int n = snprintf(buf, size, "%ld/%d", rpm, duty);
    return n < 0 || (size_t)n >= size ? -CTL_E_OVERFLOW : n;
}
