// main.c: lab04's harness. Students do not edit it.
//
//   mpirun -np 4 build/lab04 [--tp t] [--mlp megatron|naive]
//
// Trains the course's GPT with its layers cut by width over t ranks (the
// student's tp.c), on a grid of N / t data-parallel groups when t < N: a
// tensor-parallel group of t consecutive ranks holds one model between
// them, and each group of them takes its own rows of the batch. Every step
// prints the loss beside single-device training's; at the end, each rank's
// parameters, bytes and activations beside their formulas.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "comm.h"
#include "core.h"
#include "data.h"
#include "dump.h"
#include "figure.h"
#include "gpt.h"
#include "harness.h"
#include "mem.h"
#include "model_given.h"
#include "ops.h"
#include "optim.h"
#include "tp.h"
#include "trace.h"
#include "verdict.h"

// ---- the student's unfinished functions ------------------------------------

static const char *const HOOKS[] = {"tp_split", "tp_naive_mlp_forward", "tp_naive_mlp_backward", "tp_f_backward",
                                    "tp_g_forward", "tp_mlp_forward", "tp_mlp_backward", "tp_attention_forward",
                                    "tp_attention_backward", "tp_embed_forward", "tp_embed_backward",
                                    "tp_head_forward", "tp_head_backward"};

void lab_todo(const char *function) { harness_todo(function); }

// ---- the run's end: lab04's own lines, dump entries and figure ---------------

typedef struct {
    const TpModel *tm;
    Comm *tpc;
    const TpProbe *probe;
    double acts_expected;
    char grad_differs[96];   // a replicated gradient that differs over the group (first step), or ""
    int grad_zero_on;        // and a rank where it is zero, or -1
    char differs[96];        // a replicated parameter that differs at the end, or ""
    double *rep_all;         // (N) each rank's sum of squares of its replicated parameters
} Lab04End;

static void print_more(void *ctx) {
    const Lab04End *e = ctx;
    int N = comm_size(comm_world());
    bool rep_equal = true;
    for (int q = 1; q < N; q++) rep_equal &= e->rep_all[q] == e->rep_all[0];
    if (!rep_equal || e->differs[0])
        print0("the replicated tensors (LayerNorms, wpe, the biases after g) differ between ranks, %s first\n",
               e->differs[0] ? e->differs : "?");
}

