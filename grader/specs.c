// specs.c: what the grader runs for each lab, and what it checks.
//
// A lab registers here: its directory and student file, its runs (world
// sizes, an odd one where the lab allows it, flags), the reference run that
// matches one of its runs, and its checks on the dump.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "core.h"
#include "grade.h"
#include "mem.h"

// ---- ref: the reference against itself ---------------------------------------
// The grader's own yardstick: build/ref with micro-batches must pass as "the
// same training" as build/ref without, and a run with one parameter off (the
// --perturb self-test) must not.

static const RunSpec REF_RUNS[] = {
    {"micro4", 1, "--steps 8 --micro 4 --device cpu", true},
    {"micro8-small", 1, "--steps 6 --micro 8 --layers 2 --dim 64 --heads 4 --seq 32 --device cpu", false},
};

static const char *ref_flags(const LabSpec *lab, const Run *run, char *buf, size_t len) {
    (void)lab;
    // The same flags without the micro-batches.
    const char *f = run->spec->flags;
    const char *micro = strstr(f, "--micro ");
    size_t head = micro ? (size_t)(micro - f) : strlen(f);
    const char *tail = micro ? strchr(micro + 8, ' ') : "";
    snprintf(buf, len, "%.*s%s --seed %llu", (int)head, f, tail ? tail : "", (unsigned long long)run->seed);
    return buf;
}

static void ref_check(Grader *g, const LabSpec *lab, const Run *run) {
    (void)lab;
    if (!check_ran(g, run, true)) return;
    check_equivalence(g, run, 1);
    // Memory: fp32 AdamW holds 4 bytes of parameters, 4 of gradients and 8
    // of moments per parameter, measured.
    double psi = 0;
    for (int i = 0; i < run->dump->count; i++)
        if (strncmp(run->dump->arrays[i].name, "param/final/", 12) == 0) psi += (double)run->dump->arrays[i].count;
    check_memory(g, run, MEM_PARAMS, "PARAMS", 4 * psi, "4 bytes per parameter (4 psi)");
    check_memory(g, run, MEM_GRADS, "GRADS", 4 * psi, "4 psi");
    check_memory(g, run, MEM_OPTIM, "OPTIM", 8 * psi, "8 psi (AdamW's two moments)");
    const DumpArray *measured = dump_find(run->dump, "mem/measured_peak");
    double seen = measured ? dump_get(measured, 0) : 0;
    char fig[64], bound[64], b[32];
    snprintf(fig, sizeof fig, "%s", core_fmt_bytes(seen, b, sizeof b));
    snprintf(bound, sizeof bound, ">= 16 psi = %s", core_fmt_bytes(16 * psi, b, sizeof b));
    grade_check(g, run, "measured heap covers the tensors", seen >= 16 * psi, fig, bound,
                "the independent measure saw less than the tensors: the allocator is not wrapped");
}

static const LabSpec LAB_REF = {
    .id = "ref", .dir = ".", .student_file = "", .program = "ref", .solution = "ref",
    .runs = REF_RUNS, .nruns = sizeof REF_RUNS / sizeof REF_RUNS[0],
    .ref_flags = ref_flags, .check = ref_check,
};

// ---- lab01: collectives --------------------------------------------------------

static const RunSpec LAB01_RUNS[] = {
    {"np1", 1, "--quiet", false},
    {"np2", 2, "--quiet", true},
    {"np3", 3, "--quiet", true},
    {"np4", 4, "--quiet", false},
    {"np5", 5, "--quiet", false},
};

static const char *const LAB01_FUNCS[] = {"ring_reduce_scatter", "ring_all_gather", "ring_all_reduce",
                                          "tree_broadcast", "chain_broadcast"};

// Why a collective's results are wrong, from where they are wrong.
static void lab01_diagnose(const DumpFile *d, const char *fn, int N, char *diag, size_t len) {
    char name[96];
    snprintf(name, sizeof name, "check/%s/wrong", fn);
    const DumpArray *wrong = dump_find(d, name), *counts = dump_find(d, "check/counts");
    snprintf(name, sizeof name, "check/%s/wrong_by_root", fn);
    const DumpArray *by_root = dump_find(d, name);
    if (by_root && by_root->count > 1 && dump_get(by_root, 0) == 0) {
        bool others = false;
        for (uint64_t r = 1; r < by_root->count; r++) others |= dump_get(by_root, r) > 0;
        if (others) {
            snprintf(diag, len, "right from root 0 only: it ignores its root argument (work with ranks "
                     "relative to the root, vr = (r - root + N) %% N)");
            return;
        }
    }
    if (!wrong || !counts) {
        snprintf(diag, len, "the dump has no per-count results");
        return;
    }
    int wrong_div = 0, wrong_nondiv = 0, nondiv = 0, div = 0;
    char list[256] = "";
    size_t m = 0;
    for (uint64_t i = 0; i < wrong->count; i++) {
        long c = (long)dump_get(counts, i);
        bool divides = c % N == 0;
        divides ? div++ : nondiv++;
        if (dump_get(wrong, i) > 0) {
            divides ? wrong_div++ : wrong_nondiv++;
            if (m + 16 < sizeof list) m += (size_t)snprintf(list + m, sizeof list - m, "%s%ld", m ? ", " : "", c);
        }
    }
    if (wrong_div == 0 && wrong_nondiv > 0)
        snprintf(diag, len, "wrong only for counts that N = %d does not divide (%s): blocks must follow "
                 "comm_block, where the first count %% N blocks are one element longer", N, list);
    else if (wrong_div + wrong_nondiv >= div + nondiv - 1 && strstr(fn, "broadcast"))
        snprintf(diag, len, "wrong for (almost) every count: the data does not reach every rank (a "
                 "rank that neither receives nor forwards?)%s",
                 strcmp(fn, "chain_broadcast") == 0 ? "; until you write chain_broadcast it calls "
                                                      "tree_broadcast, so finish that first" : "");
    else if (wrong_div + wrong_nondiv >= div + nondiv - 1)
        snprintf(diag, len, "wrong for (almost) every count: check which block is sent and received at "
                 "each ring step (an index off by one sends the wrong block)");
    else
        snprintf(diag, len, "wrong for counts %s", list);
}

