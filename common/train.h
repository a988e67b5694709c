// train.h: the single-device reference training loop.
//
// One model on one device, the whole global batch each step (optionally in
// K micro-batches whose gradients add up to the full batch's). Every lab's
// distributed run must reproduce what this does, step for step.
#pragma once

#include "args.h"
#include "data.h"
#include "gpt.h"
#include "optim.h"

typedef struct {
    Args args;
    int micro;             // K micro-batches per step; K divides the batch
    OptimConfig optim;
    Data data;
    Gpt *model;            // runs B / K rows at a time
    float **params, **grads, **m, **v;   // one buffer per unit each
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
