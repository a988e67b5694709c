// main.c: lab05's harness. Students do not edit it.
//
//   mpirun -np 4 build/lab05 --schedule gpipe|1f1b --micro m [--pp p] [--figure FILE.svg]
//
// Trains the course's GPT cut by depth over p stages (the student's
// pipeline.c orders the work and moves the data), on a grid of N / p
// data-parallel pipelines when p < N. Every step prints the loss beside
// single-device training's; at the end, each stage's units, busy and idle
// time, activation memory beside the schedule's bound, the bubble measured
// two ways beside (p - 1) / (m + p - 1), and the schedule drawn. The
// harness's work on a micro-batch is pipeline_given.c's.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "comm.h"
#include "core.h"
#include "data.h"
#include "dump.h"
#include "gpt.h"
#include "harness.h"
#include "mem.h"
#include "optim.h"
#include "pipeline.h"
#include "pipeline_given.h"
#include "pp_schedule.h"
#include "schedule_given.h"
#include "trace.h"
#include "verdict.h"

// ---- the student's unfinished functions ------------------------------------

static const char *const HOOKS[] = {"pp_partition",      "pp_send_activations", "pp_recv_activations",
                                    "pp_send_gradients", "pp_recv_gradients",   "pp_gpipe",
                                    "pp_1f1b"};

void lab_todo(const char *function) { harness_todo(function); }

// Units gathered whole on the host (pprun_gather_units), freed.
static void free_host_units(const Gpt *m, float **units) {
    for (int u = 0; units && u < m->nunits; u++) free(units[u]);
    free(units);
}

// ---- main ------------------------------------------------------------------

