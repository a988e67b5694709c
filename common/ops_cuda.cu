// ops_cuda.cu: the CUDA kernels of every operation of ops.h (see ops_cuda.h).
//
// The matrix products, the two inside attention too, go to cuBLAS: they are
// nearly all of the arithmetic. Everything else is a plain kernel in the
// manner of llm.c's: one thread per output element, or one warp (32 threads)
// per row where a row is reduced (a max, a sum). Every kernel and every
// cuBLAS call runs on the default stream, in order with each other and with
// mem.c's copies, so an op waits for nothing but what it reads back to the
// host (the sums, and the checks on ids).
//
// What keeps the GPU's numbers comparable with the CPU's (build/gpu_check):
// - every column sum (the bias, LayerNorm and position gradients) and every
//   sum to the host adds in a fixed order, without atomics, so ranks that
//   compute the same replicated gradient get the same bits. Only the rows of
//   an embedding table (a token may appear any number of times) are added
//   with atomicAdd, whose order varies from run to run;
// - dropout draws its mask with philox.h, the code rng.c runs: the same bits;
// - the products run in full fp32 unless TF32 is asked for (ops_set_tf32).
// The rest differs from the CPU by rounding: sums in another order, expf and
// logf of the GPU, and the fused multiply-adds nvcc makes.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>

extern "C" {
#include "bf16.h"
#include "core.h"
#include "ops_cuda.h"
}
#include "cuda_check.h"
#include "philox.h"

#define CUBLAS_CHECK(call)                                                            \
    do {                                                                              \
        cublasStatus_t st_ = (call);                                                  \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                             \
            core_fail(__FILE__, __LINE__, "%s failed: %s", #call, cublasGetStatusString(st_)); \
    } while (0)

// A kernel launch reports a bad configuration at once; a fault inside the
// kernel shows at the next call that waits for it (a copy to the host).
#define LAUNCHED() CUDA_CHECK(cudaGetLastError())

static cublasHandle_t g_cublas;
static bool g_tf32;          // TF32 for the products (ops_set_tf32)
static int *g_bad_row;       // (1) on the device: the first row with a bad id, INT_MAX when none
static double *g_partials;   // (SUM_BLOCKS) on the device: ops_cuda_sum's partial sums

// Threads per block: one thread per element, or WARPS rows of one warp each.
enum { THREADS = 256, WARPS = THREADS / 32 };
// Blocks of ops_cuda_sum: fixed, so that the sum adds in the same order on every GPU.
enum { SUM_BLOCKS = 256 };

static unsigned blocks_for(size_t n) { return (unsigned)((n + THREADS - 1) / THREADS); }
static unsigned blocks_for_rows(int rows) { return (unsigned)((rows + WARPS - 1) / WARPS); }

extern "C" void ops_cuda_init(void) {
    if (g_cublas) return;
    CUBLAS_CHECK(cublasCreate(&g_cublas));
    CUDA_CHECK(cudaMalloc(&g_bad_row, sizeof *g_bad_row));
    const int none = INT_MAX;
    CUDA_CHECK(cudaMemcpy(g_bad_row, &none, sizeof none, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMalloc(&g_partials, SUM_BLOCKS * sizeof *g_partials));
}

extern "C" void ops_cuda_set_tf32(bool on) { g_tf32 = on; }

// ---- reductions inside a warp ------------------------------------------------
// A butterfly over the 32 lanes: every lane ends with the result, and since
// a + b == b + a in floating point, every lane holds the same bits.

__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ double warp_sum_double(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// ---- checks on ids -------------------------------------------------------------
// A kernel that meets a bad id records its row (the smallest such row wins,
// as the CPU's loop stops at the first) and goes on without reading through
// it; the host then reads the row back and stops the run with the CPU's
// message (ops.c's checks), so the two devices fail alike.

__device__ void flag_bad_row(int *bad_row, int m) { atomicMin(bad_row, m); }

// The first row flagged since the last call, or -1; the flag is cleared.
static int take_bad_row(void) {
    int row = INT_MAX;
    CUDA_CHECK(cudaMemcpy(&row, g_bad_row, sizeof row, cudaMemcpyDeviceToHost));
    if (row == INT_MAX) return -1;
    const int none = INT_MAX;
    CUDA_CHECK(cudaMemcpy(g_bad_row, &none, sizeof none, cudaMemcpyHostToDevice));
    return row;
}

// ids (M) on the device were to be in [-1, n): stop as the CPU does if not.
static void check_ids(const char *op, const int *ids, int n) {
    int row = take_bad_row();
    if (row < 0) return;
    int id = 0;
    CUDA_CHECK(cudaMemcpy(&id, ids + row, sizeof id, cudaMemcpyDeviceToHost));
    ops_check_id(op, id, row, n);
}

// ---- column sums, in a fixed order -----------------------------------------------

// out (N) += the column sums of x (M, N).
// Block (32, 32): threadIdx.x is one of 32 adjacent columns (the reads of a
// row are side by side), threadIdx.y one of 32 strides of rows; each thread
// adds rows y, y + 32, y + 64, ... of its column, then thread y = 0 adds the
// 32 partial sums in order. No atomics: the same input gives the same bits.
__device__ inline float widen(float x) { return x; }
__device__ inline float widen(bf16 x) { return bf16_to_float(x); }

template <typename T>
__global__ void column_sums_kernel(float *out, const T *x, int M, int N) {
    __shared__ float part[32][33];   // 33: no two threads of a warp on one bank
    int n = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (n < N)
        for (int m = threadIdx.y; m < M; m += 32) s += widen(x[(size_t)m * N + n]);
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && n < N) {
        float total = 0.0f;
        for (int y = 0; y < 32; y++) total += part[y][threadIdx.x];
        out[n] += total;
    }
}

template <typename T>
static void column_sums(float *out, const T *x, int M, int N) {
    if (M == 0 || N == 0) return;
    column_sums_kernel<T><<<(N + 31) / 32, dim3(32, 32)>>>(out, x, M, N);
    LAUNCHED();
}

// ---- matrix product ----------------------------------------------------------------

// Row-major C (M, N) = alpha op(A) op(B) + beta C, as cblas_sgemm(CblasRowMajor,
// ...) computes it, `count` times over matrices sA, sB, sC floats apart
// (count 1: one product). cuBLAS is column-major, and a row-major matrix read
// as column-major is its transpose: C^T = op(B)^T op(A)^T, so the operands
// trade places, and M and N with them.
// A and B of `type` (fp32, or bf16: fp32 accumulation either way), C fp32.
static void gemm_of(cudaDataType_t type, bool transA, bool transB, int M, int N, int K, float alpha,
                    const void *A, int lda, long long sA, const void *B, int ldb, long long sB, float beta,
                    float *C, int ldc, long long sC, int count) {
    if (M == 0 || N == 0 || count == 0) return;
    cublasComputeType_t compute = g_tf32 && type == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        g_cublas, transB ? CUBLAS_OP_T : CUBLAS_OP_N, transA ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
        &alpha, B, type, ldb, sB, A, type, lda, sA, &beta, C, CUDA_R_32F, ldc, sC,
        count, compute, CUBLAS_GEMM_DEFAULT));
}

