// zero_budget.h: what each ZeRO stage holds per rank, in bytes: the one set
// of formulas that lab03's program prints, the grader holds every run to,
// and lab03's README states. fp32 AdamW: 4 bytes of parameters, 4 of
// gradients and K = 8 of moments per parameter; bf16 with fp32 master
// weights (the ZeRO paper's mixed precision): 2, 2 and K = 12 (the master
// copy and the two moments).
#pragma once

#include <stdbool.h>

typedef struct {
    double params, grads, optim;                      // each category's peak
    const char *params_why, *grads_why, *optim_why;   // the formulas, in words
    // Beyond the formulas: the library's scratch the tracked total may hold
    // (one unit: a device buffer staged through the host), and what the heap
    // may hold beyond the tracked total, allocated by the library and the
    // harness, not by the stage (one unit: the initialisation makes each
    // unit, or the shard of it a rank keeps, on the host; and 1 MiB of
    // bookkeeping: batches, tables).
    double scratch, untracked;
} ZeroBudget;

// For units padded to N equal shards: psi_pad parameters in all, unit1 and
// unit2 the two largest units (padded), in elements.
ZeroBudget zero_budget(int stage, bool prefetch, double psi_pad, int N, double unit1, double unit2, bool bf16);
