// gpu_check.c: every op of ops.h on the GPU against the same op on the CPU,
// and build/ref trained on the GPU against the CPU's reference
// (build/gpu_check). Exit 0 when every check passes, 1 when one fails, 77 (a
// skip) when no GPU is visible or the build has no CUDA backend.
//   build/gpu_check                  every group of ops, each in a process of its own
//   build/gpu_check --group A,B      those groups (or all) here, in this process
//                                    (for compute-sanitizer, whose exit code then means the run)
//   build/gpu_check --list           the groups' names
//   build/gpu_check --devices        what the CUDA runtime sees (and why not, when nothing)
//   build/gpu_check --training [--device cuda|cpu] [--keep DIR] [-- build/ref flags]
//                                    build/ref on the GPU graded against the CPU's reference
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
//
// A kernel that faults leaves the GPU's context dead, and the fault shows at
// the next CUDA call, whichever that is. So the ops come in groups (GROUPS
// below), each group runs in a process of its own with CUDA_LAUNCH_BLOCKING=1
// (the fault is then reported by the launch that made it), and a group that
// crashes or hangs ends its own row only: the groups after it still run.
#include <errno.h>
#include <float.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef PL_CUDA
#include <cuda_runtime_api.h>
#endif

#include "args.h"
#include "core.h"
#include "dump.h"
#include "lab.h"
#include "labs.h"
#include "mem.h"
#include "mem_cuda.h"
#include "reading.h"
#include "ops.h"
#include "results.h"
#include "rng.h"
#include "rounding.h"
#include "train.h"

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
// A bf16 written from an fp32 that the two devices rounded a few ulps apart:
// the same bf16, or, where the fp32 sits at a tie between two, the next one
// (a bf16 step is 2^-7 of a value in [1, 2)).
static const double TOL_BF16_STEP = 0x1p-7;

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

