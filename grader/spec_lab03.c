// spec_lab03.c: what the grader runs and checks for lab03 (ZeRO).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "comm.h"
#include "core.h"
#include "lab.h"
#include "mem.h"
#include "reading.h"
#include "results.h"
#include "rounding.h"
#include "spec_train.h"
#include "specs.h"
#include "zero_budget.h"

// ---- lab03: ZeRO ------------------------------------------------------------

// The small shape (4L 128C, 64 tokens: units of 867,072 parameters in all)
// keeps the runs fast; one run, np4-stage3-default, trains lab03's own
// default shape, the one a student's first run has. N = 3 and 5 leave every
// unit a remainder (padded shards, offsets past a shorter last shard). The
// quick subset holds one cheap run of each kind of bug: N = 1 (stage 2: its
// reduce-scatter has a buffer of its own to fill), stage 1 and 2 at an odd
// N, stage 3 with and without prefetch.
#define SMALL "--dim 128 --seq 64 --layers 4 "
static const RunSpec LAB03_RUNS[] = {
    {"np1-stage1", 1, SMALL "--steps 3 --stage 1", false, false},
    {"np2-stage1", 2, SMALL "--steps 4 --stage 1", false, false},
    {"np3-stage1", 3, SMALL "--steps 3 --batch 6 --stage 1", true, false},
    {"np4-stage1", 4, SMALL "--steps 4 --stage 1", false, false},
    {"np5-stage1", 5, SMALL "--steps 3 --batch 10 --stage 1", false, false},
    {"np1-stage2", 1, SMALL "--steps 3 --stage 2", true, false},
    {"np2-stage2", 2, SMALL "--steps 4 --stage 2", false, false},
    {"np3-stage2", 3, SMALL "--steps 3 --batch 6 --stage 2", true, false},
    {"np4-stage2", 4, SMALL "--steps 4 --stage 2", false, false},
    {"np1-stage3", 1, SMALL "--steps 4 --stage 3", false, false},
    {"np2-stage3", 2, SMALL "--steps 3 --stage 3", true, false},
    {"np3-stage3", 3, SMALL "--steps 4 --batch 6 --stage 3", false, false},
    {"np4-stage3", 4, SMALL "--steps 4 --stage 3", false, false},
    {"np4-stage3-default", 4, "--steps 3 --stage 3", false, false},
    {"np5-stage3", 5, SMALL "--steps 3 --batch 10 --stage 3", false, false},
    {"np2-stage3-noprefetch", 2, SMALL "--steps 3 --stage 3 --no-prefetch", true, false},
    {"np4-stage3-noprefetch", 4, SMALL "--steps 4 --stage 3 --no-prefetch", false, false},
    // Mixed precision (bf16 parameters and gradients, fp32 master weights and
    // moments: the paper's 2 + 2 + 12), graded against build/ref in bf16.
    {"np2-stage1-bf16", 2, SMALL "--steps 4 --stage 1 --precision bf16", true, false},
    // Activation recomputation (the model's), under the stage that frees the most.
    {"np2-stage3-recompute-selective", 2, SMALL "--steps 3 --stage 3 --recompute selective", false, false},
    {"np3-stage2-bf16", 3, SMALL "--steps 3 --batch 6 --stage 2 --precision bf16", false, false},
    {"np4-stage3-bf16", 4, SMALL "--steps 4 --stage 3 --precision bf16", true, false},
};
#undef SMALL

static const char *lab03_ref_flags(const LabSpec *lab, const Run *run, char *buf, size_t len) {
    (void)lab;
    static const char *const drop[] = {"stage", NULL};
    // --no-prefetch has no value: drop it by hand.
    without_flags(run, drop, buf, len);
    char *np = strstr(buf, "--no-prefetch");
    if (np) memmove(np, np + 13, strlen(np + 13) + 1);
    // The shape a run does not name is lab03's own default, not build/ref's:
    // the reference takes it from what the run wrote it trained.
    const DumpArray *config = run->dump ? dump_find(run->dump, "meta/config") : NULL;
    static const char *const shape[] = {"batch", "seq", "dim", "heads", "layers", "vocab", NULL};
    for (int k = 0; config && config->type == DUMP_TEXT && shape[k]; k++) {
        char flag[32], key[32];
        snprintf(flag, sizeof flag, "--%s ", shape[k]);
        snprintf(key, sizeof key, "\n%s ", shape[k]);
        const char *at = strstr((const char *)config->data, key);
        if (strstr(run->spec->flags, flag) || !at) continue;
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, " --%s %d", shape[k], atoi(at + strlen(key)));
    }
    return buf;
}

