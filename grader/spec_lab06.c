// spec_lab06.c: what the grader runs and checks for lab06 (sequence parallelism).
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
#include "sp_budget.h"
#include "spec_train.h"
#include "specs.h"
#include "tp_layout.h"

// Two blocks, dropout 0.1 (the lab's default). t = 3 needs a shape 3 cuts,
// tokens included; np2-sp-off is tensor parallelism alone (the given
// composition), the yardstick of the memory and the bytes; np4-dp2-tp2 and
// np2-dp2-tp1 are grids (t = 1: the block's own bugs, no collective). The
// quick subset holds t = 2 (the probes, the replicated tensors), the odd t
// and both grids.
#define SMALL "--layers 2 --steps 3 "
static const RunSpec LAB06_RUNS[] = {
    {"np1", 1, SMALL, false, false},
    {"np2", 2, SMALL, true, false},
    {"np4", 4, SMALL, false, false},
    {"np3-heads6", 3, SMALL "--heads 6 --dim 96 --vocab 192 --seq 51", true, false},
    {"np2-sp-off", 2, SMALL "--sp off", false, false},
    {"np4-dp2-tp2", 4, SMALL "--tp 2", true, false},
    {"np2-dp2-tp1", 2, SMALL "--tp 1", true, false},
    // Mixed precision (bf16 parameter parts, gradients, kept activations and
    // the tokens gathered and scattered; fp32 master weights and moments),
    // against build/ref in bf16: t = 2, and the odd t with an odd share of
    // tokens (57 = 3 x 19). (At --seq 51, the fp32 run's, this seed reached
    // 1.9 times the final parameters' bound on block1.attn.bo, and still 1.31
    // once the yardstick sampled partial products rounded to bf16 (ops.h):
    // two of its 96 first-step gradients are about 1e-4, below what the bf16
    // rounding of the ranks' partial sums before the reduce-scatter moves
    // them by, so their signs flip, and Adam's first step is the gradient's
    // sign; the bulk leaves out one element of a hundred, not two. A count
    // of sign flips in a tensor of 96 is not a rounding a yardstick run can
    // be asked to reproduce element for element. See lab06's README.)
    {"np2-bf16", 2, SMALL "--precision bf16", true, false},
    {"np3-heads6-bf16", 3, SMALL "--heads 6 --dim 96 --vocab 192 --seq 57 --precision bf16", false, false},
    // Selective recomputation (the probabilities made again in the backward
    // pass), against build/ref --recompute selective: t = 2, and the odd t.
    {"np2-recompute-selective", 2, SMALL "--recompute selective", true, false},
    {"np3-heads6-recompute-selective", 3, SMALL "--heads 6 --dim 96 --vocab 192 --seq 51 --recompute selective",
     false, false},
    // Full recomputation (each block's forward again from its input in the
    // backward pass), against build/ref --recompute full; quick: its planted
    // bugs need it.
    {"np2-recompute-full", 2, SMALL "--recompute full", true, false},
};
#undef SMALL

static const char *lab06_ref_flags(const LabSpec *lab, const Run *run, char *buf, size_t len) {
    (void)lab;
    static const char *const drop[] = {"tp", "sp", NULL};
    without_flags(run, drop, buf, len);
    // lab06's dropout default is not build/ref's.
    if (!strstr(run->spec->flags, "--dropout ")) {
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, " --dropout %g", config_value(run->dump, "dropout", 0.1));
    }
    return buf;
}

double sp_layer_bytes(bool sp, double s, double b, double h, double a, double t, double E) {
    double sbh = s * b * h, att = a * s * s * b;
    return sp ? E * (2 * sbh + 14 * sbh / t + att / t) + 16 * s * b / t
              : E * (4 * sbh + 12 * sbh / t + att / t) + 16 * s * b;
}

double sp_att_bytes(double s, double b, double a, double t, double E) { return E * a * s * s * b / t; }

double sp_set_bytes(bool sp, double s, double b, double h, double a, double t, double E) {
    return sp_layer_bytes(sp, s, b, h, a, t, E) - E * s * b * h / (sp ? t : 1);
}

