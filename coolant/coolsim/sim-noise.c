/* Noise bursts and received-frame corruption. */
#include "sim-noise.h"

#include <stdio.h>
#include <string.h>

#include "ctl-proto.h"

/* A plausible event body for the fakes: the host's parser gets as far as the checksum. */
static size_t fake_body(struct sim_rng *rng, char *buf, size_t size)
{
    int n = snprintf(buf, size, "E %u HB up=%u level=normal", sim_rng_below(rng, 65536),
                     sim_rng_below(rng, 100000));
    return n < 0 ? 0 : (size_t)n;
}

static size_t burst_random(struct sim_rng *rng, char *buf)
{
    size_t n = 1 + sim_rng_below(rng, 48);
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)sim_rng_below(rng, 256);
    return n;
}

static size_t burst_bad_crc(struct sim_rng *rng, char *buf)
{
    char body[128];
    size_t n = fake_body(rng, body, sizeof(body));
    /* XOR with a non-zero value: the written checksum can never be the right one. */
    uint16_t crc = ctl_crc16(body, n) ^ (uint16_t)(1 + sim_rng_below(rng, 0xffff));
    return (size_t)snprintf(buf, SIM_NOISE_MAX, "$%s*%04X\r\n", body, crc);
}

static size_t burst_no_crc(struct sim_rng *rng, char *buf)
{
    char body[128];
    size_t n = fake_body(rng, body, sizeof(body));
    size_t cut = 1 + sim_rng_below(rng, (uint32_t)n);
    return (size_t)snprintf(buf, SIM_NOISE_MAX, "$%.*s\r\n", (int)cut, body);
}

static size_t burst_truncated(struct sim_rng *rng, char *buf)
{
    char body[128];
    size_t n = fake_body(rng, body, sizeof(body));
    size_t cut = 1 + sim_rng_below(rng, (uint32_t)n);
    return (size_t)snprintf(buf, SIM_NOISE_MAX, "$%.*s", (int)cut, body);
}

static size_t burst_too_long(struct sim_rng *rng, char *buf)
{
    size_t n = CTL_FRAME_MAX + 1 + sim_rng_below(rng, 64);
    buf[0] = '$';
    memcpy(buf + 1, "E 1 HB", 6);
    for (size_t i = 7; i < n; i++)
        buf[i] = (char)('a' + sim_rng_below(rng, 26));
    memcpy(buf + n, "*0000\r\n", 7);
    return n + 7;
}

static size_t burst_dollar(struct sim_rng *rng, char *buf)
{
    char body[128];
    size_t n = fake_body(rng, body, sizeof(body));
    size_t at = 1 + sim_rng_below(rng, (uint32_t)n - 1);
    body[at] = '$';
    return (size_t)snprintf(buf, SIM_NOISE_MAX, "$%s*%04X\r\n", body, ctl_crc16(body, n));
}

static size_t burst_control(struct sim_rng *rng, char *buf)
{
    char body[128];
    size_t n = fake_body(rng, body, sizeof(body));
    uint16_t crc = ctl_crc16(body, n);
    body[1 + sim_rng_below(rng, (uint32_t)n - 1)] = (char)(1 + sim_rng_below(rng, 0x1f));
    return (size_t)snprintf(buf, SIM_NOISE_MAX, "$%s*%04X\r\n", body, crc);
}

size_t sim_noise_burst(struct sim_rng *rng, char *buf, enum sim_noise_kind *ret_kind)
{
    static size_t (*const makers[_SIM_NOISE_MAX])(struct sim_rng *, char *) = {
        [SIM_NOISE_RANDOM] = burst_random,     [SIM_NOISE_BAD_CRC] = burst_bad_crc,
        [SIM_NOISE_NO_CRC] = burst_no_crc,     [SIM_NOISE_TRUNCATED] = burst_truncated,
        [SIM_NOISE_TOO_LONG] = burst_too_long, [SIM_NOISE_DOLLAR] = burst_dollar,
        [SIM_NOISE_CONTROL] = burst_control,
    };
    enum sim_noise_kind kind = (enum sim_noise_kind)sim_rng_below(rng, _SIM_NOISE_MAX);

    if (ret_kind)
        *ret_kind = kind;
    return makers[kind](rng, buf);
}

void sim_rx_noise_apply(struct sim_rx_noise *n, struct sim_rng *rng, uint8_t *buf, size_t len)
{
    if (n->every == 0)
        return;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = buf[i];
        if (b == '$') {
            n->armed = sim_rng_below(rng, n->every) == 0;
            continue;
        }
        /* Flip the lowest bit of a body byte, never into or out of a delimiter, so the damage
         * is a CRC failure and not a different frame boundary. */
        if (n->armed && b > 0x20 && b < 0x7e && b != '*' && b != ('$' ^ 1) && b != ('*' ^ 1)) {
            buf[i] = b ^ 1;
            n->armed = false;
            n->corrupted++;
        }
    }
}
