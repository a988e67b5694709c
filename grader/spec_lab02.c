// spec_lab02.c: what the grader runs and checks for lab02 (data parallelism).
#include <math.h>
#include <stdio.h>
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

// ---- lab02: data parallelism ---------------------------------------------------

// Psi = 867,072 is a multiple of 1 to 4 and so is every unit: np 5 (two
// rows a rank of --batch 10) leaves a remainder of 2 floats, where a count
// rounded down to a multiple of N shows. The quick subset (make check-lab02,
// the planted bugs) holds one cheap run of each kind of bug: N = 1, the
// bucketed overlap, the naive offsets with accumulation, a remainder.
static const RunSpec LAB02_RUNS[] = {
    {"np1-bucketed", 1, "--steps 3 --strategy bucketed --bucket-kb 256", true, false},
    {"np1-naive", 1, "--steps 5 --strategy naive", false, false},
    {"np2-flat", 2, "--steps 5 --strategy flat", false, false},
    {"np2-bucketed", 2, "--steps 3 --strategy bucketed --bucket-kb 256", true, false},
    {"np2-naive-accum2", 2, "--steps 3 --strategy naive --accum 2", true, false},
    {"np3-bucketed", 3, "--steps 5 --batch 6 --strategy bucketed --bucket-kb 256", false, false},
    {"np3-flat-accum2", 3, "--steps 5 --batch 6 --strategy flat --accum 2", false, false},
    {"np4-naive-accum2", 4, "--steps 5 --strategy naive --accum 2", false, false},
    {"np4-bucketed-accum2", 4, "--steps 5 --strategy bucketed --accum 2 --bucket-kb 512", false, false},
    {"np5-flat", 5, "--steps 3 --batch 10 --strategy flat", true, false},
    {"np5-naive", 5, "--steps 3 --batch 10 --strategy naive", false, false},
    {"np5-bucketed", 5, "--steps 3 --batch 10 --strategy bucketed --bucket-kb 256", false, false},
    // Mixed precision (bf16 parameters and gradients, the harness's fp32
    // master copy and moments), against build/ref in bf16: the gradients
    // all-reduced in bf16, 2 bytes an element.
    // (Buckets of the lab's default 1 MiB: the first bucket holds more than
    // half the gradients, so a bucket's start taken in floats, not in
    // bf16 elements, still lies in the gradients' block and comm's check
    // names the overrun every time; with small buckets it lay past the
    // block, where whatever the allocator put there was read instead.)
    {"np2-bucketed-bf16", 2, "--steps 3 --strategy bucketed --bucket-kb 1024 --precision bf16", true, false},
    {"np3-flat-accum2-bf16", 3, "--steps 3 --batch 6 --strategy flat --accum 2 --precision bf16", false, false},
    {"np4-naive-bf16", 4, "--steps 3 --strategy naive --precision bf16", false, false},
    // The gradients kept, accumulated and all-reduced in fp32 (4 bytes an element).
    // Activation recomputation (the model's: --recompute): the same training
    // to the bit, with less ACTS; the gradients' buckets unchanged.
    {"np2-bucketed-recompute-full", 2, "--steps 3 --strategy bucketed --bucket-kb 256 --recompute full", false, false},
    {"np4-bucketed-accum2-bf16-gradfp32", 4,
     "--steps 3 --strategy bucketed --accum 2 --bucket-kb 256 --precision bf16 --grad-reduce fp32", false, false},
    {"np2-flat-bf16-gradfp32", 2, "--steps 3 --strategy flat --precision bf16 --grad-reduce fp32", false, false},
};