static void gemm(bool transA, bool transB, int M, int N, int K, float alpha, const float *A,
                 int lda, long long sA, const float *B, int ldb, long long sB, float beta, float *C,
                 int ldc, long long sC, int count) {
    gemm_of(CUDA_R_32F, transA, transB, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, count);
}

// out (M, N) = bias on every row. One thread per element.
__global__ void fill_rows_kernel(float *out, const float *bias, int M, int N) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)M * N) out[i] = bias[i % N];
}

// A product's forward and backward with inputs of `type` (fp32, or bf16),
// fp32 accumulation and outputs. As the CPU: every row of out starts at the
// bias and the product is added on it.
static void matmul_forward_of(cudaDataType_t type, float *out, const void *inp, const void *w, const float *bias,
                              int M, int K, int N) {
    float beta = 0.0f;
    if (bias && (size_t)M * N > 0) {
        fill_rows_kernel<<<blocks_for((size_t)M * N), THREADS>>>(out, bias, M, N);
        LAUNCHED();
        beta = 1.0f;
    }
    gemm_of(type, false, false, M, N, K, 1.0f, inp, K, 0, w, N, 0, beta, out, N, 0, 1);
}

template <typename T>
static void matmul_backward_of(cudaDataType_t type, float *dinp, float *dw, float *dbias, const T *dout,
                               const T *inp, const T *w, int M, int K, int N) {
    // dinp (M, K) += dout (M, N) @ w^T (N, K)
    if (dinp) gemm_of(type, false, true, M, K, N, 1.0f, dout, N, 0, w, N, 0, 1.0f, dinp, K, 0, 1);
    // dw (K, N) += inp^T (K, M) @ dout (M, N)
    if (dw) gemm_of(type, true, false, K, N, M, 1.0f, inp, K, 0, dout, N, 0, 1.0f, dw, N, 0, 1);
    if (dbias) column_sums(dbias, dout, M, N);
}

extern "C" void ops_cuda_matmul_forward(float *out, const float *inp, const float *w,
                                        const float *bias, int M, int K, int N) {
    matmul_forward_of(CUDA_R_32F, out, inp, w, bias, M, K, N);
}

extern "C" void ops_cuda_matmul_backward(float *dinp, float *dw, float *dbias, const float *dout,
                                         const float *inp, const float *w, int M, int K, int N) {
    matmul_backward_of(CUDA_R_32F, dinp, dw, dbias, dout, inp, w, M, K, N);
}

// bf16 inputs: cuBLAS's bf16 products with fp32 compute.
extern "C" void ops_cuda_matmul_forward_bf16(float *out, const uint16_t *inp, const uint16_t *w,
                                             const float *bias, int M, int K, int N) {
    matmul_forward_of(CUDA_R_16BF, out, inp, w, bias, M, K, N);
}

extern "C" void ops_cuda_matmul_backward_bf16(float *dinp, float *dw, float *dbias, const uint16_t *dout,
                                              const uint16_t *inp, const uint16_t *w, int M, int K, int N) {
    matmul_backward_of<bf16>(CUDA_R_16BF, dinp, dw, dbias, dout, inp, w, M, K, N);
}

// ---- elementwise: one thread per element -------------------------------------------