double sp_layer_bytes_mode(bool sp, GptRecompute rc, double s, double b, double h, double a, double t, double E) {
    if (rc == GPT_RECOMPUTE_FULL) return E * s * b * h / (sp ? t : 1);
    return sp_layer_bytes(sp, s, b, h, a, t, E) - (rc == GPT_RECOMPUTE_SELECTIVE ? sp_att_bytes(s, b, a, t, E) : 0);
}

double sp_recompute_bytes(GptRecompute rc, double block_bytes) { return rc == GPT_RECOMPUTE_FULL ? block_bytes / 2 : 0; }

SpPaperTerms sp_paper_terms(bool sp, double s, double b, double h, double a, double t) {
    double sbh = s * b * h, att = a * s * s * b, shard = sp ? t : 1;
    SpPaperTerms d = {.masks = 2 * sbh / shard, .attn_dropout = 3 * att / t, .ln_stats = 16 * s * b / shard,
                      .ln_whole = sp ? 4 * sbh - 4 * sbh / t : 0};
    return d;
}

double sp_replicated_bytes(int t, double L, double s, double h) {
    return 2.0 * (t - 1) / t * 4 * (L * 6 * h + s * h + 2 * h);
}

static void check_probe(Grader *g, const Run *run) {
    const DumpFile *d = run->dump;
    char fig[160];
    int gather = (int)dump_scalar(d, "sp/probe/gather", 1), scatter = (int)dump_scalar(d, "sp/probe/scatter", 2);
    int key = (int)dump_scalar(d, "sp/probe/dropout_t0", 2);
    grade_check(g, run, "all-gather along the tokens", gather == 0, gather ? "wrong" : "right",
                "every rank's tokens in their place",
                "sp_gather_tokens does not put rank q's tokens at [q Tt, (q + 1) Tt) of every row: comm_all_gather "
                "lays the blocks one after another, (t, B, Tt, C), and each must be moved into its tokens of every "
                "row");
    grade_check(g, run, "reduce-scatter along the tokens", scatter == 0,
                scatter == 0 ? "right" : scatter == 1 ? "splits the channels" : "wrong", "this rank's tokens, summed",
                scatter == 1 ? "sp_scatter_tokens reduce-scatters along the channels instead of the tokens: rank r "
                               "ends with channels [r C/t, (r+1) C/t) of every token, where it needs every channel "
                               "of its own tokens [r Tt, (r+1) Tt) (lay each rank's tokens together before the "
                               "reduce-scatter)"
                             : "sp_scatter_tokens does not leave this rank the sum over the group of its own tokens "
                               "[r Tt, (r+1) Tt) of every row");
    grade_check(g, run, "dropout keyed by the global token", key == 0,
                key == 0 ? "global" : key == 1 ? "local index" : "wrong", "t0 = r Tt",
                key == 1 ? "dropout is keyed by the local token index: every rank's first token is called token 0, "
                           "so each rank draws rank 0's masks; DropoutKey.t0 is the global index of this rank's "
                           "first token, r Tt"
                         : "sp_dropout_key must give the key of this rank's tokens: the seed, layer, site, step and "
                           "row0 as given, t0 = r Tt, c0 = 0, Tg = T, Cg = C");
    // The embedding on this rank's tokens: its rows of wte summed and
    // scattered, and this rank's positions added.
    int emb = (int)dump_scalar(d, "sp/probe/embed", 2);
    double emb_err = dump_scalar(d, "sp/probe/embed_err", INFINITY);
    snprintf(fig, sizeof fig, "rel. error %.1e%s", emb_err, emb == 1 ? " (the local index's positions)" : "");
    grade_check(g, run, "the embedding on this rank's tokens", emb == 0, fig, "wte[token] + wpe[r Tt + t]",
                emb == 1 ? "the embedding adds the positions of the local token index: this rank's first token is "
                           "position r Tt of its row, not 0; ops_positions_forward takes it as pos0 (and "
                           "ops_positions_backward in the backward pass)"
                         : "sp_embed_forward does not give this rank's tokens wte[token] + wpe[position]: each rank's "
                           "rows of wte (tpg_embed_forward, a partial sum over the vocabulary), reduce-scattered "
                           "along the tokens (sp_scatter_tokens), then this rank's positions added");
    // The block: with t = 1 the collectives only copy, so what differs is
    // the block's own; with attn.wo and mlp.w2 zero, dx is dout alone.
    int t = (int)dump_scalar(d, "sp/t", 1);
    const bool full = config_is(d, "recompute", "full");
    double fwd = dump_scalar(d, "sp/probe/block_fwd", INFINITY), bwd = dump_scalar(d, "sp/probe/block_bwd", INFINITY),
           resid = dump_scalar(d, "sp/probe/block_resid", INFINITY);
    int n = snprintf(fig, sizeof fig, "output %.1e, input gradient %.1e", fwd, bwd);
    if (resid > 1e-5) snprintf(fig + n, sizeof fig - n, ", residual path %.1e", resid);
    const char *diag =
        fwd > 1e-5 && t == 1
            ? "on random parameters, the block's output differs from tensor parallelism's; with t = 1 the all-gather "
              "and the reduce-scatter only copy, so the block's own arithmetic is at fault: the LayerNorm, the bias "
              "after each layer (once per token), or the residual add x + branch"
        : fwd > 1e-5
            ? "on random parameters, the block's output on this rank's tokens differs from tensor parallelism's: the "
              "LayerNorm, the all-gather before each layer, the reduce-scatter after it, the bias once or the "
              "residual add"
        : resid > 1e-5
            ? "with attn.wo and mlp.w2 zero no gradient comes back through the layers, so the block's input "
              "gradient must be dout itself (the residual path), and it is not: the residual's gradient passes to dx "
              "whole (dout copied into dx) before each LayerNorm's backward adds its own"
        : full && dump_scalar(d, "sp/probe/again", INFINITY) > 1e-5
            ? "the block's forward pass matches tensor parallelism's but its input gradient does not, and under "
              "--recompute full the forward made again in the backward pass is wrong as well (\"the block's forward "
              "made again\", below): start there"
        : t == 1
            ? "the block's forward pass matches tensor parallelism's but its input gradient does not; with t = 1 the "
              "all-gather and the reduce-scatter only copy, so the block's own backward pass is at fault: the "
              "LayerNorm's backward (its input gradient added into dx), or the gradient of mid handed from the MLP's "
              "half to attention's"
            : "the block's forward pass matches tensor parallelism's but its input gradient does not: in the backward "
              "pass the gradient of the reduce-scatter's output must be all-gathered (every rank's layer needs every "
              "token's gradient), and the layer's input gradient reduce-scattered; if they are, the LayerNorm's "
              "backward or the gradient of mid handed from the MLP's half to attention's";
    bool block_ok = fwd <= 1e-5 && bwd <= 1e-5 && resid <= 1e-5;
    grade_check(g, run, "a block against tensor parallelism alone", block_ok, fig, "rel. error <= 1e-5 each", diag);

    // Dropout's masks, once the key and the block are right: the forward's
    // against the harness's key, the backward's against the forward's.
    if (key != 0 || !block_ok) return;
    int mfwd = (int)dump_scalar(d, "sp/probe/dropout_fwd", 3), mbwd = (int)dump_scalar(d, "sp/probe/dropout_bwd", 3);
    static const char *const site[] = {"no site", "attention's site (1)", "the MLP's site (2)", "both sites"};
    int bad = mfwd ? (mfwd & 1 ? 1 : 2) : mbwd & 3;
    if (!mfwd && !mbwd) snprintf(fig, sizeof fig, "the key's, both ways");
    else snprintf(fig, sizeof fig, "the %s's differ at %s", mfwd ? "forward" : "backward", site[bad]);
    char why[400];
    snprintf(why, sizeof why, mfwd ? "with dropout on, the forward pass's mask at %s is not the one keyed by (seed, "
             "layer, site, step, global token, channel): draw each with sp_dropout_key(sp, u, site), u the block's "
             "unit, site 1 after attention and 2 after the MLP"
             : "the forward pass's masks are right, but in the backward pass the mask at %s is not the forward's: "
               "the gradient goes back through the same mask, drawn again with the same key (the same layer and "
               "site as in the forward pass)", site[bad]);
    if (!mfwd && mbwd && config_is(d, "recompute", "full") &&
        dump_scalar(d, "sp/probe/again_dropout", INFINITY) > 1e-5)
        snprintf(why, sizeof why, "the forward pass's masks are right, but under --recompute full the backward pass "
                 "at %s does not see the forward's: the forward made again in the backward pass draws other masks "
                 "(\"the block's forward made again\" below)", site[bad]);
    grade_check(g, run, "dropout's masks, forward and backward", !mfwd && !mbwd, fig,
                "the key's, the same both ways", why);
}

