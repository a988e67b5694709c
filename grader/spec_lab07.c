// spec_lab07.c: what the grader runs and checks for lab07 (3D parallelism),
// and the formulas of grid_budget.h.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "comm.h"
#include "core.h"
#include "grid_budget.h"
#include "lab.h"
#include "mem.h"
#include "pp_budget.h"
#include "reading.h"
#include "results.h"
#include "spec_train.h"
#include "specs.h"
#include "zero_budget.h"

// Two blocks, 3 steps. Each planted bug of the grid shows on some shapes
// only (a group of one moves nothing; the world is the DP group when t = p
// = 1), so the runs cover each axis alone and together: the 2 x 2 x 2 grid
// the issue names, an odd pipeline with a TP group and no replicas, ZeRO-1
// at dp 2 (with TP, with PP), and data parallelism alone, where the world
// and the DP group are one.
#define SMALL "--layers 2 --steps 3 "
static const RunSpec LAB07_RUNS[] = {
    {"np8-t2-p2-dp2", 8, SMALL "--tp 2 --pp 2", true, false},
    {"np6-t2-p3", 6, SMALL "--tp 2 --pp 3 --micro 4", true, false},
    {"np4-t2-dp2", 4, SMALL "--tp 2", true, false},
    {"np4-t2-dp2-zero1", 4, SMALL "--tp 2 --zero 1", true, false},
    {"np4-p2-dp2-zero1-gpipe", 4, SMALL "--pp 2 --zero 1 --schedule gpipe --micro 4", true, false},
    {"np2-dp2", 2, SMALL, false, false},
    // Recomputation as lab06's, on the grid: selective with replicas, full
    // in a pipeline (each block's forward again from the input its
    // micro-batch keeps, into the one set all share).
    {"np4-t2-dp2-recompute-selective", 4, SMALL "--tp 2 --recompute selective", false, false},
    {"np4-t2-p2-recompute-full", 4, SMALL "--tp 2 --pp 2 --micro 4 --recompute full", true, false},
    // ZeRO-1 over a DP group of 3, whose stage's floats 3 does not divide
    // (the shard padded), and a grid of t p = 8 (a pipeline of 4 stages of
    // TP pairs, no replicas).
    {"np3-dp3-zero1", 3, SMALL "--zero 1 --batch 6", false, false},
    {"np8-t2-p4", 8, SMALL "--tp 2 --pp 4 --micro 4", false, false},
    // The student's choice of a grid within a budget (4 layers: enough to
    // tell the grids apart), then run.
    {"np4-budget-8mb", 4, "--steps 2 --budget-mb 8", true, false},
    // The choice at other budgets and numbers of GPUs, only planned (--gpus
    // other than the ranks: nothing trains), each against the planner's
    // list the lab's own code makes (a budget that nothing fits is refused
    // as bad input, before grid_choose: tests/cases.py).
    {"plan-gpus8-8mb", 1, "--steps 2 --budget-mb 8 --gpus 8", true, false},
    {"plan-gpus6-12mb-batch12", 1, "--steps 2 --budget-mb 12 --gpus 6 --batch 12", false, false},
    {"plan-gpus16-5mb-layers6", 1, "--steps 2 --budget-mb 5 --gpus 16 --layers 6", true, false},
};
#undef SMALL