__global__ void add_kernel(float *out, const float *a, const float *b, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(float *y, const float *x, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}

__global__ void scale_kernel(float *x, float s, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
}

__global__ void fill_kernel(float *x, float v, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}

extern "C" void ops_cuda_add(float *out, const float *a, const float *b, size_t n) {
    if (n == 0) return;
    add_kernel<<<blocks_for(n), THREADS>>>(out, a, b, n);
    LAUNCHED();
}

extern "C" void ops_cuda_accumulate(float *y, const float *x, size_t n) {
    if (n == 0) return;
    accumulate_kernel<<<blocks_for(n), THREADS>>>(y, x, n);
    LAUNCHED();
}

extern "C" void ops_cuda_scale(float *x, float s, size_t n) {
    if (n == 0) return;
    scale_kernel<<<blocks_for(n), THREADS>>>(x, s, n);
    LAUNCHED();
}

extern "C" void ops_cuda_fill(float *x, float v, size_t n) {
    if (n == 0) return;
    fill_kernel<<<blocks_for(n), THREADS>>>(x, v, n);
    LAUNCHED();
}

// bf16.h's conversions, the same lines as the CPU's.
__global__ void to_bf16_kernel(bf16 *out, const float *x, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = bf16_from_float(x[i]);
}

__global__ void from_bf16_kernel(float *out, const bf16 *x, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = bf16_to_float(x[i]);
}

__global__ void accumulate_bf16_kernel(bf16 *y, const float *x, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = bf16_from_float(bf16_to_float(y[i]) + x[i]);
}

extern "C" void ops_cuda_accumulate_bf16(uint16_t *y, const float *x, size_t n) {
    if (n == 0) return;
    accumulate_bf16_kernel<<<blocks_for(n), THREADS>>>(y, x, n);
    LAUNCHED();
}

extern "C" void ops_cuda_to_bf16(uint16_t *out, const float *x, size_t n) {
    if (n == 0) return;
    to_bf16_kernel<<<blocks_for(n), THREADS>>>(out, x, n);
    LAUNCHED();
}

extern "C" void ops_cuda_from_bf16(float *out, const uint16_t *x, size_t n) {
    if (n == 0) return;
    from_bf16_kernel<<<blocks_for(n), THREADS>>>(out, x, n);
    LAUNCHED();
}

// GELU, tanh form, written as ops.c writes it: 0.5 (1 + tanh u) is the
// logistic sigmoid of 2u, so gelu(x) = x s with s = 1 / (1 + exp(-2u)) and
// u = sqrt(2/pi) (x + 0.044715 x^3).
constexpr float GELU_K = 0.7978845608028654f;   // sqrt(2/pi)
constexpr float GELU_A = 0.044715f;

__global__ void gelu_forward_kernel(float *out, const float *x, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float xi = x[i];
    float u = GELU_K * (xi + GELU_A * xi * xi * xi);
    out[i] = xi / (1.0f + expf(-2.0f * u));
}

// d/dx [x s(2u)] = s + x s (1 - s) 2 du/dx, du/dx = k (1 + 3 a x^2).
__global__ void gelu_backward_kernel(float *dx, const float *dout, const float *x, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float xi = x[i];
    float u = GELU_K * (xi + GELU_A * xi * xi * xi);
    float s = 1.0f / (1.0f + expf(-2.0f * u));
    float du = GELU_K * (1.0f + 3.0f * GELU_A * xi * xi);
    dx[i] += (s + 2.0f * xi * s * (1.0f - s) * du) * dout[i];
}

extern "C" void ops_cuda_gelu_forward(float *out, const float *x, size_t n) {
    if (n == 0) return;
    gelu_forward_kernel<<<blocks_for(n), THREADS>>>(out, x, n);
    LAUNCHED();
}

extern "C" void ops_cuda_gelu_backward(float *dx, const float *dout, const float *x, size_t n) {
    if (n == 0 || !dx) return;
    gelu_backward_kernel<<<blocks_for(n), THREADS>>>(dx, dout, x, n);
    LAUNCHED();
}

// ---- layer norm ----------------------------------------------------------------------

constexpr float LN_EPS = 1e-5f;

// One warp per row of x (M, C): the lanes take every 32nd channel. Mean,
// then the variance around it, in double, as the CPU computes them.
__global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *x,
                                         const float *w, const float *b, int M, int C) {
    int m = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (m >= M) return;
    const float *xr = x + (size_t)m * C;   // (C)
    float *outr = out + (size_t)m * C;     // (C)
    double sum = 0.0;
    for (int c = lane; c < C; c += 32) sum += xr[c];
    float mu = (float)(warp_sum_double(sum) / C);
    double sq = 0.0;
    for (int c = lane; c < C; c += 32) {
        float d = xr[c] - mu;
        sq += d * d;
    }
    float rs = (float)(1.0 / sqrt(warp_sum_double(sq) / C + LN_EPS));
    for (int c = lane; c < C; c += 32) outr[c] = (xr[c] - mu) * rs * w[c] + b[c];
    if (lane == 0) {
        mean[m] = mu;
        rstd[m] = rs;
    }
}

// dx (M, C) += rstd (dn - mean(dn) - n mean(dn n)), dn = dout w, n the
// normalized x (llm.c's form). One warp per row, the lanes over channels.
__global__ void layernorm_backward_dx_kernel(float *dx, const float *dout, const float *x,
                                             const float *w, const float *mean,
                                             const float *rstd, int M, int C) {
    int m = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (m >= M) return;
    const float *doutr = dout + (size_t)m * C;   // (C)
    const float *xr = x + (size_t)m * C;         // (C)
    float *dxr = dx + (size_t)m * C;             // (C)
    float mu = mean[m], rs = rstd[m];
    float dn_mean = 0.0f, dn_n_mean = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float n = (xr[c] - mu) * rs;
        float dn = w[c] * doutr[c];
        dn_mean += dn;
        dn_n_mean += dn * n;
    }
    dn_mean = warp_sum(dn_mean) / C;
    dn_n_mean = warp_sum(dn_n_mean) / C;
    for (int c = lane; c < C; c += 32) {
        float n = (xr[c] - mu) * rs;
        float dn = w[c] * doutr[c];
        dxr[c] += rs * (dn - dn_mean - n * dn_n_mean);
    }
}

