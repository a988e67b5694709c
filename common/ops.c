// ops.c: the CPU kernels of every operation the model needs (see ops.h), and
// the dispatch: when the rank's buffers are on the GPU, each op hands them to
// its twin in ops_cuda.cu, which takes the same arguments.
//
// The matrix products go to BLAS (cblas_sgemm): they are nearly all of the
// arithmetic, and a tuned sgemm is what PyTorch's CPU path uses too, so the
// comparison is fair. Attention's small causal products have their own
// kernels at the usual shapes (see that section), and sgemm otherwise.
// Everything else is a plain loop over rows, written so that the compiler can
// see the rows do not overlap (`restrict`) and keep the inner loop tight.
//
// Every backward ADDS into its gradients and skips a gradient given as NULL;
// sgemm's beta = 1 is the "+=".
#include "ops.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "lanes.h"
#include "mem.h"
#include "ops_cuda.h"
#include "ops_rules.h"
#include "rng.h"

// The kernels below read and write through plain pointers, which is only
// right when the buffers are in host memory: on the GPU every op goes to its
// twin in ops_cuda.cu instead, unless a test asked for these (ops_use_host).
static bool g_use_host;

void ops_use_host(bool on) { g_use_host = on; }

static bool on_gpu(void) { return mem_device() == DEVICE_CUDA && !g_use_host; }

// ---- the arguments' extents --------------------------------------------------

// Every op checks that each of its arrays fits in the mem_alloc block it
// points into (mem_check_extent: a binary search per argument), so that a
// count, an element size or an offset that is wrong stops the run with the
// call's name instead of corrupting the heap. The loops inside the ops call
// the unchecked CPU loops (accumulate, accumulate_2d) instead.
static inline void ext(const char *op, const char *what, const void *p, size_t n, size_t elem) {
    if (p) mem_check_extent(op, what, p, n, elem);
}

static inline void ext2(const char *op, const char *what, const void *p, int rows, int ld, int cols, size_t elem) {
    if (p && rows > 0 && cols > 0) mem_check_extent_2d(op, what, p, (size_t)rows, (size_t)ld, (size_t)cols, elem);
}

// y += x and its rows, on the CPU, without the checks (the ops' own loops).
static void accumulate(float *restrict y, const float *restrict x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

static void accumulate_2d(float *dst, int dst_ld, const float *src, int src_ld, int rows, int cols) {
    for (int r = 0; r < rows; r++) accumulate(dst + (size_t)r * dst_ld, src + (size_t)r * src_ld, (size_t)cols);
}

void ops_set_tf32(bool on) { ops_cuda_set_tf32(on); }

// ---- the work asked for (ops.h) ------------------------------------------------

static OpsWork g_work;
static bool g_work_sealed;

OpsWork ops_work(void) { return g_work; }

void ops_work_reset(void) {
    CHECK(!g_work_sealed, "ops_work_reset after the harness sealed its measures: the work a run does is the "
          "harness's to count, not to erase");
    g_work = (OpsWork){0, 0};
}

void ops_work_seal(void) { g_work_sealed = true; }

// The other rounding (ops.h): libm's expf, every matrix product summed in
// two halves of its inner dimension, attention by sgemm. make ROUNDING=alt
// makes it the default of every program.
#ifndef PL_ROUNDING_ALT
#define PL_ROUNDING_ALT 0
#endif
static bool g_alt = PL_ROUNDING_ALT, g_partials = false;

void ops_set_rounding(OpsRounding r) {
    g_alt = r == OPS_ROUNDING_ALT;
    g_partials = r == OPS_ROUNDING_PARTIALS;
}
OpsRounding ops_rounding(void) {
    return g_alt ? OPS_ROUNDING_ALT : g_partials ? OPS_ROUNDING_PARTIALS : OPS_ROUNDING_NATIVE;
}
OpsRounding ops_rounding_default(void) { return PL_ROUNDING_ALT ? OPS_ROUNDING_ALT : OPS_ROUNDING_NATIVE; }
const char *ops_rounding_name(OpsRounding r) {
    return r == OPS_ROUNDING_ALT ? "alt" : r == OPS_ROUNDING_PARTIALS ? "partials" : "native";
}
OpsRounding ops_rounding_parse(const char *name) {
    CHECK(!strcmp(name, "native") || !strcmp(name, "alt") || !strcmp(name, "partials"),
          "rounding '%s' is none of native, alt, partials", name);
    return !strcmp(name, "alt") ? OPS_ROUNDING_ALT : !strcmp(name, "partials") ? OPS_ROUNDING_PARTIALS
                                                                             : OPS_ROUNDING_NATIVE;
}

void ops_init(void) {
    // Ranks are the parallelism: N ranks each with N BLAS threads would fight
    // over the same cores.
    openblas_set_num_threads(1);
    if (mem_device() == DEVICE_CUDA) {
        // cuBLAS's handle and workspace are the library's, not the program's:
        // left out of the device's measure, as NCCL's buffers are.
        size_t before = mem_measured_live();
        ops_cuda_init();
        mem_measured_exclude((ptrdiff_t)mem_measured_live() - (ptrdiff_t)before);
    }
}

// ---- matrix product ----------------------------------------------------------

void ops_matmul_forward(float *out, const float *inp, const float *w, const float *bias, int M,
                        int K, int N) {
    ext("ops_matmul_forward", "out", out, (size_t)M * N, sizeof(float));
    ext("ops_matmul_forward", "inp", inp, (size_t)M * K, sizeof(float));
    ext("ops_matmul_forward", "w", w, (size_t)K * N, sizeof(float));
    ext("ops_matmul_forward", "bias", bias, (size_t)N, sizeof(float));
    g_work.matmul += (double)M * K * N;
    if (on_gpu()) {
        ops_cuda_matmul_forward(out, inp, w, bias, M, K, N);
        return;
    }
    // Start every row of out at the bias, then let sgemm add inp @ w on top
    // (beta = 1): one pass over out instead of a product and a second add.
    float beta = 0.0f;
    if (bias) {
        for (int m = 0; m < M; m++) memcpy(out + (size_t)m * N, bias, (size_t)N * sizeof(float));
        beta = 1.0f;
    }
    // The other rounding: the sum over K in two parts, the last two thirds
    // first and the first third added onto them (a split-K product, as GPUs
    // make them; at a third, so that the split is none of BLAS's own blocks).
    int K1 = g_alt && K > 2 ? K / 3 : 0;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K - K1, 1.0f, inp + K1, K,
                w + (size_t)K1 * N, N, beta, out, N);
    if (K1 > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K1, 1.0f, inp, K, w, N, 1.0f,
                    out, N);
}

void ops_matmul_backward(float *dinp, float *dw, float *dbias, const float *dout,
                         const float *inp, const float *w, int M, int K, int N) {
    ext("ops_matmul_backward", "dinp", dinp, (size_t)M * K, sizeof(float));
    ext("ops_matmul_backward", "dw", dw, (size_t)K * N, sizeof(float));
    ext("ops_matmul_backward", "dbias", dbias, (size_t)N, sizeof(float));
    ext("ops_matmul_backward", "dout", dout, (size_t)M * N, sizeof(float));
    ext("ops_matmul_backward", "inp", inp, (size_t)M * K, sizeof(float));
    ext("ops_matmul_backward", "w", w, (size_t)K * N, sizeof(float));
    g_work.matmul += (double)M * K * N * ((dinp != NULL) + (dw != NULL));
    if (on_gpu()) {
        ops_cuda_matmul_backward(dinp, dw, dbias, dout, inp, w, M, K, N);
        return;
    }
    // The other rounding sums each product's inner dimension (N for dinp,
    // M for dw) in two parts, as the forward does. (Two adds into the
    // gradient then: a second call adds the same up to rounding, not to the
    // bit, which only this mode allows.)
    int N1 = g_alt && N > 2 ? N / 3 : 0, M1 = g_alt && M > 2 ? M / 3 : 0;
    // dinp (M, K) += dout (M, N) @ w^T (N, K)
    if (dinp) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, K, N - N1, 1.0f, dout + N1, N, w + N1, N,
                    1.0f, dinp, K);
        if (N1 > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, K, N1, 1.0f, dout, N, w, N, 1.0f,
                        dinp, K);
    }
    // dw (K, N) += inp^T (K, M) @ dout (M, N)
    if (dw) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, M - M1, 1.0f, inp + (size_t)M1 * K, K,
                    dout + (size_t)M1 * N, N, 1.0f, dw, N);
        if (M1 > 0)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, M1, 1.0f, inp, K, dout, N, 1.0f,
                        dw, N);
    }
    ops_bias_backward(dbias, dout, M, N);
}

// ---- matrix products of bf16 inputs ----------------------------------------------

// x widened to fp32 (exactly) into the library's own scratch `slot` (0 to
// 2: a product widens up to three inputs), kept from product to product
// and grown when a larger one comes: a bf16 product on the CPU is sgemm's
// on these. (Allocated and freed per product, the buffers above malloc's
// mmap threshold were mapped, faulted in and unmapped every time: 8,300
// page faults a step, a quarter of a bf16 step in the kernel.)
// (Slot 3: the other rounding's partial product, below.)
static float *g_widened[4];
static size_t g_widened_cap[4];

static float *scratch(int slot, size_t n) {
    if (n > g_widened_cap[slot]) {
        free(g_widened[slot]);
        g_widened[slot] = malloc(n * sizeof(float));
        CHECK(g_widened[slot], "out of memory: %zu floats of a bf16 product's scratch", n);
        g_widened_cap[slot] = n;
    }
    return g_widened[slot];
}

static float *widened(int slot, const bf16 *x, size_t n) {
    float *f = scratch(slot, n);
    for (size_t i = 0; i < n; i++) f[i] = bf16_to_float(x[i]);
    return f;
}

// x = bf16(x), in place: a partial product as it travels in bf16.
static void round_bf16(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = bf16_to_float(bf16_from_float(x[i]));
}

void ops_release_scratch(void) {
    for (int k = 0; k < 4; k++) {
        free(g_widened[k]);
        g_widened[k] = NULL;
        g_widened_cap[k] = 0;
    }
}