// Hidden runs: two drawn, each a world size of 2 to 5 ranks with two or four
// rows each, a strategy, a bucket size, an accumulation that divides the
// rows; the first in fp32 on a model of another depth and length, the
// second in bf16 (its gradients reduced in bf16 or in fp32) on the listed
// model, whose bf16 rounding the yardstick's bounds were measured on.
static int lab02_hidden(uint64_t seed, RunSpec *out, int max) {
    Draw d = draw_start(seed, "lab02");
    static const char *const strategies[] = {"naive", "flat", "bucketed"};
    static const int kbs[] = {64, 128, 256, 512, 1024}, seqs[] = {32, 48, 64};
    int n = 0;
    for (int k = 0; k < 2 && n < max; k++) {
        const int np = draw_int(&d, 2, 5), rows = np <= 3 ? 2 * draw_int(&d, 1, 2) : 2;
        const int accum = draw_int(&d, 0, 1) ? rows : 1;
        char shape[96];
        if (k == 0) snprintf(shape, sizeof shape, "--layers %d --seq %d", draw_int(&d, 2, 4), draw_pick(&d, seqs, 3));
        else snprintf(shape, sizeof shape, "--precision bf16%s", draw_int(&d, 0, 1) ? " --grad-reduce fp32" : "");
        hidden_run(&out[n], n, np, k == 0, "--steps 3 --batch %d --strategy %s --bucket-kb %d --accum %d %s",
                   np * rows, draw_word(&d, strategies, 3), draw_pick(&d, kbs, 5), accum, shape), n++;
    }
    return n;
}

static const char *lab02_ref_flags(const LabSpec *lab, const Run *run, char *buf, size_t len) {
    (void)lab;
    static const char *const drop[] = {"strategy", "bucket-kb", "accum", NULL};
    return without_flags(run, drop, buf, len);
}

// Which elements of the first averaged gradient are wrong, in the flat
// order of grad_flat (the dump lists units, and their tensors, in it): a
// wrong tail of fewer than N elements is a count rounded down to a multiple
// of N; whole units wrong beside right ones, an all-reduce that missed them.
static double unit_rms(const DumpFile *ref, const char *unit) {
    double ss = 0, n = 0;
    size_t ulen = strlen(unit);
    for (int i = 0; i < ref->count; i++) {
        const char *name = ref->arrays[i].name;
        if (strncmp(name, "grad/first/", 11) != 0 || strncmp(name + 11, unit, ulen) != 0 || name[11 + ulen] != '.')
            continue;
        for (uint64_t e = 0; e < ref->arrays[i].count; e++) ss += dump_get(&ref->arrays[i], e) * dump_get(&ref->arrays[i], e);
        n += (double)ref->arrays[i].count;
    }
    return n > 0 ? sqrt(ss / n) : 0;
}