// dw (C) += column sums of n * dout, db (C) += column sums of dout, over the
// M rows; either may be NULL. The layout and the fixed order of
// column_sums_kernel: block (32, 32), x a column, y a stride of rows.
__global__ void layernorm_param_grads_kernel(float *dw, float *db, const float *dout,
                                             const float *x, const float *mean, const float *rstd,
                                             int M, int C) {
    __shared__ float part_w[32][33], part_b[32][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    float sw = 0.0f, sb = 0.0f;
    if (c < C)
        for (int m = threadIdx.y; m < M; m += 32) {
            size_t i = (size_t)m * C + c;
            sw += (x[i] - mean[m]) * rstd[m] * dout[i];
            sb += dout[i];
        }
    part_w[threadIdx.y][threadIdx.x] = sw;
    part_b[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float tw = 0.0f, tb = 0.0f;
        for (int y = 0; y < 32; y++) {
            tw += part_w[y][threadIdx.x];
            tb += part_b[y][threadIdx.x];
        }
        if (dw) dw[c] += tw;
        if (db) db[c] += tb;
    }
}

extern "C" void ops_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *x,
                                           const float *w, const float *b, int M, int C) {
    if (M == 0) return;
    layernorm_forward_kernel<<<blocks_for_rows(M), THREADS>>>(out, mean, rstd, x, w, b, M, C);
    LAUNCHED();
}

extern "C" void ops_cuda_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
                                            const float *x, const float *w, const float *mean,
                                            const float *rstd, int M, int C) {
    if (M == 0 || C == 0) return;
    if (dw || db) {
        layernorm_param_grads_kernel<<<(C + 31) / 32, dim3(32, 32)>>>(dw, db, dout, x, mean, rstd,
                                                                      M, C);
        LAUNCHED();
    }
    if (dx) {
        layernorm_backward_dx_kernel<<<blocks_for_rows(M), THREADS>>>(dx, dout, x, w, mean, rstd,
                                                                      M, C);
        LAUNCHED();
    }
}

// ---- causal multi-head self-attention ------------------------------------------------
//
// Head h of batch row b is a (T, hs) matrix inside q: it starts at
// q + b T C + h hs and its rows are C floats apart. For one batch row the NH
// heads are NH matrices hs floats apart, and att's NH (T, T) blocks are T*T
// apart: one strided batched product per batch row covers every head.

// Softmax of row t of each (T, T) block over the past s <= t, in place; the
// future gets exactly 0. One warp per row of att (B*NH*T rows).
__global__ void causal_softmax_kernel(float *att, int rows, int T) {
    int r = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= rows) return;
    int t = r % T;
    float *row = att + (size_t)r * T;   // (T)
    float mx = -INFINITY;
    for (int s = lane; s <= t; s += 32) mx = fmaxf(mx, row[s]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int s = lane; s <= t; s += 32) {
        float e = expf(row[s] - mx);
        row[s] = e;
        sum += e;
    }
    float inv = 1.0f / warp_sum(sum);
    for (int s = lane; s < T; s += 32) row[s] = s <= t ? row[s] * inv : 0.0f;
}

// Softmax backward in place, d holding datt on entry and dscores on exit:
// dscores[s] = att[s] (datt[s] - sum_s' att[s'] datt[s']), 0 above the
// diagonal. One warp per row (B*NH*T rows).
__global__ void softmax_backward_kernel(float *d, const float *att, int rows, int T) {
    int r = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= rows) return;
    int t = r % T;
    const float *ar = att + (size_t)r * T;   // (T)
    float *dr = d + (size_t)r * T;           // (T)
    float dot = 0.0f;
    for (int s = lane; s <= t; s += 32) dot += ar[s] * dr[s];
    dot = warp_sum(dot);
    for (int s = lane; s < T; s += 32) dr[s] = s <= t ? ar[s] * (dr[s] - dot) : 0.0f;
}

extern "C" void ops_cuda_attention_forward(float *out, float *att, const float *q, const float *k,
                                           const float *v, int B, int T, int C, int NH) {
    if (B == 0 || T == 0) return;
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    long long TT = (long long)T * T;
    // scores (NH, T, T) = scale q_h k_h^T, each batch row's heads at once
    for (int b = 0; b < B; b++) {
        size_t off = (size_t)b * T * C;
        gemm(false, true, T, T, hs, scale, q + off, C, hs, k + off, C, hs, 0.0f,
             att + (size_t)b * NH * TT, T, TT, NH);
    }
    int rows = B * NH * T;
    causal_softmax_kernel<<<blocks_for_rows(rows), THREADS>>>(att, rows, T);
    LAUNCHED();
    // out_h (T, hs) = att (T, T) @ v_h (T, hs)
    for (int b = 0; b < B; b++) {
        size_t off = (size_t)b * T * C;
        gemm(false, false, T, hs, T, 1.0f, att + (size_t)b * NH * TT, T, TT, v + off, C, hs, 0.0f,
             out + off, C, hs, NH);
    }
}

extern "C" void ops_cuda_attention_backward(float *dq, float *dk, float *dv, float *scratch,
                                            const float *dout, const float *att, const float *q,
                                            const float *k, const float *v, int B, int T, int C,
                                            int NH) {
    if (B == 0 || T == 0) return;
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        size_t off = (size_t)b * T * C;
        const float *a = att + (size_t)b * NH * TT;   // (NH, T, T) probabilities
        float *d = scratch + (size_t)b * NH * TT;     // (NH, T, T) datt, then dscores
        // dv_h (T, hs) += att^T (T, T) @ dout_h (T, hs)
        if (dv)
            gemm(true, false, T, hs, T, 1.0f, a, T, TT, dout + off, C, hs, 1.0f, dv + off, C, hs,
                 NH);
        // datt (T, T) = dout_h (T, hs) @ v_h^T (hs, T)
        if (dq || dk)
            gemm(false, true, T, T, hs, 1.0f, dout + off, C, hs, v + off, C, hs, 0.0f, d, T, TT,
                 NH);
    }
    if (!dq && !dk) return;
    int rows = B * NH * T;
    softmax_backward_kernel<<<blocks_for_rows(rows), THREADS>>>(scratch, att, rows, T);
    LAUNCHED();
    // scores = scale q k^T, so dq += scale dscores k, dk += scale dscores^T q.
    for (int b = 0; b < B; b++) {
        size_t off = (size_t)b * T * C;
        const float *d = scratch + (size_t)b * NH * TT;   // (NH, T, T) dscores
        if (dq)
            gemm(false, false, T, hs, T, scale, d, T, TT, k + off, C, hs, 1.0f, dq + off, C, hs,
                 NH);
        if (dk)
            gemm(true, false, T, hs, T, scale, d, T, TT, q + off, C, hs, 1.0f, dk + off, C, hs,
                 NH);
    }
}

