// tp.h: tensor parallelism, the interface between the harness (main.c,
// model_given.c) and the student's file (tp.c).
//
// The t ranks of a tensor-parallel group hold one model between them, cut
// by width: a matrix is split by its columns (a column-parallel layer: each
// rank computes some of the outputs) or by its rows (a row-parallel layer:
// each rank computes a partial sum of every output). The harness runs the
// model unit by unit and does what every rank does alike (LayerNorm, the
// residual adds, dropout, the optimizer); the student's code does the split
// layers and their communication, through ops.h and comm.h only.
//
// M = B * T rows. "Whole" sizes are the single-device model's (C, NH, V);
// the sizes a rank holds (Ct, NHt, Ht, ...) come from the student's
// tp_split, which the harness reads once at start.
//
// Precision (--precision fp32|bf16, common/prec.h). Every `void *` below is
// a buffer of the run's type: fp32, or bf16 in mixed precision (2 bytes an
// element). They are what the layers keep for their backward pass and what
// they hand on (x, out, dx): the tensors f and g move, in tp->type. `float *`
// is fp32 in both: parameters and their gradients as the layers see them
// (the harness widens a unit's bf16 parameters before it runs and adds its
// fp32 gradient into the bf16 one after), dout, and the scratch. The prec_*
// calls work on either: in fp32 each is the plain ops.h call, in bf16 it
// widens what it reads, computes in fp32 and rounds what it keeps.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "comm.h"
#include "gpt.h"
#include "prec.h"
#include "tp_layout.h"
#include "tp_net.h"

// How a tensor is cut over the t ranks of the group: TpSplit, in
// common/tp_layout.h (TP_REPLICATED, or TP_ROWS / TP_COLUMNS with the first
// row or column this rank holds and how many).

// Scratch the harness allocates for the student's functions (contents are
// undefined between calls; every buffer a function needs is here, so a
// function allocates nothing). fp32 in both precisions.
typedef struct {
    float *ct[4];     // (M, Ct) each: attention's dy, dq, dk, dv
    float *att;       // (B, NHt, T, T): attention's backward scratch
    float *ht[2];     // (M, Ht) each: the MLP's hidden gradients
    float *wide[2];   // (M, 4C) each: the naive MLP's gathers and their gradients
    float *c[2];      // (M, C) each
    float *logits;    // (M, nlm): the gradient of this rank's logits
    int *ids;         // (M): token ids inside this rank's vocabulary range (ops_vocab_ids)
} TpScratch;

typedef struct {
    Comm *group;      // the tensor-parallel group (t consecutive ranks)
    int t, r;         // its size, and this rank's place in it
    bool naive;       // --mlp naive: the lecture's version of the MLP (fp32 only)
    const Prec *prec; // the run's precision, for the prec_* calls (common/prec.h)
    CommType type;    // the type of the run's kept tensors, for the collectives: COMM_F32 or COMM_BF16
    int B, T;         // rows and tokens of the batch the functions see now
    int C, NH, V;     // the whole model's channels, heads and vocabulary
    // What this rank holds, from tp_split (the harness fills these):
    int Ct, NHt;      // attention: attn.wq's columns (Ct = NHt heads of C / NH channels)
    int Ht;           // the MLP's hidden width: mlp.w1's columns
    int Cw;           // the naive MLP: mlp.w2's columns
    int v0, nv;       // embed.wte's rows: the token ids this rank's embedding holds
    int lm0, nlm;     // head.lm_head's columns: the token ids of this rank's logits
    float loss_scale; // the gradient of the loss is scaled by this (1 / tokens averaged over)
    TpScratch s;
} Tp;

// A unit's parameters (or gradients) as this rank holds them: gpt.h's views
// (the same names), with the shapes tp_split gives:
//   block: ln1w, ln1b (C) replicated (the harness runs the LayerNorms);
//          wq, bq, wk, bk, wv, bv: attention's inputs, column-parallel by heads;
//          wo: row-parallel; bo replicated; ln2w, ln2b;
//          w1, b1: the MLP's first matrix, column-parallel;
//          w2: row-parallel, b2 replicated (naive: w2 by columns, b2 with them);
//   embed: wte (nv, C) this rank's rows of the token embeddings; wpe (T, C) replicated;
//   head:  lnfw, lnfb (C) replicated; lm_head (C, nlm) this rank's columns.
typedef GptBlockView TpBlockView;
typedef GptEmbedView TpEmbedView;
typedef GptHeadView TpHeadView;

