// ddp.h: data parallelism, the interface between the harness (main.c) and
// the student's file (ddp.c).
//
// Every rank holds the whole model and runs its own rows of each global
// batch. The harness runs the forward pass and the backward pass unit by
// unit (last unit first) and calls the hooks below; the student's code keeps
// the replicas identical by communicating, through comm.h only.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "comm.h"
#include "gpt.h"

typedef enum { DDP_NAIVE, DDP_FLAT, DDP_BUCKETED } DdpStrategy;

enum { DDP_MAX_HANDLES = 256 };

typedef struct {
    Comm *comm;
    const Gpt *model;       // the units and their tensors (model->units[u].tensors[k]: offset, count)
    int nunits;
    size_t nparams;         // Ψ
    // The elements' types: COMM_F32 (4 bytes), or under --precision bf16
    // COMM_BF16 (2 bytes). The parameters are of param_type, the gradients
    // of grad_type: bf16 both, unless --grad-reduce fp32 keeps the gradients
    // in fp32 (their sums then lose no bits: README). Pass the type to the
    // _typed collectives (comm.h), and find element i of a buffer with
    // comm_at(buf, i, type). Offsets and counts are in elements.
    CommType param_type, grad_type;
    void **params;          // (nunits) unit u's parameters, on the device
    void *grad_flat;        // (Ψ) every gradient, unit 0 first, unit after unit
    void **grads;           // (nunits) unit u's gradients: grad_flat from element unit_offset[u]
    size_t *unit_offset;    // (nunits) where unit u starts in grad_flat (and in a flat parameter vector)
    DdpStrategy strategy;
    size_t bucket_elems;    // --bucket-kb, in gradient elements: the size a bucket reaches before it is sent
    // State of the bucketed strategy, for the student's code: all-reduces in
    // flight, and the end of the gradients not yet sent (the backward runs
    // from the last unit to the first, so the finished units are the tail
    // [unit_offset[u], nparams) of grad_flat). The harness sets bucket_end
    // to nparams once; keep it right from step to step.
    CommHandle *handles[DDP_MAX_HANDLES];
    int nhandles;
    size_t bucket_end;
} Ddp;

// 1. Start in sync: make every rank's parameters equal to rank 0's. (Each
//    rank initialised its own with its own seed, so a missing step shows.)
void ddp_sync_params(Ddp *d);

// Called right after unit u's backward pass of each micro-batch; `last` says
// whether it is the step's last micro-batch (--accum K runs K of them).
void ddp_unit_done(Ddp *d, int u, bool last);

// Called after the whole backward pass of each micro-batch. When `last`,
// the optimizer step comes next: every rank's grad_flat must then hold the
// average of all ranks' gradients, and every asynchronous operation must
// have been waited on (the harness records how many are still in flight;
// the grader wants none, at any N). The bucketed strategy overlaps: the
// harness also records whether a bucket was still in flight when unit 0's
// backward began.
void ddp_backward_done(Ddp *d, bool last);

// A function the student has not written yet says so by calling this first.
void lab_todo(const char *function);
