// main.c: lab03's harness. Students do not edit it.
//
//   mpirun -np 4 build/lab03 --stage 0|1|2|3 [--no-prefetch] [--precision bf16] [--figure FILE.svg]
//
// Trains the course's GPT data-parallel with the student's ZeRO (zero.c)
// and prints each rank's memory by category beside what the ZeRO paper's
// formulas predict (fp32 AdamW, or bf16 with fp32 master weights: the
// paper's 2 + 2 + 12), the bytes communicated beside the stage's formula,
// and the training beside single-device training's.
#include <math.h>
#include <stdint.h>
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
#include "trace.h"
#include "report_given.h"
#include "verdict.h"
#include "zero.h"
#include "zero_budget.h"

// ---- the student's unfinished functions ------------------------------------

static const char *const HOOKS[] = {"shard_len", "shard_offset", "zero_setup", "zero_before_forward",
                                    "zero_after_forward", "zero_before_backward", "zero_after_backward",
                                    "zero_step"};

void lab_todo(const char *function) { harness_todo(function); }

// ---- one training run of a stage -------------------------------------------

static bool g_seal = true;   // harness_seal_measures before the graded run (not with --figure)

static Outcome train(Setup *s, Zero *z, HarnessRun *run) {
    const Args *a = &s->a;
    Gpt *model = s->model;
    Comm *c = s->c;
    int N = comm_size(c);
    Outcome o = {0};
    o.prefetch_fwd = calloc((size_t)(a->steps ? a->steps : 1), sizeof *o.prefetch_fwd);
    o.prefetch_bwd = calloc((size_t)(a->steps ? a->steps : 1), sizeof *o.prefetch_bwd);
    mem_reset_peaks();
    comm_stats_reset();
    // Sealed for the graded run; --figure trains every stage again after it
    // (its dump and verdict are written by then), and resets between them.
    if (g_seal) {
        harness_seal_measures();
    } else {
        ops_work_reset();       // each training's own work and resident memory
        mem_start_resident();
    }
    zero_setup(z);
    lab03_init_params(s, z);
    float scale = 1.0f / (float)((size_t)s->rows * a->seq);
    for (int step = 0; step < a->steps; step++) {
        harness_step_begin(run);
        data_slice(&s->data, step, s->row0, s->rows, 0, a->seq, s->x, s->y);
        gpt_set_batch(model, s->x, s->y, step, s->row0, scale);
        for (int u = 0; u < model->nunits; u++) {
            void *p = zero_before_forward(z, u);
            if (u + 1 < model->nunits && comm_inflight() > 0) o.prefetch_fwd[step]++;
            trace_begin(model->units[u].name, "forward");
            gpt_unit_forward(model, u, p);
            trace_end();
            comm_progress();
            zero_after_forward(z, u);
        }
        double loss = gpt_loss(model);
        for (int u = model->nunits - 1; u >= 0; u--) {
            void *grad = NULL;
            void *p = zero_before_backward(z, u, &grad);
            mem_zero(grad, model->units[u].size * z->elem);
            if (u > 0 && comm_inflight() > 0) o.prefetch_bwd[step]++;
            trace_begin(model->units[u].name, "backward");
            gpt_unit_backward(model, u, p, grad);
            trace_end();
            comm_progress();
            zero_after_backward(z, u);
        }
        trace_begin("optimizer", "compute");
        zero_step(z, step + 1);
        trace_end();
        harness_step_end(run, step, loss, N);
    }
    o.mem = mem_report();
    o.comm = comm_stats();
    return o;
}