// ---- embeddings ----------------------------------------------------------------------

// out (B, T, C) = wte[tokens[b, t]] + wpe[pos0 + t]. One thread per element.
__global__ void embedding_forward_kernel(float *out, const int *tokens, const float *wte,
                                         const float *wpe, int B, int T, int C, int pos0) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * T * C) return;
    size_t bt = i / C;
    int c = (int)(i % C), t = (int)(bt % T);
    out[i] = wte[(size_t)tokens[bt] * C + c] + wpe[(size_t)(pos0 + t) * C + c];
}

// dwte[tokens[m]] (C) += dout[m] (M = B*T rows). One thread per element of
// dout; atomicAdd, since a token may appear many times (the order of those
// additions varies: the one place where the GPU's sums are not in a fixed order).
__global__ void embedding_dwte_kernel(float *dwte, const float *dout, const int *tokens, int M,
                                      int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * C) return;
    atomicAdd(dwte + (size_t)tokens[i / C] * C + i % C, dout[i]);
}

extern "C" void ops_cuda_embedding_forward(float *out, const int *tokens, const float *wte,
                                           const float *wpe, int B, int T, int C, int pos0) {
    size_t n = (size_t)B * T * C;
    if (n == 0) return;
    embedding_forward_kernel<<<blocks_for(n), THREADS>>>(out, tokens, wte, wpe, B, T, C, pos0);
    LAUNCHED();
}

extern "C" void ops_cuda_embedding_backward(float *dwte, float *dwpe, const float *dout,
                                            const int *tokens, int B, int T, int C, int pos0) {
    size_t n = (size_t)B * T * C;
    if (n == 0) return;
    if (dwte) {
        embedding_dwte_kernel<<<blocks_for(n), THREADS>>>(dwte, dout, tokens, B * T, C);
        LAUNCHED();
    }
    // dwpe[pos0 + t] += sum over b of dout[b, t]: the column sums of dout
    // seen as B rows of T*C.
    if (dwpe) column_sums(dwpe + (size_t)pos0 * C, dout, B, T * C);
}

// ---- softmax cross-entropy -------------------------------------------------------------

// probs (M, V) = softmax(logits), losses (M) = log sum - (logit_y - max).
// One warp per row, the lanes over the vocabulary. A target outside [0, V)
// is flagged, and its loss not computed.
__global__ void crossentropy_forward_kernel(float *losses, float *probs, const float *logits,
                                            const int *targets, int M, int V, int *bad_row) {
    int m = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (m >= M) return;
    const float *lr = logits + (size_t)m * V;   // (V)
    float *pr = probs + (size_t)m * V;          // (V)
    float mx = -INFINITY;
    for (int v = lane; v < V; v += 32) mx = fmaxf(mx, lr[v]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int v = lane; v < V; v += 32) {
        float e = expf(lr[v] - mx);
        pr[v] = e;
        sum += e;
    }
    sum = warp_sum(sum);
    float inv = 1.0f / sum;
    for (int v = lane; v < V; v += 32) pr[v] *= inv;
    if (lane != 0) return;
    int y = targets[m];
    if (y < 0 || y >= V)
        flag_bad_row(bad_row, m);
    else
        losses[m] = logf(sum) - (lr[y] - mx);
}

// dlogits (M, V) += scale (probs - onehot(targets)). One thread per element.
__global__ void crossentropy_backward_kernel(float *dlogits, const float *probs,
                                             const int *targets, float scale, int M, int V) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * V) return;
    int m = (int)(i / V), v = (int)(i % V);
    dlogits[i] += scale * (probs[i] - (v == targets[m] ? 1.0f : 0.0f));
}

extern "C" void ops_cuda_crossentropy_forward(float *losses, float *probs, const float *logits,
                                              const int *targets, int M, int V) {
    if (M == 0) return;
    crossentropy_forward_kernel<<<blocks_for_rows(M), THREADS>>>(losses, probs, logits, targets,
                                                                 M, V, g_bad_row);
    LAUNCHED();
    int row = take_bad_row();
    if (row < 0) return;
    int y = 0;
    CUDA_CHECK(cudaMemcpy(&y, targets + row, sizeof y, cudaMemcpyDeviceToHost));
    ops_check_target(y, row, V);
}

extern "C" void ops_cuda_crossentropy_backward(float *dlogits, const float *probs,
                                               const int *targets, float scale, int M, int V) {
    size_t n = (size_t)M * V;
    if (n == 0 || !dlogits) return;
    crossentropy_backward_kernel<<<blocks_for(n), THREADS>>>(dlogits, probs, targets, scale, M, V);
    LAUNCHED();
}

// ---- pieces of split layers --------------------------------------------------------------

// out (M, N) += bias (N) on every row. One thread per element.
__global__ void add_bias_kernel(float *out, const float *bias, int M, int N) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)M * N) out[i] += bias[i % N];
}

// dst[r * dst_ld + c] += src[r * src_ld + c]. One thread per element of the
// rows x cols block.
__global__ void accumulate_2d_kernel(float *dst, int dst_ld, const float *src, int src_ld,
                                     int rows, int cols) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * cols) return;
    size_t r = i / cols, c = i % cols;
    dst[r * dst_ld + c] += src[r * src_ld + c];
}

