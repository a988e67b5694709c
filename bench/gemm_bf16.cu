// gemm_bf16.cu: the bf16 matrix-product rate of this GPU (cuBLAS, fp32
// accumulation) at the per-GPU shapes of a tensor-parallel transformer
// layer: the "stated efficiency" build/plan divides the model's FLOPs by
// (docs/plan.md). Each shape is timed as a layer runs it: the forward
// product and the two backward ones (input and weight gradients).
//   nvcc -O2 bench/gemm_bf16.cu -lcublas -o build/gemm_bf16 && build/gemm_bf16
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x) do { if ((x) != 0) { fprintf(stderr, "%s failed at line %d\n", #x, __LINE__); exit(1); } } while (0)

// Seconds for out (M, N) = inp (M, K) w (K, N), dinp = dout w^T, dw = inp^T dout (column-major views).
static double layer(cublasHandle_t h, int M, int K, int N, int reps) {
    __nv_bfloat16 *a, *b, *c, *d, *e;
    CK(cudaMalloc(&a, (size_t)M * K * 2)); CK(cudaMalloc(&b, (size_t)K * N * 2));
    CK(cudaMalloc(&c, (size_t)M * N * 2)); CK(cudaMalloc(&d, (size_t)M * K * 2)); CK(cudaMalloc(&e, (size_t)K * N * 2));
    CK(cudaMemset(a, 0, (size_t)M * K * 2)); CK(cudaMemset(b, 0, (size_t)K * N * 2)); CK(cudaMemset(c, 0, (size_t)M * N * 2));
    float one = 1, zero = 0;
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0)); CK(cudaEventCreate(&t1));
    float best = 1e30f;
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(t0));
        // Row-major out = inp w is column-major out^T = w^T inp^T.
        CK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, b, CUDA_R_16BF, N, a, CUDA_R_16BF, K, &zero, c,
                        CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, K, M, N, &one, b, CUDA_R_16BF, N, c, CUDA_R_16BF, N, &zero, d,
                        CUDA_R_16BF, K, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, N, K, M, &one, c, CUDA_R_16BF, N, a, CUDA_R_16BF, K, &zero, e,
                        CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CK(cudaEventRecord(t1));
        CK(cudaEventSynchronize(t1));
        float ms;
        CK(cudaEventElapsedTime(&ms, t0, t1));
        if (r > 0 && ms < best) best = ms;   // the first is the warm-up
    }
    cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(d); cudaFree(e);
    return best / 1e3;
}

int main(void) {
    cublasHandle_t h;
    CK(cublasCreate(&h));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    // name, tokens M, then the layer's products (K, N) at t = 8.
    struct { const char *name; int M, n; int kn[4][2]; } shapes[] = {
        {"square 8192", 8192, 1, {{8192, 8192}}},
        {"Llama 3 405B layer, t 8, 8192 tokens", 8192, 4, {{16384, 2304}, {2048, 16384}, {16384, 13312}, {6656, 16384}}},
        {"Llama 3 70B layer, t 8, 8192 tokens", 8192, 4, {{8192, 1280}, {1024, 8192}, {8192, 7168}, {3584, 8192}}},
        {"GPT-3 175B layer, t 8, 2048 tokens", 2048, 4, {{12288, 4608}, {1536, 12288}, {12288, 6144}, {6144, 12288}}},
    };
    printf("%s: bf16 products, fp32 accumulation (cuBLAS), best of 10 after a warm-up\n", p.name);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        double flops = 0, sec = 0;
        for (int j = 0; j < shapes[i].n; j++) {
            int M = shapes[i].M, K = shapes[i].kn[j][0], N = shapes[i].kn[j][1];
            sec += layer(h, M, K, N, 11);
            flops += 3 * 2.0 * M * K * N;
        }
        printf("%-40s %7.1f TFLOP/s  (%.1f%% of 989)\n", shapes[i].name, flops / sec / 1e12, flops / sec / 989e10);
    }
    return 0;
}
