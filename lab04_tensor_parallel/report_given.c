// report_given.c: what lab04's run reports at its end (report_given.h).
#include "report_given.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "figure.h"
#include "harness.h"
#include "tp.h"


void lab04_print_more(void *ctx) {
    const Lab04End *e = ctx;
    int N = comm_size(comm_world());
    bool rep_equal = true;
    for (int q = 1; q < N; q++) rep_equal &= e->rep_all[q] == e->rep_all[0];
    if (!rep_equal || e->differs[0])
        print0("the replicated tensors (LayerNorms, wpe, the biases after g) differ between ranks, %s first\n",
               e->differs[0] ? e->differs : "?");
}

void lab04_dump_more(DumpWriter *dw, void *ctx) {
    const Lab04End *e = ctx;
    Comm *c = comm_world();
    const Tp *tp = e->tm->tp;
    uint64_t nr = (uint64_t)comm_size(c);
    dump_f64(dw, "tp/replicated_sumsq_per_rank", e->rep_all, 1, &nr);
    dump_text(dw, "tp/replicated_differs_name", e->differs[0] ? e->differs : "-");
    dump_text(dw, "tp/replicated_grad_differs_name", e->grad_differs[0] ? e->grad_differs : "-");
    dump_scalar_i64(dw, "tp/replicated_grad_zero_on", e->grad_zero_on);
    dump_scalar_i64(dw, "tp/t", tp->t);
    dump_scalar_i64(dw, "tp/dp", comm_size(c) / tp->t);
    dump_scalar_i64(dw, "tp/naive", tp->naive);
    dump_scalar_f64(dw, "tp/psi_local", comm_max_double(c, (double)e->tm->L.local));
    dump_scalar_f64(dw, "tp/rows", tp->B);
    dump_scalar_f64(dw, "mem/acts_expected", comm_max_double(c, e->acts_expected));
    const TpProbe *probe = e->probe;
    const struct {
        const char *name;
        double v;
    } pr[] = {{"attn_bias", probe->attn_bias},         {"mlp_bias", probe->mlp_bias},
              {"attn_out_agree", probe->attn_out_agree}, {"mlp_out_agree", probe->mlp_out_agree},
              {"attn_dx_agree", probe->attn_dx_agree},   {"mlp_dx_agree", probe->mlp_dx_agree},
              {"head_dx_agree", probe->head_dx_agree},   {"head_loss_err", probe->head_loss_err},
              {"embed_err", probe->embed_err},           {"ce_max", probe->ce_max},
              {"ce_sumexp", probe->ce_sumexp},           {"ce_target", probe->ce_target}};
    for (size_t i = 0; i < sizeof pr / sizeof pr[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "tp/probe/%s", pr[i].name);
        // The worst over groups (the figures are already each group's worst).
        double v = pr[i].v;
        bool agree = strstr(pr[i].name, "agree") != NULL, bias = strstr(pr[i].name, "bias") != NULL;
        if (agree) v = -comm_max_double(c, -v);
        else if (bias) {
            double hi = comm_max_double(c, v), lo = -comm_max_double(c, -v);
            v = fabs(hi - 1) >= fabs(lo - 1) ? hi : lo;
        } else v = comm_max_double(c, v);
        dump_scalar_f64(dw, name, v);
    }
}


void lab04_draw_figure(const Lab04Figure *g) {
    const Args *a = g->a;
    bool naive = g->naive;
    int t = g->t, dp = g->dp;
    double M = g->M, psi = g->psi, rep = g->rep;
    // mlp.b2 is split with mlp.w2's columns in the naive MLP.
    double rep_mega = naive ? rep + a->layers * (double)a->dim : rep, rep_naive = rep_mega - a->layers * (double)a->dim;
    static const int ts[] = {1, 2, 4, 8};
    FigGroup bytes[4], mem_g[4];
    static char labels[4][16];
    int at = -1;
    for (int i = 0; i < 4; i++) {
        snprintf(labels[i], sizeof labels[i], "t = %d", ts[i]);
        double lm = rep_mega + (psi - rep_mega) / ts[i], ln = rep_naive + (psi - rep_naive) / ts[i];
        bytes[i] = (FigGroup){labels[i],
                              {tp_bytes_per_step_recompute(true, ts[i], dp, M, a->dim, a->layers, ln, 4, g->recompute).total,
                               tp_bytes_per_step_recompute(false, ts[i], dp, M, a->dim, a->layers, lm, 4, g->recompute).total}};
        mem_g[i] = (FigGroup){labels[i], {16 * ln, 16 * lm}};
        if (ts[i] == t) at = i;
    }
    bool unfinished = harness_any_unfinished();
    char title[300];
    snprintf(title, sizeof title, "lab04: %s MLP, %d ranks (t = %d, %d data-parallel), %d blocks of %d channels, "
             "M = %.0f rows a group%s%s", naive ? "the naive" : "Megatron's", g->N, t, dp, a->layers, a->dim, M,
             g->recompute ? ", full recomputation" : "", unfinished ? " (an unfinished tp.c: its point is not tensor parallelism's yet)" : "");
    static const char *const series[] = {"naive MLP (formula)", "Megatron (formula)"};
    FigMark mb = {at, naive ? 0 : 1, g->sent, "this run, measured:"};
    FigMark mm = {at, naive ? 0 : 1, g->held, "this run, measured:"};
    FILE *f = fig_open(g->path, 900, 620, title);
    fig_bars(f, 20, 40, 860, 280, "bytes each rank sends per step (bus bytes)", series, 2, bytes, 4, &mb);
    fig_bars(f, 20, 330, 860, 280, "parameters, gradients and moments per rank (16 bytes a parameter it holds)",
             series, 2, mem_g, 4, &mm);
    fig_close(f, g->path);
    print0("wrote %s\n", g->path);
}
