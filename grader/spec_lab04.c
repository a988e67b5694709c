// spec_lab04.c: what the grader runs and checks for lab04 (tensor parallelism).
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
#include "spec_train.h"
#include "specs.h"
#include "tp_layout.h"

// Two blocks of lab04's default width keep the runs fast. t = 3 needs heads,
// channels and vocabulary that 3 divides. np4-dp2-tp2 is the grid: two
// data-parallel groups of two tensor-parallel ranks, np2-dp2-tp1 the grid
// of two groups of one (a communicator mixed up shows on both). The quick subset holds
// a cheap run of every diagnosis: t = 2 (probes, f and g), the odd t, the
// grid (two communicators), and the naive MLP.
#define SMALL "--layers 2 --steps 3 "
static const RunSpec LAB04_RUNS[] = {
    {"np1", 1, SMALL, false, false},
    {"np2", 2, SMALL, true, false},
    {"np4", 4, SMALL, false, false},
    {"np3-heads6", 3, SMALL "--heads 6 --dim 96 --vocab 192", true, false},
    {"np4-dp2-tp2", 4, SMALL "--tp 2", true, false},
    {"np2-dp2-tp1", 2, SMALL "--tp 1", false, false},
    {"np2-dropout", 2, SMALL "--dropout 0.1", false, false},
    {"np2-naive", 2, SMALL "--mlp naive", true, false},
    // Mixed precision (bf16 parameter parts, gradients, kept activations and
    // f's and g's all-reduces; fp32 master weights and moments), against
    // build/ref in bf16: t = 2, the odd t, and the grid. g's bf16 all-reduce
    // rounds each rank's partial product before the sum; the yardstick's
    // sixth run in bf16 samples that (--rounding partials, ops.h: its bf16
    // products round their two parts before adding them). Before it did, the grid's final
    // block1.ln1.b reached 1.04 times its bound under SkylakeX; with it,
    // 0.83 at most over the four kernels and three seeds.
    {"np2-bf16", 2, SMALL "--precision bf16", true, false},
    {"np3-heads6-bf16", 3, SMALL "--heads 6 --dim 96 --vocab 192 --precision bf16", false, false},
    {"np4-dp2-tp2-bf16", 4, SMALL "--tp 2 --precision bf16", false, false},
    // Full recomputation (the harness's: each block's forward again, the
    // student's layers and their g's, at the start of its backward pass),
    // against build/ref --recompute full, with dropout: the masks drawn
    // again must be the same. The student's layers run twice a block and
    // step, into a set of kept tensors another block has just used.
    {"np2-recompute-full", 2, SMALL "--recompute full --dropout 0.1", false, false},
};
#undef SMALL

static const char *lab04_ref_flags(const LabSpec *lab, const Run *run, char *buf, size_t len) {
    (void)lab;
    static const char *const drop[] = {"tp", "mlp", NULL};
    return without_flags(run, drop, buf, len);
}

// Replicated tensors, by name: every rank holds them whole (the rest is
// split t ways). The naive MLP splits mlp.b2 with mlp.w2's columns.
static bool replicated(const char *name, bool naive) {
    const char *dot = strchr(name, '.');
    const char *t = dot ? dot + 1 : name;
    return strncmp(t, "ln", 2) == 0 || strcmp(name, "embed.wpe") == 0 || strcmp(t, "attn.bo") == 0 ||
           (strcmp(t, "mlp.b2") == 0 && !naive);
}

static double psi_replicated(const DumpFile *d, bool naive) {
    double psi = 0;
    for (int i = 0; i < d->count; i++)
        if (strncmp(d->arrays[i].name, "param/final/", 12) == 0 && replicated(d->arrays[i].name + 12, naive))
            psi += (double)d->arrays[i].count;
    return psi;
}