static void lab01_check(Grader *g, const LabSpec *lab, const Run *run) {
    (void)lab;
    // The program exits non-zero when a check fails; its dump still says which.
    if (!check_ran(g, run, false)) return;
    int N = (int)dump_scalar(run->dump, "meta/world_size", 0);
    for (int k = 0; k < 5; k++) {
        const char *fn = LAB01_FUNCS[k];
        char name[96], check[96], fig[96], diag[600];
        snprintf(name, sizeof name, "check/%s/wrong", fn);
        const DumpArray *wrong = dump_find(run->dump, name);
        double total = 0;
        for (uint64_t i = 0; wrong && i < wrong->count; i++) total += dump_get(wrong, i);
        snprintf(name, sizeof name, "check/%s/unfinished", fn);
        bool todo = dump_scalar(run->dump, name, 1) != 0;
        snprintf(name, sizeof name, "check/%s/library_call", fn);
        int lib = (int)dump_scalar(run->dump, name, -1);
        snprintf(check, sizeof check, "%s exact", fn);
        snprintf(fig, sizeof fig, "%.0f wrong elements%s", total, todo ? ", unfinished" : "");
        if (!wrong)
            snprintf(diag, sizeof diag, "the dump has no results for %s", fn);
        else if (todo)
            snprintf(diag, sizeof diag, "not written yet: it still calls lab_todo (delete that line when it is done)");
        else if (lib >= 0)
            snprintf(diag, sizeof diag, "it calls the library's comm_%s: build it from comm_send, comm_recv "
                     "and comm_sendrecv", comm_op_name((CommOp)lib));
        else
            lab01_diagnose(run->dump, fn, N, diag, sizeof diag);
        grade_check(g, run, check, wrong && total == 0 && !todo && lib < 0, fig, "0 wrong, send/recv only", diag);
    }
}

static const LabSpec LAB01 = {
    .id = "lab01", .dir = "lab01_collectives", .student_file = "collectives.c",
    .program = "lab01", .solution = "lab01_solution",
    .runs = LAB01_RUNS, .nruns = sizeof LAB01_RUNS / sizeof LAB01_RUNS[0],
    .ref_flags = NULL, .check = lab01_check,
};

// ---- shared by the training labs ---------------------------------------------

// The reference flags of a lab run: its flags without the lab's own (listed
// in `drop`, each with its value), plus the run's seed.
static const char *without_flags(const Run *run, const char *const *drop, char *buf, size_t len) {
    char copy[512];
    snprintf(copy, sizeof copy, "%s", run->spec->flags);
    size_t n = 0;
    buf[0] = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        bool skip = false;
        for (const char *const *d = drop; *d; d++) skip |= strncmp(tok, "--", 2) == 0 && strcmp(tok + 2, *d) == 0;
        if (skip) {
            char *value = strtok_r(NULL, " ", &save);   // a dropped flag's value goes too
            (void)value;
            continue;
        }
        if (strcmp(tok, "--no-ref") == 0) continue;
        n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? " " : "", tok);
    }
    snprintf(buf + n, len - n, " --seed %llu", (unsigned long long)run->seed);
    return buf;
}

static double count_params(const DumpFile *f) {
    double psi = 0;
    for (int i = 0; f && i < f->count; i++)
        if (strncmp(f->arrays[i].name, "param/final/", 12) == 0) psi += (double)f->arrays[i].count;
    return psi;
}

// The student's hooks that still call lab_todo ("check/unfinished/<name>").
static void check_hooks_written(Grader *g, const Run *run) {
    char fig[256] = "", names[256] = "";
    int todo = 0;
    size_t n = 0;
    for (int i = 0; i < run->dump->count; i++) {
        const DumpArray *a = &run->dump->arrays[i];
        if (strncmp(a->name, "check/unfinished/", 17) != 0 || dump_get(a, 0) == 0) continue;
        todo++;
        n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", a->name + 17);
    }
    snprintf(fig, sizeof fig, "%d unfinished%s%s", todo, todo ? ": " : "", names);
    grade_check(g, run, "every TODO written", todo == 0, fig, "0 unfinished",
                "not written yet: these functions still call lab_todo (delete that line when one is done)");
}

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

static const LabSpec LAB02 = {
    .id = "lab02", .dir = "lab02_ddp", .student_file = "ddp.c", .program = "lab02",
    .solution = "lab02_solution", .runs = LAB02_RUNS, .nruns = sizeof LAB02_RUNS / sizeof LAB02_RUNS[0],
    .ref_flags = lab02_ref_flags, .check = lab02_check,
};

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

static const LabSpec LAB03 = {
    .id = "lab03", .dir = "lab03_zero", .student_file = "zero.c", .program = "lab03",
    .solution = "lab03_solution", .runs = LAB03_RUNS, .nruns = sizeof LAB03_RUNS / sizeof LAB03_RUNS[0],
    .ref_flags = lab03_ref_flags, .check = lab03_check,
};

const LabSpec *const LABS[] = {&LAB_REF, &LAB01, &LAB02, &LAB03};
const int NLABS = sizeof LABS / sizeof LABS[0];
