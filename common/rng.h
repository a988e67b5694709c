// rng.h: counter-based random numbers.
//
// Every value is a pure function of (seed, stream, index): Philox4x32-10
// (Salmon et al., SC'11) keyed by the seed, with the stream and the index as
// the counter. No state is carried from one value to the next, so any rank can
// make exactly its slice of any tensor, and a slice equals the same slice of
// the whole: element i of tensor t is rng_normal(seed, t, i) wherever it is made.
#pragma once

#include <stddef.h>
#include <stdint.h>

// One Philox4x32-10 block: four 32-bit words from a 128-bit counter and a
// 64-bit key (exposed for tests against the published answers).
void rng_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

// 32 random bits, uniform on [0, 1) with 24 bits of precision, and a standard
// normal (Box-Muller on two uniforms of the same block): value number `index`
// of stream `stream` under `seed`.
uint32_t rng_u32(uint64_t seed, uint64_t stream, uint64_t index);
float rng_uniform(uint64_t seed, uint64_t stream, uint64_t index);
float rng_normal(uint64_t seed, uint64_t stream, uint64_t index);

// Fill out[0..n) with values offset..offset+n of a stream (host memory).
// out[k] = lo + (hi - lo) * rng_uniform(seed, stream, offset + k)
void rng_fill_uniform(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                      float lo, float hi);
// out[k] = mean + std * rng_normal(seed, stream, offset + k)
void rng_fill_normal(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                     float mean, float std);

// Streams are numbered by what they are for, so two uses never share values.
// A stream number from names: rng_stream(RNG_INIT, tensor_id, 0).
enum { RNG_INIT = 1, RNG_DATA = 2, RNG_DROPOUT = 3, RNG_TEST = 4 };
uint64_t rng_stream(uint32_t purpose, uint32_t a, uint32_t b);
