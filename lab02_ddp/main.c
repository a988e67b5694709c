// main.c: lab02's harness. Students do not edit it.
//
//   mpirun -np 4 build/lab02 --strategy naive|flat|bucketed [--bucket-kb K] [--accum K]
//
// Trains the course's GPT data-parallel: the global batch of the reference
// is split into one block of rows per rank, each rank runs its rows through
// its own replica, and the student's hooks (ddp.c) keep the replicas equal.
// Every step prints the loss beside single-device training's, and the time
// split into compute, communication and the communication left exposed.
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
                     .V = a.vocab, .dropout = (float)a.dropout, .seed = a.seed};
    Gpt *model = gpt_create(&cfg);
    gpt_alloc_acts(model);
    // What the model's shape needs for activations, measured before any of
    // the student's code runs: the grader bounds the total by the formula
    // plus this, not by whatever ends up tracked as ACTS.
    double acts_expected = (double)mem_live(MEM_ACTS);
    char desc[96], b1[32];
    print0("[lab02] %d rank%s · %s · %s · %s · %s · batch %d = %d ranks x %d rows%s\n", N,
           N == 1 ? "" : "s", mem_device_name(), comm_backend_name(), gpt_describe(model, desc, sizeof desc),
           strategy, a.batch, N, rows, accum > 1 ? ", in micro-batches" : "");
    if (strat == DDP_BUCKETED) print0("buckets of %d KiB, all-reduced while the backward pass goes on\n", bucket_kb);

    // Parameters: each rank starts from its own seed (rank 0's is the
    // reference's), so a replica that was never synchronised shows.
    Ddp d = {.comm = c, .model = model, .nunits = model->nunits, .nparams = model->nparams,
             .strategy = strat, .bucket_floats = (size_t)bucket_kb * 1024 / sizeof(float)};
    d.params = gpt_alloc_units(model, MEM_PARAMS, "params");
    GptConfig own = cfg;
    own.seed = a.seed + 1000003ull * (uint64_t)r;
    Gpt *init = gpt_create(&own);
    gpt_init_units(init, d.params);
    gpt_free(init);
    d.grad_flat = mem_alloc_floats(model->nparams, MEM_GRADS, "gradients");
    d.grads = calloc((size_t)model->nunits, sizeof *d.grads);
    d.unit_offset = calloc((size_t)model->nunits, sizeof *d.unit_offset);
    for (int u = 0, off = 0; u < model->nunits; off += (int)model->units[u].size, u++) {
        d.unit_offset[u] = (size_t)off;
        d.grads[u] = d.grad_flat + off;
    }
    d.bucket_end = model->nparams;
    float **m = gpt_alloc_units(model, MEM_OPTIM, "adam m"), **v = gpt_alloc_units(model, MEM_OPTIM, "adam v");
    OptimConfig optim = optim_from_args(&a);
    Data data;
    data_open(&data, a.data, a.vocab, a.seq, a.batch, a.seed);
    int *x = malloc((size_t)micro_rows * a.seq * sizeof *x), *y = malloc((size_t)micro_rows * a.seq * sizeof *y);

    ddp_sync_params(&d);
    double *init_sumsq = malloc((size_t)N * sizeof *init_sumsq);
    harness_sumsq_per_rank(c, model, d.params, init_sumsq);

    DumpWriter *dw = dump_create(r == 0 ? ref.own_dump : NULL);
    char extra[160];
    snprintf(extra, sizeof extra, "strategy %s\nbucket_kb %d\naccum %d\n", strategy, bucket_kb, accum);
    dump_run_meta(dw, c, "lab02", &a, extra);
    float *losses = calloc((size_t)(a.steps ? a.steps : 1), sizeof *losses);
    // The order of events, per step, for the grader (overlap is judged from
    // it, not from timings): in the last micro-batch, how many units began
    // their backward pass with communication in flight, and whether unit 0
    // (the last to run) did; how many operations were still in flight when
    // the optimizer began; the tracked bytes live at the end of the step.
    int64_t *overlap_units = calloc((size_t)(a.steps ? a.steps : 1), sizeof *overlap_units);
    int64_t *overlap_unit0 = calloc((size_t)(a.steps ? a.steps : 1), sizeof *overlap_unit0);
    int64_t *inflight_at_optim = calloc((size_t)(a.steps ? a.steps : 1), sizeof *inflight_at_optim);
    double *live_after_step = calloc((size_t)(a.steps ? a.steps : 1), sizeof *live_after_step);
    // The gradient of the mean loss over this rank's rows: each micro-batch
    // contributes its share, so the micro-batches add up to it.
    float scale = 1.0f / (float)((size_t)rows * a.seq);
    double total_time = 0, total_busy = 0, total_blocked = 0, total_sent = 0;

    for (int s = 0; s < a.steps; s++) {
        CommStats before = comm_stats();
        double t0 = core_now();
        mem_zero(d.grad_flat, model->nparams * sizeof(float));
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
                    overlap_units[s]++;
                    if (u == 0) overlap_unit0[s] = 1;
                }
                trace_begin(model->units[u].name, "backward");
                gpt_unit_backward(model, u, d.params[u], d.grads[u]);
                trace_end();
                comm_progress();   // let buckets in flight move while we compute
                ddp_unit_done(&d, u, last);
            }
            ddp_backward_done(&d, last);
        }
        if (s == 0) {   // the averaged gradient of the first step, for the grader
            if (r == 0) gpt_dump_units(model, dw, "grad/first", d.grads);
        }
        inflight_at_optim[s] = comm_inflight();
        trace_begin("optimizer", "compute");
        for (int u = 0; u < model->nunits; u++)
            optim_update(&optim, s + 1, d.params[u], d.grads[u], m[u], v[u], model->units[u].size);
        trace_end();
        double dt = core_now() - t0;
        live_after_step[s] = (double)mem_live_total();
        CommStats after = comm_stats();
        // The loss of the step is the mean over the global batch: the average
        // of the ranks' means (bookkeeping, not counted as communication).
        double global_loss = comm_sum_double(c, loss) / N;
        double busy = comm_max_double(c, after.seconds_busy - before.seconds_busy);
        double blocked = comm_max_double(c, after.seconds_blocked - before.seconds_blocked);
        double sent = comm_max_double(c, (double)(comm_stats_total_bus_bytes(&after) -
                                                   comm_stats_total_bus_bytes(&before)));
        dt = comm_max_double(c, dt);
        losses[s] = (float)global_loss;
        if (s > 0) total_time += dt, total_busy += busy, total_blocked += blocked, total_sent += sent;
        harness_print_step(&ref, s, a.steps, global_loss, dt, busy, blocked, (double)a.batch * a.seq);
    }

    // The end. Memory first: what follows (comparing with the reference) is
    // not the lab's.
    MemReport mem = mem_report();
    double *sumsq = malloc((size_t)N * sizeof *sumsq);
    harness_sumsq_per_rank(c, model, d.params, sumsq);
    bool replicas_equal = true;
    for (int q = 1; q < N; q++) replicas_equal &= sumsq[q] == sumsq[0];
    char worst[96] = "-";
    double perr = r == 0 ? harness_param_error(&ref, model, d.params, worst, sizeof worst) : 0;
    comm_broadcast_host(c, &perr, sizeof perr, 0);
    double loss_err = 0;
    for (int s = 0; ref.on && s < a.steps; s++) loss_err = fmax(loss_err, fabs(losses[s] - ref.loss[s]));
    CommStats st = comm_stats();
    double psi = (double)model->nparams;
    if (a.steps > 1) {
        // A share hidden of no traffic means nothing (one rank: its
        // all-reduces send no byte), so it is printed only when bytes moved.
        char hidden[32] = "";
        if (total_sent > 0 && total_busy > 0)
            snprintf(hidden, sizeof hidden, ": %.0f%% hidden", 100.0 * (1 - total_blocked / total_busy));
        print0("mean over steps 2..%d: %.1f ms/step (compute %.1f, comm %.1f, exposed %.1f%s)\n", a.steps,
               total_time / (a.steps - 1) * 1e3, (total_time - total_blocked) / (a.steps - 1) * 1e3,
               total_busy / (a.steps - 1) * 1e3, total_blocked / (a.steps - 1) * 1e3, hidden);
    }
    print0("each rank sent %s in all (bus bytes; the ring model: 2(N-1)/N x 4 psi = %s per step%s)\n",
           core_fmt_bytes((double)comm_stats_total_bus_bytes(&st), b1, sizeof b1),
           core_fmt_bytes(2.0 * (N - 1) / N * 4 * psi, desc, sizeof desc),
           N > 1 ? ", plus 4 psi for the first broadcast" : "");
    mem_print_table(c, &mem);
    harness_print_unfinished();
    // How far from single-device training, for the eye; whether that is
    // close enough is the verdict's to say, with the grader's tolerances.
    if (ref.on)
        print0("against single-device training: loss |d| <= %.1e, parameters rel. error %.1e (largest "
               "difference in %s)\n", loss_err, perr, worst);
    if (!replicas_equal) print0("the replicas differ from each other after training\n");

    // The dump for the grader.
    uint64_t steps = (uint64_t)a.steps, nr = (uint64_t)N;
    dump_f32(dw, "loss", losses, 1, &steps);
    if (r == 0) gpt_dump_units(model, dw, "param/final", d.params);
    dump_f64(dw, "check/param_sumsq_per_rank", sumsq, 1, &nr);
    dump_f64(dw, "check/init_sumsq_per_rank", init_sumsq, 1, &nr);
    // The events of each step, over ranks: the smallest overlap (one rank
    // without it is what the grader looks for), the largest in flight and live.
    for (int s = 0; s < a.steps; s++) {
        overlap_units[s] = -(int64_t)comm_max_double(c, -(double)overlap_units[s]);
        overlap_unit0[s] = -(int64_t)comm_max_double(c, -(double)overlap_unit0[s]);
        inflight_at_optim[s] = (int64_t)comm_max_double(c, (double)inflight_at_optim[s]);
        live_after_step[s] = comm_max_double(c, live_after_step[s]);
    }
    dump_scalar_i64(dw, "ddp/strategy", strat);
    dump_scalar_i64(dw, "ddp/bucket_floats", (int64_t)d.bucket_floats);
    dump_scalar_i64(dw, "ddp/unit0_floats", (int64_t)model->units[0].size);
    dump_i64(dw, "ddp/overlap_units", overlap_units, 1, &steps);
    dump_i64(dw, "ddp/overlap_unit0", overlap_unit0, 1, &steps);
    dump_i64(dw, "ddp/inflight_at_optimizer", inflight_at_optim, 1, &steps);
    dump_f64(dw, "mem/live_after_step", live_after_step, 1, &steps);
    dump_scalar_f64(dw, "mem/acts_expected", acts_expected);
    harness_dump_unfinished(dw);
    dump_rank_stats(dw, c, &mem);
    dump_close(dw);
    trace_write(c);
    // The grader's own checks on this dump: what build/grade will say.
    int verdict = verdict_of_lab_run(c, "lab02", &ref);

    harness_reference_free(&ref);
    free(x);
    free(y);
    free(losses);
    free(overlap_units);
    free(overlap_unit0);
    free(inflight_at_optim);
    free(live_after_step);
    free(sumsq);
    free(init_sumsq);
    data_close(&data);
    gpt_free_units(model, m);
    gpt_free_units(model, v);
    gpt_free_units(model, d.params);
    mem_free(d.grad_flat);
    free(d.grads);
    free(d.unit_offset);
    gpt_free(model);
    comm_finalize();
    harness_exit(verdict ? 1 : 0);
}
