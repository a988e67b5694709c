// rng.c: Philox4x32-10 and the values made from it (see rng.h).
//
// Value number `index` of stream `stream` under `seed` is one Philox block:
//   key     = (seed low 32 bits, seed high 32 bits)
//   counter = (index low, index high, stream low, stream high)
// Nothing is carried between calls, which is what lets every rank make its
// own slice of a tensor and get the same numbers as one rank making it all.
#include "rng.h"

#include <math.h>

#include "core.h"

// The constants of Philox4x32 (Salmon et al., SC'11; Random123's philox.h):
// two round multipliers, and the Weyl increments (the golden ratio and
// sqrt(3) - 1 as 32-bit fractions) that change the key from round to round.
enum { PHILOX_ROUNDS = 10 };
static const uint32_t PHILOX_M0 = 0xD2511F53u;
static const uint32_t PHILOX_M1 = 0xCD9E8D57u;
static const uint32_t PHILOX_W0 = 0x9E3779B9u;
static const uint32_t PHILOX_W1 = 0xBB67AE85u;

void rng_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < PHILOX_ROUNDS; round++) {
        // The key is bumped before every round but the first, as in Random123.
        if (round > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        // A 32x32 -> 64-bit product split into its high and low halves is the
        // whole nonlinearity; the xors and the word swap spread it.
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

// The block that value `index` of `stream` comes from.
static void rng_block(uint64_t seed, uint64_t stream, uint64_t index, uint32_t out[4]) {
    uint32_t ctr[4] = {(uint32_t)index, (uint32_t)(index >> 32), (uint32_t)stream,
                       (uint32_t)(stream >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    rng_philox4x32(ctr, key, out);
}

uint32_t rng_u32(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t w[4];
    rng_block(seed, stream, index, w);
    return w[0];
}

// 24 bits is all a float's mantissa holds, so every value k * 2^-24 is exact
// and the largest is 1 - 2^-24 < 1.
static const double TWO_POW_M24 = 1.0 / 16777216.0;

float rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
    return (float)((rng_u32(seed, stream, index) >> 8) * TWO_POW_M24);
}

float rng_normal(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t w[4];
    rng_block(seed, stream, index, w);
    // u1 in (0, 1] so that log(u1) is finite; u2 in [0, 1) is an angle.
    double u1 = ((w[0] >> 8) + 1) * TWO_POW_M24;
    double u2 = (w[1] >> 8) * TWO_POW_M24;
    // Box-Muller, in double and rounded once to float at the end, so the float
    // is the same wherever log, sqrt and cos are accurate to a double ulp.
    const double two_pi = 6.283185307179586476925286766559;
    double r = sqrt(-2.0 * log(u1));
    return (float)(r * cos(two_pi * u2));
}

void rng_fill_uniform(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                      float lo, float hi) {
    for (size_t k = 0; k < n; k++)
        out[k] = lo + (hi - lo) * rng_uniform(seed, stream, offset + k);
}

void rng_fill_normal(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                     float mean, float std) {
    for (size_t k = 0; k < n; k++)
        out[k] = mean + std * rng_normal(seed, stream, offset + k);
}

// 8 bits of purpose, then 28 bits each of a and b: distinct triples give
// distinct streams, as long as each number fits its field.
uint64_t rng_stream(uint32_t purpose, uint32_t a, uint32_t b) {
    CHECK(purpose < (1u << 8), "rng stream purpose %u does not fit in 8 bits; use one of RNG_INIT, "
          "RNG_DATA, RNG_DROPOUT, RNG_TEST", purpose);
    CHECK(a < (1u << 28), "rng stream number a = %u does not fit in 28 bits; keep it below %u",
          a, 1u << 28);
    CHECK(b < (1u << 28), "rng stream number b = %u does not fit in 28 bits; keep it below %u",
          b, 1u << 28);
    return (uint64_t)purpose << 56 | (uint64_t)a << 28 | (uint64_t)b;
}
