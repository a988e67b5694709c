// main.c: lab06's harness. Students do not edit it.
//
//   mpirun -np 4 build/lab06 [--sp on|off] [--tp t] [--precision fp32|bf16] [--recompute none|selective|full]
//                            [--recompute-figure FILE.svg]
//
// Trains the course's GPT with tensor parallelism over t ranks (the given
// split layers) and, with --sp on, the student's sequence parallelism
// (sp.c) around them: LayerNorm, dropout and the residual stream on T/t
// tokens a rank. Dropout is on (0.1) by default here, so that its masks
// are exercised. Every step prints the loss beside single-device
// training's; at the end, each rank's activation memory per layer beside
// the formulas (ours, for what this code stores, and Korthikanti et al.'s),
// and the bytes beside tensor parallelism's alone.
//
// --precision bf16: mixed precision (docs/model.md). Each rank's parts of
// the parameters and their gradients are bf16 (2 bytes), with an fp32
// master copy and fp32 moments for AdamW (2 + 2 + 12 bytes a parameter);
// the activations kept and the tokens gathered and scattered are bf16, so
// the "ours" column is at 2 bytes an element, as the paper's 16-bit one.
//
// --recompute selective: Korthikanti et al.'s selective recomputation. The
// attention's probabilities are kept in one buffer for all the blocks, not
// per layer, and made again from the kept q and k in the backward pass
// (the student's sp_block_backward calls tpg_attention_again): the same
// training to the bit, the 5as^2b/t term gone from each layer, and the
// cost printed as the share of the step's products done twice.
//
// --recompute full (with --sp on): each block keeps its input alone (the
// residual stream, this rank's tokens: the paper's 2sbh/t), and every block
// is given the same SpBlockActs, the block running's; the student's
// sp_block_backward runs the block's forward again from its input before
// its backward (TODO 6). The products made in a backward pass by the given
// layers' forward functions are counted where they happen (tp_given.c),
// and printed beside the step's: about a third more.
//
// --recompute-figure FILE.svg (with --sp on): after the verdict, each of
// the three modes on a fresh model, a few forward and backward passes of
// one batch: each's ACTS peak (mem.h's tracked peak, what sp.c keeps
// alive included) against its time, the paper's figure beside it. (The
// graded run's peaks are then not sealed: the figure resets them.)
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
#include "sp.h"
#include "sp_budget.h"
#include "tp_layout.h"
#include "trace.h"
#include "verdict.h"

// ---- the student's unfinished functions ------------------------------------

static const char *const HOOKS[] = {"sp_gather_tokens", "sp_scatter_tokens", "sp_dropout_key",
                                    "sp_block_forward", "sp_block_backward", "sp_embed_forward",
                                    "sp_embed_backward", "sp_head_forward",  "sp_head_backward",
                                    "sp_block_backward under --recompute full (TODO 6)"};

void lab_todo(const char *function) { harness_todo(function); }

// ---- main ------------------------------------------------------------------