// The student's layers on their own (the harness's probe, before training):
// each failure names the operator at fault.
static void check_probe(Grader *g, const Run *run, int t) {
    const DumpFile *d = run->dump;
    char fig[160], diag[700];
    double attn_out = dump_scalar(d, "tp/probe/attn_out_agree", 0), mlp_out = dump_scalar(d, "tp/probe/mlp_out_agree", 0);
    snprintf(fig, sizeof fig, "attention's output %s, the MLP's %s", attn_out ? "the same" : "differs",
             mlp_out ? "the same" : "differs");
    snprintf(diag, sizeof diag, "the %s's output differs from rank to rank: g's all-reduce is missing (or not over "
             "tp->group), so each rank keeps only its own partial sum of the row-parallel layer; tp_g_forward must "
             "sum the partial outputs over the group", !attn_out ? "attention" : "MLP");
    grade_check(g, run, "g sums the row-parallel outputs", attn_out && mlp_out, fig, "the same on every rank", diag);

    double ab = dump_scalar(d, "tp/probe/attn_bias", 0), mb = dump_scalar(d, "tp/probe/mlp_bias", 0);
    bool bias_ok = fabs(ab - 1) < 1e-3 && fabs(mb - 1) < 1e-3;
    const char *which = fabs(ab - 1) >= fabs(mb - 1) ? "attn.bo" : "mlp.b2";
    double shift = fabs(ab - 1) >= fabs(mb - 1) ? ab : mb;
    snprintf(fig, sizeof fig, "attn.bo x%.2f, mlp.b2 x%.2f", ab, mb);
    if (fabs(shift - t) < 0.05 * t && t > 1)
        snprintf(diag, sizeof diag, "adding 1 to %s moved the output by %.2f, t = %d times too much: the row-parallel "
                 "layer's bias is added on every rank before g sums the partial outputs, so it counts t times; add "
                 "it once, after g", which, shift, t);
    else
        snprintf(diag, sizeof diag, "adding 1 to %s moved the output by %.2f, not 1: the bias after g must be added "
                 "exactly once, to the summed output", which, shift);
    grade_check(g, run, "the bias after g counts once", bias_ok, fig, "x1.00 each", diag);

    const char *const dx_names[] = {"attn_dx_agree", "mlp_dx_agree", "head_dx_agree"};
    const char *const layer[] = {"attention's", "the MLP's", "the LM head's"};
    int bad = -1;
    for (int i = 2; i >= 0; i--) {
        char name[64];
        snprintf(name, sizeof name, "tp/probe/%s", dx_names[i]);
        if (!dump_scalar(d, name, 0)) bad = i;
    }
    snprintf(fig, sizeof fig, "%s", bad < 0 ? "the same on every rank" : "differs between ranks");
    snprintf(diag, sizeof diag, "%s input gradient differs between ranks: each rank holds only its own partial "
             "sum, on average 1/t of the input gradient (1/%d here); f's backward (tp_f_backward) must sum it over "
             "the group before it leaves a column-parallel layer", bad >= 0 ? layer[bad] : "an", t);
    grade_check(g, run, "f sums the input gradients", bad < 0, fig, "the same on every rank", diag);

    // The cross-entropy: the loss, and the first of its parts (TpHeadActs)
    // that is not the whole vocabulary's names the step at fault.
    double ce = dump_scalar(d, "tp/probe/head_loss_err", INFINITY);
    int mx = (int)dump_scalar(d, "tp/probe/ce_max", 2), se = (int)dump_scalar(d, "tp/probe/ce_sumexp", 3),
        tl = (int)dump_scalar(d, "tp/probe/ce_target", 3);
    static const char *const mx_is[] = {"right", "local", "wrong"};
    static const char *const se_is[] = {"right", "by COMM_MAX", "local maxima", "wrong"};
    static const char *const tl_is[] = {"right", "no lm0", "not summed", "wrong"};
    int n = snprintf(fig, sizeof fig, "rel. error %.1e", ce);
    if (mx || se || tl)
        snprintf(fig + n, sizeof fig - n, ": max %s, sum %s, target %s", mx_is[mx < 0 || mx > 2 ? 2 : mx],
                 se_is[se < 0 || se > 3 ? 3 : se], tl_is[tl < 0 || tl > 3 ? 3 : tl]);
    const char *why =
        mx == 1 || (mx == 0 && se == 2)
            ? "on random logits whose rows peak on different ranks, each rank took its exponentials against its own "
              "row maximum: combine the row maximum over the group first (comm_all_reduce with COMM_MAX), take every "
              "rank's exponentials against that one maximum, then sum them and the target's logit over the group; "
              "exponentials taken against different local maxima cannot be added"
        : mx != 0
            ? "the row maximum (a->mx) is not the whole vocabulary's: each rank's maximum over its own columns "
              "(ops_row_max), then the largest over the group (comm_all_reduce with COMM_MAX)"
        : tl == 1
            ? "the target's logit was looked up without this rank's vocabulary offset: rank r's columns hold the ids "
              "[lm0, lm0 + nlm), so the target's place among them is its id minus lm0 (ops_vocab_ids with tp->lm0), "
              "and no place (-1) where another rank holds it"
        : tl == 2
            ? "the target's logit is left only on the rank whose columns hold it: sum it over the group "
              "(comm_all_reduce_sum; the other ranks give 0) before the loss"
        : tl != 0
            ? "the target's logit (a->target_logit) is not the target's: pick it on the rank whose columns hold it "
              "(ops_vocab_ids with tp->lm0, ops_pick) and sum it over the group"
        : se == 1
            ? "the row maximum is right, but the sum of exponentials is the largest of the ranks' sums, not their "
              "total: it was all-reduced with COMM_MAX; each rank's sum covers its own columns only, and the whole "
              "vocabulary's is their sum (comm_all_reduce_sum)"
        : se != 0
            ? "the sum of exponentials (a->sumexp) is not the whole vocabulary's: each rank's sum of exp(logit - "
              "maximum) over its columns, against the combined maximum (ops_row_sumexp), summed over the group"
            : "the row maximum, the sum of exponentials and the target's logit are the whole vocabulary's, but the "
              "loss is not: loss = log(sum of exponentials) + maximum - target's logit (ops_ce_from_parts)";
    grade_check(g, run, "vocabulary-parallel cross-entropy", ce <= 1e-5, fig, "<= 1e-5 against the whole vocabulary's",
                why);

    // In bf16 the output is kept in bf16: one rounding of wte[token] + wpe[t] (2^-9 of it).
    bool bf16 = config_is(d, "precision", "bf16");
    double emb = dump_scalar(d, "tp/probe/embed_err", INFINITY), emb_bound = bf16 ? 1.0 / 256 : 1e-6;
    snprintf(fig, sizeof fig, "rel. error %.1e", emb);
    grade_check(g, run, "vocabulary-parallel embedding", emb <= emb_bound, fig,
                bf16 ? "wte[token] + wpe[t], rounded to bf16 once" : "wte[token] + wpe[t]",
                "the embedding's output is not wte[token] + wpe[t]: each token's row must come from the one rank "
                "whose range holds it (a zero row elsewhere), summed over the group, and the positions added once");
}