void ops_matmul_forward_bf16(float *out, const bf16 *inp, const bf16 *w, const float *bias, int M, int K, int N) {
    ext("ops_matmul_forward_bf16", "out", out, (size_t)M * N, sizeof(float));
    ext("ops_matmul_forward_bf16", "inp", inp, (size_t)M * K, sizeof(bf16));
    ext("ops_matmul_forward_bf16", "w", w, (size_t)K * N, sizeof(bf16));
    ext("ops_matmul_forward_bf16", "bias", bias, (size_t)N, sizeof(float));
    if (on_gpu()) {
        g_work.matmul += (double)M * K * N;
        ops_cuda_matmul_forward_bf16(out, inp, w, bias, M, K, N);
        return;
    }
    const float *fi = widened(0, inp, (size_t)M * K), *fw = widened(1, w, (size_t)K * N);
    int K1 = g_partials && K > 2 ? K / 3 : 0;
    if (K1 == 0) {
        ops_matmul_forward(out, fi, fw, bias, M, K, N);
        return;
    }
    // The partials rounding: the two parts of the sum over K each rounded to
    // bf16, then added (in fp32) and the bias after them (ops.h).
    g_work.matmul += (double)M * K * N;
    const size_t MN = (size_t)M * N;
    float *part = scratch(3, MN);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K - K1, 1.0f, fi + K1, K, fw + (size_t)K1 * N, N,
                0.0f, out, N);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K1, 1.0f, fi, K, fw, N, 0.0f, part, N);
    round_bf16(out, MN);
    round_bf16(part, MN);
    for (size_t i = 0; i < MN; i++) out[i] += part[i];
    if (bias) ops_add_bias(out, bias, M, N);
}

void ops_matmul_backward_bf16(float *dinp, float *dw, float *dbias, const bf16 *dout, const bf16 *inp,
                              const bf16 *w, int M, int K, int N) {
    ext("ops_matmul_backward_bf16", "dinp", dinp, (size_t)M * K, sizeof(float));
    ext("ops_matmul_backward_bf16", "dw", dw, (size_t)K * N, sizeof(float));
    ext("ops_matmul_backward_bf16", "dbias", dbias, (size_t)N, sizeof(float));
    ext("ops_matmul_backward_bf16", "dout", dout, (size_t)M * N, sizeof(bf16));
    ext("ops_matmul_backward_bf16", "inp", inp, (size_t)M * K, sizeof(bf16));
    ext("ops_matmul_backward_bf16", "w", w, (size_t)K * N, sizeof(bf16));
    if (on_gpu()) {
        g_work.matmul += (double)M * K * N * ((dinp != NULL) + (dw != NULL));
        ops_cuda_matmul_backward_bf16(dinp, dw, dbias, dout, inp, w, M, K, N);
        return;
    }
    const float *fd = widened(0, dout, (size_t)M * N), *fi = dw ? widened(1, inp, (size_t)M * K) : NULL,
                *fw = dinp ? widened(2, w, (size_t)K * N) : NULL;
    int N1 = g_partials && N > 2 ? N / 3 : 0;
    if (!dinp || N1 == 0) {
        ops_matmul_backward(dinp, dw, dbias, fd, fi, fw, M, K, N);
        return;
    }
    // The partials rounding: the input gradient's two parts (over N) each
    // rounded to bf16, then added into dinp (ops.h); the weight's and the
    // bias's gradients as in fp32.
    ops_matmul_backward(NULL, dw, dbias, fd, fi, fw, M, K, N);
    g_work.matmul += (double)M * K * N;
    const size_t MK = (size_t)M * K;
    float *part = scratch(3, MK);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, K, N - N1, 1.0f, fd + N1, N, fw + N1, N, 0.0f, part, K);
    round_bf16(part, MK);
    accumulate(dinp, part, MK);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, K, N1, 1.0f, fd, N, fw, N, 0.0f, part, K);
    round_bf16(part, MK);
    accumulate(dinp, part, MK);
}

// ---- elementwise -------------------------------------------------------------