extern "C" void ops_cuda_add_bias(float *out, const float *bias, int M, int N) {
    size_t n = (size_t)M * N;
    if (n == 0) return;
    add_bias_kernel<<<blocks_for(n), THREADS>>>(out, bias, M, N);
    LAUNCHED();
}

extern "C" void ops_cuda_bias_backward(float *dbias, const float *dout, int M, int N) {
    if (dbias) column_sums(dbias, dout, M, N);
}

extern "C" void ops_cuda_copy_2d(float *dst, int dst_ld, const float *src, int src_ld, int rows,
                                 int cols) {
    if (rows == 0 || cols == 0) return;
    // Rows of `cols` floats, `ld` floats apart (the pitches are in bytes).
    CUDA_CHECK(cudaMemcpy2D(dst, (size_t)dst_ld * sizeof(float), src,
                            (size_t)src_ld * sizeof(float), (size_t)cols * sizeof(float),
                            (size_t)rows, cudaMemcpyDeviceToDevice));
}

extern "C" void ops_cuda_copy_2d_bytes(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                                       size_t width, size_t rows) {
    if (rows == 0 || width == 0) return;
    CUDA_CHECK(cudaMemcpy2D(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice));
}

extern "C" void ops_cuda_accumulate_2d(float *dst, int dst_ld, const float *src, int src_ld,
                                       int rows, int cols) {
    size_t n = (size_t)rows * cols;
    if (n == 0) return;
    accumulate_2d_kernel<<<blocks_for(n), THREADS>>>(dst, dst_ld, src, src_ld, rows, cols);
    LAUNCHED();
}

// ---- vocabulary-parallel embedding and cross-entropy -----------------------------------

// ids (n) = token - v0 where v0 <= token < v0 + nv, else -1. One thread per element.
__global__ void vocab_ids_kernel(int *ids, const int *tokens, int v0, int nv, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int id = tokens[i] - v0;
    ids[i] = id >= 0 && id < nv ? id : -1;
}

// out (M, C) = table[ids[m]], a zero row where ids[m] is -1 (or bad: flagged).
// One thread per element of out.
__global__ void rows_forward_kernel(float *out, const int *ids, const float *table, int nrows,
                                    int M, int C, int *bad_row) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * C) return;
    int m = (int)(i / C), c = (int)(i % C), id = ids[m];
    bool bad = id < -1 || id >= nrows;
    if (bad && c == 0) flag_bad_row(bad_row, m);
    out[i] = id >= 0 && !bad ? table[(size_t)id * C + c] : 0.0f;
}

// dtable[ids[m]] (C) += dout[m] for every m with ids[m] >= 0; an id outside
// [-1, nrows) is flagged and skipped. One thread per element of dout (M, C);
// atomicAdd, as for the embedding above: an id may be named by many rows.
__global__ void rows_backward_kernel(float *dtable, const float *dout, const int *ids, int nrows,
                                     int M, int C, int *bad_row) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * C) return;
    int m = (int)(i / C), c = (int)(i % C), id = ids[m];
    if (id < -1 || id >= nrows) {
        if (c == 0) flag_bad_row(bad_row, m);
        return;
    }
    if (id >= 0) atomicAdd(dtable + (size_t)id * C + c, dout[i]);
}

// out (B, T, C) += wpe[pos0 + t]. One thread per element.
__global__ void positions_forward_kernel(float *out, const float *wpe, int B, int T, int C,
                                         int pos0) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t TC = (size_t)T * C;
    if (i < (size_t)B * TC) out[i] += wpe[(size_t)pos0 * C + i % TC];
}

// mx (M) = the largest element of each row of x (M, N), -INFINITY when N is 0.
// One warp per row.
__global__ void row_max_kernel(float *mx, const float *x, int M, int N) {
    int m = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (m >= M) return;
    const float *xr = x + (size_t)m * N;   // (N)
    float v = -INFINITY;
    for (int n = lane; n < N; n += 32) v = fmaxf(v, xr[n]);
    v = warp_max(v);
    if (lane == 0) mx[m] = v;
}

// sumexp (M) = sum over n of exp(x[m, n] - mx[m]). One warp per row.
__global__ void row_sumexp_kernel(float *sumexp, const float *x, const float *mx, int M, int N) {
    int m = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (m >= M) return;
    const float *xr = x + (size_t)m * N;   // (N)
    float s = 0.0f;
    for (int n = lane; n < N; n += 32) s += expf(xr[n] - mx[m]);
    s = warp_sum(s);
    if (lane == 0) sumexp[m] = s;
}

// out (M) = x[m, ids[m]], 0 where ids[m] is -1 (or bad: flagged). One thread per row.
__global__ void pick_kernel(float *out, const float *x, const int *ids, int M, int N,
                            int *bad_row) {
    int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= M) return;
    int id = ids[m];
    bool bad = id < -1 || id >= N;
    if (bad) flag_bad_row(bad_row, m);
    out[m] = id >= 0 && !bad ? x[(size_t)m * N + id] : 0.0f;
}

// losses (M) = log(sumexp) - (target_logit - mx), grouped as the CPU groups
// it. One thread per row.
__global__ void ce_from_parts_kernel(float *losses, const float *mx, const float *sumexp,
                                     const float *target_logit, int M) {
    int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m < M) losses[m] = logf(sumexp[m]) - (target_logit[m] - mx[m]);
}

