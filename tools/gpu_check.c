// gpu_check.c: every op of ops.h on the GPU against the same op on the CPU
// (build/gpu_check). Exit 0 when every check passes, 1 when one fails, 77 (a
// skip) when no GPU is visible or the build has no CUDA backend.
//   build/gpu_check
//
// For every op, at several shapes with odd sizes among them, the same random
// inputs go to the CPU's kernels on host memory (ops_use_host(true)) and to
// the GPU's kernels on device memory. Every output comes back and is compared
// element by element: the largest |gpu - cpu| / (1 + |cpu|), against a
// tolerance that says why the two devices may differ at all. Gradients start
// from random values, so the "+=" of the backwards is compared too, and some
// shapes pass NULL for some gradients. A backward is given the CPU's saved
// forward results (probabilities, statistics) on both devices, so that it is
// compared alone. Last, an id out of range must stop the run on the GPU with
// the CPU's message, each device in a process of its own.
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core.h"
#include "mem.h"
#include "mem_cuda.h"
#include "ops.h"
#include "rng.h"

// ---- tolerances ----------------------------------------------------------------
//
// Exact: the op moves or compares floats, or makes one rounding that both
// devices make alike (a single add or multiply, dropout's division by 1 - p,
// a maximum), or makes integers. Any difference is a bug.
static const double TOL_EXACT = 0.0;
// One rounding made another way: nvcc fuses a multiply and an add into one
// rounding (FMA) where the CPU rounds twice, and the GPU's expf and logf are
// not the CPU's (each within 2 ulp of the truth). A few float ulps of a value
// near 1 (one ulp is 1.2e-7).
static const double TOL_ROUND = 1e-6;
// Sums of K terms in another order: cuBLAS's blocking of a product, a warp's
// tree over a row, 32 partial column sums, atomic adds to an embedding row.
// Each order rounds differently; the difference grows like sqrt(K) ulps of
// the partial sums, ~1e-6 at K = 257 when the sums are O(1) as in a model
// (the inputs below are drawn so). test_ops allows the same 1e-5 for these
// fp32 sums against double.
static const double TOL_SUM = 1e-5;
// The derivative of GELU multiplies its sigmoid s through s (1 - s) and
// x (1 + 3 a x^2): the few ulps by which the two devices' s differ come out
// up to ~10 times larger. A wrong formula is off by 1e-2 and more.
static const double TOL_GELU_BACKWARD = 1e-5;
// ops_sum and ops_sumsq add in double on both devices, in another order:
// ~1e-14 at these sizes, far below the 6e-8 a float sum would lose.
static const double TOL_DOUBLE = 1e-10;

// ---- buffers on both devices ---------------------------------------------------

static const uint64_t SEED = 20250101;

// The same values in host memory (h, for the CPU's kernels) and in device
// memory (d, for the GPU's). NONE stands for a gradient passed as NULL.
typedef struct {
    float *h, *d;
    size_t n;
} Floats;
typedef struct {
    int *h, *d;
    size_t n;
} Ints;
static const Floats NONE = {NULL, NULL, 0};

// Every buffer of the check under way, freed by release().
enum { MAX_BLOCKS = 64 };
static void *g_host_blocks[MAX_BLOCKS], *g_dev_blocks[MAX_BLOCKS];
static int g_nblocks;
static uint32_t g_stream;   // the next test stream: each tensor draws its own values

static void pair_alloc(void **h, void **d, size_t bytes) {
    CHECK(g_nblocks < MAX_BLOCKS, "gpu_check: more than %d buffers in one check", MAX_BLOCKS);
    bytes = bytes ? bytes : 1;   // an empty tensor still has an address
    *h = malloc(bytes);
    *d = mem_alloc(bytes, MEM_OTHER, "gpu_check");
    CHECK(*h, "gpu_check: out of host memory");
    g_host_blocks[g_nblocks] = *h;
    g_dev_blocks[g_nblocks++] = *d;
}

static void release(void) {
    for (int i = 0; i < g_nblocks; i++) {
        free(g_host_blocks[i]);
        mem_free(g_dev_blocks[i]);
    }
    g_nblocks = 0;
}

// Copy x's host values to the device (after the host's were set or computed).
static void to_device(Floats x) { mem_from_host(x.d, x.h, x.n * sizeof(float)); }
static void ints_to_device(Ints x) { mem_from_host(x.d, x.h, x.n * sizeof(int)); }

