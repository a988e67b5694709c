// main.c: lab03's harness. Students do not edit it.
//
//   mpirun -np 4 build/lab03 --stage 0|1|2|3 [--no-prefetch] [--figure FILE.svg]
//
// Trains the course's GPT data-parallel with the student's ZeRO (zero.c)
// and prints each rank's memory by category beside what the ZeRO paper's
// formulas predict for fp32 AdamW, the bytes communicated beside the
// stage's formula, and the training beside single-device training's.
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
#include "verdict.h"
#include "zero.h"
#include "zero_budget.h"

// ---- the student's unfinished functions ------------------------------------

static const char *const HOOKS[] = {"shard_len", "shard_offset", "zero_setup", "zero_before_forward",
                                    "zero_after_forward", "zero_before_backward", "zero_after_backward",
                                    "zero_step"};

void lab_todo(const char *function) { harness_todo(function); }

// Free every buffer the Zero still points to (the student's code allocates
// them; the harness lets them go after the run). Stage 1's grad_shard is a
// view into grads (the reduce-scatter lands in place): it goes with grads.
static void zero_teardown(Zero *z) {
    int N = comm_size(z->comm);
    for (int u = 0; u < z->nunits; u++) {
        if (z->gather_handle[u]) comm_wait(z->gather_handle[u]);   // a gather still in flight
        z->gather_handle[u] = NULL;
        uintptr_t shard = (uintptr_t)z->grad_shard[u], whole = (uintptr_t)z->grads[u];
        size_t padded = (size_t)N * shard_len(z->model->units[u].size, N);
        if (whole && shard >= whole && shard < whole + padded * sizeof(float)) z->grad_shard[u] = NULL;
        float **all[] = {&z->params[u], &z->param_shard[u], &z->grads[u], &z->grad_shard[u],
                         &z->m[u], &z->v[u], &z->gathered[u], &z->unit_grad[u]};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
            mem_free(*all[i]);
            *all[i] = NULL;
        }
    }
}

// ---- one training run of a stage -------------------------------------------

typedef struct {
    Args a;
    Comm *c;
    Gpt *model;
    Data data;
    int row0, rows;
    int *x, *y;
} Setup;

typedef struct {
    MemReport mem;        // this rank's peaks during training
    CommStats comm;       // and its communication
    // The order of events, per step, for the grader (prefetch is judged from
    // it, not from timings): how many units began their forward compute
    // (all but the last) and their backward compute (all but unit 0) with
    // communication in flight, i.e. with the next unit's gather under way.
    int64_t *prefetch_fwd, *prefetch_bwd;   // (steps)
} Outcome;

// Whole units of this rank's parameters (or moments), gathered from the
// shards where the stage shards them: (nunits) host arrays, on every rank.
// Bookkeeping after the measured run: host memory, uncounted traffic.
static float **gather_whole(const Setup *s, const Zero *z, float *const *whole, float *const *shard,
                            bool moments) {
    const Gpt *m = s->model;
    int N = comm_size(s->c);
    float **out = calloc((size_t)m->nunits, sizeof *out);
    for (int u = 0; u < m->nunits; u++) {
        size_t size = m->units[u].size;
        if (whole[u] && (!moments || z->stage == 0)) {
            out[u] = malloc(size * sizeof(float));
            mem_to_host(out[u], whole[u], size * sizeof(float));
            continue;
        }
        size_t len = shard_len(size, N);
        float *mine = malloc(len * sizeof(float)), *all = malloc((size_t)N * len * sizeof(float));
        mem_to_host(mine, shard[u], len * sizeof(float));
        comm_all_gather_host(s->c, mine, len * sizeof(float), all);
        out[u] = all;
        free(mine);
    }
    return out;
}

static bool g_seal = true;   // harness_seal_measures before the graded run (not with --figure)

