// sp.h: sequence parallelism on top of tensor parallelism, the interface
// between the harness (main.c, tp_given.c) and the student's file (sp.c).
//
// Tensor parallelism (lab04) splits attention and the MLP over the t ranks
// of a group, but leaves every rank running LayerNorm, dropout and the
// residual adds on the whole sequence: the same work and the same
// activations t times over. Sequence parallelism (Korthikanti et al., 2022)
// gives each rank T/t of the tokens there instead: rank r holds tokens
// [r T/t, (r+1) T/t) of every row. Before a column-parallel layer the
// tokens are all-gathered (the layer needs all of them); after a
// row-parallel layer the partial sums are reduce-scattered along the
// tokens, where tensor parallelism all-reduced them. An all-reduce is a
// reduce-scatter and an all-gather, so the bytes stay the same.
//
// The split layers are given (tp_given.h: lab04's, without f and g); the
// student's code does the rest of the model on its tokens and the
// communication along the sequence, through ops.h and comm.h only.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "comm.h"
#include "gpt.h"
#include "ops.h"
#include "tp_given.h"

// What a block keeps from its forward pass for its backward pass.
typedef struct {
    float *ln1_mean, *ln1_rstd;   // (B, Tt) the first LayerNorm's statistics, this rank's tokens
    float *ln1_all;               // (B, T, C) its output, all-gathered: attention's input, kept for the backward
    float *mid;                   // (B, Tt, C) the residual stream after attention, this rank's tokens
    float *ln2_mean, *ln2_rstd;   // (B, Tt)
    float *ln2_all;               // (B, T, C) the second LayerNorm's output, all-gathered: the MLP's input
    TpLayerActs layers;           // what the given split layers keep (tp_given.h)
} SpBlockActs;

// What the head keeps.
typedef struct {
    float *lnf_mean, *lnf_rstd;   // (B, Tt)
    float *lnf_all;               // (B, T, C) the final LayerNorm's output, all-gathered
    TpHeadActs ce;                // the given vocabulary-parallel cross-entropy's
} SpHeadActs;

// Scratch for the student's functions (contents undefined between calls).
typedef struct {
    float *whole[2];   // (B, T, C) each: a gathered tensor, a partial sum to scatter
    float *local[2];   // (B, Tt, C) each
    float *blocks;     // (t, B, Tt, C): the ranks' blocks one after another, for the collectives
} SpScratch;

typedef struct {
    TpShard tp;       // the tensor-parallel group and the sizes of the split layers (tp_given.h)
    int Tt;           // this rank's tokens of each row: T / t, tokens [r Tt, (r + 1) Tt)
    float dropout;    // the probability (0: none)
    uint64_t seed;    // of dropout's masks
    int step, row0;   // the step, and the global row of local row 0 (dropout's masks)
    SpScratch s;
} Sp;

// ---- the student's functions (sp.c), in the order of the TODOs --------------

// 2. Along the sequence, over the group (tp.group):
//    all-gather: local (B, Tt, C) of every rank -> whole (B, T, C) on every
//    rank, each rank's tokens in their place in every row;
//    reduce-scatter: whole (B, T, C), a partial sum on each rank -> local
//    (B, Tt, C), the sum over ranks of this rank's tokens.
void sp_gather_tokens(Sp *sp, const float *local, float *whole);
void sp_scatter_tokens(Sp *sp, const float *whole, float *local);

// 4. The dropout mask of this rank's tokens: keyed by their GLOBAL index, so
//    that the run draws the masks single-device training draws.
DropoutKey sp_dropout_key(const Sp *sp, int layer, int site);

// 1 and 3. A block on this rank's tokens: x, out, dout, dx (B, Tt, C). The
//    LayerNorms, dropout and residual adds on these tokens alone; the split
//    layers (tp_given.h) on all of them; gradients ADD into g, and those of
//    the replicated tensors (LayerNorm weights, attn.bo, mlp.b2: each rank
//    saw only its tokens) summed over the group.
//    u is the block's unit (1 .. L), the layer of its dropout masks.
void sp_block_forward(Sp *sp, int u, SpBlockActs *a, const GptBlockView *p, const float *x, float *out);
void sp_block_backward(Sp *sp, int u, SpBlockActs *a, const GptBlockView *p, GptBlockView *g, const float *x,
                       const float *dout, float *dx);

// The embeddings: tokens (B, T) every rank's whole batch on the device;
// out (B, Tt, C) this rank's tokens (dropout included). Backward from dout
// (B, Tt, C), ADDING into g (embed.wpe is replicated).
void sp_embed_forward(Sp *sp, const GptEmbedView *p, const int *tokens, float *out);
void sp_embed_backward(Sp *sp, GptEmbedView *g, const int *tokens, const float *dout);

// The head: x (B, Tt, C) this rank's tokens; losses (B, T) every token's,
// on every rank. Backward: dx (B, Tt, C), zeroed by the harness.
void sp_head_forward(Sp *sp, SpHeadActs *a, const GptHeadView *p, const float *x, const int *targets,
                     float *losses);
void sp_head_backward(Sp *sp, SpHeadActs *a, const GptHeadView *p, GptHeadView *g, const float *x, float *dx);

// A function the student has not written yet says so by calling this first.
void lab_todo(const char *function);
