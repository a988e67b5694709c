// zero.h: ZeRO stages 1, 2 and 3, the interface between the harness
// (main.c) and the student's file (zero.c).
//
// Data parallelism keeps 16 bytes per parameter on every rank (4 parameter,
// 4 gradient, 8 AdamW moments). ZeRO keeps the same training, exactly, but
// shards that state: each unit's flat buffer is split into N equal shards
// (the last one padded), and rank r keeps only shard r of
//   stage 1: the optimizer state,
//   stage 2: and the gradients,
//   stage 3: and the parameters, gathered for each unit just before it runs.
// The harness runs the forward and backward passes unit by unit and calls
// the hooks below; the student's code decides what lives where, through
// mem.h, and moves it through comm.h.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "comm.h"
#include "gpt.h"
#include "optim.h"

enum { ZERO_MAX_UNITS = 64 };

typedef struct {
    Comm *comm;
    int stage;               // 0 (plain data parallelism) to 3
    bool prefetch;           // stage 3: gather the next unit while this one computes
    const Gpt *model;        // units: model->units[u].size floats each
    int nunits;
    OptimConfig optim;
    // Persistent state, per unit u; what exists depends on the stage (NULL otherwise):
    float *params[ZERO_MAX_UNITS];        // stages 0-2: the whole unit's parameters (size floats)
    float *param_shard[ZERO_MAX_UNITS];   // stage 3: this rank's shard of them (shard_len floats)
    float *grads[ZERO_MAX_UNITS];         // stages 0-1: the whole unit's gradient (padded: N shard_len)
    float *grad_shard[ZERO_MAX_UNITS];    // stages 1-3: this rank's shard of the averaged gradient:
                                          //   stage 1, a view into grads (grads[u] + shard_offset),
                                          //   where the reduce-scatter lands in place, so stage 1
                                          //   holds 4 psi of gradients, as the paper counts;
                                          //   stages 2-3, a buffer of its own (shard_len floats)
    float *m[ZERO_MAX_UNITS], *v[ZERO_MAX_UNITS];   // AdamW moments: whole (stage 0) or shard (1-3)
    // Working buffers, alive only while a unit runs (stages 2-3):
    float *gathered[ZERO_MAX_UNITS];      // stage 3: the unit's parameters, gathered (N shard_len)
    CommHandle *gather_handle[ZERO_MAX_UNITS];   // stage 3: a gather in flight (prefetch)
    float *unit_grad[ZERO_MAX_UNITS];     // stages 2-3: the unit's whole gradient during its backward
} Zero;

// The shards of a unit of `size` floats over N ranks: every shard is
// shard_len floats, N * shard_len >= size (the last shards padded with
// zeros), and rank r's starts at shard_offset = r * shard_len (where
// comm_reduce_scatter and comm_all_gather of N * shard_len floats put rank
// r's block; the harness checks it at start). shard_len may pad more than
// it must (to align shards, say), by at most ZERO_MAX_PAD floats beyond
// ceil(size / N); the harness stops a run that pads more. The memory
// formulas count the unit as N * shard_len floats, your padding included.
enum { ZERO_MAX_PAD = 64 };
size_t shard_len(size_t size, int N);
size_t shard_offset(size_t size, int N, int r);

// Allocate the stage's persistent state (mem_alloc, zero-filled): the
// harness then initialises the parameters it finds (params or param_shard),
// and at the end frees whatever the Zero still points to.
void zero_setup(Zero *z);

// Unit u's whole parameters, for its forward pass (stage 3: gathered), and
// what to do once the pass is done.
float *zero_before_forward(Zero *z, int u);
void zero_after_forward(Zero *z, int u);

// Unit u's whole parameters and a whole gradient buffer (zeroed by the
// harness) for its backward pass, and what to do once it is done.
float *zero_before_backward(Zero *z, int u, float **grad);
void zero_after_backward(Zero *z, int u);

// After the backward pass of every unit: every rank's parameters take the
// AdamW step (t counts from 1) with the gradient averaged over the ranks.
void zero_step(Zero *z, int t);

// A function the student has not written yet says so by calling this first.
void lab_todo(const char *function);
