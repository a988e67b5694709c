// report_given.c: what lab06's run reports at its end (report_given.h).
#include "report_given.h"

#include <stdio.h>

#include "comm.h"
#include "figure.h"
#include "harness.h"
#include "sp.h"
#include "sp_budget.h"

// Korthikanti et al. (2022), 16-bit activations with dropout's masks kept.
double lab06_paper(bool sp, GptRecompute rc, double s, double b, double h, double a, double t) {
    double sbh = s * b * h, att = rc == GPT_RECOMPUTE_NONE ? 5 * a * s / h : 0;
    if (rc == GPT_RECOMPUTE_FULL) return sp ? 2 * sbh / t : 2 * sbh;   // the block's input alone
    return sp ? sbh * (34 + att) / t : sbh * (10 + 24 / t + att / t);
}

// The table: a block's kept activations and its input per rank, allocated
// (measured: model_given.c's measure_layer), our formula and the paper's;
// in bf16 (E = 2) the paper's terms that ours lacks or adds, one by one, so
// that the paper's figure minus them is ours to the byte.
void lab06_print_layers(const SpModel *sm, double S, double Bd, double H, double A, int t, double E, bool on) {
    char b1[32], b2[32], b3[32], b4[32];
    const GptRecompute rc = sm->sp->recompute;
    const bool bf16 = E == 2, sel = rc == GPT_RECOMPUTE_SELECTIVE, full = rc == GPT_RECOMPUTE_FULL;
    print0("\nactivations per layer and rank (a block's kept activations and its input), s = %.0f tokens, b = %.0f "
           "rows, h = %.0f, a = %.0f heads, t = %d%s:\n", S, Bd, H, A, t,
           sel ? ", selective recomputation (the probabilities not kept)"
           : full ? ", full recomputation (the block's input alone; one set for the block running)" : "");
    print0("  %-22s %10s %10s %14s\n", "", "allocated", bf16 ? "ours (bf16)" : "ours (fp32)", "paper (16-bit)");
    for (int k = 0; k < 3; k++) {
        bool sp_k = k == 1, one = k == 2;
        double tk = one ? 1 : t, allocated = one ? sp_layer_bytes_mode(false, rc, S, Bd, H, A, 1, E)
                                                 : sm->layer_bytes[k];
        double ours = sp_layer_bytes_mode(sp_k, rc, S, Bd, H, A, tk, E), paper = lab06_paper(sp_k, rc, S, Bd, H, A, tk);
        char formula[64];
        if (full) snprintf(formula, sizeof formula, "%.0f sbh%s", E, sp_k ? "/t" : "");
        else
            snprintf(formula, sizeof formula, "%.0f (%s) + %s", E,
                     sel ? (sp_k ? "2sbh + 14sbh/t" : one ? "16sbh" : "4sbh + 12sbh/t")
                         : (sp_k ? "2sbh + 14sbh/t + as^2b/t" : one ? "16sbh + as^2b" : "4sbh + 12sbh/t + as^2b/t"),
                     sp_k ? "16sb/t" : "16sb");
        print0("  %-22s %10s %10s %14s   %s%s\n", one ? "one device" : sp_k ? "tensor + sequence" : "tensor parallel only",
               one ? "" : core_fmt_bytes(allocated, b1, 32), core_fmt_bytes(ours, b2, 32),
               core_fmt_bytes(paper, b3, 32), formula, !one && sp_k == on ? "   <- this run" : "");
        if (!bf16 || full) continue;   // (full: both keep the block's input alone, 2 bytes an element)
        SpPaperTerms d = sp_paper_terms(sp_k, S, Bd, H, A, tk);
        if (sel) d.attn_dropout = 0;   // neither keeps anything after the softmax
        char b5[32];
        print0("  %-22s paper - ours = %s masks + %s attention dropout - %s LayerNorm statistics%s%s = %s\n", "",
               core_fmt_bytes(d.masks, b1, 32), core_fmt_bytes(d.attn_dropout, b2, 32),
               core_fmt_bytes(d.ln_stats, b3, 32), sp_k ? " - LayerNorm outputs whole " : "",
               sp_k ? core_fmt_bytes(d.ln_whole, b4, 32) : "", core_fmt_bytes(paper - ours, b5, 32));
    }
    if (bf16 && !full)
        print0("  (masks: the paper keeps dropout's two masks, 1 byte an element, sbh each (/t with SP); ours draws "
               "them again from their key. Attention dropout: the paper's mask and output after the softmax, "
               "3as^2b/t; ours has none. LayerNorm statistics: ours keeps each LayerNorm's mean and rstd in fp32, "
               "16sb (/t with SP); the paper leaves them out. LayerNorm outputs whole: with SP ours keeps the "
               "all-gathered outputs, 4sbh, where the paper keeps this rank's tokens, 4sbh/t, and gathers them again "
               "in the backward pass.)\n");
}