// n values of N(mean, std^2), on both devices.
static Floats randn(size_t n, float mean, float std) {
    Floats x = {.n = n};
    pair_alloc((void **)&x.h, (void **)&x.d, n * sizeof(float));
    rng_fill_normal(x.h, n, SEED, rng_stream(RNG_TEST, g_stream++, 0), 0, mean, std);
    to_device(x);
    return x;
}

// n values uniform on [lo, hi), on both devices.
static Floats randu(size_t n, float lo, float hi) {
    Floats x = {.n = n};
    pair_alloc((void **)&x.h, (void **)&x.d, n * sizeof(float));
    rng_fill_uniform(x.h, n, SEED, rng_stream(RNG_TEST, g_stream++, 0), 0, lo, hi);
    to_device(x);
    return x;
}

// n integers uniform in [lo, hi), on both devices.
static Ints randi(size_t n, int lo, int hi) {
    Ints x = {.n = n};
    pair_alloc((void **)&x.h, (void **)&x.d, n * sizeof(int));
    uint64_t stream = rng_stream(RNG_TEST, g_stream++, 0);
    for (size_t i = 0; i < n; i++)
        x.h[i] = lo + (int)(rng_u32(SEED, stream, i) % (uint32_t)(hi - lo));
    ints_to_device(x);
    return x;
}

// ---- comparison and report ---------------------------------------------------------

// The largest |gpu - cpu| / (1 + |cpu|) over x, the GPU's values brought
// back. Equal values (infinities too) count 0; a NaN counts as infinitely wrong.
static double err(Floats x) {
    if (!x.h) return 0.0;   // NONE
    float *g = malloc(x.n * sizeof(float) + 1);
    mem_to_host(g, x.d, x.n * sizeof(float));
    double worst = 0.0;
    for (size_t i = 0; i < x.n; i++) {
        if (g[i] == x.h[i]) continue;
        double e = fabs((double)g[i] - x.h[i]) / (1.0 + fabs((double)x.h[i]));
        if (isnan(e)) e = INFINITY;
        if (e > worst) worst = e;
    }
    free(g);
    return worst;
}

// The largest |gpu - cpu| over the integers of x.
static double err_ints(Ints x) {
    int *g = malloc(x.n * sizeof(int) + 1);
    mem_to_host(g, x.d, x.n * sizeof(int));
    double worst = 0.0;
    for (size_t i = 0; i < x.n; i++) worst = fmax(worst, fabs((double)g[i] - x.h[i]));
    free(g);
    return worst;
}

// |gpu - cpu| / (1 + |cpu|) of two numbers returned on the host.
static double err_value(double gpu, double cpu) {
    if (gpu == cpu) return 0.0;
    double e = fabs(gpu - cpu) / (1.0 + fabs(cpu));
    return isnan(e) ? INFINITY : e;
}

static int g_checks, g_passed;

// One line per op and shape.
static void report(const char *op, const char *shape, double e, double tol) {
    bool ok = e <= tol;
    g_checks++;
    g_passed += ok;
    char t[16];
    if (tol == 0.0)
        snprintf(t, sizeof t, "exact");
    else
        snprintf(t, sizeof t, "%.0e", tol);
    printf("%-22s %-30s %10.2e %7s  %s\n", op, shape, e, t, ok ? "ok" : "FAIL");
}

// ---- the checks, op by op ----------------------------------------------------------

// The comparison itself, on a deliberately wrong GPU result: one element one
// ulp off must fail an exact check, and one 1e-4 off must fail TOL_SUM.
static void check_negative_control(void) {
    Floats x = randn(1000, 0, 1);
    float wrong = nextafterf(x.h[517], INFINITY);
    mem_from_host(x.d + 517, &wrong, sizeof wrong);
    double one_ulp = err(x);
    wrong = x.h[517] + 1e-4f * (1.0f + fabsf(x.h[517]));
    mem_from_host(x.d + 517, &wrong, sizeof wrong);
    double too_far = err(x);
    bool ok = one_ulp > TOL_EXACT && too_far > TOL_SUM;
    g_checks++;
    g_passed += ok;
    printf("%-22s %-30s %s\n", "negative control", "1 ulp off; 1e-4 off",
           ok ? "both caught  ok" : "a wrong result passed  FAIL");
    release();
}

