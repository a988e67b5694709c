// test_ops.c: every kernel of ops.c against a reference computed another way.
//
// Forwards are compared with naive loops written here in double. Backwards
// are compared with central differences of a scalar loss L = sum(out * R)
// (R fixed and random), taken on those same double loops: in double the
// difference quotient is exact to ~1e-9, so what remains is only the fp32
// rounding of the kernel, and the tolerance can be tight (see FD_TOL). Two
// deliberately wrong gradients must fail the same comparison. Then the
// contract of ops.h: backwards add (+=) and skip NULL outputs; dropout's mask
// depends only on global coordinates; AdamW and SGD match their formulas.
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "mem.h"
#include "ops.h"
#include "rng.h"
#include "testutil.h"

// ---- inputs and comparisons --------------------------------------------------

static const uint64_t SEED = 20240611;

// n values of N(mean, std^2), test stream k: deterministic and distinct per k.
static float *randn(size_t n, uint32_t k, float mean, float std) {
    float *x = malloc(n * sizeof *x);
    rng_fill_normal(x, n, SEED, rng_stream(RNG_TEST, k, 0), 0, mean, std);
    return x;
}

static float *zeros(size_t n) { return calloc(n, sizeof(float)); }
static double *dzeros(size_t n) { return calloc(n, sizeof(double)); }

static double *to_double(const float *x, size_t n) {
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

// Forward results: |got - want| / (1 + |want|). fp32 kernels over O(1)
// inputs are off by a few ulps of the terms they sum; the worst seen is
// 3.5e-6, the sums of 72 products of the larger matmul, the others 3e-7 or
// less. A wrong formula (an eps of 1e-6, a future token let in) is off by
// 0.07 and more.
static const double FWD_TOL = 1e-5;

static double fwd_err(const float *got, const double *want, size_t n) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]) / (1.0 + fabs(want[i]));
        if (!(e <= worst)) worst = e;   // a NaN is the worst of all
    }
    return worst;
}

#define ASSERT_FWD(got, want, n, what)                                                  \
    do {                                                                                \
        double e_ = fwd_err(got, want, n);                                              \
        ck_assert_msg(e_ <= FWD_TOL, "%s: error %.3g above %.1g", what, e_, FWD_TOL);  \
    } while (0)

// ---- finite differences --------------------------------------------------------
//
// The loss is evaluated by a naive forward in double, so the step can be
// small: with h = 1e-5 the truncation error is ~h^2 |L'''| ~ 1e-10 and the
// cancellation error is ~1e-16 |L| / h ~ 1e-10, both far below fp32. What
// remains is the fp32 rounding of the kernel: a few ulps (~3e-7) of the O(1)
// terms it sums. The comparison is
//     |got - want| / max(FD_FLOOR, |got| + |want|)  <=  FD_TOL.
// Where a gradient is large that is a relative error, ~1e-6; where it is
// small by cancellation (a softmax backward subtracts nearly equal numbers)
// the same absolute error is a larger share of it: the worst seen, over six
// OpenBLAS kernels (OPENBLAS_CORETYPE Prescott to SkylakeX), is 1.3e-5, an
// element of attention's dq of 0.014 off by 3.5e-7. FD_TOL = 1e-4 leaves a
// factor of ~8 over that, and stays three orders below what a wrong formula
// gives (a missing 1/sqrt(hs) is off by 0.33, a layernorm dx without its mean
// terms by 1). FD_FLOOR keeps a gradient that is ~0 from being judged
// relatively: there an absolute error of FD_TOL * FD_FLOOR = 1e-6 is allowed.
static const double FD_STEP = 1e-5;
static const double FD_TOL = 1e-4;
static const double FD_FLOOR = 1e-2;

typedef double (*LossFn)(void *ctx);

// want[i] = dL/dx[i] by central differences; x is a double input the loss
// function reads through ctx, perturbed one element at a time and restored.
static void fd_grad(double *want, double *x, size_t n, LossFn loss, void *ctx) {
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + FD_STEP;
        double lp = loss(ctx);
        x[i] = x0 - FD_STEP;
        double lm = loss(ctx);
        x[i] = x0;
        want[i] = (lp - lm) / (2.0 * FD_STEP);
    }
}

// The worst relative mismatch of an analytic gradient against the finite
// differences, over every element (see FD_TOL).
static double fd_mismatch(const float *got, const double *want, size_t n) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]) / fmax(FD_FLOOR, fabs(got[i]) + fabs(want[i]));
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

#define ASSERT_GRAD(got, want, n, what)                                                   \
    do {                                                                                  \
        double e_ = fd_mismatch(got, want, n);                                            \
        ck_assert_msg(e_ <= FD_TOL, "%s: mismatch %.3g with finite differences (bound %.1g)", \
                      what, e_, FD_TOL);                                                  \
    } while (0)

// A second call of a backward, from the first one's result, must give twice
// it: outputs are added to, not overwritten (which would give 1x). Bit for bit
// where each element gets one product (x + x = 2x exactly); where the kernel
// sums over rows into the output (dbias, layernorm dw and db, dwte, dwpe) the
// second sum starts from the first one's value rather than 0 and rounds
// differently, by a few ulps of the partial sums, so there 1e-5 relative
// (absolute below 1) is allowed.
static void assert_doubled(const float *once, const float *twice, size_t n, const char *what,
                           bool summed_over_rows) {
    for (size_t i = 0; i < n; i++) {
        float tol = summed_over_rows ? 1e-5f * fmaxf(1.0f, fabsf(once[i])) : 0.0f;
        ck_assert_msg(fabsf(twice[i] - 2.0f * once[i]) <= tol,
                      "%s[%zu]: twice %.9g, once %.9g: a second call must add the same again",
                      what, i, twice[i], once[i]);
    }
}

static void assert_same(const float *a, const float *b, size_t n, const char *what) {
    ck_assert_msg(memcmp(a, b, n * sizeof(float)) == 0, "%s differs when other outputs are NULL",
                  what);
}

// ---- matrix product ------------------------------------------------------------

static void ref_matmul(double *out, const double *inp, const double *w, const double *bias, int M,
                       int K, int N) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = bias ? bias[n] : 0.0;
            for (int k = 0; k < K; k++) s += inp[m * K + k] * w[k * N + n];
            out[m * N + n] = s;
        }
}

typedef struct {
    double *inp, *w, *bias, *R, *out;   // (M, K), (K, N), (N), (M, N), (M, N)
    int M, K, N;
} MatmulCase;

static double matmul_loss(void *ctx) {
    MatmulCase *c = ctx;
    ref_matmul(c->out, c->inp, c->w, c->bias, c->M, c->K, c->N);
    double L = 0.0;
    for (int i = 0; i < c->M * c->N; i++) L += c->out[i] * c->R[i];
    return L;
}

// Shapes that are neither square nor multiples of a vector width, and one
// (M = 520 rows, the inner dimension of dw's product) long enough for BLAS to
// split its sum into blocks.
START_TEST(matmul_forward_matches_naive) {
    const int shapes[2][3] = {{7, 9, 5}, {520, 72, 40}};
    for (int si = 0; si < 2; si++) {
        int M = shapes[si][0], K = shapes[si][1], N = shapes[si][2];
        float *inp = randn((size_t)M * K, 1, 0, 1), *w = randn((size_t)K * N, 2, 0, 1);
        float *bias = randn(N, 3, 0, 1), *out = zeros((size_t)M * N);
        double *dinp = to_double(inp, (size_t)M * K), *dw = to_double(w, (size_t)K * N);
        double *dbias = to_double(bias, N), *want = dzeros((size_t)M * N);

        ops_matmul_forward(out, inp, w, bias, M, K, N);
        ref_matmul(want, dinp, dw, dbias, M, K, N);
        ASSERT_FWD(out, want, (size_t)M * N, "matmul with bias");

        ops_matmul_forward(out, inp, w, NULL, M, K, N);
        ref_matmul(want, dinp, dw, NULL, M, K, N);
        ASSERT_FWD(out, want, (size_t)M * N, "matmul without bias");
        free(inp), free(w), free(bias), free(out), free(dinp), free(dw), free(dbias), free(want);
    }
}
END_TEST

// bf16 products: inputs rounded to bf16, against the naive product of those
// values in double (the error of fp32 accumulation, as the fp32 products are
// held to), the forward and the backward's three outputs; on the CPU they
// are the fp32 products of the widened values to the bit.
// The partials rounding of a bf16 product (ops.h): the sum over K (for the
// input gradient, over N) in two parts, K / 3 and the rest, each rounded to
// bf16 before they are added, the bias after them. Small integers make
// every fp32 sum exact, so the expected values are exact too: each part
// rounded to bf16 (8 significant bits; the parts reach 4 digits), added.
// The native and the other (alt) roundings give the exact sum; they differ.
static float bf16_round(double x) { return bf16_to_float(bf16_from_float((float)x)); }

START_TEST(matmul_bf16_partials_rounding_rounds_the_parts) {
    const int M = 3, K = 9, N = 6, K1 = K / 3, N1 = N / 3;
    bf16 bi[M * K], bw[K * N], bd[M * N];
    float bias[N];
    for (int i = 0; i < M * K; i++) bi[i] = bf16_from_float((float)(7 + (i * 5) % 13));
    for (int i = 0; i < K * N; i++) bw[i] = bf16_from_float((float)(9 + (i * 7) % 11));
    for (int i = 0; i < M * N; i++) bd[i] = bf16_from_float((float)(5 + (i * 3) % 17));
    for (int n = 0; n < N; n++) bias[n] = (float)(n + 1);
    float out[M * N], gi[M * K];
    int differ = 0;
    ops_set_rounding(OPS_ROUNDING_PARTIALS);
    ops_matmul_forward_bf16(out, bi, bw, bias, M, K, N);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double first = 0, rest = 0;
            for (int k = 0; k < K; k++)
                *(k < K1 ? &first : &rest) += (double)bf16_to_float(bi[m * K + k]) * bf16_to_float(bw[k * N + n]);
            float want = bf16_round(rest) + bf16_round(first) + bias[n];
            ck_assert_msg(out[m * N + n] == want, "out[%d][%d] = %g, parts rounded: %g", m, n, out[m * N + n], want);
            differ += want != (float)(first + rest + bias[n]);
        }
    for (int i = 0; i < M * K; i++) gi[i] = 1.0f;   // the input gradient adds into what is there
    ops_matmul_backward_bf16(gi, NULL, NULL, bd, bi, bw, M, K, N);
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            double first = 0, rest = 0;
            for (int n = 0; n < N; n++)
                *(n < N1 ? &first : &rest) += (double)bf16_to_float(bd[m * N + n]) * bf16_to_float(bw[k * N + n]);
            float want = 1.0f + bf16_round(rest) + bf16_round(first);
            ck_assert_msg(gi[m * K + k] == want, "dinp[%d][%d] = %g, parts rounded: %g", m, k, gi[m * K + k], want);
            differ += want != (float)(1.0 + first + rest);
        }
    // The native and the other rounding (alt) round no part: the exact sums.
    for (int r = 0; r < 2; r++) {
        ops_set_rounding(r ? OPS_ROUNDING_ALT : OPS_ROUNDING_NATIVE);
        ops_matmul_forward_bf16(out, bi, bw, bias, M, K, N);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double sum = bias[n];
                for (int k = 0; k < K; k++) sum += (double)bf16_to_float(bi[m * K + k]) * bf16_to_float(bw[k * N + n]);
                ck_assert_msg(out[m * N + n] == (float)sum, "%s out[%d][%d] = %g, exact %g",
                              ops_rounding_name(ops_rounding()), m, n, out[m * N + n], sum);
            }
    }
    ck_assert_msg(differ > M * N, "only %d of the sums are changed by rounding their parts: a weak test", differ);
    ops_set_rounding(ops_rounding_default());
}
END_TEST

