// spec_lab01.c: what the grader runs and checks for lab01 (collectives).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "core.h"
#include "grade.h"
#include "mem.h"

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

const LabSpec LAB01 = {
    .id = "lab01", .dir = "lab01_collectives", .student_file = "collectives.c",
    .program = "lab01", .solution = "lab01_solution",
    .runs = LAB01_RUNS, .nruns = sizeof LAB01_RUNS / sizeof LAB01_RUNS[0],
    .ref_flags = NULL, .check = lab01_check,
};

