/* A small seeded pseudo-random generator for sensor noise and line garbage.
 *
 * Runs must be reproducible from --seed, so the simulator never uses rand() or the clock for
 * randomness. xorshift64* is plenty for noise; nothing here is security relevant. */
#pragma once

#include <stdint.h>

struct sim_rng {
    uint64_t state;
};

/* Seeds the generator. Any seed is fine, 0 included: splitmix64 spreads it to a non-zero state. */
static inline void sim_rng_seed(struct sim_rng *r, uint64_t seed)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    r->state = z ? z : 0x2545f4914f6cdd1dULL;
}

/* Returns the next 64 random bits. */
static inline uint64_t sim_rng_next(struct sim_rng *r)
{
    uint64_t x = r->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->state = x;
    return x * 0x2545f4914f6cdd1dULL;
}

/* Returns a number uniformly in [0, n); n must be > 0. The tiny modulo bias does not matter. */
static inline uint32_t sim_rng_below(struct sim_rng *r, uint32_t n)
{
    return (uint32_t)((sim_rng_next(r) >> 32) % n);
}

/* Returns a double uniformly in [0, 1). */
static inline double sim_rng_unit(struct sim_rng *r)
{
    return (double)(sim_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Returns roughly normal noise with mean 0 and standard deviation 1 (sum of four uniforms),
 * bounded to +-3.5: sensors never produce wild outliers from noise alone. */
static inline double sim_rng_noise(struct sim_rng *r)
{
    double s = 0;
    for (int i = 0; i < 4; i++)
        s += sim_rng_unit(r);
    return (s - 2.0) * 1.7320508075688772;
}
