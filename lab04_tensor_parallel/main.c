// main.c: lab04's harness. Students do not edit it.
//
//   mpirun -np 4 build/lab04 [--tp t] [--mlp megatron|naive] [--precision fp32|bf16] [--recompute full]
//
// Trains the course's GPT with its layers cut by width over t ranks (the
// student's tp.c), on a grid of N / t data-parallel groups when t < N: a
// tensor-parallel group of t consecutive ranks holds one model between
// them, and each group of them takes its own rows of the batch. Every step
// prints the loss beside single-device training's; at the end, each rank's
// parameters, bytes and activations beside their formulas.
//
// --precision bf16: mixed precision (docs/model.md). Each rank's parts of
// the parameters and their gradients are bf16 (2 bytes), with an fp32
// master copy and fp32 moments for AdamW (2 + 2 + 12 bytes a parameter);
// the activations the layers keep and the tensors f and g move are bf16.
//
// --recompute full: each block keeps only its input (the residual stream)
// and its backward pass runs its forward again first, the student's layers
// and their g's included, into one set of kept tensors that the blocks
// share (common/tp_net.h). The same training to the bit; fewer activations,
// more products and bytes, which the end of the run prints.
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
#include "report_given.h"
#include "tp.h"
#include "trace.h"
#include "verdict.h"

// ---- the student's unfinished functions ------------------------------------

static const char *const HOOKS[] = {"tp_split", "tp_naive_mlp_forward", "tp_naive_mlp_backward", "tp_f_backward",
                                    "tp_g_forward", "tp_mlp_forward", "tp_mlp_backward", "tp_attention_forward",
                                    "tp_attention_backward", "tp_embed_forward", "tp_embed_backward",
                                    "tp_head_forward", "tp_head_backward"};