// out may be a or b (x = x + y), so no restrict here.
void ops_add(float *out, const float *a, const float *b, size_t n) {
    ext("ops_add", "out", out, n, sizeof(float));
    ext("ops_add", "a", a, n, sizeof(float));
    ext("ops_add", "b", b, n, sizeof(float));
    if (on_gpu()) {
        ops_cuda_add(out, a, b, n);
        return;
    }
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void ops_accumulate(float *restrict y, const float *restrict x, size_t n) {
    ext("ops_accumulate", "y", y, n, sizeof(float));
    ext("ops_accumulate", "x", x, n, sizeof(float));
    if (on_gpu()) {
        ops_cuda_accumulate(y, x, n);
        return;
    }
    accumulate(y, x, n);
}

void ops_scale(float *x, float s, size_t n) {
    ext("ops_scale", "x", x, n, sizeof(float));
    if (on_gpu()) {
        ops_cuda_scale(x, s, n);
        return;
    }
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

void ops_fill(float *x, float v, size_t n) {
    ext("ops_fill", "x", x, n, sizeof(float));
    if (on_gpu()) {
        ops_cuda_fill(x, v, n);
        return;
    }
    for (size_t i = 0; i < n; i++) x[i] = v;
}

void ops_to_bf16(bf16 *out, const float *x, size_t n) {
    ext("ops_to_bf16", "out", out, n, sizeof(bf16));
    ext("ops_to_bf16", "x", x, n, sizeof(float));
    if (on_gpu()) {
        ops_cuda_to_bf16(out, x, n);
        return;
    }
    for (size_t i = 0; i < n; i++) out[i] = bf16_from_float(x[i]);
}

void ops_from_bf16(float *out, const bf16 *x, size_t n) {
    ext("ops_from_bf16", "out", out, n, sizeof(float));
    ext("ops_from_bf16", "x", x, n, sizeof(bf16));
    if (on_gpu()) {
        ops_cuda_from_bf16(out, x, n);
        return;
    }
    for (size_t i = 0; i < n; i++) out[i] = bf16_to_float(x[i]);
}

void ops_accumulate_bf16(bf16 *y, const float *x, size_t n) {
    ext("ops_accumulate_bf16", "y", y, n, sizeof(bf16));
    ext("ops_accumulate_bf16", "x", x, n, sizeof(float));
    if (on_gpu()) {
        ops_cuda_accumulate_bf16(y, x, n);
        return;
    }
    for (size_t i = 0; i < n; i++) y[i] = bf16_from_float(bf16_to_float(y[i]) + x[i]);
}

// ---- exp that the compiler can vectorize -------------------------------------

// exp(x) for float x, within 2 ulp of expf, as straight-line code: the loops
// of GELU and the softmaxes that call it are vectorized by the compiler,
// where a call to the library's expf would run one element at a time (those
// loops were most of the time outside the matrix products).
// exp(x) = 2^n e^r with n = round(x / ln 2) and |r| <= ln(2)/2; e^r from
// Cephes' degree-6 polynomial for expf; 2^n made in the float's exponent bits.
//
// e^r = EXP_REDUCED(x, n): r = x - n ln 2 (ln 2 in two parts, exactly), then
// the polynomial. A GNU statement expression over __typeof__, so that these
// floats and the attention kernels' vectors (att_vexp) share one definition.
#define EXP_REDUCED(x, n)                                                      \
    ({                                                                         \
        __typeof__(x) r_ = (x) - (n) * 0.693359375f + (n) * 2.12194440e-4f;    \
        __typeof__(x) r2_ = r_ * r_;                                           \
        __typeof__(x) p_ = 1.9875691500e-4f * r_ + 1.3981999507e-3f;           \
        p_ = p_ * r_ + 8.3334519073e-3f;                                       \
        p_ = p_ * r_ + 4.1665795894e-2f;                                       \
        p_ = p_ * r_ + 1.6666665459e-1f;                                       \
        p_ = p_ * r_ + 5.0000001201e-1f;                                       \
        p_ * r2_ + r_ + 1.0f;                                                  \
    })

static inline float vexpf(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);   // 2^n stays a normal float
    float n = __builtin_rintf(x * 1.44269504088896341f);
    float p = EXP_REDUCED(x, n);
    // Unsigned, so that a NaN (whose n converts to some integer) shifts
    // without undefined behaviour; p is NaN then, and so is the result.
    uint32_t bits = ((uint32_t)(int32_t)n + 127u) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

// exp by vexpf, or (the other rounding) by libm's expf. A loop that calls it
// is a function of `libm` made twice (EXP_TWICE), so that the vexpf one is
// vectorized with no test inside it: the compiler does not split a loop on
// a flag by itself everywhere (GELU's loops were not).
static inline float exp_of(float x, bool libm) { return libm ? expf(x) : vexpf(x); }
#define EXP_TWICE(f, ...) (g_alt ? f(__VA_ARGS__, true) : f(__VA_ARGS__, false))
#define EXP_INLINE static inline __attribute__((always_inline))

// sqrt(2/pi), and the cubic coefficient of the tanh approximation of GELU.
static const float GELU_K = 0.7978845608028654f;
static const float GELU_A = 0.044715f;

// 0.5 (1 + tanh u) is the logistic sigmoid of 2u, so
//   gelu(x) = x s,   s = 1 / (1 + exp(-2u)).
// One expf instead of a tanhf (a sixth of the time, measured), and more accurate: in
// GELU's left tail 1 + tanhf(u) cancels to a few correct digits, while s stays
// exact to float precision (far in the tail exp saturates near 1.6e38 and s
// rounds to 0, as it should). No branch, so no mispredicted one on inputs of random sign.
EXP_INLINE void gelu_forward(float *out, const float *x, size_t n, bool libm) {
    for (size_t i = 0; i < n; i++) {
        float xi = x[i];
        float u = GELU_K * (xi + GELU_A * xi * xi * xi);
        out[i] = xi / (1.0f + exp_of(-2.0f * u, libm));
    }
}

void ops_gelu_forward(float *out, const float *x, size_t n) {   // out may be x
    if (on_gpu()) {
    ext("ops_gelu_forward", "out", out, n, sizeof(float));
    ext("ops_gelu_forward", "x", x, n, sizeof(float));
        ops_cuda_gelu_forward(out, x, n);
        return;
    }
    EXP_TWICE(gelu_forward, out, x, n);
}

// d/dx [x s(2u)] = s + x s (1 - s) 2 du/dx, with u = k (x + a x^3) and
// du/dx = k (1 + 3 a x^2); s (1 - s) is the sigmoid's derivative.
EXP_INLINE void gelu_backward(float *restrict dx, const float *restrict dout, const float *restrict x,
                              size_t n, bool libm) {
    for (size_t i = 0; i < n; i++) {
        float xi = x[i];
        float u = GELU_K * (xi + GELU_A * xi * xi * xi);
        float s = 1.0f / (1.0f + exp_of(-2.0f * u, libm));
        float du = GELU_K * (1.0f + 3.0f * GELU_A * xi * xi);
        dx[i] += (s + 2.0f * xi * s * (1.0f - s) * du) * dout[i];
    }
}

void ops_gelu_backward(float *restrict dx, const float *restrict dout, const float *restrict x,
                       size_t n) {
    ext("ops_gelu_backward", "dx", dx, n, sizeof(float));
    ext("ops_gelu_backward", "dout", dout, n, sizeof(float));
    ext("ops_gelu_backward", "x", x, n, sizeof(float));
    if (on_gpu()) {
        ops_cuda_gelu_backward(dx, dout, x, n);
        return;
    }
    EXP_TWICE(gelu_backward, dx, dout, x, n);
}

// ---- layer norm --------------------------------------------------------------

static const float LN_EPS = 1e-5f;

void ops_layernorm_forward(float *restrict out, float *restrict mean, float *restrict rstd,
                           const float *restrict x, const float *restrict w,
                           const float *restrict b, int M, int C) {
    ext("ops_layernorm_forward", "out", out, (size_t)M * C, sizeof(float));
    ext("ops_layernorm_forward", "mean", mean, (size_t)M, sizeof(float));
    ext("ops_layernorm_forward", "rstd", rstd, (size_t)M, sizeof(float));
    ext("ops_layernorm_forward", "x", x, (size_t)M * C, sizeof(float));
    ext("ops_layernorm_forward", "w", w, (size_t)C, sizeof(float));
    ext("ops_layernorm_forward", "b", b, (size_t)C, sizeof(float));
    g_work.layernorm += M;
    if (on_gpu()) {
        ops_cuda_layernorm_forward(out, mean, rstd, x, w, b, M, C);
        return;
    }
    for (int m = 0; m < M; m++) {
        const float *xr = x + (size_t)m * C;   // (C)
        float *outr = out + (size_t)m * C;     // (C)
        // Mean, then the variance around it (two passes: the one-pass
        // E[x^2] - E[x]^2 cancels badly when the mean is large), each a sum
        // in 16 lanes (lanes.h), as PyTorch's CPU kernel sums in vectors.
        float mu = sum_of(xr, C) / C;
        float var = sumsq_dev_of(xr, mu, C) / C;
        float rs = 1.0f / sqrtf(var + LN_EPS);   // biased variance, as torch
        for (int c = 0; c < C; c++) outr[c] = (xr[c] - mu) * rs * w[c] + b[c];
        mean[m] = mu;
        rstd[m] = rs;
    }
}

void ops_layernorm_backward(float *restrict dx, float *restrict dw, float *restrict db,
                            const float *restrict dout, const float *restrict x,
                            const float *restrict w, const float *restrict mean,
                            const float *restrict rstd, int M, int C) {
    ext("ops_layernorm_backward", "dx", dx, (size_t)M * C, sizeof(float));
    ext("ops_layernorm_backward", "dw", dw, (size_t)C, sizeof(float));
    ext("ops_layernorm_backward", "db", db, (size_t)C, sizeof(float));
    ext("ops_layernorm_backward", "dout", dout, (size_t)M * C, sizeof(float));
    ext("ops_layernorm_backward", "x", x, (size_t)M * C, sizeof(float));
    ext("ops_layernorm_backward", "w", w, (size_t)C, sizeof(float));
    ext("ops_layernorm_backward", "mean", mean, (size_t)M, sizeof(float));
    ext("ops_layernorm_backward", "rstd", rstd, (size_t)M, sizeof(float));
    g_work.layernorm += M;
    if (on_gpu()) {
        ops_cuda_layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, M, C);
        return;
    }
    // With n = (x - mean) rstd and out = n w + b, the gradient through the
    // normalization is (llm.c's form)
    //   dx = rstd (dn - mean(dn) - n mean(dn n)),   dn = dout w,
    // the two means being what the mean and the variance depend on every x.
    for (int m = 0; m < M; m++) {
        const float *doutr = dout + (size_t)m * C;   // (C)
        const float *xr = x + (size_t)m * C;         // (C)
        float mu = mean[m], rs = rstd[m];
        if (dw || db)
            for (int c = 0; c < C; c++) {
                float n = (xr[c] - mu) * rs;
                if (dw) dw[c] += n * doutr[c];
                if (db) db[c] += doutr[c];
            }
        if (!dx) continue;
        // The two means, over dn = dout w and dn n, in lanes (lanes.h).
        // dn n is summed as dn ((x - mean) rstd), the lanes past the row's
        // end holding 0 in both factors.
        Lanes acc = lanes_splat(0.0f), acc_n = lanes_splat(0.0f);
        Lanes mu_l = lanes_splat(mu), rs_l = lanes_splat(rs);
        for (int c0 = 0; c0 < C; c0 += LANES) {
            int k = C - c0;
            Lanes dn = lanes_load_upto(w + c0, k, 0.0f);
            Lanes d = lanes_load_upto(doutr + c0, k, 0.0f);
            Lanes n = lanes_load_upto(xr + c0, k, mu);
            for (int v = 0; v < LANES_NV; v++) {
                dn.v[v] *= d.v[v];
                n.v[v] = (n.v[v] - mu_l.v[v]) * rs_l.v[v];
            }
            acc = lanes_add(acc, dn);
            acc_n = lanes_add_mul(acc_n, dn, n);
        }
        float dn_mean = lanes_total(acc) / C;
        float dn_n_mean = lanes_total(acc_n) / C;
        float *dxr = dx + (size_t)m * C;   // (C)
        for (int c = 0; c < C; c++) {
            float n = (xr[c] - mu) * rs;
            float dn = w[c] * doutr[c];
            dxr[c] += rs * (dn - dn_mean - n * dn_n_mean);
        }
    }
}

// ---- causal multi-head self-attention ----------------------------------------
//
// Head h of batch row b is a (T, hs) matrix inside q: it starts at
// q + b T C + h hs and its rows are C floats apart. Both ways below read it
// in place with that row stride, so no head is copied out whole.
//
// The four (T, T) products of a head are small (at T = 64 and hs = 32, 32
// numbers summed per element) and half of each is known to be 0: row t of the
// scores and of the probabilities has nothing right of column t. Two ways to
// compute them:
//  - the kernels of the next section, which compute only the blocks on or
//    below the diagonal and keep each block's sums in vector registers; the
//    scores of a block of rows go through their softmax and on into att @ v
//    while they are still in L1. Used when a head's width is a whole number
//    of the target's vectors and T is at most ATT_TMAX (with the transposed
//    head within ATT_PACK).
//  - sgemm for any other shape, by blocks of ATT_ROWS rows, each with the
//    columns up to its last row (3/4 of the full products' work at T = 64).
// What either skips adds exact zeros, so only the rounding differs between
// them, by an ulp or so.

// ---- causal products in vector registers ----

// A block of the kernels' products is ATT_R rows by ATT_NV vectors: 12 sums
// held in registers, more than the 8 that keep the two FMA units busy (each
// takes an FMA a cycle, ready 4 cycles later), and with the broadcast number
// of the left factor 13 of the 16 vector registers of AVX2 or SSE; the FMAs
// read the right factor's vectors from memory themselves. Measured at T = 64,
// hs = 32: blocks of 4 rows by 2 vectors ran at 50-65 GFLOP/s, 6 by 2 at
// 80-94 (sgemm on the model's large products: 78).
enum {
    ATT_VW = LANES_VW,           // floats in a vector
    ATT_R = 6,                   // rows of a block
    ATT_NV = 2,                  // vectors in a block's row
    ATT_CW = ATT_NV * ATT_VW,    // T is padded to a multiple of this (Tp)
    // The largest Tp. Against sgemm, measured at B = 8, C = 128, hs = 32 and
    // 64 (best of 4 alternated runs): the kernels' forward is 1.9x and 1.75x
    // as fast at T = 64, 1.4x to 1.8x from 128 to 1024; their backward 1.7x
    // and 1.55x at T = 64, 1.3x at 128, even within the noise at 256, and
    // 1.15x slower at T = 1024, hs = 64, where the column reads of att^T dout
    // and dscores^T q go past the caches. Past 256, sgemm.
    ATT_TMAX = 256,
    // The transposed k (forward) or v (backward) of one head, (hs, Tp) floats
    // on the stack: 64 KiB, hs <= 64 at T = 256. Nothing is allocated (mem.h
    // would count it), and the forward has no scratch to lend.
    ATT_PACK = 16384,
};

// Rows [0, R) of a product NV vectors wide, kn terms to a sum:
//   out[r ldo + j] = alpha sum_{k < kn} a[r ars + k aks] x[k ldx + j]   (add: +=)
// for j < NV ATT_VW. The left factor is read one number at a time and
// broadcast, so it may be a block of rows (ars its row stride, aks = 1) or,
// transposed, a block of columns (ars = 1, aks its row stride); the right
// factor is read a row of NV vectors at a time. R and NV are constants at
// every call, so the loops over them unroll and acc lives in registers; the
// sums run over k in order, one FMA per term.
LANES_INLINE void att_block(int R, int NV, float *out, ptrdiff_t ldo, float alpha, bool add,
                            const float *a, ptrdiff_t ars, ptrdiff_t aks, const float *x,
                            ptrdiff_t ldx, int kn) {
    lanes_vec acc[ATT_R][ATT_NV];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < NV; j++) acc[r][j] = lanes_vsplat(0.0f);
    for (int k = 0; k < kn; k++) {
        lanes_vec xv[ATT_NV];
        for (int j = 0; j < NV; j++) xv[j] = lanes_vload(x + k * ldx + j * ATT_VW);
        for (int r = 0; r < R; r++) {
            float ar = a[r * ars + k * aks];
            for (int j = 0; j < NV; j++) acc[r][j] += ar * xv[j];
        }
    }
    for (int r = 0; r < R; r++)
        for (int j = 0; j < NV; j++) {
            float *o = out + r * ldo + j * ATT_VW;
            lanes_vec y = alpha * acc[r][j];
            if (add) y += lanes_vload(o);
            lanes_vstore(o, y);
        }
}

