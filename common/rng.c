// rng.c: the values made from Philox4x32-10 (see rng.h). The block, with its
// key and counter made from (seed, stream, index), is in philox.h, which the
// GPU's kernels compile too.
//
// Nothing is carried between calls, which is what lets every rank make its
// own slice of a tensor and get the same numbers as one rank making it all.
#include "rng.h"

#include <math.h>

#include "core.h"
#include "philox.h"

void rng_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    philox4x32(ctr, key, out);
}

uint32_t rng_u32(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t w[4];
    philox_block(seed, stream, index, w);
    return w[0];
}

// The GPU's dropout draws its uniforms from the same inline code (philox.h).
float rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
    return philox_uniform(seed, stream, index);
}

// A uniform's 24 bits as a fraction: k * 2^-24.
static const double TWO_POW_M24 = 1.0 / 16777216.0;

float rng_normal(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t w[4];
    philox_block(seed, stream, index, w);
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