static Outcome train(Setup *s, Zero *z, HarnessRun *run) {
    const Args *a = &s->a;
    Gpt *model = s->model;
    Comm *c = s->c;
    int N = comm_size(c), r = comm_rank(c);
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
    // Initial parameters from the counter-based generator: a rank makes just
    // its shard when it keeps only a shard, and it equals the same slice of
    // the whole.
    for (int u = 0; u < model->nunits; u++) {
        size_t size = model->units[u].size;
        if (z->params[u]) {
            gpt_init_slice(model, u, z->params[u], 0, size);
        } else {
            size_t off = shard_offset(size, N, r), len = shard_len(size, N);
            size_t n = off >= size ? 0 : (size - off < len ? size - off : len);
            gpt_init_slice(model, u, z->param_shard[u], off, n);
        }
    }
    float scale = 1.0f / (float)((size_t)s->rows * a->seq);
    for (int step = 0; step < a->steps; step++) {
        harness_step_begin(run);
        data_slice(&s->data, step, s->row0, s->rows, 0, a->seq, s->x, s->y);
        gpt_set_batch(model, s->x, s->y, step, s->row0, scale);
        for (int u = 0; u < model->nunits; u++) {
            float *p = zero_before_forward(z, u);
            if (u + 1 < model->nunits && comm_inflight() > 0) o.prefetch_fwd[step]++;
            trace_begin(model->units[u].name, "forward");
            gpt_unit_forward(model, u, p);
            trace_end();
            comm_progress();
            zero_after_forward(z, u);
        }
        double loss = gpt_loss(model);
        for (int u = model->nunits - 1; u >= 0; u--) {
            float *grad = NULL;
            float *p = zero_before_backward(z, u, &grad);
            mem_zero(grad, model->units[u].size * sizeof(float));
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

// ---- the figure: memory per rank by category, stages 0 to 3 ----------------

static void write_figure(const char *path, const double peaks[4][MEM_NCAT], int N, double psi, bool unfinished) {
    FILE *f = fopen(path, "w");
    CHECK(f, "cannot write the figure to %s", path);
    const char *colors[MEM_NCAT] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#bab0ac"};
    double top = 0;
    for (int s = 0; s < 4; s++) {
        double t = 0;
        for (int k = 0; k < MEM_NCAT; k++) t += peaks[s][k];
        top = fmax(top, t);
    }
    int W = 760, H = 420, x0 = 40, y0 = 360, bar = 80, gap = 50;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"14\">ZeRO: memory per rank by category, measured "
               "(the largest rank), N = %d, psi = %.2fM%s</text>\n",
            x0, N, psi / 1e6, unfinished ? " (an unfinished zero.c: not ZeRO's figure yet)" : "");
    for (int s = 0; s < 4; s++) {
        double y = y0;
        int x = x0 + gap / 2 + s * (bar + gap);
        for (int k = 0; k < MEM_NCAT; k++) {
            double h = peaks[s][k] / top * (y0 - 50);
            if (h <= 0) continue;
            fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"><title>stage %d %s %.2f MB</title></rect>\n",
                    x, y - h, bar, h, colors[k], s, mem_category_name((MemCategory)k), peaks[s][k] / 1e6);
            y -= h;
        }
        double total = 0;
        for (int k = 0; k < MEM_NCAT; k++) total += peaks[s][k];
        fprintf(f, "<text x=\"%d\" y=\"%d\">stage %d</text>\n", x + 18, y0 + 18, s);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\">%.1f MB</text>\n", x + 12, y - 6, total / 1e6);
    }
    for (int k = 0; k < MEM_NCAT; k++) {
        int lx = x0 + 4 * (bar + gap) + 20, ly = 60 + 20 * k;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n", lx, ly,
                colors[k], lx + 16, ly + 11, mem_category_name((MemCategory)k));
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n</svg>\n", x0, y0, x0 + 4 * (bar + gap), y0);
    CHECK(fclose(f) == 0, "writing %s failed", path);
}

// ---- the run's end: lab03's own dump entries, and the figure ------------------

typedef struct {
    Setup *s;
    int stage;
    bool prefetch;
    double psi_pad, unit1, unit2, acts_expected;
    double *sumsq;   // (N) each rank's sum of squares of its whole parameters
    Outcome *o;
    Zero *z;   // the graded run's, torn down once its dump is written
    const char *figure;
    const Reference *ref;
} Lab03End;