// A step's collectives, call by call: on the tensor-parallel group, per
// block f's and g's all-reduces of M C (two each, Megatron), or the naive
// MLP's gathers, its reduce-scatter and its one all-reduce; the
// embedding's and the head's all-reduces of M C, the cross-entropy's three
// of M; on the data-parallel group, one all-reduce per unit of this rank's
// parts.
typedef struct {
    bool naive, recompute;
    int t, dp;
    double M, C, L, psi_local, nunits;
    double E;   // bytes of an activation or gradient element: 4, or 2 in bf16 (the cross-entropy's three of M stay fp32)
} Lab04Step;

static int lab04_wants(const Run *run, int rank, LedgerWant *w, const void *ctx) {
    (void)run, (void)rank;
    const Lab04Step *k = ctx;
    double M = k->M, C = k->C, L = k->L, MC = k->E * M * C;
    double R = k->recompute ? 2 : 1;   // full recomputation: each block's forward, its g's and gathers, twice
    int n = 0;
    if (k->t == 1) {   // a group of one moves nothing
    } else if (!k->naive) {
        w[n++] = (LedgerWant){LEDGER_INNER, COMM_OP_ALL_REDUCE, MC * ((2 + 2 * R) * L + 2) + 3 * 4 * M,
                              (2 + 2 * R) * L + 5,
                              k->recompute ? "per block f's all-reduces of M C and g's twice (its forward made "
                                             "again), the embedding's and the head's, and the cross-entropy's three of M"
                                           : "per block f's and g's all-reduces of M C, the embedding's and the head's, "
                                             "and the cross-entropy's three of M", 0};
    } else {
        w[n++] = (LedgerWant){LEDGER_INNER, COMM_OP_ALL_REDUCE, MC * ((2 + R) * L + 2) + 3 * 4 * M, (2 + R) * L + 5,
                              "attention's f and g (g twice with its forward made again) and the naive MLP's last "
                              "all-reduce of M C per block, the embedding's and the head's, and the cross-entropy's "
                              "three of M", 0};
        w[n++] = (LedgerWant){LEDGER_INNER, COMM_OP_ALL_GATHER, R * L * 5 * MC, R * 2 * L,
                              "the naive MLP's gathers of the hidden (M 4C) and output (M C) columns (twice with "
                              "its forward made again)", 0};
        w[n++] = (LedgerWant){LEDGER_INNER, COMM_OP_REDUCE_SCATTER, L * 4 * MC, L,
                              "the naive MLP's reduce-scatter of the hidden gradient (M 4C)", 0};
    }
    if (k->dp > 1)
        w[n++] = (LedgerWant){LEDGER_OUTER, COMM_OP_ALL_REDUCE, k->E * k->psi_local, k->nunits,
                              "the data-parallel all-reduce of this rank's parts, a unit at a time", 0};
    return n;
}

