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
//
// Recomputation (--recompute, Korthikanti et al.'s three rows): none keeps
// every block's activations (SpBlockActs, one per block); selective keeps
// all but the attention's probabilities, made again in the backward pass
// (TODO 5); full keeps each block's input alone, in the residual stream the
// harness keeps anyway, and runs the block's forward again at the start of
// its backward pass, into the one set every block is given (TODO 6).
//
// Precision (--precision bf16, common/prec.h): the residual stream, the
// LayerNorms' outputs, the tensors kept and the tensors gathered and
// scattered (`void *` below) are of the run's type, sp->tp.prec->type
// (COMM_BF16 or COMM_F32, prec->elem bytes an element); what is computed on
// the way (LayerNorm, dropout, the residual adds, a branch's gradient) is
// fp32, as single-device training does it: prec_read widens a tensor to
// read, prec_write gives where to compute one and prec_keep rounds it in,
// prec_round makes an fp32 tensor one of the run's type (to send). In fp32
// each of these is the buffer itself. Parameters and their gradients are
// fp32 views in both (the harness widens a bf16 unit and rounds its
// gradient once).
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "comm.h"
#include "gpt.h"
#include "ops.h"
#include "tp_given.h"

// What a block keeps from its forward pass for its backward pass.
typedef struct {
    float *ln1_mean, *ln1_rstd;   // (B, Tt) the first LayerNorm's statistics, this rank's tokens (fp32)
    void *ln1_all;                // (B, T, C) its output, all-gathered: attention's input, kept for the backward
    void *mid;                    // (B, Tt, C) the residual stream after attention, this rank's tokens
    float *ln2_mean, *ln2_rstd;   // (B, Tt)
    void *ln2_all;                // (B, T, C) the second LayerNorm's output, all-gathered: the MLP's input
    TpLayerActs layers;           // what the given split layers keep (tp_given.h)
} SpBlockActs;

// What the head keeps.
typedef struct {
    float *lnf_mean, *lnf_rstd;   // (B, Tt)
    void *lnf_all;                // (B, T, C) the final LayerNorm's output, all-gathered
    TpHeadActs ce;                // the given vocabulary-parallel cross-entropy's
} SpHeadActs;

// Scratch for the student's functions (contents undefined between calls).
typedef struct {
    void *whole[2];    // (B, T, C) each, the run's type: a gathered tensor, a partial sum to scatter
    void *local[2];    // (B, Tt, C) each, the run's type
    void *blocks;      // (t, B, Tt, C) the run's type: the ranks' blocks one after another, for the collectives
    // fp32, for bf16's widenings (NULL in fp32, where prec_read and
    // prec_write give the buffer itself).
    float *f32[4];     // (B, Tt, C) each
    float *whole32;    // (B, T, C)
    // --recompute full: where the forward pass made again in the backward
    // pass writes the block's output, which nobody reads (the next block's
    // input, kept in the residual stream, must not be overwritten). (B, Tt,
    // C), the run's type; NULL in the other modes.
    void *again;
} SpScratch;

typedef struct {
    TpShard tp;       // the tensor-parallel group and the sizes of the split layers (tp_given.h)
    int Tt;           // this rank's tokens of each row: T / t, tokens [r Tt, (r + 1) Tt)
    float dropout;    // the probability (0: none)
    uint64_t seed;    // of dropout's masks
    int step, row0;   // the step, and the global row of local row 0 (dropout's masks)
    // --recompute (gpt.h): GPT_RECOMPUTE_NONE; SELECTIVE, the layers keep no
    // probabilities (a->layers.att NULL); FULL, every block is given the
    // same SpBlockActs (one set, the block running's) and the harness keeps
    // each block's input alone (the residual stream, this rank's tokens).
    GptRecompute recompute;
    // lab07's: the caller sums the replicated tensors' gradients over the
    // group once a step, after the last micro-batch (lab07's grid.c). lab06
    // leaves it false, and lab06's sp.c need not read it (lab07 links the
    // answer's sp.c).
    bool sums_deferred;
    SpScratch s;
} Sp;

// ---- the student's functions (sp.c), in the order of the TODOs --------------

// 2. Along the sequence, over the group (tp.group):
//    all-gather: local (B, Tt, C) of every rank -> whole (B, T, C) on every
//    rank, each rank's tokens in their place in every row;
//    reduce-scatter: whole (B, T, C), a partial sum on each rank -> local
//    (B, Tt, C), the sum over ranks of this rank's tokens.
//    Both of the run's type: in bf16, 2 bytes an element on the wire.
void sp_gather_tokens(Sp *sp, const void *local, void *whole);
void sp_scatter_tokens(Sp *sp, const void *whole, void *local);

// 4. The dropout mask of this rank's tokens: keyed by their GLOBAL index, so
//    that the run draws the masks single-device training draws. A mask is
//    never kept: the backward pass draws it again from the same key, and so
//    does a forward pass made again (--recompute full), which therefore
//    applies the forward's masks.
DropoutKey sp_dropout_key(const Sp *sp, int layer, int site);

// 1 and 3. A block on this rank's tokens: x, out, dout, dx (B, Tt, C), of
//    the run's type; dx may be dout (the harness passes them apart). The
//    LayerNorms, dropout and residual adds on these tokens alone; the split
//    layers (tp_given.h) on all of them; gradients ADD into g, and those of
//    the replicated tensors (LayerNorm weights, attn.bo, mlp.b2: each rank
//    saw only its tokens) summed over the group.
//    u is the block's unit (1 .. L), the layer of its dropout masks.
//    5. With sp->recompute == GPT_RECOMPUTE_SELECTIVE the given attention
//    layer keeps its probabilities in one buffer shared by the blocks
//    (tp.att_again), not in a->layers: the backward pass makes them again
//    (tpg_attention_again) before the attention's backward.
//    6. With GPT_RECOMPUTE_FULL, a is the same set for every block, and
//    when a block's backward pass starts it holds what the last block's
//    forward left there: the backward runs the block's forward again first,
//    from x (the block's input, which the harness keeps) into a, its output
//    into sp->s.again, then the backward as always. Dropout's masks come
//    out the same the second time because they are not kept but drawn from
//    their key, (seed, layer, site, step, global token, channel)
//    (sp_dropout_key): the same u and step, the same masks.
void sp_block_forward(Sp *sp, int u, SpBlockActs *a, const GptBlockView *p, const void *x, void *out);
void sp_block_backward(Sp *sp, int u, SpBlockActs *a, const GptBlockView *p, GptBlockView *g, const void *x,
                       const void *dout, void *dx);

// The embeddings: tokens (B, T) every rank's whole batch on the device;
// out (B, Tt, C) this rank's tokens (dropout included), the run's type.
// Backward from dout (B, Tt, C) of the run's type, ADDING into g
// (embed.wpe is replicated).
void sp_embed_forward(Sp *sp, const GptEmbedView *p, const int *tokens, void *out);
void sp_embed_backward(Sp *sp, GptEmbedView *g, const int *tokens, const void *dout);

// The head: x (B, Tt, C) this rank's tokens, the run's type; losses (B, T)
// every token's (fp32), on every rank. Backward: dx (B, Tt, C) of the
// run's type, zeroed by the harness.
void sp_head_forward(Sp *sp, SpHeadActs *a, const GptHeadView *p, const void *x, const int *targets,
                     float *losses);
void sp_head_backward(Sp *sp, SpHeadActs *a, const GptHeadView *p, GptHeadView *g, const void *x, void *dx);

// A function the student has not written yet says so by calling this first.
void lab_todo(const char *function);