// How many of n elements of `size` bytes differ, bit for bit, between the
// host's h and the device's d (a NaN is equal to itself here).
static double err_bits(const void *h, const void *d, size_t n, size_t size) {
    unsigned char *g = malloc(n * size + 1);
    mem_to_host(g, d, n * size);
    double differ = 0;
    for (size_t i = 0; i < n; i++) differ += memcmp(g + i * size, (const unsigned char *)h + i * size, size) != 0;
    free(g);
    return differ;
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

    // bf16: the same 16 bits from either device's kernel, on N(0, 3^2) with
    // a tie, a subnormal, the largest float (to infinity), an infinity and
    // NaNs of both signs among them; and the same floats back.
    Floats w = randn(n, 0, 3), wb = randn(n, 0, 1);
    const float special[] = {1.0f + 0x1p-8f, -1.0f - 3 * 0x1p-8f, 1e-40f, FLT_MAX, -INFINITY, NAN, -NAN};
    for (size_t k = 0; k < sizeof special / sizeof *special && k < n; k++) w.h[k] = special[k];
    to_device(w);
    bf16 *bh, *bd;
    pair_alloc((void **)&bh, (void **)&bd, n * sizeof(bf16));
    ops_use_host(true);  ops_to_bf16(bh, w.h, n);
    ops_use_host(false); ops_to_bf16(bd, w.d, n);
    report("to_bf16 (elements whose bits differ)", shape, err_bits(bh, bd, n, sizeof(bf16)), TOL_EXACT);
    mem_from_host(bd, bh, n * sizeof(bf16));   // both from the same bits
    ops_use_host(true);  ops_from_bf16(wb.h, bh, n);
    ops_use_host(false); ops_from_bf16(wb.d, bd, n);
    report("from_bf16 (elements whose bits differ)", shape, err_bits(wb.h, wb.d, n, sizeof(float)), TOL_EXACT);
    // y = bf16(y + x): one fp32 add, one rounding, the same bits on either device.
    ops_use_host(true);  ops_accumulate_bf16(bh, x.h, n);
    ops_use_host(false); ops_accumulate_bf16(bd, x.d, n);
    report("accumulate_bf16 (elements whose bits differ)", shape, err_bits(bh, bd, n, sizeof(bf16)), TOL_EXACT);

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

    // Mixed precision's AdamW: the fp32 master, its moments and the bf16
    // working weights, from bf16 gradients (the same bits on both devices).
    Floats pm = randn(n, 0, 1), mm = randn(n, 0, 0.1f), vm = randu(n, 0, 0.01f), wf = randn(n, 0, 1);
    bf16 *gh, *gd, *wh, *wd;
    pair_alloc((void **)&gh, (void **)&gd, n * sizeof(bf16));
    pair_alloc((void **)&wh, (void **)&wd, n * sizeof(bf16));
    ops_use_host(true);  ops_to_bf16(gh, g.h, n);
    mem_from_host(gd, gh, n * sizeof(bf16));
    ops_use_host(true);  ops_adamw_mixed(pm.h, wh, gh, mm.h, vm.h, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3);
    ops_use_host(false); ops_adamw_mixed(pm.d, wd, gd, mm.d, vm.d, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3);
    report("adamw_mixed (master, moments)", shape, fmax(err(pm), fmax(err(mm), err(vm))), TOL_ROUND);
    ops_use_host(true);  ops_from_bf16(wf.h, wh, n);
    ops_use_host(false); ops_from_bf16(wf.d, wd, n);
    report("adamw_mixed (bf16 weights)", shape, err(wf), TOL_BF16_STEP);

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

    // The same products of bf16 inputs (the same bits on both devices),
    // fp32 accumulation: sums in another order, as above.
    bf16 *ih, *id, *wh, *wd, *gh, *gd;
    pair_alloc((void **)&ih, (void **)&id, (size_t)M * K * sizeof(bf16));
    pair_alloc((void **)&wh, (void **)&wd, (size_t)K * N * sizeof(bf16));
    pair_alloc((void **)&gh, (void **)&gd, (size_t)M * N * sizeof(bf16));
    ops_use_host(true);
    ops_to_bf16(ih, inp.h, (size_t)M * K), ops_to_bf16(wh, w.h, (size_t)K * N), ops_to_bf16(gh, dout.h, (size_t)M * N);
    mem_from_host(id, ih, (size_t)M * K * sizeof(bf16));
    mem_from_host(wd, wh, (size_t)K * N * sizeof(bf16));
    mem_from_host(gd, gh, (size_t)M * N * sizeof(bf16));
    ops_use_host(true);  ops_matmul_forward_bf16(out.h, ih, wh, bias.h, M, K, N);
    ops_use_host(false); ops_matmul_forward_bf16(out.d, id, wd, bias.d, M, K, N);
    report("matmul_forward_bf16", shape, err(out), TOL_SUM);
    ops_use_host(true);  ops_matmul_backward_bf16(dinp.h, dw.h, dbias.h, gh, ih, wh, M, K, N);
    ops_use_host(false); ops_matmul_backward_bf16(dinp.d, dw.d, dbias.d, gd, id, wd, M, K, N);
    report("matmul_backward_bf16", shape, fmax(err(dinp), fmax(err(dw), err(dbias))), TOL_SUM);
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


// ---- the groups, each in a process of its own ---------------------------------------

static void group_negative_control(void) { check_negative_control(); }

static void group_elementwise(void) {
    const size_t ns[] = {1, 7, 1000, 100003};
    for (int i = 0; i < 4; i++) check_elementwise(ns[i]);
}

static void group_matmul(void) {
    check_matmul(1, 8, 13, false);
    check_matmul(7, 24, 100, false);
    check_matmul(65, 100, 257, false);
    check_matmul(7, 24, 100, true);
}

static void group_layernorm(void) {
    check_layernorm(1, 8, false);
    check_layernorm(7, 24, false);
    check_layernorm(65, 100, false);
    check_layernorm(7, 24, true);
}

static void group_attention(void) {
    check_attention(1, 1, 8, 2, false);
    check_attention(2, 5, 24, 3, false);
    check_attention(3, 33, 100, 4, false);
    check_attention(2, 5, 24, 3, true);
}

static void group_embedding(void) {
    check_embedding(1, 1, 8, 13, 0, false);
    check_embedding(2, 5, 24, 13, 3, false);
    check_embedding(3, 33, 100, 257, 7, false);
    check_embedding(2, 5, 24, 13, 3, true);
}

static void group_crossentropy(void) {
    check_crossentropy(1, 13);
    check_crossentropy(7, 257);
    check_crossentropy(65, 257);
}

static void group_bias(void) {
    check_bias(1, 8);
    check_bias(7, 24);
    check_bias(65, 100);
}

static void group_2d(void) {
    check_2d(1, 1, 1, 1);
    check_2d(7, 5, 13, 8);
    check_2d(65, 100, 257, 101);
}

static void group_vocab_rows(void) {
    check_vocab_rows(1, 8, 13, 0, 13);
    check_vocab_rows(7, 24, 13, 4, 5);
    check_vocab_rows(65, 100, 257, 100, 64);
}

static void group_positions(void) {
    check_positions(1, 1, 8, 0);
    check_positions(2, 5, 24, 3);
    check_positions(3, 33, 100, 7);
}

static void group_ce_parts(void) {
    check_ce_parts(1, 13);
    check_ce_parts(7, 257);
    check_ce_parts(65, 257);
    check_ce_parts(3, 0);
}

static void group_dropout(void) {
    check_dropout(1, 1, 8, 0.5f);
    check_dropout(2, 5, 24, 0.1f);
    check_dropout(3, 33, 100, 0.5f);
    check_dropout(2, 5, 24, 0.0f);
}

static void group_bad_id(void) {
    for (size_t i = 0; i < sizeof BAD_ID_OPS / sizeof BAD_ID_OPS[0]; i++) check_bad_id(BAD_ID_OPS[i]);
}

typedef struct {
    const char *name;
    void (*run)(void);
    bool starts_processes;   // runs this program again (a sanitizer would follow it, and each child fails on purpose)
} Group;

static const Group GROUPS[] = {
    {"negative_control", group_negative_control, false},
    {"elementwise", group_elementwise, false},
    {"matmul", group_matmul, false},
    {"layernorm", group_layernorm, false},
    {"attention", group_attention, false},
    {"embedding", group_embedding, false},
    {"crossentropy", group_crossentropy, false},
    {"bias", group_bias, false},
    {"copy_2d", group_2d, false},
    {"vocab_rows", group_vocab_rows, false},
    {"positions", group_positions, false},
    {"ce_parts", group_ce_parts, false},
    {"dropout", group_dropout, false},
    {"bad_id", group_bad_id, true},
};
enum { NGROUPS = sizeof GROUPS / sizeof GROUPS[0] };

static const Group *group_named(const char *name, size_t len) {
    for (int i = 0; i < NGROUPS; i++)
        if (strlen(GROUPS[i].name) == len && strncmp(GROUPS[i].name, name, len) == 0) return &GROUPS[i];
    return NULL;
}

// 0 when a GPU is there to compare with; else the skip, said once.
static int need_gpu(void) {
    int gpus = mem_cuda_device_count();
    if (gpus < 0) {
        printf("[gpu_check] this build has no CUDA backend (CUDA=0): nothing to compare; skipped\n");
        return 77;
    }
    if (gpus == 0) {
        printf("[gpu_check] no GPU is visible to this process: nothing to compare; skipped "
               "(build/gpu_check --devices says why)\n");
        return 77;
    }
    return 0;
}

static void print_header(const char *device) {
    printf("[gpu_check] %s · every op of ops.h: the CPU's kernels on host memory against the "
           "GPU's, the same inputs; error = max |gpu - cpu| / (1 + |cpu|)\n",
           device);
    printf("%-22s %-30s %10s %7s\n", "op", "shape", "error", "tol");
}

// `gpu_check --group LIST`: the groups named (comma-separated, or `all`:
// every group that starts no process of its own) in this process, one after
// another. The last line, "[group LIST] P of M checks passed", is what the
// parent below reads.
static int run_groups_here(const char *list, bool header) {
    // Read by the CUDA runtime when it starts: before the first CUDA call.
    setenv("CUDA_LAUNCH_BLOCKING", "1", 0);
    // A row at a time, so that a crash loses none of the rows before it.
    setvbuf(stdout, NULL, _IOLBF, 0);
    int skip = need_gpu();
    if (skip) return skip;
    const Group *todo[NGROUPS];
    int n = 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == 3 && strncmp(p, "all", 3) == 0) {
            for (int i = 0; i < NGROUPS; i++)
                if (!GROUPS[i].starts_processes && n < NGROUPS) todo[n++] = &GROUPS[i];
        } else {
            const Group *g = group_named(p, len);
            if (!g) core_usage_error("--group: no group '%.*s' (build/gpu_check --list names them)", (int)len, p);
            if (n < NGROUPS) todo[n++] = g;
        }
        p += len;
        if (*p == ',') p++;
    }
    mem_init("cuda", 0);
    ops_init();
    if (header) print_header(mem_device_name());
    for (int i = 0; i < n; i++) todo[i]->run();
    printf("[group %s] %d of %d checks passed\n", list, g_passed, g_checks);
    return g_passed == g_checks ? 0 : 1;
}