// The same product for rows [0, rows), rows <= ATT_R, and the columns
// [0, ncols) rounded up to whole vectors: by chunks of ATT_NV vectors, and a
// last chunk of one where one is enough. The right factor and out must have
// those columns (Tp of a transposed head, or hs).
static void att_rows(int rows, int ncols, float *out, ptrdiff_t ldo, float alpha, bool add,
                     const float *a, ptrdiff_t ars, ptrdiff_t aks, const float *x, ptrdiff_t ldx,
                     int kn) {
#define ATT_BLOCK(R, NV) att_block(R, NV, out + c, ldo, alpha, add, a, ars, aks, x + c, ldx, kn)
#define ATT_BLOCKS(NV)                            \
    switch (rows) {                               \
    case 6: ATT_BLOCK(6, NV); break;              \
    case 5: ATT_BLOCK(5, NV); break;              \
    case 4: ATT_BLOCK(4, NV); break;              \
    case 3: ATT_BLOCK(3, NV); break;              \
    case 2: ATT_BLOCK(2, NV); break;              \
    default: ATT_BLOCK(1, NV); break;             \
    }
    for (int c = 0; c < ncols;) {
        if (ncols - c > ATT_VW) {
            ATT_BLOCKS(2)
            c += 2 * ATT_VW;
        } else {
            ATT_BLOCKS(1)
            c += ATT_VW;
        }
    }
#undef ATT_BLOCKS
#undef ATT_BLOCK
}

// The lane numbers 0, 1, ..., ATT_VW - 1.
#if LANES_VW == 16
#define ATT_IOTA {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
#elif LANES_VW == 8
#define ATT_IOTA {0, 1, 2, 3, 4, 5, 6, 7}
#else
#define ATT_IOTA {0, 1, 2, 3}
#endif

// One step of the transpose of ATT_VW vectors r (a square block): in every
// 2b x 2b block, the two off-diagonal b x b blocks change places. After the
// steps b = ATT_VW / 2, ..., 2, 1 the block is transposed. Each step is a
// shuffle of two vectors with a constant pattern (AVX2: vperm2f128, vshufps,
// vblendps and the like; one or two instructions each).
LANES_INLINE void att_swap_blocks(lanes_vec *r, int b) {
    const lanes_mask j = ATT_IOTA, upper = (j & b) != 0;
    const lanes_mask lo = j + (upper & (ATT_VW - b)), hi = lo + b;
#pragma GCC unroll 16
    for (int i = 0; i < ATT_VW; i++)
        if (!(i & b)) {
            lanes_vec x = r[i], y = r[i + b];
            r[i] = __builtin_shuffle(x, y, lo);
            r[i + b] = __builtin_shuffle(x, y, hi);
        }
}

// xt (hs, Tp) = x^T for x (T, hs) with row stride C, hs a multiple of
// ATT_VW; columns [T, Tp) are 0. By square blocks of ATT_VW, transposed in
// registers; the rows past the last whole block one number at a time.
static void att_transpose(float *restrict xt, const float *restrict x, int T, int Tp, int hs,
                          int C) {
    int s = 0;
    for (; s + ATT_VW <= T; s += ATT_VW)
        for (int d = 0; d < hs; d += ATT_VW) {
            lanes_vec r[ATT_VW];
            for (int i = 0; i < ATT_VW; i++) r[i] = lanes_vload(x + (size_t)(s + i) * C + d);
#pragma GCC unroll 4
            for (int b = ATT_VW / 2; b > 0; b /= 2) att_swap_blocks(r, b);
            for (int i = 0; i < ATT_VW; i++) lanes_vstore(xt + (size_t)(d + i) * Tp + s, r[i]);
        }
    for (; s < T; s++)
        for (int d = 0; d < hs; d++) xt[(size_t)d * Tp + s] = x[(size_t)s * C + d];
    for (int d = 0; d < hs; d++)
        for (s = T; s < Tp; s++) xt[(size_t)d * Tp + s] = 0.0f;
}

// Lane j of the vector that starts at column s is column s + j: true where
// that is <= t.
LANES_INLINE lanes_mask att_upto(int s, int t) {
    const lanes_mask j = ATT_IOTA;
    return j <= t - s;
}

typedef uint32_t att_bits __attribute__((vector_size(LANES_VW * sizeof(uint32_t))));

// vexpf on each lane, by the same steps, but for n: 1.5 2^23 + x / ln 2
// rounds to the integer nearest x / ln 2 (as rintf does), which is then the
// float's low bits, so 2^n's exponent bits come from those by unsigned
// integer arithmetic (a NaN gives some bits, and the NaN of p stays).
LANES_INLINE lanes_vec att_vexp(lanes_vec x) {
    const lanes_vec lo = lanes_vsplat(-87.0f), hi = lanes_vsplat(88.0f);
    const lanes_vec round = lanes_vsplat(12582912.0f);
    x = lanes_vselect(x < lo, lo, x);   // a NaN compares false both times and stays
    x = lanes_vselect(x > hi, hi, x);
    lanes_vec rn = x * 1.44269504088896341f + round, n = rn - round;
    lanes_vec p = EXP_REDUCED(x, n);
    att_bits bits = ((att_bits)rn - (att_bits)round + 127) << 23;
    return p * (lanes_vec)bits;
}

// The sum, or the maximum, of the lanes, in every lane: lane j with lane
// j ^ w for w = ATT_VW / 2, ..., 1 (shuffles within the registers; every
// lane adds the same pairs, so all get the same float).
LANES_INLINE lanes_vec att_vsum(lanes_vec v) {
    const lanes_mask j = ATT_IOTA;
#pragma GCC unroll 4
    for (int w = ATT_VW / 2; w > 0; w /= 2) v += __builtin_shuffle(v, j ^ w);
    return v;
}

LANES_INLINE lanes_vec att_vmax(lanes_vec v) {
    const lanes_mask j = ATT_IOTA;
#pragma GCC unroll 4
    for (int w = ATT_VW / 2; w > 0; w /= 2) {
        lanes_vec u = __builtin_shuffle(v, j ^ w);
        v = lanes_vselect(u > v, u, v);
    }
    return v;
}

// The vector at column s of a row of n floats, loaded or stored whole, or
// only its part inside the row (the lanes past it read as 0).
LANES_INLINE lanes_vec att_load_row(const float *row, int s, int n) {
    if (s + ATT_VW <= n) return lanes_vload(row + s);
    lanes_vec v = lanes_vsplat(0.0f);
    memcpy(&v, row + s, (size_t)(n - s) * sizeof(float));
    return v;
}

LANES_INLINE void att_store_row(float *row, int s, int n, lanes_vec v) {
    if (s + ATT_VW <= n)
        lanes_vstore(row + s, v);
    else
        memcpy(row + s, &v, (size_t)(n - s) * sizeof(float));
}

// Columns [s, n) of a row set to 0.
LANES_INLINE void att_zero_row(float *row, int s, int n) {
    for (; s + ATT_VW <= n; s += ATT_VW) lanes_vstore(row + s, lanes_vsplat(0.0f));
    for (; s < n; s++) row[s] = 0.0f;
}

// The softmax of rows t0 + r, r < R, of the scores over their past s <= t.
// Row r of tile (row stride Tp) holds the scores in the columns [0, end) and
// gets the probabilities there, exact zeros right of t; row t0 + r of a
// (T, T) gets them too, and zeros on to T. The R rows go together, vector by
// vector: R independent chains of work, where one row alone would wait on
// its own sums and maxima. The lanes right of t are left out of the maximum
// (they repeat column 0) and chosen away after the exp, never multiplied by
// 0: they are scores of the future and may be anything, a NaN included.
LANES_INLINE void att_softmax_rows(int R, float *restrict tile, int Tp, float *restrict a, int t0,
                                   int T, int end) {
    lanes_vec first[ATT_R], mx[ATT_R], sum[ATT_R];
    for (int r = 0; r < R; r++) mx[r] = first[r] = lanes_vsplat(tile[(size_t)r * Tp]);
    for (int s = 0; s < end; s += ATT_VW)
        for (int r = 0; r < R; r++) {
            lanes_vec x = lanes_vselect(att_upto(s, t0 + r), lanes_vload(tile + (size_t)r * Tp + s),
                                        first[r]);
            mx[r] = lanes_vselect(x > mx[r], x, mx[r]);
        }
    for (int r = 0; r < R; r++) mx[r] = att_vmax(mx[r]), sum[r] = lanes_vsplat(0.0f);
    for (int s = 0; s < end; s += ATT_VW)
        for (int r = 0; r < R; r++) {
            float *p = tile + (size_t)r * Tp + s;
            lanes_vec e = att_vexp(lanes_vload(p) - mx[r]);
            e = lanes_vselect(att_upto(s, t0 + r), e, lanes_vsplat(0.0f));
            sum[r] += e;
            lanes_vstore(p, e);
        }
    for (int r = 0; r < R; r++) sum[r] = 1.0f / att_vsum(sum[r]);
    for (int s = 0; s < end; s += ATT_VW)
        for (int r = 0; r < R; r++) {
            float *p = tile + (size_t)r * Tp + s;
            lanes_vec y = lanes_vload(p) * sum[r];
            lanes_vstore(p, y);
            att_store_row(a + (size_t)(t0 + r) * T, s, T, y);
        }
    for (int r = 0; r < R; r++) att_zero_row(a + (size_t)(t0 + r) * T, end, T);
}