// After the verdict: the graded run's ZeRO torn down, and the figure, every
// stage trained again at this world size, in fp32 and in bf16 (the run's own
// model serves its precision; the other's is made for it, after the first
// has let its activations go, so that each training's peaks are its own).
static void draw_figure(void *ctx) {
    Lab03End *e = ctx;
    lab03_zero_teardown(e->z);
    if (!e->figure) return;
    Setup *s = e->s;
    Comm *c = s->c;
    int N = comm_size(c);
    MemReport *all = malloc((size_t)N * sizeof *all);
    double peaks[2][4][MEM_NCAT];
    GptPrecision own = s->model->cfg.precision;
    for (int k = 0; k < 2; k++) {
        GptPrecision pr = k == 0 ? own : (own == GPT_FP32 ? GPT_BF16 : GPT_FP32);
        if (pr != s->model->cfg.precision) {
            GptConfig cfg = s->model->cfg;
            cfg.precision = pr;
            gpt_free(s->model);
            s->model = gpt_create(&cfg);
            gpt_alloc_acts(s->model);
        }
        const Gpt *m = s->model;
        CommType type = pr == GPT_BF16 ? COMM_BF16 : COMM_F32;
        for (int st = 0; st < 4; st++) {
            Zero zs = {.comm = c, .stage = st, .prefetch = e->prefetch, .model = m, .nunits = m->nunits,
                       .optim = optim_from_args(&s->a), .type = type, .elem = comm_type_size(type)};
            HarnessRun quiet = harness_run(c, &s->a, (Reference *)e->ref, "lab03", NULL);
            quiet.quiet = true;
            Outcome os = train(s, &zs, &quiet);
            comm_all_gather_host(c, &os.mem, sizeof os.mem, all);
            double *pk = peaks[pr == GPT_BF16][st];
            for (int q = 0; q < MEM_NCAT; q++) {
                pk[q] = 0;
                for (int r = 0; r < N; r++) pk[q] = fmax(pk[q], all[r].peak[q]);
            }
            lab03_zero_teardown(&zs);
            free(quiet.losses);
            free(os.prefetch_fwd);
            free(os.prefetch_bwd);
        }
    }
    bool unfinished = false;
    for (size_t k = 0; k < sizeof HOOKS / sizeof HOOKS[0]; k++) unfinished |= harness_unfinished(HOOKS[k]);
    if (comm_rank(c) == 0) lab03_write_figure(e->figure, peaks, N, (double)s->model->nparams, unfinished);
    print0("wrote %s: memory per rank by category for stages 0 to 3, fp32 and bf16\n", e->figure);
    free(all);
}

// ---- main ------------------------------------------------------------------

