// report_given.h: what lab06's run reports at its end, beside what every
// training lab reports (harness_finish): its own lines, its dump entries
// for the grader, and its figure. Given code: students do not edit it.
#pragma once

#include <stdbool.h>

#include "args.h"
#include "dump.h"
#include "model_given.h"

// What the end needs, gathered by main during and after training.
typedef struct {
    const SpModel *sm;
    bool on;
    int t, dp;
    SpProbe *probe;
    double acts_expected, psi_local;
    char grad_differs[96];   // a replicated gradient that differs over the group (first step), or ""
    int grad_zero_on;        // and a rank where it is zero, or -1
    char differs[96];        // a replicated parameter that differs at the end, or ""
} Lab06End;

// harness_finish's hooks (ctx: a Lab06End).
void lab06_print_more(void *ctx);
void lab06_dump_more(DumpWriter *dw, void *ctx);

// A layer's activations per rank as Korthikanti et al. (2022) count them:
// 16-bit, dropout's masks kept; sp: with sequence parallelism; rc the
// recomputation (their table 2: none 34sbh + 5as^2b, selective 34sbh, full
// 2sbh, split by t as each mode's tensors are).
double lab06_paper(bool sp, GptRecompute rc, double s, double b, double h, double a, double t);
// The table of a layer's activations per rank (E bytes a kept element):
// allocated, ours and the paper's, and in bf16 the terms between the last two.
void lab06_print_layers(const SpModel *sm, double S, double Bd, double H, double A, int t, double E, bool on);
// Recomputation's two sides for the run's t and mode: a layer's activations
// without, selective and full, ours beside the paper's (the run's own row
// measured), and the products done again as a share of the step's
// (again_work of the steps' work, multiply-adds; again_s of their seconds).
void lab06_print_recompute(const SpModel *sm, double S, double Bd, double H, double A, int t, double E, bool on,
                           double again_work, double work, double again_s, double seconds);
// The figure (--figure): activations per layer and rank, one device, TP and
// TP + SP, ours beside the paper's.
void lab06_draw_figure(const char *path, const Args *a, const SpModel *sm, int N, int t, int rows, bool on,
                       double E);