// The softmax's backward for rows t0 + r, r < R: row r of tile holds datt in
// the columns [0, end) and gets dscores there,
//   dscores[s] = att[s] (datt[s] - sum_s' att[s'] datt[s']),   s, s' <= t,
// exact zeros right of t; row t0 + r of d (T, T) gets them too, and zeros
// on to T. a is att (T, T): read in part where a vector runs past T. The
// lanes right of t are chosen away as in the forward.
LANES_INLINE void att_softmax_backward_rows(int R, float *restrict tile, int Tp,
                                            const float *restrict a, float *restrict d, int t0,
                                            int T, int end) {
    lanes_vec dot[ATT_R];
    for (int r = 0; r < R; r++) dot[r] = lanes_vsplat(0.0f);
    for (int s = 0; s < end; s += ATT_VW)
        for (int r = 0; r < R; r++) {
            lanes_vec p = att_load_row(a + (size_t)(t0 + r) * T, s, T);
            lanes_vec x = p * lanes_vload(tile + (size_t)r * Tp + s);
            dot[r] += lanes_vselect(att_upto(s, t0 + r), x, lanes_vsplat(0.0f));
        }
    for (int r = 0; r < R; r++) dot[r] = att_vsum(dot[r]);
    for (int s = 0; s < end; s += ATT_VW)
        for (int r = 0; r < R; r++) {
            float *g = tile + (size_t)r * Tp + s;
            lanes_vec p = att_load_row(a + (size_t)(t0 + r) * T, s, T);
            lanes_vec y = lanes_vselect(att_upto(s, t0 + r), p * (lanes_vload(g) - dot[r]),
                                        lanes_vsplat(0.0f));
            lanes_vstore(g, y);
            att_store_row(d + (size_t)(t0 + r) * T, s, T, y);
        }
    for (int r = 0; r < R; r++) att_zero_row(d + (size_t)(t0 + r) * T, end, T);
}

// n rounded up to a multiple of m.
static int att_round_up(int n, int m) { return (n + m - 1) / m * m; }

// Whether the kernels take a head of hs channels over T positions.
static bool att_kernels_fit(int T, int hs) {
    int Tp = att_round_up(T, ATT_CW);
    return hs % ATT_VW == 0 && Tp <= ATT_TMAX && (size_t)hs * Tp <= ATT_PACK;
}

// One head's forward by the kernels. Rows by blocks of ATT_R: the block's
// scores against the columns up to its last row, their softmax, then its
// rows of att @ v, whose terms stop at that same column.
static void att_forward_head(float *oh, float *a, const float *qh, const float *kh,
                             const float *vh, float *kt, float *tile, int T, int C, int hs,
                             float scale) {
    int Tp = att_round_up(T, ATT_CW);
    att_transpose(kt, kh, T, Tp, hs, C);   // (hs, Tp)
    for (int t0 = 0; t0 < T; t0 += ATT_R) {
        int R = T - t0 < ATT_R ? T - t0 : ATT_R, n = t0 + R;
        int end = att_round_up(n, ATT_VW);
        // tile (R, Tp): scores of rows [t0, n), columns [0, end).
        att_rows(R, n, tile, Tp, scale, false, qh + (size_t)t0 * C, C, 1, kt, Tp, hs);
        if (R == ATT_R)
            att_softmax_rows(ATT_R, tile, Tp, a, t0, T, end);
        else
            for (int r = 0; r < R; r++)
                att_softmax_rows(1, tile + (size_t)r * Tp, Tp, a, t0 + r, T, end);
        // out rows [t0, n) = tile (R, n) @ v rows [0, n).
        att_rows(R, hs, oh + (size_t)t0 * C, C, 1.0f, false, tile, Tp, 1, vh, C, n);
    }
}

// One head's backward by the kernels; d (T, T) is the head's part of scratch.
static void att_backward_head(float *dqh, float *dkh, float *dvh, float *d, const float *doh,
                              const float *a, const float *qh, const float *kh, const float *vh,
                              float *vt, float *tile, int T, int C, int hs, float scale) {
    // dv rows [s0, s0 + R) += att^T @ dout: column s of att is 0 above row
    // s, so the terms start at row s0.
    if (dvh)
        for (int s0 = 0; s0 < T; s0 += ATT_R) {
            int R = T - s0 < ATT_R ? T - s0 : ATT_R;
            att_rows(R, hs, dvh + (size_t)s0 * C, C, 1.0f, true, a + (size_t)s0 * T + s0, 1, T,
                     doh + (size_t)s0 * C, C, T - s0);
        }
    if (!dqh && !dkh) return;
    int Tp = att_round_up(T, ATT_CW);
    att_transpose(vt, vh, T, Tp, hs, C);   // (hs, Tp)
    for (int t0 = 0; t0 < T; t0 += ATT_R) {
        int R = T - t0 < ATT_R ? T - t0 : ATT_R, n = t0 + R;
        int end = att_round_up(n, ATT_VW);
        // tile (R, Tp): datt = dout @ v^T for rows [t0, n), columns [0, end),
        // then dscores, which also go to d for dk.
        att_rows(R, n, tile, Tp, 1.0f, false, doh + (size_t)t0 * C, C, 1, vt, Tp, hs);
        if (R == ATT_R)
            att_softmax_backward_rows(ATT_R, tile, Tp, a, d, t0, T, end);
        else
            for (int r = 0; r < R; r++)
                att_softmax_backward_rows(1, tile + (size_t)r * Tp, Tp, a, d, t0 + r, T, end);
        // scores = scale q k^T, so dq += scale dscores k.
        if (dqh)
            att_rows(R, hs, dqh + (size_t)t0 * C, C, scale, true, tile, Tp, 1, kh, C, n);
    }
    // dk += scale dscores^T q, by columns of dscores as dv by columns of att.
    if (dkh)
        for (int s0 = 0; s0 < T; s0 += ATT_R) {
            int R = T - s0 < ATT_R ? T - s0 : ATT_R;
            att_rows(R, hs, dkh + (size_t)s0 * C, C, scale, true, d + (size_t)s0 * T + s0, 1, T,
                     qh + (size_t)s0 * C, C, T - s0);
        }
}

// ---- by sgemm ----

// The sgemm way's blocks of rows. 32 rows: measured, two blocks of 32 beat
// one block of 64 by 15% at T = 64 and 32 channels a head, and smaller blocks
// gained nothing more (OpenBLAS's cost per call).
enum { ATT_ROWS = 32 };

static void att_forward_head_sgemm(float *oh, float *a, const float *qh, const float *kh,
                                   const float *vh, int T, int C, int hs, float scale) {
    // scores (T, T) = scale q k^T, by blocks of rows: rows [r0, r1) need the
    // columns s < r1 only.
    for (int r0 = 0; r0 < T; r0 += ATT_ROWS) {
        int r1 = r0 + ATT_ROWS < T ? r0 + ATT_ROWS : T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hs, scale,
                    qh + (size_t)r0 * C, C, kh, C, 0.0f, a + (size_t)r0 * T, T);
    }
    // Softmax of each row over the past s <= t; the future gets
    // probability exactly 0, so the next product may run over all T.
    // The rows are short (t + 1 <= T): plain loops, since lanes.h's
    // sums re-read the row with wide loads right after the exp loop's
    // narrow stores, which costs more here than one chain of adds.
    const bool libm = g_alt;
    for (int t = 0; t < T; t++) {
        float *row = a + (size_t)t * T;   // (T)
        float mx = row[0];
        for (int s = 1; s <= t; s++) mx = row[s] > mx ? row[s] : mx;
        for (int s = 0; s <= t; s++) row[s] = exp_of(row[s] - mx, libm);   // vectorized
        float sum = 0.0f;
        for (int s = 0; s <= t; s++) sum += row[s];
        float inv = 1.0f / sum;
        for (int s = 0; s <= t; s++) row[s] *= inv;
        for (int s = t + 1; s < T; s++) row[s] = 0.0f;
    }
    // out (T, hs) = att (T, T) @ v (T, hs); rows [r0, r1) of att are
    // 0 from column r1 on.
    for (int r0 = 0; r0 < T; r0 += ATT_ROWS) {
        int r1 = r0 + ATT_ROWS < T ? r0 + ATT_ROWS : T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hs, r1, 1.0f,
                    a + (size_t)r0 * T, T, vh, C, 0.0f, oh + (size_t)r0 * C, C);
    }
}

static void att_backward_head_sgemm(float *dqh, float *dkh, float *dvh, float *d,
                                    const float *doh, const float *a, const float *qh,
                                    const float *kh, const float *vh, int T, int C, int hs,
                                    float scale) {
    // dv (T, hs) += att^T (T, T) @ dout (T, hs). Rows [r0, r1) of dv
    // take columns [r0, r1) of att, which are 0 in the rows t < r0.
    if (dvh)
        for (int r0 = 0; r0 < T; r0 += ATT_ROWS) {
            int r1 = r0 + ATT_ROWS < T ? r0 + ATT_ROWS : T;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1 - r0, hs, T - r0, 1.0f,
                        a + (size_t)r0 * T + r0, T, doh + (size_t)r0 * C, C, 1.0f,
                        dvh + (size_t)r0 * C, C);
        }
    if (!dqh && !dkh) return;
    // datt (T, T) = dout (T, hs) @ v^T (hs, T), rows [r0, r1) for the
    // columns s < r1 only: the softmax's backward reads no others.
    for (int r0 = 0; r0 < T; r0 += ATT_ROWS) {
        int r1 = r0 + ATT_ROWS < T ? r0 + ATT_ROWS : T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hs, 1.0f,
                    doh + (size_t)r0 * C, C, vh, C, 0.0f, d + (size_t)r0 * T, T);
    }
    // Softmax backward, row by row, in place:
    //   dscores[s] = att[s] (datt[s] - sum_s' att[s'] datt[s']).
    // att is 0 above the diagonal, so dscores is too: the future had no
    // effect and gets no gradient.
    for (int t = 0; t < T; t++) {
        const float *ar = a + (size_t)t * T;   // (T)
        float *dr = d + (size_t)t * T;         // (T)
        float dot = 0.0f;
        for (int s = 0; s <= t; s++) dot += ar[s] * dr[s];
        for (int s = 0; s <= t; s++) dr[s] = ar[s] * (dr[s] - dot);
        for (int s = t + 1; s < T; s++) dr[s] = 0.0f;
    }
    // scores = scale q k^T, so dq += scale dscores k, dk += scale dscores^T q.
    // dscores is 0 above the diagonal, so by blocks as for att.
    for (int r0 = 0; r0 < T; r0 += ATT_ROWS) {
        int r1 = r0 + ATT_ROWS < T ? r0 + ATT_ROWS : T;
        if (dqh)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hs, r1, scale,
                        d + (size_t)r0 * T, T, kh, C, 1.0f, dqh + (size_t)r0 * C, C);
        if (dkh)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1 - r0, hs, T - r0, scale,
                        d + (size_t)r0 * T + r0, T, qh + (size_t)r0 * C, C, 1.0f,
                        dkh + (size_t)r0 * C, C);
    }
}

