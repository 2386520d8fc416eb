/* Decimal numbers in field values: integers and fixed point with up to two decimals. */
#include <stdio.h>

#include "ctl-internal.h"
#include "ctl-proto.h"

/* The largest magnitude ctl_parse_centi accepts, in hundredths. */
#define CENTI_MAX 9999999L
/* LONG_MAX without <limits.h>, which the firmware build need not have (two's complement). */
#define LONG_MAX_U ((unsigned long)-1 >> 1)

int ctl_parse_long(const char *s, long min, long max, long *ret)
{
    unsigned long v = 0, limit;
    bool neg = false;
    long result;

    if (!s)
        return -CTL_E_NUMBER;
    if (*s == '-') {
        neg = true;
        s++;
    }
    if (!ctl_is_digit(*s))
        return -CTL_E_NUMBER;
    /* Accumulate the magnitude unsigned, bounded by what the sign allows, so nothing overflows. */
    limit = neg ? LONG_MAX_U + 1 : LONG_MAX_U;
    for (; ctl_is_digit(*s); s++) {
        unsigned long d = (unsigned long)(*s - '0');
        if (v > (limit - d) / 10)
            return -CTL_E_NUMBER;
        v = v * 10 + d;
    }
    if (*s != '\0')
        return -CTL_E_NUMBER;
    if (neg)
        result = v == 0 ? 0 : -(long)(v - 1) - 1;
    else
        result = (long)v;
    if (result < min || result > max)
        return -CTL_E_NUMBER;
    *ret = result;
    return 0;
}

int ctl_parse_centi(const char *s, long *ret)
{
    long v = 0;
    bool neg = false;
    int decimals = 0;

    if (!s)
        return -CTL_E_NUMBER;
    if (*s == '-') {
        neg = true;
        s++;
    }
    if (!ctl_is_digit(*s))
        return -CTL_E_NUMBER;
    for (; ctl_is_digit(*s); s++) {
        v = v * 10 + (*s - '0');
        if (v * 100 > CENTI_MAX)
            return -CTL_E_NUMBER;
    }
    v *= 100;
    if (*s == '.') {
        s++;
        /* "12." and ".5" are refused: a digit on each side keeps one spelling per value. */
        if (!ctl_is_digit(*s))
            return -CTL_E_NUMBER;
        for (long scale = 10; ctl_is_digit(*s); s++, scale /= 10) {
            if (++decimals > 2)
                return -CTL_E_NUMBER;
            v += (*s - '0') * scale;
        }
    }
    if (*s != '\0' || v > CENTI_MAX)
        return -CTL_E_NUMBER;
    *ret = neg ? -v : v;
    return 0;
}

int ctl_format_centi(long centi, bool shortest, char *buf, size_t size)
{
    unsigned long m = centi < 0 ? 0UL - (unsigned long)centi : (unsigned long)centi;
    unsigned long whole = m / 100, frac = m % 100;
    const char *sign = centi < 0 ? "-" : "";
    int n;

    if (!shortest)
        n = snprintf(buf, size, "%s%lu.%02lu", sign, whole, frac);
    else if (frac == 0)
        n = snprintf(buf, size, "%s%lu", sign, whole);
    else if (frac % 10 == 0)
        n = snprintf(buf, size, "%s%lu.%lu", sign, whole, frac / 10);
    else
        n = snprintf(buf, size, "%s%lu.%02lu", sign, whole, frac);
    if (n < 0 || (size_t)n >= size)
        return -CTL_E_OVERFLOW;
    return n;
}