// AdamW's moments against the reference's (gathered from the shards): do
// they match (the gradients the optimizer saw were right), and how large
// are they (zero: it never saw any)?
static bool moments_match(const Run *run, double *m_ratio) {
    const DumpFile *lab = run->dump, *ref = run->ref;
    const Measured *m = run->measured;
    double a = 0, b = 0;
    bool match = true;
    for (int t = 0; ref && m && t < m->ntensors; t++)
        for (int which = 0; which < 2; which++) {
            char name[160];
            snprintf(name, sizeof name, "optim/%s/%s", which ? "v" : "m", m->names[t]);
            double ratio;
            match &= moment_within_tol(run, t, which, &ratio);
            const DumpArray *x = dump_find(lab, name), *y = dump_find(ref, name);
            for (uint64_t e = 0; !which && x && y && x->count == y->count && e < x->count; e++)
                a += dump_get(x, e) * dump_get(x, e), b += dump_get(y, e) * dump_get(y, e);
        }
    *m_ratio = b > 0 ? sqrt(a / b) : 1;
    return match && ref && m;
}

// ZeRO-1 and 2 end each step with an all-gather of the updated shards, so
// every rank's whole parameters are equal to the bit. When they are not,
// that gather is missing or comes before the update; the gradients were
// right if the moments match. (The shared check would read unequal
// replicas as an all-reduce missing: the harness names its sums zero/ so
// that this check speaks first.)
static void check_updates(Grader *g, const Run *run, int N, int stage) {
    double m_ratio = 1;
    bool moments_ok = moments_match(run, &m_ratio);
    char fig[160], diag[600];
    if (run->ref && dump_find(run->ref, "optim/m/head.lm_head")) {
        snprintf(fig, sizeof fig, "first moment x%.3f the reference's", m_ratio);
        grade_check(g, run, "the optimizer receives the gradients", m_ratio > 0.01, fig, "not zero",
                    "AdamW's moments stayed (almost) zero: the optimizer never received the gradients; the "
                    "shard it reads (grad_shard) was never filled by a reduce-scatter");
    }
    if (stage < 1 || stage > 2 || N == 1) return;
    const DumpArray *sums = dump_find(run->dump, "zero/param_sumsq_per_rank");
    bool equal = sums != NULL;
    uint64_t at = 0;
    for (uint64_t r = 1; sums && r < sums->count; r++)
        if (dump_get(sums, r) != dump_get(sums, 0)) equal = false, at = at ? at : r;
    snprintf(fig, sizeof fig, "%s", !sums ? "no zero/param_sumsq_per_rank" : equal ? "every rank's parameters equal"
                                                                            : "the ranks' parameters differ");
    snprintf(diag, sizeof diag, "rank %llu's whole parameters differ from rank 0's after training%s: the parameter "
             "all-gather is missing or misplaced (after each rank updates its shard, all-gather the whole unit, "
             "so that every rank's parameters hold every updated shard)",
             (unsigned long long)at, moments_ok ? ", while AdamW's moments match the reference (the gradients "
             "were right)" : "");
    grade_check(g, run, "updated parameters reach every rank", equal, fig, "every rank equal to the bit", diag);
}

// Stage 3's prefetch, from the order of events the harness recorded: the
// next unit's gather is in flight when a unit's compute begins (all units
// but the last of each pass). Judged without timings.
static void check_prefetch(Grader *g, const Run *run) {
    const DumpFile *d = run->dump;
    const DumpArray *fwd = dump_find(d, "zero/prefetch_fwd"), *bwd = dump_find(d, "zero/prefetch_bwd");
    double want = dump_scalar(d, "zero/units", 0) - 1, f = INFINITY, b = INFINITY;
    for (uint64_t s = 0; fwd && s < fwd->count; s++) f = fmin(f, dump_get(fwd, s));
    for (uint64_t s = 0; bwd && s < bwd->count; s++) b = fmin(b, dump_get(bwd, s));
    if (!fwd || !bwd) f = b = 0;
    char fig[160], bound[160], diag[600];
    snprintf(fig, sizeof fig, "forward %.0f, backward %.0f of %.0f units", f, b, want);
    snprintf(bound, sizeof bound, "%.0f and %.0f: every unit but the last of each pass", want, want);
    if (f == 0 && b == 0)
        snprintf(diag, sizeof diag, "no prefetch: no gather was in flight when a unit's compute began; a blocking "
                 "all-gather is not a prefetch: start the next unit's gather with comm_all_gather_async before "
                 "this unit computes, and wait on it only when that unit runs");
    else
        snprintf(diag, sizeof diag, "the prefetch misses units: some units computed with no gather in flight "
                 "(the forward pass prefetches unit u + 1, the backward pass unit u - 1)");
    grade_check(g, run, "stage 3 prefetches the next unit", f >= want && b >= want, fig, bound, diag);
}