static void check_elementwise(size_t n) {
    char shape[64];
    snprintf(shape, sizeof shape, "n=%zu", n);

    Floats a = randn(n, 0, 1), b = randn(n, 0, 1), out = randn(n, 0, 1);
    ops_use_host(true);  ops_add(out.h, a.h, b.h, n);
    ops_use_host(false); ops_add(out.d, a.d, b.d, n);
    report("add", shape, err(out), TOL_EXACT);

    ops_use_host(true);  ops_accumulate(out.h, a.h, n);
    ops_use_host(false); ops_accumulate(out.d, a.d, n);
    report("accumulate", shape, err(out), TOL_EXACT);

    ops_use_host(true);  ops_scale(out.h, -0.37f, n);
    ops_use_host(false); ops_scale(out.d, -0.37f, n);
    report("scale", shape, err(out), TOL_EXACT);

    ops_use_host(true);  ops_fill(out.h, 2.5f, n);
    ops_use_host(false); ops_fill(out.d, 2.5f, n);
    report("fill", shape, err(out), TOL_EXACT);

    // GELU over N(0, 3^2): both tails and the middle.
    Floats x = randn(n, 0, 3), y = randn(n, 0, 1), dx = randn(n, 0, 1), dy = randn(n, 0, 1);
    ops_use_host(true);  ops_gelu_forward(y.h, x.h, n);
    ops_use_host(false); ops_gelu_forward(y.d, x.d, n);
    report("gelu_forward", shape, err(y), TOL_ROUND);

    ops_use_host(true);  ops_gelu_backward(dx.h, dy.h, x.h, n);
    ops_use_host(false); ops_gelu_backward(dx.d, dy.d, x.d, n);
    report("gelu_backward", shape, err(dx), TOL_GELU_BACKWARD);

    double cpu, gpu;
    ops_use_host(true);  cpu = ops_sum(x.h, n);
    ops_use_host(false); gpu = ops_sum(x.d, n);
    report("sum", shape, err_value(gpu, cpu), TOL_DOUBLE);

    ops_use_host(true);  cpu = ops_sumsq(x.h, n);
    ops_use_host(false); gpu = ops_sumsq(x.d, n);
    report("sumsq", shape, err_value(gpu, cpu), TOL_DOUBLE);

    // AdamW at step 3 (the bias corrections matter), moments of the right sizes.
    Floats p = randn(n, 0, 1), g = randn(n, 0, 1), m = randn(n, 0, 0.1f), v = randu(n, 0, 0.01f);
    ops_use_host(true);  ops_adamw(p.h, g.h, m.h, v.h, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3);
    ops_use_host(false); ops_adamw(p.d, g.d, m.d, v.d, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3);
    report("adamw", shape, fmax(err(p), fmax(err(m), err(v))), TOL_ROUND);

    Floats buf = randn(n, 0, 0.1f);
    ops_use_host(true);  ops_sgd(p.h, g.h, buf.h, n, 0.1f, 0.9f, 0.01f);
    ops_use_host(false); ops_sgd(p.d, g.d, buf.d, n, 0.1f, 0.9f, 0.01f);
    report("sgd (momentum)", shape, fmax(err(p), err(buf)), TOL_ROUND);

    ops_use_host(true);  ops_sgd(p.h, g.h, NULL, n, 0.1f, 0.0f, 0.01f);
    ops_use_host(false); ops_sgd(p.d, g.d, NULL, n, 0.1f, 0.0f, 0.01f);
    report("sgd (plain)", shape, err(p), TOL_ROUND);
    release();
}

// nulls: no bias, and only dw of the three gradients.
static void check_matmul(int M, int K, int N, bool nulls) {
    char shape[64];
    snprintf(shape, sizeof shape, "M=%d K=%d N=%d%s", M, K, N, nulls ? " NULLs" : "");
    // Weights and output gradients at a model's scale (std 1 / sqrt(the
    // number of terms each sum adds)), so that every sum stays O(1) as in a
    // model and the error measured is rounding, not the size of the numbers.
    Floats inp = randn((size_t)M * K, 0, 1), w = randn((size_t)K * N, 0, 1 / sqrtf(K));
    Floats bias = nulls ? NONE : randn(N, 0, 1), out = randn((size_t)M * N, 0, 1);
    ops_use_host(true);  ops_matmul_forward(out.h, inp.h, w.h, bias.h, M, K, N);
    ops_use_host(false); ops_matmul_forward(out.d, inp.d, w.d, bias.d, M, K, N);
    report("matmul_forward", shape, err(out), TOL_SUM);

    Floats dout = randn((size_t)M * N, 0, 1 / sqrtf(M > N ? M : N));
    Floats dinp = nulls ? NONE : randn((size_t)M * K, 0, 1), dw = randn((size_t)K * N, 0, 1);
    Floats dbias = nulls ? NONE : randn(N, 0, 1);
    ops_use_host(true);  ops_matmul_backward(dinp.h, dw.h, dbias.h, dout.h, inp.h, w.h, M, K, N);
    ops_use_host(false); ops_matmul_backward(dinp.d, dw.d, dbias.d, dout.d, inp.d, w.d, M, K, N);
    report("matmul_backward", shape, fmax(err(dinp), fmax(err(dw), err(dbias))), TOL_SUM);
    release();
}

