// pipeline_given.h: the harness's side of lab05's micro-batch API: the
// state behind a Pp (PpRun) and what main does with it around the
// student's schedule. pipeline.h declares what the student's file calls
// (pp_begin_micro, pp_forward_compute, ...); pipeline_given.c defines both.
// Given code: students do not edit it.
#pragma once

#include <stdbool.h>

#include "comm.h"
#include "dump.h"
#include "gpt.h"
#include "pipeline.h"
#include "pp_schedule.h"

enum { PPRUN_MAX_EVENTS = 3 * PP_MAX_MICRO, PPRUN_MAX_LOG = 8 * PPRUN_MAX_EVENTS };

typedef struct PpRun {
    Gpt *model;                  // the whole model's shapes; B = micro_rows
    // This stage's units only (NULL elsewhere), (nunits) each: parameters
    // and gradients of the model's precision (pp->type: fp32, or bf16), and
    // the optimizer's fp32 state: Adam's moments and, in bf16 only, the
    // master copy of the parameters that AdamW updates (NULL in fp32).
    void **params, **grads;
    float **master, **m, **v;
    double stage_params;         // parameters this stage holds
    int most, least;             // units of the largest and the smallest stage (the partition)
    // Activation bytes, measured before any of the student's code runs: the
    // scratch every micro-batch shares, and one micro-batch's activations of
    // this stage's units. The schedule's bound is scratch + k sets. With
    // pp->recompute a micro-batch's set is its boundary (its input, tokens
    // and targets, its messages) and the shared set is counted once:
    // scratch + shared + k sets.
    // Interleaved: acts_set is the largest chunk's set, chunk_set[c] each's.
    double acts_scratch, acts_shared, acts_set, chunk_set[PP_MAX_CHUNKS];
    // The backward pass split (the zero-bubble schedules): the bytes a
    // micro-batch's B keeps for its W on this stage's units (the model's
    // gpt_saved_bytes), beyond its set. The bound adds k_w of them.
    double acts_saved;
    // The micro-batches alive on this stage; interleaved, chunk c's
    // micro-batch mb in slot c m + mb (v m <= PP_MAX_MICRO), as the arrays below.
    GptActs *acts[PP_MAX_MICRO];
    // With pp->recompute: the one set of this stage's units' activations
    // that every micro-batch's passes use, lent each pass the micro-batch's
    // boundary (its input, targets, messages, dropout key); its own output
    // buffer (the stage's output made again goes there, not into a message
    // a send may still be reading); and the micro-batch whose activations
    // it holds (-1: none, or not this step's).
    GptActs *shared;
    void *shared_out;
    int held;
    bool forward_done[PP_MAX_MICRO], backward_done[PP_MAX_MICRO];
    // The split backward: B done (pp_backward_input), W not yet; the
    // micro-batches between their B and their W now, at most this step and
    // ever; B's whose W never came (all steps), and the first: its step and
    // micro-batch.
    bool input_done[PP_MAX_MICRO];
    int pending, max_pending, max_pending_ever;
    int w_missing, w_missing_step, w_missing_mb;
    int live, max_live;          // micro-batches alive now, and at most this step (and ever)
    int max_live_ever;
    const int *x, *y;            // the step's rows of this pipeline (rows, T) on the host
    int step, row0;
    double loss;                 // the last stage: the step's mean loss so far
    int backwards;               // backward passes this step (a split one counts at its W)
    int zeroed_between;          // backward passes that found the gradients zeroed after an earlier one
    PpEvent events[PPRUN_MAX_EVENTS];   // this step's, in order
    int nevents;
    CommEvent *log;              // this step's communication and passes, in order (comm.h), PPRUN_MAX_LOG at most
    int nlog;
    double busy;                 // seconds in this step's passes
    double busy_total;           // and over steps 2.. (the first warms up)
    int unfreed, unwaited;       // micro-batches the schedules left alive, sends left in flight (all steps)
    // Recomputation: passes made again this step and at most in a step; their
    // seconds this step and over steps 2..; their multiply-adds and LayerNorm
    // rows (ops.h's counters, all steps, as the harness seals them).
    int recomputes, recomputes_most;
    double rc_seconds, rc_seconds_total, rc_matmul, rc_layernorm;
    // Backward passes that found the shared set holding another micro-batch's
    // activations (all steps), and the first: its step, micro-batch and the
    // one whose activations it ran on (-1: none, or a step's leftovers).
    int stale, stale_step, stale_mb, stale_held;
} PpRun;

// The run's state for a pipeline's rows of the batch from row0, x and y
// (rows, T) on the host (the loop fills them each step).
void pprun_init(PpRun *run, Gpt *model, int row0, const int *x, const int *y);
// The student's partition (pp->u0, pp->u1, from pp_partition), checked over
// the pipeline: the units in order, each stage a range that starts where
// the last one ended, none empty. Sets run->most and run->least.
void pprun_check_partition(Pp *pp, int nunits);
// Interleaved: the same over the p v virtual stages (pp->vs[c] of chunk c,
// from pp_virtual_stage, each held by one chunk of one stage; its units
// pp->cu0[c], cu1[c], from pp_partition over p v stages): in the order of
// the virtual stages, the units in order, none empty. Sets run->most and
// run->least (units of a virtual stage).
void pprun_check_chunks(Pp *pp, int nunits);
// Whether this stage holds unit u (in one of its chunks).
bool pprun_holds(const Pp *pp, int u);
// The activations' scratch allocated (and, with pp->recompute, the shared
// set), measured with one micro-batch's set, then this stage's parameters
// (initialised), gradients, moments and, in bf16, master copy (initialised:
// the parameters are its rounding).
void pprun_alloc_stage(Pp *pp);

// Around the student's schedule, each step: the state reset and the log
// started; then the log stopped and what the schedule left behind (sends
// never waited on, micro-batches never ended) counted for the grader and
// tidied.
void pprun_step_begin(Pp *pp, int step);
void pprun_step_end(Pp *pp);

// Units whole on the pipeline's first rank (NULL elsewhere), in fp32 on the
// host (bf16 widened, exactly), from the stages that hold them
// (bookkeeping, not counted as communication): every unit of `units` (this
// stage's, as run->params, of type t), or written into the dump under
// `prefix` a unit at a time (one whole unit on the host at once).
float **pprun_gather_units(const Pp *pp, void *const *units, CommType t);
void pprun_dump_units(const Pp *pp, DumpWriter *dw, const char *prefix, void *const *units, CommType t);