static void lab03_check(Grader *g, const LabSpec *lab, const Run *run) {
    (void)lab;
    if (!check_ran(g, run, false)) return;
    check_hooks_written(g, run);
    const DumpFile *d = run->dump;
    int N = (int)dump_scalar(d, "meta/world_size", 0), stage = (int)dump_scalar(d, "zero/stage", -1);
    bool prefetch = dump_scalar(d, "zero/prefetch", 1) != 0, bf16 = config_is(d, "precision", "bf16");
    check_updates(g, run, N, stage);
    check_equivalence(g, run, N);
    check_master_kept(g, run);
    check_work(g, run, 1, 1, true,
               "a rank computed more than its own rows of the batch: with ZeRO, as in data parallelism, each of the N ranks trains on B/N rows, its shard only changing what it keeps",
               "a rank ran the model on more than its own rows of the batch: each of the N ranks trains on B/N rows");
    check_resident(g, run);
    check_resident_seal(g, run);
    check_step_helpers(g, run, 0, 0);
    check_live_growth(g, run);
    if (stage == 3 && prefetch && N > 1) check_prefetch(g, run);
    // Memory against the formulas, for units padded to N shards of the
    // student's own shard_len (psi_pad in all; unit1 and unit2 the largest
    // padded units), all measured.
    double psi = dump_scalar(d, "zero/psi_padded", 0), unit1 = dump_scalar(d, "zero/unit_largest", 0),
           unit2 = dump_scalar(d, "zero/unit_second", 0), acts = dump_scalar(d, "mem/acts_expected", 0);
    ZeroBudget b = zero_budget(stage, prefetch, psi, N, unit1, unit2, bf16);
    const char *kept = "something is kept whole that should be sharded, or a buffer is not freed after use (or "
                       "is allocated again every step)";
    check_peak(g, run, MEM_OPTIM, "OPTIM", b.optim, b.optim_why, kept);
    if (bf16)
        check_peak_at_least(g, run, MEM_OPTIM, "OPTIM", b.optim, b.optim_why,
                            "the optimizer's state is smaller than the fp32 master copy and the two moments of "
                            "this rank's part: without the master copy, AdamW updates the bf16 parameters "
                            "themselves and every update below half a bf16 step (2^-9 of the weight) rounds "
                            "away; keep an fp32 master (z->master) where the moments are");
    check_peak(g, run, MEM_GRADS, "GRADS", b.grads, b.grads_why,
               stage == 1 ? "stage 1 holds the whole gradient and nothing more: reduce-scatter in place, into "
                            "this rank's shard of grads (grad_shard = grads[u] + shard_offset), not into a buffer "
                            "of its own"
                          : kept);
    check_peak(g, run, MEM_PARAMS, "PARAMS", b.params, b.params_why, kept);
    // The total and the heap, against the stage's formula plus the
    // activations the model's shape needs (measured by the harness before
    // the student's code ran, not what was tracked as ACTS: whole gradients
    // tracked as COMM or ACTS count) plus the library's scratch; the heap
    // may add what the library and the harness allocate untracked.
    double expected[MEM_NCAT] = {b.params, b.grads, b.optim, acts, 0, 0};
    double total = b.params + b.grads + b.optim + acts + b.scratch;
    char why[200], where[200], diag[600], mb[32];
    snprintf(why, sizeof why, "the stage's formula + the activations the model needs (%s) + one unit of library "
             "scratch", core_fmt_bytes(acts, mb, sizeof mb));
    snprintf(diag, sizeof diag, "%s: whole gradients or parameters kept under another category still cost what "
             "ZeRO shards away", excess_category(run, expected, where, sizeof where));
    check_peak(g, run, PEAK_TOTAL, "total (tracked)", total, why, diag);
    check_peak(g, run, PEAK_HEAP, "heap (independent measure)", total + b.untracked,
               "the tracked bound + one unit + 1 MiB",
               "memory allocated around mem_alloc (malloc, calloc) shows here and nowhere else: allocate "
               "through mem_alloc, and free what you allocate");
    // Communication: reduce-scatter and all-gather move what the all-reduce
    // did (2(N-1)/N x 4 psi a step); stage 3 gathers the parameters twice
    // (forward and backward), 3(N-1)/N x 4 psi: 1.5 times. Stage 3 may keep
    // the last unit gathered from its forward to its backward pass (as FSDP
    // does): one gather of at most the largest unit fewer a step. Fewer than
    // that is another algorithm.
    const DumpArray *loss = dump_find(d, "loss");
    double steps = loss ? (double)loss->count : 0;
    // bf16 moves 2 bytes an element: half the bytes.
    double E = bf16 ? 2 : 4;
    double bytes = steps * (stage == 3 ? 3.0 : 2.0) * (N - 1) / N * E * psi;
    double least = stage == 3 ? bytes - steps * (N - 1.0) / N * E * unit1 : bytes;
    check_comm_volume(g, run, bytes, least,
                      stage == 3 ? (bf16 ? "steps x 3(N-1)/N x 2 psi (bf16)" : "steps x 3(N-1)/N x 4 psi")
                                 : (bf16 ? "steps x 2(N-1)/N x 2 psi (bf16)" : "steps x 2(N-1)/N x 4 psi"),
                      "a unit is gathered or reduced more often than the stage needs");
}

