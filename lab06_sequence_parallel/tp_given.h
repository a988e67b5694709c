// tp_given.h: tensor parallelism's split layers, given (lab04's answer,
// without its f and g: the communication around them is this lab's).
//
// Every layer here takes its input whole, the same on every rank of the
// group, and leaves a row-parallel output as this rank's PARTIAL sum,
// without the bias added after the sum; its backward pass takes the
// output's gradient whole and leaves the input's gradient as this rank's
// partial sum (+=). Summing those partial sums over the group is the
// caller's: lab04's g and f all-reduce them; lab06 reduce-scatters them
// along the tokens. M = B * T rows, every token of the batch.
//
// Precision (common/prec.h): a layer's input, its output and its input
// gradient (`void *`) are of the run's type, bf16 or fp32, and so is what
// it keeps; the output's gradient (dout) and the parameters and their
// gradients are fp32. In bf16 a partial sum is rounded to bf16 once, before
// it is summed over the group.
#pragma once

#include <stddef.h>

#include "comm.h"
#include "gpt.h"
#include "prec.h"
#include "tp_layout.h"
#include "tp_net.h"

// This rank's shard of the split layers: the group, the sizes of the parts
// it holds (tpg_sizes), and the layers' scratch.
typedef struct {
    Comm *group;      // the tensor-parallel group (t consecutive ranks)
    int t, r;         // its size, this rank's place in it
    int B, T;         // rows, and tokens of every row (all of them)
    int C, NH, V;     // the whole model's channels, heads and vocabulary
    int Ct, NHt, Ht;  // this rank's attention channels (NHt heads) and MLP hidden width
    int v0, nv;       // embed.wte's rows this rank holds: token ids [v0, v0 + nv)
    int lm0, nlm;     // head.lm_head's columns: the ids of this rank's logits
    float loss_scale; // the gradient of the loss is scaled by this (1 / tokens averaged over)
    const Prec *prec; // the run's precision: the type of the layers' inputs, outputs and kept tensors
    // Scratch of the layers (contents undefined between calls).
    float *ct[4];     // (M, Ct)
    float *att;       // (B, NHt, T, T)
    float *ht[2];     // (M, Ht)
    float *dlogits;   // (M, nlm)
    int *ids;         // (M)
    float *mc;        // (M, C) bf16's widening of an input gradient (NULL in fp32)
    // --recompute selective: the attention's probabilities of the block
    // running, the run's type, shared by every layer (NULL without): a
    // layer whose TpLayerActs.att is NULL keeps its probabilities here only,
    // and its backward pass needs them made again first (tpg_attention_again).
    void *att_again;  // (B, NHt, T, T)
    // What recomputation costs, counted where it happens: the products of
    // tpg_attention_again, and under --recompute full those of the layers'
    // forward passes made while `recomputing` is set (the harness sets it
    // around a block's backward pass: a forward product made there is one
    // made again).
    bool recomputing;
    double again_work;   // multiply-adds recomputed so far (ops_work's count)
    double again_s;      // and the seconds they took (wall clock)
} TpShard;

// What the split layers of a block keep for the backward pass (the run's type).
typedef struct {
    void *q, *k, *v, *y;    // (M, Ct) this rank's heads
    void *att;              // (B, NHt, T, T); NULL under --recompute selective (tp->att_again instead)
    void *h, *hg;           // (M, Ht)
} TpLayerActs;

// Megatron's cut of every tensor (lab04's tp_split): attention by whole
// heads, mlp.w1 by columns and mlp.w2 by rows, embed.wte by vocabulary rows,
// head.lm_head by vocabulary columns; the rest replicated. ctx: the TpShard.
TpSplit tpg_split(const void *ctx, GptUnitKind unit, const GptTensor *t);
// Fill tp's sizes from a layout made with tpg_split.
void tpg_sizes(TpShard *tp, const TpLayout *L);

// Attention (x (M, C) whole) -> out (M, C) this rank's partial sum, no bo.
// (Called while tp->recomputing, its products count in again_work.)
void tpg_attention_forward(TpShard *tp, TpLayerActs *a, const GptBlockView *p, const void *x, void *out);
void tpg_attention_backward(TpShard *tp, TpLayerActs *a, const GptBlockView *p, GptBlockView *g, const void *x,
                            const float *dout, void *dx);
// --recompute selective: attention's probabilities made again into
// tp->att_again from the kept q and k (the same call as the forward's, so
// the same bits), before tpg_attention_backward of a layer whose att is NULL.
void tpg_attention_again(TpShard *tp, TpLayerActs *a);
// The MLP, the same way (no b2; counted the same way).
void tpg_mlp_forward(TpShard *tp, TpLayerActs *a, const GptBlockView *p, const void *x, void *out);
void tpg_mlp_backward(TpShard *tp, TpLayerActs *a, const GptBlockView *p, GptBlockView *g, const void *x,
                      const float *dout, void *dx);
// The embedding lookup: out (M, C) = this rank's rows of wte for the tokens
// it holds, zero rows elsewhere (a partial sum); no positions. Backward:
// this rank's rows of wte from dout (M, C) whole.
void tpg_embed_forward(TpShard *tp, const GptEmbedView *p, const int *tokens, void *out);
void tpg_embed_backward(TpShard *tp, GptEmbedView *g, const int *tokens, const float *dout);
// The vocabulary-parallel cross-entropy on x (M, C) whole: losses (M) on
// every rank (its own all-reduces of the row maximum, the sum of exponentials
// and the target's logit inside), its parts kept in a (TpHeadActs,
// common/tp_net.h: the same as lab04's). Backward: dx (M, C) this rank's
// partial sum.
void tpg_head_forward(TpShard *tp, TpHeadActs *a, const GptHeadView *p, const void *x, const int *targets,
                      float *losses);
void tpg_head_backward(TpShard *tp, TpHeadActs *a, const GptHeadView *p, GptHeadView *g, const void *x, void *dx);
