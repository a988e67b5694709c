// ops_cuda.h: the CUDA kernels of ops.h (internal). ops.c hands each op to its
// twin here when the rank's buffers are on the GPU (mem_device()); each twin
// takes the same arguments, with the shapes and the "+=" contract of ops.h.
// Built from ops_cuda.cu when the CUDA backend is compiled in (PL_CUDA);
// otherwise the twins are stubs that ops.c never calls, since mem_init never
// selects the GPU in such a build.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops_rules.h"

#ifdef PL_CUDA
#ifdef __cplusplus
extern "C" {
#endif
// On the GPU: the cuBLAS handle and the small device buffers the kernels share.
void ops_cuda_init(void);
// TF32 matrix units for the products from now on (ops_set_tf32).
void ops_cuda_set_tf32(bool on);
// ---- matrix product (cuBLAS) ----
void ops_cuda_matmul_forward(float *out, const float *inp, const float *w, const float *bias, int M,
                             int K, int N);
void ops_cuda_matmul_backward(float *dinp, float *dw, float *dbias, const float *dout,
                              const float *inp, const float *w, int M, int K, int N);
void ops_cuda_matmul_forward_bf16(float *out, const uint16_t *inp, const uint16_t *w, const float *bias, int M,
                                  int K, int N);
void ops_cuda_matmul_backward_bf16(float *dinp, float *dw, float *dbias, const uint16_t *dout, const uint16_t *inp,
                                   const uint16_t *w, int M, int K, int N);

// ---- elementwise ----
void ops_cuda_add(float *out, const float *a, const float *b, size_t n);
void ops_cuda_accumulate(float *y, const float *x, size_t n);
void ops_cuda_scale(float *x, float s, size_t n);
void ops_cuda_fill(float *x, float v, size_t n);
void ops_cuda_to_bf16(uint16_t *out, const float *x, size_t n);
void ops_cuda_from_bf16(float *out, const uint16_t *x, size_t n);
void ops_cuda_accumulate_bf16(uint16_t *y, const float *x, size_t n);
void ops_cuda_gelu_forward(float *out, const float *x, size_t n);
void ops_cuda_gelu_backward(float *dx, const float *dout, const float *x, size_t n);

// ---- layer norm ----
void ops_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *x,
                                const float *w, const float *b, int M, int C);
void ops_cuda_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                                 const float *w, const float *mean, const float *rstd, int M,
                                 int C);

// ---- causal multi-head self-attention (cuBLAS for the products) ----
void ops_cuda_attention_forward(float *out, float *att, const float *q, const float *k,
                                const float *v, int B, int T, int C, int NH);
void ops_cuda_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                                 const float *att, const float *q, const float *k, const float *v,
                                 int B, int T, int C, int NH);

// ---- embeddings ----
void ops_cuda_embedding_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                                int B, int T, int C, int pos0);
void ops_cuda_embedding_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                                 int B, int T, int C, int pos0);

// ---- softmax cross-entropy ----
void ops_cuda_crossentropy_forward(float *losses, float *probs, const float *logits,
                                   const int *targets, int M, int V);
void ops_cuda_crossentropy_backward(float *dlogits, const float *probs, const int *targets,
                                    float scale, int M, int V);

// ---- pieces of split layers ----
void ops_cuda_add_bias(float *out, const float *bias, int M, int N);
void ops_cuda_bias_backward(float *dbias, const float *dout, int M, int N);
void ops_cuda_copy_2d(float *dst, int dst_ld, const float *src, int src_ld, int rows, int cols);
// Rows of `width` bytes, pitches in bytes.
void ops_cuda_copy_2d_bytes(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                            size_t rows);
void ops_cuda_accumulate_2d(float *dst, int dst_ld, const float *src, int src_ld, int rows,
                            int cols);

// ---- vocabulary-parallel embedding and cross-entropy ----
void ops_cuda_vocab_ids(int *ids, const int *tokens, int v0, int nv, size_t n);
void ops_cuda_rows_forward(float *out, const int *ids, const float *table, int nrows, int M, int C);
void ops_cuda_rows_backward(float *dtable, const float *dout, const int *ids, int nrows, int M,
                            int C);