// ---- the ops ----

void ops_attention_forward(float *out, float *att, const float *q, const float *k, const float *v,
                           int B, int T, int C, int NH) {
    ext("ops_attention_forward", "out", out, (size_t)B * T * C, sizeof(float));
    ext("ops_attention_forward", "att", att, (size_t)B * NH * T * T, sizeof(float));
    ext("ops_attention_forward", "q", q, (size_t)B * T * C, sizeof(float));
    ext("ops_attention_forward", "k", k, (size_t)B * T * C, sizeof(float));
    ext("ops_attention_forward", "v", v, (size_t)B * T * C, sizeof(float));
    g_work.matmul += 2.0 * B * T * T * C;   // q k^T and att v, every head: B NH T T hs each
    if (on_gpu()) {
        ops_cuda_attention_forward(out, att, q, k, v, B, T, C, NH);
        return;
    }
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    bool kernels = att_kernels_fit(T, hs) && !g_alt;   // the other rounding: by sgemm
    _Alignas(64) float kt[ATT_PACK];             // (hs, Tp): a head of k, transposed
    _Alignas(64) float tile[ATT_R * ATT_TMAX];   // (ATT_R, Tp): a block of rows of att
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t off = (size_t)b * T * C + (size_t)h * hs;
            float *a = att + ((size_t)b * NH + h) * T * T;   // (T, T)
            // q, k, v and out heads: (T, hs), row stride C.
            if (kernels)
                att_forward_head(out + off, a, q + off, k + off, v + off, kt, tile, T, C, hs,
                                 scale);
            else
                att_forward_head_sgemm(out + off, a, q + off, k + off, v + off, T, C, hs, scale);
        }
}

void ops_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                            const float *att, const float *q, const float *k, const float *v,
                            int B, int T, int C, int NH) {
    ext("ops_attention_backward", "dq", dq, (size_t)B * T * C, sizeof(float));
    ext("ops_attention_backward", "dk", dk, (size_t)B * T * C, sizeof(float));
    ext("ops_attention_backward", "dv", dv, (size_t)B * T * C, sizeof(float));
    ext("ops_attention_backward", "scratch", scratch, (size_t)B * NH * T * T, sizeof(float));
    ext("ops_attention_backward", "dout", dout, (size_t)B * T * C, sizeof(float));
    ext("ops_attention_backward", "att", att, (size_t)B * NH * T * T, sizeof(float));
    ext("ops_attention_backward", "q", q, (size_t)B * T * C, sizeof(float));
    ext("ops_attention_backward", "k", k, (size_t)B * T * C, sizeof(float));
    ext("ops_attention_backward", "v", v, (size_t)B * T * C, sizeof(float));
    g_work.matmul += 4.0 * B * T * T * C;   // the gradients of att, v, q and k
    if (on_gpu()) {
        ops_cuda_attention_backward(dq, dk, dv, scratch, dout, att, q, k, v, B, T, C, NH);
        return;
    }
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    bool kernels = att_kernels_fit(T, hs) && !g_alt;
    _Alignas(64) float vt[ATT_PACK];             // (hs, Tp): a head of v, transposed
    _Alignas(64) float tile[ATT_R * ATT_TMAX];   // (ATT_R, Tp): a block of rows of datt
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t off = (size_t)b * T * C + (size_t)h * hs;
            const float *a = att + ((size_t)b * NH + h) * T * T;   // (T, T) probabilities
            float *d = scratch + ((size_t)b * NH + h) * T * T;     // (T, T) datt, dscores
            // The heads of q, k, v, dout and the gradients: (T, hs), row stride C.
            float *dqh = dq ? dq + off : NULL, *dkh = dk ? dk + off : NULL;
            float *dvh = dv ? dv + off : NULL;
            if (kernels)
                att_backward_head(dqh, dkh, dvh, d, dout + off, a, q + off, k + off, v + off, vt,
                                  tile, T, C, hs, scale);
            else
                att_backward_head_sgemm(dqh, dkh, dvh, d, dout + off, a, q + off, k + off,
                                        v + off, T, C, hs, scale);
        }
}

// ---- embeddings --------------------------------------------------------------

void ops_embedding_forward(float *restrict out, const int *restrict tokens,
                           const float *restrict wte, const float *restrict wpe, int B, int T,
                           int C, int pos0) {
    ext("ops_embedding_forward", "out", out, (size_t)B * T * C, sizeof(float));
    ext("ops_embedding_forward", "tokens", tokens, (size_t)B * T, sizeof(int));
    ext("ops_embedding_forward", "wpe", wpe, (size_t)(pos0 + T) * C, sizeof(float));
    if (on_gpu()) {
        ops_cuda_embedding_forward(out, tokens, wte, wpe, B, T, C, pos0);
        return;
    }
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;                  // (C)
            const float *e = wte + (size_t)tokens[b * T + t] * C;      // (C)
            const float *p = wpe + (size_t)(pos0 + t) * C;             // (C)
            for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
        }
}

void ops_embedding_backward(float *restrict dwte, float *restrict dwpe, const float *restrict dout,
                            const int *restrict tokens, int B, int T, int C, int pos0) {
    ext("ops_embedding_backward", "dwpe", dwpe, (size_t)(pos0 + T) * C, sizeof(float));
    ext("ops_embedding_backward", "dout", dout, (size_t)B * T * C, sizeof(float));
    ext("ops_embedding_backward", "tokens", tokens, (size_t)B * T, sizeof(int));
    if (on_gpu()) {
        ops_cuda_embedding_backward(dwte, dwpe, dout, tokens, B, T, C, pos0);
        return;
    }
    // A token that appears twice gets both rows' gradients: always +=.
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((size_t)b * T + t) * C;   // (C)
            if (dwte) {
                float *g = dwte + (size_t)tokens[b * T + t] * C;   // (C)
                for (int c = 0; c < C; c++) g[c] += d[c];
            }
            if (dwpe) {
                float *g = dwpe + (size_t)(pos0 + t) * C;   // (C)
                for (int c = 0; c < C; c++) g[c] += d[c];
            }
        }
}

// ---- softmax cross-entropy ---------------------------------------------------

// A target is a row of the vocabulary. The GPU's kernel reports a bad one
// through this check too (ops_cuda.h), so the message is the same.

void ops_crossentropy_forward(float *restrict losses, float *restrict probs,
                              const float *restrict logits, const int *restrict targets, int M,
                              int V) {
    ext("ops_crossentropy_forward", "losses", losses, (size_t)M, sizeof(float));
    ext("ops_crossentropy_forward", "probs", probs, (size_t)M * V, sizeof(float));
    ext("ops_crossentropy_forward", "logits", logits, (size_t)M * V, sizeof(float));
    ext("ops_crossentropy_forward", "targets", targets, (size_t)M, sizeof(int));
    if (on_gpu()) {
        ops_cuda_crossentropy_forward(losses, probs, logits, targets, M, V);
        return;
    }
    const bool libm = g_alt;
    for (int m = 0; m < M; m++) {
        const float *lr = logits + (size_t)m * V;   // (V)
        float *pr = probs + (size_t)m * V;          // (V)
        int y = targets[m];
        ops_check_target(y, m, V);
        // Subtract the row's max so that no exp overflows; the softmax is
        // unchanged.
        float mx = max_of(lr, V);
        for (int v = 0; v < V; v++) pr[v] = exp_of(lr[v] - mx, libm);   // vectorized
        float sum = sum_of(pr, V);
        float inv = 1.0f / sum;
        for (int v = 0; v < V; v++) pr[v] *= inv;
        // -log p_y = log sum - (logit_y - max): finite even when p_y rounds to 0.
        losses[m] = logf(sum) - (lr[y] - mx);
    }
}

void ops_crossentropy_backward(float *restrict dlogits, const float *restrict probs,
                               const int *restrict targets, float scale, int M, int V) {
    ext("ops_crossentropy_backward", "dlogits", dlogits, (size_t)M * V, sizeof(float));
    ext("ops_crossentropy_backward", "probs", probs, (size_t)M * V, sizeof(float));
    ext("ops_crossentropy_backward", "targets", targets, (size_t)M, sizeof(int));
    if (on_gpu()) {
        ops_cuda_crossentropy_backward(dlogits, probs, targets, scale, M, V);
        return;
    }
    // One add per element, of the whole term: the target's element too, so
    // that a second call adds exactly the same again.
    for (int m = 0; m < M; m++) {
        float *dr = dlogits + (size_t)m * V;        // (V)
        const float *pr = probs + (size_t)m * V;    // (V)
        int y = targets[m];
        for (int v = 0; v < V; v++) dr[v] += scale * (pr[v] - (v == y ? 1.0f : 0.0f));
    }
}

// ---- pieces of split layers ---------------------------------------------------

void ops_add_bias(float *out, const float *bias, int M, int N) {
    ext("ops_add_bias", "out", out, (size_t)M * N, sizeof(float));
    ext("ops_add_bias", "bias", bias, (size_t)N, sizeof(float));
    if (on_gpu()) {
        ops_cuda_add_bias(out, bias, M, N);
        return;
    }
    for (int m = 0; m < M; m++) accumulate(out + (size_t)m * N, bias, (size_t)N);
}

