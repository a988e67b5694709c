// grid.h: the rank grid of 3D parallelism, the interface between the
// harness (main.c) and the student's file (grid.c).
//
// N = dp x pp x tp ranks. Every rank has a place on the grid: its
// coordinates (dp, pp, tp), and it belongs to three groups, one along each
// axis: the ranks that differ from it in that coordinate alone.
//
//   TP group: the t ranks of one pipeline stage of one replica; they split
//             every layer of the stage by width (lab04, lab06) and talk
//             at every layer, twice a block each way: the most traffic,
//             so they must be the closest ranks (one node's NVLink).
//   PP group: the p stages of one replica, holding the same TP part
//             (rank tp of every stage's TP group); activations forward
//             and gradients back, once a micro-batch (lab05).
//   DP group: the dp replicas of the same stage and TP part; their
//             gradients are averaged once a step (lab02, lab03).
//
// The order of the ranks is Megatron-LM's: tensor-parallel innermost (t
// consecutive ranks: the same node), then pipeline, then data. With t = 2,
// p = 2, dp = 2:
//
//            stage 0          stage 1
//   dp 0   [ 0  1 ]  ---->  [ 2  3 ]
//   dp 1   [ 4  5 ]  ---->  [ 6  7 ]
//
// TP groups {0 1} {2 3} {4 5} {6 7}; PP groups {0 2} {1 3} {4 6} {5 7};
// DP groups {0 4} {1 5} {2 6} {3 7}.
#pragma once

#include "comm.h"
#include "pipeline.h"
#include "sp.h"

enum { GRID_MAX_REPLICATED = 512 };

typedef struct {
    int dp, pp, tp;   // the grid's sizes (N = dp pp tp), or a rank's coordinates on it
} GridDims;

typedef struct {
    GridDims n;       // the sizes
    GridDims at;      // this rank's coordinates: 0 <= at.dp < n.dp, ...
    // The three groups this rank belongs to (comm_split of the world). Each
    // is ordered by the coordinate along its axis: rank at.tp of tp_group,
    // at.pp of pp_group (stage s is rank s), at.dp of dp_group.
    Comm *tp_group, *pp_group, *dp_group;
} Grid;

// A step's gradients and parameters on this rank, as the harness lays them
// out for the student's functions: every unit of the stage, this rank's TP
// parts of it, one after another in one flat buffer of n floats, padded with
// zeros to `padded` (dp equal shards: n.dp x shard_len, or n with --zero 0).
typedef struct {
    float *params, *grads;   // (padded) each
    size_t n, padded;
    int zero;                // 0: every replica keeps all of the optimizer's state; 1: ZeRO-1 over the DP group
    size_t shard_off, shard_len;   // ZeRO-1: this rank's shard of both buffers (grid_shard's)
    int m;                   // micro-batches a step
    // The replicated tensors of the stage's units (LayerNorms, attn.bo,
    // mlp.b2, embed.wpe, the head's LayerNorm): under sequence parallelism
    // each TP rank's gradient of one covers its own T/t tokens. Within grads.
    int nrep;
    struct { float *grad; size_t n; const char *name; } rep[GRID_MAX_REPLICATED];
} GridStep;

// ---- the student's functions (grid.c), in the order of the TODOs ------------

// 1a. The coordinates of world rank `rank` on a grid of sizes n: tensor
//     parallel innermost (ranks t q .. t q + t - 1 form a TP group), then
//     pipeline, then data.
GridDims grid_coords(GridDims n, int rank);

// 1b. This rank's three groups, from the world (collective over it): g->n
//     and g->at are filled in; set g->tp_group, g->pp_group, g->dp_group.
void grid_groups(Grid *g, Comm *world);

// 2. The given code's groups: the stage's layers (lab06's sp.c: the
//    all-gathers and reduce-scatters of every block) run on sp->tp.group,
//    the pipeline's sends and receives (lab05's pipeline.c) on pp->group.
void grid_wire(const Grid *g, Pp *pp, Sp *sp);

// 3. ZeRO-1's shard: this rank's part of a buffer of n floats shared out
//    over the data-parallel group, *len floats at *off (the harness pads the
//    buffers to n.dp x *len; *len >= ceil(n / n.dp)).
void grid_shard(const Grid *g, size_t n, size_t *off, size_t *len);

// 4. Called after every micro-batch's backward pass on this stage, `done`
//    of the step's st->m finished: once the last is done, make the stage's
//    gradients the step's, (a) each replicated tensor's summed over the
//    ranks that saw the other tokens, (b) averaged over the replicas:
//    --zero 0 all of them, --zero 1 this rank's shard (reduce-scattered in
//    place: st->grads + st->shard_off). The harness's optimizer then
//    updates all of the parameters, or this rank's shard.
void grid_after_backward(const Grid *g, GridStep *st, int done);

// 5. Called after the optimizer's step: --zero 1, every replica's updated
//    shard gathered back into the whole parameters (--zero 0: nothing to do).
void grid_after_step(const Grid *g, GridStep *st);

// 6. Choosing a configuration. One candidate: t, p and dp with t p dp =
//    the GPUs, m micro-batches a step, and the recomputation (gpt.h: none,
//    selective or full, as lab06's).
typedef struct {
    int t, p, dp, m;
    GptRecompute rc;
} GridChoice;
// What is predicted for one candidate on this lab's model: whether the lab
// can run it at all (t divides the heads, the tokens and the vocabulary; p
// the units; dp the batch; m a replica's rows), the most memory a rank
// holds (this lab's formulas, grid_budget.h, which its runs measure to the
// byte) and a step's seconds (the planner's, grader/plan.h).
typedef struct {
    bool valid;
    double bytes, seconds;
    double planner_bytes;   // the planner's own count of the memory (a layer's kept tensors), for comparison
} GridPlan;
typedef GridPlan (*GridPlanFn)(const void *ctx, GridChoice c);
// Among every candidate for `gpus` GPUs and a batch of `rows` rows, the one
// the planner predicts fastest among those whose memory fits `budget`
// bytes, in *out. false when none fits. (--budget-mb X: the harness then
// runs the choice and prints its measured memory beside the budget.)
bool grid_choose(int gpus, int rows, double budget, GridPlanFn plan, const void *ctx, GridChoice *out);

// A function the student has not written yet says so by calling this first.
void lab_todo(const char *function);