int main(int argc, char **argv) {
    // The hooks are fixed before any student code runs (harness.h).
    harness_hooks(HOOKS, (int)(sizeof HOOKS / sizeof HOOKS[0]));
    Args a = args_defaults();
    int pp_size = 0, micro = 4;
    const char *schedule = "1f1b", *figure = NULL;
    bool no_ref = false;
    ArgExtra extras[] = {
        {"schedule", ARG_CHOICE, &schedule, "the pipeline schedule", 0, 0, "gpipe|1f1b", NULL},
        {"micro", ARG_INT, &micro, "m: micro-batches per step (m divides a pipeline's rows of the batch)", 1,
         PP_MAX_MICRO, NULL, NULL},
        {"pp", ARG_INT, &pp_size, "p: stages per pipeline (default: all ranks); the rest form data-parallel "
         "pipelines", 1, 1 << 16, NULL, NULL},
        {"no-ref", ARG_FLAG, &no_ref, "skip the single-device reference run", 0, 0, NULL, NULL},
        {"figure", ARG_OUTPUT, &figure, "draw the schedule, replayed, as SVG", 1, 0, NULL, NULL},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    args_parse(&a, argc, argv,
               "lab05: pipeline parallelism (GPipe and 1F1B over micro-batches), the bubble measured and drawn, "
               "checked against single-device training.",
               extras);
    Comm *c = harness_start(&a, &argc, &argv);
    int N = comm_size(c), r = comm_rank(c), nunits = a.layers + 2;
    int p = pp_size ? pp_size : N;
    if (N % p)
        core_usage_error("--pp %d does not divide %d ranks: the ranks form pipelines of %d stages; use -np %d, or "
                         "--pp among the divisors of %d", p, N, p, (N / p + 1) * p, N);
    if (p > nunits)
        core_usage_error("%d stages for %d units (the embeddings, %d blocks, the head): a stage needs a unit; use "
                         "--pp %d or fewer, or --layers %d", p, nunits, a.layers, nunits, p - 2);
    int dp = N / p, dp_rank = r / p;
    int row0, rows;   // this pipeline's rows of the batch
    data_rank_rows(a.batch, dp, dp_rank, &row0, &rows);
    if (rows % micro)
        core_usage_error("--micro %d does not divide a pipeline's %d rows of the batch (%d rows over %d "
                         "pipeline%s); use --micro among the divisors of %d", micro, rows, a.batch, dp,
                         dp == 1 ? "" : "s", rows);
    bool gpipe = strcmp(schedule, "gpipe") == 0;

    harness_check_fits(&a, rows, !no_ref);

    // The single-device reference, first (rank 0; the others wait).
    Reference ref = harness_reference(c, &a, !no_ref);

    // The grid: p consecutive ranks form a pipeline; ranks p apart hold the
    // same stage and average its gradients.
    Comm *ppc = comm_split(c, dp_rank, r % p), *dpc = comm_split(c, r % p, dp_rank);
    GptConfig cfg = {.B = rows / micro, .T = a.seq, .C = a.dim, .NH = a.heads, .L = a.layers, .V = a.vocab,
                     .dropout = (float)a.dropout, .seed = a.seed};
    Gpt *model = gpt_create(&cfg);
    int *x = malloc((size_t)rows * a.seq * sizeof *x), *y = malloc((size_t)rows * a.seq * sizeof *y);
    CHECK(x && y, "out of memory");
    PpRun run;
    pprun_init(&run, model, row0, x, y);
    Pp pp = {.group = ppc, .p = p, .s = r % p, .m = micro, .rows = rows, .micro_rows = rows / micro, .T = a.seq,
             .C = a.dim, .run = &run};

    // The stages' units: the student's partition, checked over the pipeline;
    // then the activations' scratch, measured, and this stage's parameters,
    // gradients and moments, its units whole.
    pp_partition(nunits, p, pp.s, &pp.u0, &pp.u1);
    pprun_check_partition(&pp, nunits);
    pprun_alloc_stage(&pp);
    int bound_k = gpipe ? micro : (p - pp.s < micro ? p - pp.s : micro);
    char desc[96];
    print0("[lab05] %d rank%s · %s · %s · %s · %s, %d micro-batch%s of %d row%s · %d stages x %d data-parallel\n",
           N, N == 1 ? "" : "s", mem_device_name(), comm_backend_name(), gpt_describe(model, desc, sizeof desc),
           gpipe ? "GPipe" : "1F1B", micro, micro == 1 ? "" : "es", pp.micro_rows, pp.micro_rows == 1 ? "" : "s", p,
           dp);

    OptimConfig optim = optim_from_args(&a);
    Data data;
    data_open(&data, a.data, a.vocab, a.seq, a.batch, a.seed);
    float *losses = calloc((size_t)(a.steps ? a.steps : 1), sizeof *losses);
    DumpWriter *dw = dump_create(r == 0 ? ref.own_dump : NULL);
    char extra[160];
    snprintf(extra, sizeof extra, "schedule %s\nmicro %d\npp %d\ndp %d\n", schedule, micro, p, dp);
    dump_run_meta(dw, c, "lab05", &a, extra);
    double total_time = 0, total_idle = 0;
    mem_reset_peaks();
    comm_stats_reset();
    harness_seal_measures();

    for (int s = 0; s < a.steps; s++) {
        CommStats before_step = comm_stats();
        double t0 = core_now();
        data_slice(&data, s, row0, rows, 0, a.seq, x, y);
        pprun_step_begin(&pp, s);
        (gpipe ? pp_gpipe : pp_1f1b)(&pp);
        pprun_step_end(&pp);   // what the schedule left behind: counted for the grader, then tidied
        // Data parallelism across pipelines, once a step after the last
        // backward pass: the same stage on ranks p apart.
        for (int u = pp.u0; dp > 1 && u < pp.u1; u++)
            comm_all_reduce_avg(dpc, run.grads[u], model->units[u].size);
        // The first gradient, whole, for the grader.
        if (s == 0) pprun_dump_units(&pp, dw, "grad/first", run.grads);
        trace_begin("optimizer", "compute");
        for (int u = pp.u0; u < pp.u1; u++)
            optim_update(&optim, s + 1, run.params[u], run.grads[u], run.m[u], run.v[u], model->units[u].size);
        trace_end();
        double mine = core_now() - t0, dt = comm_max_double(c, mine);
        CommStats after_step = comm_stats();
        // The loss is the last stage's; the mean over pipelines.
        double global = comm_sum_double(c, pp.s == p - 1 ? run.loss : 0) / dp;
        losses[s] = (float)global;
        if (s > 0) total_time += dt, total_idle += dt - run.busy;
        harness_print_step(&ref, s, a.steps, global, dt,
                           comm_max_double(c, after_step.seconds_busy - before_step.seconds_busy),
                           comm_max_double(c, after_step.seconds_blocked - before_step.seconds_blocked),
                           (double)a.batch * a.seq);
    }
    MemReport mem = mem_report();
    CommStats st = comm_stats();

    // The last step's events, every stage's, replayed on the pipeline's
    // first rank: with equal stages (the schedule's own bubble) and with the
    // measured durations.
    int ne = run.nevents, *counts = malloc((size_t)p * sizeof *counts);
    comm_all_gather_host(ppc, &ne, sizeof ne, counts);
    int most_events = 0;
    for (int q = 0; q < p; q++) most_events = counts[q] > most_events ? counts[q] : most_events;
    PpEvent *flat = calloc((size_t)p * (most_events ? most_events : 1), sizeof *flat);
    PpEvent *mine_ev = calloc((size_t)(most_events ? most_events : 1), sizeof *mine_ev);
    memcpy(mine_ev, run.events, (size_t)ne * sizeof *mine_ev);
    comm_all_gather_host(ppc, mine_ev, (size_t)(most_events ? most_events : 1) * sizeof *mine_ev, flat);
    PpEvent *ideal_rows[64], *measured_rows[64];
    PpEvent *flat2 = malloc((size_t)p * (most_events ? most_events : 1) * sizeof *flat2);
    memcpy(flat2, flat, (size_t)p * (most_events ? most_events : 1) * sizeof *flat2);
    for (int q = 0; q < p; q++)
        ideal_rows[q] = flat + (size_t)q * (most_events ? most_events : 1),
        measured_rows[q] = flat2 + (size_t)q * (most_events ? most_events : 1);
    double span_ideal = 0, span_measured = 0;
    double bubble_ideal = pp_replay(p, ideal_rows, counts, true, &span_ideal);
    double bubble_measured = pp_replay(p, measured_rows, counts, false, &span_measured);
    double formula = pp_bubble_formula(p, micro);

    // Per stage: units, busy and idle, activations against the bound.
    typedef struct {
        int u0, u1, max_live;
        double idle, busy, acts_peak, acts_bound, acts_set, acts_scratch;
    } StageLine;
    StageLine line = {pp.u0, pp.u1, run.max_live_ever, a.steps > 1 ? total_idle / (a.steps - 1) : 0,
                      a.steps > 1 ? (total_time - total_idle) / (a.steps - 1) : 0, mem.peak[MEM_ACTS],
                      run.acts_scratch + bound_k * run.acts_set, run.acts_set, run.acts_scratch};
    StageLine *lines = malloc((size_t)N * sizeof *lines);
    comm_all_gather_host(c, &line, sizeof line, lines);
    char b1[32], b2[32], b3[32];
    if (a.steps > 1) print0("mean over steps 2..%d: %.1f ms/step\n", a.steps, total_time / (a.steps - 1) * 1e3);
    print0("\nper stage (pipeline 0), %s, p = %d, m = %d:\n", gpipe ? "GPipe" : "1F1B", p, micro);
    print0("  %-6s %-14s %9s %9s %10s %10s   %s\n", "stage", "units", "busy", "idle", "ACTS peak", "bound",
           gpipe ? "m micro-batches' activations" : "min(m, p - s) micro-batches' activations");
    for (int q = 0; q < p; q++) {
        const StageLine *l = &lines[q];
        char units[48];
        snprintf(units, sizeof units, "%s..%s", model->units[l->u0].name, model->units[l->u1 - 1].name);
        print0("  %-6d %-14s %7.1f ms %6.1f ms %10s %10s   scratch %s + %d x %s (at most %d alive)\n", q, units,
               l->busy * 1e3, l->idle * 1e3, core_fmt_bytes(l->acts_peak, b1, 32), core_fmt_bytes(l->acts_bound, b2, 32),
               core_fmt_bytes(l->acts_scratch, b3, 32), gpipe ? micro : (p - q < micro ? p - q : micro),
               core_fmt_bytes(l->acts_set, desc, sizeof desc), l->max_live);
    }
    double wall_idle = 0;
    for (int q = 0; q < p; q++) wall_idle += lines[q].busy + lines[q].idle > 0 ? lines[q].idle / (lines[q].busy + lines[q].idle) / p : 0;
    print0("\nthe bubble (idle share of the stages' time):\n");
    print0("  (p - 1) / (m + p - 1)                   %5.1f%%\n", 100 * formula);
    print0("  replayed, equal stages (F 1, B 2)       %5.1f%%   the schedule's own\n", 100 * bubble_ideal);
    print0("  replayed, measured durations            %5.1f%%   one core per stage; unequal stages add to it\n",
           100 * bubble_measured);
    print0("  wall clock                              %5.1f%%   %d ranks on %d cores: the OS blurs it\n",
           100 * wall_idle, N, (int)sysconf(_SC_NPROCESSORS_ONLN));
    if (bubble_ideal >= 0) {
        print0("\nthe last step's schedule, replayed with equal stages (F1 = micro-batch 1 forward, B1B1 its "
               "backward):\n");
        pp_draw_ascii(p, ideal_rows, counts, span_ideal);
    } else {
        print0("\nthe schedule cannot be replayed: a stage waits for a pass no stage ran\n");
    }
    if (figure && r == 0) {
        char caption[160];
        snprintf(caption, sizeof caption, "%s, p = %d stages, m = %d micro-batches: bubble %.1f%% (formula %.1f%%)",
                 gpipe ? "GPipe" : "1F1B", p, micro, 100 * bubble_ideal, 100 * formula);
        char label[160];
        int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
        snprintf(label, sizeof label, "replayed on one core per stage, with the durations measured with %d ranks on "
                 "%d core%s%s", N, cores, cores == 1 ? "" : "s", N > cores ? " (ranks shared cores: slower passes)" : "");
        pp_draw_svg(figure, p, ideal_rows, measured_rows, counts, span_ideal > 0 ? span_ideal : 1,
                    span_measured > 0 ? span_measured : 1, caption, label);
        print0("wrote %s\n", figure);
    }
    harness_print_memory(c, &mem);

    // Afterwards, not measured: the whole model gathered on rank 0.
    float **whole = pprun_gather_units(&pp, run.params);
    float **whole_m = pprun_gather_units(&pp, run.m);
    float **whole_v = pprun_gather_units(&pp, run.v);
    double loss_err = 0;
    for (int s = 0; ref.on && s < a.steps; s++) loss_err = fmax(loss_err, fabs(losses[s] - ref.loss[s]));
    char worst[96] = "-";
    double perr = -1;
    if (r == 0 && ref.on) {
        float **dev = gpt_alloc_units(model, MEM_OTHER, "final params");
        for (int u = 0; u < nunits; u++) mem_from_host(dev[u], whole[u], model->units[u].size * sizeof(float));
        perr = harness_param_error(&ref, model, dev, worst, sizeof worst);
        gpt_free_units(model, dev);
    }
    harness_print_unfinished();
    if (ref.on)
        print0("against single-device training: loss |d| <= %.1e, parameters rel. error %.1e (largest difference "
               "in %s)\n", loss_err, perr, worst);

    // The dump for the grader.
    uint64_t steps = (uint64_t)a.steps, nr = (uint64_t)N;
    dump_f32(dw, "loss", losses, 1, &steps);
    if (r == 0) {
        gpt_dump_host_units(model, dw, "param/final", whole);
        gpt_dump_host_units(model, dw, "optim/m", whole_m);
        gpt_dump_host_units(model, dw, "optim/v", whole_v);
    }
    dump_scalar_i64(dw, "pp/p", p);
    dump_scalar_i64(dw, "pp/m", micro);
    dump_scalar_i64(dw, "pp/dp", dp);
    dump_scalar_i64(dw, "pp/gpipe", gpipe);
    dump_scalar_i64(dw, "pp/stage_units_most", run.most);
    dump_scalar_i64(dw, "pp/stage_units_least", run.least);
    dump_scalar_f64(dw, "pp/bubble_formula", formula);
    dump_scalar_f64(dw, "pp/bubble_replay", bubble_ideal);
    dump_scalar_f64(dw, "pp/bubble_replay_measured", bubble_measured);
    dump_scalar_f64(dw, "pp/bubble_wall", wall_idle);
    dump_scalar_i64(dw, "pp/zeroed_between", (int64_t)comm_max_double(c, run.zeroed_between));
    dump_scalar_i64(dw, "pp/unfreed", (int64_t)comm_max_double(c, run.unfreed));
    dump_scalar_i64(dw, "pp/unwaited", (int64_t)comm_max_double(c, run.unwaited));
    // Per rank: its stage, units, the most micro-batches alive, and the
    // activation bytes the bound is made of.
    double *per = malloc((size_t)N * 7 * sizeof *per);
    for (int q = 0; q < N; q++) {
        const StageLine *l = &lines[q];
        double v[7] = {q % p, l->u0, l->u1, l->max_live, l->acts_scratch, l->acts_set, 0};
        memcpy(per + 7 * q, v, sizeof v);
    }
    uint64_t shape[2] = {nr, 7};
    dump_f64(dw, "pp/rank_stage", per, 2, shape);
    // The last step's events of pipeline 0, for the grader's own replay:
    // per stage and event, the kind (0 F, 1 B) and the micro-batch.
    int64_t *ev = calloc((size_t)p * (most_events ? most_events : 1) * 2, sizeof *ev);
    for (int q = 0; q < p; q++)
        for (int k = 0; k < counts[q]; k++) {
            ev[2 * ((size_t)q * most_events + k)] = ideal_rows[q][k].kind;
            ev[2 * ((size_t)q * most_events + k) + 1] = ideal_rows[q][k].mb;
        }
    // A stage with fewer events is padded with kind -1 (also when none ran any).
    int width = most_events ? most_events : 1;
    for (int q = 0; q < p; q++)
        for (int k = counts[q]; k < width; k++) ev[2 * ((size_t)q * width + k)] = -1;
    uint64_t eshape[3] = {(uint64_t)p, (uint64_t)width, 2};
    dump_i64(dw, "pp/events", ev, 3, eshape);
    // The last step's log of every rank (comm.h's events, the passes among
    // them), for the grader's replay of what each pass waited for: per rank
    // and event, its kind, op, peer, place and group (kind -1 past the end).
    int nlog = run.nlog < PPRUN_MAX_LOG ? run.nlog : PPRUN_MAX_LOG, *nlogs = malloc((size_t)N * sizeof *nlogs), most_log = 1;
    comm_all_gather_host(c, &nlog, sizeof nlog, nlogs);
    for (int q = 0; q < N; q++) most_log = nlogs[q] > most_log ? nlogs[q] : most_log;
    CommEvent *logs = malloc((size_t)N * most_log * sizeof *logs), *mine_log = calloc((size_t)most_log, sizeof *mine_log);
    memcpy(mine_log, run.log, (size_t)nlog * sizeof *mine_log);
    comm_all_gather_host(c, mine_log, (size_t)most_log * sizeof *mine_log, logs);
    int64_t *tl = malloc((size_t)N * most_log * 5 * sizeof *tl);
    for (int q = 0; q < N; q++)
        for (int k = 0; k < most_log; k++) {
            const CommEvent *e = &logs[(size_t)q * most_log + k];
            int64_t v[5] = {e->kind, e->op, e->peer, e->seq, (int64_t)e->group};
            if (k >= nlogs[q]) v[0] = -1;
            memcpy(tl + ((size_t)q * most_log + k) * 5, v, sizeof v);
        }
    uint64_t tshape[3] = {nr, (uint64_t)most_log, 5};
    dump_i64(dw, "pp/timeline", tl, 3, tshape);
    dump_scalar_i64(dw, "pp/timeline_lost", (int64_t)comm_max_double(c, run.nlog > PPRUN_MAX_LOG));
    free(tl);
    free(logs);
    free(mine_log);
    free(nlogs);
    dump_scalar_f64(dw, "pp/stage_params", comm_max_double(c, run.stage_params));
    harness_dump_unfinished(dw);
    dump_rank_stats(dw, c, &mem);
    dump_close(dw);
    harness_trace_write(c);
    // The grader's own checks on this dump: what build/grade will say.
    int verdict = verdict_of_lab_run(c, "lab05", &ref);
    (void)st;

    free_host_units(model, whole);
    free_host_units(model, whole_m);
    free_host_units(model, whole_v);
    free(per);
    free(ev);
    free(lines);
    free(flat);
    free(flat2);
    free(mine_ev);
    free(counts);
    harness_reference_free(&ref);
    free(x);
    free(y);
    free(losses);
    data_close(&data);
    for (int u = pp.u0; u < pp.u1; u++) {
        mem_free(run.params[u]);
        mem_free(run.grads[u]);
        mem_free(run.m[u]);
        mem_free(run.v[u]);
    }
    free(run.params);
    free(run.grads);
    free(run.m);
    free(run.v);
    gpt_free(model);
    free(run.log);
    comm_free(ppc);
    comm_free(dpc);
    comm_finalize();
    harness_exit(verdict ? 1 : 0);
}