static void dump_more(DumpWriter *dw, void *ctx) {
    Lab03End *e = ctx;
    Comm *c = e->s->c;
    int steps = e->s->a.steps;
    // The prefetch of the rank that overlapped least (one without it is
    // what the grader looks for).
    for (int st = 0; st < steps; st++) {
        e->o->prefetch_fwd[st] = -(int64_t)comm_max_double(c, -(double)e->o->prefetch_fwd[st]);
        e->o->prefetch_bwd[st] = -(int64_t)comm_max_double(c, -(double)e->o->prefetch_bwd[st]);
    }
    uint64_t nsteps = (uint64_t)steps, nr = (uint64_t)comm_size(c);
    // Named for ZeRO, not check/: whether the updated shards reached every
    // rank is lab03's own check (the shared one would call it an all-reduce).
    dump_f64(dw, "zero/param_sumsq_per_rank", e->sumsq, 1, &nr);
    dump_scalar_i64(dw, "zero/stage", e->stage);
    dump_scalar_i64(dw, "zero/prefetch", e->prefetch);
    dump_scalar_f64(dw, "zero/psi_padded", e->psi_pad);
    dump_scalar_f64(dw, "zero/unit_largest", e->unit1);
    dump_scalar_f64(dw, "zero/unit_second", e->unit2);
    dump_scalar_f64(dw, "mem/acts_expected", e->acts_expected);
    dump_scalar_i64(dw, "zero/units", e->s->model->nunits);
    dump_i64(dw, "zero/prefetch_fwd", e->o->prefetch_fwd, 1, &nsteps);
    dump_i64(dw, "zero/prefetch_bwd", e->o->prefetch_bwd, 1, &nsteps);
}

