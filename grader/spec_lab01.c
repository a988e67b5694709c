// spec_lab01.c: what the grader runs and checks for lab01 (collectives).
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
#include "specs.h"

// ---- lab01: collectives --------------------------------------------------------

// The quick subset (make check-lab01, and the planted bugs' tests): one rank,
// where every shortcut for N = 1 shows, and three, the smallest ring in which
// a rank's two neighbours differ (a cycle of blocking sends, a broadcast
// tree with a rank that forwards). Each takes about a second.
static const RunSpec LAB01_RUNS[] = {
    {"np1", 1, "--quiet", true, false},
    {"np2", 2, "--quiet", false, false},
    {"np3", 3, "--quiet", true, false},
    {"np4", 4, "--quiet", false, false},
    {"np5", 5, "--quiet", false, false},
};

static const char *const LAB01_FUNCS[] = {"ring_reduce_scatter", "ring_all_gather", "ring_all_reduce",
                                          "tree_broadcast", "chain_broadcast"};

enum { SEG = 1 << 16 };   // the floats of one segment in the reference solution and the README

static bool is_broadcast(const char *fn) { return strstr(fn, "broadcast") != NULL; }

// A count long enough that a ring's block (a broadcast's whole message) spans
// more than one segment.
static bool several_segments(const char *fn, long count, int N) {
    long piece = is_broadcast(fn) ? count : (count + N - 1) / N;
    return piece > SEG;
}

