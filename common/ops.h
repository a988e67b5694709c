// ops.h: forward and backward of every operation the model needs.
//
// Each is a plain function over float arrays on the rank's device (from
// mem_alloc), with the shapes beside it. Matrices are row-major. Every
// backward ADDS into its gradient outputs (+=), so gradients accumulate over
// micro-batches and over the two uses of a residual stream; zero them first
// where a fresh gradient is wanted. A gradient output given as NULL is
// skipped.
//
// Names of dimensions: B batch rows, T tokens per row, C channels, NH heads,
// hs = C / NH head size, V vocabulary, M = B * T rows of a flattened batch.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bf16.h"
#include "ops_rules.h"

// Call once after mem_init: one BLAS thread per rank (ranks are the
// parallelism), and the device's kernels.
void ops_init(void);
// The kernels run where the rank's buffers are (mem_device()). A test that
// compares the two devices asks for the CPU kernels on host memory with
// ops_use_host(true) while the device is the GPU.
void ops_use_host(bool on);
// TF32 matrix units for the matrix products on a GPU (--tf32): faster, with
// 10 bits of mantissa in the products; never in graded runs. No effect on the CPU.
void ops_set_tf32(bool on);
// Another machine's rounding, on the CPU: libm's expf in place of the
// vectorized exp, every matrix product summed over its inner dimension in two
// parts (as a split-K GPU product is; a backward's second call then adds the
// same up to rounding, not to the bit), attention's products by sgemm rather
// than by its own kernels. The same training up to rounding, rounded
// differently at every op: the grader trains its reference once this way to
// measure how far a correct run on another machine, BLAS kernel or device may
// land (grader/README.md). `make ROUNDING=alt` makes it every program's default.
// OPS_ROUNDING_PARTIALS is the native rounding but in the bf16 products
// (ops_matmul_forward_bf16, and the input gradient of
// ops_matmul_backward_bf16), whose inner dimension is summed in two parts
// (a third and the rest), each rounded to bf16 before they are added: the
// rounding of a product whose partial sums are made on different ranks and
// added in bf16 (tensor parallelism's row-parallel outputs and
// column-parallel input gradients, sequence parallelism's reduce-scatter),
// which no single device makes. The yardstick samples it in bf16.
typedef enum { OPS_ROUNDING_NATIVE, OPS_ROUNDING_ALT, OPS_ROUNDING_PARTIALS } OpsRounding;
void ops_set_rounding(OpsRounding r);
OpsRounding ops_rounding(void);
OpsRounding ops_rounding_default(void);   // this build's (ROUNDING=alt: OPS_ROUNDING_ALT)
const char *ops_rounding_name(OpsRounding r);   // "native", "alt", "partials"
OpsRounding ops_rounding_parse(const char *name);

// The work the ops were asked for, counted where each is called (on either
// device): the multiply-adds of the matrix products, attention's two
// included, and the rows of the LayerNorms, forward and backward. A run
// that computes its share of the model does its share of these: the
// grader compares the ranks' sums with single-device training's, so that a
// rank computing whole layers (or the whole sequence) where its lab splits
// them shows. Started again from zero when the harness seals its measures
// (harness_seal_measures); after that, ops_work_reset ends the run.
typedef struct {
    double matmul;      // multiply-adds of matrix products
    double layernorm;   // LayerNorm rows
} OpsWork;
OpsWork ops_work(void);
void ops_work_reset(void);
void ops_work_seal(void);

// ---- matrix product ----
// out (M, N) = inp (M, K) @ w (K, N) + bias (N); bias may be NULL.
void ops_matmul_forward(float *out, const float *inp, const float *w, const float *bias, int M,
                        int K, int N);
// dinp (M, K) += dout (M, N) @ w^T;  dw (K, N) += inp^T @ dout;  dbias (N) += column sums of dout
void ops_matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                         const float *w, int M, int K, int N);
// The same products of bf16 inputs (mixed precision), accumulated and
// returned in fp32 (the bias fp32 too): on the CPU the inputs are widened
// to fp32, exactly, and multiplied by sgemm (products of 8-bit significands
// are exact in fp32, so the numbers are a bf16 product's with fp32
// accumulation); on the GPU, cuBLAS's bf16 products with fp32 compute.
void ops_matmul_forward_bf16(float *out, const bf16 *inp, const bf16 *w, const float *bias, int M, int K, int N);
void ops_matmul_backward_bf16(float *dinp, float *dw, float *dbias, const bf16 *dout, const bf16 *inp,
                              const bf16 *w, int M, int K, int N);