// nulls: dw and db only, no dx.
static void check_layernorm(int M, int C, bool nulls) {
    char shape[64];
    snprintf(shape, sizeof shape, "M=%d C=%d%s", M, C, nulls ? " NULLs" : "");
    // A mean far from 0, so that a one-pass variance would show.
    Floats x = randn((size_t)M * C, 3, 2), w = randn(C, 1, 0.2f), b = randn(C, 0, 0.2f);
    Floats out = randn((size_t)M * C, 0, 1), mean = randn(M, 0, 1), rstd = randn(M, 0, 1);
    ops_use_host(true);  ops_layernorm_forward(out.h, mean.h, rstd.h, x.h, w.h, b.h, M, C);
    ops_use_host(false); ops_layernorm_forward(out.d, mean.d, rstd.d, x.d, w.d, b.d, M, C);
    report("layernorm_forward", shape, fmax(err(out), fmax(err(mean), err(rstd))), TOL_ROUND);

    to_device(mean);   // the CPU's statistics on both devices
    to_device(rstd);
    Floats dout = randn((size_t)M * C, 0, 1), dx = nulls ? NONE : randn((size_t)M * C, 0, 1);
    Floats dw = randn(C, 0, 1), db = randn(C, 0, 1);
    ops_use_host(true);  ops_layernorm_backward(dx.h, dw.h, db.h, dout.h, x.h, w.h, mean.h, rstd.h,
                                                M, C);
    ops_use_host(false); ops_layernorm_backward(dx.d, dw.d, db.d, dout.d, x.d, w.d, mean.d, rstd.d,
                                                M, C);
    report("layernorm_backward", shape, fmax(err(dx), fmax(err(dw), err(db))), TOL_SUM);
    release();
}

// nulls: dv only, no dq nor dk.
static void check_attention(int B, int T, int C, int NH, bool nulls) {
    char shape[64];
    snprintf(shape, sizeof shape, "B=%d T=%d C=%d NH=%d%s", B, T, C, NH, nulls ? " NULLs" : "");
    size_t n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    Floats q = randn(n, 0, 1), k = randn(n, 0, 1), v = randn(n, 0, 1);
    Floats out = randn(n, 0, 1), att = randn(na, 0, 1);
    ops_use_host(true);  ops_attention_forward(out.h, att.h, q.h, k.h, v.h, B, T, C, NH);
    ops_use_host(false); ops_attention_forward(out.d, att.d, q.d, k.d, v.d, B, T, C, NH);
    report("attention_forward", shape, fmax(err(out), err(att)), TOL_SUM);

    to_device(att);   // the CPU's probabilities on both devices
    Floats dout = randn(n, 0, 1), scratch = randn(na, 0, 1);
    Floats dq = nulls ? NONE : randn(n, 0, 1), dk = nulls ? NONE : randn(n, 0, 1);
    Floats dv = randn(n, 0, 1);
    ops_use_host(true);  ops_attention_backward(dq.h, dk.h, dv.h, scratch.h, dout.h, att.h, q.h,
                                                k.h, v.h, B, T, C, NH);
    ops_use_host(false); ops_attention_backward(dq.d, dk.d, dv.d, scratch.d, dout.d, att.d, q.d,
                                                k.d, v.d, B, T, C, NH);
    report("attention_backward", shape, fmax(err(dq), fmax(err(dk), err(dv))), TOL_SUM);
    release();
}

