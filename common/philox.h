// philox.h: Philox4x32-10 and the uniform made from it, as inline code that
// both the host (rng.c) and the GPU (ops_cuda.cu, dropout) compile, so that
// the two draw the same bits from one definition (internal; rng.h is the
// interface).
//
// Value number `index` of stream `stream` under `seed` is one Philox block:
//   key     = (seed low 32 bits, seed high 32 bits)
//   counter = (index low, index high, stream low, stream high)
#pragma once

#include <stdint.h>

// nvcc compiles these for the GPU too; a C compiler sees plain functions.
#ifdef __CUDACC__
#define PHILOX_FN static inline __host__ __device__
#else
#define PHILOX_FN static inline
#endif

// One Philox4x32-10 block (Salmon et al., SC'11; Random123's philox.h).
PHILOX_FN void philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    // Two round multipliers, and the Weyl increments (the golden ratio and
    // sqrt(3) - 1 as 32-bit fractions) that change the key from round to round.
    const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
    const uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        // The key is bumped before every round but the first, as in Random123.
        if (round > 0) {
            k0 += W0;
            k1 += W1;
        }
        // A 32x32 -> 64-bit product split into its high and low halves is the
        // whole nonlinearity; the xors and the word swap spread it.
        uint64_t p0 = (uint64_t)M0 * c0;
        uint64_t p1 = (uint64_t)M1 * c2;
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
PHILOX_FN void philox_block(uint64_t seed, uint64_t stream, uint64_t index, uint32_t out[4]) {
    uint32_t ctr[4] = {(uint32_t)index, (uint32_t)(index >> 32), (uint32_t)stream,
                       (uint32_t)(stream >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    philox4x32(ctr, key, out);
}

// Uniform on [0, 1) from the first word of the block. 24 bits is all a
// float's mantissa holds, so every value k * 2^-24 is exact and the largest
// is 1 - 2^-24 < 1.
PHILOX_FN float philox_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t w[4];
    philox_block(seed, stream, index, w);
    return (float)((w[0] >> 8) * (1.0 / 16777216.0));
}