// After the verdict: the graded run's ZeRO torn down, and the figure, every
// stage trained again at this world size.
static void draw_figure(void *ctx) {
    Lab03End *e = ctx;
    zero_teardown(e->z);
    if (!e->figure) return;
    Setup *s = e->s;
    Comm *c = s->c;
    int N = comm_size(c);
    const Gpt *m = s->model;
    MemReport *all = malloc((size_t)N * sizeof *all);
    double peaks[4][MEM_NCAT];
    for (int st = 0; st < 4; st++) {
        Zero zs = {.comm = c, .stage = st, .prefetch = e->prefetch, .model = m, .nunits = m->nunits,
                   .optim = optim_from_args(&s->a)};
        HarnessRun quiet = harness_run(c, &s->a, (Reference *)e->ref, "lab03", NULL);
        quiet.quiet = true;
        Outcome os = train(s, &zs, &quiet);
        comm_all_gather_host(c, &os.mem, sizeof os.mem, all);
        for (int k = 0; k < MEM_NCAT; k++) {
            peaks[st][k] = 0;
            for (int q = 0; q < N; q++) peaks[st][k] = fmax(peaks[st][k], all[q].peak[k]);
        }
        zero_teardown(&zs);
        free(quiet.losses);
        free(os.prefetch_fwd);
        free(os.prefetch_bwd);
    }
    bool unfinished = false;
    for (size_t k = 0; k < sizeof HOOKS / sizeof HOOKS[0]; k++) unfinished |= harness_unfinished(HOOKS[k]);
    if (comm_rank(c) == 0) write_figure(e->figure, peaks, N, (double)m->nparams, unfinished);
    print0("wrote %s: memory per rank by category for stages 0 to 3\n", e->figure);
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
                     .dropout = (float)a.dropout, .seed = a.seed};
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

    // Units padded to N shards, for the formulas: N times the student's own
    // shard_len, which may pad a little more than it must (zero.h's contract,
    // held here so that the bounds and the contract agree).
    // The printed expectations come from the model alone (each unit padded
    // to N shards of ceil(size / N)), never from the student's functions.
    double psi = (double)m->nparams, psi_pad = 0, unit1 = 0, unit2 = 0, model_pad = 0, model1 = 0, model2 = 0;
    for (int u = 0; u < m->nunits; u++) {
        size_t size = m->units[u].size, least = (size + (size_t)N - 1) / (size_t)N, len = shard_len(size, N);
        double pm = (double)N * (double)least;
        model_pad += pm;
        if (pm > model1) model2 = model1, model1 = pm;
        else if (pm > model2) model2 = pm;
        // An unfinished shard_len (it still calls lab_todo) is the verdict's
        // to report, with the other TODOs, after a run of the rest.
        CHECK((len >= least && len <= least + ZERO_MAX_PAD) || harness_unfinished("shard_len"),
              "shard_len(%zu, %d) returned %zu; it must be between ceil(size / N) = %zu and %zu "
              "(N shards cover the unit, padded by at most %d floats each): fix shard_len in zero.c",
              size, N, len, least, least + ZERO_MAX_PAD, ZERO_MAX_PAD);
        // Asked here too, so that an unfinished shard_offset is reported with
        // the rest even when no stage of this run calls it: a shard starts on
        // a shard boundary inside the padded unit.
        size_t off = shard_offset(size, N, comm_rank(c));
        CHECK(off == (size_t)comm_rank(c) * len || harness_unfinished("shard_offset"),
              "shard_offset(%zu, %d, %d) returned %zu, not rank %d's shard of %zu floats (%zu): fix "
              "shard_offset in zero.c", size, N, comm_rank(c), off, comm_rank(c), len, (size_t)comm_rank(c) * len);
        double p = (double)N * (double)len;
        psi_pad += p;
        if (p > unit1) unit2 = unit1, unit1 = p;
        else if (p > unit2) unit2 = p;
    }
    char desc[96];
    print0("[lab03] %d rank%s · %s · %s · %s · ZeRO-%d%s · batch %d = %d ranks x %d rows\n", N,
           N == 1 ? "" : "s", mem_device_name(), comm_backend_name(), gpt_describe(m, desc, sizeof desc), stage,
           stage == 3 ? (no_prefetch ? " (no prefetch)" : " (prefetch)") : "", a.batch, N, s.rows);

    Zero z = {.comm = c, .stage = stage, .prefetch = !no_prefetch, .model = m, .nunits = m->nunits,
              .optim = optim_from_args(&a)};
    g_seal = figure == NULL;
    HarnessRun run = harness_run(c, &a, &ref, "lab03", verdict_of_lab_run);
    Outcome o = train(&s, &z, &run);

    // What each rank held, against the formulas (the largest rank's figures).
    MemReport *all = malloc((size_t)N * sizeof *all);
    comm_all_gather_host(c, &o.mem, sizeof o.mem, all);
    double peak[MEM_NCAT] = {0}, heap = 0, total = 0;
    for (int q = 0; q < N; q++) {
        for (int k = 0; k < MEM_NCAT; k++) peak[k] = fmax(peak[k], all[q].peak[k]);
        heap = fmax(heap, all[q].measured_peak);
        total = fmax(total, all[q].peak_total);
    }
    ZeroBudget b = zero_budget(stage, !no_prefetch, model_pad, N, model1, model2);
    char m1[32], m2[32];
    if (a.steps > 1) print0("mean over steps 2..%d: %.1f ms/step\n", a.steps, run.seconds / (a.steps - 1) * 1e3);
    print0("\nmemory per rank (the largest over ranks), ZeRO-%d, N = %d, psi = %.0f (%.0f padded to N shards):\n",
           stage, N, psi, model_pad);
    print0("  %-7s %10s %10s   %s\n", "", "measured", "expected", "formula (fp32 AdamW)");
    print0("  %-7s %10s %10s   %s\n", "PARAMS", core_fmt_bytes(peak[MEM_PARAMS], m1, 32), core_fmt_bytes(b.params, m2, 32), b.params_why);
    print0("  %-7s %10s %10s   %s\n", "GRADS", core_fmt_bytes(peak[MEM_GRADS], m1, 32), core_fmt_bytes(b.grads, m2, 32), b.grads_why);
    print0("  %-7s %10s %10s   %s\n", "OPTIM", core_fmt_bytes(peak[MEM_OPTIM], m1, 32), core_fmt_bytes(b.optim, m2, 32), b.optim_why);
    print0("  %-7s %10s %10s   %s\n", "ACTS", core_fmt_bytes(peak[MEM_ACTS], m1, 32), "", "activations of this rank's rows (ZeRO does not shard them)");
    print0("  %-7s %10s %10s   %s\n", "total", core_fmt_bytes(total, m1, 32), core_fmt_bytes(b.params + b.grads + b.optim + peak[MEM_ACTS], m2, 32), "peak of the sum");
    // The heap is above the total by what the library and the harness
    // allocate around mem_alloc, whatever the student's code does: said
    // here, with its bound (the grader's), so that nobody hunts a leak that
    // is not theirs. (On a GPU the measure is the device's memory in use.)
    if (mem_device() == DEVICE_CUDA) {
        print0("  %-7s %10s %10s   %s\n", "GPU", core_fmt_bytes(heap, m1, 32), "",
               "the independent measure: the device's memory in use");
    } else {
        print0("  %-7s %10s %10s   %s\n", "heap", core_fmt_bytes(heap, m1, 32), "",
               "the independent measure: every allocation of the program, which is");
        print0("  %-7s %10s %10s   the total + %s of the library's own: the initialisation makes each unit\n",
               "", "", "", core_fmt_bytes(heap - total, m1, 32));
        print0("  %-7s %10s %10s   on the host (one at a time, up to %s), and bookkeeping (under 1 MiB)\n", "",
               "", "", core_fmt_bytes(b.untracked - (1 << 20), m2, 32));
    }
    harness_print_memory(c, &o.mem);
    double per_step = (double)comm_stats_total_bus_bytes(&o.comm) / (a.steps ? a.steps : 1);
    double model_bytes = (stage == 3 ? 3.0 : 2.0) * (N - 1) / N * 4 * (stage == 0 ? psi : model_pad);
    print0("bytes each rank sent per step: %s (bus bytes); the stage's formula %s x 4 psi = %s\n",
           core_fmt_bytes(per_step, m1, 32), stage == 3 ? "3(N-1)/N" : "2(N-1)/N", core_fmt_bytes(model_bytes, m2, 32));

    // Afterwards, not measured: the whole parameters and moments, gathered.
    float **params = gather_whole(&s, &z, z.params, z.param_shard, false);
    float **mom_m = gather_whole(&s, &z, z.m, z.m, true), **mom_v = gather_whole(&s, &z, z.v, z.v, true);
    // Stages 0-2: each rank's own whole copy (do the ranks agree?); stage 3:
    // the gathered shards.
    double mine = 0;
    Lab03End end = {.s = &s, .stage = stage, .prefetch = !no_prefetch, .psi_pad = psi_pad, .unit1 = unit1,
                    .unit2 = unit2, .acts_expected = acts_expected, .o = &o, .figure = figure, .ref = &ref};
    end.sumsq = malloc((size_t)N * sizeof *end.sumsq);
    for (int u = 0; u < m->nunits; u++)
        for (size_t i = 0; i < m->units[u].size; i++) mine += (double)params[u][i] * params[u][i];
    comm_all_gather_host(c, &mine, sizeof mine, end.sumsq);

    DumpWriter *dw = dump_create(r == 0 ? ref.own_dump : NULL);
    char extra[96];
    snprintf(extra, sizeof extra, "stage %d\nprefetch %d\n", stage, !no_prefetch);
    dump_run_meta(dw, c, "lab03", &a, extra);
    end.z = &z;
    harness_finish(&run, &(HarnessEnd){.dw = dw, .mem = &o.mem, .model = m, .params = params, .m = mom_m,
                                       .v = mom_v, .host = true, .dump_more = dump_more, .afterwards = draw_figure,
                                       .ctx = &end});
}