// What a block keeps from its forward pass for its backward pass, of the
// run's type.
typedef struct {
    void *q, *k, *v;      // (M, Ct) this rank's heads
    void *att;            // (B, NHt, T, T) their attention probabilities
    void *y;              // (M, Ct) attention's output on those heads, before wo
    void *h, *hg;         // (M, Ht) the MLP's hidden columns, before and after GELU
    void *hg_all;         // (M, 4C) the naive MLP: the hidden activations, all-gathered
} TpBlockActs;

// What the head keeps: TpHeadActs, in common/tp_net.h: this rank's logits
// (M, nlm), fp32 in both precisions; over the whole vocabulary, each row's maximum mx, its sum of
// exp(logit - mx) and the target's logit (M); the targets' places among
// this rank's columns, target_ids (M).

// ---- the student's functions (tp.c), in the order of the TODOs --------------

// 0. Which part of each tensor this rank holds. `unit` is the unit's kind,
//    `t` the whole tensor (t->name "attn.wq", t->shape). Replicated tensors
//    are those every rank computes alike: LayerNorm weights, embed.wpe, and
//    the biases added after an all-reduce.
TpSplit tp_split(const Tp *tp, GptUnitKind unit, const GptTensor *t);

// 1. The lecture's MLP: every matrix split by output columns, the
//    activations all-gathered after each layer. x: (M, C) the LayerNorm's
//    output, the same on every rank; out: (M, C) the MLP's output, whole on
//    every rank. The backward pass: dout (M, C) fp32, the same on every
//    rank; dx (M, C), zeroed by the harness, must hold the whole input
//    gradient; the parameter gradients ADD into g. The naive MLP runs in
//    fp32 only (the harness refuses it in bf16): x, out, dx and a's
//    buffers are float.
void tp_naive_mlp_forward(Tp *tp, TpBlockActs *a, const TpBlockView *p, const void *x, void *out);
void tp_naive_mlp_backward(Tp *tp, TpBlockActs *a, const TpBlockView *p, TpBlockView *g,
                           const void *x, const float *dout, void *dx);

// 2. Megatron's two conjugate operators, on n elements of the run's type
//    (tp->type) in place.
//    f, before a column-parallel layer: the identity forward (nothing to
//    do), an all-reduce of the input gradient backward.
//    g, after a row-parallel layer: an all-reduce forward, the identity
//    backward (nothing to do).
void tp_f_backward(Tp *tp, void *dx, size_t n);
void tp_g_forward(Tp *tp, void *x, size_t n);

// 3. The Megatron MLP: f, mlp.w1 column-parallel, GELU, mlp.w2
//    row-parallel, g, then mlp.b2 once. Same arguments as the naive one,
//    in the run's precision: x, out, dx and a's buffers of the run's type.
void tp_mlp_forward(Tp *tp, TpBlockActs *a, const TpBlockView *p, const void *x, void *out);
void tp_mlp_backward(Tp *tp, TpBlockActs *a, const TpBlockView *p, TpBlockView *g, const void *x,
                     const float *dout, void *dx);

// 4. Attention by heads: f, q k v column-parallel (this rank's heads),
//    causal attention on those heads, attn.wo row-parallel, g, then attn.bo
//    once. Same arguments as the MLP's.
void tp_attention_forward(Tp *tp, TpBlockActs *a, const TpBlockView *p, const void *x, void *out);
void tp_attention_backward(Tp *tp, TpBlockActs *a, const TpBlockView *p, TpBlockView *g,
                           const void *x, const float *dout, void *dx);

// 5. The vocabulary-parallel embedding: out (M, C) = wte[token] + wpe[t],
//    whole on every rank, of the run's type, from this rank's rows of wte
//    (tokens: (M) ids on the device). Its backward pass ADDS into g from
//    dout (M, C) fp32.
void tp_embed_forward(Tp *tp, const TpEmbedView *p, const int *tokens, void *out);
void tp_embed_backward(Tp *tp, TpEmbedView *g, const int *tokens, const float *dout);

// 5. The vocabulary-parallel cross-entropy: x (M, C) the final LayerNorm's
//    output, the same on every rank, of the run's type; losses (M) fp32
//    each token's loss, on every rank, with no rank holding a (M, V) logits
//    tensor. The backward pass: the gradient of the mean loss
//    (tp->loss_scale per token) into g's lm_head (+=) and dx (M, C) of the
//    run's type, zeroed by the harness, whole.
void tp_head_forward(Tp *tp, TpHeadActs *a, const TpHeadView *p, const void *x, const int *targets,
                     float *losses);
void tp_head_backward(Tp *tp, TpHeadActs *a, const TpHeadView *p, TpHeadView *g, const void *x,
                      void *dx);

// A function the student has not written yet says so by calling this first.
void lab_todo(const char *function);