// dlogits (M, N) += scale (exp(x - mx) / sumexp - onehot(ids)), the one-hot
// zero where ids[m] is -1 (a bad id is flagged by the row's thread n = 0).
// One thread per element.
__global__ void ce_parts_backward_kernel(float *dlogits, const float *x, const float *mx,
                                         const float *sumexp, const int *ids, float scale, int M,
                                         int N, int *bad_row) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * N) return;
    int m = (int)(i / N), n = (int)(i % N), y = ids[m];
    if ((y < -1 || y >= N) && n == 0) flag_bad_row(bad_row, m);
    float inv = 1.0f / sumexp[m];
    dlogits[i] += scale * (expf(x[i] - mx[m]) * inv - (n == y ? 1.0f : 0.0f));
}

extern "C" void ops_cuda_vocab_ids(int *ids, const int *tokens, int v0, int nv, size_t n) {
    if (n == 0) return;
    vocab_ids_kernel<<<blocks_for(n), THREADS>>>(ids, tokens, v0, nv, n);
    LAUNCHED();
}

extern "C" void ops_cuda_rows_forward(float *out, const int *ids, const float *table, int nrows,
                                      int M, int C) {
    size_t n = (size_t)M * C;
    if (n == 0) return;
    rows_forward_kernel<<<blocks_for(n), THREADS>>>(out, ids, table, nrows, M, C, g_bad_row);
    LAUNCHED();
    check_ids("ops_rows_forward", ids, nrows);
}

extern "C" void ops_cuda_rows_backward(float *dtable, const float *dout, const int *ids, int nrows,
                                       int M, int C) {
    size_t n = (size_t)M * C;
    if (!dtable || n == 0) return;
    rows_backward_kernel<<<blocks_for(n), THREADS>>>(dtable, dout, ids, nrows, M, C, g_bad_row);
    LAUNCHED();
    check_ids("ops_rows_backward", ids, nrows);
}

extern "C" void ops_cuda_positions_forward(float *out, const float *wpe, int B, int T, int C,
                                           int pos0) {
    size_t n = (size_t)B * T * C;
    if (n == 0) return;
    positions_forward_kernel<<<blocks_for(n), THREADS>>>(out, wpe, B, T, C, pos0);
    LAUNCHED();
}

extern "C" void ops_cuda_positions_backward(float *dwpe, const float *dout, int B, int T, int C,
                                            int pos0) {
    // dwpe[pos0 + t] += sum over b of dout[b, t]: column sums of B rows of T*C.
    if (dwpe) column_sums(dwpe + (size_t)pos0 * C, dout, B, T * C);
}

extern "C" void ops_cuda_row_max(float *mx, const float *x, int M, int N) {
    if (M == 0) return;
    row_max_kernel<<<blocks_for_rows(M), THREADS>>>(mx, x, M, N);
    LAUNCHED();
}

extern "C" void ops_cuda_row_sumexp(float *sumexp, const float *x, const float *mx, int M, int N) {
    if (M == 0) return;
    row_sumexp_kernel<<<blocks_for_rows(M), THREADS>>>(sumexp, x, mx, M, N);
    LAUNCHED();
}

extern "C" void ops_cuda_pick(float *out, const float *x, const int *ids, int M, int N) {
    if (M == 0) return;
    pick_kernel<<<blocks_for(M), THREADS>>>(out, x, ids, M, N, g_bad_row);
    LAUNCHED();
    check_ids("ops_pick", ids, N);
}

extern "C" void ops_cuda_ce_from_parts(float *losses, const float *mx, const float *sumexp,
                                       const float *target_logit, int M) {
    if (M == 0) return;
    ce_from_parts_kernel<<<blocks_for(M), THREADS>>>(losses, mx, sumexp, target_logit, M);
    LAUNCHED();
}

extern "C" void ops_cuda_ce_parts_backward(float *dlogits, const float *x, const float *mx,
                                           const float *sumexp, const int *ids, float scale, int M,
                                           int N) {
    size_t n = (size_t)M * N;
    if (!dlogits || n == 0) return;
    ce_parts_backward_kernel<<<blocks_for(n), THREADS>>>(dlogits, x, mx, sumexp, ids, scale, M, N,
                                                         g_bad_row);
    LAUNCHED();
    check_ids("ops_ce_parts_backward", ids, N);
}

// ---- dropout keyed by global position ------------------------------------------------------

// dst = src * keep / (1 - p), or dst += that (accumulate), keep = uniform >= p
// with the uniform of the element's GLOBAL index, drawn by philox.h as rng.c
// draws it: the same mask as the CPU's, bit for bit. One thread per element
// of the local (B, T, C) block.
__global__ void dropout_kernel(float *dst, const float *src, float p, DropoutKey key,
                               uint64_t stream, int B, int T, int C, int accumulate) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * T * C) return;
    size_t bt = i / C;
    int c = (int)(i % C), t = (int)(bt % T), b = (int)(bt / T);
    uint64_t global = ((uint64_t)(key.row0 + b) * key.Tg + (uint64_t)(key.t0 + t)) * key.Cg +
                      (uint64_t)key.c0 + (uint64_t)c;
    float u = philox_uniform(key.seed, stream, global);
    // Divided, not multiplied by 1 / (1 - p), as on the CPU: exactly x / (1 - p).
    float y = u >= p ? src[i] / (1.0f - p) : 0.0f;
    if (accumulate)
        dst[i] += y;
    else
        dst[i] = y;
}

extern "C" void ops_cuda_dropout_forward(float *out, const float *x, float p, DropoutKey key, int B,
                                         int T, int C) {
    size_t n = (size_t)B * T * C;
    if (p == 0.0f) {
        // No mask to draw: the identity (and out may be x).
        if (out != x && n > 0)
            CUDA_CHECK(cudaMemcpy(out, x, n * sizeof(float), cudaMemcpyDeviceToDevice));
        return;
    }
    uint64_t stream = ops_dropout_stream(p, key);
    if (n == 0) return;
    dropout_kernel<<<blocks_for(n), THREADS>>>(out, x, p, key, stream, B, T, C, 0);
    LAUNCHED();
}

