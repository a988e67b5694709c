// main.c: lab05's harness. Students do not edit it.
//
//   mpirun -np 4 build/lab05 --schedule gpipe|1f1b|zb-h1|zb-h2|interleaved --micro m [--virtual v] [--pp p]
//                            [--precision bf16] [--recompute full] [--figure FILE.svg]
//
// Trains the course's GPT cut by depth over p stages (the student's
// pipeline.c orders the work and moves the data), on a grid of N / p
// data-parallel pipelines when p < N, in fp32 or in bf16 mixed precision
// (bf16 weights, gradients and messages between the stages, an fp32 master
// copy and moments), with full recomputation at the stage boundaries (the
// schedule's: GPipe as published) or the model's selective one; or on the
// backward pass split into B and W (the zero-bubble schedules). The
// interleaved schedule (Narayanan et al. 2021) gives each rank v model
// chunks, virtual stages s, s + p, ... of the p v the model is cut into.
// Every step prints the loss beside single-device training's; at the end,
// each stage's units, busy and idle time, activation memory beside the
// schedule's bound, the bubble measured two ways beside the schedule's
// formula, and the schedule drawn. The harness's work on a micro-batch is
// pipeline_given.c's; the end's lines and dump entries are
// report_given.c's.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "comm.h"
#include "core.h"
#include "data.h"
#include "dump.h"
#include "gpt.h"
#include "harness.h"
#include "mem.h"
#include "ops.h"
#include "optim.h"
#include "pipeline.h"
#include "pipeline_given.h"
#include "report_given.h"
#include "trace.h"
#include "verdict.h"

// ---- the student's unfinished functions ------------------------------------

static const char *const HOOKS[] = {"pp_partition",      "pp_send_activations", "pp_recv_activations",
                                    "pp_send_gradients", "pp_recv_gradients",   "pp_gpipe",
                                    "pp_1f1b",           "pp_zb_h1",            "pp_zb_h2",
                                    "pp_virtual_stage",  "pp_interleaved"};

void lab_todo(const char *function) { harness_todo(function); }

// ---- main ------------------------------------------------------------------