// Why a collective's results are wrong, from where they are wrong: which
// world size, root, mode (in place or not) and counts.
static void lab01_diagnose(const DumpFile *d, const char *fn, int N, char *diag, size_t len) {
    char name[96];
    snprintf(name, sizeof name, "check/%s/wrong", fn);
    const DumpArray *wrong = dump_find(d, name), *counts = dump_find(d, "check/counts");
    snprintf(name, sizeof name, "check/%s/wrong_by_root", fn);
    const DumpArray *by_root = dump_find(d, name);
    snprintf(name, sizeof name, "check/%s/wrong_by_mode", fn);
    const DumpArray *by_mode = dump_find(d, name);
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
    // In place against out of place, where the harness ran both.
    if (by_mode && by_mode->ndim == 2 && by_mode->shape[1] == 2) {
        bool both = false;
        double oop = 0, inp = 0;
        for (uint64_t i = 0; i < by_mode->shape[0]; i++) {
            double o = dump_get(by_mode, 2 * i), p = dump_get(by_mode, 2 * i + 1);
            both |= o >= 0 && p >= 0;
            oop += o > 0 ? o : 0, inp += p > 0 ? p : 0;
        }
        if (both && inp > 0 && oop == 0) {
            snprintf(diag, len, "wrong only in place (send is recv + this rank's offset; out of place it is "
                     "right): in place this rank's block is already where it belongs, so nothing may "
                     "overwrite it before it is sent (no copy, no clearing of recv)");
            return;
        }
        if (both && oop > 0 && inp == 0) {
            snprintf(diag, len, "wrong only out of place (send is a buffer of its own; in place it is right): "
                     "copy send into this rank's block of recv before the ring starts");
            return;
        }
    }
    int wrong_div = 0, wrong_nondiv = 0, nondiv = 0, div = 0, wrong_multi = 0, wrong_single = 0;
    char list[256] = "";
    size_t m = 0;
    for (uint64_t i = 0; i < wrong->count && i < counts->count; i++) {
        long c = (long)dump_get(counts, i);
        bool divides = c % N == 0;
        divides ? div++ : nondiv++;
        if (dump_get(wrong, i) > 0) {
            divides ? wrong_div++ : wrong_nondiv++;
            several_segments(fn, c, N) ? wrong_multi++ : wrong_single++;
            if (m + 16 < sizeof list) m += (size_t)snprintf(list + m, sizeof list - m, "%s%ld", m ? ", " : "", c);
        }
    }
    if (N == 1 && wrong_single > 0) {   // (wrong within one segment: not a segment offset)
        snprintf(diag, len, "wrong with one rank (N = 1): there is no one to talk to, and the result is this "
                 "rank's own input; %s",
                 is_broadcast(fn) ? "a broadcast must leave the buffer as it is"
                                  : "copy it into the output when that is another buffer (a shortcut that "
                                    "returns at once leaves the output unwritten)");
        return;
    }
    if (wrong_multi > 0 && wrong_single == 0 && is_broadcast(fn))
        snprintf(diag, len, "wrong only for counts longer than one 65,536-float segment (%s): check the "
                 "segment offsets (segment k starts k * 65,536 floats into the buffer, on the side that "
                 "sends and on the side that receives)", list);
    else if (wrong_multi > 0 && wrong_single == 0 && wrong_div > 0)
        snprintf(diag, len, "wrong only for counts longer than one 65,536-float segment per block (%s), "
                 "whether N = %d divides them or not: check the segment offsets (segment k starts k * "
                 "65,536 floats into its block, in every buffer: the one sent, the one received into, the "
                 "one added to and the result)", list, N);
    else if (wrong_div == 0 && wrong_nondiv > 0 && !is_broadcast(fn))
        snprintf(diag, len, "wrong only for counts that N = %d does not divide (%s): blocks must follow "
                 "comm_block, where the first count %% N blocks are one element longer", N, list);
    else if (wrong_div + wrong_nondiv >= div + nondiv - 1 && is_broadcast(fn))
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

// A call the counters cannot see, and what it means.
static void foreign_diagnosis(const char *call, char *diag, size_t len) {
    if (strncmp(call, "MPI_", 4) == 0)
        snprintf(diag, len, "it calls %s directly: MPI called outside comm.h moves bytes nobody counts and "
                 "skips the exercise; build it from comm_send, comm_recv and comm_sendrecv", call);
    else
        snprintf(diag, len, "it calls %s: bookkeeping helpers move bytes nobody counts; build it from "
                 "comm_send, comm_recv and comm_sendrecv", call);
}

// Bytes sent over all ranks and checks against the algorithm's: exactly
// (N-1)·count floats per call for a ring reduce-scatter or all-gather and
// any broadcast, 2(N-1)·count for the ring all-reduce. Less cannot happen
// with right results; more is data sent twice.
static void check_bytes(Grader *g, const Run *run, const char *fn, int N) {
    char name[96], check[96], fig[160], bound[160], diag[600], b1[32], b2[32];
    snprintf(name, sizeof name, "check/%s/bytes_sent", fn);
    double sent = dump_scalar(run->dump, name, -1);
    snprintf(name, sizeof name, "check/%s/bytes_formula", fn);
    double formula = dump_scalar(run->dump, name, -1);
    snprintf(check, sizeof check, "%s bytes sent", fn);
    if (sent < 0 || formula < 0) {
        grade_check(g, run, check, false, "not in the dump", "the harness's byte counts",
                    "the dump has no check/<function>/bytes_sent: a harness older than the grader?");
        return;
    }
    double ratio = formula > 0 ? sent / formula : (sent > 0 ? INFINITY : 1);
    bool bcast = is_broadcast(fn), ar = strcmp(fn, "ring_all_reduce") == 0;
    snprintf(fig, sizeof fig, "%s (x%.2f)", core_fmt_bytes(sent, b1, sizeof b1), ratio);
    snprintf(bound, sizeof bound, "<= %s: %s per call, over all ranks", core_fmt_bytes(formula, b2, sizeof b2),
             ar ? "2(N-1)·count floats" : "(N-1)·count floats");
    if (bcast)
        snprintf(diag, sizeof diag, "sends %.2f times the bytes a broadcast needs (every rank but the root "
                 "receives the data once): a rank receives some of the data more than once (a segment "
                 "longer than it should be, or a rank sent to twice)", ratio);
    else if (fabs(ratio - N) < 0.05 * N || (ar && fabs(ratio - N / 2.0) < 0.05 * N) || ratio >= N)
        snprintf(diag, sizeof diag, "sends %.2f times the ring's bytes: it passes the whole vector instead of "
                 "one block per step (each of the N - 1 steps moves count / N floats per rank)", ratio);
    else
        snprintf(diag, sizeof diag, "sends %.2f times the ring's bytes: some block is sent more than once, or "
                 "a longer piece than its block (comm_block says how long each is)", ratio);
    grade_check(g, run, check, sent <= formula, fig, bound, diag);
}

static void lab01_check(Grader *g, const LabSpec *lab, const Run *run) {
    (void)lab;
    // The program exits non-zero when a check fails; its dump still says which.
    if (!check_ran(g, run, false)) return;
    int N = (int)dump_scalar(run->dump, "meta/world_size", 0);
    char leakers[160] = "";
    double leaked = 0;
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
        snprintf(name, sizeof name, "check/%s/foreign_call", fn);
        const DumpArray *fc = dump_find(run->dump, name);
        const char *foreign = fc && fc->type == DUMP_TEXT && fc->count > 0 ? (const char *)fc->data : NULL;
        snprintf(check, sizeof check, "%s exact", fn);
        snprintf(fig, sizeof fig, "%.0f wrong elements%s%s%s", total, todo ? ", unfinished" : "",
                 foreign ? ", calls " : "", foreign ? foreign : "");
        if (!wrong)
            snprintf(diag, sizeof diag, "the dump has no results for %s", fn);
        else if (todo)
            snprintf(diag, sizeof diag, "not written yet: it still calls lab_todo (delete that line when it is done)");
        else if (lib >= 0)
            snprintf(diag, sizeof diag, "it calls the library's comm_%s: build it from comm_send, comm_recv "
                     "and comm_sendrecv", comm_op_name((CommOp)lib));
        else if (foreign)
            foreign_diagnosis(foreign, diag, sizeof diag);
        else
            lab01_diagnose(run->dump, fn, N, diag, sizeof diag);
        grade_check(g, run, check, wrong && total == 0 && !todo && lib < 0 && !foreign, fig,
                    "0 wrong, send/recv only", diag);
        if (todo) continue;   // an unwritten function sends nothing and allocates nothing
        check_bytes(g, run, fn, N);
        snprintf(name, sizeof name, "check/%s/leaked_bytes", fn);
        double l = dump_scalar(run->dump, name, 0);
        if (l > 0) {
            leaked += l;
            size_t m = strlen(leakers);
            snprintf(leakers + m, sizeof leakers - m, "%s%s", m ? ", " : "", fn);
        }
    }
    // COMM memory still allocated after the checks: scratch buffers never freed.
    const DumpArray *live = dump_find(run->dump, "check/comm_live_bytes");
    double worst = 0;
    for (uint64_t r = 0; live && r < live->count; r++) worst = fmax(worst, dump_get(live, r));
    char fig[160], diag[600], b1[32], b2[32];
    snprintf(fig, sizeof fig, "%s live after the checks (worst rank)", core_fmt_bytes(worst, b1, sizeof b1));
    if (leakers[0])
        snprintf(diag, sizeof diag, "%s leave%s %s of COMM memory allocated after they return, over all ranks "
                 "and calls: a scratch buffer never freed (a leak); mem_free every buffer a function "
                 "allocates before it returns", leakers, strchr(leakers, ',') ? "" : "s",
                 core_fmt_bytes(leaked, b2, sizeof b2));
    else
        snprintf(diag, sizeof diag, "COMM memory is still allocated after the checks: a scratch buffer never "
                 "freed (a leak); mem_free every buffer a function allocates before it returns");
    grade_check(g, run, "COMM memory freed", live && worst == 0 && leaked == 0, fig, "0 bytes", diag);
}

// Hidden runs: two world sizes drawn, one of them beyond the listed five.
static int lab01_hidden(uint64_t seed, RunSpec *out, int max) {
    Draw d = draw_start(seed, "lab01");
    int n = 0;
    if (n < max) hidden_run(&out[n], n, draw_int(&d, 2, 5), true, "--quiet"), n++;
    if (n < max) hidden_run(&out[n], n, draw_int(&d, 6, 8), false, "--quiet"), n++;
    return n;
}

const LabSpec LAB01 = {
    .id = "lab01", .dir = "lab01_collectives", .student_file = "collectives.c",
    .program = "lab01", .solution = "lab01_solution",
    .runs = LAB01_RUNS, .nruns = sizeof LAB01_RUNS / sizeof LAB01_RUNS[0],
    .ref_flags = NULL, .check = lab01_check, .hidden = lab01_hidden,
};
