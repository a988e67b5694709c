// sgemm_rate.c: this machine's one-thread sgemm rate at the shapes of the
// reference model's matrix products (forward and both backward products of
// every layer), the ceiling for the reference trainer's speed; and the same
// products of bf16 inputs as ops.h makes them on the CPU (widened to fp32,
// then sgemm), against sgemm's.
//   build/sgemm_rate [--seq 64 --batch 8 --dim 128 --vocab 256]
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "core.h"
#include "mem.h"
#include "ops.h"
#include "rng.h"

// Time C (M, N) = A (M, K) @ B (K, N) in the three forms a layer needs:
// forward, dinp = dout @ W^T, dW = inp^T @ dout. Returns seconds per triple.
static double time_layer(int M, int K, int N, int reps) {
    float *inp = malloc((size_t)M * K * sizeof(float));
    float *w = malloc((size_t)K * N * sizeof(float));
    float *out = malloc((size_t)M * N * sizeof(float));
    float *dw = malloc((size_t)K * N * sizeof(float));
    rng_fill_normal(inp, (size_t)M * K, 1, 0, 0, 0, 1);
    rng_fill_normal(w, (size_t)K * N, 1, 1, 0, 0, 1);
    rng_fill_normal(out, (size_t)M * N, 1, 2, 0, 0, 1);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = core_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, inp, K, w, N, 0, out, N);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, K, N, 1, out, N, w, N, 1, inp, K);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, M, 1, inp, K, out, N, 1, dw, N);
        double dt = core_now() - t0;
        if (dt < best) best = dt;
    }
    free(inp);
    free(w);
    free(out);
    free(dw);
    return best;
}

// The same three products through ops.h, from bf16 inputs (fp32 outputs).
static double time_layer_bf16(int M, int K, int N, int reps) {
    float *f = malloc((size_t)(M > K ? M : K) * (K > N ? K : N) * sizeof(float));
    bf16 *inp = malloc((size_t)M * K * sizeof(bf16)), *w = malloc((size_t)K * N * sizeof(bf16)),
         *dout = malloc((size_t)M * N * sizeof(bf16));
    float *out = malloc((size_t)M * N * sizeof(float)), *dinp = calloc((size_t)M * K, sizeof(float)),
          *dw = calloc((size_t)K * N, sizeof(float));
    rng_fill_normal(f, (size_t)M * K, 1, 0, 0, 0, 1);
    ops_to_bf16(inp, f, (size_t)M * K);
    rng_fill_normal(f, (size_t)K * N, 1, 1, 0, 0, 1);
    ops_to_bf16(w, f, (size_t)K * N);
    rng_fill_normal(f, (size_t)M * N, 1, 2, 0, 0, 1);
    ops_to_bf16(dout, f, (size_t)M * N);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = core_now();
        ops_matmul_forward_bf16(out, inp, w, NULL, M, K, N);
        ops_matmul_backward_bf16(dinp, dw, NULL, dout, inp, w, M, K, N);
        double dt = core_now() - t0;
        if (dt < best) best = dt;
    }
    free(f), free(inp), free(w), free(dout), free(out), free(dinp), free(dw);
    return best;
}

int main(int argc, char **argv) {
    Args a = args_defaults();
    args_parse(&a, argc, argv, "One-thread sgemm rate at the reference model's shapes.", NULL);
    openblas_set_num_threads(1);
    int M = a.batch * a.seq, C = a.dim, V = a.vocab;
    // Per block: q, k, v, o (C x C), w1 (C x 4C), w2 (4C x C); then the head (C x V).
    struct { int K, N, per_model; } layers[] = {
        {C, C, 4 * a.layers}, {C, 4 * C, a.layers}, {4 * C, C, a.layers}, {C, V, 1}};
    double flops = 0, seconds = 0;
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        double t = time_layer(M, layers[i].K, layers[i].N, 30);
        double f = 6.0 * M * layers[i].K * layers[i].N;
        printf("sgemm %4d x %4d x %4d (fwd + 2 bwd): %6.1f GFLOP/s\n", M, layers[i].K, layers[i].N,
               f / t / 1e9);
        flops += f * layers[i].per_model;
        seconds += t * layers[i].per_model;
    }
    printf("sgemm rate over one training step's products: %.1f GFLOP/s (1 thread)\n",
           flops / seconds / 1e9);
    mem_init("cpu", 0);
    ops_init();
    double seconds16 = 0;
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        seconds16 += time_layer_bf16(M, layers[i].K, layers[i].N, 30) * layers[i].per_model;
    printf("bf16 inputs (widened, then sgemm) over the same products: %.1f GFLOP/s, x%.2f of sgemm's time\n",
           flops / seconds16 / 1e9, seconds16 / seconds);
    return 0;
}