// Full recomputation. The probe zeroes the one set between a block's forward
// and backward pass (as the later blocks leave it holding theirs): dropout
// off, then on, the input gradient must not move, and the backward pass must
// have made products (the forward's, again). In the run, the blocks'
// forward products made again in the backward passes, all ranks together,
// against those of the forward passes: the same, once.
static void check_recompute_full(Grader *g, const Run *run) {
    const DumpFile *d = run->dump;
    double again = dump_scalar(d, "sp/probe/again", INFINITY), drop = dump_scalar(d, "sp/probe/again_dropout", INFINITY);
    double work = dump_scalar(d, "sp/probe/again_work", 0);
    char fig[160];
    snprintf(fig, sizeof fig, "input gradient %.1e, dropout on %.1e%s", again, drop,
             work > 0 ? "" : ", no forward product made in the backward pass");
    const char *diag =
        !(work > 0)
            ? "under --recompute full the harness keeps each block's input alone and gives every block the same set "
              "of activations (SpBlockActs), which holds what the last block's forward left there: the recomputation "
              "was skipped, so the backward pass read another block's activations. sp_block_backward must first run "
              "this block's forward again from x into a (sp_block_forward(sp, u, a, p, x, sp->s.again)), then the "
              "backward"
        : again > 1e-5
            ? "the backward pass made the forward's products again but its input gradient is wrong: the forward was "
              "run again from the wrong input. It must start from x, the block's input, which the harness keeps; "
              "not from a->mid (the residual after attention: in the shared set another block's) nor from the "
              "block's output (the next block's input)"
            : "with dropout off the forward pass made again is right, with dropout on it is not: the recomputed "
              "forward draws new dropout masks, so the activations the backward pass reads are another training's. "
              "Masks are not kept but drawn from their key (seed, layer, site, step, global token, channel): the "
              "forward made again must call sp_block_forward with the block's own unit u and sp->step as it was";
    grade_check(g, run, "the block's forward made again", work > 0 && again <= 1e-5 && drop <= 1e-5, fig,
                "rel. error <= 1e-5 with the shared set overwritten, dropout off and on", diag);
    // In the run: the forward passes' products made again, once.
    double fwd = dump_scalar(d, "sp/block_fwd_work", 0), made = dump_scalar(d, "sp/again_work", 0);
    double ratio = fwd > 0 ? made / fwd : 0;
    snprintf(fig, sizeof fig, "x%.3f of the forward passes' products", ratio);
    char why[500];
    snprintf(why, sizeof why, ratio < 0.995
             ? "the backward passes made x%.3f of the blocks' forward products again, where full recomputation runs "
               "each block's forward once more (the given layers count the forward products made during a backward "
               "pass): sp_block_backward does not run the block's forward again first, so it reads the activations "
               "another block left in the shared set"
             : "the backward passes made x%.3f of the blocks' forward products again, where full recomputation runs "
               "each block's forward once more, and only once", ratio);
    grade_check(g, run, "the forward's products made again in the backward pass", fabs(ratio - 1) <= 0.005, fig,
                "x1.000 +- 0.5%", why);
}