extern "C" void ops_cuda_dropout_backward(float *dx, const float *dout, float p, DropoutKey key,
                                          int B, int T, int C) {
    size_t n = (size_t)B * T * C;
    if (!dx) return;
    if (p == 0.0f) {
        ops_cuda_accumulate(dx, dout, n);
        return;
    }
    uint64_t stream = ops_dropout_stream(p, key);
    if (n == 0) return;
    dropout_kernel<<<blocks_for(n), THREADS>>>(dx, dout, p, key, stream, B, T, C, 1);
    LAUNCHED();
}

// ---- reductions to the host ----------------------------------------------------------------

// partials (SUM_BLOCKS) = sums of x[i] (or x[i]^2) in double. Thread j of
// block b takes elements b * THREADS + j, then every SUM_BLOCKS * THREADS
// further; the block then adds its threads' sums by halves in shared memory.
// A fixed grid and a fixed tree: the same bits every time.
template <typename T>
__global__ void sum_kernel(double *partials, const T *x, size_t n, int squares) {
    __shared__ double s[THREADS];
    double acc = 0.0;
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (size_t)SUM_BLOCKS * THREADS) {
        double xi = widen(x[i]);
        acc += squares ? xi * xi : xi;
    }
    s[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned half = THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = s[0];
}

// The block sums come to the host and are added there, in block order.
template <typename T>
static double sum_on_device(const T *x, size_t n, int squares) {
    if (n == 0) return 0.0;
    sum_kernel<<<SUM_BLOCKS, THREADS>>>(g_partials, x, n, squares);
    LAUNCHED();
    double part[SUM_BLOCKS];
    CUDA_CHECK(cudaMemcpy(part, g_partials, sizeof part, cudaMemcpyDeviceToHost));
    double total = 0.0;
    for (int b = 0; b < SUM_BLOCKS; b++) total += part[b];
    return total;
}

extern "C" double ops_cuda_sum(const float *x, size_t n) { return sum_on_device(x, n, 0); }
extern "C" double ops_cuda_sumsq(const float *x, size_t n) { return sum_on_device(x, n, 1); }
extern "C" double ops_cuda_sumsq_bf16(const bf16 *x, size_t n) { return sum_on_device(x, n, 1); }

// ---- optimizers: one thread per element --------------------------------------------------

// AdamW as ops.c arranges it: p (1 - lr wd) - step_size m / (sqrt(v) / bc2_sqrt + eps).
// One element of AdamW's step, the lines of ops.c's (ops_rules.h's scalars).
struct AdamwElement {
    float p, m, v;
};

__device__ inline AdamwElement adamw_element(float p, float g, float m, float v, float beta1, float beta2,
                                             float eps, OpsAdamwScalars s) {
    m = beta1 * m + (1.0f - beta1) * g;
    v = beta2 * v + (1.0f - beta2) * g * g;
    float denom = sqrtf(v) / s.bc2_sqrt + eps;
    return AdamwElement{p * s.decay - s.step_size * m / denom, m, v};
}

__global__ void adamw_kernel(float *p, const float *g, float *m, float *v, size_t n, float beta1, float beta2,
                             float eps, OpsAdamwScalars s) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    AdamwElement e = adamw_element(p[i], g[i], m[i], v[i], beta1, beta2, eps, s);
    p[i] = e.p, m[i] = e.m, v[i] = e.v;
}

// The same on the fp32 master p from bf16 gradients, writing the bf16 working weights w.
__global__ void adamw_mixed_kernel(float *p, bf16 *w, const bf16 *g, float *m, float *v, size_t n, float beta1,
                                   float beta2, float eps, OpsAdamwScalars s) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    AdamwElement e = adamw_element(p[i], bf16_to_float(g[i]), m[i], v[i], beta1, beta2, eps, s);
    p[i] = e.p, m[i] = e.m, v[i] = e.v;
    w[i] = bf16_from_float(e.p);
}

// SGD as torch.optim.SGD: d = g + wd p, through the momentum buffer when mu != 0.
__global__ void sgd_kernel(float *p, const float *g, float *buf, size_t n, float lr, float mu,
                           float wd) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float d = g[i] + wd * p[i];
    if (mu != 0.0f) {
        buf[i] = mu * buf[i] + d;
        d = buf[i];
    }
    p[i] -= lr * d;
}

// The scalars made on the host by the CPU's own function, so both devices
// scale the update by the same floats.
extern "C" void ops_cuda_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr,
                               float beta1, float beta2, float eps, float wd, int t) {
    if (n == 0) return;
    adamw_kernel<<<blocks_for(n), THREADS>>>(p, g, m, v, n, beta1, beta2, eps,
                                             ops_adamw_scalars(lr, beta1, beta2, wd, t));
    LAUNCHED();
}

extern "C" void ops_cuda_adamw_mixed(float *p, uint16_t *w, const uint16_t *g, float *m, float *v, size_t n,
                                     float lr, float beta1, float beta2, float eps, float wd, int t) {
    if (n == 0) return;
    adamw_mixed_kernel<<<blocks_for(n), THREADS>>>(p, w, g, m, v, n, beta1, beta2, eps,
                                                   ops_adamw_scalars(lr, beta1, beta2, wd, t));
    LAUNCHED();
}

extern "C" void ops_cuda_sgd(float *p, const float *g, float *buf, size_t n, float lr, float mu,
                             float wd) {
    if (n == 0) return;
    sgd_kernel<<<blocks_for(n), THREADS>>>(p, g, buf, n, lr, mu, wd);
    LAUNCHED();
}