// Hidden runs: a grid drawn among those the lab runs (t dividing the 4
// heads, p at most the 4 units of 2 blocks, dp dividing the batch, m a
// replica's rows, ZeRO-1 where there are replicas, a schedule, a
// recomputation) on at most 8 ranks, and two choices only planned, at a
// budget, a number of GPUs, a depth and a batch drawn (12 to 24 MB: every
// such model and number of GPUs has a grid within 12, 11.24 MB at most,
// and a budget nothing fits is refused before grid_choose).
static int lab07_hidden(uint64_t seed, RunSpec *out, int max) {
    Draw d = draw_start(seed, "lab07");
    static const int ts[] = {1, 2, 4}, seqs[] = {32, 48, 64}, gpus[] = {2, 3, 4, 6, 8, 12, 16};
    static const int layers[] = {2, 4, 6}, batches[] = {8, 12, 16};
    static const char *const rcs[] = {"none", "selective", "full"}, *const scheds[] = {"1f1b", "gpipe"};
    int t, p, dp;
    do t = draw_pick(&d, ts, 3), p = draw_int(&d, 1, 4), dp = draw_int(&d, 1, 4);
    while (t * p * dp < 2 || t * p * dp > 8);
    const int batch = dp == 3 ? 6 : 8, rows = batch / dp;
    int m;
    do m = draw_int(&d, 1, rows);
    while (rows % m);
    const int zero = dp > 1 ? draw_int(&d, 0, 1) : 0;
    const char *sched = draw_word(&d, scheds, 2), *rc = draw_word(&d, rcs, 3);
    int n = 0;
    if (n < max)
        hidden_run(&out[n], n, t * p * dp, false, "--layers 2 --steps 3 --seq %d --batch %d --tp %d --pp %d "
                   "--micro %d --zero %d --schedule %s --recompute %s", draw_pick(&d, seqs, 3), batch, t, p, m, zero,
                   sched, rc), n++;
    for (int k = 0; k < 2 && n < max; k++)
        hidden_run(&out[n], n, 1, true, "--steps 2 --budget-mb %.2f --gpus %d --layers %d --batch %d",
                   draw_int(&d, 1200, 2400) / 100.0, draw_pick(&d, gpus, 7), draw_pick(&d, layers, 3),
                   draw_pick(&d, batches, 3)), n++;
    return n;
}

static const char *lab07_ref_flags(const LabSpec *lab, const Run *run, char *buf, size_t len) {
    (void)lab;
    // A choice only planned (--gpus other than the ranks, or nothing fits)
    // trains nothing.
    if (run->dump && dump_find(run->dump, "lab07/choice/ok") && !dump_find(run->dump, "loss")) return NULL;
    static const char *const drop[] = {"tp", "pp", "micro", "schedule", "zero", "budget-mb", "gpus", NULL};
    without_flags(run, drop, buf, len);
    // lab07's dropout default is not build/ref's.
    if (!strstr(run->spec->flags, "--dropout ")) {
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, " --dropout %g", config_value(run->dump, "dropout", 0.1));
    }
    return buf;
}

// ---- the formulas (grid_budget.h) ------------------------------------------------------

GridBytes grid_bytes(int t, int p, int s, int dp, int zero, int m, double b, double T, double C, int blocks,
                     bool embed, bool head, double rep_floats, int nrep, double padded, bool full) {
    GridBytes o = {0};
    const double M = b * T, MC = 4 * M * C;
    if (t > 1) {
        const double per = (full ? 6.0 : 4.0) * blocks + embed + head;   // a micro-batch's gathers, as many scatters
        o.tp_gather = o.tp_scatter = m * per * MC;
        o.tp_gather_calls = m * per;
        o.tp_reduce = (head ? m * 3 * 4 * M : 0) + 4 * rep_floats;
        o.tp_reduce_calls = (head ? 3.0 * m : 0) + nrep;
    }
    if (p > 1) {
        const double msg = 4 * b * (T / t) * C, ends = (s > 0) + (s < p - 1);
        o.pp_send = o.pp_recv = m * ends * msg;
        o.pp_calls = m * ends;
    }
    if (dp > 1) {
        if (zero) o.dp_scatter = o.dp_gather = 4 * padded;
        else o.dp_reduce = 4 * padded;
    }
    o.tp = o.tp_gather + o.tp_scatter + o.tp_reduce;
    o.pp = o.pp_send + o.pp_recv;
    o.dp = o.dp_reduce + o.dp_scatter + o.dp_gather;
    return o;
}

