// spec_ref.c: build/ref graded against itself, the grader's own yardstick:
// build/ref with micro-batches must pass as "the same training" as build/ref
// without, and a run with one parameter off (the --perturb self-test) must
// not.
#include <stdio.h>
#include <string.h>

#include "checks.h"
#include "core.h"
#include "dump.h"
#include "lab.h"
#include "mem.h"
#include "reading.h"
#include "results.h"
#include "spec_train.h"

// (The GPU's training against the CPU's is build/gpu_check --training, which
// measures the GPU's own rounding too: the CPU's yardstick alone does not
// cover cuBLAS's order of summation or the GPU's exp.)
static const RunSpec REF_RUNS[] = {
    {"micro4", 1, "--steps 8 --micro 4 --device cpu", true, false},
    {"micro8-small", 1, "--steps 6 --micro 8 --layers 2 --dim 64 --heads 4 --seq 32 --device cpu", false, false},
    // Mixed precision: bf16 in micro-batches against bf16 whole, its
    // yardstick measured in bf16 (the same flags, --precision bf16 among them).
    {"bf16-micro4", 1, "--steps 8 --micro 4 --precision bf16 --device cpu", true, false},
    // Full recomputation: each block's forward again in its backward pass.
    {"recompute-full-micro2", 1, "--steps 6 --micro 2 --recompute full --dropout 0.1 --device cpu", false, false},
};

static const char *ref_flags(const LabSpec *lab, const Run *run, char *buf, size_t len) {
    (void)lab;
    // The same flags without the micro-batches, on the CPU.
    const char *f = run->spec->flags;
    const char *micro = strstr(f, "--micro ");
    size_t head = micro ? (size_t)(micro - f) : strlen(f);
    const char *tail = micro ? strchr(micro + 8, ' ') : "";
    snprintf(buf, len, "%.*s%s --seed %llu", (int)head, f, tail ? tail : "", (unsigned long long)run->seed);
    char *cuda = strstr(buf, "--device cuda");
    if (cuda) memcpy(cuda, "--device cpu ", 13);
    return buf;
}

static void ref_check(Grader *g, const LabSpec *lab, const Run *run) {
    (void)lab;
    if (!check_ran(g, run, true)) return;
    check_equivalence(g, run, 1);
    check_master_kept(g, run);
    // Memory: fp32 AdamW holds 4 bytes of parameters, 4 of gradients and 8
    // of moments per parameter, measured; bf16 the ZeRO paper's 2 + 2 + 12
    // (bf16 weights and gradients; the fp32 master copy and two moments).
    double psi = count_params(run->dump);
    static const char *const kept = "something is kept twice, or a buffer is not freed after use (or is "
                                    "allocated again every step)";
    if (config_is(run->dump, "precision", "bf16")) {
        check_peak(g, run, MEM_PARAMS, "PARAMS", 2 * psi, "bf16: 2 bytes per parameter (2 psi)", kept);
        if (config_is(run->dump, "grad_reduce", "fp32"))
            check_peak(g, run, MEM_GRADS, "GRADS", 4 * psi, "bf16 with fp32 gradients (--grad-reduce fp32): 4 psi", kept);
        else
            check_peak(g, run, MEM_GRADS, "GRADS", 2 * psi, "bf16: 2 psi", kept);
        check_peak(g, run, MEM_OPTIM, "OPTIM", 12 * psi, "12 psi (the fp32 master copy and AdamW's two moments)",
                   kept);
    } else {
        check_peak(g, run, MEM_PARAMS, "PARAMS", 4 * psi, "4 bytes per parameter (4 psi)", kept);
        check_peak(g, run, MEM_GRADS, "GRADS", 4 * psi, "4 psi", kept);
        check_peak(g, run, MEM_OPTIM, "OPTIM", 8 * psi, "8 psi (AdamW's two moments)", kept);
    }
    const DumpArray *measured = dump_find(run->dump, "mem/measured_peak");
    double seen = measured ? dump_get(measured, 0) : 0;
    char fig[64], bound[64], b[32];
    snprintf(fig, sizeof fig, "%s", core_fmt_bytes(seen, b, sizeof b));
    snprintf(bound, sizeof bound, ">= 16 psi = %s", core_fmt_bytes(16 * psi, b, sizeof b));
    grade_check(g, run, "measured heap covers the tensors", seen >= 16 * psi, fig, bound,
                "the independent measure saw less than the tensors: the allocator is not wrapped");
}

const LabSpec LAB_REF = {
    .id = "ref", .dir = ".", .student_file = "", .program = "ref", .solution = "ref",
    .runs = REF_RUNS, .nruns = sizeof REF_RUNS / sizeof REF_RUNS[0],
    .ref_flags = ref_flags, .check = ref_check,
};