// The CPU's bf16 products keep the fp32 widenings of their inputs from
// product to product (the library's own heap, untracked); this lets them go
// (the harness, when it seals its measures: a rank's run is measured without
// what the reference's larger batch grew them to).
void ops_release_scratch(void);

// ---- elementwise ----
void ops_add(float *out, const float *a, const float *b, size_t n);   // out = a + b
void ops_accumulate(float *y, const float *x, size_t n);              // y += x
void ops_scale(float *x, float s, size_t n);                          // x *= s
void ops_fill(float *x, float v, size_t n);                           // x = v
// fp32 to bf16 (round to nearest even) and back (exact): bf16.h's rules,
// the same bits on either device.
void ops_to_bf16(bf16 *out, const float *x, size_t n);
void ops_from_bf16(float *out, const bf16 *x, size_t n);
// y = bf16(y + x): an fp32 gradient added into a bf16 one, summed in fp32
// and rounded once (how a unit's bf16 gradient gathers its micro-batches).
void ops_accumulate_bf16(bf16 *y, const float *x, size_t n);
// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void ops_gelu_forward(float *out, const float *x, size_t n);
void ops_gelu_backward(float *dx, const float *dout, const float *x, size_t n);   // dx += gelu'(x) dout

// ---- layer norm over the last dimension (eps 1e-5) ----
// out (M, C) = (x - mean) * rstd * w + b;  saves mean (M) and rstd (M) for the backward
void ops_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                           const float *b, int M, int C);
// dx (M, C) += ...;  dw (C) += ...;  db (C) += ...
void ops_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                            const float *w, const float *mean, const float *rstd, int M, int C);

// ---- causal multi-head self-attention ----
// q, k, v, out (B, T, C), head h in channels [h*hs, (h+1)*hs); att (B, NH, T, T)
// keeps the softmax probabilities (zero above the diagonal) for the backward.
// out[b,t,h] = sum_{s<=t} softmax_s(q[b,t,h] . k[b,s,h] / sqrt(hs)) v[b,s,h]
void ops_attention_forward(float *out, float *att, const float *q, const float *k, const float *v,
                           int B, int T, int C, int NH);
// dq, dk, dv (B, T, C) +=;  scratch (B, NH, T, T) is overwritten
void ops_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                            const float *att, const float *q, const float *k, const float *v,
                            int B, int T, int C, int NH);

// ---- embeddings ----
// out (B, T, C) = wte[tokens[b, t]] + wpe[pos0 + t];  tokens (B, T) on the device,
// wte (V, C), wpe (maxT, C). pos0 is the position of the first token (a
// sequence-parallel rank holds a span of positions).
void ops_embedding_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                           int B, int T, int C, int pos0);
// dwte (V, C) +=, dwpe (maxT, C) += (either may be NULL)
void ops_embedding_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B,
                            int T, int C, int pos0);

// ---- softmax cross-entropy over the vocabulary ----
// probs (M, V) = softmax(logits);  losses (M) = -log probs[m, targets[m]]
void ops_crossentropy_forward(float *losses, float *probs, const float *logits,
                              const int *targets, int M, int V);
// dlogits (M, V) += scale * (probs - onehot(targets)); scale is 1 / (tokens
// the loss averages over), so the gradient is that of the mean loss.
void ops_crossentropy_backward(float *dlogits, const float *probs, const int *targets,
                               float scale, int M, int V);

// ---- pieces of split layers (tensor and sequence parallelism) ----
// A layer split over ranks computes its part with these, and the
// communication between the parts (comm.h) makes the whole.
// out (M, N) += bias (N), on every row
void ops_add_bias(float *out, const float *bias, int M, int N);
// dbias (N) += the column sums of dout (M, N)
void ops_bias_backward(float *dbias, const float *dout, int M, int N);
// A block of `rows` x `cols` from one row-major matrix into another:
// dst[r * dst_ld + c] = src[r * src_ld + c]   (ops_copy_2d)
// dst[r * dst_ld + c] += src[r * src_ld + c]  (ops_accumulate_2d)
void ops_copy_2d(float *dst, int dst_ld, const float *src, int src_ld, int rows, int cols);
// ops_copy_2d of elements of `elem` bytes (4 fp32, 2 bf16); ld and cols in elements.
void ops_copy_2d_typed(void *dst, int dst_ld, const void *src, int src_ld, int rows, int cols, size_t elem);
void ops_accumulate_2d(float *dst, int dst_ld, const float *src, int src_ld, int rows, int cols);

