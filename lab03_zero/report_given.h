// report_given.h: lab03's given code around its training loop: the ZeRO
// state torn down after a run, the whole units gathered from the shards,
// and what the run reports at its end beside what every training lab
// reports (harness_finish): the memory table against the formulas, its dump
// entries for the grader, its figure. Students do not edit it.
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "args.h"
#include "comm.h"
#include "data.h"
#include "dump.h"
#include "gpt.h"
#include "harness.h"
#include "mem.h"
#include "zero.h"
#include "zero_budget.h"

// One run's setting: this rank's rows and batch, shared by every training
// (the graded one and --figure's).
typedef struct {
    Args a;
    Comm *c;
    Gpt *model;
    Data data;
    int row0, rows;
    int *x, *y;
} Setup;

// What a training leaves for the end.
typedef struct {
    MemReport mem;        // this rank's peaks during training
    CommStats comm;       // and its communication
    // The order of events, per step, for the grader (prefetch is judged from
    // it, not from timings): how many units began their forward compute
    // (all but the last) and their backward compute (all but unit 0) with
    // communication in flight, i.e. with the next unit's gather under way.
    int64_t *prefetch_fwd, *prefetch_bwd;   // (steps)
} Outcome;


// The sizes the formulas need: psi padded by the student's shard_len (N
// shards a unit) and its two largest units; and the same padded as little as
// the contract allows (N shards of ceil(size / N)), the model's alone, for
// the printed expectations. The student's shard_len and shard_offset are
// held to zero.h's contract here (a CHECK that names the function), unless
// unfinished.
typedef struct {
    double psi_pad, unit1, unit2;       // by the student's shard_len
    double model_pad, model1, model2;   // by the model alone
} Lab03Sizes;
Lab03Sizes lab03_sizes(const Gpt *m, Comm *c);

// The initial parameters, from the counter-based generator, into what the
// student's zero_setup allocated: a rank makes just its shard when it keeps
// only a shard, and it equals the same slice of the whole. In bf16 the fp32
// master copy (whole at stage 0, the shard from stage 1 on) is made so, and
// the bf16 parameters are it rounded.
void lab03_init_params(const Setup *s, Zero *z);
// Free every buffer the Zero still points to (the student's code allocates
// them; the harness lets them go after the run).
void lab03_zero_teardown(Zero *z);
// Whole units of this rank's parameters (or optimizer state), of element
// type t, gathered from the shards where the stage shards them (`sharded`:
// the optimizer's state, whole at stage 0 only): (nunits) fp32 host arrays
// (bf16 widened), on every rank.
float **lab03_gather_whole(const Setup *s, const Zero *z, void *const *whole, void *const *shard, CommType t,
                           bool sharded);
// What each rank held, against the stage's formulas (the largest rank's
// figures), and the bytes sent per step against the stage's. Collective.
void lab03_print_memory(const Setup *s, const Outcome *o, const ZeroBudget *b, int stage, double model_pad,
                        bool bf16);

// What the end needs, gathered by main.
typedef struct {
    Setup *s;
    int stage;
    bool prefetch;
    double psi_pad, unit1, unit2, acts_expected;
    double *sumsq;   // (N) each rank's sum of squares of its whole parameters
    Outcome *o;
    Zero *z;   // the graded run's, torn down once its dump is written
    const char *figure;
    const Reference *ref;
} Lab03End;
// harness_finish's dump hook (ctx: a Lab03End).
void lab03_dump_more(DumpWriter *dw, void *ctx);
// The figure: memory per rank by category, stages 0 to 3, fp32 beside bf16
// (peaks[0] fp32, peaks[1] bf16: the largest rank's per stage and category).
void lab03_write_figure(const char *path, const double peaks[2][4][MEM_NCAT], int N, double psi, bool unfinished);