// How one group's process ended, as the parent saw it.
typedef struct {
    int passed, checks;   // from its last line; -1 when it never said
    bool completed;       // it said its last line and exited 0 or 1
    char how[160];        // otherwise: how it ended
    char last_row[200];   // the last row it printed (a line ending "ok" or "FAIL")
} GroupEnd;

// One line of a group's output, as it arrives.
static void note_line(GroupEnd *e, const char *line) {
    int p, m;
    char name[64];
    if (sscanf(line, "[group %63s %d of %d checks passed", name, &p, &m) == 3) {
        e->passed = p;
        e->checks = m;
        return;
    }
    size_t n = strlen(line);
    if ((n >= 2 && strcmp(line + n - 2, "ok") == 0) || (n >= 4 && strcmp(line + n - 4, "FAIL") == 0))
        snprintf(e->last_row, sizeof e->last_row, "%.199s", line);
}

// Run `gpu_check --group NAME` as a process of its own (its own process
// group, so that a hang is ended with everything it started), pass its
// output on as it comes, and stop it after limit_s seconds.
static GroupEnd run_group_child(const char *name, double limit_s) {
    GroupEnd e = {.passed = -1, .checks = -1};
    int fd[2];
    CHECK(pipe(fd) == 0, "gpu_check: pipe failed");
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "gpu_check: fork failed");
    if (pid == 0) {
        setpgid(0, 0);
        dup2(fd[1], STDOUT_FILENO);
        dup2(fd[1], STDERR_FILENO);
        close(fd[0]);
        close(fd[1]);
        setenv("CUDA_LAUNCH_BLOCKING", "1", 1);
        execl("/proc/self/exe", "gpu_check", "--group", name, "--no-header", (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    close(fd[1]);
    char buf[4096], line[512];
    size_t len = 0;
    bool timed_out = false;
    double deadline = core_now() + limit_s;
    for (;;) {
        int ms = (int)((deadline - core_now()) * 1000);
        if (ms <= 0) {
            timed_out = true;
            kill(-pid, SIGKILL);
            break;
        }
        struct pollfd p = {fd[0], POLLIN, 0};
        int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;   // the deadline is checked above
        ssize_t got = read(fd[0], buf, sizeof buf);
        if (got <= 0) break;
        fwrite(buf, 1, (size_t)got, stdout);
        fflush(stdout);
        for (ssize_t i = 0; i < got; i++) {
            if (buf[i] == '\n') {
                line[len] = 0;
                note_line(&e, line);
                len = 0;
            } else if (len + 1 < sizeof line) {
                line[len++] = buf[i];
            }
        }
    }
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (timed_out)
        snprintf(e.how, sizeof e.how, "was stopped after %.0f s (--group-limit): a hang", limit_s);
    else if (WIFSIGNALED(status))
        snprintf(e.how, sizeof e.how, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (WEXITSTATUS(status) > 1)
        snprintf(e.how, sizeof e.how, "ended with exit code %d%s", WEXITSTATUS(status),
                 WEXITSTATUS(status) == EXIT_CHECK ? " (a CHECK or a CUDA call failed: its line above says which)" : "");
    else if (e.checks < 0)
        snprintf(e.how, sizeof e.how, "exited %d without its last line", WEXITSTATUS(status));
    else
        e.completed = true;
    return e;
}

// Every group, each in a process of its own: a fault or a hang ends its
// group's row, and the next group starts on a fresh GPU context.
static int run_all_groups(double limit_s) {
    int skip = need_gpu();
    if (skip) return skip;
    // This process makes no CUDA context of its own (the device's
    // properties need none): each group has its own, on an idle GPU.
    char name[256] = "a GPU";
#ifdef PL_CUDA
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) snprintf(name, sizeof name, "%s", prop.name);
#endif
    print_header(name);
    fflush(stdout);
    int checks = 0, passed = 0, ended = 0;
    char lost[NGROUPS][700];
    for (int i = 0; i < NGROUPS; i++) {
        double t0 = core_now();
        GroupEnd e = run_group_child(GROUPS[i].name, limit_s);
        if (e.completed) {
            checks += e.checks;
            passed += e.passed;
            continue;
        }
        // The group's checks that ran are counted; the group itself is one
        // failed check more (its later rows never ran).
        checks += (e.checks > 0 ? e.checks : 0) + 1;
        passed += e.passed > 0 ? e.passed : 0;
        snprintf(lost[ended++], sizeof lost[0], "group %s %s after %.0f s, %s%.199s%s; its later rows did not run",
                 GROUPS[i].name, e.how, core_now() - t0, e.last_row[0] ? "after its row '" : "before its first row",
                 e.last_row, e.last_row[0] ? "'" : "");
        printf("%-22s %-30s %s  FAIL\n", GROUPS[i].name, "(the group's process)", e.how);
        fflush(stdout);
    }
    for (int i = 0; i < ended; i++) printf("  %s\n", lost[i]);
    printf("%d of %d checks passed (%d groups, each in a process of its own; %d ended early)\n", passed,
           checks, NGROUPS, ended);
    return passed == checks ? 0 : 1;
}

// ---- build/ref on the GPU against the CPU's reference -------------------------------
//
// The grader's yardstick measures "the same training up to rounding" on the
// CPU: build/ref as it is, in micro-batches, and rounded as another machine
// would (README, "How the yardstick works"). A GPU rounds in ways of its own
// that none of those samples makes: cuBLAS's blocking and order of every
// product's sums, a warp's tree over a row, its own expf. Held to ten times
// the CPU's rounding alone, a GPU run is held to another device's yardstick:
// where cuBLAS's orders round further than the CPU's, correct code fails, and
// the bound says nothing of how far the GPU's own orders move a result. So
// the GPU measures its own rounding the same way: build/ref on the GPU as it
// is and in the yardstick's micro-batches (the rows summed in other orders,
// by the GPU's kernels; --rounding alt changes the CPU's kernels only). The
// GPU's plain run is then graded by the grader's own checks of build/ref
// (grader/spec_ref.c: losses, first gradient, final parameters and moments,
// Adam's reach, memory) against the CPU's plain run, each tolerance
// TOL_FACTOR times the larger of the two devices' measured rounding, tensor
// by tensor. Two negative controls follow: the same GPU run with one row of
// a weight matrix moved by a tenth of an AdamW step, and with one element
// moved beyond Adam's reach, must each fail.

enum { MAX_REF_FLAGS = 40 };

typedef struct {
    char label[48];   // "dev-cuda-micro2"
    char dump[700], out[700];
    pid_t pid;
    int status;
    double seconds;   // from the start of all to its end
} RefRun;

// What a file holds, as a string (at most 1 MiB of its end; "" when unreadable).
static char *read_text(const char *path) {
    FILE *f = fopen(path, "r");
    char *s = NULL;
    long n = 0;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0) {
        long start = n > (1L << 20) ? n - (1L << 20) : 0;
        s = malloc((size_t)(n - start) + 1);
        fseek(f, start, SEEK_SET);
        n = s ? (long)fread(s, 1, (size_t)(n - start), f) : 0;
    }
    if (f) fclose(f);
    if (!s) s = malloc(1);
    CHECK(s, "gpu_check: out of memory");
    s[n > 0 ? n : 0] = 0;
    return s;
}

// Start build/ref on `device` with `flags` and yardstick run y's own flags;
// its dump and output go into dir, named by role ("ref": the CPU's
// reference runs, "dev": the device's), device and y.
static void ref_start(RefRun *r, const char *ref, const char *role, const char *device, char **flags, int nflags,
                      const YardstickRun *y, const char *dir) {
    int m = snprintf(r->label, sizeof r->label, "%s-%s-", role, device);
    if (y->micro > 1)
        snprintf(r->label + m, sizeof r->label - (size_t)m, "micro%d%s", y->micro, y->micro_mean ? "-mean" : "");
    else
        snprintf(r->label + m, sizeof r->label - (size_t)m, "%s", y->rounding == OPS_ROUNDING_ALT ? "alt" : "plain");
    snprintf(r->dump, sizeof r->dump, "%s/%s.bin", dir, r->label);
    snprintf(r->out, sizeof r->out, "%s/%s.txt", dir, r->label);
    char micro[16];
    snprintf(micro, sizeof micro, "%d", y->micro);
    const char *argv[MAX_REF_FLAGS + 16];
    int n = 0;
    argv[n++] = ref;
    argv[n++] = "--device";
    argv[n++] = device;
    for (int i = 0; i < nflags; i++) argv[n++] = flags[i];
    if (y->micro > 1) {
        argv[n++] = "--micro";
        argv[n++] = micro;
        if (y->micro_mean) argv[n++] = "--micro-mean";
    }
    argv[n++] = "--rounding";
    argv[n++] = ops_rounding_name(y->rounding);
    argv[n++] = "--dump";
    argv[n++] = r->dump;
    argv[n] = NULL;
    fflush(stdout);
    r->pid = fork();
    CHECK(r->pid >= 0, "gpu_check: fork failed");
    if (r->pid == 0) {
        int fd = open(r->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) _exit(127);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
        execv(ref, (char *const *)argv);
        _exit(127);
    }
}

static double max_of(const double *v, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, v[i]);
    return m;
}