void lab_todo(const char *function) { harness_todo(function); }

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
    args_takes(ARGS_ALL | ARGS_PRECISION | ARGS_RECOMPUTE, NULL);
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
    const bool bf16 = gpt_precision_parse(a.precision) == GPT_BF16;
    if (bf16 && naive)
        core_usage_error("the naive MLP runs in fp32 only (it is the lecture's picture of the gathers); run it "
                         "without --precision bf16, or the Megatron MLP (--mlp megatron) in bf16");
    const GptRecompute rc = gpt_recompute_parse(a.recompute);
    // Selective recomputation makes attention's probabilities again inside
    // the attention layer, which is the student's here and keeps them itself.
    if (rc == GPT_RECOMPUTE_SELECTIVE)
        core_usage_error("--recompute selective is not this lab's: it makes attention's probabilities again inside "
                         "the attention layer, and yours (tp.c) keeps its own (a->att); run with --recompute full (each "
                         "block's forward again from its input) or none; lab06 teaches selective recomputation "
                         "(build/lab06 --recompute selective)");
    const bool recompute = rc == GPT_RECOMPUTE_FULL;

    // Refused before any of it is allocated when it cannot fit (an upper
    // estimate: a whole replica per rank) and, first, the reference.
    harness_check_fits(&a, rows, !no_ref);

    // The single-device reference, first (rank 0; the others wait).
    Reference ref = harness_reference(c, &a, !no_ref);

    // The grid: t consecutive ranks hold one model; ranks t apart hold the
    // same part of it and average their gradients.
    Comm *tpc = comm_split(c, dp_rank, r % t), *dpc = comm_split(c, r % t, dp_rank);
    GptConfig cfg = {.B = rows, .T = a.seq, .C = a.dim, .NH = a.heads, .L = a.layers, .V = a.vocab,
                     .dropout = (float)a.dropout, .seed = a.seed, .precision = bf16 ? GPT_BF16 : GPT_FP32,
                     .recompute = rc};
    Gpt *model = gpt_create(&cfg);   // the whole model's shapes; no memory for tensors
    Tp tp = {.group = tpc, .t = t, .r = r % t, .naive = naive, .B = rows, .T = a.seq, .C = a.dim,
             .NH = a.heads, .V = a.vocab};
    TpModel tm;
    tpm_layout(&tm, model, &tp);
    tm.net.dropout = (float)a.dropout;
    mem_reset_peaks();
    tpm_alloc_acts(&tm, rows, a.seq, bf16, recompute);
    const CommType type = tm.prec.type;
    const size_t elem = tm.prec.elem;
    // What the split model's activations and scratch take, allocated by the
    // harness before any of the student's code runs: the student's functions
    // allocate nothing, so ACTS stays at this (the grader's bound).
    double acts_expected = (double)mem_live(MEM_ACTS);
    char desc[96];
    print0("[lab04] %d rank%s · %s · %s · %s · %s · %s MLP · %d tensor-parallel x %d data-parallel · batch %d = %d "
           "groups x %d rows%s\n", N, N == 1 ? "" : "s", mem_device_name(), comm_backend_name(),
           gpt_describe(model, desc, sizeof desc), bf16 ? "bf16 (fp32 master weights)" : "fp32",
           naive ? "naive" : "Megatron", t, dp, a.batch, dp, rows, recompute ? " · full recomputation" : "");

    // The parameters and gradients in the run's type; in bf16 AdamW's fp32
    // master copy besides, initialised as fp32 is and rounded into them.
    void **params = bf16 ? tp_layout_alloc_elems(&tm.L, elem, MEM_PARAMS, "params")
                         : (void **)tp_layout_alloc(&tm.L, MEM_PARAMS, "params");
    void **grads = tp_layout_alloc_elems(&tm.L, elem, MEM_GRADS, "grads");
    float **master = bf16 ? tp_layout_alloc(&tm.L, MEM_OPTIM, "master weights") : NULL;
    float **mom_m = tp_layout_alloc(&tm.L, MEM_OPTIM, "adam m"), **mom_v = tp_layout_alloc(&tm.L, MEM_OPTIM, "adam v");
    tp_layout_init(&tm.L, bf16 ? master : (float **)params);
    for (int u = 0; bf16 && u < tm.nunits; u++) ops_to_bf16(params[u], master[u], tm.L.size[u]);
    float **held = bf16 ? master : (float **)params;   // the parameters the optimizer holds in fp32

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
    // (The bf16 reference's products grew ops.h's widening scratch on rank
    // 0: let it go before the peaks start, not only when they are sealed.)
    ops_release_scratch();
    mem_reset_peaks();
    comm_stats_reset();
    harness_seal_measures();
    HarnessRun run = harness_run(c, &a, &ref, "lab04", verdict_of_lab_run);
    tm.net.again_work = tm.net.again_bytes = tm.net.again_s = 0;
    const double loop0 = core_now();

    for (int s = 0; s < a.steps; s++) {
        harness_step_begin(&run);
        data_slice(&data, s, row0, rows, 0, a.seq, x, y);
        tpm_set_batch(&tm, x, y, s, row0, scale);
        for (int u = 0; u < tm.nunits; u++) mem_zero(grads[u], tm.L.size[u] * elem);
        for (int u = 0; u < tm.nunits; u++) {
            trace_begin(model->units[u].name, "forward");
            tp_net_unit_forward(&tm.net, u, params[u]);
            trace_end();
        }
        double loss = tpm_loss(&tm);
        for (int u = tm.nunits - 1; u >= 0; u--) {
            trace_begin(model->units[u].name, "backward");
            tp_net_unit_backward(&tm.net, u, params[u], grads[u]);
            trace_end();
        }
        // Data parallelism across the groups: the same part of the model on
        // ranks t apart, summed (each group's gradient is already its share
        // of the global mean).
        for (int u = 0; dp > 1 && u < tm.nunits; u++) comm_all_reduce_typed(dpc, grads[u], tm.L.size[u], type, COMM_SUM);
        // The first gradient, whole, for the grader (a unit at a time; bf16
        // widened in the fp32 gradient scratch, free between steps): the
        // harness's gathers, not counted among the step's helpers.
        if (s == 0) {
            comm_step_window(false);
            tp_layout_dump_typed(&tm.L, grads, type, tm.net.gunit32, dw, "grad/first");
            // A replicated gradient that differs over the group, and a rank
            // where it is zero: computed on some ranks only.
            end.grad_zero_on = tp_layout_replicated_differs_typed(&tm.L, tpc, grads, type, tm.net.gunit32,
                                                                  end.grad_differs, sizeof end.grad_differs);
            comm_step_window(true);
        }
        trace_begin("optimizer", "compute");
        for (int u = 0; u < tm.nunits; u++)
            optim_step(&optim, s + 1, bf16, params[u], grads[u], bf16 ? master[u] : NULL, mom_m[u], mom_v[u],
                       tm.L.size[u]);
        trace_end();
        // Every rank of a group has its group's loss: the mean over ranks is
        // the mean over groups.
        harness_step_end(&run, s, loss, N);
    }

    // The end. Memory and bytes first: what follows is not the lab's.
    const double loop_s = core_now() - loop0, work = ops_work().matmul;
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
    const double P = (double)elem, K = bf16 ? 12 : 8;   // bytes a parameter: weights and gradients; optimizer
    print0("\nper rank (the largest), t = %d, psi = %.0f, %s:\n", t, psi, bf16 ? "bf16 with fp32 master weights" : "fp32");
    print0("  %-24s %10s %10s   %s\n", "", "measured", "formula", "");
    print0("  %-24s %10s %10s   %.0f (psi_replicated + psi_split / t), psi_replicated = %.0f\n", "parameters (PARAMS)",
           core_fmt_bytes(peak[MEM_PARAMS], b1, 32), core_fmt_bytes(P * (rep + (psi - rep) / t), b2, 32), P, rep);
    if (bf16) {
        print0("  %-24s %10s %10s   2 (psi_replicated + psi_split / t)\n", "gradients (GRADS)",
               core_fmt_bytes(peak[MEM_GRADS], b1, 32), core_fmt_bytes(P * (rep + (psi - rep) / t), b2, 32));
        print0("  %-24s %10s %10s   12 (psi_replicated + psi_split / t): the fp32 master copy and two moments\n",
               "optimizer (OPTIM)", core_fmt_bytes(peak[MEM_OPTIM], b1, 32),
               core_fmt_bytes(K * (rep + (psi - rep) / t), b2, 32));
    }
    print0("  %-24s %10s %10s   the formula's column: what the harness allocates for them, measured before "
           "training; split only inside attention and the MLP (lab06 splits the rest)%s\n",
           "activations (ACTS)", core_fmt_bytes(peak[MEM_ACTS], b1, 32), core_fmt_bytes(acts_expected, b2, 32),
           recompute ? "; full recomputation: each block keeps its input alone, and one set of kept tensors serves "
           "the block running" : "");
    // Bytes: this rank's, per step, beside both variants' formulas.
    double sent = (double)comm_stats_total_bus_bytes(&st) / (a.steps ? a.steps : 1);
    TpBytes mega = tp_bytes_per_step_recompute(false, t, dp, M, a.dim, a.layers, local, P, recompute),
            nv = tp_bytes_per_step_recompute(true, t, dp, M, a.dim, a.layers, local, P, recompute);
    print0("  %-24s %10s %10s   %s MLP: blocks %s, embedding and cross-entropy %s, data-parallel %s\n",
           "bytes sent per step", core_fmt_bytes(sent, b1, 32), core_fmt_bytes((naive ? nv : mega).total, b2, 32),
           naive ? "naive" : "Megatron", core_fmt_bytes((naive ? nv : mega).block, b3, 32),
           core_fmt_bytes(mega.embed_head, desc, sizeof desc), core_fmt_bytes(mega.dp, b4, sizeof b4));
    print0("  %-24s %10s %10s   the other MLP, for comparison (%s MLP)\n", "", "",
           core_fmt_bytes((naive ? mega : nv).total, b2, 32), naive ? "Megatron" : "naive");
    if (recompute) {
        // What the forwards made again cost, counted where they ran (tp_net.c).
        double steps = a.steps ? a.steps : 1, again = comm_max_double(c, tm.net.again_work);
        double all = comm_max_double(c, work), again_s = comm_max_double(c, tm.net.again_s);
        double secs = comm_max_double(c, loop_s);
        print0("  %-24s %10s %10s   the blocks' forwards again: per block %s\n", "of which made again",
               core_fmt_bytes(comm_max_double(c, tm.net.again_bytes) / steps, b1, 32),
               core_fmt_bytes((naive ? nv : mega).again, b2, 32),
               naive ? "attention's g and the naive MLP's two all-gathers" : "g's two all-reduces of M C");
        print0("  the cost of full recomputation: the forwards again, %.4g M multiply-adds of the steps' %.4g M "
               "(%.1f%%), %.1f ms of the steps' %.1f ms (%.1f%%, wall clock)\n", again / 1e6, all / 1e6,
               100 * again / all, again_s * 1e3, secs * 1e3, 100 * again_s / secs);
    }
    harness_print_memory(c, &mem);
    if (figure && r == 0) {
        Lab04Figure fg = {figure, naive, N, t, dp, &a, M, psi, rep, sent,
                          peak[MEM_PARAMS] + peak[MEM_GRADS] + peak[MEM_OPTIM], recompute};
        lab04_draw_figure(&fg);
    }

    // Afterwards, not measured: the whole model gathered, the replicas compared.
    double rep_sumsq, split_sumsq;
    end.rep_all = malloc((size_t)N * sizeof *end.rep_all);
    tp_layout_sumsq(&tm.L, held, &rep_sumsq, &split_sumsq);
    comm_all_gather_host(c, &rep_sumsq, sizeof rep_sumsq, end.rep_all);
    tp_layout_replicated_differs(&tm.L, c, held, end.differs, sizeof end.differs);
    float **whole = tp_layout_gather(&tm.L, held), **whole_m = tp_layout_gather(&tm.L, mom_m),
          **whole_v = tp_layout_gather(&tm.L, mom_v);
    harness_finish(&run, &(HarnessEnd){.dw = dw, .mem = &mem, .model = model, .params = whole, .m = whole_m,
                                       .v = whole_v, .host = true, .print_more = lab04_print_more,
                                       .dump_more = lab04_dump_more, .ctx = &end, .groups = {tpc, dpc}});
}
