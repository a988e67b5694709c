// stage_given.h: lab07's pipeline stage (given; the student does not edit
// it). lab05's micro-batch API (pipeline.h: pp_begin_micro,
// pp_forward_compute, pp_backward_compute, pp_act_in, ...) over a stage
// whose units run as lab06 runs them: tensor-parallel over the stage's TP
// group, with sequence parallelism (lab06's sp.c: LayerNorm, dropout and
// the residual stream on this rank's T / t tokens). lab05's schedules
// (pipeline.c) drive it unchanged.
//
// What moves between stages is this rank's tokens of each micro-batch's
// residual stream, (micro_rows, T / t, C): rank tp of stage s sends to rank
// tp of stage s + 1 over the PP group, and each TP rank sends its own
// part, 1/t of the activations (Megatron's scatter-gather optimisation
// comes free with sequence parallelism).
//
// fp32; recomputation as lab06's (--recompute selective: the attention's
// probabilities made again; full: each block's forward again from its
// input, into one set); no split backward, no chunks (the functions of
// pipeline.h that need them stop the run saying so).
#pragma once

#include "comm.h"
#include "gpt.h"
#include "grid.h"
#include "pipeline.h"
#include "sp.h"
#include "tp_layout.h"

// One micro-batch's activations on this stage.
typedef struct {
    int *tokens, *targets;   // (Bm, T) the whole micro-batch on every rank of the TP group (first, last stage)
    float **stream;          // (nunits + 1) stream[u]: unit u's input, (Bm, Tt, C); [u0, u1] of this stage
    float **dstream;         // the same, their gradients
    SpBlockActs *blocks;     // (L) what each of the stage's blocks keeps (the others' zeroed)
    SpHeadActs head;         // the last stage's
    float *losses;           // (Bm, T) the last stage's, every token's
    int step, row0;          // its step, and the global row of its first row (dropout's masks)
    float loss_scale;
} StageActs;

// lab07's state behind pipeline.h's Pp (pp->run).
typedef struct PpRun {
    const Gpt *m;            // the whole model's shapes, B = micro_rows
    Sp *sp;                  // the TP group's shard of the layers, its scratch
    TpLayout *L;             // the layout of every unit's parts on this rank's TP place
    Prec prec;               // fp32
    float **params, **grads; // (nunits) this stage's units' parts (NULL elsewhere), within st's flat buffers
    const Grid *grid;        // the student's grid
    GridStep *st;            // the flat buffers, ZeRO-1's shard, the replicated tensors (grid.h)
    int done;                // micro-batches whose backward pass is done this step
    int early_sync;          // the first `done` < m after which grid_after_backward communicated (0: none)
    double early_bytes;      // the bus bytes it moved then
    double acts_scratch, acts_set;   // bytes: the scratch every micro-batch shares, one micro-batch's set (measured)
    StageActs *acts[PP_MAX_MICRO];
    SpBlockActs shared;      // --recompute full: the one set of the block running
    const int *x, *y;        // the pipeline's rows of the step (rows, T) on the host
    int step, row0;          // the step, and the pipeline's first row of the batch
    double loss;             // the last stage: the step's mean loss so far
} PpRun;

// The stage: sp's scratch for micro_rows rows, this stage's parameters
// (initialised as the single-device model's slices) and gradients, in
// st's flat buffers, padded to the shards of --zero 1 (grid_shard, the
// student's: checked), and the list of the replicated tensors. pp->u0,
// u1, group, p, s, m, micro_rows, T, C set; sp->tp.group set.
void stage_create(Pp *pp, PpRun *run, const Gpt *m, Sp *sp, TpLayout *L, int row0, const int *x, const int *y,
                  const Grid *g, GridStep *st, int zero);
// Each step, before the schedule.
void stage_step_begin(Pp *pp, int step);
// Whether this stage holds unit u.
bool stage_holds(const Pp *pp, int u);