// The factors a tensor-parallel run's gradients can be off by (spec_train.c).
static int lab04_ratio_causes(const Run *run, RatioCause *out) { return tp_ratio_causes(run, "tp", out); }

static void lab04_check(Grader *g, const LabSpec *lab, const Run *run) {
    (void)lab;
    if (!check_ran(g, run, false)) return;
    check_hooks_written(g, run);
    const DumpFile *d = run->dump;
    int N = (int)dump_scalar(d, "meta/world_size", 0), t = (int)dump_scalar(d, "tp/t", 1);
    int dp = (int)dump_scalar(d, "tp/dp", 1);
    bool naive = dump_scalar(d, "tp/naive", 0) != 0;
    check_probe(g, run, t);
    check_equivalence(g, run, N);
    // The split layers' products are shared out over the group; the
    // LayerNorms run whole on each of its t ranks (lab06 splits them).
    // Full recomputation makes the blocks' forwards again here as in
    // build/ref, but the MLP's whole: its layer is one call (the kept hidden
    // activations come from it), so its second product too, M x 4C x C a
    // block, which the reference's recomputation stops before.
    const bool recompute = config_is(d, "recompute", "full");
    const double times = recompute_w2_times(run);
    check_work_why(g, run, times, recompute ? "the reference's, and each block's mlp.w2 product made again" : NULL, t,
                   true,
                   "a rank computed whole layers (their weights gathered, or a whole matrix product) where tensor "
                   "parallelism gives each of the t ranks its own columns or rows of every split layer and its own "
                   "heads of attention: 1/t of the products",
                   "the LayerNorms ran more than once per rank: tensor parallelism runs each on the whole batch on each "
                   "of the t ranks of a group, once");
    check_resident(g, run);
    check_resident_seal(g, run);
    check_step_helpers(g, run, 0, 0);
    check_live_growth(g, run);

    // Replicated tensors: every rank computes the same gradient for them,
    // so they stay equal to the bit.
    const DumpArray *sums = dump_find(d, "tp/replicated_sumsq_per_rank");
    uint64_t at = 0;
    for (uint64_t q = 1; sums && q < sums->count; q++)
        if (dump_get(sums, q) != dump_get(sums, 0) && !at) at = q;
    char fig[160], diag[700], why[200];
    const DumpArray *fd = dump_find(d, "tp/replicated_differs_name");
    const char *first = fd && fd->type == DUMP_TEXT && strcmp((const char *)fd->data, "-") ? (const char *)fd->data : NULL;
    snprintf(fig, sizeof fig, "%s%s", !sums ? "no tp/replicated_sumsq_per_rank" : !at ? "equal on every rank"
             : first ? first : "they differ", sums && at && first ? " differs" : "");
    // A replicated tensor whose first gradient was zero on some rank was
    // computed on rank 0 only; otherwise what reached it differed.
    const DumpArray *gd = dump_find(d, "tp/replicated_grad_differs_name");
    const char *gname = gd && gd->type == DUMP_TEXT ? (const char *)gd->data : "-";
    int zero_on = (int)dump_scalar(d, "tp/replicated_grad_zero_on", -1);
    if (zero_on > 0)
        snprintf(diag, sizeof diag, "%s's gradient is not computed on every rank: at the first step it was zero on "
                 "rank %d of the group, not on rank 0; dout is whole on every rank, so each computes the whole "
                 "gradient of a replicated tensor itself (ops_positions_backward for embed.wpe), with no "
                 "communication", gname, zero_on);
    else
        snprintf(diag, sizeof diag, "rank %llu's replicated tensors (LayerNorm weights, embed.wpe, attn.bo, mlp.b2) "
                 "differ from rank 0's after training: their gradients differed, because an input gradient or an "
                 "output was not summed over the group before them", (unsigned long long)at);
    grade_check(g, run, "replicated tensors equal on every rank", sums && !at, fig, "equal to the bit", diag);

    // Memory: each rank holds the replicated tensors whole and 1/t of the
    // rest; in bf16 2 + 2 bytes of parameters and gradients and 12 of the
    // fp32 master copy and moments (the same 16 in all).
    bool bf16 = config_is(d, "precision", "bf16");
    const double P = bf16 ? 2 : 4, K = bf16 ? 12 : 8;
    double psi = count_params(d), rep = psi_replicated(d, naive), local = rep + (psi - rep) / t;
    snprintf(why, sizeof why, "%.0f (psi_replicated + psi_split / t), psi_replicated = %.0f%s", P, rep,
             bf16 ? " (bf16)" : "");
    const char *more = "this rank holds more than its part: a tensor tp_split should cut is kept whole, or a "
                       "buffer is kept twice";
    char why_g[96], why_o[120];
    snprintf(why_g, sizeof why_g, "%.0f (psi_replicated + psi_split / t)", P);
    snprintf(why_o, sizeof why_o, "%.0f (psi_replicated + psi_split / t)%s", K,
             bf16 ? ": the fp32 master copy and two moments" : "");
    check_peak(g, run, MEM_PARAMS, "PARAMS", P * local, why, more);
    check_peak(g, run, MEM_GRADS, "GRADS", P * local, why_g, more);
    check_peak(g, run, MEM_OPTIM, "OPTIM", K * local, why_o, more);
    if (bf16) {
        check_peak_at_least(g, run, MEM_OPTIM, "OPTIM", K * local, why_o,
                            "the optimizer holds less than an fp32 master copy and two fp32 moments of this rank's "
                            "parts: without the master, AdamW updates the bf16 parameters themselves and every "
                            "update below half a bf16 step (2^-9 of the weight) rounds away");
        check_master_kept(g, run);
    }
    double acts = dump_scalar(d, "mem/acts_expected", 0);
    check_peak(g, run, MEM_ACTS, "ACTS", acts + 65536,
               "the split activations the harness allocates + 64 KiB (no rank holds (B, T, V) logits)",
               "the student's functions allocated activations of their own: every buffer they need is in "
               "TpBlockActs, TpHeadActs and tp->s (a rank holding whole (B, T, V) logits is what vocabulary "
               "parallelism avoids)");
    double total = 16 * local + acts + 65536, unit = largest_unit_floats(d);
    check_peak(g, run, PEAK_TOTAL, "total (tracked)", total,
               "16 bytes of this rank's parameters + the split activations + 64 KiB",
               "memory tracked beyond the parameters, their gradients and moments and the activations: a buffer "
               "kept that should not be (a whole tensor gathered, a copy for a collective), or one allocated again "
               "every step");
    check_peak(g, run, PEAK_HEAP, "heap (independent measure)", total + 4 * unit + (1 << 20),
               "16 bytes of this rank's parameters + the activations + one whole unit (gathered for the dump) + 1 MiB",
               "memory allocated around mem_alloc (malloc, calloc) shows here and nowhere else: allocate through "
               "mem_alloc, and free what you allocate");

    // Bytes: per block two all-reduces of M C each way (Megatron) or the
    // naive MLP's gathers; the embedding's all-reduce, the cross-entropy's
    // three of M and the LM head's input gradient; the data-parallel
    // all-reduce of this rank's gradients.
    double M = config_value(d, "batch", 0) / dp * config_value(d, "seq", 0), C = config_value(d, "dim", 0);
    double L = config_value(d, "layers", 0);
    const DumpArray *loss = dump_find(d, "loss");
    double steps = loss ? (double)loss->count : 0;
    double per_step = tp_bytes_per_step_recompute(naive, t, dp, M, C, (int)L, local, P, recompute).total;
    char vol[200];
    snprintf(vol, sizeof vol, naive ? "steps x (L x naive MLP and attention%s + embedding + cross-entropy + data-parallel)"
             : bf16 ? "steps x (L x %s all-reduces of M C + 2 of M C at 2 bytes + 3 of M at 4 + data-parallel 2(d-1)/d "
                      "x 2 psi_local)"
                    : "steps x (L x %s all-reduces of M C + 2 of M C + 3 of M + data-parallel 2(d-1)/d x 4 psi_local)",
             naive ? (recompute ? ", their forward twice" : "") : recompute ? "6 (g's twice: the forward again)" : "4");
    check_comm_volume(g, run, steps * per_step, steps * per_step, vol,
                      "a collective runs more often than the layers need, or over the whole world instead of the "
                      "group");
    Lab04Step k = {naive, recompute, t, dp, M, C, L, local, L + 2, P};
    static const char *const names[] = {"its tensor-parallel group", "its data-parallel group"};
    check_ledger(g, run, t, names, lab04_wants, &k);
}