// nulls: dwpe only, no dwte.
static void check_embedding(int B, int T, int C, int V, int pos0, bool nulls) {
    char shape[64];
    snprintf(shape, sizeof shape, "B=%d T=%d C=%d V=%d pos0=%d%s", B, T, C, V, pos0,
             nulls ? " NULLs" : "");
    size_t n = (size_t)B * T * C;
    int maxT = pos0 + T;
    Ints tokens = randi((size_t)B * T, 0, V);
    Floats wte = randn((size_t)V * C, 0, 1), wpe = randn((size_t)maxT * C, 0, 1);
    Floats out = randn(n, 0, 1);
    ops_use_host(true);  ops_embedding_forward(out.h, tokens.h, wte.h, wpe.h, B, T, C, pos0);
    ops_use_host(false); ops_embedding_forward(out.d, tokens.d, wte.d, wpe.d, B, T, C, pos0);
    report("embedding_forward", shape, err(out), TOL_EXACT);

    Floats dout = randn(n, 0, 1), dwte = nulls ? NONE : randn((size_t)V * C, 0, 1);
    Floats dwpe = randn((size_t)maxT * C, 0, 1);
    ops_use_host(true);  ops_embedding_backward(dwte.h, dwpe.h, dout.h, tokens.h, B, T, C, pos0);
    ops_use_host(false); ops_embedding_backward(dwte.d, dwpe.d, dout.d, tokens.d, B, T, C, pos0);
    report("embedding_backward", shape, fmax(err(dwte), err(dwpe)), TOL_SUM);
    release();
}

static void check_crossentropy(int M, int V) {
    char shape[64];
    snprintf(shape, sizeof shape, "M=%d V=%d", M, V);
    Floats logits = randn((size_t)M * V, 0, 2), losses = randn(M, 0, 1);
    Floats probs = randn((size_t)M * V, 0, 1);
    Ints targets = randi(M, 0, V);
    ops_use_host(true);  ops_crossentropy_forward(losses.h, probs.h, logits.h, targets.h, M, V);
    ops_use_host(false); ops_crossentropy_forward(losses.d, probs.d, logits.d, targets.d, M, V);
    report("crossentropy_forward", shape, fmax(err(losses), err(probs)), TOL_SUM);

    to_device(probs);   // the CPU's probabilities on both devices
    Floats dlogits = randn((size_t)M * V, 0, 1);
    ops_use_host(true);  ops_crossentropy_backward(dlogits.h, probs.h, targets.h, 1.0f / M, M, V);
    ops_use_host(false); ops_crossentropy_backward(dlogits.d, probs.d, targets.d, 1.0f / M, M, V);
    report("crossentropy_backward", shape, err(dlogits), TOL_ROUND);
    release();
}

static void check_bias(int M, int N) {
    char shape[64];
    snprintf(shape, sizeof shape, "M=%d N=%d", M, N);
    Floats out = randn((size_t)M * N, 0, 1), bias = randn(N, 0, 1);
    ops_use_host(true);  ops_add_bias(out.h, bias.h, M, N);
    ops_use_host(false); ops_add_bias(out.d, bias.d, M, N);
    report("add_bias", shape, err(out), TOL_EXACT);

    ops_use_host(true);  ops_bias_backward(bias.h, out.h, M, N);
    ops_use_host(false); ops_bias_backward(bias.d, out.d, M, N);
    report("bias_backward", shape, err(bias), TOL_SUM);
    release();
}

static void check_2d(int rows, int cols, int src_ld, int dst_ld) {
    char shape[64];
    snprintf(shape, sizeof shape, "%dx%d src_ld=%d dst_ld=%d", rows, cols, src_ld, dst_ld);
    Floats src = randn((size_t)rows * src_ld, 0, 1), dst = randn((size_t)rows * dst_ld, 0, 1);
    ops_use_host(true);  ops_accumulate_2d(dst.h, dst_ld, src.h, src_ld, rows, cols);
    ops_use_host(false); ops_accumulate_2d(dst.d, dst_ld, src.d, src_ld, rows, cols);
    report("accumulate_2d", shape, err(dst), TOL_EXACT);

    ops_use_host(true);  ops_copy_2d(dst.h, dst_ld, src.h, src_ld, rows, cols);
    ops_use_host(false); ops_copy_2d(dst.d, dst_ld, src.d, src_ld, rows, cols);
    report("copy_2d", shape, err(dst), TOL_EXACT);
    release();
}