int main(int argc, char **argv) {
    // The hooks are fixed before any student code runs (harness.h).
    harness_hooks(HOOKS, (int)(sizeof HOOKS / sizeof HOOKS[0]));
    Args a = args_defaults();
    int pp_size = 0, micro = 4, virt = 0;
    const char *schedule = "1f1b", *figure = NULL;
    bool no_ref = false;
    ArgExtra extras[] = {
        {"schedule", ARG_CHOICE, &schedule, "the pipeline schedule (zb-h1, zb-h2: zero bubble, on the split backward; "
         "interleaved: v model chunks a stage)", 0, 0, "gpipe|1f1b|zb-h1|zb-h2|interleaved", NULL},
        {"micro", ARG_INT, &micro, "m: micro-batches per step (m divides a pipeline's rows of the batch)", 1,
         PP_MAX_MICRO, NULL, NULL},
        {"virtual", ARG_INT, &virt, "v: model chunks per rank, the interleaved schedule's (default 2)", 2,
         PP_MAX_CHUNKS, NULL, NULL},
        {"pp", ARG_INT, &pp_size, "p: stages per pipeline (default: all ranks); the rest form data-parallel "
         "pipelines", 1, 1 << 16, NULL, NULL},
        {"no-ref", ARG_FLAG, &no_ref, "skip the single-device reference run", 0, 0, NULL, NULL},
        {"figure", ARG_OUTPUT, &figure, "draw the schedule, replayed, as SVG", 1, 0, NULL, NULL},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    args_takes(ARGS_ALL | ARGS_PRECISION | ARGS_RECOMPUTE, NULL);
    args_parse(&a, argc, argv,
               "lab05: pipeline parallelism (GPipe, 1F1B, the zero-bubble ZB-H1 and ZB-H2, and interleaved 1F1B over "
               "micro-batches), the bubble measured and drawn, checked against single-device training.",
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
    bool gpipe = strcmp(schedule, "gpipe") == 0, interleaved = strcmp(schedule, "interleaved") == 0;
    // Interleaved: v chunks a rank, p v virtual stages of one unit at least;
    // Megatron's order goes through the chunks in groups of p micro-batches.
    int v = interleaved ? (virt ? virt : 2) : 1;
    if (virt && !interleaved)
        core_usage_error("--virtual %d is the interleaved schedule's (model chunks per rank), and --schedule %s "
                         "runs one chunk a stage%s; use --schedule interleaved, or leave --virtual out", virt,
                         schedule, strncmp(schedule, "zb-", 3) == 0 ? " (the zero-bubble schedules split each "
                         "stage's backward pass, not its units)" : "");
    // The zero-bubble schedules: c = 1 (ZB-H1) or 2 (ZB-H2), the warm-up's
    // forwards per stage behind (0: GPipe, 1F1B or interleaved).
    int zb = strcmp(schedule, "zb-h1") == 0 ? 1 : strcmp(schedule, "zb-h2") == 0 ? 2 : 0;
    if (zb && gpt_recompute_parse(a.recompute) == GPT_RECOMPUTE_FULL)
        core_usage_error("--schedule %s runs on the backward pass split into B and W, and --recompute full cannot "
                         "split it: W reads the activations B ran on, which the stage's one shared set no longer "
                         "holds once the next forward pass has run; drop --recompute full (--recompute selective is "
                         "the model's, and splits), or run --schedule gpipe or 1f1b with it", schedule);
    // ZB-H1's stage s holds its W's s passes behind its B's, and ZB-H2's 2s
    // behind after twice the warm-up: with fewer micro-batches the order
    // runs short (ZB-H1 at m = p - 1 ends a pass later than its formula;
    // ZB-H2 below 2p - 1 leaves gaps inside the stages' spans), or asks for
    // micro-batches that do not exist.
    int need = zb == 1 ? p : 2 * p - 1;
    if (zb && micro < need) {
        int ok = 0;
        for (int d = need; d <= rows && !ok; d++)
            if (rows % d == 0) ok = d;
        if (ok)
            core_usage_error("--schedule %s needs at least %s = %d micro-batches at p = %d (--micro %d given); use "
                             "--micro %d", schedule, zb == 1 ? "p" : "2p - 1", need, p, micro, ok);
        core_usage_error("--schedule %s needs at least %s = %d micro-batches at p = %d, and a pipeline's %d rows of "
                         "the batch make at most %d; use --batch %d --micro %d, or fewer stages", schedule,
                         zb == 1 ? "p" : "2p - 1", need, p, rows, rows, need * dp, need);
    }
    // At p = 2 both links between the two ranks carry activations and
    // gradients, and comm.h's messages have no tag: they match in the order
    // posted. The schedule posts each backward pass's gradient receive ahead
    // of it (waiting for its own sends without that deadlocks the ring), and
    // at p = 2 that receive would take an activation sent before the
    // gradient. Megatron-LM refuses p = 2 for the same reason (arguments.py:
    // "multiple p2p sends and recvs between same 2 ranks").
    if (interleaved && p < 3)
        core_usage_error("the interleaved schedule needs 3 stages or more (--pp %d): with 2, both links between the "
                         "ranks carry activations and gradients, and messages without tags match in the order "
                         "posted, so a gradient's receive posted ahead of its backward pass would take an "
                         "activation (Megatron-LM refuses p = 2 too); use -np 3 or more, or --schedule 1f1b", p);
    if (interleaved && p * v > nunits) {
        char fewer[48] = "";
        if (nunits / p >= 2) snprintf(fewer, sizeof fewer, ", or --virtual %d", nunits / p);
        core_usage_error("%d stages x %d chunks = %d virtual stages for %d units (the embeddings, %d blocks, the "
                         "head): a virtual stage needs a unit; use --layers %d%s", p, v, p * v, nunits, a.layers,
                         p * v - 2, fewer);
    }
    if (interleaved && micro % p) {
        int works = 0;   // the fewest micro-batches that are a multiple of p and divide the rows
        for (int w = p; !works && w <= rows; w += p) works = rows % w == 0 ? w : 0;
        if (works)
            core_usage_error("--micro %d is not a multiple of the %d stages: the interleaved schedule sends groups of "
                             "p micro-batches through each chunk in turn (Megatron-LM refuses it too); use --micro %d",
                             micro, p, works);
        core_usage_error("--micro %d is not a multiple of the %d stages, and no multiple of %d divides a pipeline's %d "
                         "rows: the interleaved schedule sends groups of p micro-batches through each chunk in turn; "
                         "use --batch %d --micro %d", micro, p, p, rows, p * dp * ((a.batch + p * dp - 1) / (p * dp)), p);
    }
    if (interleaved && v * micro > PP_MAX_MICRO)
        core_usage_error("--virtual %d x --micro %d = %d chunk passes of each kind a step, over %d; use fewer", v,
                         micro, v * micro, PP_MAX_MICRO);
    if (interleaved && gpt_recompute_parse(a.recompute) == GPT_RECOMPUTE_FULL)
        core_usage_error("--recompute full is GPipe's and 1F1B's here (one shared set of a stage's units); the "
                         "interleaved schedule keeps each chunk's activations: use --recompute none or selective");

    harness_check_fits(&a, rows, !no_ref);

    // The single-device reference, first (rank 0; the others wait). Full
    // recomputation is this lab's own, at the stage boundaries: the
    // reference trains without the model's per-block one (the same training
    // to the bit, and its work is single-device training's alone).
    const bool full = gpt_recompute_parse(a.recompute) == GPT_RECOMPUTE_FULL;
    Args ref_args = a;
    if (full) ref_args.recompute = "none";
    Reference ref = harness_reference(c, &ref_args, !no_ref);

    // The grid: p consecutive ranks form a pipeline; ranks p apart hold the
    // same stage and average its gradients.
    Comm *ppc = comm_split(c, dp_rank, r % p), *dpc = comm_split(c, r % p, dp_rank);
    // --recompute full is the schedule's (the student's pp_recompute, at the
    // stage boundaries: the model runs without its own); selective is the
    // model's, per block.
    GptConfig cfg = {.B = rows / micro, .T = a.seq, .C = a.dim, .NH = a.heads, .L = a.layers, .V = a.vocab,
                     .dropout = (float)a.dropout, .seed = a.seed, .precision = gpt_precision_parse(a.precision),
                     .recompute = full ? GPT_RECOMPUTE_NONE : gpt_recompute_parse(a.recompute)};
    Gpt *model = gpt_create(&cfg);
    const bool bf16 = cfg.precision == GPT_BF16;
    int *x = malloc((size_t)rows * a.seq * sizeof *x), *y = malloc((size_t)rows * a.seq * sizeof *y);
    CHECK(x && y, "out of memory");
    PpRun run;
    pprun_init(&run, model, row0, x, y);
    Pp pp = {.group = ppc, .p = p, .s = r % p, .m = micro, .rows = rows, .micro_rows = rows / micro, .T = a.seq,
             .C = a.dim, .type = bf16 ? COMM_BF16 : COMM_F32, .recompute = full, .run = &run};
    pp.elem = comm_type_size(pp.type);

    // The stages' units: the student's partition, checked over the pipeline;
    // then the activations' scratch, measured, and this stage's parameters,
    // gradients and moments (and bf16's master copy), its units whole.
    pp.v = v;
    if (interleaved) {
        // Chunk c is virtual stage pp_virtual_stage(p, v, s, c), the student's,
        // cut by the student's partition over p v stages.
        for (int c = 0; c < v; c++) {
            pp.vs[c] = pp_virtual_stage(p, v, pp.s, c);
            pp_partition(nunits, p * v, pp.vs[c], &pp.cu0[c], &pp.cu1[c]);
        }
        pprun_check_chunks(&pp, nunits);
        pp.u0 = pp.cu0[0], pp.u1 = pp.cu1[0];
    } else {
        pp_partition(nunits, p, pp.s, &pp.u0, &pp.u1);
        pprun_check_partition(&pp, nunits);
        pp.vs[0] = pp.s, pp.cu0[0] = pp.u0, pp.cu1[0] = pp.u1;
    }
    pprun_alloc_stage(&pp);
    char desc[96];
    char sched[48];
    if (interleaved) snprintf(sched, sizeof sched, "interleaved 1F1B, %d chunks a stage", v);
    else snprintf(sched, sizeof sched, "%s", gpipe ? "GPipe" : zb == 1 ? "ZB-H1" : zb == 2 ? "ZB-H2" : "1F1B");
    print0("[lab05] %d rank%s · %s · %s · %s · %s · %s, %d micro-batch%s of %d row%s · %d stages x %d "
           "data-parallel%s\n", N, N == 1 ? "" : "s", mem_device_name(), comm_backend_name(),
           gpt_describe(model, desc, sizeof desc), bf16 ? "bf16 (fp32 master weights)" : "fp32",
           sched, micro, micro == 1 ? "" : "es", pp.micro_rows, pp.micro_rows == 1 ? "" : "s", p,
           dp, full ? " · recomputed at the stage boundaries" : "");

    OptimConfig optim = optim_from_args(&a);
    Data data;
    data_open(&data, a.data, a.vocab, a.seq, a.batch, a.seed);
    DumpWriter *dw = dump_create(r == 0 ? ref.own_dump : NULL);
    char extra[160];
    snprintf(extra, sizeof extra, "schedule %s\nmicro %d\npp %d\ndp %d\nvirtual %d\n", schedule, micro, p, dp, v);
    dump_run_meta(dw, c, "lab05", &a, extra);
    HarnessRun hr = harness_run(c, &a, &ref, "lab05", verdict_of_lab_run);
    // The peaks start again from what is live now: the reference's products'
    // widening scratch (rank 0's, of its larger batch) goes first, as the
    // seal would let it go, so that it is not counted in this run's peak.
    ops_release_scratch();
    mem_reset_peaks();
    comm_stats_reset();
    harness_seal_measures();

    for (int s = 0; s < a.steps; s++) {
        harness_step_begin(&hr);
        data_slice(&data, s, row0, rows, 0, a.seq, x, y);
        pprun_step_begin(&pp, s);
        (interleaved ? pp_interleaved : gpipe ? pp_gpipe : zb == 1 ? pp_zb_h1 : zb == 2 ? pp_zb_h2 : pp_1f1b)(&pp);
        pprun_step_end(&pp);   // what the schedule left behind: counted for the grader, then tidied
        // Data parallelism across pipelines, once a step after the last
        // backward pass: the same stage on ranks p apart, in the gradients'
        // precision (bf16: half the bytes).
        for (int u = 0; dp > 1 && u < nunits; u++)
            if (pprun_holds(&pp, u)) comm_all_reduce_typed(dpc, run.grads[u], model->units[u].size, pp.type, COMM_AVG);
        // The first gradient, whole, for the grader: the harness's gathers,
        // not counted among the step's helpers.
        if (s == 0) {
            comm_step_window(false);
            pprun_dump_units(&pp, dw, "grad/first", run.grads, pp.type);
            comm_step_window(true);
        }
        // AdamW: in place in fp32; in bf16 on the fp32 master, the bf16
        // weights written from it.
        trace_begin("optimizer", "compute");
        for (int u = 0; u < nunits; u++)
            if (pprun_holds(&pp, u))
                optim_step(&optim, s + 1, bf16, run.params[u], run.grads[u], run.master[u], run.m[u], run.v[u],
                           model->units[u].size);
        trace_end();
        // The loss is the last stage's; the mean over pipelines.
        harness_step_end(&hr, s, pp.s == p - 1 ? run.loss : 0, dp);
    }

    // The end: each stage's time and memory, the bubble, the schedule drawn.
    MemReport mem = mem_report();
    Lab05End end = {.pp = &pp, .gpipe = gpipe, .zb = zb, .interleaved = interleaved, .bf16 = bf16, .figure = figure};
    harness_print_mean_step(&hr, false);
    lab05_report(&end, &hr, &mem);
    harness_print_memory(c, &mem);

    // Afterwards, not measured: the whole model gathered on rank 0 (in bf16
    // the master copy, the parameters the optimizer holds).
    float **whole = bf16 ? pprun_gather_units(&pp, (void *const *)run.master, COMM_F32)
                         : pprun_gather_units(&pp, run.params, COMM_F32),
          **whole_m = pprun_gather_units(&pp, (void *const *)run.m, COMM_F32),
          **whole_v = pprun_gather_units(&pp, (void *const *)run.v, COMM_F32);
    harness_finish(&hr, &(HarnessEnd){.dw = dw, .mem = &mem, .model = model, .params = whole, .m = whole_m,
                                      .v = whole_v, .host = true, .dump_more = lab05_dump_more, .ctx = &end,
                                      .groups = {ppc, dpc}});
}