// The rounding both devices allow: tensor by tensor the larger of a's (the
// CPU's) and b's (the device's) measured figures, the medians taken again
// over those, Adam's reach the larger of the two. *larger counts the tensors
// whose first gradient the device rounds further than the CPU.
static void measured_combine(Measured *m, const Measured *a, const Measured *b, int *larger) {
    memset(m, 0, sizeof *m);
    measured_alloc(m, a->ntensors);
    m->ntensors = a->ntensors;
    *larger = 0;
    for (int t = 0; t < a->ntensors; t++) {
        memcpy(m->names[t], a->names[t], sizeof m->names[t]);
        m->grad_rel[t] = a->grad_rel[t];
        m->grad_abs[t] = a->grad_abs[t];
        m->param_bulk[t] = a->param_bulk[t];
        m->m_bulk[t] = a->m_bulk[t];
        m->v_bulk[t] = a->v_bulk[t];
        for (int u = 0; u < b->ntensors; u++) {
            if (strcmp(b->names[u], a->names[t]) != 0) continue;
            *larger += b->grad_rel[u] > a->grad_rel[t];
            m->grad_rel[t] = fmax(m->grad_rel[t], b->grad_rel[u]);
            m->grad_abs[t] = fmax(m->grad_abs[t], b->grad_abs[u]);
            m->param_bulk[t] = fmax(m->param_bulk[t], b->param_bulk[u]);
            m->m_bulk[t] = fmax(m->m_bulk[t], b->m_bulk[u]);
            m->v_bulk[t] = fmax(m->v_bulk[t], b->v_bulk[u]);
        }
    }
    m->loss = fmax(a->loss, b->loss);
    m->loss_ulp = fmax(a->loss_ulp, b->loss_ulp);
    measured_medians(m);
    m->adam_reach = fmax(a->adam_reach, b->adam_reach);
    m->nsamples = a->nsamples + b->nsamples;
}