static void check_every_gradient(Grader *g, const Run *run, int N) {
    const DumpFile *lab = run->dump, *ref = run->ref;
    if (!ref || !dump_find(lab, "grad/first/head.lm_head")) return;
    // fp32: rounding moves an element by 1e-6 of itself, or of its unit's
    // size (rms) where its exact gradient is zero (the key bias: softmax
    // ignores a shift); a gradient that was not averaged (one rank's own) is
    // off by its own size: within 1% of itself + 0.1% of its unit's rms.
    // bf16 rounds at 2^-8, and not the element alone: each rank's gradient
    // is rounded (and the reference's micro-batches' in another order)
    // before the terms are added, so an element whose terms cancel (a bias's
    // gradient, summed over tokens of both signs) keeps the rounding of
    // terms far larger than itself, which neither the element nor its unit
    // tells. The yardstick's runs measure it, tensor by tensor: their largest
    // element difference (grad_abs). Within TOL_FACTOR times that + two
    // roundings of the element (2^-7 of it); a gradient left unaveraged is
    // off by the size of its terms, about 2^8 of their rounding.
    const bool bf16 = config_is(lab, "precision", "bf16");
    const Measured *m = run->measured;
    if (bf16 && !m) return;   // check_equivalence says why there is no yardstick
    const double rel = bf16 ? 0x1p-7 : 1e-2, abs_rms = bf16 ? 0 : 1e-3;
    double psi = 0, wrong = 0, first_wrong = -1, worst = 0, spread = 0;
    char units_wrong[256] = "", units_right[256] = "", unit[96] = "";
    double unit_wrong = 0, unit_size = 0, rms = 0;
    size_t nw = 0, nr = 0;
    for (int i = 0; i <= ref->count; i++) {
        const DumpArray *b = i < ref->count ? &ref->arrays[i] : NULL;
        bool grad = b && strncmp(b->name, "grad/first/", 11) == 0;
        const char *name = grad ? b->name + 11 : "";
        size_t ulen = strcspn(name, ".");
        if (!grad || strncmp(unit, name, ulen) != 0 || unit[ulen] != 0) {
            // A unit ends: mostly wrong, or right.
            if (unit[0] && unit_wrong > 0.5 * unit_size)
                nw += (size_t)snprintf(units_wrong + nw, nw < sizeof units_wrong ? sizeof units_wrong - nw : 0,
                                       "%s%s", nw ? ", " : "", unit);
            else if (unit[0] && unit_wrong == 0)
                nr += (size_t)snprintf(units_right + nr, nr < sizeof units_right ? sizeof units_right - nr : 0,
                                       "%s%s", nr ? ", " : "", unit);
            snprintf(unit, sizeof unit, "%.*s", (int)ulen, name);
            unit_wrong = unit_size = 0;
            rms = grad ? unit_rms(ref, unit) : 0;
        }
        if (!grad) continue;
        const DumpArray *a = dump_find(lab, b->name);
        if (!a || a->count != b->count) return;   // check_equivalence says so
        spread = 0;
        for (int t = 0; bf16 && t < m->ntensors; t++)
            if (strcmp(m->names[t], b->name + 11) == 0) spread = TOL_FACTOR * m->grad_abs[t];
        for (uint64_t e = 0; e < b->count; e++) {
            double x = dump_get(a, e), y = dump_get(b, e), bound = rel * fabs(y) + abs_rms * rms + spread;
            double q = bound > 0 ? fabs(x - y) / bound : (x == y ? 0 : INFINITY);
            if (!(q <= worst)) worst = q;   // NaN too
            if (!(q <= 1)) {
                wrong++, unit_wrong++;
                if (first_wrong < 0) first_wrong = psi + (double)e;
            }
        }
        psi += (double)b->count, unit_size += (double)b->count;
    }
    char fig[160], diag[1024];
    snprintf(fig, sizeof fig, "%.0f of %.0f elements differ", wrong, psi);
    long rem = (long)fmod(psi, (double)N);
    if (wrong == 0)
        diag[0] = 0;
    else if (first_wrong >= psi - (double)(N - 1))
        snprintf(diag, sizeof diag, "only the last %.0f gradients differ (elements %.0f to %.0f of psi = %.0f, "
                 "and psi mod N = %ld): a count rounded down to a multiple of N, so the remainder was never "
                 "averaged; every element must be all-reduced", wrong, first_wrong, psi - 1, psi, rem);
    else if (units_wrong[0] && units_right[0])
        snprintf(diag, sizeof diag, "the gradients of %s were never averaged, while those of %s were: the "
                 "all-reduces missed them (a unit's offset left out, or a count too short?)", units_wrong,
                 units_right);
    else
        snprintf(diag, sizeof diag, "%.0f elements differ from the average over the global batch, from element "
                 "%.0f on (the first-step gradient check says how)", wrong, first_wrong);
    char bound[128];
    if (bf16)
        snprintf(bound, sizeof bound, "0 (each within 2^-7 of the reference's + %dx the yardstick's largest in its "
                 "tensor)", TOL_FACTOR);
    else
        snprintf(bound, sizeof bound, "0 (each within 1%% of the reference's + 0.1%% of its unit's rms)");
    grade_check(g, run, "every gradient element averaged", wrong == 0, fig, bound, diag);
    grade_set_ratio(g, worst);
}