// Korthikanti et al.'s table 2, the three rows at this run's t, ours beside
// them: ours keeps what the README's table lists; selective drops the
// probabilities (E as^2b/t), full keeps the block's input alone. The run's
// own row measured (model_given.c's measure_layer).
void lab06_print_recompute(const SpModel *sm, double S, double Bd, double H, double A, int t, double E, bool on,
                           const Lab06Cost *cost) {
    char b1[32], b2[32], b3[32];
    const GptRecompute rc = sm->sp->recompute;
    print0("\nrecomputation, a layer's activations per rank (%s, t = %d, %s):\n", on ? "tensor + sequence" :
           "tensor parallel only", t, E == 2 ? "bf16" : "fp32");
    print0("  %-10s %10s %12s %14s\n", "", "measured", "ours", "paper (16-bit)");
    static const char *const name[] = {"none", "selective", "full"};
    static const char *const paper_sp[] = {"(34sbh + 5as^2b)/t", "34sbh/t", "2sbh/t"};
    static const char *const paper_tp[] = {"10sbh + (24sbh + 5as^2b)/t", "10sbh + 24sbh/t", "2sbh"};
    for (int k = 0; k < 3; k++) {
        GptRecompute rk = (GptRecompute)k;
        double ours = sp_layer_bytes_mode(on, rk, S, Bd, H, A, t, E);
        bool this_run = rk == rc;
        print0("  %-10s %10s %12s %14s   paper %s%s\n", name[k], this_run ? core_fmt_bytes(sm->layer_bytes[on], b1, 32)
               : "", core_fmt_bytes(ours, b2, 32), core_fmt_bytes(lab06_paper(on, rk, S, Bd, H, A, t), b3, 32),
               on ? paper_sp[k] : paper_tp[k], this_run ? "   <- this run" : k == 2 ? "   (the block's input alone)" : "");
    }
    const double w = cost->again_work, work = cost->work;
    if (rc == GPT_RECOMPUTE_SELECTIVE)
        print0("  the cost: the probabilities made again, %.4g M multiply-adds of the steps' %.4g M (%.1f%%), "
               "%.1f ms of the steps' %.1f ms (%.1f%%, wall clock)\n", w / 1e6, work / 1e6, 100 * w / work,
               cost->again_s * 1e3, cost->seconds * 1e3, 100 * cost->again_s / cost->seconds);
    if (rc == GPT_RECOMPUTE_FULL) {
        print0("  the cost: the blocks' forward passes made again, %.0f M multiply-adds (x%.3f of their forward "
               "passes' %.0f M) of the steps' %.0f M: %.1f%% of the step, %.1f%% more than without\n", w / 1e6,
               w / cost->fwd_work, cost->fwd_work / 1e6, work / 1e6, 100 * w / work, 100 * w / (work - w));
        print0("  their products took %.1f ms of the steps' %.1f ms (%.1f%%, wall clock; their LayerNorms, dropout "
               "and collectives besides: --recompute-figure times the whole)\n", cost->again_s * 1e3,
               cost->seconds * 1e3, 100 * cost->again_s / cost->seconds);
    }
}

void lab06_print_more(void *ctx) {
    const Lab06End *e = ctx;
    if (e->differs[0]) print0("the replicated tensor %s differs between ranks\n", e->differs);
}

