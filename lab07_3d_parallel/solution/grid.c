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