// The order of events the harness recorded (lab02's main.c): judged
// without timings, so a loaded machine cannot fail a right solution.
static void check_events(Grader *g, const Run *run, int N) {
    const DumpFile *d = run->dump;
    const DumpArray *inflight = dump_find(d, "ddp/inflight_at_optimizer");
    const DumpArray *unit0 = dump_find(d, "ddp/overlap_unit0");
    char fig[160], bound[160], diag[600];
    if (!inflight || !unit0) {
        grade_check(g, run, "events recorded", false, "no ddp/ events in the dump", "the harness's events",
                    "the harness did not write its events");
        return;
    }
    // Every operation waited on before the optimizer reads the gradients.
    double most = 0;
    uint64_t at = 0;
    for (uint64_t s = 0; s < inflight->count; s++)
        if (dump_get(inflight, s) > most) most = dump_get(inflight, s), at = s;
    snprintf(fig, sizeof fig, "%.0f in flight (step %llu)", most, (unsigned long long)at + 1);
    snprintf(diag, sizeof diag, "%.0f asynchronous operations were still in flight when the optimizer began at "
             "step %llu: an all-reduce started and never waited on (wait on every handle in ddp_backward_done, "
             "even at N = 1)", most, (unsigned long long)at + 1);
    grade_check(g, run, "all communication waited on before the update", most == 0, fig,
                "0 in flight when the optimizer begins", diag);

    // Overlap: the bucketed strategy sends a bucket as soon as it is full,
    // so when the units after unit 0 hold at least one bucket, one is still
    // on its way when unit 0's backward (the last to run) begins.
    bool bucketed = dump_scalar(d, "ddp/strategy", -1) == 2;
    double psi = count_params(d), bucket = dump_scalar(d, "ddp/bucket_elems", 0),
           unit0_elems = dump_scalar(d, "ddp/unit0_elems", 0);
    if (!bucketed || N == 1 || psi - unit0_elems < bucket) return;
    double overlapped = 0;
    for (uint64_t s = 0; s < unit0->count; s++) overlapped += dump_get(unit0, s) > 0;
    snprintf(fig, sizeof fig, "%.0f of %llu steps", overlapped, (unsigned long long)unit0->count);
    snprintf(bound, sizeof bound, "every step: a bucket in flight when unit 0's backward begins");
    snprintf(diag, sizeof diag, "no overlap: no bucket's all-reduce was in flight when the last unit's backward "
             "began (unit 0, in the step's last micro-batch), so communication never ran beside the backward "
             "pass: each bucket was waited on as soon as it was sent (start it with comm_all_reduce_async, "
             "wait on all of them in ddp_backward_done)");
    grade_check(g, run, "buckets overlap the backward pass", overlapped == (double)unit0->count, fig, bound, diag);
}