// Selective recomputation: with the shared probabilities overwritten between
// a block's forward and backward pass (as the later blocks leave them), its
// input gradient must not move: the backward pass makes them again.
static void check_recompute(Grader *g, const Run *run) {
    const DumpFile *d = run->dump;
    double again = dump_scalar(d, "sp/probe/again", INFINITY);
    char fig[96];
    snprintf(fig, sizeof fig, "input gradient %.1e", again);
    if (config_is(d, "recompute", "full")) {
        check_recompute_full(g, run);
        return;
    }
    grade_check(g, run, "attention's probabilities made again", again <= 1e-5, fig,
                "rel. error <= 1e-5 with the shared buffer overwritten",
                "under --recompute selective the given attention layer keeps its probabilities in one buffer that "
                "every block writes (tp.att_again), so at a block's backward pass it holds the last block's: "
                "sp_block_backward must make this block's again (tpg_attention_again(&sp->tp, &a->layers)) before "
                "tpg_attention_backward, not after it, and not skip it");
}

// A step's collectives, call by call, on the tensor-parallel group: with
// sequence parallelism, per block an all-gather before each split layer
// and a reduce-scatter after it, each way, and the embedding's and head's
// of M C; the cross-entropy's three all-reduces of M; the replicated
// gradients summed, at most one call per tensor. Without it, lab04's
// all-reduces. On the data-parallel group, one all-reduce per unit.
typedef struct {
    bool on;
    int t, dp;
    double M, C, L, s, psi_local, nunits;
    double E;   // bytes of an activation or gradient element: 4, or 2 in bf16 (the cross-entropy's three of M and
                // the replicated tensors' fp32 gradients stay at 4)
    bool full;  // --recompute full: each block's forward collectives once more, in its backward pass
} Lab06Step;