// ---- vocabulary-parallel embedding and cross-entropy ----
// A rank holds the rows v0 .. v0 + nv - 1 of the embedding table, and the
// same columns of the logits. The cross-entropy of a row is put together
// from parts that ranks combine: the max over ranks of ops_row_max, the sum
// of ops_row_sumexp (against that max) and the sum of ops_pick.
// ids (n) = token - v0 where v0 <= token < v0 + nv, else -1 (a token whose
// row another rank holds). tokens and ids are int arrays on the device.
void ops_vocab_ids(int *ids, const int *tokens, int v0, int nv, size_t n);
// out (M, C) = table[ids[m]], a zero row where ids[m] is -1; table (nrows, C).
// An id outside [-1, nrows) stops the run (CHECK) with a message naming the id, its row m and nrows,
// and saying that ids of rows another rank holds must be -1 (ops_vocab_ids).
void ops_rows_forward(float *out, const int *ids, const float *table, int nrows, int M, int C);
// dtable (nrows, C) += dout[m] for every m with ids[m] >= 0 (the same CHECK)
void ops_rows_backward(float *dtable, const float *dout, const int *ids, int nrows, int M, int C);
// out (B, T, C) += wpe[pos0 + t] (the position embeddings of tokens pos0 .. pos0 + T - 1)
void ops_positions_forward(float *out, const float *wpe, int B, int T, int C, int pos0);
// dwpe (maxT, C) += the sum over b of dout[b, t] into row pos0 + t
void ops_positions_backward(float *dwpe, const float *dout, int B, int T, int C, int pos0);
// mx (M) = the largest element of each row of x (M, N); -INFINITY when N is 0
void ops_row_max(float *mx, const float *x, int M, int N);
// sumexp (M) = sum over n of exp(x[m, n] - mx[m])
void ops_row_sumexp(float *sumexp, const float *x, const float *mx, int M, int N);
// out (M) = x[m, ids[m]], 0 where ids[m] is -1 (same CHECK on ids as ops_rows_forward, with N as the bound)
void ops_pick(float *out, const float *x, const int *ids, int M, int N);
// losses (M) = log(sumexp[m]) + mx[m] - target_logit[m]: the cross-entropy from its parts
void ops_ce_from_parts(float *losses, const float *mx, const float *sumexp, const float *target_logit, int M);
// dlogits (M, N) += scale * (exp(x - mx) / sumexp - onehot(ids)), the one-hot zero where ids[m] is -1
// (the same CHECK on ids as ops_pick)
void ops_ce_parts_backward(float *dlogits, const float *x, const float *mx, const float *sumexp,
                           const int *ids, float scale, int M, int N);

// ---- dropout keyed by global position ----
// The mask of element (row, token, channel) is a pure function of the seed,
// the layer, the site in the layer, the step and the element's GLOBAL
// coordinates, so any partition of rows, tokens or channels draws the same
// mask as one device does. x and out (B, T, C) hold rows [row0, row0+B),
// tokens [t0, t0+T) and channels [c0, c0+C) of a global (Bg, Tg, Cg) tensor.
// (DropoutKey: ops_rules.h.)
// out = x * keep / (1 - p), keep = uniform >= p. p = 0 copies x.
void ops_dropout_forward(float *out, const float *x, float p, DropoutKey key, int B, int T, int C);
// dx += dout * keep / (1 - p), the same mask, drawn again
void ops_dropout_backward(float *dx, const float *dout, float p, DropoutKey key, int B, int T,
                          int C);

// ---- reductions to the host ----
double ops_sum(const float *x, size_t n);       // sum in double, returned on the host
double ops_sumsq(const float *x, size_t n);     // sum of squares in double
double ops_sumsq_bf16(const bf16 *x, size_t n); // the same of bf16 elements (widened exactly)

// ---- optimizers (any contiguous slice of a unit) ----
// AdamW, step t >= 1 (bias correction 1 - beta^t), decoupled weight decay:
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p)
void ops_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
               float beta2, float eps, float wd, int t);
// Mixed precision (bf16 weights and gradients, fp32 master weights and
// moments): ops_adamw's update of the fp32 master copy p from the bf16
// gradient g (widened exactly to fp32), then the bf16 working weights w
// written from the new master (round to nearest even). The master keeps
// the updates smaller than a bf16 step (2^-8 of the weight), which a bf16
// weight updated in place would round away, step after step.
void ops_adamw_mixed(float *p, bf16 *w, const bf16 *g, float *m, float *v, size_t n, float lr, float beta1,
                     float beta2, float eps, float wd, int t);
// SGD with momentum mu (0 for plain SGD; buf may be NULL then) and weight decay.
void ops_sgd(float *p, const float *g, float *buf, size_t n, float lr, float mu, float wd);
