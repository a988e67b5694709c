// spec_lab02.c: what the grader runs and checks for lab02 (data parallelism).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "core.h"
#include "grade.h"
#include "mem.h"

// ---- lab02: data parallelism ---------------------------------------------------

static const RunSpec LAB02_RUNS[] = {
    {"np1-naive", 1, "--steps 5 --strategy naive", false},
    {"np2-flat", 2, "--steps 5 --strategy flat", true},
    {"np2-bucketed", 2, "--steps 5 --strategy bucketed --bucket-kb 256", true},
    {"np3-bucketed", 3, "--steps 5 --batch 6 --strategy bucketed --bucket-kb 256", true},
    {"np3-flat-accum2", 3, "--steps 5 --batch 6 --strategy flat --accum 2", false},
    {"np2-flat-accum2", 2, "--steps 5 --strategy flat --accum 2", true},
    {"np4-naive-accum2", 4, "--steps 5 --strategy naive --accum 2", false},
    {"np4-bucketed-accum2", 4, "--steps 5 --strategy bucketed --accum 2 --bucket-kb 512", false},
};

static const char *lab02_ref_flags(const LabSpec *lab, const Run *run, char *buf, size_t len) {
    (void)lab;
    static const char *const drop[] = {"strategy", "bucket-kb", "accum", NULL};
    return without_flags(run, drop, buf, len);
}

static void lab02_check(Grader *g, const LabSpec *lab, const Run *run) {
    (void)lab;
    // The program exits non-zero when it does not match; its dump says how.
    if (!check_ran(g, run, false)) return;
    check_hooks_written(g, run);
    int N = (int)dump_scalar(run->dump, "meta/world_size", 0);
    check_equivalence(g, run, N);
    // Plain data parallelism moves 2(N-1)/N of the gradients' bytes per step
    // (an all-reduce), after one broadcast of the parameters.
    const DumpArray *loss = dump_find(run->dump, "loss");
    double steps = loss ? (double)loss->count : 0, psi = count_params(run->dump);
    double expected = N > 1 ? steps * 2.0 * (N - 1) / N * 4 * psi + 4 * psi : 0;
    check_comm_volume(g, run, expected, "steps x 2(N-1)/N x 4 psi + 4 psi (the first broadcast)",
                      strstr(run->spec->flags, "--accum")
                          ? "with --accum it communicates at every micro-batch: wait for the last one"
                          : "something is all-reduced more than once per step");
}

const LabSpec LAB02 = {
    .id = "lab02", .dir = "lab02_ddp", .student_file = "ddp.c", .program = "lab02",
    .solution = "lab02_solution", .runs = LAB02_RUNS, .nruns = sizeof LAB02_RUNS / sizeof LAB02_RUNS[0],
    .ref_flags = lab02_ref_flags, .check = lab02_check,
};

