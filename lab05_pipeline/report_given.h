// report_given.h: what lab05's run reports at its end, beside what every
// training lab reports (harness_finish): each stage's units, time and
// activation memory beside the schedule's bound, the bubble measured and
// replayed, the schedule drawn, and its dump entries for the grader.
// Given code: students do not edit it.
#pragma once

#include <stdbool.h>

#include "dump.h"
#include "harness.h"
#include "mem.h"
#include "pipeline_given.h"
#include "pp_budget.h"
#include "pp_schedule.h"

// One rank's stage, as the end gathers it from every rank.
typedef struct {
    int u0, u1, max_live;        // its units [u0, u1), the most micro-batches alive at once
    double idle, busy;           // seconds a step (the mean over steps 2..)
    double acts_peak, acts_set, acts_scratch, acts_shared;   // bytes
    double psi;                  // its parameters
    double peak[4];              // PARAMS, GRADS, OPTIM, ACTS peaks (bytes)
    PpBudget budget;             // and what pp_budget says they hold
    // Full recomputation: passes made again (the most in a step); their
    // multiply-adds and LayerNorm rows beside the rank's (all steps), their
    // seconds beside the steps' (steps 2..); backward passes on activations
    // not made again, and the first (step, micro-batch, the one it ran on).
    int recomputes;
    double rc_matmul, rc_layernorm, matmul, rc_seconds, seconds;
    int stale, stale_step, stale_mb, stale_held;
    // The split backward: the bytes B keeps for W on its units; the most
    // micro-batches between their B and their W at once; B's whose W never
    // came (all steps), and the first (step, micro-batch).
    double acts_saved;
    int max_pending, w_missing, w_missing_step, w_missing_mb;
    // Interleaved: its chunks' virtual stages and units, and each chunk's
    // set of one micro-batch's activations (bytes); chunk 0's are u0, u1.
    int vs[PP_MAX_CHUNKS], cu0[PP_MAX_CHUNKS], cu1[PP_MAX_CHUNKS];
    double chunk_set[PP_MAX_CHUNKS];
} Lab05Stage;

// What the end needs: main fills the first fields, lab05_report the rest.
typedef struct {
    Pp *pp;
    bool gpipe, interleaved, bf16;
    int zb;                      // the zero-bubble schedules: 1 ZB-H1, 2 ZB-H2 (0: GPipe, 1F1B or interleaved)
    const char *figure;          // --figure, or NULL
    Lab05Stage *stages;          // (N) every rank's, in world order
    // The last step's events of this rank's pipeline, every stage's (p rows
    // of `width`, counts[s] used), replayed with equal stages and with the
    // measured durations.
    int *counts, width;
    PpEvent *ideal, *measured, *ideal_rows[64], *measured_rows[64];
    double span_ideal, span_measured;
    double bubble_ideal, bubble_measured, formula, wall_idle;
    // The order of F and B alone (recomputes aside), replayed with equal
    // stages: the bubble the formula speaks of.
    double bubble_order, span_order;
    // The idle share of the stages' own spans (first pass to last) in the
    // replays with equal stages and with the measured durations, and the
    // zero-bubble schedules' formula for it.
    double span_bubble, span_bubble_measured, span_formula;
} Lab05End;

// After the loop: the events gathered over the pipeline and replayed, the
// stages gathered over the world, then rank 0 prints the table per stage,
// the bubble four ways, the schedule drawn and, with --figure, the SVG; then
// each stage's memory by category beside pp_budget's formulas, and under
// full recomputation what it cost.
// Collective. mem: mem_report() right after the loop.
void lab05_report(Lab05End *e, const HarnessRun *h, const MemReport *mem);

// harness_finish's dump_more (ctx: a Lab05End): the pp/ entries
// (docs/dump-format.md). Collective: every rank's log of the last step is
// gathered.
void lab05_dump_more(DumpWriter *dw, void *ctx);