// ---- the formulas (zero_budget.h) -----------------------------------------

ZeroBudget zero_budget(int stage, bool prefetch, double psi_pad, int N, double unit1, double unit2, bool bf16) {
    // P bytes a parameter, G a gradient, K of optimizer state (zero_budget.h).
    const double P = bf16 ? 2 : 4, G = P, K = bf16 ? 12 : 8;
    ZeroBudget b = {P * psi_pad, G * psi_pad, K * psi_pad,
                    bf16 ? "2 psi" : "4 psi", bf16 ? "2 psi" : "4 psi",
                    bf16 ? "12 psi (the fp32 master copy and the two moments)" : "8 psi",
                    // The library's scratch: one unit staged through the host
                    // (fp32, whatever the elements: a bf16 product widens).
                    4 * unit1, 4 * unit1 + (1 << 20)};
    // Stage 1 shards the optimizer's state; the gradients are reduce-scattered
    // in place, into this rank's shard of the whole gradient (no buffer of
    // their own).
    if (stage >= 1)
        b.optim = K * psi_pad / N, b.optim_why = bf16 ? "12 psi / N (master copy and moments)" : "8 psi / N";
    // Stage 2: the shards, and the whole gradient of the unit whose backward
    // pass runs, until it is reduce-scattered.
    if (stage >= 2)
        b.grads = G * psi_pad / N + G * unit1,
        b.grads_why = bf16 ? "2 psi / N + one unit (its backward pass's)" : "4 psi / N + one unit (its backward pass's)";
    // Stage 3: the shards, and the units gathered for use (the one that runs
    // and, with prefetch, the next).
    if (stage == 3) {
        b.params = P * psi_pad / N + P * (prefetch ? unit1 + unit2 : unit1);
        b.params_why = prefetch ? (bf16 ? "2 psi / N + two units (gathered, prefetched)"
                                        : "4 psi / N + two units (gathered, prefetched)")
                                : (bf16 ? "2 psi / N + one unit (gathered; --no-prefetch)"
                                        : "4 psi / N + one unit (gathered; --no-prefetch)");
    }
    return b;
}

// Hidden runs: two drawn, each a stage, a world size of 2 to 5 ranks with
// two rows each, and a model of another width and depth (units whose
// floats the world size seldom divides: the shards padded).
static int lab03_hidden(uint64_t seed, RunSpec *out, int max) {
    Draw d = draw_start(seed, "lab03");
    static const int dims[] = {64, 96, 128};
    int n = 0;
    for (int k = 0; k < 2 && n < max; k++) {
        const int np = draw_int(&d, 2, 5), stage = draw_int(&d, 1, 3);
        hidden_run(&out[n], n, np, k == 0, "--dim %d --seq 64 --layers %d --steps 3 --batch %d --stage %d%s",
                   draw_pick(&d, dims, 3), draw_int(&d, 2, 5), 2 * np, stage,
                   stage == 3 && draw_int(&d, 0, 1) ? " --no-prefetch" : ""), n++;
    }
    return n;
}

const LabSpec LAB03 = {
    .id = "lab03", .dir = "lab03_zero", .student_file = "zero.c", .program = "lab03",
    .solution = "lab03_solution", .runs = LAB03_RUNS, .nruns = sizeof LAB03_RUNS / sizeof LAB03_RUNS[0],
    .ref_flags = lab03_ref_flags, .check = lab03_check, .words = WORDS_DATA_PARALLEL | WORDS_SHARDS,
    .hidden = lab03_hidden,
};
