/* Line noise for the garbage scenario: bursts sent to the host between valid frames, and
 * corruption of frames coming from the host. Both take their randomness from a seeded
 * generator so a failing run can be replayed with the same --seed. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim-rng.h"

#define SIM_NOISE_MAX 512 /* the longest burst sim_noise_burst() writes */

enum sim_noise_kind {
    SIM_NOISE_RANDOM,    /* random bytes, any value */
    SIM_NOISE_BAD_CRC,   /* a well-formed frame whose checksum is wrong */
    SIM_NOISE_NO_CRC,    /* a frame cut before its checksum, line end present */
    SIM_NOISE_TRUNCATED, /* a frame cut mid-body without a line end: the next '$' abandons it */
    SIM_NOISE_TOO_LONG,  /* a line longer than CTL_FRAME_MAX */
    SIM_NOISE_DOLLAR,    /* a '$' in the middle of a frame */
    SIM_NOISE_CONTROL,   /* a control byte inside an otherwise good frame */
    _SIM_NOISE_MAX,
};

/* Writes one burst of noise of a random kind into buf (at least SIM_NOISE_MAX bytes). None of
 * them is a valid frame, and a valid frame sent after any of them is received intact. Returns
 * the length; *ret_kind (optional) says which kind it was. */
size_t sim_noise_burst(struct sim_rng *rng, char *buf, enum sim_noise_kind *ret_kind);

/* Corrupts frames received from the host, one in `every` (0: none), by flipping one bit of a
 * body byte, so the frame fails its CRC as line noise would make it. */
struct sim_rx_noise {
    unsigned every;
    bool armed; /* the current frame is to be corrupted */
    unsigned long corrupted;
};

/* Processes received bytes in place. */
void sim_rx_noise_apply(struct sim_rx_noise *n, struct sim_rng *rng, uint8_t *buf, size_t len);
