// specs.h: what the labs' specs (spec_labNN.c) share: the flags of the
// reference run that matches a lab run, and the check that every TODO is
// written.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lab.h"
#include "results.h"

// The reference flags of a lab run: its flags without the lab's own (listed
// in `drop`, each with its value), plus the run's seed.
const char *without_flags(const Run *run, const char *const *drop, char *buf, size_t len);

// The student's hooks that still call lab_todo ("check/unfinished/<name>").
void check_hooks_written(Grader *g, const Run *run);
// Whether the run called a hook that still calls lab_todo (its dump says
// so): such a run is not compared with single-device training, whose
// reference would then be trained for nothing (its TODO check fails it).
bool run_called_unfinished(const Run *run);

// ---- hidden runs ------------------------------------------------------------------
//
// A grading with --hidden-seed S runs, besides each lab's listed runs, runs
// drawn from S at grading time (LabSpec.hidden): other world sizes, shapes,
// strategies and budgets, each within what the lab supports, so that code
// fitted to the listed runs (or to the answers printed in a README) meets
// configurations nobody has seen. The draws are a function of S and the lab
// alone: the same seed draws the same runs, and a failing hidden run is made
// again with `build/grade --hidden-seed S --runs NAME`.

typedef struct {
    uint64_t state;
} Draw;

Draw draw_start(uint64_t seed, const char *lab);   // the lab's own stream of draws
int draw_int(Draw *d, int lo, int hi);            // uniform in [lo, hi]
// One of the n values listed.
int draw_pick(Draw *d, const int *v, int n);
const char *draw_word(Draw *d, const char *const *v, int n);

// A model shape that t tensor-parallel ranks split (heads, channels and
// vocabulary multiples of t; with `tokens`, the sequence too, at an odd
// share of tokens a rank where t > 1): "--layers L --seq T --dim C --heads
// NH --vocab V" in buf, which it returns.
int draw_divisor(Draw *d, int n);   // one of n's divisors (drawn in [1, n] until one divides)
const char *draw_tp_shape(Draw *d, int t, bool tokens, char *buf, size_t len);

// Makes out[k] the hidden run "hidden-(k+1)" of `np` ranks with printf's
// flags (copied; they live as long as the grading).
void hidden_run(RunSpec *out, int k, int np, bool quick, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