// The grader's checks of build/ref on `run`; each check's line when `print`.
// Returns the number that failed.
static int grade_ref_run(Run *run, bool print) {
    const LabSpec *lab = lab_spec("ref");
    CHECK(lab, "gpu_check: the grader has no spec for build/ref");
    Grader g = {0};
    g.lab = lab->id;
    lab->check(&g, lab, run);
    int failed = grader_failed(&g);
    for (int i = 0; print && i < g.n; i++) {
        const Result *r = &g.results[i];
        printf("  %-4s  %-44s %s   (bound: %s)\n", r->pass ? "ok" : "FAIL", r->check, r->figure, r->bound);
    }
    for (int i = 0; print && i < g.n; i++) {
        const Result *r = &g.results[i];
        if (!r->pass && r->diagnosis[0]) printf("  %s:\n    %s\n", r->check, r->diagnosis);
    }
    grader_free(&g);
    return failed;
}

// COUNT f32 elements of `name` from `index` on, moved by delta (a negative
// control; call again with -delta to put them back). False when the dump has
// no such elements.
static bool nudge(DumpFile *d, const char *name, uint64_t index, uint64_t count, float delta) {
    DumpArray *a = (DumpArray *)dump_find(d, name);
    if (!a || a->type != DUMP_F32 || index + count > a->count) return false;
    float *x = a->data;
    for (uint64_t i = index; i < index + count; i++) x[i] += delta;
    return true;
}

