// sgemm_rate.c: this machine's one-thread sgemm rate at the shapes of the
// reference model's matrix products (forward and both backward products of
// every layer), the ceiling for the reference trainer's speed.
//   build/sgemm_rate [--seq 64 --batch 8 --dim 128 --vocab 256]
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "core.h"
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
    return 0;
}