GridActs grid_acts(int t, double b, double T, double C, double NH, double V, int blocks, bool embed, bool head,
                   GptRecompute rc) {
    const double M = b * T, Tt = T / t, Mt = b * Tt, Ct = C / t, Ht = 4 * C / t, NHt = NH / t, nlm = V / t;
    const double att = b * NHt * T * T;
    GridActs o;
    // alloc_scratch: four (M, C/t), the probabilities, two (M, 4C/t), the
    // logits' gradient, the ids, two whole (M, C), two local, the blocks.
    o.scratch = 4 * (4 * M * Ct + att + 2 * M * Ht + M * nlm + M + 2 * M * C + 2 * Mt * C + M * C);
    // alloc_block: the LayerNorms' statistics (four of Mt), the two gathered
    // inputs, mid, q k v and the attention's output, the probabilities, the
    // MLP's two.
    const double kept_att = rc == GPT_RECOMPUTE_SELECTIVE ? 0 : att;
    const double block = 4 * (4 * Mt + 2 * M * C + Mt * C + 4 * M * Ct + kept_att + 2 * M * Ht);
    o.set = (rc == GPT_RECOMPUTE_FULL ? 0 : blocks * block) + (blocks + 1) * 2 * 4 * Mt * C;
    if (rc == GPT_RECOMPUTE_SELECTIVE) o.scratch += 4 * att;                           // tp->att_again
    if (rc == GPT_RECOMPUTE_FULL) o.scratch += 4 * Mt * C + (blocks > 0 ? block : 0);   // again, the one set
    if (embed) o.set += 4 * M;   // the tokens
    // The targets, the losses, lnf's statistics and gathered input, the
    // logits, three statistics of M, the target ids.
    if (head) o.set += 4 * (M + M + 2 * Mt + M * C + M * nlm + 3 * M + M);
    return o;
}

double grid_stage_params(int t, double T, double C, double V, int blocks, bool embed, bool head) {
    return blocks * (12 * C * C / t + 7 * C / t + 6 * C) + (embed ? V * C / t + T * C : 0) +
           (head ? C * V / t + 2 * C : 0);
}

// ---- the checks --------------------------------------------------------------------------

typedef struct {
    const DumpArray *facts;
    int t, p, dp, zero, m;
    double b, T, C;
    bool full;   // --recompute full
} Lab07Grid;

static double fact(const Lab07Grid *k, int rank, int col) {
    return dump_get(k->facts, (uint64_t)rank * F_COUNT + (uint64_t)col);
}

static GridBytes bytes_at(const Lab07Grid *k, int r) {
    return grid_bytes(k->t, k->p, (int)fact(k, r, F_STAGE), k->dp, k->zero, k->m, k->b, k->T, k->C,
                      (int)fact(k, r, F_BLOCKS), fact(k, r, F_EMBED) != 0, fact(k, r, F_HEAD) != 0,
                      fact(k, r, F_REP_FLOATS), (int)fact(k, r, F_NREP), fact(k, r, F_PADDED), k->full);
}