// The vocabulary-parallel pieces: a rank holding rows [v0, v0 + nv) of a
// vocabulary of V, ids of the other rows -1.
static void check_vocab_rows(int M, int C, int V, int v0, int nv) {
    char shape[64];
    snprintf(shape, sizeof shape, "M=%d C=%d V=%d rows %d..%d", M, C, V, v0, v0 + nv - 1);
    Ints tokens = randi(M, 0, V), ids = randi(M, -7, 7);
    ops_use_host(true);  ops_vocab_ids(ids.h, tokens.h, v0, nv, M);
    ops_use_host(false); ops_vocab_ids(ids.d, tokens.d, v0, nv, M);
    report("vocab_ids", shape, err_ints(ids), TOL_EXACT);

    ints_to_device(ids);
    Floats table = randn((size_t)nv * C, 0, 1), out = randn((size_t)M * C, 0, 1);
    ops_use_host(true);  ops_rows_forward(out.h, ids.h, table.h, nv, M, C);
    ops_use_host(false); ops_rows_forward(out.d, ids.d, table.d, nv, M, C);
    report("rows_forward", shape, err(out), TOL_EXACT);

    Floats dout = randn((size_t)M * C, 0, 1);
    ops_use_host(true);  ops_rows_backward(table.h, dout.h, ids.h, nv, M, C);
    ops_use_host(false); ops_rows_backward(table.d, dout.d, ids.d, nv, M, C);
    report("rows_backward", shape, err(table), TOL_SUM);
    release();
}

static void check_positions(int B, int T, int C, int pos0) {
    char shape[64];
    snprintf(shape, sizeof shape, "B=%d T=%d C=%d pos0=%d", B, T, C, pos0);
    size_t n = (size_t)B * T * C;
    Floats wpe = randn((size_t)(pos0 + T) * C, 0, 1), out = randn(n, 0, 1);
    ops_use_host(true);  ops_positions_forward(out.h, wpe.h, B, T, C, pos0);
    ops_use_host(false); ops_positions_forward(out.d, wpe.d, B, T, C, pos0);
    report("positions_forward", shape, err(out), TOL_EXACT);

    ops_use_host(true);  ops_positions_backward(wpe.h, out.h, B, T, C, pos0);
    ops_use_host(false); ops_positions_backward(wpe.d, out.d, B, T, C, pos0);
    report("positions_backward", shape, err(wpe), TOL_SUM);
    release();
}

// The cross-entropy from its parts, over N columns of logits; each piece is
// given the CPU's results of the pieces before it.
static void check_ce_parts(int M, int N) {
    char shape[64];
    snprintf(shape, sizeof shape, "M=%d N=%d", M, N);
    Floats x = randn((size_t)M * N, 0, 2), mx = randn(M, 0, 1);
    ops_use_host(true);  ops_row_max(mx.h, x.h, M, N);
    ops_use_host(false); ops_row_max(mx.d, x.d, M, N);
    report("row_max", shape, err(mx), TOL_EXACT);
    if (N == 0) {   // -INFINITY on both; nothing else to take from an empty row
        release();
        return;
    }

    to_device(mx);
    Floats sumexp = randn(M, 0, 1);
    ops_use_host(true);  ops_row_sumexp(sumexp.h, x.h, mx.h, M, N);
    ops_use_host(false); ops_row_sumexp(sumexp.d, x.d, mx.d, M, N);
    report("row_sumexp", shape, err(sumexp), TOL_SUM);

    to_device(sumexp);
    Ints ids = randi(M, -1, N);
    Floats picked = randn(M, 0, 1);
    ops_use_host(true);  ops_pick(picked.h, x.h, ids.h, M, N);
    ops_use_host(false); ops_pick(picked.d, x.d, ids.d, M, N);
    report("pick", shape, err(picked), TOL_EXACT);

    to_device(picked);
    Floats losses = randn(M, 0, 1);
    ops_use_host(true);  ops_ce_from_parts(losses.h, mx.h, sumexp.h, picked.h, M);
    ops_use_host(false); ops_ce_from_parts(losses.d, mx.d, sumexp.d, picked.d, M);
    report("ce_from_parts", shape, err(losses), TOL_ROUND);

    Floats dlogits = randn((size_t)M * N, 0, 1);
    ops_use_host(true);  ops_ce_parts_backward(dlogits.h, x.h, mx.h, sumexp.h, ids.h, 1.0f / M, M,
                                               N);
    ops_use_host(false); ops_ce_parts_backward(dlogits.d, x.d, mx.d, sumexp.d, ids.d, 1.0f / M, M,
                                               N);
    report("ce_parts_backward", shape, err(dlogits), TOL_ROUND);
    release();
}