START_TEST(matmul_bf16_matches_naive) {
    const int M = 33, K = 70, N = 19;
    size_t nI = (size_t)M * K, nW = (size_t)K * N, nO = (size_t)M * N;
    float *inp = randn(nI, 1, 0, 1), *w = randn(nW, 2, 0, 1), *bias = randn(N, 3, 0, 1), *dout = randn(nO, 4, 0, 1);
    bf16 *bi = malloc(nI * sizeof(bf16)), *bw = malloc(nW * sizeof(bf16)), *bd = malloc(nO * sizeof(bf16));
    ops_to_bf16(bi, inp, nI), ops_to_bf16(bw, w, nW), ops_to_bf16(bd, dout, nO);
    ops_from_bf16(inp, bi, nI), ops_from_bf16(w, bw, nW), ops_from_bf16(dout, bd, nO);   // the rounded values
    double *di = to_double(inp, nI), *dw = to_double(w, nW), *dd = to_double(dout, nO), *db = to_double(bias, N);
    ck_assert_msg(fabs(di[0] - (double)bf16_to_float(bf16_from_float((float)di[0]))) == 0, "not rounded");

    float *out = zeros(nO), *out32 = zeros(nO);
    double *want = dzeros(nO);
    ops_matmul_forward_bf16(out, bi, bw, bias, M, K, N);
    ref_matmul(want, di, dw, db, M, K, N);
    ASSERT_FWD(out, want, nO, "bf16 matmul forward");
    ops_matmul_forward(out32, inp, w, bias, M, K, N);
    ck_assert_msg(memcmp(out, out32, nO * sizeof(float)) == 0, "not sgemm's product of the widened inputs");

    float *gi = zeros(nI), *gw = zeros(nW), *gb = zeros(N);
    ops_matmul_backward_bf16(gi, gw, gb, bd, bi, bw, M, K, N);
    double *wi = dzeros(nI), *ww = dzeros(nW), *wb = dzeros(N);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double d = dd[(size_t)m * N + n];
            wb[n] += d;
            for (int k = 0; k < K; k++) {
                wi[(size_t)m * K + k] += d * dw[(size_t)k * N + n];
                ww[(size_t)k * N + n] += di[(size_t)m * K + k] * d;
            }
        }
    ASSERT_FWD(gi, wi, nI, "bf16 matmul dinp");
    ASSERT_FWD(gw, ww, nW, "bf16 matmul dw");
    ASSERT_FWD(gb, wb, (size_t)N, "bf16 matmul dbias");
    free(inp), free(w), free(bias), free(dout), free(bi), free(bw), free(bd), free(di), free(dw), free(dd), free(db);
    free(out), free(out32), free(want), free(gi), free(gw), free(gb), free(wi), free(ww), free(wb);
}
END_TEST

START_TEST(matmul_backward_matches_finite_differences) {
    const int M = 7, K = 9, N = 5;
    float *inp = randn(M * K, 1, 0, 1), *w = randn(K * N, 2, 0, 1), *bias = randn(N, 3, 0, 1);
    float *R = randn(M * N, 4, 0, 1);
    MatmulCase c = {to_double(inp, M * K), to_double(w, K * N), to_double(bias, N),
                    to_double(R, M * N), dzeros(M * N), M, K, N};

    float *ginp = zeros(M * K), *gw = zeros(K * N), *gb = zeros(N);
    ops_matmul_backward(ginp, gw, gb, R, inp, w, M, K, N);   // dout = dL/dout = R

    double *want = dzeros(M * K);
    fd_grad(want, c.inp, M * K, matmul_loss, &c);
    ASSERT_GRAD(ginp, want, M * K, "matmul dinp");
    fd_grad(want, c.w, K * N, matmul_loss, &c);
    ASSERT_GRAD(gw, want, K * N, "matmul dw");
    fd_grad(want, c.bias, N, matmul_loss, &c);
    ASSERT_GRAD(gb, want, N, "matmul dbias");

    // += : a second call adds the same again.
    float *ginp2 = zeros(M * K), *gw2 = zeros(K * N), *gb2 = zeros(N);
    ops_matmul_backward(ginp2, gw2, gb2, R, inp, w, M, K, N);
    ops_matmul_backward(ginp2, gw2, gb2, R, inp, w, M, K, N);
    assert_doubled(ginp, ginp2, M * K, "matmul dinp", false);
    assert_doubled(gw, gw2, K * N, "matmul dw", false);
    assert_doubled(gb, gb2, N, "matmul dbias", true);

    // NULL outputs are skipped; the others come out as before.
    float *one = zeros(K * N);
    ops_matmul_backward(NULL, NULL, NULL, R, inp, w, M, K, N);
    ops_matmul_backward(NULL, one, NULL, R, inp, w, M, K, N);
    assert_same(one, gw, K * N, "matmul dw");
    free(inp), free(w), free(bias), free(R), free(ginp), free(gw), free(gb), free(ginp2);
    free(gw2), free(gb2), free(one), free(want);
    free(c.inp), free(c.w), free(c.bias), free(c.R), free(c.out);
}
END_TEST

// ---- layer norm ----------------------------------------------------------------

static void ref_layernorm(double *out, double *mean, double *rstd, const double *x,
                          const double *w, const double *b, int M, int C) {
    for (int m = 0; m < M; m++) {
        const double *xr = x + m * C;
        double mu = 0.0, var = 0.0;
        for (int c = 0; c < C; c++) mu += xr[c];
        mu /= C;
        for (int c = 0; c < C; c++) var += (xr[c] - mu) * (xr[c] - mu);
        var /= C;
        double rs = 1.0 / sqrt(var + 1e-5);
        for (int c = 0; c < C; c++) out[m * C + c] = (xr[c] - mu) * rs * w[c] + b[c];
        if (mean) mean[m] = mu;
        if (rstd) rstd[m] = rs;
    }
}

typedef struct {
    double *x, *w, *b, *R, *out;   // (M, C), (C), (C), (M, C), (M, C)
    int M, C;
} LayernormCase;

static double layernorm_loss(void *ctx) {
    LayernormCase *c = ctx;
    ref_layernorm(c->out, NULL, NULL, c->x, c->w, c->b, c->M, c->C);
    double L = 0.0;
    for (int i = 0; i < c->M * c->C; i++) L += c->out[i] * c->R[i];
    return L;
}

// Rows with a mean far from 0 and a spread far from 1, so that both the
// centring and the scaling matter, and one row of tiny spread for eps.
START_TEST(layernorm_forward_matches_naive) {
    const int M = 6, C = 40;
    float *x = randn(M * C, 10, 3.0f, 2.5f), *w = randn(C, 11, 1, 0.5f), *b = randn(C, 12, 0, 1);
    // Row 0 has variance ~1e-4, where eps = 1e-5 moves rstd by 5%: a wrong
    // eps cannot pass.
    for (int c = 0; c < C; c++) x[c] = 0.01f * (x[c] - 3.0f) / 2.5f;
    float *out = zeros(M * C), *mean = zeros(M), *rstd = zeros(M);
    double *want = dzeros(M * C), *wmean = dzeros(M), *wrstd = dzeros(M);
    double *dx = to_double(x, M * C), *dw = to_double(w, C), *db = to_double(b, C);
    ops_layernorm_forward(out, mean, rstd, x, w, b, M, C);
    ref_layernorm(want, wmean, wrstd, dx, dw, db, M, C);
    ASSERT_FWD(out, want, M * C, "layernorm out");
    ASSERT_FWD(mean, wmean, M, "layernorm mean");
    ASSERT_FWD(rstd, wrstd, M, "layernorm rstd");
    free(x), free(w), free(b), free(out), free(mean), free(rstd), free(want), free(wmean);
    free(wrstd), free(dx), free(dw), free(db);
}
END_TEST

// The negative control's wrong variant: dx = rstd w dout, which forgets that
// the mean and the variance depend on every x of the row.
static void wrong_layernorm_dx(float *dx, const float *dout, const float *w, const float *rstd,
                               int M, int C) {
    for (int m = 0; m < M; m++)
        for (int c = 0; c < C; c++) dx[m * C + c] += rstd[m] * w[c] * dout[m * C + c];
}

START_TEST(layernorm_backward_matches_finite_differences) {
    const int M = 5, C = 8;
    float *x = randn(M * C, 10, 0.5f, 1.5f), *w = randn(C, 11, 1, 0.5f), *b = randn(C, 12, 0, 1);
    float *R = randn(M * C, 13, 0, 1);
    float *out = zeros(M * C), *mean = zeros(M), *rstd = zeros(M);
    ops_layernorm_forward(out, mean, rstd, x, w, b, M, C);
    LayernormCase c = {to_double(x, M * C), to_double(w, C), to_double(b, C), to_double(R, M * C),
                       dzeros(M * C), M, C};

    float *gx = zeros(M * C), *gw = zeros(C), *gb = zeros(C);
    ops_layernorm_backward(gx, gw, gb, R, x, w, mean, rstd, M, C);
    double *want = dzeros(M * C);
    fd_grad(want, c.w, C, layernorm_loss, &c);
    ASSERT_GRAD(gw, want, C, "layernorm dw");
    fd_grad(want, c.b, C, layernorm_loss, &c);
    ASSERT_GRAD(gb, want, C, "layernorm db");
    fd_grad(want, c.x, M * C, layernorm_loss, &c);
    ASSERT_GRAD(gx, want, M * C, "layernorm dx");

    // Negative control: the same comparison rejects the gradient without the
    // mean terms.
    float *bad = zeros(M * C);
    wrong_layernorm_dx(bad, R, w, rstd, M, C);
    double e_bad = fd_mismatch(bad, want, M * C);
    ck_assert_msg(e_bad > FD_TOL, "a wrong layernorm dx passed (mismatch %.3g)", e_bad);

    float *gx2 = zeros(M * C), *gw2 = zeros(C), *gb2 = zeros(C);
    ops_layernorm_backward(gx2, gw2, gb2, R, x, w, mean, rstd, M, C);
    ops_layernorm_backward(gx2, gw2, gb2, R, x, w, mean, rstd, M, C);
    assert_doubled(gx, gx2, M * C, "layernorm dx", false);
    assert_doubled(gw, gw2, C, "layernorm dw", true);
    assert_doubled(gb, gb2, C, "layernorm db", true);

    float *only_dx = zeros(M * C), *only_db = zeros(C);
    ops_layernorm_backward(NULL, NULL, NULL, R, x, w, mean, rstd, M, C);
    ops_layernorm_backward(only_dx, NULL, NULL, R, x, w, mean, rstd, M, C);
    ops_layernorm_backward(NULL, NULL, only_db, R, x, w, mean, rstd, M, C);
    assert_same(only_dx, gx, M * C, "layernorm dx");
    assert_same(only_db, gb, C, "layernorm db");
    free(x), free(w), free(b), free(R), free(out), free(mean), free(rstd), free(gx), free(gw);
    free(gb), free(want), free(bad), free(gx2), free(gw2), free(gb2), free(only_dx), free(only_db);
    free(c.x), free(c.w), free(c.b), free(c.R), free(c.out);
}
END_TEST

// ---- GELU ----------------------------------------------------------------------