static void dump_more(DumpWriter *dw, void *ctx) {
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

// The figure (--figure): the formulas of both MLPs at t = 1, 2, 4, 8 for
// this run's shape, and this run's measured bytes and memory at its own t.
typedef struct {
    const char *path;
    bool naive;
    int N, t, dp;
    const Args *a;
    double M, psi, rep, sent, held;   // held: parameters, gradients and moments, the largest rank's peak
} Lab04Figure;

static void draw_figure(const Lab04Figure *g) {
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
        bytes[i] = (FigGroup){labels[i], {tp_bytes_per_step(true, ts[i], dp, M, a->dim, a->layers, ln).total,
                                          tp_bytes_per_step(false, ts[i], dp, M, a->dim, a->layers, lm).total}};
        mem_g[i] = (FigGroup){labels[i], {16 * ln, 16 * lm}};
        if (ts[i] == t) at = i;
    }
    bool unfinished = false;
    for (size_t k = 0; k < sizeof HOOKS / sizeof HOOKS[0]; k++) unfinished |= harness_unfinished(HOOKS[k]);
    char title[300];
    snprintf(title, sizeof title, "lab04: %s MLP, %d ranks (t = %d, %d data-parallel), %d blocks of %d channels, "
             "M = %.0f rows a group%s", naive ? "the naive" : "Megatron's", g->N, t, dp, a->layers, a->dim, M,
             unfinished ? " (an unfinished tp.c: its point is not tensor parallelism's yet)" : "");
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

// ---- main ------------------------------------------------------------------

int main(int argc, char **argv) {
    // The hooks are fixed before any student code runs (harness.h).
    harness_hooks(HOOKS, (int)(sizeof HOOKS / sizeof HOOKS[0]));
    Args a = args_defaults();
    int tp_size = 0;
    const char *mlp = "megatron";
    bool no_ref = false;
    const char *figure = NULL;
    ArgExtra extras[] = {
        {"figure", ARG_OUTPUT, &figure, "draw the bytes and the parameters per rank of both MLPs against t, "
         "this run's measured beside them, as SVG", 1, 0, NULL, NULL},
        {"tp", ARG_INT, &tp_size, "tensor-parallel ranks per group (default: all of them); the rest form "
         "data-parallel groups", 1, 1 << 16, NULL, NULL},
        {"mlp", ARG_CHOICE, &mlp, "the MLP: Megatron's column-then-row split, or the lecture's naive one",
         0, 0, "megatron|naive", NULL},
        {"no-ref", ARG_FLAG, &no_ref, "skip the single-device reference run", 0, 0, NULL, NULL},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    args_parse(&a, argc, argv,
               "lab04: tensor parallelism (the lecture's naive split, Megatron's f and g, vocabulary-parallel "
               "cross-entropy), checked against single-device training.",
               extras);
    Comm *c = harness_start(&a, &argc, &argv);
    int N = comm_size(c), r = comm_rank(c);
    int t = tp_size ? tp_size : N;
    tp_check_shape(&a, t, N, false);
    int dp = N / t, dp_rank = r / t;
    int row0, rows;   // this data-parallel group's rows of the global batch
    data_rank_rows(a.batch, dp, dp_rank, &row0, &rows);
    bool naive = strcmp(mlp, "naive") == 0;

    // Refused before any of it is allocated when it cannot fit (an upper
    // estimate: a whole replica per rank) and, first, the reference.
    harness_check_fits(&a, rows, !no_ref);

    // The single-device reference, first (rank 0; the others wait).
    Reference ref = harness_reference(c, &a, !no_ref);

    // The grid: t consecutive ranks hold one model; ranks t apart hold the
    // same part of it and average their gradients.
    Comm *tpc = comm_split(c, dp_rank, r % t), *dpc = comm_split(c, r % t, dp_rank);
    GptConfig cfg = {.B = rows, .T = a.seq, .C = a.dim, .NH = a.heads, .L = a.layers, .V = a.vocab,
                     .dropout = (float)a.dropout, .seed = a.seed};
    Gpt *model = gpt_create(&cfg);   // the whole model's shapes; no memory for tensors
    Tp tp = {.group = tpc, .t = t, .r = r % t, .naive = naive, .B = rows, .T = a.seq, .C = a.dim,
             .NH = a.heads, .V = a.vocab};
    TpModel tm;
    tpm_layout(&tm, model, &tp);
    tm.dropout = (float)a.dropout;
    mem_reset_peaks();
    tpm_alloc_acts(&tm, rows, a.seq);
    // What the split model's activations and scratch take, allocated by the
    // harness before any of the student's code runs: the student's functions
    // allocate nothing, so ACTS stays at this (the grader's bound).
    double acts_expected = (double)mem_live(MEM_ACTS);
    char desc[96];
    print0("[lab04] %d rank%s · %s · %s · %s · %s MLP · %d tensor-parallel x %d data-parallel · batch %d = %d "
           "groups x %d rows\n", N, N == 1 ? "" : "s", mem_device_name(), comm_backend_name(),
           gpt_describe(model, desc, sizeof desc), naive ? "naive" : "Megatron", t, dp, a.batch, dp, rows);

    float **params = tp_layout_alloc(&tm.L, MEM_PARAMS, "params"), **grads = tp_layout_alloc(&tm.L, MEM_GRADS, "grads");
    float **mom_m = tp_layout_alloc(&tm.L, MEM_OPTIM, "adam m"), **mom_v = tp_layout_alloc(&tm.L, MEM_OPTIM, "adam v");
    tp_layout_init(&tm.L, params);

    // The student's layers on their own first, for the diagnoses.
    TpProbe probe = tpm_probe(&tm);

    OptimConfig optim = optim_from_args(&a);
    Data data;
    data_open(&data, a.data, a.vocab, a.seq, a.batch, a.seed);
    int *x = malloc((size_t)rows * a.seq * sizeof *x), *y = malloc((size_t)rows * a.seq * sizeof *y);
    // The gradient of the mean loss over the global batch: the groups' sums
    // add up to it.
    float scale = 1.0f / (float)((size_t)a.batch * a.seq);
    DumpWriter *dw = dump_create(r == 0 ? ref.own_dump : NULL);
    Lab04End end = {.tm = &tm, .tpc = tpc, .probe = &probe, .acts_expected = acts_expected, .grad_zero_on = -1};
    char extra[160];
    snprintf(extra, sizeof extra, "tp %d\ndp %d\nmlp %s\n", t, dp, mlp);
    dump_run_meta(dw, c, "lab04", &a, extra);
    mem_reset_peaks();
    comm_stats_reset();
    harness_seal_measures();
    HarnessRun run = harness_run(c, &a, &ref, "lab04", verdict_of_lab_run);

    for (int s = 0; s < a.steps; s++) {
        harness_step_begin(&run);
        data_slice(&data, s, row0, rows, 0, a.seq, x, y);
        tpm_set_batch(&tm, x, y, s, row0, scale);
        for (int u = 0; u < tm.nunits; u++) mem_zero(grads[u], tm.L.size[u] * sizeof(float));
        for (int u = 0; u < tm.nunits; u++) {
            trace_begin(model->units[u].name, "forward");
            tpm_unit_forward(&tm, u, params[u]);
            trace_end();
        }
        double loss = tpm_loss(&tm);
        for (int u = tm.nunits - 1; u >= 0; u--) {
            trace_begin(model->units[u].name, "backward");
            tpm_unit_backward(&tm, u, params[u], grads[u]);
            trace_end();
        }
        // Data parallelism across the groups: the same part of the model on
        // ranks t apart, summed (each group's gradient is already its share
        // of the global mean).
        for (int u = 0; dp > 1 && u < tm.nunits; u++) comm_all_reduce_sum(dpc, grads[u], tm.L.size[u]);
        // The first gradient, whole, for the grader (a unit at a time).
        if (s == 0) {
            tp_layout_dump(&tm.L, grads, dw, "grad/first");
            // A replicated gradient that differs over the group, and a rank
            // where it is zero: computed on some ranks only.
            end.grad_zero_on = tp_layout_replicated_differs(&tm.L, tpc, grads, end.grad_differs, sizeof end.grad_differs);
        }
        trace_begin("optimizer", "compute");
        for (int u = 0; u < tm.nunits; u++) optim_update(&optim, s + 1, params[u], grads[u], mom_m[u], mom_v[u], tm.L.size[u]);
        trace_end();
        // Every rank of a group has its group's loss: the mean over ranks is
        // the mean over groups.
        harness_step_end(&run, s, loss, N);
    }

    // The end. Memory and bytes first: what follows is not the lab's.
    MemReport mem = mem_report();
    CommStats st = comm_stats();
    MemReport *all = malloc((size_t)N * sizeof *all);
    comm_all_gather_host(c, &mem, sizeof mem, all);
    double peak[MEM_NCAT] = {0};
    for (int q = 0; q < N; q++)
        for (int k = 0; k < MEM_NCAT; k++) peak[k] = fmax(peak[k], all[q].peak[k]);
    free(all);
    double psi = (double)model->nparams, rep = (double)tm.L.replicated, local = (double)tm.L.local;
    double M = (double)rows * a.seq;
    char b1[32], b2[32], b3[32], b4[32];
    harness_print_mean_step(&run, false);
    print0("\nper rank (the largest), t = %d, psi = %.0f:\n", t, psi);
    print0("  %-24s %10s %10s   %s\n", "", "measured", "formula", "");
    print0("  %-24s %10s %10s   4 (psi_replicated + psi_split / t), psi_replicated = %.0f\n", "parameters (PARAMS)",
           core_fmt_bytes(peak[MEM_PARAMS], b1, 32), core_fmt_bytes(4 * (rep + (psi - rep) / t), b2, 32), rep);
    print0("  %-24s %10s %10s   the formula's column: what the harness allocates for them, measured before "
           "training; split only inside attention and the MLP (lab06 splits the rest)\n",
           "activations (ACTS)", core_fmt_bytes(peak[MEM_ACTS], b1, 32), core_fmt_bytes(acts_expected, b2, 32));
    // Bytes: this rank's, per step, beside both variants' formulas.
    double sent = (double)comm_stats_total_bus_bytes(&st) / (a.steps ? a.steps : 1);
    TpBytes mega = tp_bytes_per_step(false, t, dp, M, a.dim, a.layers, local),
            nv = tp_bytes_per_step(true, t, dp, M, a.dim, a.layers, local);
    print0("  %-24s %10s %10s   %s MLP: blocks %s, embedding and cross-entropy %s, data-parallel %s\n",
           "bytes sent per step", core_fmt_bytes(sent, b1, 32), core_fmt_bytes((naive ? nv : mega).total, b2, 32),
           naive ? "naive" : "Megatron", core_fmt_bytes((naive ? nv : mega).block, b3, 32),
           core_fmt_bytes(mega.embed_head, desc, sizeof desc), core_fmt_bytes(mega.dp, b4, sizeof b4));
    print0("  %-24s %10s %10s   the other MLP, for comparison (%s MLP)\n", "", "",
           core_fmt_bytes((naive ? mega : nv).total, b2, 32), naive ? "Megatron" : "naive");
    harness_print_memory(c, &mem);
    if (figure && r == 0) {
        Lab04Figure fg = {figure, naive, N, t, dp, &a, M, psi, rep, sent,
                          peak[MEM_PARAMS] + peak[MEM_GRADS] + peak[MEM_OPTIM]};
        draw_figure(&fg);
    }

    // Afterwards, not measured: the whole model gathered, the replicas compared.
    double rep_sumsq, split_sumsq;
    end.rep_all = malloc((size_t)N * sizeof *end.rep_all);
    tp_layout_sumsq(&tm.L, params, &rep_sumsq, &split_sumsq);
    comm_all_gather_host(c, &rep_sumsq, sizeof rep_sumsq, end.rep_all);
    tp_layout_replicated_differs(&tm.L, c, params, end.differs, sizeof end.differs);
    float **whole = tp_layout_gather(&tm.L, params), **whole_m = tp_layout_gather(&tm.L, mom_m),
          **whole_v = tp_layout_gather(&tm.L, mom_v);
    harness_finish(&run, &(HarnessEnd){.dw = dw, .mem = &mem, .model = model, .params = whole, .m = whole_m,
                                       .v = whole_v, .host = true, .print_more = print_more,
                                       .dump_more = dump_more, .ctx = &end, .groups = {tpc, dpc}});
}
