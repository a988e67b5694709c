// train.h: the single-device reference training loop.
//
// One model on one device, the whole global batch each step (optionally in
// K micro-batches whose gradients add up to the full batch's). Every lab's
// distributed run must reproduce what this does, step for step.
#pragma once

#include "ops.h"

#include <stdbool.h>

#include "args.h"
#include "dump.h"
#include "data.h"
#include "gpt.h"
#include "optim.h"

typedef struct {
    Args args;
    int micro;             // K micro-batches per step; K divides the batch
    // Each micro-batch's gradient the mean over its own tokens, the K then
    // averaged (as data-parallel ranks make it), instead of every one scaled
    // by the whole batch's tokens (as accumulation and a pipeline make it):
    // the same gradient, rounded otherwise (1 / (B T) is not a power of two
    // where 1 / (B T / K) may be).
    bool micro_mean;
    OptimConfig optim;
    Data data;
    Gpt *model;            // runs B / K rows at a time, in --precision
    // One buffer per unit each. params: the fp32 parameters AdamW updates
    // (fp32: the model's own, PARAMS; bf16: the master copy, OPTIM, as the
    // ZeRO paper counts it: K = 12 bytes of optimizer state a parameter);
    // w and grads: what the model runs on and its gradients, in the model's
    // precision (fp32: w is params; bf16: the bf16 working weights, PARAMS,
    // written from the master after each update, and bf16 gradients, GRADS).
    float **params, **m, **v;
    void **w, **grads;
    // bf16 only: false drops the master copy between steps (--master off): the
    // update starts from the bf16 weights each step, and an update smaller
    // than half a bf16 step (2^-9 of the weight) rounds away (the control
    // that shows why the master copy exists).
    bool master;
    int *x, *y;            // (B, T) host tokens of the current step's global batch
    int step;              // steps taken so far
} Trainer;

// Build the model (parameters initialised from the seed), its gradients and
// AdamW state, and the data source.
Trainer *train_create(const Args *a, int micro);
void train_free(Trainer *t);

// The gradient of the mean loss over step `t->step`'s global batch, left in
// t->grads; returns that mean loss.
double train_grads(Trainer *t);
// The optimizer update with those gradients; then the next step.
void train_update(Trainer *t);
// Both.
double train_step(Trainer *t);

// The yardstick: the reference runs that measure "the same training up to
// rounding" for a batch of `batch` rows. The first is the reference itself
// (the whole batch, this build's rounding); then micro-batches of 2 and of
// one row each (other sums over the batch's rows, the coarsest and the
// finest, as data parallelism, accumulation and a pipeline's micro-batches
// make them; the finest also with each row its own mean, then averaged, as
// data-parallel ranks scale them), and the whole batch rounded the other way (ops_set_rounding: another exp, other sums inside every matrix
// product, as another BLAS kernel, instruction set or a GPU makes them);
// in bf16 (`bf16`) also the whole batch with the partials rounding (ops.h:
// the rounding of partial products added in bf16 across tensor-parallel
// ranks). Writes at most `max`, returns how many; the labs' harness and the
// grader both use them, so both measure the same rounding.
typedef struct {
    int micro;            // micro-batches of the step's batch
    bool micro_mean;      // Trainer.micro_mean: averaged as data-parallel ranks average
    OpsRounding rounding; // ops_set_rounding's mode for the run
} YardstickRun;
enum { YARDSTICK_MAX = 6 };
int train_yardstick(int batch, bool bf16, YardstickRun *runs, int max);

// What build/ref --dump writes, recorded step by step: the losses, the
// batches, the initial parameters and the first step's gradient (copies,
// counted under OTHER: they are not part of training).
typedef struct {
    int steps;              // recorded so far
    float *loss;            // (steps)
    int64_t *x, *y;         // (steps, B, T)
    float **init_params;    // the units before the first step
    float **first_grads;    // the units' gradients of the first step (fp32; bf16 ones widened, exactly)
    bool tensors;           // keep init_params and first_grads
    OpsWork work0;          // ops_work() when it began
} TrainHistory;
// tensors: also the parameter and gradient copies (a dump wants them; a run
// without one would only pay their memory).
void train_history_init(TrainHistory *h, const Trainer *t, bool tensors);
// One step (gradients, update) recorded; returns its loss.
double train_step_recorded(Trainer *t, TrainHistory *h);
// The dump: meta, losses, batches, param/init, grad/first, param/final,
// optim/m, optim/v, the work the training asked of ops.h (ops/matmul,
// ops/layernorm), and each rank's statistics when c is not NULL
// (collective over c then).
typedef struct Comm Comm;
void train_history_dump(const TrainHistory *h, const Trainer *t, DumpWriter *w, Comm *c);
void train_history_free(TrainHistory *h, const Trainer *t);