static int lab06_wants(const Run *run, int rank, LedgerWant *w, const void *ctx) {
    (void)run, (void)rank;
    const Lab06Step *k = ctx;
    double MC = k->E * k->M * k->C, L = k->L, h = k->C;
    int n = 0;
    if (k->t > 1 && k->on) {
        const double per = (k->full ? 6 : 4) * L + 2;   // full: a block's forward's two of each again
        w[n++] = (LedgerWant){LEDGER_INNER, COMM_OP_ALL_GATHER, MC * per, per,
                              k->full ? "the tokens gathered before each split layer (twice forward: the forward "
                                        "made again) and the embedding's and head's gradients, M C each"
                                      : "the tokens gathered before each split layer and the embedding's and head's "
                                        "gradients, M C each", 0};
        w[n++] = (LedgerWant){LEDGER_INNER, COMM_OP_REDUCE_SCATTER, MC * per, per,
                              k->full ? "the split layers' outputs (twice: the forward made again) and the gathers' "
                                        "gradients scattered, M C each"
                                      : "the split layers' outputs and the gathers' gradients scattered, M C each", 0};
        w[n++] = (LedgerWant){LEDGER_INNER, COMM_OP_ALL_REDUCE, 3 * 4 * k->M + 4 * (6 * L * h + 2 * h + k->s * h),
                              3 + 6 * L + 3,
                              "the cross-entropy's three of M and the replicated tensors' gradients, one call "
                              "per tensor at most", 0};
    } else if (k->t > 1) {
        w[n++] = (LedgerWant){LEDGER_INNER, COMM_OP_ALL_REDUCE, MC * (4 * L + 2) + 3 * 4 * k->M, 4 * L + 5,
                              "per block f's and g's all-reduces of M C, the embedding's and the head's, and the "
                              "cross-entropy's three of M", 0};
    }
    if (k->dp > 1)
        w[n++] = (LedgerWant){LEDGER_OUTER, COMM_OP_ALL_REDUCE, k->E * k->psi_local, k->nunits,
                              "the data-parallel all-reduce of this rank's parts, a unit at a time", 0};
    return n;
}

// The factors a tensor-parallel run's gradients can be off by (spec_train.c).
static int lab06_ratio_causes(const Run *run, RatioCause *out) { return tp_ratio_causes(run, "sp", out); }

// The largest rank's ACTS peak.
static double acts_peak(const DumpFile *d) {
    const DumpArray *peak = dump_find(d, "mem/peak");
    double worst = 0;
    for (uint64_t r = 0; peak && peak->ndim == 2 && r < peak->shape[0]; r++) {
        double v = dump_get(peak, r * peak->shape[1] + MEM_ACTS);
        if (v > worst) worst = v;
    }
    return worst;
}

