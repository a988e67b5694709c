// grid_budget.h: what a rank of lab07's grid sends on each of its groups a
// step, and holds, in bytes: the one set of formulas that lab07's program
// prints, the grader holds every run to, and lab07's README states.
//
// A rank at stage s of p, TP place of t, one of dp replicas, fp32, m
// micro-batches of b rows, M = b T tokens each, its stage holding `blocks`
// blocks (and the embeddings, the head):
//   TP group, each micro-batch (lab06's sequence parallelism): an
//     all-gather and a reduce-scatter of 4 M C bytes before and after each
//     split layer, 4 a block each way, plus one each for the embeddings' and
//     the head's; the head's cross-entropy, three all-reduces of 4 M. Once a
//     step, the replicated tensors' gradients summed: an all-reduce of 4 x
//     their floats (one call a tensor at most).
//   PP group, each micro-batch: this rank's tokens of the residual stream,
//     4 b (T/t) C bytes, sent forward and their gradient back at each of the
//     stage's boundaries (one on the first and last stage, two between).
//   DP group, once a step: --zero 0 an all-reduce of the stage's 4 x padded
//     bytes of gradients; --zero 1 a reduce-scatter of them and an
//     all-gather of the updated parameters, the same bytes each.
// (Payload bytes of each call as the ledger counts them: a collective's
// whole buffer, a send's message.)
// Memory: lab03's zero_budget over the DP group (stage 0 or 1 on the
// stage's padded floats), and lab05's pp_budget for the activations.
#pragma once

#include <stdbool.h>

#include "gpt.h"

typedef struct {
    double tp_gather, tp_scatter, tp_reduce;   // bytes a step on the TP group
    double tp_gather_calls, tp_reduce_calls;   // calls a step, at most (the reduce-scatters' as the gathers')
    double pp_send, pp_recv, pp_calls;         // the PP group's, a step (calls: of each)
    double dp_reduce, dp_scatter, dp_gather;   // the DP group's, a step
    double tp, pp, dp;                         // each group's total
} GridBytes;

// (--recompute full: each block's forward collectives once more, in its
// backward pass: 6 a block each way.)
GridBytes grid_bytes(int t, int p, int s, int dp, int zero, int m, double b, double T, double C, int blocks,
                     bool embed, bool head, double rep_floats, int nrep, double padded, bool full);

// The activations a rank of lab07 allocates (stage_given.c), in bytes, fp32:
// the scratch every micro-batch shares (the split layers' and sp.c's), and
// one micro-batch's set on a stage of `blocks` blocks (and the embeddings,
// the head): per block lab06's layer (sp_layer_bytes, less its input),
// the residual stream and its gradient at each of the stage's blocks + 1
// places, the tokens on the first stage, the head's LayerNorm, logits
// (V/t columns), cross-entropy statistics, targets and losses on the last.
typedef struct {
    double scratch, set;
} GridActs;
// --recompute selective: no probabilities in a block's set, one buffer of
// them in the scratch; full: a micro-batch keeps its stream alone (each
// block's input) and the head's, and the scratch holds one block's set and
// the output made again.
GridActs grid_acts(int t, double b, double T, double C, double NH, double V, int blocks, bool embed, bool head,
                   GptRecompute rc);

// The parameters a rank holds: its TP parts of its stage's units (a block
// 12 C^2/t + 7 C/t split and 6 C replicated; the embeddings V C/t + T C; the
// head C V/t + 2 C).
double grid_stage_params(int t, double T, double C, double V, int blocks, bool embed, bool head);

// The dump's lab07/rank, a row a rank (report_given.c writes it, the
// grader reads it): the rank's stage and what it holds (blocks, the
// embeddings, the head, the replicated floats and tensors, its floats,
// padded, its shard), the activations' scratch and set allocated, its
// payload bytes a step on the TP, PP and DP groups and on none of the
// grid's, and its peaks of PARAMS, GRADS, OPTIM and ACTS.
enum {
    F_STAGE, F_BLOCKS, F_EMBED, F_HEAD, F_REP_FLOATS, F_NREP, F_N, F_PADDED, F_SHARD, F_SCRATCH, F_SET,
    F_TP, F_PP, F_DP, F_OTHER, F_PARAMS, F_GRADS, F_OPTIM, F_ACTS, F_COUNT
};