// Every matrix of param/final rounded to bf16 (save: the values before,
// for restore_matrices): the fp32 master overwritten from the bf16 weights.
static float *round_matrices(DumpFile *d) {
    size_t n = 0, k = 0;
    for (int i = 0; i < d->count; i++)
        if (strncmp(d->arrays[i].name, "param/final/", 12) == 0 && d->arrays[i].ndim == 2) n += d->arrays[i].count;
    float *save = malloc((n ? n : 1) * sizeof *save);
    CHECK(save, "out of memory");
    for (int i = 0; i < d->count; i++) {
        DumpArray *a = &d->arrays[i];
        if (strncmp(a->name, "param/final/", 12) != 0 || a->ndim != 2 || a->type != DUMP_F32) continue;
        float *x = a->data;
        for (uint64_t e = 0; e < a->count; e++) save[k++] = x[e], x[e] = bf16_to_float(bf16_from_float(x[e]));
    }
    return save;
}

static void restore_matrices(DumpFile *d, float *save) {
    size_t k = 0;
    for (int i = 0; i < d->count; i++) {
        DumpArray *a = &d->arrays[i];
        if (strncmp(a->name, "param/final/", 12) != 0 || a->ndim != 2 || a->type != DUMP_F32) continue;
        float *x = a->data;
        for (uint64_t e = 0; e < a->count; e++) x[e] = save[k++];
    }
    free(save);
}