static double ref_gelu(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

typedef struct {
    double *x, *R;
    int n;
} GeluCase;

static double gelu_loss(void *ctx) {
    GeluCase *c = ctx;
    double L = 0.0;
    for (int i = 0; i < c->n; i++) L += ref_gelu(c->x[i]) * c->R[i];
    return L;
}

// Inputs spread over [-9, 9] (std 3), where GELU goes from 0 through its
// bend to the identity, plus the far tails where tanh saturates.
// bf16 against a rounding computed another way: the nearest multiple of the
// value's bf16 spacing (8 significant bits; 2^-133 below 2^-126), by frexp
// and nearbyint in double (ties to even, the default rounding mode), and
// infinity past the largest bf16.
static float ref_bf16(float f) {
    if (isnan(f) || isinf(f)) return f;
    int e;
    frexp(f, &e);   // f = m 2^e, 0.5 <= |m| < 1
    int q = e - 8 < -133 ? -133 : e - 8;
    double v = ldexp(nearbyint(ldexp((double)f, -q)), q);
    const double largest = ldexp(255.0, 120);   // 0x7f7f: (2 - 2^-7) 2^127
    if (fabs(v) > largest) v = copysign(INFINITY, f);
    return (float)v;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// Every bf16 value's neighbours at the edges of its rounding (its own bits,
// one below and above, and just below, at and just above the midpoint to the
// next), and random bit patterns; a NaN stays a quiet NaN of its sign; every
// bf16 goes to fp32 and back unchanged; the ops give the same bits.
START_TEST(bf16_rounds_to_nearest_even) {
    long checked = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        uint32_t u = b << 16;
        const uint32_t offsets[] = {0, 1, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xffff, 0xfffffffu};
        for (size_t k = 0; k < sizeof offsets / sizeof *offsets; k++) {
            uint32_t v = k == 7 ? u - 1 : u + offsets[k];
            float f = float_of(v), got = bf16_to_float(bf16_from_float(f));
            if (isnan(f)) {
                ck_assert_msg(isnan(got) && (bits_of(got) >> 31) == (v >> 31) && (bits_of(got) & 0x00400000u),
                              "NaN %08x became %08x", v, bits_of(got));
                continue;
            }
            float want = ref_bf16(f);
            ck_assert_msg(bits_of(got) == bits_of(want), "%08x (%.9g): bf16 %08x, the nearest even %08x", v, f,
                          bits_of(got), bits_of(want));
            checked++;
        }
        if ((u & 0x7fffffffu) <= 0x7f800000u)
            ck_assert_msg(bf16_from_float(float_of(u)) == b, "bf16 %04x does not come back from fp32", b);
    }
    uint64_t state = 88172645463325252ull;
    for (int i = 0; i < 2000000; i++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        float f = float_of((uint32_t)state);
        if (isnan(f)) continue;
        ck_assert_msg(bits_of(bf16_to_float(bf16_from_float(f))) == bits_of(ref_bf16(f)), "%08x", (uint32_t)state);
        checked++;
    }
    ck_assert(checked > 2000000);
    // Ties go to the even one: 1 + 2^-8 (halfway between 1 and 1 + 2^-7) to
    // 1; 1 + 3 2^-8 to 1 + 2^-6.
    ck_assert(bf16_to_float(bf16_from_float(1.0f + 0x1p-8f)) == 1.0f);
    ck_assert(bf16_to_float(bf16_from_float(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
    ck_assert(isinf(bf16_to_float(bf16_from_float(FLT_MAX))));
    // The ops, through tracked buffers: the same bits as the scalar rules.
    enum { N = 4099 };
    float *x = mem_alloc_floats(N, MEM_OTHER, "x"), *back = mem_alloc_floats(N, MEM_OTHER, "back");
    size_t before = mem_live(MEM_OTHER);
    bf16 *h = mem_alloc_bf16(N, MEM_OTHER, "h");
    ck_assert_uint_eq(mem_live(MEM_OTHER) - before, (size_t)N * 2);   // 2 bytes an element, as tracked
    float xs[N];
    for (int i = 0; i < N; i++) xs[i] = (float)(i - N / 2) * 0.37f + (i % 7) * 1e-3f;
    mem_from_host(x, xs, sizeof xs);
    ops_to_bf16(h, x, N);
    ops_from_bf16(back, h, N);
    float got[N];
    mem_to_host(got, back, sizeof got);
    for (int i = 0; i < N; i++)
        ck_assert_msg(bits_of(got[i]) == bits_of(ref_bf16(xs[i])), "element %d: %.9g to %.9g", i, xs[i], got[i]);
    // ops_accumulate_bf16: y = bf16(y + x), summed in fp32 and rounded once
    // (at 1 the bf16 spacing is 2^-7: 1 + 2^-8 is a tie, to the even 1;
    // 1 + 1.5 2^-8 is past it, to 1 + 2^-7).
    float ys[N], adds[N];
    for (int i = 0; i < N; i++) ys[i] = bf16_to_float(bf16_from_float(xs[(i * 7) % N])), adds[i] = xs[i] * 1e-2f;
    ys[0] = 1.0f, adds[0] = 0x1p-8f, ys[1] = 1.0f, adds[1] = 0x1.8p-8f;
    mem_from_host(back, ys, sizeof ys);
    ops_to_bf16(h, back, N);
    mem_from_host(x, adds, sizeof adds);
    ops_accumulate_bf16(h, x, N);
    ops_from_bf16(back, h, N);
    mem_to_host(got, back, sizeof got);
    for (int i = 0; i < N; i++)
        ck_assert_msg(bits_of(got[i]) == bits_of(ref_bf16(ys[i] + adds[i])), "accumulate element %d: %.9g + %.9g to %.9g",
                      i, ys[i], adds[i], got[i]);
    ck_assert(got[0] == 1.0f && got[1] == 1.0f + 0x1p-7f);
    mem_free(x), mem_free(back), mem_free(h);
}
END_TEST

START_TEST(gelu_matches_naive_and_finite_differences) {
    const int n = 200;
    float *x = randn(n, 20, 0, 3), *R = randn(n, 21, 0, 1), *out = zeros(n), *gx = zeros(n);
    x[0] = -30.0f, x[1] = 30.0f, x[2] = 0.0f;
    double *dx = to_double(x, n), *want = dzeros(n);
    for (int i = 0; i < n; i++) want[i] = ref_gelu(dx[i]);
    ops_gelu_forward(out, x, n);
    ASSERT_FWD(out, want, n, "gelu");

    ops_gelu_backward(gx, R, x, n);
    GeluCase c = {dx, to_double(R, n), n};
    fd_grad(want, dx, n, gelu_loss, &c);
    ASSERT_GRAD(gx, want, n, "gelu dx");

    float *gx2 = zeros(n);
    ops_gelu_backward(gx2, R, x, n);
    ops_gelu_backward(gx2, R, x, n);
    assert_doubled(gx, gx2, n, "gelu dx", false);
    free(x), free(R), free(out), free(gx), free(gx2), free(dx), free(want), free(c.R);
}
END_TEST

// ---- attention -----------------------------------------------------------------

static void ref_attention(double *out, double *att, const double *q, const double *k,
                          const double *v, int B, int T, int C, int NH) {
    int hs = C / NH;
    double scale = 1.0 / sqrt(hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                double *a = att + (((size_t)b * NH + h) * T + t) * T;   // (T)
                const double *qt = q + ((size_t)b * T + t) * C + h * hs;
                double mx = -INFINITY;
                for (int s = 0; s <= t; s++) {
                    const double *ks = k + ((size_t)b * T + s) * C + h * hs;
                    double dot = 0.0;
                    for (int d = 0; d < hs; d++) dot += qt[d] * ks[d];
                    a[s] = dot * scale;
                    mx = fmax(mx, a[s]);
                }
                double sum = 0.0;
                for (int s = 0; s <= t; s++) sum += (a[s] = exp(a[s] - mx));
                for (int s = 0; s <= t; s++) a[s] /= sum;
                for (int s = t + 1; s < T; s++) a[s] = 0.0;
                for (int d = 0; d < hs; d++) {
                    double o = 0.0;
                    for (int s = 0; s <= t; s++) o += a[s] * v[((size_t)b * T + s) * C + h * hs + d];
                    out[((size_t)b * T + t) * C + h * hs + d] = o;
                }
            }
}

typedef struct {
    double *q, *k, *v, *R, *out, *att;   // (B, T, C) x 5, (B, NH, T, T)
    int B, T, C, NH;
} AttentionCase;

static double attention_loss(void *ctx) {
    AttentionCase *c = ctx;
    ref_attention(c->out, c->att, c->q, c->k, c->v, c->B, c->T, c->C, c->NH);
    double L = 0.0;
    for (int i = 0; i < c->B * c->T * c->C; i++) L += c->out[i] * c->R[i];
    return L;
}

// The model's own head size (hs 32, T 64) and a small odd one.
START_TEST(attention_forward_matches_naive) {
    // T = 70: blocks of rows with a short last one, by either way of ops.c
    // (hs = 4 by sgemm's blocks of 32 rows, hs = 8 by the kernels' of 6, on AVX2).
    const int shapes[3][4] = {{2, 5, 8, 2}, {1, 64, 128, 4}, {1, 70, 16, 2}};   // B, T, C, NH
    for (int si = 0; si < 3; si++) {
        int B = shapes[si][0], T = shapes[si][1], C = shapes[si][2], NH = shapes[si][3];
        size_t n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
        float *q = randn(n, 30, 0, 1), *k = randn(n, 31, 0, 1), *v = randn(n, 32, 0, 1);
        float *out = zeros(n), *att = zeros(na);
        double *dq = to_double(q, n), *dk = to_double(k, n), *dv = to_double(v, n);
        double *want = dzeros(n), *watt = dzeros(na);
        ops_attention_forward(out, att, q, k, v, B, T, C, NH);
        ref_attention(want, watt, dq, dk, dv, B, T, C, NH);
        ASSERT_FWD(out, want, n, "attention out");
        ASSERT_FWD(att, watt, na, "attention probabilities");
        // The future is excluded exactly, not merely made small.
        size_t above = 0;
        for (size_t r = 0; r < (size_t)B * NH * T; r++)
            for (int s = (int)(r % T) + 1; s < T; s++) above += att[r * T + s] != 0.0f;
        ck_assert_msg(above == 0, "%zu probabilities above the diagonal are not 0", above);
        free(q), free(k), free(v), free(out), free(att), free(dq), free(dk), free(dv);
        free(want), free(watt);
    }
}
END_TEST

// One shape of attention's backward against finite differences of the
// double loss.
static void check_attention_backward(int B, int T, int C, int NH) {
    const size_t n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *q = randn(n, 40, 0, 1), *k = randn(n, 41, 0, 1), *v = randn(n, 42, 0, 1);
    float *R = randn(n, 43, 0, 1), *out = zeros(n), *att = zeros(na), *scratch = zeros(na);
    ops_attention_forward(out, att, q, k, v, B, T, C, NH);
    AttentionCase c = {to_double(q, n), to_double(k, n), to_double(v, n), to_double(R, n),
                       dzeros(n), dzeros(na), B, T, C, NH};
    float *gq = zeros(n), *gk = zeros(n), *gv = zeros(n);
    ops_attention_backward(gq, gk, gv, scratch, R, att, q, k, v, B, T, C, NH);
    double *wq = dzeros(n), *wk = dzeros(n), *wv = dzeros(n);
    fd_grad(wq, c.q, n, attention_loss, &c);
    fd_grad(wk, c.k, n, attention_loss, &c);
    fd_grad(wv, c.v, n, attention_loss, &c);
    ASSERT_GRAD(gq, wq, n, "attention dq");
    ASSERT_GRAD(gk, wk, n, "attention dk");
    ASSERT_GRAD(gv, wv, n, "attention dv");
    // Negative control: without the 1/sqrt(hs) of the scores, dq and dk are
    // sqrt(hs) times too large, and the comparison must say so (with T = 1
    // they are 0: one position's softmax is 1 whatever its score).
    float *bad_q = malloc(n * sizeof(float)), *bad_k = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) bad_q[i] = gq[i] * sqrtf(C / NH), bad_k[i] = gk[i] * sqrtf(C / NH);
    double e_q = fd_mismatch(bad_q, wq, n), e_k = fd_mismatch(bad_k, wk, n);
    ck_assert_msg(T == 1 || (e_q > FD_TOL && e_k > FD_TOL),
                  "unscaled dq, dk passed (mismatch %.3g, %.3g)", e_q, e_k);
    // The contract of ops.h at this shape too: a second call adds the same
    // again, and a gradient given as NULL leaves the others as they were
    // (all three NULL: nothing to do, and nothing fails).
    float *gq2 = zeros(n), *gk2 = zeros(n), *gv2 = zeros(n), *only_k = zeros(n), *only_v = zeros(n);
    ops_attention_backward(gq2, gk2, gv2, scratch, R, att, q, k, v, B, T, C, NH);
    ops_attention_backward(gq2, gk2, gv2, scratch, R, att, q, k, v, B, T, C, NH);
    assert_doubled(gq, gq2, n, "attention dq", false);
    assert_doubled(gk, gk2, n, "attention dk", false);
    assert_doubled(gv, gv2, n, "attention dv", false);
    ops_attention_backward(NULL, NULL, NULL, scratch, R, att, q, k, v, B, T, C, NH);
    ops_attention_backward(NULL, only_k, NULL, scratch, R, att, q, k, v, B, T, C, NH);
    ops_attention_backward(NULL, NULL, only_v, scratch, R, att, q, k, v, B, T, C, NH);
    assert_same(only_k, gk, n, "attention dk");
    assert_same(only_v, gv, n, "attention dv");
    free(q), free(k), free(v), free(R), free(out), free(att), free(scratch);
    free(c.q), free(c.k), free(c.v), free(c.R), free(c.out), free(c.att);
    free(gq), free(gk), free(gv), free(wq), free(wk), free(wv);
    free(gq2), free(gk2), free(gv2), free(only_k), free(only_v), free(bad_q), free(bad_k);
}

// T = 70 over sgemm's blocks of 32 rows (ATT_ROWS in ops.c; hs = 4 is not a
// whole AVX2 vector): every block's products, the short last one's too.
START_TEST(attention_backward_by_blocks_matches_finite_differences) {
    check_attention_backward(1, 70, 8, 2);
}
END_TEST

// ops.c computes a head by its own causal kernels when hs is a multiple of
// the target's vector width (8 floats with AVX2, 4 with SSE, 16 with
// AVX-512) and T is at most ATT_TMAX (256), and by sgemm otherwise. The
// shapes below take the kernels through their edges on AVX2: T of one row,
// T under one vector, T that neither the blocks of 6 rows nor the vectors
// divide (7, 9, 33, 70), T = 256 at the limit, hs from one vector (8) to
// eight (64). hs = 6 (no target's width divides it) and T = 257 take sgemm.
static const int ATT_KERNEL_SHAPES[][4] = {   // B, T, C, NH
    {1, 1, 32, 1},  {2, 7, 16, 2}, {1, 9, 64, 1},   {1, 33, 32, 2},  {1, 33, 128, 2},
    {1, 70, 64, 2}, {1, 13, 8, 1}, {1, 256, 16, 1}, {1, 257, 16, 1}, {1, 7, 12, 2},
};

START_TEST(attention_kernel_shapes_match_naive) {
    for (size_t si = 0; si < sizeof ATT_KERNEL_SHAPES / sizeof ATT_KERNEL_SHAPES[0]; si++) {
        const int *sh = ATT_KERNEL_SHAPES[si];
        int B = sh[0], T = sh[1], C = sh[2], NH = sh[3];
        size_t n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
        float *q = randn(n, 50, 0, 1), *k = randn(n, 51, 0, 1), *v = randn(n, 52, 0, 1);
        // att starts as NaN: every element must be written, the future with 0.
        float *out = zeros(n), *att = malloc(na * sizeof(float));
        for (size_t i = 0; i < na; i++) att[i] = NAN;
        double *dq = to_double(q, n), *dk = to_double(k, n), *dv = to_double(v, n);
        double *want = dzeros(n), *watt = dzeros(na);
        ops_attention_forward(out, att, q, k, v, B, T, C, NH);
        ref_attention(want, watt, dq, dk, dv, B, T, C, NH);
        char what[96];
        snprintf(what, sizeof what, "attention out, B %d T %d C %d NH %d", B, T, C, NH);
        ASSERT_FWD(out, want, n, what);
        snprintf(what, sizeof what, "attention probabilities, B %d T %d C %d NH %d", B, T, C, NH);
        ASSERT_FWD(att, watt, na, what);
        size_t above = 0;
        for (size_t r = 0; r < (size_t)B * NH * T; r++)
            for (int s = (int)(r % T) + 1; s < T; s++) above += att[r * T + s] != 0.0f;
        ck_assert_msg(above == 0, "T %d: %zu probabilities above the diagonal are not 0", T, above);
        free(q), free(k), free(v), free(out), free(att), free(dq), free(dk), free(dv);
        free(want), free(watt);
    }
}
END_TEST

// The backward at the kernels' edges (see ATT_KERNEL_SHAPES), and at hs = 6
// by sgemm, against finite differences; sizes kept small for the double loops.
START_TEST(attention_kernel_backward_matches_finite_differences) {
    const int shapes[][4] = {{1, 1, 32, 1}, {2, 7, 16, 2}, {1, 9, 64, 1}, {1, 33, 32, 2},
                             {1, 33, 32, 1}, {1, 70, 8, 1}, {1, 7, 12, 2}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        check_attention_backward(shapes[si][0], shapes[si][1], shapes[si][2], shapes[si][3]);
}
END_TEST

// True where any of the rows [t0, t1) of channels [c0, c1) of x (B = 1, T,
// C) is NaN (every = false) or where all of them are (every = true).
static bool nan_in(const float *x, int C, int t0, int t1, int c0, int c1, bool every) {
    for (int t = t0; t < t1; t++)
        for (int c = c0; c < c1; c++)
            if (isnan(x[(size_t)t * C + c]) != every) return !every;
    return every;
}

// A NaN in q, k or v reaches what it should and only that: a NaN key or
// value at position s0 reaches the output rows t >= s0 of its head (the
// scores' maximum and the future's lanes must not swallow it or spread it
// to earlier rows), a NaN query its own row, and each then reaches dq; the
// other head is untouched. By the kernels (hs = 16, T = 33), at the first, a
// middle and the last position.
START_TEST(attention_propagates_nan) {
    const int T = 33, NH = 2, hs = 16, C = NH * hs, h = 1, d = 3, s0s[3] = {0, 13, T - 1};
    const int c0 = h * hs, c1 = c0 + hs;   // head h's channels
    const size_t n = (size_t)T * C, na = (size_t)NH * T * T;
    for (int which = 0; which < 3; which++)   // q, k, v
        for (int i = 0; i < 3; i++) {
            const int s0 = s0s[i];
            float *x[3] = {randn(n, 60, 0, 1), randn(n, 61, 0, 1), randn(n, 62, 0, 1)};
            float *R = randn(n, 63, 0, 1), *out = zeros(n), *att = zeros(na), *scratch = zeros(na);
            float *g[3] = {zeros(n), zeros(n), zeros(n)};
            x[which][(size_t)s0 * C + c0 + d] = NAN;
            ops_attention_forward(out, att, x[0], x[1], x[2], 1, T, C, NH);
            ops_attention_backward(g[0], g[1], g[2], scratch, R, att, x[0], x[1], x[2], 1, T, C,
                                   NH);
            const char *name = which == 0 ? "q" : which == 1 ? "k" : "v";
            bool reached, clean = true;
            if (which == 0) {   // the query's own row, every channel of the head
                reached = nan_in(out, C, s0, s0 + 1, c0, c1, true);
                clean = !nan_in(out, C, 0, s0, c0, c1, false) &&
                        !nan_in(out, C, s0 + 1, T, c0, c1, false);
            } else if (which == 1) {   // every later row, every channel
                reached = nan_in(out, C, s0, T, c0, c1, true);
                clean = !nan_in(out, C, 0, s0, c0, c1, false);
            } else {   // every later row, channel d (0 times a NaN is NaN: earlier rows unchecked)
                reached = nan_in(out, C, s0, T, c0 + d, c0 + d + 1, true);
            }
            ck_assert_msg(reached, "a NaN in %s at %d does not reach the output", name, s0);
            ck_assert_msg(clean, "a NaN in %s at %d reaches rows it must not", name, s0);
            ck_assert_msg(!nan_in(out, C, 0, T, 0, c0, false),
                          "a NaN in head %d of %s reaches head 0", h, name);
            ck_assert_msg(nan_in(g[0], C, 0, T, c0, c1, false),
                          "a NaN in %s at %d does not reach dq", name, s0);
            for (int j = 0; j < 3; j++) free(x[j]), free(g[j]);
            free(R), free(out), free(att), free(scratch);
        }
}
END_TEST

START_TEST(attention_backward_matches_finite_differences) {
    check_attention_backward(2, 5, 8, 2);
}
END_TEST

// ---- embeddings ----------------------------------------------------------------

// Token 3 appears three times and token 7 twice, so their rows of dwte must
// collect several gradients; positions start at pos0 = 2 of maxT = 9.
enum { EMB_B = 2, EMB_T = 5, EMB_C = 8, EMB_V = 11, EMB_MAXT = 9, EMB_POS0 = 2 };
static const int EMB_TOKENS[EMB_B * EMB_T] = {3, 7, 3, 0, 10, 7, 3, 1, 5, 9};

typedef struct {
    double *wte, *wpe, *R;   // (V, C), (maxT, C), (B, T, C)
} EmbeddingCase;

static double embedding_loss(void *ctx) {
    EmbeddingCase *c = ctx;
    double L = 0.0;
    for (int bt = 0; bt < EMB_B * EMB_T; bt++)
        for (int ch = 0; ch < EMB_C; ch++) {
            double o = c->wte[EMB_TOKENS[bt] * EMB_C + ch] +
                       c->wpe[(EMB_POS0 + bt % EMB_T) * EMB_C + ch];
            L += o * c->R[bt * EMB_C + ch];
        }
    return L;
}

START_TEST(embedding_matches_naive_and_finite_differences) {
    const int n = EMB_B * EMB_T * EMB_C;
    float *wte = randn(EMB_V * EMB_C, 40, 0, 1), *wpe = randn(EMB_MAXT * EMB_C, 41, 0, 1);
    float *R = randn(n, 42, 0, 1), *out = zeros(n);
    double *want = dzeros(n);
    ops_embedding_forward(out, EMB_TOKENS, wte, wpe, EMB_B, EMB_T, EMB_C, EMB_POS0);
    for (int bt = 0; bt < EMB_B * EMB_T; bt++)
        for (int ch = 0; ch < EMB_C; ch++)
            want[bt * EMB_C + ch] = (double)wte[EMB_TOKENS[bt] * EMB_C + ch] +
                                    wpe[(EMB_POS0 + bt % EMB_T) * EMB_C + ch];
    ASSERT_FWD(out, want, n, "embedding");

    float *gte = zeros(EMB_V * EMB_C), *gpe = zeros(EMB_MAXT * EMB_C);
    ops_embedding_backward(gte, gpe, R, EMB_TOKENS, EMB_B, EMB_T, EMB_C, EMB_POS0);
    EmbeddingCase c = {to_double(wte, EMB_V * EMB_C), to_double(wpe, EMB_MAXT * EMB_C),
                       to_double(R, n)};
    double *wg = dzeros(EMB_MAXT * EMB_C > EMB_V * EMB_C ? EMB_MAXT * EMB_C : EMB_V * EMB_C);
    fd_grad(wg, c.wte, EMB_V * EMB_C, embedding_loss, &c);
    ASSERT_GRAD(gte, wg, EMB_V * EMB_C, "embedding dwte");
    fd_grad(wg, c.wpe, EMB_MAXT * EMB_C, embedding_loss, &c);
    ASSERT_GRAD(gpe, wg, EMB_MAXT * EMB_C, "embedding dwpe");

    float *gte2 = zeros(EMB_V * EMB_C), *gpe2 = zeros(EMB_MAXT * EMB_C);
    ops_embedding_backward(gte2, gpe2, R, EMB_TOKENS, EMB_B, EMB_T, EMB_C, EMB_POS0);
    ops_embedding_backward(gte2, gpe2, R, EMB_TOKENS, EMB_B, EMB_T, EMB_C, EMB_POS0);
    assert_doubled(gte, gte2, EMB_V * EMB_C, "embedding dwte", true);
    assert_doubled(gpe, gpe2, EMB_MAXT * EMB_C, "embedding dwpe", true);

    float *only_pe = zeros(EMB_MAXT * EMB_C);
    ops_embedding_backward(NULL, NULL, R, EMB_TOKENS, EMB_B, EMB_T, EMB_C, EMB_POS0);
    ops_embedding_backward(NULL, only_pe, R, EMB_TOKENS, EMB_B, EMB_T, EMB_C, EMB_POS0);
    assert_same(only_pe, gpe, EMB_MAXT * EMB_C, "embedding dwpe");
    free(wte), free(wpe), free(R), free(out), free(want), free(gte), free(gpe), free(wg);
    free(gte2), free(gpe2), free(only_pe), free(c.wte), free(c.wpe), free(c.R);
}
END_TEST

// ---- cross-entropy -------------------------------------------------------------

static void ref_crossentropy(double *losses, double *probs, const double *logits,
                             const int *targets, int M, int V) {
    for (int m = 0; m < M; m++) {
        double sum = 0.0;
        for (int v = 0; v < V; v++) sum += exp(logits[m * V + v]);
        for (int v = 0; v < V; v++)
            if (probs) probs[m * V + v] = exp(logits[m * V + v]) / sum;
        losses[m] = log(sum) - logits[m * V + targets[m]];
    }
}

enum { CE_M = 7, CE_V = 11 };
static const int CE_TARGETS[CE_M] = {0, 10, 3, 3, 7, 1, 5};

typedef struct {
    double *logits, *losses;   // (M, V), (M)
    double scale;
    const int *targets;        // (M)
    int M, V;
} CrossentropyCase;

static double crossentropy_loss(void *ctx) {
    CrossentropyCase *c = ctx;
    ref_crossentropy(c->losses, NULL, c->logits, c->targets, c->M, c->V);
    double L = 0.0;
    for (int m = 0; m < c->M; m++) L += c->losses[m];
    return c->scale * L;
}

START_TEST(crossentropy_matches_naive_and_finite_differences) {
    const int n = CE_M * CE_V;
    float *logits = randn(n, 50, 0, 2), *probs = zeros(n), *losses = zeros(CE_M);
    double *dl = to_double(logits, n), *wprobs = dzeros(n), *wlosses = dzeros(CE_M);
    ops_crossentropy_forward(losses, probs, logits, CE_TARGETS, CE_M, CE_V);
    ref_crossentropy(wlosses, wprobs, dl, CE_TARGETS, CE_M, CE_V);
    ASSERT_FWD(losses, wlosses, CE_M, "cross-entropy losses");
    ASSERT_FWD(probs, wprobs, n, "cross-entropy probs");

    // The gradient of the mean loss over the M rows.
    const float scale = 1.0f / CE_M;
    float *g = zeros(n);
    ops_crossentropy_backward(g, probs, CE_TARGETS, scale, CE_M, CE_V);
    CrossentropyCase c = {dl, dzeros(CE_M), scale, CE_TARGETS, CE_M, CE_V};
    double *want = dzeros(n);
    fd_grad(want, dl, n, crossentropy_loss, &c);
    ASSERT_GRAD(g, want, n, "cross-entropy dlogits");

    float *g2 = zeros(n);
    ops_crossentropy_backward(g2, probs, CE_TARGETS, scale, CE_M, CE_V);
    ops_crossentropy_backward(g2, probs, CE_TARGETS, scale, CE_M, CE_V);
    assert_doubled(g, g2, n, "cross-entropy dlogits", false);
    free(logits), free(probs), free(losses), free(dl), free(wprobs), free(wlosses), free(g);
    free(c.losses), free(want), free(g2);
}
END_TEST

// Logits of 1000 overflow exp() in float; subtracting the row's max must keep
// the loss finite and equal to that of the same row shifted down.
START_TEST(crossentropy_is_stable_for_large_logits) {
    enum { V = 4 };
    const float high[V] = {1000.0f, 1001.0f, 999.0f, 1002.0f}, low[V] = {0.0f, 1.0f, -1.0f, 2.0f};
    const int target = 0;
    float loss_high, loss_low, probs[V];
    ops_crossentropy_forward(&loss_high, probs, high, &target, 1, V);
    ops_crossentropy_forward(&loss_low, probs, low, &target, 1, V);
    ck_assert_msg(isfinite(loss_high), "loss of large logits is %g", loss_high);
    ck_assert_msg(fabsf(loss_high - loss_low) < 1e-5f, "shifted logits: loss %.7g vs %.7g",
                  loss_high, loss_low);
}
END_TEST

// ---- pieces of split layers -------------------------------------------------------

typedef struct {
    double *x, *bias, *R;   // (M, N), (N), (M, N)
    int M, N;
} BiasCase;

static double bias_loss(void *ctx) {
    BiasCase *c = ctx;
    double L = 0.0;
    for (int m = 0; m < c->M; m++)
        for (int n = 0; n < c->N; n++) L += (c->x[m * c->N + n] + c->bias[n]) * c->R[m * c->N + n];
    return L;
}

START_TEST(bias_matches_naive_and_finite_differences) {
    const int M = 7, N = 13;
    float *x = randn(M * N, 80, 0, 1), *bias = randn(N, 81, 0, 1), *R = randn(M * N, 82, 0, 1);
    float *out = malloc(M * N * sizeof(float));
    memcpy(out, x, M * N * sizeof(float));
    ops_add_bias(out, bias, M, N);
    double *want = dzeros(M * N);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) want[m * N + n] = (double)x[m * N + n] + bias[n];
    ASSERT_FWD(out, want, M * N, "add_bias");

    float *gb = zeros(N);
    ops_bias_backward(gb, R, M, N);
    BiasCase c = {to_double(x, M * N), to_double(bias, N), to_double(R, M * N), M, N};
    fd_grad(want, c.bias, N, bias_loss, &c);
    ASSERT_GRAD(gb, want, N, "bias dbias");

    float *gb2 = zeros(N);
    ops_bias_backward(gb2, R, M, N);
    ops_bias_backward(gb2, R, M, N);
    assert_doubled(gb, gb2, N, "bias dbias", true);
    ops_bias_backward(NULL, R, M, N);   // skipped
    free(x), free(bias), free(R), free(out), free(want), free(gb), free(gb2);
    free(c.x), free(c.bias), free(c.R);
}
END_TEST

// A 5 x 7 block from row 1, column 3 of a (6, 11) matrix to row 2, column 1
// of an (8, 9) one: the block lands where it should and nothing around it
// changes; accumulated, each element of the block is the one float sum.
enum { C2_SLD = 11, C2_DR = 8, C2_DLD = 9, C2_ROWS = 5, C2_COLS = 7, C2_S0 = 1 * C2_SLD + 3,
       C2_DROW = 2, C2_DCOL = 1 };

static size_t block_wrong(const float *dst, const float *before, const float *src, bool added) {
    size_t wrong = 0;
    for (int r = 0; r < C2_DR; r++)
        for (int c = 0; c < C2_DLD; c++) {
            int br = r - C2_DROW, bc = c - C2_DCOL;
            bool in = br >= 0 && br < C2_ROWS && bc >= 0 && bc < C2_COLS;
            float s = in ? src[C2_S0 + br * C2_SLD + bc] : 0.0f;
            float want = !in ? before[r * C2_DLD + c] : added ? before[r * C2_DLD + c] + s : s;
            wrong += dst[r * C2_DLD + c] != want;
        }
    return wrong;
}

START_TEST(copy_and_accumulate_2d) {
    const size_t nd = C2_DR * C2_DLD;
    float *src = randn(6 * C2_SLD, 83, 0, 1), *before = randn(nd, 84, 0, 1);
    float *dst = malloc(nd * sizeof(float));
    float *d0 = dst + C2_DROW * C2_DLD + C2_DCOL;
    memcpy(dst, before, nd * sizeof(float));
    ops_copy_2d(d0, C2_DLD, src + C2_S0, C2_SLD, C2_ROWS, C2_COLS);
    size_t wrong = block_wrong(dst, before, src, false);
    ck_assert_msg(wrong == 0, "ops_copy_2d: %zu of %zu elements wrong", wrong, nd);
    memcpy(dst, before, nd * sizeof(float));
    ops_accumulate_2d(d0, C2_DLD, src + C2_S0, C2_SLD, C2_ROWS, C2_COLS);
    wrong = block_wrong(dst, before, src, true);
    ck_assert_msg(wrong == 0, "ops_accumulate_2d: %zu of %zu elements wrong", wrong, nd);
    // Negative control: the copy is not what an accumulation leaves.
    ck_assert(block_wrong(dst, before, src, false) > 0);
    free(src), free(before), free(dst);
}
END_TEST

// A rank holding rows 5 .. 8 of a vocabulary of 13 (v0 5, nv 4): tokens at
// both ends of its range (5, 8), just outside it (4, 9), far outside (0, 12),
// and token 6 twice, whose row of dtable collects both gradients.
enum { VP_V0 = 5, VP_NV = 4, VP_M = 9, VP_C = 5 };
static const int VP_TOKENS[VP_M] = {5, 8, 4, 9, 0, 12, 6, 6, 7};
static const int VP_IDS[VP_M] = {0, 3, -1, -1, -1, -1, 1, 1, 2};

typedef struct {
    double *table, *R;   // (nv, C), (M, C)
} RowsCase;

static double rows_loss(void *ctx) {
    RowsCase *c = ctx;
    double L = 0.0;
    for (int m = 0; m < VP_M; m++)
        for (int ch = 0; VP_IDS[m] >= 0 && ch < VP_C; ch++)
            L += c->table[VP_IDS[m] * VP_C + ch] * c->R[m * VP_C + ch];
    return L;
}

START_TEST(vocab_ids_rows_and_pick) {
    int ids[VP_M];
    ops_vocab_ids(ids, VP_TOKENS, VP_V0, VP_NV, VP_M);
    for (int m = 0; m < VP_M; m++)
        ck_assert_msg(ids[m] == VP_IDS[m], "token %d: id %d, want %d", VP_TOKENS[m], ids[m],
                      VP_IDS[m]);

    // The rows, and zero rows for the tokens another rank holds (out starts
    // as noise, so a row left alone is caught).
    const int nt = VP_NV * VP_C, no = VP_M * VP_C;
    float *table = randn(nt, 85, 0, 1), *out = randn(no, 86, 0, 1);
    double *want = dzeros(no);
    ops_rows_forward(out, ids, table, VP_NV, VP_M, VP_C);
    for (int m = 0; m < VP_M; m++)
        for (int ch = 0; ch < VP_C; ch++)
            want[m * VP_C + ch] = ids[m] < 0 ? 0.0 : table[ids[m] * VP_C + ch];
    ASSERT_FWD(out, want, no, "rows forward");

    float *R = randn(no, 87, 0, 1), *g = zeros(nt), *g2 = zeros(nt);
    ops_rows_backward(g, R, ids, VP_NV, VP_M, VP_C);
    RowsCase c = {to_double(table, nt), to_double(R, no)};
    fd_grad(want, c.table, nt, rows_loss, &c);
    ASSERT_GRAD(g, want, nt, "rows dtable");
    ops_rows_backward(g2, R, ids, VP_NV, VP_M, VP_C);
    ops_rows_backward(g2, R, ids, VP_NV, VP_M, VP_C);
    assert_doubled(g, g2, nt, "rows dtable", true);
    ops_rows_backward(NULL, R, ids, VP_NV, VP_M, VP_C);   // skipped

    // The logit of each token among this rank's columns, 0 where another
    // rank holds it.
    float *x = randn(VP_M * VP_NV, 88, 0, 1), picked[VP_M];
    ops_pick(picked, x, ids, VP_M, VP_NV);
    for (int m = 0; m < VP_M; m++)
        ck_assert_float_eq(picked[m], ids[m] < 0 ? 0.0f : x[m * VP_NV + ids[m]]);
    free(table), free(out), free(want), free(R), free(g), free(g2), free(x), free(c.table);
    free(c.R);
}
END_TEST

// Ids that ops_vocab_ids did not make (a token itself, a row past the
// rank's, a negative other than -1) stop the run.
START_TEST(rows_forward_id_out_of_range) {
    float table[2 * 3] = {0}, out[3];
    const int id = 2;   // nrows is 2
    ops_rows_forward(out, &id, table, 2, 1, 3);
}
END_TEST

START_TEST(rows_backward_id_out_of_range) {
    float dtable[2 * 3] = {0}, dout[3] = {0};
    const int id = -2;
    ops_rows_backward(dtable, dout, &id, 2, 1, 3);
}
END_TEST

START_TEST(pick_id_out_of_range) {
    float x[4] = {0}, out;
    const int id = 4;   // N is 4
    ops_pick(&out, x, &id, 1, 4);
}
END_TEST

START_TEST(ce_parts_backward_id_out_of_range) {
    float x[4] = {0}, mx = 0, sumexp = 4, d[4] = {0};
    const int id = 4;
    ops_ce_parts_backward(d, x, &mx, &sumexp, &id, 1.0f, 1, 4);
}
END_TEST

// Positions 3 .. 7 of maxT = 9; the rows of dwpe outside them get nothing.
enum { PE_B = 2, PE_T = 5, PE_C = 7, PE_MAXT = 9, PE_POS0 = 3 };

typedef struct {
    double *x, *wpe, *R;   // (B, T, C), (maxT, C), (B, T, C)
} PositionsCase;

static double positions_loss(void *ctx) {
    PositionsCase *c = ctx;
    double L = 0.0;
    for (int bt = 0; bt < PE_B * PE_T; bt++)
        for (int ch = 0; ch < PE_C; ch++)
            L += (c->x[bt * PE_C + ch] + c->wpe[(PE_POS0 + bt % PE_T) * PE_C + ch]) *
                 c->R[bt * PE_C + ch];
    return L;
}

START_TEST(positions_match_naive_and_finite_differences) {
    const int n = PE_B * PE_T * PE_C, np = PE_MAXT * PE_C;
    float *x = randn(n, 90, 0, 1), *wpe = randn(np, 91, 0, 1), *R = randn(n, 92, 0, 1);
    float *out = malloc(n * sizeof(float));
    memcpy(out, x, n * sizeof(float));
    ops_positions_forward(out, wpe, PE_B, PE_T, PE_C, PE_POS0);
    double *want = dzeros(np > n ? np : n);
    for (int bt = 0; bt < PE_B * PE_T; bt++)
        for (int ch = 0; ch < PE_C; ch++)
            want[bt * PE_C + ch] =
                (double)x[bt * PE_C + ch] + wpe[(PE_POS0 + bt % PE_T) * PE_C + ch];
    ASSERT_FWD(out, want, n, "positions forward");

    float *g = zeros(np), *g2 = zeros(np);
    ops_positions_backward(g, R, PE_B, PE_T, PE_C, PE_POS0);
    PositionsCase c = {to_double(x, n), to_double(wpe, np), to_double(R, n)};
    fd_grad(want, c.wpe, np, positions_loss, &c);
    ASSERT_GRAD(g, want, np, "positions dwpe");
    ops_positions_backward(g2, R, PE_B, PE_T, PE_C, PE_POS0);
    ops_positions_backward(g2, R, PE_B, PE_T, PE_C, PE_POS0);
    assert_doubled(g, g2, np, "positions dwpe", true);
    ops_positions_backward(NULL, R, PE_B, PE_T, PE_C, PE_POS0);   // skipped
    free(x), free(wpe), free(R), free(out), free(want), free(g), free(g2);
    free(c.x), free(c.wpe), free(c.R);
}
END_TEST

// The embedding of a vocabulary split into blocks of 4 and 7 rows (the
// tokens of EMB_TOKENS fall in both): each block's rows, summed as an
// all-reduce sums them, plus the positions, is ops_embedding_forward; the
// blocks' dtable side by side, and dwpe, are ops_embedding_backward's.
START_TEST(vocab_split_embedding_equals_whole) {
    const int n = EMB_B * EMB_T * EMB_C, M = EMB_B * EMB_T, widths[2] = {4, 7};
    float *wte = randn(EMB_V * EMB_C, 40, 0, 1), *wpe = randn(EMB_MAXT * EMB_C, 41, 0, 1);
    float *R = randn(n, 42, 0, 1), *whole = zeros(n), *out = zeros(n), *rows = zeros(n);
    float *gte = zeros(EMB_V * EMB_C), *gpe = zeros(EMB_MAXT * EMB_C);
    float *split_gte = zeros(EMB_V * EMB_C), *split_gpe = zeros(EMB_MAXT * EMB_C);
    ops_embedding_forward(whole, EMB_TOKENS, wte, wpe, EMB_B, EMB_T, EMB_C, EMB_POS0);
    ops_embedding_backward(gte, gpe, R, EMB_TOKENS, EMB_B, EMB_T, EMB_C, EMB_POS0);
    int ids[EMB_B * EMB_T];
    for (int b = 0, v0 = 0; b < 2; v0 += widths[b++]) {
        ops_vocab_ids(ids, EMB_TOKENS, v0, widths[b], M);
        ops_rows_forward(rows, ids, wte + v0 * EMB_C, widths[b], M, EMB_C);
        ops_accumulate(out, rows, n);
        ops_rows_backward(split_gte + v0 * EMB_C, R, ids, widths[b], M, EMB_C);
    }
    ops_positions_forward(out, wpe, EMB_B, EMB_T, EMB_C, EMB_POS0);
    ops_positions_backward(split_gpe, R, EMB_B, EMB_T, EMB_C, EMB_POS0);
    double *want = to_double(whole, n);
    ASSERT_FWD(out, want, n, "split embedding");
    free(want);
    want = to_double(gte, EMB_V * EMB_C);
    ASSERT_FWD(split_gte, want, EMB_V * EMB_C, "split embedding dwte");
    free(want);
    want = to_double(gpe, EMB_MAXT * EMB_C);
    ASSERT_FWD(split_gpe, want, EMB_MAXT * EMB_C, "split embedding dwpe");
    free(want), free(wte), free(wpe), free(R), free(whole), free(out), free(rows), free(gte);
    free(gpe), free(split_gte), free(split_gpe);
}
END_TEST

// Row maxima, sums of exps and the loss put together from them, against
// double loops: on small odd shapes, and on rows of 601, longer than the
// chunks ops_row_sumexp sums in. A row's largest element first in row 0
// and last in row 1.
START_TEST(row_max_sumexp_pick_and_ce_from_parts_match_naive) {
    const int shapes[2][2] = {{7, 11}, {3, 601}};   // M, N
    for (int si = 0; si < 2; si++) {
        int M = shapes[si][0], N = shapes[si][1];
        float *x = randn((size_t)M * N, 93, 0, 2);
        x[0] = 12.0f, x[2 * N - 1] = 12.0f;
        int *ids = malloc(M * sizeof(int));
        for (int m = 0; m < M; m++) ids[m] = m == 0 ? N - 1 : (m * 5) % N;
        float *mx = zeros(M), *sumexp = zeros(M), *target = zeros(M), *losses = zeros(M);
        double *wmx = dzeros(M), *wsum = dzeros(M), *wloss = dzeros(M);
        ops_row_max(mx, x, M, N);
        ops_row_sumexp(sumexp, x, mx, M, N);
        ops_pick(target, x, ids, M, N);
        ops_ce_from_parts(losses, mx, sumexp, target, M);
        for (int m = 0; m < M; m++) {
            const float *xr = x + (size_t)m * N;
            double big = -INFINITY, sum = 0.0;
            for (int n = 0; n < N; n++) big = fmax(big, xr[n]);
            for (int n = 0; n < N; n++) sum += exp((double)xr[n] - big);
            wmx[m] = big, wsum[m] = sum, wloss[m] = log(sum) + big - xr[ids[m]];
        }
        ASSERT_FWD(mx, wmx, M, "row max");
        ASSERT_FWD(sumexp, wsum, M, "row sumexp");
        ASSERT_FWD(losses, wloss, M, "cross-entropy from parts");
        free(x), free(ids), free(mx), free(sumexp), free(target), free(losses), free(wmx);
        free(wsum), free(wloss);
    }
    // A rank that holds no columns: its maximum is no maximum at all.
    float none[2];
    ops_row_max(none, NULL, 2, 0);
    ck_assert(none[0] == -INFINITY && none[1] == -INFINITY);
}
END_TEST

// The cross-entropy of a vocabulary of N columns split into blocks of the
// given widths, as ranks hold it: each block's parts, combined as ranks
// combine them (the max of the maxima, then the sums of the sums of exps
// and of the picked logits), and each block's gradient added into its
// columns of dlogits (M, N) (skipped when NULL). With own_max, a block's sum
// of exps is taken against its own maximum instead of the combined one:
// the mistake of the negative control.
static void split_crossentropy(float *losses, float *dlogits, const float *logits,
                               const int *targets, int M, int N, const int *widths, int nblocks,
                               float scale, bool own_max) {
    float *block = zeros((size_t)M * N), *dblock = zeros((size_t)M * N);   // (M, width)
    float *part = zeros(M), *local = zeros(M), *mx = zeros(M), *sumexp = zeros(M);
    float *target = zeros(M);
    int *ids = malloc(M * sizeof(int));
    for (int m = 0; m < M; m++) mx[m] = -INFINITY;
    for (int pass = 0; pass < 3; pass++)   // 0: the maxima, 1: the sums, 2: the gradient
        for (int b = 0, v0 = 0; b < nblocks; v0 += widths[b++]) {
            int nb = widths[b];
            ops_copy_2d(block, nb, logits + v0, N, M, nb);
            ops_row_max(local, block, M, nb);
            ops_vocab_ids(ids, targets, v0, nb, M);
            if (pass == 0) {
                for (int m = 0; m < M; m++) mx[m] = fmaxf(mx[m], local[m]);
            } else if (pass == 1) {
                ops_row_sumexp(part, block, own_max ? local : mx, M, nb);
                ops_accumulate(sumexp, part, M);
                ops_pick(part, block, ids, M, nb);
                ops_accumulate(target, part, M);
            } else if (dlogits) {
                memset(dblock, 0, (size_t)M * nb * sizeof(float));
                ops_ce_parts_backward(dblock, block, mx, sumexp, ids, scale, M, nb);
                ops_accumulate_2d(dlogits + v0, N, dblock, nb, M, nb);
            }
        }
    ops_ce_from_parts(losses, mx, sumexp, target, M);
    free(block), free(dblock), free(part), free(local), free(mx), free(sumexp), free(target);
    free(ids);
}

static const int SPLIT_TARGETS_601[3] = {0, 600, 299};

// Whole (one block), halves, thirds and unequal blocks (one of a single
// column) of 11 columns, and of 601 (longer than a sum's chunk); targets at
// both ends of the vocabulary.
START_TEST(vocab_split_crossentropy_equals_whole) {
    const struct {
        int M, N;
        const int *targets;
        int nblocks, widths[3];
    } cases[] = {
        {CE_M, CE_V, CE_TARGETS, 1, {11}},         {CE_M, CE_V, CE_TARGETS, 2, {5, 6}},
        {CE_M, CE_V, CE_TARGETS, 3, {4, 4, 3}},    {CE_M, CE_V, CE_TARGETS, 3, {1, 7, 3}},
        {3, 601, SPLIT_TARGETS_601, 1, {601}},     {3, 601, SPLIT_TARGETS_601, 3, {200, 200, 201}},
        {3, 601, SPLIT_TARGETS_601, 2, {300, 301}},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        int M = cases[ci].M, N = cases[ci].N, n = M * N;
        const int *targets = cases[ci].targets;
        char what[64];
        snprintf(what, sizeof what, "%d columns in %d blocks (first %d)", N, cases[ci].nblocks,
                 cases[ci].widths[0]);
        const float scale = 1.0f / M;
        float *logits = randn(n, 94, 0, 2), *probs = zeros(n), *losses = zeros(M), *g = zeros(n);
        ops_crossentropy_forward(losses, probs, logits, targets, M, N);
        ops_crossentropy_backward(g, probs, targets, scale, M, N);
        double *wlosses = to_double(losses, M), *wg = to_double(g, n);

        float *split_losses = zeros(M), *split_g = zeros(n);
        split_crossentropy(split_losses, split_g, logits, targets, M, N, cases[ci].widths,
                           cases[ci].nblocks, scale, false);
        double e = fwd_err(split_losses, wlosses, M);
        ck_assert_msg(e <= FWD_TOL, "%s: losses off by %.3g", what, e);
        e = fwd_err(split_g, wg, n);
        ck_assert_msg(e <= FWD_TOL, "%s: gradient off by %.3g", what, e);

        // The gradient of the mean loss, by finite differences.
        CrossentropyCase c = {to_double(logits, n), dzeros(M), scale, targets, M, N};
        double *want = dzeros(n);
        fd_grad(want, c.logits, n, crossentropy_loss, &c);
        ASSERT_GRAD(split_g, want, n, what);

        // Negative control: sums of exps against each block's own maximum.
        if (cases[ci].nblocks > 1) {
            split_crossentropy(split_losses, NULL, logits, targets, M, N, cases[ci].widths,
                               cases[ci].nblocks, scale, true);
            e = fwd_err(split_losses, wlosses, M);
            ck_assert_msg(e > FWD_TOL, "%s: sums of exps against the blocks' own maxima passed "
                          "(error %.3g)", what, e);
        }
        free(logits), free(probs), free(losses), free(g), free(wlosses), free(wg);
        free(split_losses), free(split_g), free(c.logits), free(c.losses), free(want);
    }
}
END_TEST

// The backward of the parts adds (+=): a second call adds the same again.
START_TEST(ce_parts_backward_adds) {
    const int n = CE_M * CE_V;
    float *x = randn(n, 95, 0, 2), mx[CE_M], sumexp[CE_M], *g = zeros(n), *g2 = zeros(n);
    ops_row_max(mx, x, CE_M, CE_V);
    ops_row_sumexp(sumexp, x, mx, CE_M, CE_V);
    ops_ce_parts_backward(g, x, mx, sumexp, CE_TARGETS, 0.5f, CE_M, CE_V);
    ops_ce_parts_backward(g2, x, mx, sumexp, CE_TARGETS, 0.5f, CE_M, CE_V);
    ops_ce_parts_backward(g2, x, mx, sumexp, CE_TARGETS, 0.5f, CE_M, CE_V);
    assert_doubled(g, g2, n, "cross-entropy parts dlogits", false);
    ops_ce_parts_backward(NULL, x, mx, sumexp, CE_TARGETS, 0.5f, CE_M, CE_V);   // skipped
    free(x), free(g), free(g2);
}
END_TEST

// ---- dropout -------------------------------------------------------------------

// The mask as dropout's documentation defines it, computed here independently.
static int ref_keep(DropoutKey key, float p, int b, int t, int c) {
    uint64_t stream = rng_stream(RNG_DROPOUT, key.layer * 4 + key.site, key.step);
    uint64_t index = ((uint64_t)(key.row0 + b) * key.Tg + (key.t0 + t)) * key.Cg + (key.c0 + c);
    return rng_uniform(key.seed, stream, index) >= p;
}

START_TEST(dropout_p0_is_exact_copy) {
    const int B = 2, T = 3, C = 5, n = B * T * C;
    float *x = randn(n, 60, 0, 1), *out = zeros(n), *g = zeros(n);
    DropoutKey key = {.seed = 7, .layer = 1, .site = 2, .step = 3, .Tg = T, .Cg = C};
    ops_dropout_forward(out, x, 0.0f, key, B, T, C);
    ck_assert(memcmp(out, x, n * sizeof(float)) == 0);
    ops_dropout_backward(g, x, 0.0f, key, B, T, C);
    ops_dropout_backward(g, x, 0.0f, key, B, T, C);
    for (int i = 0; i < n; i++) ck_assert_float_eq(g[i], 2.0f * x[i]);
    free(x), free(out), free(g);
}
END_TEST

START_TEST(dropout_masks_as_documented) {
    const int B = 8, T = 64, C = 128, n = B * T * C;
    const float p = 0.3f;
    // x = 1 + |normal| is never 0, so a 0 in out can only be a drop.
    float *x = randn(n, 61, 0, 1), *out = zeros(n);
    for (int i = 0; i < n; i++) x[i] = 1.0f + fabsf(x[i]);
    DropoutKey key = {.seed = 99, .layer = 2, .site = 1, .step = 17, .Tg = T, .Cg = C};
    ops_dropout_forward(out, x, p, key, B, T, C);

    size_t kept = 0, wrong = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                int i = (b * T + t) * C + c;
                int keep = ref_keep(key, p, b, t, c);
                kept += keep;
                wrong += out[i] != (keep ? x[i] / (1.0f - p) : 0.0f);
            }
    ck_assert_msg(wrong == 0, "%zu of %d elements differ from x * keep / (1 - p)", wrong, n);
    // The kept fraction is a binomial proportion: within 4 standard errors of
    // 1 - p (a false alarm once in ~16000 seeds; this seed is fixed anyway).
    double frac = (double)kept / n, se = sqrt(p * (1.0 - p) / n);
    ck_assert_msg(fabs(frac - (1.0 - p)) < 4.0 * se, "kept %.4f, expected %.2f +- %.4f", frac,
                  1.0 - p, 4.0 * se);

    // Another step, layer or site draws another mask.
    DropoutKey other[3] = {key, key, key};
    other[0].step++, other[1].layer++, other[2].site++;
    for (int o = 0; o < 3; o++) {
        float *out2 = zeros(n);
        ops_dropout_forward(out2, x, p, other[o], B, T, C);
        size_t same_mask = 0;
        for (int i = 0; i < n; i++) same_mask += (out2[i] == 0.0f) == (out[i] == 0.0f);
        ck_assert_msg(same_mask < (size_t)n * 0.7, "variant %d repeats the mask (%zu of %d)", o,
                      same_mask, n);
        free(out2);
    }
    free(x), free(out);
}
END_TEST

START_TEST(dropout_backward_uses_the_same_mask) {
    const int B = 2, T = 5, C = 8, n = B * T * C;
    const float p = 0.3f;
    float *x = randn(n, 62, 0, 1), *dout = randn(n, 63, 0, 1), *out = zeros(n), *g = zeros(n);
    DropoutKey key = {.seed = 5, .layer = 0, .site = 0, .step = 4, .Tg = T, .Cg = C};
    ops_dropout_forward(out, x, p, key, B, T, C);
    ops_dropout_backward(g, dout, p, key, B, T, C);
    size_t dropped = 0;
    for (int i = 0; i < n; i++) {
        int keep = out[i] != 0.0f;   // x is never exactly 0
        dropped += !keep;
        ck_assert_float_eq(g[i], keep ? dout[i] / (1.0f - p) : 0.0f);
    }
    ck_assert_msg(dropped > 0 && dropped < (size_t)n, "degenerate mask: %zu of %d dropped",
                  dropped, n);
    ops_dropout_backward(g, dout, p, key, B, T, C);   // += : twice the first
    for (int i = 0; i < n; i++) ck_assert_float_eq(g[i], 2.0f * (out[i] != 0.0f ? dout[i] / (1.0f - p) : 0.0f));
    free(x), free(dout), free(out), free(g);
}
END_TEST

// A rank holding rows 2..3, tokens 4..9 and channels 8..15 of a (4, 16, 32)
// tensor draws exactly the global mask's slice.
START_TEST(dropout_slice_equals_slice_of_whole) {
    enum { BG = 4, TG = 16, CG = 32, R0 = 2, NB = 2, T0 = 4, NT = 6, C0 = 8, NC = 8 };
    const float p = 0.5f;
    float *x = randn(BG * TG * CG, 64, 0, 1), *whole = zeros(BG * TG * CG);
    DropoutKey key = {.seed = 11, .layer = 3, .site = 2, .step = 9, .Tg = TG, .Cg = CG};
    ops_dropout_forward(whole, x, p, key, BG, TG, CG);

    float *xs = zeros(NB * NT * NC), *part = zeros(NB * NT * NC);
    for (int b = 0; b < NB; b++)
        for (int t = 0; t < NT; t++)
            for (int c = 0; c < NC; c++)
                xs[(b * NT + t) * NC + c] = x[((R0 + b) * TG + T0 + t) * CG + C0 + c];
    DropoutKey slice = key;
    slice.row0 = R0, slice.t0 = T0, slice.c0 = C0;
    ops_dropout_forward(part, xs, p, slice, NB, NT, NC);
    size_t differ = 0, dropped = 0;
    for (int b = 0; b < NB; b++)
        for (int t = 0; t < NT; t++)
            for (int c = 0; c < NC; c++) {
                float w = whole[((R0 + b) * TG + T0 + t) * CG + C0 + c];
                differ += part[(b * NT + t) * NC + c] != w;
                dropped += w == 0.0f;
            }
    ck_assert_msg(differ == 0, "%zu elements of the slice differ from the whole", differ);
    ck_assert_msg(dropped > 0, "the slice drew no drops: the comparison proves nothing");
    free(x), free(whole), free(xs), free(part);
}
END_TEST

START_TEST(dropout_step_out_of_range) {
    float x = 1.0f, out;
    DropoutKey key = {.seed = 1, .step = 1 << 28, .Tg = 1, .Cg = 1};
    ops_dropout_forward(&out, &x, 0.1f, key, 1, 1, 1);
}
END_TEST

// ---- small elementwise ops and reductions ----------------------------------------

START_TEST(elementwise_and_reductions) {
    enum { N = 37 };
    float *a = randn(N, 70, 0, 1), *b = randn(N, 71, 0, 1), *y = zeros(N);
    ops_add(y, a, b, N);
    for (int i = 0; i < N; i++) ck_assert_float_eq(y[i], a[i] + b[i]);
    ops_accumulate(y, a, N);
    for (int i = 0; i < N; i++) ck_assert_float_eq(y[i], (a[i] + b[i]) + a[i]);
    ops_scale(y, 0.5f, N);
    for (int i = 0; i < N; i++) ck_assert_float_eq(y[i], ((a[i] + b[i]) + a[i]) * 0.5f);
    ops_fill(y, 3.25f, N);
    for (int i = 0; i < N; i++) ck_assert_float_eq(y[i], 3.25f);
    // In place: out may be one of the inputs (x = x + y).
    for (int i = 0; i < N; i++) y[i] = a[i] + b[i];
    ops_add(a, a, b, N);
    for (int i = 0; i < N; i++) ck_assert_float_eq(a[i], y[i]);

    // 2^24 + 1 + 1 + ... : in float every +1 is lost; in double none is.
    enum { NS = 1001 };
    float *s = zeros(NS);
    s[0] = 16777216.0f;
    for (int i = 1; i < NS; i++) s[i] = 1.0f;
    ck_assert(ops_sum(s, NS) == 16777216.0 + (NS - 1));
    ck_assert(ops_sumsq(s, NS) == 16777216.0 * 16777216.0 + (NS - 1));
    // The same of bf16 elements (2^24 and 1 are bf16 values), widened exactly.
    bf16 *s16 = malloc(NS * sizeof *s16);
    for (int i = 0; i < NS; i++) s16[i] = bf16_from_float(s[i]);
    ck_assert(ops_sumsq_bf16(s16, NS) == 16777216.0 * 16777216.0 + (NS - 1));
    s16[NS - 1] = bf16_from_float(-1.5f);   // an odd count, a negative and a fraction
    ck_assert(ops_sumsq_bf16(s16, NS) == 16777216.0 * 16777216.0 + (NS - 2) + 2.25);
    free(s16);
    free(a), free(b), free(y), free(s);
}
END_TEST

// ---- optimizers ----------------------------------------------------------------

// Three steps of AdamW on a few parameters, against the formula of ops.h
// evaluated in double: with the defaults, and with a large lr and wd, where
// taking the decay on the updated p instead of the old one is off by
// lr^2 wd ~ 5e-3 (with the defaults that would hide at 1e-7).
START_TEST(adamw_matches_closed_form) {
    enum { N = 6, STEPS = 3 };
    const float settings[2][2] = {{1e-3f, 0.1f}, {0.1f, 0.5f}};   // lr, wd
    const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f;
    for (int si = 0; si < 2; si++) {
        const float lr = settings[si][0], wd = settings[si][1];
        float p[N] = {1.0f, -0.5f, 0.25f, 2.0f, -3.0f, 0.0f}, m[N] = {0}, v[N] = {0};
        double pd[N], md[N] = {0}, vd[N] = {0};
        for (int i = 0; i < N; i++) pd[i] = p[i];
        for (int t = 1; t <= STEPS; t++) {
            float g[N];
            for (int i = 0; i < N; i++) g[i] = 0.3f * (float)(i - 2) + 0.1f * (float)t;
            ops_adamw(p, g, m, v, N, lr, b1, b2, eps, wd, t);
            for (int i = 0; i < N; i++) {
                md[i] = b1 * md[i] + (1.0 - b1) * g[i];
                vd[i] = b2 * vd[i] + (1.0 - b2) * (double)g[i] * g[i];
                double mhat = md[i] / (1.0 - pow(b1, t)), vhat = vd[i] / (1.0 - pow(b2, t));
                pd[i] -= lr * (mhat / (sqrt(vhat) + eps) + wd * pd[i]);
            }
        }
        // fp32 holds p (|p| <= 3) to ~2e-7; three steps add a few ulps.
        for (int i = 0; i < N; i++) {
            ck_assert_msg(fabs(p[i] - pd[i]) < 1e-6, "lr %g wd %g: p[%d] %.9g, closed form %.9g",
                          lr, wd, i, p[i], pd[i]);
            ck_assert_msg(fabs(m[i] - md[i]) < 1e-6 && fabs(v[i] - vd[i]) < 1e-6,
                          "moments of %d: m %.9g (%.9g), v %.9g (%.9g)", i, m[i], md[i], v[i],
                          vd[i]);
        }
    }
}
END_TEST

// At the first step the bias corrections make mhat = g and vhat = g^2, so
// each parameter moves by lr * g / (|g| + eps) (about lr, whatever the size of
// g) plus the decay lr * wd * p. Worked by hand with lr 1e-3, wd 0.1:
//   p 1,    g 0.5   -> 1 - 0.001 - 0.0001             = 0.9989
//   p -2,   g -4    -> -2 + 0.001 + 0.0002            = -1.9988
//   p 0.5,  g 0     -> 0.5 - 0.00005                  = 0.49995   (only decay)
//   p 0,    g 1e-8  -> 0 - 0.001 * 1e-8 / 2e-8        = -0.0005   (g = eps: half a step)
// Mixed precision's AdamW is ops_adamw on the master copy, to the bit, from
// the bf16 gradients widened; the working weights are the master rounded.
// And why the master is there: updates below half a bf16 step (lr 1e-4 on
// weights near 1, where a step is 2^-7) move the master and, once they add
// up, the bf16 weights, while a bf16 weight updated in place never moves.
START_TEST(adamw_mixed_is_adamw_on_the_master) {
    enum { N = 1031 };
    static float p[N], p2[N], m[N], v[N], m2[N], v2[N], gf[N];
    static bf16 w[N], g[N];
    uint64_t st = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < N; i++) {
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        p[i] = p2[i] = (float)((st >> 11) % 2001) / 1000.0f - 1.0f;
        m[i] = m2[i] = v[i] = v2[i] = 0;
    }
    for (int t = 1; t <= 5; t++) {
        for (int i = 0; i < N; i++) {
            g[i] = bf16_from_float(sinf(0.37f * (float)(i * t)) * 0.01f);
            gf[i] = bf16_to_float(g[i]);
        }
        ops_adamw_mixed(p, w, g, m, v, N, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
        ops_adamw(p2, gf, m2, v2, N, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
        for (int i = 0; i < N; i++) {
            ck_assert_msg(bits_of(p[i]) == bits_of(p2[i]) && bits_of(m[i]) == bits_of(m2[i]) &&
                          bits_of(v[i]) == bits_of(v2[i]), "step %d element %d: not ops_adamw's", t, i);
            ck_assert_msg(w[i] == bf16_from_float(p[i]), "step %d element %d: w is not the master rounded", t, i);
        }
    }
    // Stagnation: 200 steps of lr 1e-4 against a gradient of constant sign.
    float master = 1.0f, mm = 0, vv = 0, inplace = 1.0f, im = 0, iv = 0;
    bf16 work = bf16_from_float(1.0f), grad = bf16_from_float(0.5f);
    for (int t = 1; t <= 200; t++) {
        ops_adamw_mixed(&master, &work, &grad, &mm, &vv, 1, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.0f, t);
        float g1 = bf16_to_float(grad);
        ops_adamw(&inplace, &g1, &im, &iv, 1, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.0f, t);
        inplace = bf16_to_float(bf16_from_float(inplace));   // the weight kept in bf16 only
    }
    ck_assert_msg(fabsf(master - (1.0f - 200 * 1e-4f)) < 1e-4f, "the master moved to %.6f, not 0.98", master);
    ck_assert_msg(bf16_to_float(work) < 0.99f, "the bf16 working weight stayed at %.6f", bf16_to_float(work));
    ck_assert_msg(inplace == 1.0f, "a bf16 weight updated in place moved to %.6f: no stagnation to show", inplace);
}
END_TEST

START_TEST(adamw_first_step_by_hand) {
    float p[4] = {1.0f, -2.0f, 0.5f, 0.0f}, g[4] = {0.5f, -4.0f, 0.0f, 1e-8f};
    float m[4] = {0}, v[4] = {0};
    const float want[4] = {0.9989f, -1.9988f, 0.49995f, -0.0005f};
    ops_adamw(p, g, m, v, 4, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(fabsf(p[i] - want[i]) < 2e-7f, "p[%d] = %.9g, by hand %.9g", i, p[i], want[i]);
}
END_TEST

START_TEST(sgd_plain_and_momentum) {
    enum { N = 3 };
    const float lr = 0.1f, wd = 0.01f, mu = 0.9f;
    const float g1[N] = {1.0f, -2.0f, 0.5f}, g2[N] = {0.5f, 1.0f, -1.0f};
    float p[N] = {1.0f, 2.0f, -1.0f}, q[N] = {1.0f, 2.0f, -1.0f}, buf[N] = {0};
    double pd[N], qd[N], bd[N] = {0};
    for (int i = 0; i < N; i++) pd[i] = qd[i] = p[i];

    // Plain: p -= lr (g + wd p), twice; buf unused, so NULL.
    ops_sgd(p, g1, NULL, N, lr, 0.0f, wd);
    ops_sgd(p, g2, NULL, N, lr, 0.0f, wd);
    // Momentum: buf = mu buf + (g + wd p); p -= lr buf (torch.optim.SGD).
    ops_sgd(q, g1, buf, N, lr, mu, wd);
    ops_sgd(q, g2, buf, N, lr, mu, wd);
    for (int i = 0; i < N; i++) {
        pd[i] -= lr * (g1[i] + wd * pd[i]);
        pd[i] -= lr * (g2[i] + wd * pd[i]);
        bd[i] = g1[i] + wd * qd[i];
        qd[i] -= lr * bd[i];
        bd[i] = mu * bd[i] + g2[i] + wd * qd[i];
        qd[i] -= lr * bd[i];
        ck_assert_msg(fabs(p[i] - pd[i]) < 1e-6, "plain p[%d] %.9g vs %.9g", i, p[i], pd[i]);
        ck_assert_msg(fabs(q[i] - qd[i]) < 1e-6, "momentum p[%d] %.9g vs %.9g", i, q[i], qd[i]);
        ck_assert_msg(fabs(buf[i] - bd[i]) < 1e-6, "buf[%d] %.9g vs %.9g", i, buf[i], bd[i]);
    }
    // By hand, element 0's first plain step: 1 - 0.1 (1 + 0.01) = 0.899.
    float r = 1.0f;
    ops_sgd(&r, g1, NULL, 1, lr, 0.0f, wd);
    ck_assert_msg(fabsf(r - 0.899f) < 1e-7f, "one SGD step: %.9g, by hand 0.899", r);
}
END_TEST

// The other rounding (ops_set_rounding) is another rounding: the same
// products to within float rounding of the naive loops (the "alt" test case
// below runs every comparison of this file under it), but not the same
// floats as the native one, or the grader's yardstick would sample nothing.
START_TEST(alt_rounding_rounds_otherwise) {
    const int M = 64, K = 512, N = 128;
    float *inp = randn((size_t)M * K, 11, 0, 1), *w = randn((size_t)K * N, 12, 0, 1);
    float *a = zeros((size_t)M * N), *b = zeros((size_t)M * N);
    float *x = randn(4096, 13, 0, 3), *ga = zeros(4096), *gb = zeros(4096);
    float *dout = randn((size_t)M * N, 14, 0, 1);
    float *dia = zeros((size_t)M * K), *dib = zeros((size_t)M * K), *dwa = zeros((size_t)K * N), *dwb = zeros((size_t)K * N);
    ops_set_rounding(OPS_ROUNDING_NATIVE);
    ops_matmul_forward(a, inp, w, NULL, M, K, N);
    ops_matmul_backward(dia, dwa, NULL, dout, inp, w, M, K, N);
    ops_gelu_forward(ga, x, 4096);
    ops_set_rounding(OPS_ROUNDING_ALT);
    ck_assert_int_eq(ops_rounding(), OPS_ROUNDING_ALT);
    ops_matmul_forward(b, inp, w, NULL, M, K, N);
    ops_matmul_backward(dib, dwb, NULL, dout, inp, w, M, K, N);
    ops_gelu_forward(gb, x, 4096);
    ops_set_rounding(ops_rounding_default());
    // Each product against the other, over the scale of its sum (sqrt of
    // the inner dimension, the inputs being of unit size).
    const struct { const char *what; const float *p, *q; size_t n; int inner; } prod[] = {
        {"out", a, b, (size_t)M * N, K}, {"dinp", dia, dib, (size_t)M * K, N}, {"dw", dwa, dwb, (size_t)K * N, M}};
    for (int k = 0; k < 3; k++) {
        size_t differ = 0;
        double worst = 0;
        for (size_t i = 0; i < prod[k].n; i++) {
            differ += prod[k].p[i] != prod[k].q[i];
            worst = fmax(worst, fabs((double)prod[k].p[i] - prod[k].q[i]) / sqrt((double)prod[k].inner));
        }
        ck_assert_msg(differ > prod[k].n / 10, "split-K %s: only %zu of %zu elements round differently",
                      prod[k].what, differ, prod[k].n);
        ck_assert_msg(worst < 1e-5, "split-K %s differs by %.3g of its scale: more than rounding", prod[k].what, worst);
    }
    int gdiffer = 0;
    for (int i = 0; i < 4096; i++) gdiffer += ga[i] != gb[i];
    ck_assert_msg(gdiffer > 0, "libm's expf and vexpf gave the same GELU on 4096 inputs");
    free(inp), free(w), free(a), free(b), free(x), free(ga), free(gb), free(dout);
    free(dia), free(dib), free(dwa), free(dwb);
}
END_TEST

static void alt_setup(void) { ops_set_rounding(OPS_ROUNDING_ALT); }
static void alt_teardown(void) { ops_set_rounding(ops_rounding_default()); }

// The work counters (ops.h) against the shapes counted by hand: M K N
// multiply-adds a product, one for each gradient a backward computes,
// attention's two products of B T T C each way (four backward), a row per
// LayerNorm row; and a reset after the seal ends the run.
START_TEST(work_counts_what_was_asked) {
    const int M = 3, K = 4, N = 5, B = 2, T = 4, C = 8, NH = 2;
    float *a = zeros(64 * 64), *b = zeros(64 * 64), *c = zeros(64 * 64), *d = zeros(64 * 64), *e = zeros(64 * 64);
    float *att = zeros((size_t)B * NH * T * T), *sc = zeros((size_t)B * NH * T * T);
    ops_work_reset();
    ops_matmul_forward(c, a, b, NULL, M, K, N);
    ck_assert_double_eq(ops_work().matmul, (double)M * K * N);
    ops_matmul_backward(d, e, NULL, c, a, b, M, K, N);
    ck_assert_double_eq(ops_work().matmul, 3.0 * M * K * N);
    ops_matmul_backward(NULL, e, NULL, c, a, b, M, K, N);
    ck_assert_double_eq(ops_work().matmul, 4.0 * M * K * N);
    ops_work_reset();
    ops_attention_forward(c, att, a, b, d, B, T, C, NH);
    ops_attention_backward(e, e, e, sc, c, att, a, b, d, B, T, C, NH);
    ck_assert_double_eq(ops_work().matmul, 6.0 * B * T * T * C);
    ops_layernorm_forward(c, d, e, a, b, b, M, K);
    ops_layernorm_backward(NULL, NULL, NULL, c, a, b, d, e, M, K);
    ck_assert_double_eq(ops_work().layernorm, 2.0 * M);
    free(a), free(b), free(c), free(d), free(e), free(att), free(sc);
}
END_TEST

START_TEST(work_reset_after_the_seal_ends_the_run) {
    ops_work_seal();
    ops_work_reset();
}
END_TEST


static Suite *ops_suite(void) {
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, matmul_forward_matches_naive);
    tcase_add_test(tc, matmul_bf16_matches_naive);
    tcase_add_test(tc, matmul_bf16_partials_rounding_rounds_the_parts);
    tcase_add_test(tc, bf16_rounds_to_nearest_even);
    tcase_add_test(tc, work_counts_what_was_asked);
    tcase_add_exit_test(tc, work_reset_after_the_seal_ends_the_run, EXIT_CHECK);
    tcase_add_test(tc, matmul_backward_matches_finite_differences);
    tcase_add_test(tc, layernorm_forward_matches_naive);
    tcase_add_test(tc, layernorm_backward_matches_finite_differences);
    tcase_add_test(tc, gelu_matches_naive_and_finite_differences);
    tcase_add_test(tc, attention_forward_matches_naive);
    tcase_add_test(tc, attention_backward_matches_finite_differences);
    tcase_add_test(tc, attention_backward_by_blocks_matches_finite_differences);
    tcase_add_test(tc, attention_kernel_shapes_match_naive);
    tcase_add_test(tc, attention_kernel_backward_matches_finite_differences);
    tcase_add_test(tc, attention_propagates_nan);
    tcase_add_test(tc, embedding_matches_naive_and_finite_differences);
    tcase_add_test(tc, crossentropy_matches_naive_and_finite_differences);
    tcase_add_test(tc, crossentropy_is_stable_for_large_logits);
    tcase_add_test(tc, bias_matches_naive_and_finite_differences);
    tcase_add_test(tc, copy_and_accumulate_2d);
    tcase_add_test(tc, vocab_ids_rows_and_pick);
    tcase_add_exit_test(tc, rows_forward_id_out_of_range, EXIT_CHECK);
    tcase_add_exit_test(tc, rows_backward_id_out_of_range, EXIT_CHECK);
    tcase_add_exit_test(tc, pick_id_out_of_range, EXIT_CHECK);
    tcase_add_exit_test(tc, ce_parts_backward_id_out_of_range, EXIT_CHECK);
    tcase_add_test(tc, positions_match_naive_and_finite_differences);
    tcase_add_test(tc, vocab_split_embedding_equals_whole);
    tcase_add_test(tc, row_max_sumexp_pick_and_ce_from_parts_match_naive);
    tcase_add_test(tc, vocab_split_crossentropy_equals_whole);
    tcase_add_test(tc, ce_parts_backward_adds);
    tcase_add_test(tc, dropout_p0_is_exact_copy);
    tcase_add_test(tc, dropout_masks_as_documented);
    tcase_add_test(tc, dropout_backward_uses_the_same_mask);
    tcase_add_test(tc, dropout_slice_equals_slice_of_whole);
    tcase_add_exit_test(tc, dropout_step_out_of_range, EXIT_CHECK);
    tcase_add_test(tc, elementwise_and_reductions);
    tcase_add_test(tc, adamw_matches_closed_form);
    tcase_add_test(tc, adamw_mixed_is_adamw_on_the_master);
    tcase_add_test(tc, adamw_first_step_by_hand);
    tcase_add_test(tc, sgd_plain_and_momentum);
    tcase_add_test(tc, alt_rounding_rounds_otherwise);
    suite_add_tcase(s, tc);
    // The ops whose rounding ops_set_rounding changes, against the same naive
    // loops and finite differences, rounded the other way.
    TCase *alt = tcase_create("alt rounding");
    tcase_set_timeout(alt, 30);
    tcase_add_checked_fixture(alt, alt_setup, alt_teardown);
    tcase_add_test(alt, matmul_forward_matches_naive);
    // (The backward's finite differences hold too, but its "a second call
    // adds the same to the bit" does not: two adds into the gradient.)
    tcase_add_test(alt, gelu_matches_naive_and_finite_differences);
    tcase_add_test(alt, attention_forward_matches_naive);
    tcase_add_test(alt, attention_backward_matches_finite_differences);
    tcase_add_test(alt, attention_kernel_shapes_match_naive);
    tcase_add_test(alt, attention_kernel_backward_matches_finite_differences);
    tcase_add_test(alt, attention_propagates_nan);
    tcase_add_test(alt, crossentropy_matches_naive_and_finite_differences);
    tcase_add_test(alt, crossentropy_is_stable_for_large_logits);
    tcase_add_test(alt, row_max_sumexp_pick_and_ce_from_parts_match_naive);
    tcase_add_test(alt, vocab_split_crossentropy_equals_whole);
    tcase_add_test(alt, ce_parts_backward_adds);
    suite_add_tcase(s, alt);
    return s;
}

int main(void) {
    mem_init("cpu", 0);
    ops_init();
    return test_run_suite(ops_suite());
}
