// spec_lab03.c: what the grader runs and checks for lab03 (ZeRO).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "core.h"
#include "grade.h"
#include "mem.h"

// ---- lab03: ZeRO ------------------------------------------------------------

static const RunSpec LAB03_RUNS[] = {
    {"np1-stage1", 1, "--steps 4 --stage 1", false},
    {"np2-stage1", 2, "--steps 4 --stage 1", true},
    {"np3-stage1", 3, "--steps 4 --batch 6 --stage 1", false},
    {"np4-stage1", 4, "--steps 4 --stage 1", false},
    {"np1-stage2", 1, "--steps 4 --stage 2", false},
    {"np2-stage2", 2, "--steps 4 --stage 2", false},
    {"np3-stage2", 3, "--steps 4 --batch 6 --stage 2", true},
    {"np4-stage2", 4, "--steps 4 --stage 2", false},
    {"np1-stage3", 1, "--steps 4 --stage 3", false},
    {"np2-stage3", 2, "--steps 4 --stage 3", true},
    {"np3-stage3", 3, "--steps 4 --batch 6 --stage 3", true},
    {"np4-stage3", 4, "--steps 4 --stage 3", false},
    {"np4-stage3-noprefetch", 4, "--steps 4 --stage 3 --no-prefetch", false},
};

static const char *lab03_ref_flags(const LabSpec *lab, const Run *run, char *buf, size_t len) {
    (void)lab;
    static const char *const drop[] = {"stage", NULL};
    // --no-prefetch has no value: drop it by hand.
    without_flags(run, drop, buf, len);
    char *np = strstr(buf, "--no-prefetch");
    if (np) memmove(np, np + 13, strlen(np + 13) + 1);
    return buf;
}

static void lab03_check(Grader *g, const LabSpec *lab, const Run *run) {
    (void)lab;
    if (!check_ran(g, run, false)) return;
    check_hooks_written(g, run);
    const DumpFile *d = run->dump;
    int N = (int)dump_scalar(d, "meta/world_size", 0), stage = (int)dump_scalar(d, "zero/stage", -1);
    bool prefetch = dump_scalar(d, "zero/prefetch", 1) != 0;
    check_equivalence(g, run, N);
    // Memory against the formulas, for units padded to N shards (psi_pad in
    // all; unit1 and unit2 the largest padded units), all measured.
    double psi = dump_scalar(d, "zero/psi_padded", 0), unit1 = dump_scalar(d, "zero/unit_largest", 0),
           unit2 = dump_scalar(d, "zero/unit_second", 0);
    double grads = 4 * psi, params = 4 * psi;
    const char *grads_why = "4 psi", *params_why = "4 psi";
    check_memory(g, run, MEM_OPTIM, "OPTIM", 8 * psi / N, "8 psi / N");
    if (stage == 1) grads = 4 * psi + 4 * psi / N, grads_why = "4 psi + 4 psi / N";
    if (stage >= 2) grads = 4 * psi / N + 4 * unit1, grads_why = "4 psi / N + one unit";
    check_memory(g, run, MEM_GRADS, "GRADS", grads, grads_why);
    if (stage == 3) {
        params = 4 * psi / N + 4 * (prefetch ? unit1 + unit2 : unit1);
        params_why = prefetch ? "4 psi / N + two units" : "4 psi / N + one unit";
    }
    check_memory(g, run, MEM_PARAMS, "PARAMS", params, params_why);
    // The independent measure: every allocation, made through mem or not,
    // within the tracked peaks plus one unit of staging (the initialisation
    // makes a unit on the host) and 1 MiB of host bookkeeping.
    const DumpArray *total = dump_find(d, "mem/peak_total");
    double most = 0;
    for (uint64_t r = 0; total && r < total->count; r++) most = fmax(most, dump_get(total, r));
    check_memory(g, run, -1, "heap (independent measure)", most + 4 * unit1 + (1 << 20),
                 "the tracked peak + one unit + 1 MiB: memory allocated around mem_alloc shows here");
    // Communication: reduce-scatter and all-gather move what the all-reduce
    // did (2(N-1)/N x 4 psi a step); stage 3 gathers the parameters twice
    // (forward and backward), 3(N-1)/N x 4 psi: 1.5 times.
    const DumpArray *loss = dump_find(d, "loss");
    double steps = loss ? (double)loss->count : 0;
    double expected = steps * (stage == 3 ? 3.0 : 2.0) * (N - 1) / N * 4 * psi;
    check_comm_volume(g, run, expected, stage == 3 ? "steps x 3(N-1)/N x 4 psi" : "steps x 2(N-1)/N x 4 psi",
                      "a unit is gathered or reduced more often than the stage needs");
}

const LabSpec LAB03 = {
    .id = "lab03", .dir = "lab03_zero", .student_file = "zero.c", .program = "lab03",
    .solution = "lab03_solution", .runs = LAB03_RUNS, .nruns = sizeof LAB03_RUNS / sizeof LAB03_RUNS[0],
    .ref_flags = lab03_ref_flags, .check = lab03_check,
};

