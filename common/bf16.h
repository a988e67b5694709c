// bf16.h: bfloat16, the 16-bit format of mixed-precision training: fp32's
// sign and 8 exponent bits, 7 of its 23 mantissa bits. Same range as fp32,
// a relative rounding of 2^-8 (fp32: 2^-24).
//
// A value is stored as its 16 bits (uint16_t): the top half of the fp32
// with the same sign and exponent. From fp32 it rounds to the nearest, ties
// to even (as PyTorch's .to(torch.bfloat16) and CUDA's __float2bfloat16_rn
// do); a NaN stays a NaN of the same sign (quiet, so that cutting its low
// bits cannot make it an infinity); infinities stay infinities, and a
// value past the largest bf16 rounds to infinity. To fp32 it is exact.
// Both directions are plain bit arithmetic, compiled for the CPU and for
// the GPU's kernels (ops_cuda.cu) from these same lines: they agree to the bit.
#pragma once

#include <stdint.h>
#include <string.h>

typedef uint16_t bf16;

#ifdef __CUDACC__
#define BF16_FN __host__ __device__ static inline
#else
#define BF16_FN static inline
#endif

BF16_FN bf16 bf16_from_float(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16)((u >> 16) | 0x0040u);   // NaN: quiet, sign kept
    // Round to nearest even on the 16 bits cut off: add 0x7fff, plus one
    // when the kept part is odd (a tie then rounds up, to the even one).
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16)(u >> 16);
}

BF16_FN float bf16_to_float(bf16 b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