void ops_bias_backward(float *dbias, const float *dout, int M, int N) {
    ext("ops_bias_backward", "dbias", dbias, (size_t)N, sizeof(float));
    ext("ops_bias_backward", "dout", dout, (size_t)M * N, sizeof(float));
    if (on_gpu()) {
        ops_cuda_bias_backward(dbias, dout, M, N);
        return;
    }
    // Row by row, so that the inner loop runs along memory.
    if (!dbias) return;
    for (int m = 0; m < M; m++) accumulate(dbias, dout + (size_t)m * N, (size_t)N);
}

void ops_copy_2d(float *dst, int dst_ld, const float *src, int src_ld, int rows, int cols) {
    ext2("ops_copy_2d", "dst", dst, rows, dst_ld, cols, 4);
    ext2("ops_copy_2d", "src", src, rows, src_ld, cols, 4);
    if (on_gpu()) {
        ops_cuda_copy_2d(dst, dst_ld, src, src_ld, rows, cols);
        return;
    }
    for (int r = 0; r < rows; r++)
        memcpy(dst + (size_t)r * dst_ld, src + (size_t)r * src_ld, (size_t)cols * sizeof(float));
}

void ops_copy_2d_typed(void *dst, int dst_ld, const void *src, int src_ld, int rows, int cols, size_t elem) {
    ext2("ops_copy_2d_typed", "dst", dst, rows, dst_ld, cols, elem);
    ext2("ops_copy_2d_typed", "src", src, rows, src_ld, cols, elem);
    if (on_gpu()) {
        ops_cuda_copy_2d_bytes(dst, (size_t)dst_ld * elem, src, (size_t)src_ld * elem, (size_t)cols * elem,
                               (size_t)rows);
        return;
    }
    for (int r = 0; r < rows; r++)
        memcpy((char *)dst + (size_t)r * dst_ld * elem, (const char *)src + (size_t)r * src_ld * elem,
               (size_t)cols * elem);
}

void ops_accumulate_2d(float *dst, int dst_ld, const float *src, int src_ld, int rows, int cols) {
    ext2("ops_accumulate_2d", "dst", dst, rows, dst_ld, cols, 4);
    ext2("ops_accumulate_2d", "src", src, rows, src_ld, cols, 4);
    if (on_gpu()) {
        ops_cuda_accumulate_2d(dst, dst_ld, src, src_ld, rows, cols);
        return;
    }
    accumulate_2d(dst, dst_ld, src, src_ld, rows, cols);
}

// ---- vocabulary-parallel embedding and cross-entropy ---------------------------

void ops_vocab_ids(int *restrict ids, const int *restrict tokens, int v0, int nv, size_t n) {
    ext("ops_vocab_ids", "ids", ids, n, sizeof(int));
    ext("ops_vocab_ids", "tokens", tokens, n, sizeof(int));
    if (on_gpu()) {
        ops_cuda_vocab_ids(ids, tokens, v0, nv, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        int id = tokens[i] - v0;
        ids[i] = id >= 0 && id < nv ? id : -1;
    }
}

// An id of row m: a row of this rank's part [0, n), or -1 for a row that
// another rank holds. Anything else is a token that was not translated.
// The GPU's kernels report a bad id through this check too.

void ops_rows_forward(float *restrict out, const int *restrict ids, const float *restrict table,
                      int nrows, int M, int C) {
    ext("ops_rows_forward", "out", out, (size_t)M * C, sizeof(float));
    ext("ops_rows_forward", "ids", ids, (size_t)M, sizeof(int));
    ext("ops_rows_forward", "table", table, (size_t)nrows * C, sizeof(float));
    if (on_gpu()) {
        ops_cuda_rows_forward(out, ids, table, nrows, M, C);
        return;
    }
    for (int m = 0; m < M; m++) {
        ops_check_id("ops_rows_forward", ids[m], m, nrows);
        float *o = out + (size_t)m * C;   // (C)
        if (ids[m] < 0)
            memset(o, 0, (size_t)C * sizeof(float));
        else
            memcpy(o, table + (size_t)ids[m] * C, (size_t)C * sizeof(float));
    }
}

void ops_rows_backward(float *dtable, const float *dout, const int *ids, int nrows, int M, int C) {
    ext("ops_rows_backward", "dtable", dtable, (size_t)nrows * C, sizeof(float));
    ext("ops_rows_backward", "dout", dout, (size_t)M * C, sizeof(float));
    ext("ops_rows_backward", "ids", ids, (size_t)M, sizeof(int));
    if (on_gpu()) {
        ops_cuda_rows_backward(dtable, dout, ids, nrows, M, C);
        return;
    }
    // An id that appears twice gets both rows' gradients: always +=.
    if (!dtable) return;
    for (int m = 0; m < M; m++) {
        ops_check_id("ops_rows_backward", ids[m], m, nrows);
        if (ids[m] >= 0)
            accumulate(dtable + (size_t)ids[m] * C, dout + (size_t)m * C, (size_t)C);
    }
}

void ops_positions_forward(float *out, const float *wpe, int B, int T, int C, int pos0) {
    ext("ops_positions_forward", "out", out, (size_t)B * T * C, sizeof(float));
    ext("ops_positions_forward", "wpe", wpe, (size_t)(pos0 + T) * C, sizeof(float));
    if (on_gpu()) {
        ops_cuda_positions_forward(out, wpe, B, T, C, pos0);
        return;
    }
    for (int b = 0; b < B; b++)
        accumulate_2d(out + (size_t)b * T * C, C, wpe + (size_t)pos0 * C, C, T, C);
}

void ops_positions_backward(float *dwpe, const float *dout, int B, int T, int C, int pos0) {
    ext("ops_positions_backward", "dwpe", dwpe, (size_t)(pos0 + T) * C, sizeof(float));
    ext("ops_positions_backward", "dout", dout, (size_t)B * T * C, sizeof(float));
    if (on_gpu()) {
        ops_cuda_positions_backward(dwpe, dout, B, T, C, pos0);
        return;
    }
    if (!dwpe) return;
    for (int b = 0; b < B; b++)
        accumulate_2d(dwpe + (size_t)pos0 * C, C, dout + (size_t)b * T * C, C, T, C);
}

void ops_row_max(float *restrict mx, const float *restrict x, int M, int N) {
    ext("ops_row_max", "mx", mx, (size_t)M, sizeof(float));
    ext("ops_row_max", "x", x, (size_t)M * N, sizeof(float));
    if (on_gpu()) {
        ops_cuda_row_max(mx, x, M, N);
        return;
    }
    for (int m = 0; m < M; m++) mx[m] = N > 0 ? max_of(x + (size_t)m * N, N) : -INFINITY;
}

// The sum of exp(x[i] - mx) over a row, made as ops_crossentropy_forward
// makes its row's: the same exps, added in the same lanes in the same order
// (each chunk starts at a multiple of LANES), so over the whole vocabulary
// the two sums are the same float. The exps of a chunk go to a buffer first,
// as that function's go to probs, so that both loops are vectorized.
static float sum_exp(const float *restrict x, float mx, int n) {
    enum { CHUNK = 16 * LANES };
    float e[CHUNK];
    Lanes acc = lanes_splat(0.0f);
    const bool libm = g_alt;
    for (int i0 = 0; i0 < n; i0 += CHUNK) {
        int k = n - i0 < CHUNK ? n - i0 : CHUNK;
        for (int i = 0; i < k; i++) e[i] = exp_of(x[i0 + i] - mx, libm);
        acc = lanes_accumulate(acc, e, k);
    }
    return lanes_total(acc);
}

void ops_row_sumexp(float *restrict sumexp, const float *restrict x, const float *restrict mx,
                    int M, int N) {
    ext("ops_row_sumexp", "sumexp", sumexp, (size_t)M, sizeof(float));
    ext("ops_row_sumexp", "x", x, (size_t)M * N, sizeof(float));
    ext("ops_row_sumexp", "mx", mx, (size_t)M, sizeof(float));
    if (on_gpu()) {
        ops_cuda_row_sumexp(sumexp, x, mx, M, N);
        return;
    }
    for (int m = 0; m < M; m++) sumexp[m] = sum_exp(x + (size_t)m * N, mx[m], N);
}

void ops_pick(float *restrict out, const float *restrict x, const int *restrict ids, int M, int N) {
    ext("ops_pick", "out", out, (size_t)M, sizeof(float));
    ext("ops_pick", "x", x, (size_t)M * N, sizeof(float));
    ext("ops_pick", "ids", ids, (size_t)M, sizeof(int));
    if (on_gpu()) {
        ops_cuda_pick(out, x, ids, M, N);
        return;
    }
    for (int m = 0; m < M; m++) {
        ops_check_id("ops_pick", ids[m], m, N);
        out[m] = ids[m] < 0 ? 0.0f : x[(size_t)m * N + ids[m]];
    }
}

void ops_ce_from_parts(float *restrict losses, const float *restrict mx,
                       const float *restrict sumexp, const float *restrict target_logit, int M) {
    ext("ops_ce_from_parts", "losses", losses, (size_t)M, sizeof(float));
    ext("ops_ce_from_parts", "mx", mx, (size_t)M, sizeof(float));
    ext("ops_ce_from_parts", "sumexp", sumexp, (size_t)M, sizeof(float));
    ext("ops_ce_from_parts", "target_logit", target_logit, (size_t)M, sizeof(float));
    if (on_gpu()) {
        ops_cuda_ce_from_parts(losses, mx, sumexp, target_logit, M);
        return;
    }
    // Grouped as ops_crossentropy_forward groups it, so that over the whole
    // vocabulary the loss is the same float.
    for (int m = 0; m < M; m++) losses[m] = logf(sumexp[m]) - (target_logit[m] - mx[m]);
}

EXP_INLINE void ce_parts_backward(float *restrict dlogits, const float *restrict x,
                                  const float *restrict mx, const float *restrict sumexp,
                                  const int *restrict ids, float scale, int M, int N, bool libm) {
    for (int m = 0; m < M; m++) {
        int y = ids[m];
        ops_check_id("ops_ce_parts_backward", y, m, N);
        float *dr = dlogits + (size_t)m * N;     // (N)
        const float *xr = x + (size_t)m * N;     // (N)
        float mxm = mx[m], inv = 1.0f / sumexp[m];
        for (int n = 0; n < N; n++)
            dr[n] += scale * (exp_of(xr[n] - mxm, libm) * inv - (n == y ? 1.0f : 0.0f));
    }
}

void ops_ce_parts_backward(float *restrict dlogits, const float *restrict x,
                           const float *restrict mx, const float *restrict sumexp,
                           const int *restrict ids, float scale, int M, int N) {
    ext("ops_ce_parts_backward", "dlogits", dlogits, (size_t)M * N, sizeof(float));
    ext("ops_ce_parts_backward", "x", x, (size_t)M * N, sizeof(float));
    ext("ops_ce_parts_backward", "mx", mx, (size_t)M, sizeof(float));
    ext("ops_ce_parts_backward", "sumexp", sumexp, (size_t)M, sizeof(float));
    ext("ops_ce_parts_backward", "ids", ids, (size_t)M, sizeof(int));
    if (on_gpu()) {
        ops_cuda_ce_parts_backward(dlogits, x, mx, sumexp, ids, scale, M, N);
        return;
    }
    // The probabilities are made again from x and the row's two numbers, as
    // ops_crossentropy_forward makes them; then as ops_crossentropy_backward.
    if (!dlogits) return;
    EXP_TWICE(ce_parts_backward, dlogits, x, mx, sumexp, ids, scale, M, N);
}

// ---- dropout keyed by global position ----------------------------------------

// The stream of one (layer, site, step): four sites per layer. Both devices
// take it from here, after the checks on p and the key.

// dst = src * keep / (1 - p) (accumulate = 0) or dst += ... (accumulate = 1),
// keep drawn from the element's global index, so that any slice of the
// tensor draws what one device would.
static void dropout_apply(float *dst, const float *src, float p, DropoutKey key, int B, int T,
                          int C, int accumulate) {
    uint64_t stream = ops_dropout_stream(p, key);
    // Divide rather than multiply by 1 / (1 - p): a kept value is then
    // exactly x / (1 - p), and the division is nothing beside the Philox draw.
    float keep_div = 1.0f - p;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            // Global index of element (b, t, 0); channel c adds c.
            uint64_t base = ((uint64_t)(key.row0 + b) * key.Tg + (uint64_t)(key.t0 + t)) * key.Cg +
                            (uint64_t)key.c0;
            size_t row = ((size_t)b * T + t) * C;
            for (int c = 0; c < C; c++) {
                float u = rng_uniform(key.seed, stream, base + (uint64_t)c);
                float y = u >= p ? src[row + c] / keep_div : 0.0f;
                if (accumulate)
                    dst[row + c] += y;
                else
                    dst[row + c] = y;
            }
        }
}