int main(int argc, char **argv) {
    // The hooks are fixed before any student code runs (harness.h).
    harness_hooks(HOOKS, (int)(sizeof HOOKS / sizeof HOOKS[0]));
    Args a = args_defaults();
    // lab03's own shape: wider and shorter than the course's 4L 128C x 64
    // tokens. The model's state (16 bytes a parameter, about 12 L C^2
    // parameters) is what ZeRO shards; the activations (about B T C L) are
    // not. At 128C x 64 tokens they outweigh the state, and stage 3 saves
    // little; at 192C x 32 tokens the state is 7 times the activations at 4
    // ranks, and the table shows the paper's saving. 8 layers keep each unit
    // an eighth of the model, so stage 3's gathered units stay small.
    a.dim = 192, a.seq = 32, a.layers = 8;
    int stage = 1;
    bool no_prefetch = false, no_ref = false;
    const char *figure = NULL;
    ArgExtra extras[] = {
        {"stage", ARG_INT, &stage, "ZeRO stage: 0 plain data parallelism, 1 optimizer state, 2 + gradients, 3 + parameters", 0, 3, NULL, NULL},
        {"no-prefetch", ARG_FLAG, &no_prefetch, "stage 3: gather each unit only when it runs", 0, 0, NULL, NULL},
        {"no-ref", ARG_FLAG, &no_ref, "skip the single-device reference run", 0, 0, NULL, NULL},
        {"figure", ARG_OUTPUT, &figure, "also run stages 0 to 3 and draw memory per rank by category (SVG)", 1, 0, NULL, NULL},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    args_takes(ARGS_ALL | ARGS_PRECISION | ARGS_RECOMPUTE, NULL);
    args_parse(&a, argc, argv, "lab03: ZeRO stages 1, 2 and 3, memory per rank measured against the formulas.", extras);
    Comm *c = harness_start(&a, &argc, &argv);
    int N = comm_size(c), r = comm_rank(c);
    Setup s = {.a = a, .c = c};
    data_rank_rows(a.batch, N, r, &s.row0, &s.rows);

    // Refused before any of it is allocated when it cannot fit: each rank's
    // replica (an upper estimate from the shapes) and, first, the reference.
    harness_check_fits(&a, s.rows, !no_ref);

    Reference ref = harness_reference(c, &a, !no_ref);

    GptConfig cfg = {.B = s.rows, .T = a.seq, .C = a.dim, .NH = a.heads, .L = a.layers, .V = a.vocab,
                     .dropout = (float)a.dropout, .seed = a.seed, .precision = gpt_precision_parse(a.precision),
                     .recompute = gpt_recompute_parse(a.recompute)};   // the model's own: nothing of zero.c changes
    s.model = gpt_create(&cfg);
    CHECK(s.model->nunits <= ZERO_MAX_UNITS, "at most %d units (--layers %d)", ZERO_MAX_UNITS - 2, ZERO_MAX_UNITS - 2);
    gpt_alloc_acts(s.model);
    // What the model's shape needs for activations, measured before any of
    // the student's code runs: the grader bounds the total by the formula
    // plus this, not by whatever ends up tracked as ACTS.
    double acts_expected = (double)mem_live(MEM_ACTS);
    data_open(&s.data, a.data, a.vocab, a.seq, a.batch, a.seed);
    s.x = malloc((size_t)s.rows * a.seq * sizeof *s.x);
    s.y = malloc((size_t)s.rows * a.seq * sizeof *s.y);
    const Gpt *m = s.model;

    // The shards' sizes, for the formulas; the student's shard_len and
    // shard_offset held to zero.h's contract first.
    Lab03Sizes z_sizes = lab03_sizes(m, c);
    double psi_pad = z_sizes.psi_pad, unit1 = z_sizes.unit1, unit2 = z_sizes.unit2, model_pad = z_sizes.model_pad,
           model1 = z_sizes.model1, model2 = z_sizes.model2;
    char desc[96];
    const bool bf16 = cfg.precision == GPT_BF16;
    print0("[lab03] %d rank%s · %s · %s · %s · %s · ZeRO-%d%s · batch %d = %d ranks x %d rows\n", N,
           N == 1 ? "" : "s", mem_device_name(), comm_backend_name(), gpt_describe(m, desc, sizeof desc),
           bf16 ? "bf16 (fp32 master weights)" : "fp32", stage,
           stage == 3 ? (no_prefetch ? " (no prefetch)" : " (prefetch)") : "", a.batch, N, s.rows);

    Zero z = {.comm = c, .stage = stage, .prefetch = !no_prefetch, .model = m, .nunits = m->nunits,
              .optim = optim_from_args(&a), .type = bf16 ? COMM_BF16 : COMM_F32};
    z.elem = comm_type_size(z.type);
    g_seal = figure == NULL;
    HarnessRun run = harness_run(c, &a, &ref, "lab03", verdict_of_lab_run);
    Outcome o = train(&s, &z, &run);
    if (a.steps > 1) print0("mean over steps 2..%d: %.1f ms/step\n", a.steps, run.seconds / (a.steps - 1) * 1e3);
    ZeroBudget b = zero_budget(stage, !no_prefetch, model_pad, N, model1, model2, bf16);
    lab03_print_memory(&s, &o, &b, stage, model_pad, bf16);

    // Afterwards, not measured: the whole parameters and moments, gathered.
    // The parameters the optimizer holds: fp32 ones, or bf16's master copy
    // (sharded as the moments are); and the parameters the model ran on:
    // stages 0-2 each rank's own whole copy (do the ranks agree?), stage 3
    // the gathered shards.
    float **ran = lab03_gather_whole(&s, &z, z.params, z.param_shard, z.type, false);
    // (A bf16 run whose zero_setup kept no master copy dumps the bf16
    // parameters: the grader's checks say what is missing.)
    bool masters = bf16;
    for (int u = 0; u < m->nunits; u++) masters &= z.master[u] != NULL;
    float **params = masters ? lab03_gather_whole(&s, &z, (void *const *)z.master, (void *const *)z.master, COMM_F32, true)
                             : ran;
    float **mom_m = lab03_gather_whole(&s, &z, (void *const *)z.m, (void *const *)z.m, COMM_F32, true),
          **mom_v = lab03_gather_whole(&s, &z, (void *const *)z.v, (void *const *)z.v, COMM_F32, true);
    double mine = 0;
    Lab03End end = {.s = &s, .stage = stage, .prefetch = !no_prefetch, .psi_pad = psi_pad, .unit1 = unit1,
                    .unit2 = unit2, .acts_expected = acts_expected, .o = &o, .figure = figure, .ref = &ref};
    end.sumsq = malloc((size_t)N * sizeof *end.sumsq);
    for (int u = 0; u < m->nunits; u++)
        for (size_t i = 0; i < m->units[u].size; i++) mine += (double)ran[u][i] * ran[u][i];
    comm_all_gather_host(c, &mine, sizeof mine, end.sumsq);

    DumpWriter *dw = dump_create(r == 0 ? ref.own_dump : NULL);
    char extra[96];
    snprintf(extra, sizeof extra, "stage %d\nprefetch %d\n", stage, !no_prefetch);
    dump_run_meta(dw, c, "lab03", &a, extra);
    end.z = &z;
    harness_finish(&run, &(HarnessEnd){.dw = dw, .mem = &o.mem, .model = m, .params = params, .m = mom_m,
                                       .v = mom_v, .host = true, .dump_more = lab03_dump_more, .afterwards = draw_figure,
                                       .ctx = &end});
}