void ops_cuda_positions_forward(float *out, const float *wpe, int B, int T, int C, int pos0);
void ops_cuda_positions_backward(float *dwpe, const float *dout, int B, int T, int C, int pos0);
void ops_cuda_row_max(float *mx, const float *x, int M, int N);
void ops_cuda_row_sumexp(float *sumexp, const float *x, const float *mx, int M, int N);
void ops_cuda_pick(float *out, const float *x, const int *ids, int M, int N);
void ops_cuda_ce_from_parts(float *losses, const float *mx, const float *sumexp,
                            const float *target_logit, int M);
void ops_cuda_ce_parts_backward(float *dlogits, const float *x, const float *mx,
                                const float *sumexp, const int *ids, float scale, int M, int N);

// ---- dropout keyed by global position ----
void ops_cuda_dropout_forward(float *out, const float *x, float p, DropoutKey key, int B, int T,
                              int C);
void ops_cuda_dropout_backward(float *dx, const float *dout, float p, DropoutKey key, int B, int T,
                               int C);

// ---- reductions to the host ----
double ops_cuda_sum(const float *x, size_t n);
double ops_cuda_sumsq(const float *x, size_t n);
double ops_cuda_sumsq_bf16(const uint16_t *x, size_t n);

// ---- optimizers ----
void ops_cuda_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                    float beta2, float eps, float wd, int t);
void ops_cuda_adamw_mixed(float *p, uint16_t *w, const uint16_t *g, float *m, float *v, size_t n, float lr,
                          float beta1, float beta2, float eps, float wd, int t);
void ops_cuda_sgd(float *p, const float *g, float *buf, size_t n, float lr, float mu, float wd);
#ifdef __cplusplus
}
#endif
#else
#include <stdlib.h>
// No CUDA backend in this build: only the TF32 switch may be called (it has
// nothing to switch); the kernels never are.
static inline void ops_cuda_set_tf32(bool on) { (void)on; }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
static inline void ops_cuda_init(void) { abort(); }
static inline void ops_cuda_matmul_forward(float *out, const float *inp, const float *w,
                                           const float *bias, int M, int K, int N) { abort(); }
static inline void ops_cuda_matmul_backward(float *dinp, float *dw, float *dbias, const float *dout,
                                            const float *inp, const float *w, int M, int K,
                                            int N) { abort(); }

static inline void ops_cuda_matmul_forward_bf16(float *out, const uint16_t *inp, const uint16_t *w,
                                                const float *bias, int M, int K, int N) { abort(); }
static inline void ops_cuda_matmul_backward_bf16(float *dinp, float *dw, float *dbias, const uint16_t *dout,
                                                 const uint16_t *inp, const uint16_t *w, int M, int K,
                                                 int N) { abort(); }
static inline void ops_cuda_add(float *out, const float *a, const float *b, size_t n) { abort(); }
static inline void ops_cuda_accumulate(float *y, const float *x, size_t n) { abort(); }
static inline void ops_cuda_scale(float *x, float s, size_t n) { abort(); }
static inline void ops_cuda_fill(float *x, float v, size_t n) { abort(); }
static inline void ops_cuda_to_bf16(uint16_t *out, const float *x, size_t n) { abort(); }
static inline void ops_cuda_from_bf16(float *out, const uint16_t *x, size_t n) { abort(); }
static inline void ops_cuda_accumulate_bf16(uint16_t *y, const float *x, size_t n) { abort(); }
static inline void ops_cuda_gelu_forward(float *out, const float *x, size_t n) { abort(); }
static inline void ops_cuda_gelu_backward(float *dx, const float *dout, const float *x,
                                          size_t n) { abort(); }

static inline void ops_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *x,
                                              const float *w, const float *b, int M,
                                              int C) { abort(); }
static inline void ops_cuda_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
                                               const float *x, const float *w, const float *mean,
                                               const float *rstd, int M, int C) { abort(); }

static inline void ops_cuda_attention_forward(float *out, float *att, const float *q,
                                              const float *k, const float *v, int B, int T, int C,
                                              int NH) { abort(); }
