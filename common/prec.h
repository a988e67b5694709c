// prec.h: the tensors a tensor-parallel layer keeps, in the run's precision
// (labs 04 and 06).
//
// In fp32 a kept activation is a float buffer and every call below is the
// plain ops.h call on it, so an fp32 run is the same to the bit with or
// without them. In bf16 (mixed precision, docs/model.md) a kept activation
// is a bf16 buffer (2 bytes an element): a call widens what it reads into
// fp32 scratch (exact), computes in fp32 as ops.h does, and rounds what it
// keeps into bf16 once, where gpt.c rounds. The products multiply the
// widened bf16 inputs in fp32, which is exactly a bf16 product summed in
// fp32 (ops_matmul_forward_bf16 does the same on the CPU).
//
// Parameters and their gradients reach the layers as fp32 views (the
// harness widens a unit's bf16 parameters before it runs, and adds its fp32
// gradient into the bf16 one after: one rounding an element, as gpt.c's
// unit_grads_done). `void *` below is a buffer of the run's type; `float *`
// is fp32 in both precisions.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "bf16.h"
#include "comm.h"
#include "mem.h"

typedef struct {
    bool bf16;        // the run's precision: bf16 kept tensors, or fp32
    CommType type;    // what the collectives on kept tensors move: COMM_BF16 or COMM_F32
    size_t elem;      // bytes of one element of a kept tensor: 2 or 4
    // bf16's scratch (NULL in fp32): four fp32 buffers of `cap` elements
    // (widened inputs and fp32 results), one of `att` (attention's
    // probabilities), and bf16 rounding of a product's gradient input.
    float *s[4], *s_att;
    bf16 *s_b16;
    size_t cap, att;
} Prec;

// The run's precision, with bf16's scratch for products of up to cap
// elements an operand and attention probabilities of att elements (ACTS).
void prec_init(Prec *p, bool in_bf16, size_t cap, size_t att);
void prec_free(Prec *p);

// A kept tensor of n elements: allocated (zeroed) in category cat.
void *prec_alloc(const Prec *p, size_t n, MemCategory cat, const char *name);
// A kept tensor as fp32, to read: src itself (fp32), or widened into
// scratch (bf16).
const float *prec_read(const Prec *p, const void *src, size_t n, float *scratch);
// The same to write into: t itself (fp32), or its values widened into
// scratch (bf16), which prec_keep then rounds back into t.
float *prec_open(const Prec *p, void *t, size_t n, float *scratch);
// Where an fp32 result to keep in t is computed: t itself (fp32), or
// scratch (bf16; nothing read from t), for prec_keep to round into t.
float *prec_write(const Prec *p, void *t, float *scratch);
// An fp32 tensor as a kept one, to read or to send: src itself (fp32), or
// rounded into scratch (bf16, a buffer of n kept elements).
const void *prec_round(const Prec *p, const float *src, size_t n, void *scratch);
// dst (kept) = src (fp32), rounded once in bf16 (nothing to do when src is
// dst itself, as prec_open gives it in fp32).
void prec_keep(const Prec *p, void *dst, const float *src, size_t n);

// out (M, N) kept = inp (M, K) kept @ w (K, N) + bias (bias may be NULL).
void prec_matmul_keep(const Prec *p, void *out, const void *inp, const float *w, const float *bias, int M, int K,
                      int N);
// The same product left in fp32: out (M, N) = inp @ w + bias.
void prec_matmul(const Prec *p, float *out, const void *inp, const float *w, const float *bias, int M, int K, int N);
// Its backward, as ops_matmul_backward (dinp, dw, dbias +=, each may be
// NULL): dout (M, N) fp32 (rounded to bf16 first in bf16: the product's
// input), inp (M, K) kept.
void prec_matmul_backward(const Prec *p, float *dinp, float *dw, float *dbias, const float *dout, const void *inp,
                          const float *w, int M, int K, int N);
// out (M, N) kept += bias (N), rounded once.
void prec_add_bias(const Prec *p, void *out, const float *bias, int M, int N);
// out kept = gelu(x kept); dx (fp32) += gelu'(x) dout.
void prec_gelu_keep(const Prec *p, void *out, const void *x, size_t n);
void prec_gelu_backward(const Prec *p, float *dx, const float *dout, const void *x, size_t n);
// Causal attention on kept q, k, v (B, T, C) of NH heads: y (B, T, C) and
// att (B, NH, T, T) kept; and its backward (ops_attention_backward's +=
// into fp32 dq, dk, dv; scratch (B, NH, T, T) fp32; dy fp32).
void prec_attention_keep(const Prec *p, void *y, void *att, const void *q, const void *k, const void *v, int B,
                         int T, int C, int NH);
void prec_attention_backward(const Prec *p, float *dq, float *dk, float *dv, float *scratch, const float *dy,
                             const void *att, const void *q, const void *k, const void *v, int B, int T, int C,
                             int NH);