static int training_check(int argc, char **argv) {
    const char *device = "cuda", *keep = NULL;
    char *flags[MAX_REF_FLAGS];
    int nflags = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            device = argv[++i];
            if (strcmp(device, "cuda") != 0 && strcmp(device, "cpu") != 0)
                core_usage_error("--training --device %s: cuda (the GPU against the CPU) or cpu (the CPU "
                                 "against itself: the machinery alone)", device);
        } else if (strcmp(argv[i], "--keep") == 0 && i + 1 < argc) {
            keep = argv[++i];
        } else if (strcmp(argv[i], "--") == 0) {
            for (i++; i < argc; i++) {
                CHECK(nflags < MAX_REF_FLAGS - 2, "gpu_check: more than %d build/ref flags", MAX_REF_FLAGS - 2);
                if (strcmp(argv[i], "--device") == 0 || strcmp(argv[i], "--dump") == 0 ||
                    strcmp(argv[i], "--micro") == 0 || strcmp(argv[i], "--rounding") == 0 ||
                    strcmp(argv[i], "--tf32") == 0)
                    core_usage_error("--training sets %s itself; give build/ref's other flags after --", argv[i]);
                flags[nflags++] = argv[i];
            }
        } else {
            core_usage_error("--training takes --device cuda|cpu, --keep DIR and, after --, build/ref's "
                             "flags; not '%s'", argv[i]);
        }
    }
    // build/ref on the GPU: 8 steps, seed 1337.
    bool seeded = false;
    for (int i = 0; i < nflags; i++) seeded |= strcmp(flags[i], "--seed") == 0;
    if (nflags == 0) {
        flags[nflags++] = "--steps";
        flags[nflags++] = "8";
    }
    if (!seeded) {
        flags[nflags++] = "--seed";
        flags[nflags++] = "1337";
    }
    if (strcmp(device, "cuda") == 0) {
        int skip = need_gpu();
        if (skip) return skip;
    }
    char self[1024], ref[1100];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0, "gpu_check: cannot find where it lives");
    self[n] = 0;
    *strrchr(self, '/') = 0;
    snprintf(ref, sizeof ref, "%s/ref", self);
    CHECK(access(ref, X_OK) == 0, "gpu_check --training needs build/ref beside it (%s): make build/ref", ref);
    char dir[700];
    if (keep) {
        snprintf(dir, sizeof dir, "%s", keep);
        CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST, "gpu_check: cannot make %s: %s", dir, strerror(errno));
    } else {
        const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(dir, sizeof dir, "%s/gpu_check.XXXXXX", tmp);
        CHECK(mkdtemp(dir), "gpu_check: cannot make a directory in %s", tmp);
    }

    // The yardstick's runs on each device, all at once: the CPU's in full,
    // the device's where they round differently on it (not --rounding alt).
    Args defaults = args_defaults();
    int batch = defaults.batch;
    for (int i = 0; i + 1 < nflags; i++)
        if (strcmp(flags[i], "--batch") == 0) batch = atoi(flags[i + 1]);
    YardstickRun y[YARDSTICK_MAX];
    // (One device against another: no ranks add partial products here, so
    // not the bf16 partials run, which would only loosen the bounds.)
    int ny = train_yardstick(batch, false, y, YARDSTICK_MAX);
    RefRun runs[2 * YARDSTICK_MAX];
    int ncpu = 0, ndev = 0;
    for (int k = 0; k < ny; k++) ref_start(&runs[ncpu++], ref, "ref", "cpu", flags, nflags, &y[k], dir);
    for (int k = 0; k < ny; k++)
        if (y[k].rounding == OPS_ROUNDING_NATIVE) ref_start(&runs[ncpu + ndev++], ref, "dev", device, flags, nflags, &y[k], dir);
    double t0 = core_now();
    for (int left = ncpu + ndev; left > 0;) {
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0 && errno == EINTR) continue;
        CHECK(pid > 0, "gpu_check: waitpid failed: %s", strerror(errno));
        for (int k = 0; k < ncpu + ndev; k++)
            if (runs[k].pid == pid) {
                runs[k].status = status;
                runs[k].seconds = core_now() - t0;
                left--;
            }
    }
    DumpFile *cpu[YARDSTICK_MAX] = {0}, *dev[YARDSTICK_MAX] = {0};
    int bad = 0;
    for (int k = 0; k < ncpu + ndev; k++) {
        const char *err = NULL;
        DumpFile *d = WIFEXITED(runs[k].status) && WEXITSTATUS(runs[k].status) == 0 ? dump_read(runs[k].dump, &err) : NULL;
        if (k < ncpu) cpu[k] = d;
        else dev[k - ncpu] = d;
        if (!d) {
            char *out = read_text(runs[k].out);
            size_t len = strlen(out);
            const char *tail = out + (len > 600 ? len - 600 : 0);
            printf("[gpu_check] build/ref (%s) failed (%s %d%s%s); the end of its output (%s):\n%s\n", runs[k].label,
                   WIFSIGNALED(runs[k].status) ? "signal" : "exit",
                   WIFSIGNALED(runs[k].status) ? WTERMSIG(runs[k].status) : WEXITSTATUS(runs[k].status),
                   err ? ": " : "", err ? err : "", runs[k].out, tail);
            free(out);
            bad++;
        }
    }
    char shown[600] = "";
    for (int i = 0; i < nflags; i++)
        snprintf(shown + strlen(shown), sizeof shown - strlen(shown), "%s%s", i ? " " : "", flags[i]);
    int failed = bad;
    if (!bad) {
        Measured mc, md, both;
        measure_rounding(cpu, ncpu, &mc);
        measure_rounding(dev, ndev, &md);
        int larger = 0;
        measured_combine(&both, &mc, &md, &larger);
        printf("[gpu_check] build/ref on %s against the CPU's reference (%s): the grader's checks of build/ref, "
               "each held to %dx the larger of the two devices' measured rounding\n",
               strcmp(device, "cuda") == 0 ? "the GPU" : "the CPU (the machinery alone: --device cpu)", shown,
               TOL_FACTOR);
        printf("  rounding measured (the largest difference from each device's own plain run)\n");
        printf("  %-36s %14s %14s %16s\n", "", "cpu", device, "held to (x10)");
        printf("  %-36s %14d %14d\n", "yardstick runs besides the plain one", mc.nsamples, md.nsamples);
        printf("  %-36s %14.2e %14.2e %16.2e\n", "loss per step", mc.loss, md.loss,
               TOL_FACTOR * fmax(both.loss, both.loss_ulp));
        printf("  %-36s %14.2e %14.2e %16.2e\n", "first gradient, median tensor", mc.grad_rel_median,
               md.grad_rel_median, TOL_FACTOR * fmax(REL_FLOOR, both.grad_rel_median));
        printf("  %-36s %14.2e %14.2e\n", "first gradient, largest tensor", max_of(mc.grad_rel, mc.ntensors),
               max_of(md.grad_rel, md.ntensors));
        printf("  %-36s %14.2e %14.2e %16.2e\n", "final parameters, median bulk", mc.param_bulk_median,
               md.param_bulk_median, TOL_FACTOR * fmax(REL_FLOOR, both.param_bulk_median));
        printf("  %-36s %14s %11d of %d\n", "tensors the device rounds further", "", larger, mc.ntensors);

        RunSpec spec = {"gpu-against-cpu", 1, shown, false, strcmp(device, "cuda") == 0};
        Run run;
        memset(&run, 0, sizeof run);
        run.spec = &spec;
        run.seed = 1337;
        snprintf(run.name, sizeof run.name, "%s against cpu", device);
        run.output = read_text(runs[ncpu].out);
        run.seconds = runs[ncpu].seconds;
        run.dump = dev[0];
        run.ref = cpu[0];
        run.measured = &both;
        failed = grade_ref_run(&run, true);

        // What the CPU's rounding alone would allow the same run
        // (informational: how much of the bound is the GPU's own).
        run.measured = &mc;
        int cpu_only = grade_ref_run(&run, false);
        printf("  held to the CPU's rounding alone, the same run: %s\n",
               cpu_only ? "FAILS" : "passes");
        if (cpu_only) printf("    (%d check(s) fail there: the GPU's own rounding is what they miss)\n", cpu_only);
        run.measured = &both;

        // The negative controls: the comparison must still see a bug. In
        // bf16 the yardstick is 2^16 times coarser (a row a tenth of a step
        // off is within it: README, "How the yardstick works"): there the
        // row moves by a whole step, and a third control overwrites the fp32
        // master with the bf16 weights (check_master_kept must see it).
        static const char *const W = "param/final/block0.mlp.w1";
        const DumpArray *w = dump_find(dev[0], W);
        uint64_t row = w && w->ndim == 2 ? w->shape[1] : 512;
        const bool bf16 = config_is(dev[0], "precision", "bf16");
        const float step = bf16 ? 1e-3f : 1e-4f;
        bool caught_row = false, caught_one = false, caught_master = !bf16;
        if (nudge(dev[0], W, 0, row, step)) {
            caught_row = grade_ref_run(&run, false) > 0;
            nudge(dev[0], W, 0, row, -step);
        }
        if (nudge(dev[0], W, 17, 1, 0.1f)) {
            caught_one = grade_ref_run(&run, false) > 0;
            nudge(dev[0], W, 17, 1, -0.1f);
        }
        if (bf16) {
            float *save = round_matrices(dev[0]);
            caught_master = grade_ref_run(&run, false) > 0;
            restore_matrices(dev[0], save);
        }
        printf("  %-4s  negative control: one row of block0.mlp.w1 (%llu elements) moved by %g, %s AdamW step: %s\n",
               caught_row ? "ok" : "FAIL", (unsigned long long)row, step, bf16 ? "a whole" : "a tenth of an",
               caught_row ? "caught" : "NOT caught (the bound is too loose to see it)");
        printf("  %-4s  negative control: one element of block0.mlp.w1 moved by 0.1, beyond Adam's reach: %s\n",
               caught_one ? "ok" : "FAIL", caught_one ? "caught" : "NOT caught");
        if (bf16)
            printf("  %-4s  negative control: the fp32 master weights overwritten with the bf16 ones: %s\n",
                   caught_master ? "ok" : "FAIL", caught_master ? "caught" : "NOT caught");
        failed += !caught_row + !caught_one + !caught_master;
        free(run.output);
        measured_free(&mc);
        measured_free(&md);
        measured_free(&both);
    }
    for (int k = 0; k < ncpu; k++)
        if (cpu[k]) dump_free(cpu[k]);
    for (int k = 0; k < ndev; k++)
        if (dev[k]) dump_free(dev[k]);
    if (!keep) {
        for (int k = 0; k < ncpu + ndev; k++) {
            unlink(runs[k].dump);
            unlink(runs[k].out);
        }
        rmdir(dir);
    }
    printf("[gpu_check] build/ref on %s against the CPU: %s\n", device,
           failed ? "FAIL" : "the same training, within the rounding both devices measured");
    return failed ? 1 : 0;
}

