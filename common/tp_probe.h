// tp_probe.h: what the tensor-parallel labs' probes (04 and 06) share to
// measure the student's functions on their own, before training: random
// inputs the same on every rank, their copies on the device, and the
// measures taken of what comes back (on host copies: mem_to_host).
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm.h"

// n normal values of mean 0 and deviation std from stream (RNG_TEST,
// stream) of seed, on the host (malloc: free them), the same on every rank.
float *tp_probe_random(size_t n, uint64_t seed, uint32_t stream, float std);
// A copy of n host floats on the device (OTHER, "probe"; mem_free it).
float *tp_probe_on_device(const float *host, size_t n);

// 1 when every rank of group holds the same n floats dev (to a relative
// 1e-6 of their size: an all-reduce may round alike or not), else 0.
double tp_probe_agree(Comm *group, const float *dev, size_t n);
// ||got - want|| / ||want|| over tokens [t0, t0 + Tt) of every row: got
// (B, Tt, C) on the device, want (B, T, C) whole on the host; INFINITY
// when got is not finite.
double tp_probe_token_error(const float *got, const float *want, int B, int T, int t0, int Tt, int C);
// The mean of (b - a) over n floats on the device, divided by delta.
double tp_probe_mean_shift(const float *a, const float *b, size_t n, double delta);
// Whether a float the student's code computed is b, to a relative 1e-4
// (a float's sums of a few hundred terms against the host's in double).
bool tp_probe_near(float a, double b);

// The group's worst, on every rank: each of n figures replaced by its
// largest over the group (max, max_int) or its smallest (min).
void tp_probe_max(Comm *group, double *const v[], size_t n);
void tp_probe_min(Comm *group, double *const v[], size_t n);
void tp_probe_max_int(Comm *group, int *const v[], size_t n);
// The bits of the low nbits of `bits` set on any rank of group, on every rank.
int tp_probe_any_bits(Comm *group, int bits, int nbits);