void lab06_dump_more(DumpWriter *dw, void *ctx) {
    Lab06End *e = ctx;
    Comm *c = comm_world();
    SpProbe *probe = e->probe;
    dump_scalar_i64(dw, "sp/on", e->on);
    dump_scalar_i64(dw, "sp/t", e->t);
    dump_scalar_i64(dw, "sp/dp", e->dp);
    dump_scalar_f64(dw, "sp/acts_layer_off", comm_max_double(c, e->sm->layer_bytes[0]));
    dump_scalar_f64(dw, "sp/acts_layer_on", comm_max_double(c, e->sm->layer_bytes[1]));
    dump_scalar_f64(dw, "sp/psi_local", comm_max_double(c, e->psi_local));
    dump_text(dw, "sp/replicated_differs_name", e->differs[0] ? e->differs : "-");
    dump_text(dw, "sp/replicated_grad_differs_name", e->grad_differs[0] ? e->grad_differs : "-");
    dump_scalar_i64(dw, "sp/replicated_grad_zero_on", e->grad_zero_on);
    dump_scalar_i64(dw, "sp/probe/gather", probe->gather);
    dump_scalar_i64(dw, "sp/probe/scatter", probe->scatter);
    dump_scalar_i64(dw, "sp/probe/dropout_t0", probe->dropout_t0);
    dump_scalar_i64(dw, "sp/probe/embed", probe->embed);
    dump_scalar_f64(dw, "sp/probe/embed_err", probe->embed_err);
    dump_scalar_f64(dw, "sp/probe/block_fwd", comm_max_double(c, probe->block_fwd));
    dump_scalar_f64(dw, "sp/probe/block_bwd", comm_max_double(c, probe->block_bwd));
    dump_scalar_f64(dw, "sp/probe/block_resid", comm_max_double(c, probe->block_resid));
    dump_scalar_f64(dw, "sp/probe/again", comm_max_double(c, probe->again));
    dump_scalar_f64(dw, "sp/probe/again_dropout", comm_max_double(c, probe->again_dropout));
    dump_scalar_f64(dw, "sp/probe/again_work", comm_max_double(c, probe->again_work));
    // The products of the blocks' forward passes and those made again in
    // the backward passes, all ranks together.
    dump_scalar_f64(dw, "sp/block_fwd_work", comm_sum_double(c, e->block_fwd_work));
    dump_scalar_f64(dw, "sp/again_work", comm_sum_double(c, e->again_work));
    // Bits, or'ed over ranks (the groups' own are already).
    for (int bit = 1; bit <= 2; bit *= 2) {
        if (comm_max_double(c, probe->dropout_fwd & bit) > 0) probe->dropout_fwd |= bit;
        if (comm_max_double(c, probe->dropout_bwd & bit) > 0) probe->dropout_bwd |= bit;
    }
    dump_scalar_i64(dw, "sp/probe/dropout_fwd", probe->dropout_fwd);
    dump_scalar_i64(dw, "sp/probe/dropout_bwd", probe->dropout_bwd);
    dump_scalar_f64(dw, "mem/acts_expected", comm_max_double(c, e->acts_expected));
}

void lab06_draw_figure(const char *path, const Args *a, const SpModel *sm, int N, int t, int rows, bool on,
                       double E) {
    double S = a->seq, Bd = rows, H = a->dim, A = a->heads;
    bool unfinished = harness_any_unfinished();
    const GptRecompute rc = sm->sp->recompute;
    char title[300], tp_label[32], sp_label[40];
    snprintf(title, sizeof title, "lab06: activations per layer and rank, s = %d, b = %d, h = %d, a = %d, t = %d "
             "(%d ranks, sequence parallelism %s)%s", a->seq, rows, a->dim, a->heads, t, N, on ? "on" : "off",
             unfinished ? "; an unfinished sp.c (these are the design's figures: the same)" : "");
    snprintf(tp_label, sizeof tp_label, "TP, t = %d", t);
    snprintf(sp_label, sizeof sp_label, "TP + SP, t = %d", t);
    FigGroup groups[3] = {
        {"one device", {sp_layer_bytes_mode(false, rc, S, Bd, H, A, 1, E), lab06_paper(false, rc, S, Bd, H, A, 1)}},
        {tp_label, {sm->layer_bytes[0], lab06_paper(false, rc, S, Bd, H, A, t)}},
        {sp_label, {sm->layer_bytes[1], lab06_paper(true, rc, S, Bd, H, A, t)}},
    };
    const char *series[] = {E == 2 ? "ours: what this code allocates (bf16)" : "ours: what this code allocates (fp32)",
                            "the paper's (16-bit)"};
    FILE *f = fig_open(path, 900, 360, title);
    fig_bars(f, 20, 40, 860, 300, "a block's kept activations and its input, per rank", series, 2, groups, 3, NULL);
    fig_close(f, path);
    print0("wrote %s\n", path);
}

