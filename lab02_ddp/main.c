// main.c: lab02's harness. Students do not edit it.
//
//   mpirun -np 4 build/lab02 --strategy naive|flat|bucketed [--bucket-kb K] [--accum K]
//                            [--precision bf16 [--grad-reduce fp32]]
//
// Trains the course's GPT data-parallel: the global batch of the reference
// is split into one block of rows per rank, each rank runs its rows through
// its own replica, and the student's hooks (ddp.c) keep the replicas equal.
// Every step prints the loss beside single-device training's, and the time
// split into compute, communication and the communication left exposed.
// With --precision bf16 the replicas hold bf16 parameters and gradients and
// an fp32 master copy with the moments (the harness's optimizer), and the
// gradients travel in bf16; --grad-reduce fp32 keeps the gradients in fp32,
// accumulated and all-reduced in fp32 (twice the bytes, no bits lost).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "comm.h"
#include "core.h"
#include "data.h"
#include "ddp.h"
#include "dump.h"
#include "gpt.h"
#include "harness.h"
#include "mem.h"
#include "ops.h"
#include "optim.h"
#include "report_given.h"
#include "trace.h"
#include "verdict.h"

// ---- the student's unfinished functions ------------------------------------

static const char *const HOOKS[] = {"ddp_sync_params", "ddp_unit_done", "ddp_backward_done"};

void lab_todo(const char *function) { harness_todo(function); }

// ---- main ------------------------------------------------------------------