// The local block (B, T, C) sits at rows 3.., tokens 5.., channels 8.. of a
// larger global tensor, so the global index is what draws the mask.
static void check_dropout(int B, int T, int C, float p) {
    char shape[64];
    snprintf(shape, sizeof shape, "B=%d T=%d C=%d p=%g", B, T, C, p);
    DropoutKey key = {.seed = 1234, .layer = 2, .site = 1, .step = 7, .row0 = 3, .t0 = 5,
                      .c0 = 8, .Tg = 5 + T + 2, .Cg = 8 + C + 4};
    size_t n = (size_t)B * T * C;
    Floats x = randn(n, 0, 1), out = randn(n, 0, 1), dx = randn(n, 0, 1);
    ops_use_host(true);  ops_dropout_forward(out.h, x.h, p, key, B, T, C);
    ops_use_host(false); ops_dropout_forward(out.d, x.d, p, key, B, T, C);
    report("dropout_forward", shape, err(out), TOL_EXACT);

    ops_use_host(true);  ops_dropout_backward(dx.h, x.h, p, key, B, T, C);
    ops_use_host(false); ops_dropout_backward(dx.d, x.d, p, key, B, T, C);
    report("dropout_backward", shape, err(dx), TOL_EXACT);
    release();
}

// ---- a bad id stops the run on both devices ---------------------------------------------
//
// CUDA does not survive a fork, so each device runs in a fresh process:
// this program again, as `gpu_check --bad-id OP DEVICE`.

static const char *BAD_ID_OPS[] = {"ops_rows_forward", "ops_rows_backward", "ops_pick",
                                   "ops_ce_parts_backward", "ops_crossentropy_forward"};

// The child: OP on DEVICE (cpu or cuda) with ids {0, 1, -1, 15, 0} over 13
// rows, row 3 out of range (for the cross-entropy's targets, row 2 too). It
// must stop with exit code 3 before it gets to the line after the op.
static int bad_id_child(const char *op, const char *device) {
    enum { M = 5, N = 13, C = 8 };
    mem_init(device, 0);
    ops_init();
    const int ids_host[M] = {0, 1, -1, N + 2, 0};
    int *ids = mem_alloc(sizeof ids_host, MEM_OTHER, "ids");
    mem_from_host(ids, ids_host, sizeof ids_host);
    float *x = mem_alloc_floats((size_t)M * N, MEM_OTHER, "x");   // (M, N), zeros
    float *y = mem_alloc_floats((size_t)M * N, MEM_OTHER, "y");   // (M, N)
    float *row = mem_alloc_floats(M, MEM_OTHER, "row");           // (M), zeros
    float *sumexp = mem_alloc_floats(M, MEM_OTHER, "sumexp");     // (M)
    ops_fill(sumexp, (float)N, M);   // the sum of exps of a zero row
    if (strcmp(op, "ops_rows_forward") == 0)
        ops_rows_forward(y, ids, x, N, M, C);
    else if (strcmp(op, "ops_rows_backward") == 0)
        ops_rows_backward(y, x, ids, N, M, C);
    else if (strcmp(op, "ops_pick") == 0)
        ops_pick(row, x, ids, M, N);
    else if (strcmp(op, "ops_ce_parts_backward") == 0)
        ops_ce_parts_backward(y, x, row, sumexp, ids, 1.0f, M, N);
    else if (strcmp(op, "ops_crossentropy_forward") == 0)
        ops_crossentropy_forward(row, y, x, ids, M, N);
    else
        core_usage_error("--bad-id: no check for op '%s'", op);
    printf("%s on %s went on past a bad id\n", op, device);
    return 0;
}

