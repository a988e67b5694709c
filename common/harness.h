// harness.h: what the training labs' harnesses share: the single-device
// reference run they are measured against, and the lines they print.
//
// The reference runs first, on rank 0, with the same flags; its losses are
// kept (every rank gets them) and its final parameters go to a temporary
// file, so that no memory of the reference is live while the lab runs and
// each rank's measured memory is the lab's alone.
#pragma once

#include <stdbool.h>

#include "args.h"
#include "comm.h"
#include "gpt.h"

typedef struct DumpWriter DumpWriter;

typedef struct {
    bool on;           // false with --no-ref
    int steps;
    double *loss;      // (steps) the reference's loss at each step, on every rank
    char path[256];    // rank 0: its final parameters, a dump (removed by harness_reference_free)
} Reference;

// Train build/ref's model with the same flags on rank 0 (the other ranks
// wait); a no-op when `on` is false. Collective.
Reference harness_reference(Comm *c, const Args *a, bool on);
void harness_reference_free(Reference *r);

// The lab's final parameters (whole units, canonical layout, on rank 0)
// against the reference's: the relative Frobenius error over the whole
// model, and the tensor holding the largest single difference. Rank 0
// only; -1 without a reference.
double harness_param_error(const Reference *r, const Gpt *m, float **units, char *worst, size_t len);

// Sum of squares of all parameters, per rank, gathered: (N) on every rank
// (whether the replicas agree). units: this rank's whole units.
void harness_sumsq_per_rank(Comm *c, const Gpt *m, float **units, double *out);

// The student's hooks: a lab names them once; its lab_todo() passes the
// name of an unfinished one to harness_todo(). At the end, each unfinished
// hook is printed (rank 0) and every hook goes into the dump as
// "check/unfinished/<name>" (1 while it still calls lab_todo), for the grader.
void harness_hooks(const char *const *names, int n);
void harness_todo(const char *function);
int harness_print_unfinished(void);   // how many are unfinished
void harness_dump_unfinished(DumpWriter *w);

// One step's line: loss beside the reference's, time and its split into
// compute, communication and communication left exposed, tokens/s.
void harness_print_step(const Reference *r, int step, int steps, double loss, double seconds,
                        double comm_busy, double comm_blocked, double tokens);
