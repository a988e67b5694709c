// lanes.h: sums and maxima over a row of floats, written with
// explicit vectors so that they run at vector speed on any x86-64 (and on
// any other target gcc knows).
//
// A loop `s += x[i]` is one chain of additions. The compiler may not reorder
// it, since that would change the rounding, so each add waits for the one
// before: a row of LayerNorm or of a softmax took longer to sum than to
// compute. These keep LANES running sums instead, element i going to lane
// i % LANES, and add the lanes up at the end in a fixed order (lane j with
// lane j + 8, then j + 4, ...). The same numbers always give the same float,
// on every instruction set, and a row summed in pieces that start at
// multiples of LANES gives the same float as the whole row.
//
// The 16 lanes are held in vectors of the target's width (GCC's vector
// extension): one AVX-512 register, two AVX ones, four SSE ones. A vector
// wider than the target's registers would be split through memory.
// Host code only (ops.c's kernels); everything here is inlined.
#ifndef LANES_H
#define LANES_H

#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__)
#define LANES_VW 16
#elif defined(__AVX__)
#define LANES_VW 8
#else
#define LANES_VW 4
#endif

enum { LANES = 16, LANES_NV = LANES / LANES_VW };
typedef float lanes_vec __attribute__((vector_size(LANES_VW * sizeof(float))));
typedef int32_t lanes_mask __attribute__((vector_size(LANES_VW * sizeof(int32_t))));
typedef struct {
    lanes_vec v[LANES_NV];
} Lanes;

#define LANES_INLINE static inline __attribute__((always_inline))

LANES_INLINE lanes_vec lanes_vload(const float *p) {
    lanes_vec v;
    memcpy(&v, p, sizeof v);
    return v;
}

LANES_INLINE void lanes_vstore(float *p, lanes_vec v) { memcpy(p, &v, sizeof v); }

LANES_INLINE lanes_vec lanes_vsplat(float x) {
    lanes_vec v;
    for (int j = 0; j < LANES_VW; j++) v[j] = x;
    return v;
}

// Lane by lane, a where m is all ones, b where it is 0: bit operations, so a
// NaN in the lanes not chosen goes nowhere.
LANES_INLINE lanes_vec lanes_vselect(lanes_mask m, lanes_vec a, lanes_vec b) {
    return (lanes_vec)(((lanes_mask)a & m) | ((lanes_mask)b & ~m));
}

// LANES floats from p, which need not be aligned.
LANES_INLINE Lanes lanes_load(const float *p) {
    Lanes a;
    for (int k = 0; k < LANES_NV; k++) a.v[k] = lanes_vload(p + k * LANES_VW);
    return a;
}

// The first n < LANES floats from p, the other lanes set to fill: the end of
// a row whose length is not a multiple of LANES.
LANES_INLINE Lanes lanes_load_part(const float *p, int n, float fill) {
    float t[LANES];
    for (int j = 0; j < LANES; j++) t[j] = j < n ? p[j] : fill;
    return lanes_load(t);
}

// LANES floats from p where n >= LANES, else the first n and fill.
LANES_INLINE Lanes lanes_load_upto(const float *p, int n, float fill) {
    return n >= LANES ? lanes_load(p) : lanes_load_part(p, n, fill);
}

LANES_INLINE Lanes lanes_splat(float x) {
    Lanes a;
    for (int k = 0; k < LANES_NV; k++) a.v[k] = lanes_vsplat(x);
    return a;
}

LANES_INLINE Lanes lanes_add(Lanes a, Lanes b) {
    for (int k = 0; k < LANES_NV; k++) a.v[k] += b.v[k];
    return a;
}

// a + b * c, lane by lane.
LANES_INLINE Lanes lanes_add_mul(Lanes a, Lanes b, Lanes c) {
    for (int k = 0; k < LANES_NV; k++) a.v[k] += b.v[k] * c.v[k];
    return a;
}

// Lane by lane, a where a > b, else b.
LANES_INLINE Lanes lanes_max(Lanes a, Lanes b) {
    for (int k = 0; k < LANES_NV; k++) a.v[k] = lanes_vselect(a.v[k] > b.v[k], a.v[k], b.v[k]);
    return a;
}

// The 16 lanes added pairwise: lane j with lane j + 8, then j + 4, ...
LANES_INLINE float lanes_total(Lanes a) {
    float t[LANES];
    memcpy(t, a.v, sizeof t);
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int j = 0; j < w; j++) t[j] += t[j + w];
    return t[0];
}

// acc's lane i % LANES += x[i], i in [0, n).
LANES_INLINE Lanes lanes_accumulate(Lanes acc, const float *x, int n) {
    int i = 0;
    for (; i + LANES <= n; i += LANES) acc = lanes_add(acc, lanes_load(x + i));
    if (i < n) acc = lanes_add(acc, lanes_load_part(x + i, n - i, 0.0f));
    return acc;
}

LANES_INLINE float sum_of(const float *x, int n) {
    return lanes_total(lanes_accumulate(lanes_splat(0.0f), x, n));
}

// The sum of (x[i] - mu)^2.
LANES_INLINE float sumsq_dev_of(const float *x, float mu, int n) {
    Lanes acc = lanes_splat(0.0f), m = lanes_splat(mu);
    int i = 0;
    for (; i + LANES <= n; i += LANES) {
        Lanes d = lanes_load(x + i);
        for (int k = 0; k < LANES_NV; k++) d.v[k] -= m.v[k];
        acc = lanes_add_mul(acc, d, d);
    }
    if (i < n) {
        Lanes d = lanes_load_part(x + i, n - i, mu);   // the lanes past the end give 0
        for (int k = 0; k < LANES_NV; k++) d.v[k] -= m.v[k];
        acc = lanes_add_mul(acc, d, d);
    }
    return lanes_total(acc);
}

// The largest of x[0 .. n - 1], n >= 1 (any order gives the same maximum).
LANES_INLINE float max_of(const float *x, int n) {
    Lanes acc = lanes_splat(x[0]);
    int i = 0;
    for (; i + LANES <= n; i += LANES) acc = lanes_max(lanes_load(x + i), acc);
    if (i < n) acc = lanes_max(lanes_load_part(x + i, n - i, x[0]), acc);
    float t[LANES];
    memcpy(t, acc.v, sizeof t);
    float mx = t[0];
    for (int j = 1; j < LANES; j++) mx = t[j] > mx ? t[j] : mx;
    return mx;
}

#endif