// ---- main --------------------------------------------------------------------------

// What the CUDA runtime sees, and why not when it sees nothing (a driver
// older than the runtime, no device node): the pre-flight's line.
static int devices(void) {
#ifdef PL_CUDA
    int n = 0, drv = 0, rt = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    printf("[gpu_check] CUDA runtime %d.%d, driver for CUDA %d.%d: ", rt / 1000, rt % 1000 / 10, drv / 1000,
           drv % 1000 / 10);
    if (e != cudaSuccess) {
        printf("no GPU (cudaGetDeviceCount: %s%s)\n", cudaGetErrorString(e),
               drv == 0 ? "; no CUDA driver is loaded here" : "");
        return 77;
    }
    printf("%d GPU(s)\n", n);
    for (int i = 0; i < n; i++) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
        printf("  %d: %s, sm_%d%d, %.1f GiB\n", i, p.name, p.major, p.minor, p.totalGlobalMem / 1073741824.0);
    }
    return n > 0 ? 0 : 77;
#else
    printf("[gpu_check] this build has no CUDA backend (CUDA=0)\n");
    return 77;
#endif
}

static const char USAGE[] =
    "usage: build/gpu_check [--group-limit SECONDS]   every group of ops, each in a process of its own\n"
    "       build/gpu_check --group NAME[,NAME...]|all  those groups in this process (all: but bad_id)\n"
    "       build/gpu_check --list | --devices\n"
    "       build/gpu_check --training [--device cuda|cpu] [--keep DIR] [-- build/ref flags]";

int main(int argc, char **argv) {
    core_set_program("gpu_check");
    if (argc == 4 && strcmp(argv[1], "--bad-id") == 0) return bad_id_child(argv[2], argv[3]);
    if (argc == 1) return run_all_groups(120);
    if (argc == 3 && strcmp(argv[1], "--group-limit") == 0) return run_all_groups(atof(argv[2]));
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < NGROUPS; i++)
            printf("%s%s\n", GROUPS[i].name, GROUPS[i].starts_processes ? "  (starts processes: not in all)" : "");
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--devices") == 0) return devices();
    if (strcmp(argv[1], "--group") == 0 && (argc == 3 || (argc == 4 && strcmp(argv[3], "--no-header") == 0)))
        return run_groups_here(argv[2], argc == 3);
    if (strcmp(argv[1], "--training") == 0) return training_check(argc - 2, argv + 2);
    core_usage_error("%s", USAGE);
}
