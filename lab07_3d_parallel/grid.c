// grid.c: YOUR FILE. The rank grid of 3D parallelism. See grid.h for the
// picture, README.md for the lab, and run
//     make lab07 && mpirun --oversubscribe -np 8 build/lab07 --tp 2 --pp 2
// to see each rank's place on the grid and its groups, then the loss
// beside single-device training's.
//
// As given, nothing is written: the run stops after printing what is
// missing. Do the TODOs in order; delete a function's lab_todo(...) line
// once it is done.
//
// Tools (comm.h): comm_split(world, color, key) makes a group of the ranks
// that give the same color, ordered by key; comm_rank, comm_size; the
// collectives comm_all_reduce_sum, comm_all_reduce_avg,
// comm_reduce_scatter_avg and comm_all_gather, each on the group it is
// given (which group is the lab's question).
#include "grid.h"

#include "comm.h"

// ---- 1a. the coordinates ----------------------------------------------------------

GridDims grid_coords(GridDims n, int rank) {
    lab_todo(__func__);
    // TODO(lab07): the coordinates of world rank `rank`, tensor parallel
    // innermost, then pipeline, then data (grid.h's picture: at t = 2, p = 2,
    // rank 6 is dp 1, pp 1, tp 0). Why this order: a TP group talks at every
    // layer, so its t ranks must be the closest ones, consecutive ranks on
    // one node. As given: every rank at the origin.
    (void)n, (void)rank;
    GridDims at = {0, 0, 0};
    return at;
}

// ---- 1b. the groups -----------------------------------------------------------------

void grid_groups(Grid *g, Comm *world) {
    lab_todo(__func__);
    // TODO(lab07): three calls to comm_split, one group along each axis: the
    // ranks that agree on the two other coordinates (the color) ordered by
    // the coordinate along the group's axis (the key), so that stage s is
    // rank s of g->pp_group. Every rank calls comm_split three times, in
    // the same order. As given: no groups.
    (void)world;
    g->tp_group = g->pp_group = g->dp_group = NULL;
}

// ---- 2. the given code's groups --------------------------------------------------------

void grid_wire(const Grid *g, Pp *pp, Sp *sp) {
    lab_todo(__func__);
    // TODO(lab07): give the stage's layers and the pipeline their groups.
    // Every block's all-gathers and reduce-scatters (lab06's sp.c) run on
    // sp->tp.group, among the t ranks that split the stage's layers; the
    // pipeline's sends and receives (lab05's pipeline.c) on pp->group,
    // among the p stages of this replica that hold the same TP part. As
    // given: none (the run stops before training, saying so).
    (void)g, (void)pp, (void)sp;
}

// ---- 3. ZeRO-1's shard -----------------------------------------------------------------

void grid_shard(const Grid *g, size_t n, size_t *off, size_t *len) {
    lab_todo(__func__);
    // TODO(lab07): this rank's shard of n floats shared out over its
    // data-parallel group (lab03's stage 1: every shard the same length,
    // the last padded; rank k of the group holds the k-th). Only the
    // replicas of this stage and TP part hold the same n floats. As given:
    // the whole buffer (no sharding).
    (void)g;
    *off = 0, *len = n;
}

// ---- 4. the step's gradients -----------------------------------------------------------

void grid_after_backward(const Grid *g, GridStep *st, int done) {
    lab_todo(__func__);
    // TODO(lab07): once the step's last micro-batch is done on this stage
    // (done == st->m), and not before (the gradients are the sum over all
    // the micro-batches):
    //  (a) each replicated tensor's gradient st->rep[i] summed over the TP
    //      group (comm_all_reduce_sum): under sequence parallelism each TP
    //      rank's covers its own tokens; once a step, not once a
    //      micro-batch (the sum of the sums is the same, for m times fewer
    //      bytes);
    //  (b) the gradients averaged over the replicas of this stage and TP
    //      part: --zero 0 (st->zero == 0) all st->padded of them
    //      (comm_all_reduce_avg); --zero 1 reduce-scattered in place, each
    //      rank left the average of its own shard at st->grads +
    //      st->shard_off (comm_reduce_scatter_avg of st->padded floats:
    //      rank k's block is the k-th st->shard_len).
    // As given: nothing (every replica updates with its own gradients).
    (void)g, (void)st, (void)done;
}

// ---- 5. ZeRO-1's parameters gathered ---------------------------------------------------

void grid_after_step(const Grid *g, GridStep *st) {
    lab_todo(__func__);
    // TODO(lab07): --zero 1: the optimizer updated this rank's shard alone
    // (st->params + st->shard_off); gather every replica's into the whole
    // parameters (comm_all_gather of st->padded floats, the send this
    // rank's block in place) for the next
    // step's forward pass. --zero 0: nothing to do. As given: nothing.
    (void)g, (void)st;
}

// ---- 6. choosing a configuration -------------------------------------------------------

bool grid_choose(int gpus, int rows, double budget, GridPlanFn plan, const void *ctx, GridChoice *out) {
    lab_todo(__func__);
    // TODO(lab07): try every candidate: t among the divisors of gpus, p
    // among the divisors of gpus / t, dp = gpus / (t p), m from 1 to a
    // replica's rows (rows / dp), and each recomputation (GPT_RECOMPUTE_NONE,
    // _SELECTIVE, _FULL). plan(ctx, c) says whether the lab can run it
    // (valid), the memory a rank holds and a step's seconds: keep the
    // fastest of the valid ones that fit the budget. As given: none chosen.
    (void)gpus, (void)rows, (void)budget, (void)plan, (void)ctx, (void)out;
    return false;
}