// Each rank's step, operation by operation and group by group (the
// ledger's inner group the TP group, its middle the PP group, its outer the
// DP group).
static int lab07_wants(const Run *run, int rank, LedgerWant *w, const void *ctx) {
    (void)run;
    const Lab07Grid *k = ctx;
    GridBytes o = bytes_at(k, rank);
    int n = 0;
    const double m = k->m;
    // The stage's units: the most pieces a step's data-parallel collective
    // may be cut into (a bucket a unit, as labs 02 and 05 allow).
    const double units = fact(k, rank, F_BLOCKS) + (fact(k, rank, F_EMBED) != 0) + (fact(k, rank, F_HEAD) != 0);
    if (o.tp_gather > 0) {
        w[n++] = (LedgerWant){LEDGER_INNER, COMM_OP_ALL_GATHER, o.tp_gather, o.tp_gather_calls,
                              "each micro-batch's tokens gathered before every split layer of the stage, and the "
                              "embedding's and the head's, 4 M C bytes each (lab06's)", m};
        w[n++] = (LedgerWant){LEDGER_INNER, COMM_OP_REDUCE_SCATTER, o.tp_scatter, o.tp_gather_calls,
                              "each micro-batch's split layers' outputs and the gathers' gradients scattered, 4 M C "
                              "bytes each (lab06's)", m};
    }
    if (o.tp_reduce > 0)
        w[n++] = (LedgerWant){LEDGER_INNER, COMM_OP_ALL_REDUCE, o.tp_reduce, o.tp_reduce_calls,
                              "the replicated tensors' gradients summed over the TP group once a step (one call a "
                              "tensor at most), and on the last stage the cross-entropy's three of M a micro-batch",
                              0};
    if (o.pp_send > 0) {
        const bool first = fact(k, rank, F_STAGE) == 0, last = fact(k, rank, F_STAGE) == k->p - 1;
        // A stage sends forward to the next and back to the previous: the
        // ledger names them apart. One message a micro-batch, no more and
        // no fewer.
        double one = o.pp_send / o.pp_calls * m;
        if (!last) {
            w[n++] = (LedgerWant){LEDGER_NEXT, COMM_OP_SEND, one, m, "each micro-batch's activations, this rank's "
                                  "tokens of the residual stream, sent to the next stage's rank of the same TP place",
                                  m};
            w[n++] = (LedgerWant){LEDGER_NEXT, COMM_OP_RECV, one, m, "each micro-batch's gradient of them, back", m};
        }
        if (!first) {
            w[n++] = (LedgerWant){LEDGER_PREV, COMM_OP_RECV, one, m, "each micro-batch's activations, from the "
                                  "previous stage", m};
            w[n++] = (LedgerWant){LEDGER_PREV, COMM_OP_SEND, one, m, "each micro-batch's gradient of them, back", m};
        }
    }
    // Once a step over the replicas, after the last micro-batch: one call
    // for the stage's flat buffer, or one a unit at most.
    if (o.dp_reduce > 0)
        w[n++] = (LedgerWant){LEDGER_OUTER, COMM_OP_ALL_REDUCE, o.dp_reduce, units,
                              "the stage's gradients averaged over the replicas once a step, after the last "
                              "micro-batch, in one call or one a unit of the stage", 1};
    if (o.dp_scatter > 0) {
        w[n++] = (LedgerWant){LEDGER_OUTER, COMM_OP_REDUCE_SCATTER, o.dp_scatter, units,
                              "ZeRO-1: the stage's gradients reduce-scattered over the replicas once a step, in one "
                              "call or one a unit of the stage", 1};
        w[n++] = (LedgerWant){LEDGER_OUTER, COMM_OP_ALL_GATHER, o.dp_gather, units,
                              "ZeRO-1: the updated shards gathered over the replicas once a step, in one call or one "
                              "a unit of the stage", 1};
    }
    return n;
}

