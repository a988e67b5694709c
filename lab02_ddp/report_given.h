// report_given.h: what lab02's run reports at its end, beside what every
// training lab reports (harness_finish): whether the replicas agree, and the
// order of events of each step for the grader. Students do not edit it.
#pragma once

#include <stdint.h>

#include "ddp.h"
#include "dump.h"

// What the end needs, gathered by main during and after training.
typedef struct {
    const Ddp *d;
    double *init_sumsq, *sumsq;   // (N) each rank's sum of squares of its parameters, at the start and the end
    double acts_expected;
    int steps;
    int64_t *overlap_units, *overlap_unit0, *inflight_at_optim;   // (steps)
    double *live_after_step;                                      // (steps)
} Lab02End;

// harness_finish's hooks (ctx: a Lab02End).
void lab02_print_more(void *ctx);
void lab02_dump_more(DumpWriter *dw, void *ctx);