static void lab06_check(Grader *g, const LabSpec *lab, const Run *run) {
    (void)lab;
    if (!check_ran(g, run, false)) return;
    const DumpFile *d = run->dump;
    bool on = dump_scalar(d, "sp/on", 1) != 0;
    int N = (int)dump_scalar(d, "meta/world_size", 0), t = (int)dump_scalar(d, "sp/t", 1);
    int dp = (int)dump_scalar(d, "sp/dp", 1);
    const bool selective = config_is(d, "recompute", "selective"), full = config_is(d, "recompute", "full");
    if (on) {
        check_hooks_written(g, run);
        check_probe(g, run);
        if (selective || full) check_recompute(g, run);
    }
    check_equivalence(g, run, N);
    // With sequence parallelism the LayerNorms are shared out too (T/t
    // tokens each); without it every rank of a group runs them whole.
    // Under full recomputation the reference (gpt.c) makes a block's forward
    // again up to the MLP's GELU (the block's output is used already), and
    // sp_block_forward runs whole: the MLP's second product made again is
    // this run's more, B T 4C C a block and step over all ranks.
    check_work_why(g, run, recompute_w2_times(run),
                   full ? "the reference's, and each block's mlp.w2 product made again" : NULL, on ? 1 : t, true,
                   "a rank computed whole layers where the given tensor-parallel layers give each of the t ranks its "
                   "own columns or rows: 1/t of the products",
                   "the LayerNorms ran on more than this rank's tokens: sequence parallelism gives each of the t ranks "
                   "T/t tokens of every row for the LayerNorms, dropout and the residual adds, and all-gathers the "
                   "tokens only before a split layer (tensor parallelism alone runs them whole on every rank: the "
                   "work and the activations t times over)");
    check_resident(g, run);
    check_resident_seal(g, run);
    check_step_helpers(g, run, 0, 0);
    check_live_growth(g, run);

    // The replicated tensors: each rank's gradient covers its own tokens; the
    // sum over the group keeps them equal to the bit.
    const DumpArray *differs = dump_find(d, "sp/replicated_differs_name");
    const char *name = differs && differs->type == DUMP_TEXT ? (const char *)differs->data : "?";
    if (strcmp(name, "-") == 0) name = "";
    char fig[200], diag[700];
    snprintf(fig, sizeof fig, "%s", !name[0] ? "equal on every rank" : name);
    // A replicated tensor whose first gradient was zero on some rank was
    // computed on rank 0 only; otherwise the ranks' parts were not summed.
    const DumpArray *gd = dump_find(d, "sp/replicated_grad_differs_name");
    const char *gname = gd && gd->type == DUMP_TEXT ? (const char *)gd->data : "-";
    int zero_on = (int)dump_scalar(d, "sp/replicated_grad_zero_on", -1);
    if (zero_on > 0)
        snprintf(diag, sizeof diag, "%s's gradient is not computed on every rank: at the first step it was zero on "
                 "rank %d of the group, not on rank 0; each rank computes its own tokens' part of it (for embed.wpe, "
                 "ops_positions_backward at its positions r Tt), and the sum over the group (comm_all_reduce_sum) "
                 "makes it whole on every rank", gname, zero_on);
    else
        snprintf(diag, sizeof diag, "%s differs between ranks after training: with sequence parallelism each rank "
                 "computes its gradient from its own T/t tokens only, so the gradients of the replicated tensors "
                 "(LayerNorm weights and biases, attn.bo, mlp.b2, embed.wpe, lnf) must be summed over the group "
                 "(comm_all_reduce_sum) before the optimizer", name);
    grade_check(g, run, "replicated tensors equal on every rank", differs && !name[0], fig, "equal to the bit", diag);

    // (The activations per layer are the harness's allocation for the mode,
    // the same whatever sp.c does: the lab prints them beside the paper's,
    // and no check holds them. What sp.c can change, its ACTS peak, is
    // bounded below.)
    double s = config_value(d, "seq", 0), b = config_value(d, "batch", 0) / dp, h = config_value(d, "dim", 0);
    double acts = dump_scalar(d, "mem/acts_expected", 0);
    // Under selective recomputation, an excess of about a layer's
    // probabilities (sp_budget.h) a block is the probabilities kept.
    bool bf16 = config_is(d, "precision", "bf16");
    const double E = bf16 ? 2 : 4, L = config_value(d, "layers", 0), heads = config_value(d, "heads", 0);
    const double att = sp_att_bytes(s, b, heads, t, E), excess = acts_peak(d) - acts;
    const double set = sp_set_bytes(on, s, b, h, heads, t, E);
    char acts_diag[900];
    if (full && L > 1 && excess >= (L - 1) * set - 65536)
        snprintf(acts_diag, sizeof acts_diag, "a full recomputation that keeps every block's activations anyway: "
                 "ACTS is %.0f bytes above what the harness allocates, %.2f times one block's set (%.0f bytes) for "
                 "%.0f layers; under --recompute full a block keeps its input alone (the residual stream) and every "
                 "block uses the one set the harness gives (SpBlockActs: ln1_all, ln2_all, mid, the LayerNorms' "
                 "statistics, q, k, v, the attention's probabilities and output, the MLP's hidden and GELU "
                 "outputs), made again in its backward pass: allocating a set per block keeps them all and "
                 "recomputes them besides", excess, excess / set, set, L);
    else if (selective && L > 0 && excess >= L * att - 65536)
        snprintf(acts_diag, sizeof acts_diag, "under --recompute selective the attention's probabilities are kept "
                 "per layer after all: ACTS is %.0f bytes above what the harness allocates, %.2f times a layer's "
                 "probabilities (E as^2b/t = %.0f bytes) for %.0f layers; selective recomputation keeps none of them "
                 "(a->layers.att stays NULL: the given layer writes them to the shared buffer, and the backward pass "
                 "makes them again with tpg_attention_again)", excess, excess / att, att, L);
    else
        snprintf(acts_diag, sizeof acts_diag, "the student's functions allocated activations of their own: every "
                 "buffer they need is in SpBlockActs, SpHeadActs, sp->s and the given layers' scratch");
    check_peak(g, run, MEM_ACTS, "ACTS", acts + 65536,
               selective ? "what the harness allocates for the mode (no probabilities per layer) + 64 KiB"
               : full ? "what the harness allocates for the mode (each block's input, one set for all) + 64 KiB"
                      : "what the harness allocates for the mode + 64 KiB", acts_diag);
    // Each rank's parts: in bf16 2 + 2 bytes of parameters and gradients and
    // 12 of the fp32 master copy and moments (the same 16 in all).
    double psi_local = dump_scalar(d, "sp/psi_local", 0);
    const double P = bf16 ? 2 : 4, K = bf16 ? 12 : 8;
    check_peak(g, run, MEM_PARAMS, "PARAMS", P * psi_local,
               bf16 ? "2 bytes per parameter this rank holds (bf16)" : "4 bytes per parameter this rank holds",
               "a rank holds more parameters than its parts");
    if (bf16) {
        check_peak_at_least(g, run, MEM_OPTIM, "OPTIM", K * psi_local,
                            "12 bytes per parameter this rank holds: the fp32 master copy and two moments",
                            "the optimizer holds less than an fp32 master copy and two fp32 moments of this rank's "
                            "parts: without the master, AdamW updates the bf16 parameters themselves and every "
                            "update below half a bf16 step (2^-9 of the weight) rounds away");
        check_master_kept(g, run);
    }
    check_peak(g, run, PEAK_TOTAL, "total (tracked)", 16 * psi_local + acts + 65536,
               "16 bytes of this rank's parameters + the activations of the mode + 64 KiB",
               "memory tracked beyond the parameters, their gradients and moments and the activations: a buffer "
               "kept that should not be (a send buffer for a collective, the whole sequence gathered), or one "
               "allocated again every step");
    double heap = 16 * psi_local + acts + 65536 + 4 * largest_unit_floats(d) + (1 << 20);
    check_peak(g, run, PEAK_HEAP, "heap (independent measure)", heap,
               "16 bytes of this rank's parameters + the activations + one whole unit (gathered for the dump) + 1 MiB",
               "memory allocated around mem_alloc (malloc, calloc) shows here and nowhere else: allocate through "
               "mem_alloc, and free what you allocate");

    // Bytes: tensor parallelism's (lab04's formula), plus with sequence
    // parallelism the replicated gradients summed over the group.
    double M = b * s;
    const DumpArray *loss = dump_find(d, "loss");
    double steps = loss ? (double)loss->count : 0;
    // In bf16 the tokens and the data-parallel gradients move at 2 bytes an
    // element; the cross-entropy's parts and the replicated tensors' fp32
    // gradients at 4.
    const TpBytes tpb = tp_bytes_per_step_typed(false, t, dp, M, h, (int)L, psi_local, P);
    // Under full recomputation the blocks' forward collectives once more.
    const GptRecompute rc = full ? GPT_RECOMPUTE_FULL : selective ? GPT_RECOMPUTE_SELECTIVE : GPT_RECOMPUTE_NONE;
    double per_step = tpb.total + (on ? sp_replicated_bytes(t, L, s, h) : 0) + sp_recompute_bytes(rc, tpb.block);
    check_comm_volume(g, run, steps * per_step, steps * per_step,
                      on && full ? "steps x (lab04's tensor-parallel bytes + the replicated gradients' all-reduce + "
                                   "the blocks' forward collectives made again)"
                      : on ? bf16 ? "steps x (lab04's tensor-parallel bytes at 2 an element + the replicated fp32 "
                                  "gradients' all-reduce)"
                                : "steps x (lab04's tensor-parallel bytes + the replicated gradients' all-reduce)"
                         : bf16 ? "steps x lab04's tensor-parallel bytes at 2 an element"
                                : "steps x lab04's tensor-parallel bytes",
                      "more bytes than tensor parallelism moves: an all-reduce where a reduce-scatter or an "
                      "all-gather belongs, or a tensor gathered twice");
    Lab06Step k = {on, t, dp, M, h, L, s, psi_local, L + 2, P, full};
    static const char *const names[] = {"its tensor-parallel group", "its data-parallel group"};
    check_ledger(g, run, t, names, lab06_wants, &k);
}

