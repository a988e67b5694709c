// report_given.h: what lab04's run reports at its end, beside what every
// training lab reports (harness_finish): its own lines, its dump entries
// for the grader, and its figure. Given code: students do not edit it.
#pragma once

#include <stdbool.h>

#include "args.h"
#include "comm.h"
#include "dump.h"
#include "model_given.h"

// What the end needs, gathered by main during and after training.
typedef struct {
    const TpModel *tm;
    Comm *tpc;
    const TpProbe *probe;
    double acts_expected;
    char grad_differs[96];   // a replicated gradient that differs over the group (first step), or ""
    int grad_zero_on;        // and a rank where it is zero, or -1
    char differs[96];        // a replicated parameter that differs at the end, or ""
    double *rep_all;         // (N) each rank's sum of squares of its replicated parameters
} Lab04End;

// harness_finish's hooks (ctx: a Lab04End).
void lab04_print_more(void *ctx);
void lab04_dump_more(DumpWriter *dw, void *ctx);

// The figure (--figure): the formulas of both MLPs at t = 1, 2, 4, 8 for
// this run's shape, and this run's measured bytes and memory at its own t.
typedef struct {
    const char *path;
    bool naive;
    int N, t, dp;
    const Args *a;
    double M, psi, rep, sent, held;   // held: parameters, gradients and moments, the largest rank's peak
    bool recompute;                   // --recompute full: the bytes of the forwards made again in the bars
} Lab04Figure;
void lab04_draw_figure(const Lab04Figure *g);