// Run the child for OP on DEVICE; keep what it printed (stdout and stderr) in
// out. Returns its exit code, or -1 when it did not exit (a crash).
static int run_bad_id(const char *op, const char *device, char *out, size_t len) {
    int fd[2];
    CHECK(pipe(fd) == 0, "gpu_check: pipe failed");
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "gpu_check: fork failed");
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        dup2(fd[1], STDERR_FILENO);
        close(fd[0]);
        close(fd[1]);
        execl("/proc/self/exe", "gpu_check", "--bad-id", op, device, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < len && (r = read(fd[0], out + n, len - 1 - n)) > 0) n += (size_t)r;
    out[n] = '\0';
    char sink[256];
    while (read(fd[0], sink, sizeof sink) > 0) {}   // the rest, so that the child never blocks
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void check_bad_id(const char *op) {
    char cpu[4096], gpu[4096];
    int rc_cpu = run_bad_id(op, "cpu", cpu, sizeof cpu);
    int rc_gpu = run_bad_id(op, "cuda", gpu, sizeof gpu);
    bool ok = rc_cpu == EXIT_CHECK && rc_gpu == EXIT_CHECK && strcmp(cpu, gpu) == 0;
    g_checks++;
    g_passed += ok;
    printf("%-22s %-30s exit %d (cpu), %d (gpu), %s message  %s\n", op + strlen("ops_"),
           "a bad id", rc_cpu, rc_gpu, strcmp(cpu, gpu) == 0 ? "the same" : "another",
           ok ? "ok" : "FAIL");
    if (!ok) printf("  cpu said: %s  gpu said: %s", cpu, gpu);
}

int main(int argc, char **argv) {
    core_set_program("gpu_check");
    if (argc == 4 && strcmp(argv[1], "--bad-id") == 0) return bad_id_child(argv[2], argv[3]);
    if (argc != 1)
        core_usage_error("usage: build/gpu_check (no options): every op of ops.h on the GPU "
                         "against the CPU");
    int gpus = mem_cuda_device_count();
    if (gpus < 0) {
        printf("[gpu_check] this build has no CUDA backend (CUDA=0): nothing to compare; "
               "skipped\n");
        return 77;
    }
    if (gpus == 0) {
        printf("[gpu_check] no GPU is visible to this process: nothing to compare; skipped\n");
        return 77;
    }
    mem_init("cuda", 0);
    ops_init();
    printf("[gpu_check] %s · every op of ops.h: the CPU's kernels on host memory against the "
           "GPU's, the same inputs; error = max |gpu - cpu| / (1 + |cpu|)\n",
           mem_device_name());
    printf("%-22s %-30s %10s %7s\n", "op", "shape", "error", "tol");

    check_negative_control();

    const size_t ns[] = {1, 7, 1000, 100003};
    for (int i = 0; i < 4; i++) check_elementwise(ns[i]);

    check_matmul(1, 8, 13, false);
    check_matmul(7, 24, 100, false);
    check_matmul(65, 100, 257, false);
    check_matmul(7, 24, 100, true);

    check_layernorm(1, 8, false);
    check_layernorm(7, 24, false);
    check_layernorm(65, 100, false);
    check_layernorm(7, 24, true);

    check_attention(1, 1, 8, 2, false);
    check_attention(2, 5, 24, 3, false);
    check_attention(3, 33, 100, 4, false);
    check_attention(2, 5, 24, 3, true);

    check_embedding(1, 1, 8, 13, 0, false);
    check_embedding(2, 5, 24, 13, 3, false);
    check_embedding(3, 33, 100, 257, 7, false);
    check_embedding(2, 5, 24, 13, 3, true);

    check_crossentropy(1, 13);
    check_crossentropy(7, 257);
    check_crossentropy(65, 257);

    check_bias(1, 8);
    check_bias(7, 24);
    check_bias(65, 100);

    check_2d(1, 1, 1, 1);
    check_2d(7, 5, 13, 8);
    check_2d(65, 100, 257, 101);

    check_vocab_rows(1, 8, 13, 0, 13);
    check_vocab_rows(7, 24, 13, 4, 5);
    check_vocab_rows(65, 100, 257, 100, 64);

    check_positions(1, 1, 8, 0);
    check_positions(2, 5, 24, 3);
    check_positions(3, 33, 100, 7);

    check_ce_parts(1, 13);
    check_ce_parts(7, 257);
    check_ce_parts(65, 257);
    check_ce_parts(3, 0);

    check_dropout(1, 1, 8, 0.5f);
    check_dropout(2, 5, 24, 0.1f);
    check_dropout(3, 33, 100, 0.5f);
    check_dropout(2, 5, 24, 0.0f);

    for (size_t i = 0; i < sizeof BAD_ID_OPS / sizeof BAD_ID_OPS[0]; i++)
        check_bad_id(BAD_ID_OPS[i]);

    printf("%d of %d checks passed\n", g_passed, g_checks);
    return g_passed == g_checks ? 0 : 1;
}
