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
    // This rank's products over the steps (ops_work's multiply-adds): those
    // of the blocks' forward passes, and those made again in the backward
    // passes (tp_given.c's again_work).
    double block_fwd_work, again_work;
    // --recompute-figure (or NULL): drawn after the verdict, from fresh
    // models on the run's parameters and last batch.
    const char *rc_figure;
    Sp *sp;
    const Gpt *model;
    void **params, **grads;
    const int *x, *y;
    int step, row0;
    float scale;
    bool bf16;
} Lab06End;

// harness_finish's hooks (ctx: a Lab06End); lab06_afterwards draws the
// --recompute-figure.
void lab06_print_more(void *ctx);
void lab06_dump_more(DumpWriter *dw, void *ctx);
void lab06_afterwards(void *ctx);

// A layer's activations per rank as Korthikanti et al. (2022) count them:
// 16-bit, dropout's masks kept; sp: with sequence parallelism; rc the
// recomputation (their table 2: none 34sbh + 5as^2b, selective 34sbh, full
// 2sbh, split by t as each mode's tensors are).
double lab06_paper(bool sp, GptRecompute rc, double s, double b, double h, double a, double t);
// The table of a layer's activations per rank (E bytes a kept element):
// allocated, ours and the paper's, and in bf16 the terms between the last two.
void lab06_print_layers(const SpModel *sm, double S, double Bd, double H, double A, int t, double E, bool on);
// What recomputation cost over the steps, the group's largest rank: the
// products made again (multiply-adds) and their seconds, beside the steps'
// products and wall time, and the blocks' forward passes' products.
typedef struct {
    double again_work, again_s, work, seconds, fwd_work;
} Lab06Cost;
// Recomputation's two sides for the run's t and mode: a layer's activations
// without, selective and full, ours beside the paper's (the run's own row
// measured), and the products done again as a share of the step's.
void lab06_print_recompute(const SpModel *sm, double S, double Bd, double H, double A, int t, double E, bool on,
                           const Lab06Cost *cost);
// The figure (--figure): activations per layer and rank, one device, TP and
// TP + SP, ours beside the paper's.
void lab06_draw_figure(const char *path, const Args *a, const SpModel *sm, int N, int t, int rows, bool on,
                       double E);