static inline void ops_cuda_attention_backward(float *dq, float *dk, float *dv, float *scratch,
                                               const float *dout, const float *att, const float *q,
                                               const float *k, const float *v, int B, int T, int C,
                                               int NH) { abort(); }

static inline void ops_cuda_embedding_forward(float *out, const int *tokens, const float *wte,
                                              const float *wpe, int B, int T, int C,
                                              int pos0) { abort(); }
static inline void ops_cuda_embedding_backward(float *dwte, float *dwpe, const float *dout,
                                               const int *tokens, int B, int T, int C,
                                               int pos0) { abort(); }

static inline void ops_cuda_crossentropy_forward(float *losses, float *probs, const float *logits,
                                                 const int *targets, int M, int V) { abort(); }
static inline void ops_cuda_crossentropy_backward(float *dlogits, const float *probs,
                                                  const int *targets, float scale, int M,
                                                  int V) { abort(); }

static inline void ops_cuda_add_bias(float *out, const float *bias, int M, int N) { abort(); }
static inline void ops_cuda_bias_backward(float *dbias, const float *dout, int M,
                                          int N) { abort(); }
static inline void ops_cuda_copy_2d(float *dst, int dst_ld, const float *src, int src_ld, int rows,
                                    int cols) { abort(); }
static inline void ops_cuda_copy_2d_bytes(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                                          size_t width, size_t rows) { abort(); }
static inline void ops_cuda_accumulate_2d(float *dst, int dst_ld, const float *src, int src_ld,
                                          int rows, int cols) { abort(); }

static inline void ops_cuda_vocab_ids(int *ids, const int *tokens, int v0, int nv,
                                      size_t n) { abort(); }
static inline void ops_cuda_rows_forward(float *out, const int *ids, const float *table, int nrows,
                                         int M, int C) { abort(); }
static inline void ops_cuda_rows_backward(float *dtable, const float *dout, const int *ids,
                                          int nrows, int M, int C) { abort(); }
static inline void ops_cuda_positions_forward(float *out, const float *wpe, int B, int T, int C,
                                              int pos0) { abort(); }
static inline void ops_cuda_positions_backward(float *dwpe, const float *dout, int B, int T, int C,
                                               int pos0) { abort(); }
static inline void ops_cuda_row_max(float *mx, const float *x, int M, int N) { abort(); }
static inline void ops_cuda_row_sumexp(float *sumexp, const float *x, const float *mx, int M,
                                       int N) { abort(); }
static inline void ops_cuda_pick(float *out, const float *x, const int *ids, int M,
                                 int N) { abort(); }
static inline void ops_cuda_ce_from_parts(float *losses, const float *mx, const float *sumexp,
                                          const float *target_logit, int M) { abort(); }
static inline void ops_cuda_ce_parts_backward(float *dlogits, const float *x, const float *mx,
                                              const float *sumexp, const int *ids, float scale,
                                              int M, int N) { abort(); }

static inline void ops_cuda_dropout_forward(float *out, const float *x, float p, DropoutKey key,
                                            int B, int T, int C) { abort(); }
static inline void ops_cuda_dropout_backward(float *dx, const float *dout, float p, DropoutKey key,
                                             int B, int T, int C) { abort(); }

static inline double ops_cuda_sum(const float *x, size_t n) { abort(); }
static inline double ops_cuda_sumsq(const float *x, size_t n) { abort(); }
static inline double ops_cuda_sumsq_bf16(const uint16_t *x, size_t n) { abort(); }

static inline void ops_cuda_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr,
                                  float beta1, float beta2, float eps, float wd, int t) { abort(); }
static inline void ops_cuda_adamw_mixed(float *p, uint16_t *w, const uint16_t *g, float *m, float *v, size_t n,
                                        float lr, float beta1, float beta2, float eps, float wd, int t) { abort(); }
static inline void ops_cuda_sgd(float *p, const float *g, float *buf, size_t n, float lr, float mu,
                                float wd) { abort(); }
#pragma GCC diagnostic pop
#endif
