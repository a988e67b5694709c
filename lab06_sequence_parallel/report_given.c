// report_given.c: what lab06's run reports at its end (report_given.h).
#include "report_given.h"

#include <stdio.h>

#include "comm.h"
#include "figure.h"
#include "harness.h"
#include "sp.h"
#include "sp_budget.h"

// Korthikanti et al. (2022), 16-bit activations with dropout's masks kept.
double lab06_paper(bool sp, double s, double b, double h, double a, double t) {
    double sbh = s * b * h;
    return sp ? sbh * (34 + 5 * a * s / h) / t : sbh * (10 + 24 / t + 5 * a * s / (h * t));
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
    // Bits, or'ed over ranks (the groups' own are already).
    for (int bit = 1; bit <= 2; bit *= 2) {
        if (comm_max_double(c, probe->dropout_fwd & bit) > 0) probe->dropout_fwd |= bit;
        if (comm_max_double(c, probe->dropout_bwd & bit) > 0) probe->dropout_bwd |= bit;
    }
    dump_scalar_i64(dw, "sp/probe/dropout_fwd", probe->dropout_fwd);
    dump_scalar_i64(dw, "sp/probe/dropout_bwd", probe->dropout_bwd);
    dump_scalar_f64(dw, "mem/acts_expected", comm_max_double(c, e->acts_expected));
}

void lab06_draw_figure(const char *path, const Args *a, const SpModel *sm, int N, int t, int rows, bool on) {
    double S = a->seq, Bd = rows, H = a->dim, A = a->heads;
    bool unfinished = harness_any_unfinished();
    char title[300], tp_label[32], sp_label[40];
    snprintf(title, sizeof title, "lab06: activations per layer and rank, s = %d, b = %d, h = %d, a = %d, t = %d "
             "(%d ranks, sequence parallelism %s)%s", a->seq, rows, a->dim, a->heads, t, N, on ? "on" : "off",
             unfinished ? "; an unfinished sp.c (these are the design's figures: the same)" : "");
    snprintf(tp_label, sizeof tp_label, "TP, t = %d", t);
    snprintf(sp_label, sizeof sp_label, "TP + SP, t = %d", t);
    FigGroup groups[3] = {
        {"one device", {sp_layer_bytes(false, S, Bd, H, A, 1), lab06_paper(false, S, Bd, H, A, 1)}},
        {tp_label, {sm->layer_bytes[0], lab06_paper(false, S, Bd, H, A, t)}},
        {sp_label, {sm->layer_bytes[1], lab06_paper(true, S, Bd, H, A, t)}},
    };
    static const char *const series[] = {"ours: what this code allocates (fp32)", "the paper's (16-bit)"};
    FILE *f = fig_open(path, 900, 360, title);
    fig_bars(f, 20, 40, 860, 300, "a block's kept activations and its input, per rank", series, 2, groups, 3, NULL);
    fig_close(f, path);
    print0("wrote %s\n", path);
}