void ops_dropout_forward(float *out, const float *x, float p, DropoutKey key, int B, int T, int C) {
    ext("ops_dropout_forward", "out", out, (size_t)B * T * C, sizeof(float));
    ext("ops_dropout_forward", "x", x, (size_t)B * T * C, sizeof(float));
    if (on_gpu()) {
        ops_cuda_dropout_forward(out, x, p, key, B, T, C);
        return;
    }
    if (p == 0.0f) {
        // No mask to draw: the identity (and out may be x).
        if (out != x) memmove(out, x, (size_t)B * T * C * sizeof(float));
        return;
    }
    dropout_apply(out, x, p, key, B, T, C, 0);
}

void ops_dropout_backward(float *dx, const float *dout, float p, DropoutKey key, int B, int T,
                          int C) {
    ext("ops_dropout_backward", "dx", dx, (size_t)B * T * C, sizeof(float));
    ext("ops_dropout_backward", "dout", dout, (size_t)B * T * C, sizeof(float));
    if (on_gpu()) {
        ops_cuda_dropout_backward(dx, dout, p, key, B, T, C);
        return;
    }
    if (!dx) return;
    if (p == 0.0f) {
        accumulate(dx, dout, (size_t)B * T * C);
        return;
    }
    dropout_apply(dx, dout, p, key, B, T, C, 1);
}

// ---- reductions to the host --------------------------------------------------

// Four running sums, combined at the end: each add waits for the one before
// it in its own sum only, so four are in flight at once (about 4x faster
// than one chain), and the order is still fixed, so the result is the same
// on every call.
double ops_sum(const float *x, size_t n) {
    ext("ops_sum", "x", x, n, sizeof(float));
    if (on_gpu()) return ops_cuda_sum(x, n);
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += x[i];
        s1 += x[i + 1];
        s2 += x[i + 2];
        s3 += x[i + 3];
    }
    for (; i < n; i++) s0 += x[i];
    return (s0 + s1) + (s2 + s3);
}

double ops_sumsq(const float *x, size_t n) {
    ext("ops_sumsq", "x", x, n, sizeof(float));
    if (on_gpu()) return ops_cuda_sumsq(x, n);
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += (double)x[i] * x[i];
        s1 += (double)x[i + 1] * x[i + 1];
        s2 += (double)x[i + 2] * x[i + 2];
        s3 += (double)x[i + 3] * x[i + 3];
    }
    for (; i < n; i++) s0 += (double)x[i] * x[i];
    return (s0 + s1) + (s2 + s3);
}

double ops_sumsq_bf16(const bf16 *x, size_t n) {
    ext("ops_sumsq_bf16", "x", x, n, sizeof(bf16));
    if (on_gpu()) return ops_cuda_sumsq_bf16(x, n);
    double s0 = 0.0, s1 = 0.0;
    size_t i = 0;
    for (; i + 2 <= n; i += 2) {
        double a = bf16_to_float(x[i]), b = bf16_to_float(x[i + 1]);
        s0 += a * a;
        s1 += b * b;
    }
    for (; i < n; i++) s0 += (double)bf16_to_float(x[i]) * bf16_to_float(x[i]);
    return s0 + s1;
}

// ---- optimizers --------------------------------------------------------------

// One element of AdamW's step (ops_rules.h's scalars): the moments, then p.
// Values in and out, no pointers, so that the loops around it vectorize.
typedef struct {
    float p, m, v;
} AdamwElement;

static inline AdamwElement adamw_element(float p, float g, float m, float v, float beta1, float beta2, float eps,
                                         OpsAdamwScalars s) {
    m = beta1 * m + (1.0f - beta1) * g;
    v = beta2 * v + (1.0f - beta2) * g * g;
    float denom = sqrtf(v) / s.bc2_sqrt + eps;
    return (AdamwElement){p * s.decay - s.step_size * m / denom, m, v};
}

void ops_adamw(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
               size_t n, float lr, float beta1, float beta2, float eps, float wd, int t) {
    ext("ops_adamw", "p", p, n, sizeof(float));
    ext("ops_adamw", "g", g, n, sizeof(float));
    ext("ops_adamw", "m", m, n, sizeof(float));
    ext("ops_adamw", "v", v, n, sizeof(float));
    CHECK(t >= 1, "ops_adamw: step %d; AdamW's steps count from 1 (bias correction 1 - beta^t)", t);
    if (on_gpu()) {
        ops_cuda_adamw(p, g, m, v, n, lr, beta1, beta2, eps, wd, t);
        return;
    }
    OpsAdamwScalars s = ops_adamw_scalars(lr, beta1, beta2, wd, t);
    for (size_t i = 0; i < n; i++) {
        AdamwElement e = adamw_element(p[i], g[i], m[i], v[i], beta1, beta2, eps, s);
        p[i] = e.p, m[i] = e.m, v[i] = e.v;
    }
}

void ops_adamw_mixed(float *restrict p, bf16 *restrict w, const bf16 *restrict g, float *restrict m,
                     float *restrict v, size_t n, float lr, float beta1, float beta2, float eps, float wd, int t) {
    ext("ops_adamw_mixed", "p", p, n, sizeof(float));
    ext("ops_adamw_mixed", "w", w, n, sizeof(bf16));
    ext("ops_adamw_mixed", "g", g, n, sizeof(bf16));
    ext("ops_adamw_mixed", "m", m, n, sizeof(float));
    ext("ops_adamw_mixed", "v", v, n, sizeof(float));
    CHECK(t >= 1, "ops_adamw_mixed: step %d; AdamW's steps count from 1 (bias correction 1 - beta^t)", t);
    if (on_gpu()) {
        ops_cuda_adamw_mixed(p, w, g, m, v, n, lr, beta1, beta2, eps, wd, t);
        return;
    }
    OpsAdamwScalars s = ops_adamw_scalars(lr, beta1, beta2, wd, t);
    for (size_t i = 0; i < n; i++) {
        AdamwElement e = adamw_element(p[i], bf16_to_float(g[i]), m[i], v[i], beta1, beta2, eps, s);
        p[i] = e.p, m[i] = e.m, v[i] = e.v;
        w[i] = bf16_from_float(e.p);
    }
}

void ops_sgd(float *restrict p, const float *restrict g, float *restrict buf, size_t n, float lr,
             float mu, float wd) {
    ext("ops_sgd", "p", p, n, sizeof(float));
    ext("ops_sgd", "g", g, n, sizeof(float));
    ext("ops_sgd", "buf", buf, n, sizeof(float));
    CHECK(mu == 0.0f || buf, "ops_sgd: momentum %g needs a buffer; pass buf (n floats, zeroed)",
          mu);
    if (on_gpu()) {
        ops_cuda_sgd(p, g, buf, n, lr, mu, wd);
        return;
    }
    // torch.optim.SGD's rule (no dampening, no Nesterov): the weight decay is
    // added to the gradient, and momentum keeps a running sum of it. A buffer
    // that starts at 0 makes the first step's buf equal to g, as in torch.
    for (size_t i = 0; i < n; i++) {
        float d = g[i] + wd * p[i];
        if (mu != 0.0f) {
            buf[i] = mu * buf[i] + d;
            d = buf[i];
        }
        p[i] -= lr * d;
    }
}