// --recompute-figure: the three modes measured one after another on fresh
// models (spm_measure_mode), each's ACTS peak against its time per pass,
// the paper's activations for the model's L layers beside each.
void lab06_afterwards(void *ctx) {
    const Lab06End *e = ctx;
    if (!e->rc_figure) return;
    const Sp *sp = e->sp;
    const TpShard *tp = &sp->tp;
    const GptConfig *cfg = &e->model->cfg;
    const double L = cfg->L;
    enum { PASSES = 9 };
    static const char *const name[] = {"none", "selective", "full"};
    SpModeMeasure mm[3];
    FigPoint pts[6];
    char labels[6][48], b1[32], b2[32], b3[32];
    print0("\nrecomputation measured (--recompute-figure): fresh models on the trained parameters and the last batch, "
           "forward and backward passes with no optimizer, the peak over one, the time the median of %d (the "
           "modes in turn); per rank, the group's largest:\n", PASSES);
    print0("  %-10s %12s %14s %12s %12s %16s\n", "", "peak ACTS", "paper, L layers", "ms a pass", "M products",
           "made again");
    spm_measure_modes(e->model, sp, e->bf16, e->params, e->grads, e->x, e->y, e->step, e->row0, e->scale, PASSES, mm);
    for (int k = 0; k < 3; k++) {
        mm[k].acts_peak = comm_max_double(comm_world(), mm[k].acts_peak);
        double paper = L * lab06_paper(true, (GptRecompute)k, tp->T, tp->B, tp->C, tp->NH, tp->t);
        print0("  %-10s %12s %14s %12.1f %12.4g %9.4g M %4.1f%%   time x%.2f of none's\n", name[k],
               core_fmt_bytes(mm[k].acts_peak, b1, 32), core_fmt_bytes(paper, b2, 32), mm[k].seconds * 1e3,
               mm[k].work / 1e6, mm[k].again_work / 1e6, mm[k].work > 0 ? 100 * mm[k].again_work / mm[k].work : 0,
               mm[k].seconds / mm[0].seconds);
        snprintf(labels[2 * k], sizeof labels[0], "%s, measured", name[k]);
        snprintf(labels[2 * k + 1], sizeof labels[0], "%s, paper", name[k]);
        pts[2 * k] = (FigPoint){mm[k].seconds * 1e3, mm[k].acts_peak, 0, labels[2 * k]};
        pts[2 * k + 1] = (FigPoint){mm[k].seconds * 1e3, paper, 1, labels[2 * k + 1]};
    }
    if (comm_rank(comm_world()) == 0) {
        char title[300];
        snprintf(title, sizeof title, "lab06: activation memory against time, recomputation none / selective / full, "
                 "s = %d, b = %d, h = %d, a = %d, L = %d, t = %d, %s%s", tp->T, tp->B, tp->C, tp->NH, cfg->L, tp->t,
                 e->bf16 ? "bf16" : "fp32",
                 harness_any_unfinished() ? "; an unfinished sp.c (its figures are not a recomputation's)" : "");
        char s0[96];
        snprintf(s0, sizeof s0, "measured: peak ACTS per rank (%s, scratch included)", e->bf16 ? "bf16" : "fp32");
        const char *series[] = {s0, "the paper's: L layers' activations per rank (16-bit)"};
        FILE *f = fig_open(e->rc_figure, 900, 420, title);
        fig_points(f, 20, 40, 860, 370, "activations per rank against the time of a forward and backward pass",
                   "ms a forward and backward pass", series, 2, pts, 6);
        fig_close(f, e->rc_figure);
    }
    print0("  full against none: %s less at the peak for x%.2f the time; selective: %s less for x%.2f\n",
           core_fmt_bytes(mm[0].acts_peak - mm[2].acts_peak, b1, 32), mm[2].seconds / mm[0].seconds,
           core_fmt_bytes(mm[0].acts_peak - mm[1].acts_peak, b3, 32), mm[1].seconds / mm[0].seconds);
    print0("wrote %s\n", e->rc_figure);
}