static void lab07_check(Grader *g, const LabSpec *lab, const Run *run) {
    (void)lab;
    if (!check_ran(g, run, false)) return;
    const DumpFile *d = run->dump;
    check_hooks_written(g, run);
    // --budget-mb: the student's choice is the planner's fastest that fits
    // (graded at several budgets and numbers of GPUs, most of them only
    // planned: --gpus other than the ranks), and a choice run holds what the
    // formulas said, within the budget.
    if (dump_find(d, "lab07/choice/ok")) {
        const bool ok = dump_scalar(d, "lab07/choice/ok", 0) != 0;
        const double budget = dump_scalar(d, "lab07/choice/budget", 0);
        char fig[160], want[160], diag[700];
        const int gpus = (int)dump_scalar(d, "lab07/choice/gpus", 0);
        if (dump_scalar(d, "lab07/choice/t", 0) == 0) snprintf(fig, sizeof fig, "none for %d GPUs", gpus);
        else snprintf(fig, sizeof fig, "t %d, p %d, m %d for %d GPUs", (int)dump_scalar(d, "lab07/choice/t", 0),
                      (int)dump_scalar(d, "lab07/choice/p", 0), (int)dump_scalar(d, "lab07/choice/m", 0), gpus);
        if (dump_scalar(d, "lab07/choice/best_t", 0) == 0) snprintf(want, sizeof want, "none fits %.2f MB", budget / 1e6);
        else snprintf(want, sizeof want, "t %d, p %d, m %d: the fastest within %.2f MB",
                 (int)dump_scalar(d, "lab07/choice/best_t", 0), (int)dump_scalar(d, "lab07/choice/best_p", 0),
                 (int)dump_scalar(d, "lab07/choice/best_m", 0), budget / 1e6);
        snprintf(diag, sizeof diag, "grid_choose did not choose the planner's fastest configuration whose memory fits "
                 "the budget: every t dividing the GPUs, p dividing the rest, dp what is left, m from 1 to a "
                 "replica's rows and each recomputation must be tried, those plan() calls invalid or over the budget "
                 "left out, and of the rest the least seconds kept (not the least memory)");
        grade_check(g, run, "the configuration chosen within the budget", ok, fig, want, diag);
    }
    // A grid or wiring not written yet stops the run before training: the
    // unfinished TODOs are the whole answer.
    if (!dump_find(d, "loss")) return;
    const int N = (int)dump_scalar(d, "meta/world_size", 0);
    // Nothing moved before the step's last micro-batch is done.
    {
        const int early = (int)dump_scalar(d, "lab07/early_sync", 0), m = (int)config_value(d, "micro", 1);
        char fig[96], diag[700];
        snprintf(fig, sizeof fig, early ? "after micro-batch %d of %d" : "after the last", early, m);
        snprintf(diag, sizeof diag, "grid_after_backward communicated (%.0f bus bytes) after micro-batch %d of the "
                 "step's %d: the gradients are whole only once every micro-batch's backward pass has added its part, "
                 "so a sum over the TP group or an average over the replicas made earlier leaves the later "
                 "micro-batches' parts out of it (the data-parallel sync before the last micro-batch); wait for "
                 "done == st->m", dump_scalar(d, "lab07/early_bytes", 0), early, m);
        grade_check(g, run, "the step's gradients synced after its last micro-batch", early == 0, fig,
                    "no communication in grid_after_backward before done == m", diag);
    }
    check_equivalence(g, run, N);
    check_resident(g, run);
    check_resident_seal(g, run);
    check_step_helpers(g, run, 0, 0);
    check_live_growth(g, run);

    // The replicated tensors equal on every rank of a TP group.
    const DumpArray *differs = dump_find(d, "lab07/replicated_differs_name");
    const char *name = differs && differs->type == DUMP_TEXT ? (const char *)differs->data : "?";
    const bool same = strcmp(name, "-") == 0;
    char diag[600];
    snprintf(diag, sizeof diag, "%s differs between the ranks of its TP group after training: under sequence "
             "parallelism each rank's gradient of a replicated tensor (the LayerNorms, attn.bo, mlp.b2, embed.wpe, "
             "the head's LayerNorm) comes from its own T/t tokens, so grid_after_backward must sum each st->rep[i] "
             "over the TP group (comm_all_reduce_sum on g->tp_group) once the step's last micro-batch is done",
             name);
    grade_check(g, run, "replicated tensors equal on every rank of a TP group", same,
                same ? "equal on every rank" : name, "equal to the bit", diag);

    if (dump_find(d, "lab07/choice/ok")) {
        const double budget = dump_scalar(d, "lab07/choice/budget", 0);
        char fig[160], want[160], diag[700];
        const DumpArray *facts = dump_find(d, "lab07/rank");
        double most = 0;
        for (uint64_t r = 0; facts && facts->ndim == 2 && r < facts->shape[0]; r++) {
            double tot = 0;
            for (int c = F_PARAMS; c <= F_ACTS; c++) tot += dump_get(facts, r * F_COUNT + (uint64_t)c);
            most = fmax(most, tot);
        }
        char b1[32], b2[32];
        snprintf(fig, sizeof fig, "%s", core_fmt_bytes(most, b1, sizeof b1));
        snprintf(want, sizeof want, "<= the budget, %s", core_fmt_bytes(budget, b2, sizeof b2));
        snprintf(diag, sizeof diag, "the run of the chosen configuration held %s on its fullest rank, over the "
                 "budget of %s: grid_choose kept a configuration whose predicted memory is over the budget", b1, b2);
        grade_check(g, run, "the chosen configuration's memory", most <= budget && most > 0, fig, want, diag);
    }

    Lab07Grid k = {.facts = dump_find(d, "lab07/rank"), .t = (int)dump_scalar(d, "lab07/t", 1),
                   .p = (int)dump_scalar(d, "lab07/p", 1), .dp = (int)dump_scalar(d, "lab07/dp", 1),
                   .zero = (int)dump_scalar(d, "lab07/zero", 0), .m = (int)config_value(d, "micro", 1),
                   .b = dump_scalar(d, "lab07/micro_rows", 0), .T = config_value(d, "seq", 0),
                   .C = config_value(d, "dim", 0), .full = config_is(d, "recompute", "full")};
    if (!k.facts || k.facts->ndim != 2 || (int)k.facts->shape[0] != N || k.facts->shape[1] != F_COUNT) {
        grade_check(g, run, "the grid's figures", false, "no lab07/rank", "every rank's",
                    "the harness did not write each rank's facts (report_given.c)");
        return;
    }
    // Memory by category on every rank against zero_budget over the DP
    // group (the student's shard: a shard of the wrong group shows in
    // OPTIM) and pp_budget's activations.
    const bool gpipe = config_is(d, "schedule", "gpipe");
    char fig[200], bound[200];
    static const char *const cat[] = {"PARAMS", "GRADS", "OPTIM"};
    for (int c = 0; c < 3; c++) {
        int worst = -1;
        double got = 0, want = 0;
        for (int r = 0; r < N && worst < 0; r++) {
            ZeroBudget z = zero_budget(k.zero, false, fact(&k, r, F_PADDED), k.dp, 0, 0, false);
            double formula = c == 0 ? z.params : c == 1 ? z.grads : z.optim, peak = fact(&k, r, F_PARAMS + c);
            if (fabs(peak - formula) > 0.5) worst = r, got = peak, want = formula;
        }
        char b1[32], b2[32];
        snprintf(fig, sizeof fig, worst < 0 ? "the formula's on every rank" : "rank %d: %s", worst,
                 core_fmt_bytes(got, b1, sizeof b1));
        snprintf(bound, sizeof bound, "%s", c == 2 && k.zero ? "8 x the stage's floats / dp (this rank's shard), "
                 "each rank" : c == 2 ? "8 x the stage's floats, each rank" : "4 x the stage's floats, each rank");
        snprintf(diag, sizeof diag, c == 2 && k.zero && got < want
                 ? "rank %d holds %s of optimizer state where its shard of the DP group's replicas is %s: the shard "
                   "was taken over more ranks than the %d replicas of this stage and TP part (grid_shard: over "
                   "g->n.dp, the DP group's size, not the world's)"
                 : "rank %d holds %s where the formula (zero_budget over the DP group) gives %s: a buffer of the "
                   "student's own, or a shard of another size", worst, b1, core_fmt_bytes(want, b2, sizeof b2), k.dp);
        char check[64];
        snprintf(check, sizeof check, "%s per rank", cat[c]);
        grade_check(g, run, check, worst < 0, fig, bound, diag);
    }
    int worst = -1;
    double got = 0, want = 0;
    for (int r = 0; r < N && worst < 0; r++) {
        PpBudget b = pp_budget(gpipe, false, k.p, k.m, (int)fact(&k, r, F_STAGE), fact(&k, r, F_N),
                               fact(&k, r, F_SCRATCH), 0, fact(&k, r, F_SET), false);
        if (fact(&k, r, F_ACTS) > b.acts + 65536) worst = r, got = fact(&k, r, F_ACTS), want = b.acts;
    }
    char b1[32], b2[32];
    snprintf(fig, sizeof fig, worst < 0 ? "within on every rank" : "rank %d: %s", worst,
             core_fmt_bytes(got, b1, sizeof b1));
    snprintf(diag, sizeof diag, "rank %d's activations peaked at %s, above what its stage keeps by lab05's schedule "
             "(%s): a buffer of the student's own in ACTS", worst, b1, core_fmt_bytes(want, b2, sizeof b2));
    grade_check(g, run, "ACTS per rank", worst < 0, fig, "pp_budget's scratch + k micro-batches' sets + 64 KiB",
                diag);

    // Bytes per group, operation by operation.
    static const char *const names[] = {"its TP group", "its DP group", "its PP group"};
    check_ledger_grid(g, run, k.t, k.p, names, lab07_wants, &k);
}