int main(int argc, char **argv) {
    // The hooks are fixed before any student code runs (harness.h).
    harness_hooks(HOOKS, (int)(sizeof HOOKS / sizeof HOOKS[0]));
    Args a = args_defaults();
    a.dropout = 0.1;   // this lab's default: dropout's masks are part of the lesson
    int tp_size = 0;
    const char *sp_mode = "on";
    bool no_ref = false;
    const char *figure = NULL, *rc_figure = NULL;
    ArgExtra extras[] = {
        {"recompute-figure", ARG_OUTPUT, &rc_figure, "draw the activation memory against the time of a pass for "
         "--recompute none, selective and full, measured on fresh models after training, as SVG (--sp on)", 1, 0,
         NULL, NULL},
        {"figure", ARG_OUTPUT, &figure, "draw the activations per layer and rank (one device, tensor parallelism, "
         "with sequence parallelism; ours and the paper's) as SVG", 1, 0, NULL, NULL},
        {"sp", ARG_CHOICE, &sp_mode, "sequence parallelism on top of tensor parallelism, or tensor parallelism "
         "alone (to compare)", 0, 0, "on|off", NULL},
        {"tp", ARG_INT, &tp_size, "tensor-parallel ranks per group (default: all of them); the rest form "
         "data-parallel groups", 1, 1 << 16, NULL, NULL},
        {"no-ref", ARG_FLAG, &no_ref, "skip the single-device reference run", 0, 0, NULL, NULL},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    args_takes(ARGS_ALL | ARGS_PRECISION | ARGS_RECOMPUTE, NULL);
    args_parse(&a, argc, argv,
               "lab06: sequence parallelism on top of tensor parallelism, activation memory measured against "
               "Korthikanti et al., checked against single-device training.",
               extras);
    Comm *c = harness_start(&a, &argc, &argv);
    int N = comm_size(c), r = comm_rank(c);
    int t = tp_size ? tp_size : N;
    bool on = strcmp(sp_mode, "on") == 0;
    tp_check_shape(&a, t, N, on);
    int dp = N / t, dp_rank = r / t;
    int row0, rows;
    data_rank_rows(a.batch, dp, dp_rank, &row0, &rows);

    harness_check_fits(&a, rows, !no_ref);
    const bool bf16 = gpt_precision_parse(a.precision) == GPT_BF16;
    const GptRecompute rc = gpt_recompute_parse(a.recompute);
    if (!on && rc == GPT_RECOMPUTE_FULL)
        core_usage_error("--recompute full is the student's, on top of sequence parallelism (sp_block_backward, "
                         "TODO 6): run it with --sp on (tensor parallelism alone takes none or selective)");
    if (!on && rc_figure)
        core_usage_error("--recompute-figure measures sequence parallelism's three modes: run it with --sp on");

    Reference ref = harness_reference(c, &a, !no_ref);

    Comm *tpc = comm_split(c, dp_rank, r % t), *dpc = comm_split(c, r % t, dp_rank);
    GptConfig cfg = {.B = rows, .T = a.seq, .C = a.dim, .NH = a.heads, .L = a.layers, .V = a.vocab,
                     .dropout = (float)a.dropout, .seed = a.seed, .precision = bf16 ? GPT_BF16 : GPT_FP32};
    Gpt *model = gpt_create(&cfg);
    Sp sp = {.tp = {.group = tpc, .t = t, .r = r % t, .B = rows, .T = a.seq, .C = a.dim, .NH = a.heads, .V = a.vocab},
             .Tt = a.seq / t, .dropout = (float)a.dropout, .seed = a.seed,
             .recompute = rc};
    SpModel sm;
    mem_reset_peaks();
    spm_create(&sm, model, &sp, on, bf16);
    const CommType type = sm.prec.type;
    const size_t elem = sm.prec.elem;
    // Everything the activations and scratch take, allocated before any of
    // the student's code runs: the student's functions allocate nothing.
    double acts_expected = (double)mem_live(MEM_ACTS);
    char desc[96];
    print0("[lab06] %d rank%s · %s · %s · %s · %s · sequence parallelism %s · %d tensor-parallel x %d "
           "data-parallel · %d tokens a row, %d a rank · dropout %g%s\n", N, N == 1 ? "" : "s", mem_device_name(),
           comm_backend_name(), gpt_describe(model, desc, sizeof desc), bf16 ? "bf16 (fp32 master weights)" : "fp32",
           on ? "on" : "off", t, dp, a.seq, on ? sp.Tt : a.seq, a.dropout,
           rc == GPT_RECOMPUTE_SELECTIVE ? " · selective recomputation"
           : rc == GPT_RECOMPUTE_FULL ? " · full recomputation" : "");

    // The parameters and gradients in the run's type; in bf16 AdamW's fp32
    // master copy besides, initialised as fp32 is and rounded into them.
    void **params = bf16 ? tp_layout_alloc_elems(&sm.L, elem, MEM_PARAMS, "params")
                         : (void **)tp_layout_alloc(&sm.L, MEM_PARAMS, "params");
    void **grads = tp_layout_alloc_elems(&sm.L, elem, MEM_GRADS, "grads");
    float **master = bf16 ? tp_layout_alloc(&sm.L, MEM_OPTIM, "master weights") : NULL;
    float **mom_m = tp_layout_alloc(&sm.L, MEM_OPTIM, "adam m"), **mom_v = tp_layout_alloc(&sm.L, MEM_OPTIM, "adam v");
    tp_layout_init(&sm.L, bf16 ? master : (float **)params);
    for (int u = 0; bf16 && u < sm.nunits; u++) ops_to_bf16(params[u], master[u], sm.L.size[u]);
    float **held = bf16 ? master : (float **)params;   // the parameters the optimizer holds in fp32
    // The student's functions on their own first, for the diagnoses (only
    // with sequence parallelism: --sp off runs the given composition).
    SpProbe probe = {0};
    if (on) probe = spm_probe(&sm);

    OptimConfig optim = optim_from_args(&a);
    Data data;
    data_open(&data, a.data, a.vocab, a.seq, a.batch, a.seed);
    int *x = malloc((size_t)rows * a.seq * sizeof *x), *y = malloc((size_t)rows * a.seq * sizeof *y);
    float scale = 1.0f / (float)((size_t)a.batch * a.seq);
    DumpWriter *dw = dump_create(r == 0 ? ref.own_dump : NULL);
    char extra[160];
    snprintf(extra, sizeof extra, "sp %s\ntp %d\ndp %d\n", sp_mode, t, dp);
    dump_run_meta(dw, c, "lab06", &a, extra);
    Lab06End end = {.sm = &sm, .on = on, .t = t, .dp = dp, .probe = &probe, .acts_expected = acts_expected,
                    .grad_zero_on = -1, .rc_figure = rc_figure, .sp = &sp, .model = model, .params = params,
                    .grads = grads, .x = x, .y = y, .row0 = row0, .scale = scale, .bf16 = bf16};
    // (The bf16 reference's products grew ops.h's widening scratch on rank
    // 0: let it go before the peaks start.)
    ops_release_scratch();
    mem_reset_peaks();
    comm_stats_reset();
    if (!rc_figure) harness_seal_measures();
    else {   // all but the peaks' seal: the figure measures each mode's from its own reset (as lab03's --figure)
        mem_start_resident();
        comm_stats_seal();
        ops_work_reset();
        ops_work_seal();
    }
    HarnessRun run = harness_run(c, &a, &ref, "lab06", verdict_of_lab_run);
    sp.tp.again_work = 0, sp.tp.again_s = 0;   // (the probe's recomputations are not the run's)
    sm.block_fwd_work = 0;
    const double loop0 = core_now();

    for (int s = 0; s < a.steps; s++) {
        harness_step_begin(&run);
        data_slice(&data, s, row0, rows, 0, a.seq, x, y);
        spm_set_batch(&sm, x, y, s, row0, scale);
        for (int u = 0; u < sm.nunits; u++) mem_zero(grads[u], sm.L.size[u] * elem);
        for (int u = 0; u < sm.nunits; u++) {
            trace_begin(model->units[u].name, "forward");
            spm_unit_forward(&sm, u, params[u]);
            trace_end();
        }
        double loss = spm_loss(&sm);
        for (int u = sm.nunits - 1; u >= 0; u--) {
            trace_begin(model->units[u].name, "backward");
            spm_unit_backward(&sm, u, params[u], grads[u]);
            trace_end();
        }
        for (int u = 0; dp > 1 && u < sm.nunits; u++)
            comm_all_reduce_typed(dpc, grads[u], sm.L.size[u], type, COMM_SUM);
        // The first gradient, whole, for the grader (a unit at a time; bf16
        // widened in the fp32 gradient scratch, free between steps): the
        // harness's gathers, not counted among the step's helpers.
        if (s == 0) {
            comm_step_window(false);
            tp_layout_dump_typed(&sm.L, grads, type, sm.net.gunit32, dw, "grad/first");
            // A replicated gradient that differs over the group, and a rank
            // where it is zero: computed on some ranks only.
            end.grad_zero_on = tp_layout_replicated_differs_typed(&sm.L, tpc, grads, type, sm.net.gunit32,
                                                                  end.grad_differs, sizeof end.grad_differs);
            comm_step_window(true);
        }
        trace_begin("optimizer", "compute");
        for (int u = 0; u < sm.nunits; u++)
            optim_step(&optim, s + 1, bf16, params[u], grads[u], bf16 ? master[u] : NULL, mom_m[u], mom_v[u],
                       sm.L.size[u]);
        trace_end();
        harness_step_end(&run, s, loss, N);
    }
    const double loop_s = core_now() - loop0;
    const double work = ops_work().matmul;
    MemReport mem = mem_report();
    CommStats st = comm_stats();

    // Per layer, per rank: what the harness allocates for each mode (the
    // design's figure, the same whatever sp.c does) beside the formulas.
    double S = a.seq, Bd = rows, H = a.dim, A = a.heads, E = (double)elem;
    if (a.steps > 1) print0("mean over steps 2..%d: %.1f ms/step\n", a.steps, run.seconds / (a.steps - 1) * 1e3);
    lab06_print_layers(&sm, S, Bd, H, A, t, E, on);
    Lab06Cost cost = {.again_work = comm_max_double(c, sp.tp.again_work), .again_s = comm_max_double(c, sp.tp.again_s),
                      .work = comm_max_double(c, work), .seconds = comm_max_double(c, loop_s),
                      .fwd_work = comm_max_double(c, sm.block_fwd_work)};
    lab06_print_recompute(&sm, S, Bd, H, A, t, E, on, &cost);
    end.again_work = sp.tp.again_work, end.block_fwd_work = sm.block_fwd_work;
    end.step = a.steps > 0 ? a.steps - 1 : 0;
    char b1[32], b2[32], b3[32];
    double psi_local = (double)sm.L.local;
    TpBytes tpb = tp_bytes_per_step_typed(false, t, dp, Bd * S, H, a.layers, psi_local, E);
    double again_bytes = sp_recompute_bytes(rc, tpb.block);
    double replicated = on ? sp_replicated_bytes(t, a.layers, S, H) : 0;
    double sent = (double)comm_stats_total_bus_bytes(&st) / (a.steps ? a.steps : 1);
    print0("  peak ACTS per rank: %s (every layer, the head, the scratch)\n",
           core_fmt_bytes(comm_max_double(c, mem.peak[MEM_ACTS]), b1, 32));
    char plus[300] = "", b4[32];
    if (on)
        snprintf(plus, sizeof plus, " + %s for the replicated tensors' gradients, summed over the group (each rank "
                 "saw its own tokens)%s%s%s", core_fmt_bytes(replicated, b3, 32),
                 again_bytes > 0 ? " + " : "", again_bytes > 0 ? core_fmt_bytes(again_bytes, b4, 32) : "",
                 again_bytes > 0 ? " for the blocks' forward collectives made again (full recomputation)" : "");
    print0("bytes each rank sent per step: %s; tensor parallelism's alone: %s%s\n", core_fmt_bytes(sent, b1, 32),
           core_fmt_bytes(tpb.total, b2, 32), plus);
    harness_print_memory(c, &mem);
    if (figure && r == 0) lab06_draw_figure(figure, &a, &sm, N, t, rows, on, E);

    // Afterwards, not measured: the replicated tensors compared, the model gathered.
    end.psi_local = psi_local;
    tp_layout_replicated_differs(&sm.L, c, held, end.differs, sizeof end.differs);
    float **whole = tp_layout_gather(&sm.L, held), **whole_m = tp_layout_gather(&sm.L, mom_m),
          **whole_v = tp_layout_gather(&sm.L, mom_v);
    harness_finish(&run, &(HarnessEnd){.dw = dw, .mem = &mem, .model = model, .params = whole, .m = whole_m,
                                       .v = whole_v, .host = true, .print_more = lab06_print_more,
                                       .dump_more = lab06_dump_more, .afterwards = lab06_afterwards, .ctx = &end,
                                       .groups = {tpc, dpc}});
}
