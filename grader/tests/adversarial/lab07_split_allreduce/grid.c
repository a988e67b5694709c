// An adversarial lab07 submission: the data-parallel average cut into calls of 64 floats, the same
// bytes in thousands of calls.
// grid.c: the rank grid, the solution. See grid.h for the picture.
#include "grid.h"

#include "comm.h"

// ---- 1a. the coordinates ----------------------------------------------------------

// Megatron's order, innermost first: tp, then pp, then dp. The t ranks of a
// tensor-parallel group are consecutive, so a launcher that fills one node
// before the next puts them on one node.
GridDims grid_coords(GridDims n, int rank) {
    GridDims at = {.tp = rank % n.tp, .pp = rank / n.tp % n.pp, .dp = rank / (n.tp * n.pp)};
    return at;
}

// ---- 1b. the groups -----------------------------------------------------------------

// A group is the ranks that agree on the two other coordinates: the color
// numbers that pair, the key is the coordinate along the group's own axis
// (so that rank k of the group is the one at k).
void grid_groups(Grid *g, Comm *world) {
    GridDims n = g->n, at = g->at;
    g->tp_group = comm_split(world, at.dp * n.pp + at.pp, at.tp);
    g->pp_group = comm_split(world, at.dp * n.tp + at.tp, at.pp);
    g->dp_group = comm_split(world, at.pp * n.tp + at.tp, at.dp);
}

// ---- 2. the given code's groups --------------------------------------------------------

// The layers split by width talk among the stage's TP group; the stages of
// one replica, holding the same TP part, among the PP group.
void grid_wire(const Grid *g, Pp *pp, Sp *sp) {
    sp->tp.group = g->tp_group;
    pp->group = g->pp_group;
}

// ---- 3. ZeRO-1's shard -----------------------------------------------------------------

// Over the DP group: the dp replicas of this stage and TP part hold the
// same n floats (the world's other ranks hold other parts, of other sizes).
void grid_shard(const Grid *g, size_t n, size_t *off, size_t *len) {
    *len = (n + (size_t)g->n.dp - 1) / (size_t)g->n.dp;
    *off = (size_t)g->at.dp * *len;
}

// ---- 4. the step's gradients -----------------------------------------------------------

// After the last micro-batch: the replicated tensors' sums over the TP
// group (each rank saw T/t of the tokens), then the average over the DP
// group, whole or (ZeRO-1) each rank's shard, in place.
void grid_after_backward(const Grid *g, GridStep *st, int done) {
    if (done < st->m) return;
    for (int i = 0; i < st->nrep; i++) comm_all_reduce_sum(g->tp_group, st->rep[i].grad, st->rep[i].n);
    if (st->zero == 0)
        for (size_t at = 0; at < st->padded; at += 64)
            comm_all_reduce_avg(g->dp_group, st->grads + at, st->padded - at < 64 ? st->padded - at : 64);
    else comm_reduce_scatter_avg(g->dp_group, st->grads, st->grads + st->shard_off, st->padded);
}

// ---- 5. ZeRO-1's parameters gathered ---------------------------------------------------

void grid_after_step(const Grid *g, GridStep *st) {
    if (st->zero == 1) comm_all_gather(g->dp_group, st->params + st->shard_off, st->params, st->padded);
}

// ---- 6. choosing a configuration -------------------------------------------------------

// Every (t, p, dp, m, recomputation): the planner's fastest that the lab
// can run and that fits the budget.
bool grid_choose(int gpus, int rows, double budget, GridPlanFn plan, const void *ctx, GridChoice *out) {
    bool found = false;
    double best = 0;
    for (int t = 1; t <= gpus; t++)
        for (int p = 1; gpus % t == 0 && p <= gpus / t; p++) {
            if ((gpus / t) % p) continue;
            const int dp = gpus / (t * p);
            for (int m = 1; m <= rows / dp; m++)
                for (int rc = GPT_RECOMPUTE_NONE; rc <= GPT_RECOMPUTE_FULL; rc++) {
                    GridChoice c = {t, p, dp, m, (GptRecompute)rc};
                    GridPlan f = plan(ctx, c);
                    if (!f.valid || f.bytes > budget || (found && f.seconds >= best)) continue;
                    *out = c, best = f.seconds, found = true;
                }
        }
    return found;
}
