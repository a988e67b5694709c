// spec_train.h: what the training labs' specs (lab02, lab03) share on top
// of checks.c: memory held against a formula, the tracked total and the heap
// included, with exact bytes when the figure and the bound round alike.
#pragma once

#include <stdbool.h>

#include "lab.h"
#include "results.h"

// What check_peak reads: a category's column of mem/peak (MEM_PARAMS ...),
// the peak of the tracked total, or the independent measure of the heap.
enum { PEAK_TOTAL = -2, PEAK_HEAP = -1 };

// The largest unit of a dump's model, in floats (from the param/final/
// tensor names, "block0.attn.wq": the unit is before the first dot).
double largest_unit_floats(const DumpFile *f);

// Every rank's peak of `source` at most `bound` bytes; `diagnosis` says why
// it is over when it is. PEAK_HEAP is not checked on a GPU (the device's
// used memory, every process's on it: see spec_train.c).
void check_peak(Grader *g, const Run *run, int source, const char *what, double bound, const char *why,
                const char *diagnosis);

// Every rank's peak of a tracked category at least `bound` bytes: what the
// formula needs held, held (a copy the method needs and the code left out
// is not a saving: bf16's fp32 master weights). `diagnosis` says why it is
// under when it is.
void check_peak_at_least(Grader *g, const Run *run, int source, const char *what, double bound, const char *why,
                         const char *diagnosis);

// bf16 with fp32 master weights (meta/config "precision bf16"): the master
// AdamW updates is kept from step to step. Undone by its last update (the
// dumped moments and the configuration give it, element by element), a
// master kept in fp32 lies anywhere between bf16's values; one read back
// from the bf16 parameters before each update lies on bf16's grid (as does
// one overwritten from them after it). Over the matrices' elements, a kept
// master has about 0.05% on the grid (within 16 fp32 units of the last
// place, by chance); either mistake puts nearly all of them there. Nothing
// for fp32 runs. The same of AdamW's moments (optim/m, optim/v): fp32 ones
// lie anywhere, bf16 ones on the grid.
void check_master_kept(Grader *g, const Run *run);

// The tracked category of the largest excess over `expected` (bytes per
// category, MEM_NCAT of them, a rank's peaks), written into buf as "3.47 MB
// more than the formula as COMM": for a total over its bound, where to look.
const char *excess_category(const Run *run, const double *expected, char *buf, size_t len);

// The work the ops were asked for (ops.h's counters, summed over the ranks)
// against single-device training's (the reference run's), times how many
// ranks repeat it (1 where the lab shares it out; t where tensor
// parallelism leaves the LayerNorms whole on every rank). `balanced`: every
// rank does an equal share. `more_*`: why a run would do more.
void check_work(Grader *g, const Run *run, double matmul_times, double layernorm_times, bool balanced,
                const char *more_matmul, const char *more_layernorm);
// The same with the products' factor explained (matmul_why: where the run's
// products are not the reference's times a count of ranks).
// Under --recompute full, the products a whole-block recomputation adds over
// build/ref --recompute full's: the reference's stops at GELU (gpt.c), a
// lab's block forward run again makes the MLP's second product too, M x 4C
// x C a block and step. The factor over the reference's work (1 without
// full recomputation, or without the reference's figure).
double recompute_w2_times(const Run *run);
void check_work_why(Grader *g, const Run *run, double matmul_times, const char *matmul_why, double layernorm_times,
                    bool balanced, const char *more_matmul, const char *more_layernorm);

// The memory live after each step (mem.h's mem/live_per_step): a correct
// step frees what it allocates, so the live total after the last step is
// the one after the first, up to LIVE_GROWTH_SLACK (what the libraries
// allocate once, late); a buffer allocated every step and never freed
// grows it step after step.
#define LIVE_GROWTH_SLACK 65536.0
void check_live_growth(Grader *g, const Run *run);

// The kernel's count of each rank's resident memory during training (mem.h)
// against the wrapped heap's: it may rise above the heap's rise by the
// libraries' own buffers (MPI's shared memory and temporary buffers; at
// most 5.2 MB measured), no more.
// Not checked on a GPU, where the driver maps host memory of its own.
#define RESIDENT_SLACK (8.0 * (1 << 20))
void check_resident(Grader *g, const Run *run);