// The factors a grid's gradients (or AdamW's first moments, a running mean
// of them) can be off by, and why: a whole step's x dp, a replicated
// tensor's 1/t.
static int lab07_ratio_causes(const Run *run, RatioCause *out) {
    int t = (int)dump_scalar(run->dump, "lab07/t", 1), dp = (int)dump_scalar(run->dump, "lab07/dp", 1), n = 0;
    if (dp > 1) {
        out[n].factor = dp;
        snprintf(out[n++].cause, sizeof out->cause, "which is dp = %d: the gradients were summed over the DP group "
                 "instead of averaged (each replica's gradient is already the mean over its own tokens, and the "
                 "step's is the mean of the %d replicas')", dp, dp);
        out[n].factor = 1.0 / dp;
        snprintf(out[n++].cause, sizeof out->cause, "which is 1/dp = 1/%d: the gradients were divided by dp once "
                 "more than the DP group's average does", dp);
    }
    if (t > 1) {
        out[n].factor = 1.0 / t;
        snprintf(out[n++].cause, sizeof out->cause, "which is 1/t = 1/%d: the replicated tensors' gradients "
                 "(LayerNorm's weights and biases, the row-parallel biases) were averaged over the TP group instead "
                 "of summed: under sequence parallelism each rank of the group saw T/t of the tokens, so the "
                 "group's sum is the whole gradient", t);
        out[n].factor = t;
        snprintf(out[n++].cause, sizeof out->cause, "which is t = %d: a gradient already whole on every rank of the "
                 "TP group was summed over it again (a replicated tensor's gradient summed twice), or the loss "
                 "counted once per rank of the group", t);
    }
    return n;
}

// What the Makefile's LAB_USES_lab07_3d_parallel links: labs 05 and 06's answers.
static const char *const LAB07_GIVEN[] = {"lab05_pipeline/solution/pipeline.c",
                                          "lab06_sequence_parallel/solution/sp.c", NULL};

const LabSpec LAB07 = {
    .id = "lab07", .dir = "lab07_3d_parallel", .student_file = "grid.c", .program = "lab07",
    .solution = "lab07_solution", .runs = LAB07_RUNS, .nruns = sizeof LAB07_RUNS / sizeof LAB07_RUNS[0],
    .ref_flags = lab07_ref_flags, .check = lab07_check, .words = WORDS_DATA_PARALLEL | WORDS_SHARDS,
    .ratio_causes = lab07_ratio_causes, .given = LAB07_GIVEN, .hidden = lab07_hidden,
};