// Two hidden runs of 2 to 4 ranks in t x dp grids, on a shape t splits,
// tokens included (draw_tp_shape: an odd share of them a rank): the first
// quick and fp32, the second bf16; sequence parallelism on or off (tensor
// parallelism alone), each recomputation its mode allows (full is the
// student's, with --sp on alone), at the lab's dropout.
static int lab06_hidden(uint64_t seed, RunSpec *out, int max) {
    Draw d = draw_start(seed, "lab06");
    // bf16 at 4 rows a group, as the listed bf16 runs have at the least: at
    // 2 rows, fewer tokens average each gradient, and rounding moved lab06's
    // block1.ln1.b to 1.2 times the final parameters' bound (seed 11).
    static const int rows[] = {2, 4};
    static const char *const rcs[] = {"none", "selective", "full"};
    int n = 0;
    for (int k = 0; k < 2 && n < max; k++) {
        const int np = draw_int(&d, 2, 4), t = draw_divisor(&d, np);
        const bool on = draw_int(&d, 0, 3) > 0;
        char shape[128];
        draw_tp_shape(&d, t, on, shape, sizeof shape);
        hidden_run(&out[n], n, np, k == 0, "--steps 3 %s --batch %d --tp %d --sp %s --recompute %s%s", shape,
                   np / t * (k == 1 ? 4 : draw_pick(&d, rows, 2)), t, on ? "on" : "off", draw_word(&d, rcs, on ? 3 : 2),
                   k == 1 ? " --precision bf16" : ""), n++;
    }
    return n;
}

const LabSpec LAB06 = {
    .id = "lab06", .dir = "lab06_sequence_parallel", .student_file = "sp.c", .program = "lab06",
    .solution = "lab06_solution", .runs = LAB06_RUNS, .nruns = sizeof LAB06_RUNS / sizeof LAB06_RUNS[0],
    .ref_flags = lab06_ref_flags, .check = lab06_check, .ratio_causes = lab06_ratio_causes,
    .hidden = lab06_hidden,
};