// The kernel's count at the seal (mem/resident_seal), less the wrapped
// heap's live bytes then (which the measures see): what the program, its
// libraries and the harness hold before training. RESIDENT_SEAL_MOST bounds
// it: memory a submission touched before the seal (a static array filled in
// a constructor, or in a hook the harness calls before training) is held
// through the run where no measure of the training sees it. Measured on the
// solutions at every graded run (labs 02 to 07, 1 to 8 ranks): 14 MB at one
// rank, at most 20.7 MB (the program's text, Open MPI's shared-memory
// segments and BLAS's buffers, growing with the ranks); the bound is about
// twice that, for other builds of those libraries.
// Not checked on a GPU, where the driver's own host memory is part of it.
#define RESIDENT_SEAL_MOST (40.0 * (1 << 20))
void check_resident_seal(Grader *g, const Run *run);

// The bookkeeping helpers (comm.h's comm_all_gather_host, comm_sum_double,
// ...) called inside the training steps, whose bytes no counter of the
// collectives sees: at most what the lab's given code makes there, `calls`
// and `bytes` per step, each rank (0 in every lab: the given code sets its
// own gathers in a step aside, comm_step_window). Measured on the solutions
// at every graded run: none.
void check_step_helpers(Grader *g, const Run *run, double calls, double bytes);

// ---- the ledger: which collective, on which group, of what size, how often ----

// The groups of a grid whose inner groups are `inner` consecutive ranks
// (tensor parallelism's or a pipeline's) and whose outer groups are the
// ranks `inner` apart (data parallelism's); for a send or a receive, the
// rank's neighbours in its inner group.
// A grid of three axes (lab07) has a middle group between them: `middle`
// ranks `inner` apart within blocks of inner x middle (the pipeline's), the
// outer groups then inner x middle apart, and the sends and receives along
// the middle axis.
typedef enum {
    LEDGER_INNER, LEDGER_OUTER, LEDGER_WORLD, LEDGER_NEXT, LEDGER_PREV, LEDGER_OTHER, LEDGER_MIDDLE, LEDGER_NGROUPS
} LedgerGroup;

// What one step needs of one operation on one group: its payload bytes (all
// calls together) and the most and the fewest calls it takes. Fewer calls
// for the same bytes are allowed down to `least` (two collectives merged
// into one); more calls (one per token or row), fewer than `least` (two
// steps' or two micro-batches' bytes in one call) or other bytes (a
// collective added, a size wrong) are not.
typedef struct {
    LedgerGroup group;
    int op;          // CommOp
    double bytes;    // payload per step, all calls together
    double calls;    // at most, per step
    const char *what;   // what makes them: "g, f, the embedding's and the head's all-reduces of M C ..."
    double least;    // at least, per step; below 1 (0): one, since every step makes its own
} LedgerWant;

// Every rank's ledger (comm.h, the dump's comm/ledger) against what `want`
// says that rank needs per step (up to LEDGER_MAX lines; it returns how
// many), times the steps: one check for the operations and sizes, one for
// the calls. names[LEDGER_INNER] and [LEDGER_OUTER]: "tensor-parallel group", ...
// A world of more than 63 ranks is not checked (groups are bit masks).
enum { LEDGER_MAX = 16 };
typedef int (*LedgerWants)(const Run *run, int rank, LedgerWant *out, const void *ctx);
void check_ledger(Grader *g, const Run *run, int inner, const char *const *names, LedgerWants want, const void *ctx);
// The same on a grid of three axes: names[LEDGER_INNER], [LEDGER_OUTER] and
// names[2] the middle group's.
void check_ledger_grid(Grader *g, const Run *run, int inner, int middle, const char *const *names, LedgerWants want,
                       const void *ctx);

// The factors the gradients of a tensor-parallel run on a grid (labs 04 and
// 06) can be off by (x t, 1/t, x dp, 1/dp) and their causes, from the dump's
// <prefix>/t and <prefix>/dp: a LabSpec's ratio_causes.
int tp_ratio_causes(const Run *run, const char *prefix, RatioCause *out);