static void lab02_check(Grader *g, const LabSpec *lab, const Run *run) {
    (void)lab;
    // The program exits non-zero when it does not match; its dump says how.
    if (!check_ran(g, run, false)) return;
    check_hooks_written(g, run);
    const DumpFile *d = run->dump;
    int N = (int)dump_scalar(d, "meta/world_size", 0);
    if (N > 1) check_every_gradient(g, run, N);
    check_equivalence(g, run, N);
    check_work(g, run, 1, 1, true,
               "a rank computed more than its own rows of the batch: data parallelism gives each of the N ranks B/N rows, and averages the gradients rather than computing them again",
               "a rank ran the model on more than its own rows of the batch: data parallelism gives each of the N ranks B/N rows");
    check_resident(g, run);
    check_resident_seal(g, run);
    check_step_helpers(g, run, 0, 0);
    check_live_growth(g, run);
    check_events(g, run, N);

    // Memory. The harness allocates the parameters, the gradients and the
    // moments; the student's code adds only what communication needs. The
    // total and the heap are held against the formula plus the activations
    // the model's shape needs (measured by the harness before the student's
    // code ran, not what was tracked as ACTS: a gradient copy tracked as
    // ACTS or COMM counts) plus one unit of slack for the library's scratch
    // (a device buffer staged through the host); the heap another unit (the
    // initialisation makes one on the host) and 1 MiB of bookkeeping.
    // bf16: 2 bytes a parameter and a gradient, 12 of optimizer state (the
    // fp32 master copy and the two moments): the harness's, as in fp32.
    // --grad-reduce fp32 keeps 4-byte gradients.
    const bool bf16 = config_is(d, "precision", "bf16"), grads_fp32 = config_is(d, "grad_reduce", "fp32");
    const double P = bf16 ? 2 : 4, G = grads_fp32 ? 4 : P, K = bf16 ? 12 : 8;
    double psi = count_params(d), unit = 4 * largest_unit_floats(d), acts = dump_scalar(d, "mem/acts_expected", 0);
    const char *not_freed = "a buffer is kept that should not be, or one is allocated again every step";
    char pw[64], gw[96], kw[96];
    snprintf(pw, sizeof pw, "%g psi%s", P, bf16 ? " (bf16)" : "");
    snprintf(gw, sizeof gw, "%g psi (grad_flat%s: the buckets are views of it)", G, G == 2 ? ", bf16" : "");
    snprintf(kw, sizeof kw, "%g psi (%sAdamW's two moments)", K, bf16 ? "the fp32 master copy and " : "");
    check_peak(g, run, MEM_PARAMS, "PARAMS", P * psi, pw, not_freed);
    check_peak(g, run, MEM_GRADS, "GRADS", G * psi, gw, not_freed);
    check_peak(g, run, MEM_OPTIM, "OPTIM", K * psi, kw, not_freed);
    char why[200], diag[600], where[200];
    double expected[MEM_NCAT] = {P * psi, G * psi, K * psi, acts, 0, 0};
    double total = (P + G + K) * psi + acts + unit;
    // A leak grows step after step; a copy kept for good does not.
    const DumpArray *live = dump_find(d, "mem/live_after_step");
    char b1[32], b2[32];
    if (live && live->count > 1 && dump_get(live, live->count - 1) > dump_get(live, 0) + unit)
        snprintf(diag, sizeof diag, "the memory live after each step grows, %s after step 1 and %s after step "
                 "%llu: a buffer allocated every step is never freed (%s)",
                 core_fmt_bytes(dump_get(live, 0), b1, sizeof b1),
                 core_fmt_bytes(dump_get(live, live->count - 1), b2, sizeof b2),
                 (unsigned long long)live->count, excess_category(run, expected, where, sizeof where));
    else
        snprintf(diag, sizeof diag, "%s: a second copy of the gradients or the parameters, under whatever "
                 "category, still costs memory; the buckets are views of grad_flat, not copies",
                 excess_category(run, expected, where, sizeof where));
    snprintf(why, sizeof why, "%g psi + the activations the model needs (%s) + one unit of library scratch",
             P + G + K, core_fmt_bytes(acts, b1, sizeof b1));
    check_peak(g, run, PEAK_TOTAL, "total (tracked)", total, why, diag);
    check_peak(g, run, PEAK_HEAP, "heap (independent measure)", total + unit + (1 << 20),
               "the tracked bound + one unit + 1 MiB",
               "memory allocated around mem_alloc (malloc, calloc) shows here and nowhere else: allocate "
               "through mem_alloc, and free what you allocate");

    // Plain data parallelism moves 2(N-1)/N of the gradients' bytes per step
    // (an all-reduce), after one broadcast of the parameters.
    const DumpArray *loss = dump_find(d, "loss");
    double steps = loss ? (double)loss->count : 0;
    // bf16 moves 2 bytes an element.
    double bytes = N > 1 ? steps * 2.0 * (N - 1) / N * G * psi + P * psi : 0;
    char formula[128];
    snprintf(formula, sizeof formula, "steps x 2(N-1)/N x %g psi + %g psi (the first broadcast)%s", G, P,
             !bf16 ? "" : G == 4 ? " (bf16, fp32 gradients)" : " (bf16)");
    check_comm_volume(g, run, bytes, bytes, formula,
                      strstr(run->spec->flags, "--accum")
                          ? "with --accum it communicates at every micro-batch: wait for the last one"
                          : "something is all-reduced more than once per step");
}

const LabSpec LAB02 = {
    .id = "lab02", .dir = "lab02_ddp", .student_file = "ddp.c", .program = "lab02",
    .solution = "lab02_solution", .runs = LAB02_RUNS, .nruns = sizeof LAB02_RUNS / sizeof LAB02_RUNS[0],
    .ref_flags = lab02_ref_flags, .check = lab02_check, .words = WORDS_DATA_PARALLEL, .hidden = lab02_hidden,
};