int main(int argc, char **argv) {
    // The hooks are fixed before any student code runs (harness.h).
    harness_hooks(HOOKS, (int)(sizeof HOOKS / sizeof HOOKS[0]));
    Args a = args_defaults();
    const char *strategy = "bucketed";
    int bucket_kb = 1024, accum = 1;
    bool no_ref = false;
    ArgExtra extras[] = {
        {"strategy", ARG_CHOICE, &strategy, "how gradients are averaged", 0, 0, "naive|flat|bucketed", NULL},
        {"bucket-kb", ARG_INT, &bucket_kb, "bucket size of the bucketed strategy, in KiB", 1, 1 << 22, NULL, NULL},
        {"accum", ARG_INT, &accum, "micro-batches per step (gradient accumulation)", 1, 1 << 16, NULL, NULL},
        {"no-ref", ARG_FLAG, &no_ref, "skip the single-device reference run", 0, 0, NULL, NULL},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    args_takes(ARGS_ALL | ARGS_PRECISION | ARGS_GRAD_REDUCE | ARGS_RECOMPUTE, NULL);
    args_parse(&a, argc, argv,
               "lab02: data parallelism (naive, flat, bucketed and overlapped), checked against "
               "single-device training.",
               extras);
    Comm *c = harness_start(&a, &argc, &argv);
    int N = comm_size(c), r = comm_rank(c);
    int row0, rows;   // this rank's rows of the global batch
    data_rank_rows(a.batch, N, r, &row0, &rows);
    if (rows % accum != 0)
        core_usage_error("the batch of %d rows gives each of %d ranks %d rows, which --accum %d does "
                         "not divide; pick --accum among the divisors of %d",
                         a.batch, N, rows, accum, rows);
    int micro_rows = rows / accum;
    DdpStrategy strat = strcmp(strategy, "naive") == 0 ? DDP_NAIVE
                        : strcmp(strategy, "flat") == 0 ? DDP_FLAT
                                                        : DDP_BUCKETED;

    // Refused before any of it is allocated when it cannot fit: each rank's
    // replica (an upper estimate from the shapes) and, first, the reference.
    harness_check_fits(&a, micro_rows, !no_ref);

    // The single-device reference, first (rank 0; the others wait).
    Reference ref = harness_reference(c, &a, !no_ref);
    harness_seal_measures();   // the reference's resets were the last

    // This rank's replica: activations for one micro-batch of its rows.
    GptConfig cfg = {.B = micro_rows, .T = a.seq, .C = a.dim, .NH = a.heads, .L = a.layers,
                     .V = a.vocab, .dropout = (float)a.dropout, .seed = a.seed,
                     .precision = gpt_precision_parse(a.precision)};
    cfg.grads_fp32 = gpt_grads_fp32_parse(cfg.precision, a.grad_reduce);
    cfg.recompute = gpt_recompute_parse(a.recompute);   // the model's own: nothing of ddp.c changes
    Gpt *model = gpt_create(&cfg);
    const bool bf16 = cfg.precision == GPT_BF16;
    gpt_alloc_acts(model);
    // What the model's shape needs for activations, measured before any of
    // the student's code runs: the grader bounds the total by the formula
    // plus this, not by whatever ends up tracked as ACTS.
    double acts_expected = (double)mem_live(MEM_ACTS);
    char desc[96], b1[32];
    print0("[lab02] %d rank%s · %s · %s · %s · %s · %s · batch %d = %d ranks x %d rows%s\n", N,
           N == 1 ? "" : "s", mem_device_name(), comm_backend_name(), gpt_describe(model, desc, sizeof desc),
           !bf16 ? "fp32" : cfg.grads_fp32 ? "bf16 (fp32 master weights, fp32 gradients)" : "bf16 (fp32 master weights)",
           strategy, a.batch, N, rows,
           accum > 1 ? ", in micro-batches" : "");
    if (strat == DDP_BUCKETED) print0("buckets of %d KiB, all-reduced while the backward pass goes on\n", bucket_kb);

    // Parameters: each rank starts from its own seed (rank 0's is the
    // reference's), so a replica that was never synchronised shows.
    const CommType type = bf16 ? COMM_BF16 : COMM_F32;
    Ddp d = {.comm = c, .model = model, .nunits = model->nunits, .nparams = model->nparams, .param_type = type,
             .grad_type = gpt_grad_precision(model) == GPT_BF16 ? COMM_BF16 : COMM_F32, .strategy = strat};
    d.bucket_elems = (size_t)bucket_kb * 1024 / comm_type_size(d.grad_type);
    d.params = gpt_alloc_run_units(model, MEM_PARAMS, "params");
    GptConfig own = cfg;
    own.seed = a.seed + 1000003ull * (uint64_t)r;
    Gpt *init = gpt_create(&own);
    gpt_init_run_units(init, d.params);
    gpt_free(init);
    d.grad_flat = mem_alloc(model->nparams * comm_type_size(d.grad_type), MEM_GRADS, "gradients");
    d.grads = calloc((size_t)model->nunits, sizeof *d.grads);
    d.unit_offset = calloc((size_t)model->nunits, sizeof *d.unit_offset);
    for (int u = 0, off = 0; u < model->nunits; off += (int)model->units[u].size, u++) {
        d.unit_offset[u] = (size_t)off;
        d.grads[u] = comm_at(d.grad_flat, (size_t)off, d.grad_type);
    }
    d.bucket_end = model->nparams;
    float **m = gpt_alloc_units(model, MEM_OPTIM, "adam m"), **v = gpt_alloc_units(model, MEM_OPTIM, "adam v");
    // bf16: AdamW's fp32 master copy, the harness's as the moments are: on
    // every rank rank 0's initial values, whose bf16 rounding the student's
    // ddp_sync_params gives every replica.
    float **master = bf16 ? gpt_alloc_units(model, MEM_OPTIM, "master") : NULL;
    if (master) gpt_init_units(model, master);
    OptimConfig optim = optim_from_args(&a);
    Data data;
    data_open(&data, a.data, a.vocab, a.seq, a.batch, a.seed);
    int *x = malloc((size_t)micro_rows * a.seq * sizeof *x), *y = malloc((size_t)micro_rows * a.seq * sizeof *y);

    ddp_sync_params(&d);
    double *init_sumsq = malloc((size_t)N * sizeof *init_sumsq);
    harness_sumsq_per_rank(c, model, d.params, d.param_type, init_sumsq);

    DumpWriter *dw = dump_create(r == 0 ? ref.own_dump : NULL);
    char extra[160];
    snprintf(extra, sizeof extra, "strategy %s\nbucket_kb %d\naccum %d\n", strategy, bucket_kb, accum);
    dump_run_meta(dw, c, "lab02", &a, extra);
    // The order of events, per step, for the grader (overlap is judged from
    // it, not from timings): in the last micro-batch, how many units began
    // their backward pass with communication in flight, and whether unit 0
    // (the last to run) did; how many operations were still in flight when
    // the optimizer began; the tracked bytes live at the end of the step.
    Lab02End end = {.d = &d, .init_sumsq = init_sumsq, .acts_expected = acts_expected, .steps = a.steps};
    size_t nsteps = (size_t)(a.steps ? a.steps : 1);
    end.overlap_units = calloc(nsteps, sizeof *end.overlap_units);
    end.overlap_unit0 = calloc(nsteps, sizeof *end.overlap_unit0);
    end.inflight_at_optim = calloc(nsteps, sizeof *end.inflight_at_optim);
    end.live_after_step = calloc(nsteps, sizeof *end.live_after_step);
    // The gradient of the mean loss over this rank's rows: each micro-batch
    // contributes its share, so the micro-batches add up to it.
    float scale = 1.0f / (float)((size_t)rows * a.seq);
    HarnessRun run = harness_run(c, &a, &ref, "lab02", verdict_of_lab_run);

    for (int s = 0; s < a.steps; s++) {
        harness_step_begin(&run);
        mem_zero(d.grad_flat, model->nparams * comm_type_size(d.grad_type));
        double loss = 0;
        for (int k = 0; k < accum; k++) {
            bool last = k == accum - 1;
            int r0 = row0 + k * micro_rows;
            data_slice(&data, s, r0, micro_rows, 0, a.seq, x, y);
            gpt_set_batch(model, x, y, s, r0, scale);
            trace_begin("forward", "compute");
            loss += gpt_forward(model, d.params) / accum;
            trace_end();
            for (int u = model->nunits - 1; u >= 0; u--) {
                if (last && comm_inflight() > 0) {
                    end.overlap_units[s]++;
                    if (u == 0) end.overlap_unit0[s] = 1;
                }
                trace_begin(model->units[u].name, "backward");
                gpt_unit_backward(model, u, d.params[u], d.grads[u]);
                trace_end();
                comm_progress();   // let buckets in flight move while we compute
                ddp_unit_done(&d, u, last);
            }
            ddp_backward_done(&d, last);
        }
        if (s == 0 && r == 0) gpt_dump_units_of(model, dw, "grad/first", d.grads, gpt_grad_precision(model));   // the averaged first gradient
        end.inflight_at_optim[s] = comm_inflight();
        trace_begin("optimizer", "compute");
        for (int u = 0; u < model->nunits; u++) {
            size_t n = model->units[u].size;
            if (bf16 && cfg.grads_fp32)
                optim_step_fp32_grads(&optim, s + 1, d.params[u], d.grads[u], master[u], m[u], v[u], n);
            else
                optim_step(&optim, s + 1, bf16, d.params[u], d.grads[u], master ? master[u] : NULL, m[u], v[u], n);
        }
        trace_end();
        end.live_after_step[s] = (double)mem_live_total();
        // The loss of the step is the mean over the global batch: the average
        // of the ranks' means.
        harness_step_end(&run, s, loss, N);
    }

    // The end. Memory first: what follows (comparing with the reference) is
    // not the lab's.
    MemReport mem = mem_report();
    end.sumsq = malloc((size_t)N * sizeof *end.sumsq);
    harness_sumsq_per_rank(c, model, d.params, d.param_type, end.sumsq);
    CommStats st = comm_stats();
    double psi = (double)model->nparams;
    harness_print_mean_step(&run, true);
    double G = (double)comm_type_size(d.grad_type), P = (double)comm_type_size(d.param_type);
    char bcast[48] = "";
    if (N > 1) snprintf(bcast, sizeof bcast, ", plus %g psi for the first broadcast", P);
    print0("each rank sent %s in all (bus bytes; the ring model: 2(N-1)/N x %g psi = %s per step%s)\n",
           core_fmt_bytes((double)comm_stats_total_bus_bytes(&st), b1, sizeof b1), G,
           core_fmt_bytes(2.0 * (N - 1) / N * G * psi, desc, sizeof desc), bcast);
    harness_print_memory(c, &mem);
    // The parameters the optimizer holds: fp32 ones, or bf16's master copy.
    float **held = master ? master : (float **)d.params;
    harness_finish(&run, &(HarnessEnd){.dw = dw, .mem = &mem, .model = model, .params = r == 0 ? held : NULL,
                                       .print_more = lab02_print_more, .dump_more = lab02_dump_more, .ctx = &end});
}