// Two hidden runs of 2 to 4 ranks in t x dp grids, on a shape t splits
// (draw_tp_shape): the first quick, fp32, either MLP; the second in bf16,
// Megatron's MLP alone (the naive one is fp32's). Each with or without
// dropout and full recomputation (selective is not this lab's).
static int lab04_hidden(uint64_t seed, RunSpec *out, int max) {
    Draw d = draw_start(seed, "lab04");
    // bf16 at 4 rows a group, as the listed bf16 runs have at the least: at
    // 2 rows, fewer tokens average each gradient, and rounding moved lab06's
    // block1.ln1.b to 1.2 times the final parameters' bound (seed 11).
    static const int rows[] = {2, 4};
    static const char *const mlps[] = {"megatron", "naive"}, *const rcs[] = {"none", "full"};
    int n = 0;
    for (int k = 0; k < 2 && n < max; k++) {
        const int np = draw_int(&d, 2, 4), t = draw_divisor(&d, np);
        char shape[128];
        draw_tp_shape(&d, t, false, shape, sizeof shape);
        hidden_run(&out[n], n, np, k == 0, "--steps 3 %s --batch %d --tp %d --mlp %s --dropout %s --recompute %s%s",
                   shape, np / t * (k == 1 ? 4 : draw_pick(&d, rows, 2)), t, k == 0 ? draw_word(&d, mlps, 2) : "megatron",
                   draw_int(&d, 0, 1) ? "0.1" : "0", draw_word(&d, rcs, 2), k == 1 ? " --precision bf16" : ""), n++;
    }
    return n;
}

const LabSpec LAB04 = {
    .id = "lab04", .dir = "lab04_tensor_parallel", .student_file = "tp.c", .program = "lab04",
    .solution = "lab04_solution", .runs = LAB04_RUNS, .nruns = sizeof LAB04_RUNS / sizeof LAB04_RUNS[0],
    .ref_flags = lab04_ref_flags, .check = lab04_check, .ratio_causes = lab04_ratio_causes,
    .hidden = lab04_hidden,
};
