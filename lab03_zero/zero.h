// zero.h: ZeRO stages 1, 2 and 3, the interface between the harness
// (main.c) and the student's file (zero.c).
//
// Data parallelism keeps 16 bytes per parameter on every rank: in fp32, 4
// of parameters, 4 of gradients, 8 of AdamW moments; in bf16 mixed
// precision (--precision bf16), the ZeRO paper's count: 2 of bf16
// parameters, 2 of bf16 gradients, and 12 of optimizer state (an fp32
// master copy of the parameters, which AdamW updates, and the two fp32
// moments). ZeRO keeps the same training, exactly, but shards that state:
// each unit's flat buffer is split into N equal shards (the last one
// padded), and rank r keeps only shard r of
//   stage 1: the optimizer state (moments, and the master copy in bf16),
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
    const Gpt *model;        // units: model->units[u].size elements each
    int nunits;
    OptimConfig optim;
    // The elements of parameters and gradients: COMM_F32 (floats) or, with
    // --precision bf16, COMM_BF16 (2 bytes each); elem = comm_type_size(type)
    // bytes. Buffers of them are void *: element i of buf is
    // comm_at(buf, i, type), and comm.h's _typed calls move them.
    CommType type;
    size_t elem;
    // Persistent state, per unit u; what exists depends on the stage (NULL otherwise):
    void *params[ZERO_MAX_UNITS];         // stages 0-2: the whole unit's parameters (padded: N shard_len)
    void *param_shard[ZERO_MAX_UNITS];    // stage 3: this rank's shard of them (shard_len)
    void *grads[ZERO_MAX_UNITS];          // stages 0-1: the whole unit's gradient (padded: N shard_len)
    void *grad_shard[ZERO_MAX_UNITS];     // stages 1-3: this rank's shard of the averaged gradient:
                                          //   stage 1, a view into grads (grads[u] + shard_offset),
                                          //   where the reduce-scatter lands in place, so stage 1
                                          //   holds 4 psi of gradients (bf16: 2 psi), as the paper
                                          //   counts; stages 2-3, a buffer of its own (shard_len)
    // The optimizer's state, fp32 floats: AdamW's moments and, in bf16 only,
    // the master copy of the parameters (NULL in fp32); whole (stage 0) or
    // this rank's shard (1-3), counted as OPTIM.
    float *master[ZERO_MAX_UNITS];
    float *m[ZERO_MAX_UNITS], *v[ZERO_MAX_UNITS];
    // Working buffers, alive only while a unit runs (stages 2-3):
    void *gathered[ZERO_MAX_UNITS];       // stage 3: the unit's parameters, gathered (N shard_len)
    CommHandle *gather_handle[ZERO_MAX_UNITS];   // stage 3: a gather in flight (prefetch)
    void *unit_grad[ZERO_MAX_UNITS];      // stages 2-3: the unit's whole gradient during its backward
} Zero;

// The shards of a unit of `size` elements over N ranks: every shard is
// shard_len elements, N * shard_len >= size (the last shards padded with
// zeros), and rank r's starts at shard_offset = r * shard_len (where
// comm_reduce_scatter and comm_all_gather of N * shard_len elements put rank
// r's block; the harness checks it at start). shard_len may pad more than
// it must (to align shards, say), by at most ZERO_MAX_PAD elements beyond
// ceil(size / N); the harness stops a run that pads more. The memory
// formulas count the unit as N * shard_len elements, your padding included.
enum { ZERO_MAX_PAD = 64 };
size_t shard_len(size_t size, int N);
size_t shard_offset(size_t size, int N, int r);

// Allocate the stage's persistent state (mem_alloc, zero-filled): the
// harness then initialises the parameters it finds (params or param_shard,
// and in bf16 the master copy: whole at stage 0, this rank's shard from
// stage 1 on), and at the end frees whatever the Zero still points to.
void zero_setup(Zero *z);

// Unit u's whole parameters, for its forward pass (stage 3: gathered), and
// what to do once the pass is done.
void *zero_before_forward(Zero *z, int u);
void zero_after_forward(Zero *z, int u);

// Unit u's whole parameters and a whole gradient buffer (zeroed by the
// harness) for its backward pass, and what to do once it is done.
void *zero_before_backward(Zero *z, int u, void **grad);
void zero_after_backward(Zero *z, int u);

// After the backward pass of every unit: every rank's parameters take the
// AdamW step (t counts from 1) with the gradient averaged over the ranks
// (optim_step: in bf16 on the master copy, the bf16 parameters written
// from it).
void zero_step(Zero *z, int t);

// A function the student has not written yet says so by calling this first.
void lab_todo(const char *function);
