// pipeline_given.c: the harness's work on a micro-batch, for the student's
// schedules (pipeline.h), and the state behind it (pipeline_given.h).
#include "pipeline_given.h"

#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "mem.h"
#include "ops.h"
#include "trace.h"

// ---- the micro-batch API (pipeline.h) ----------------------------------------

static void check_mb(const Pp *pp, int mb, const char *fn) {
    CHECK(mb >= 0 && mb < pp->m, "%s: micro-batch %d does not exist (this step has %d: 0 .. %d)", fn, mb, pp->m,
          pp->m - 1);
}

static void record(Pp *pp, int kind, int mb, double t0) {
    PpRun *run = pp->run;
    double t = core_now() - t0;
    CHECK(run->nevents < PPRUN_MAX_EVENTS, "more than %d passes in one step", PPRUN_MAX_EVENTS);
    run->events[run->nevents++] = (PpEvent){kind, mb, t, 0, 0};
    run->busy += t;
}

void pp_zero_grads(Pp *pp) {
    PpRun *run = pp->run;
    for (int u = pp->u0; u < pp->u1; u++) mem_zero(run->grads[u], run->model->units[u].size * pp->elem);
}

void pp_begin_micro(Pp *pp, int mb, float loss_scale) {
    PpRun *run = pp->run;
    check_mb(pp, mb, "pp_begin_micro");
    CHECK(!run->acts[mb], "pp_begin_micro: micro-batch %d is already alive on stage %d (begun twice in a step?)", mb,
          pp->s);
    CHECK(!run->forward_done[mb], "pp_begin_micro: micro-batch %d has already had its forward pass on stage %d this "
          "step (begun twice in a step?)", mb, pp->s);
    run->acts[mb] = gpt_acts_create(run->model, pp->u0, pp->u1);
    size_t off = (size_t)mb * pp->micro_rows * pp->T;
    gpt_acts_set_batch(run->model, run->acts[mb], run->x + off, run->y + off, run->step,
                       run->row0 + mb * pp->micro_rows, loss_scale);
    run->live++;
    if (run->live > run->max_live) run->max_live = run->live;
}

void pp_forward_compute(Pp *pp, int mb) {
    PpRun *run = pp->run;
    check_mb(pp, mb, "pp_forward_compute");
    CHECK(run->acts[mb], "pp_forward_compute: micro-batch %d has no activations on stage %d: call pp_begin_micro "
          "first", mb, pp->s);
    comm_events_mark(0, mb);
    double t0 = core_now();
    for (int u = pp->u0; u < pp->u1; u++) {
        trace_begin(run->model->units[u].name, "forward");
        gpt_acts_forward(run->model, run->acts[mb], u, run->params[u]);
        trace_end();
    }
    if (pp->u1 == run->model->nunits) run->loss += gpt_acts_loss(run->model, run->acts[mb]) / pp->m;
    run->forward_done[mb] = true;
    record(pp, 0, mb, t0);
}

// Every gradient of this stage zero. bf16's are widened a unit at a time
// into the model's fp32 scratch of a unit's gradient (free between passes).
static bool grads_zero(const Pp *pp) {
    const PpRun *run = pp->run;
    double sum = 0;
    for (int u = pp->u0; u < pp->u1; u++) {
        size_t n = run->model->units[u].size;
        if (pp->type == COMM_F32) {
            sum += ops_sumsq(run->grads[u], n);
        } else {
            ops_from_bf16(run->model->s_gunit, run->grads[u], n);
            sum += ops_sumsq(run->model->s_gunit, n);
        }
    }
    return sum == 0;
}

void pp_backward_compute(Pp *pp, int mb) {
    PpRun *run = pp->run;
    check_mb(pp, mb, "pp_backward_compute");
    CHECK(run->acts[mb], "pp_backward_compute: micro-batch %d's activations on stage %d were freed before its "
          "backward pass (pp_end_micro came too early: a micro-batch's activations are needed until its backward "
          "pass is done)", mb, pp->s);
    CHECK(run->forward_done[mb], "pp_backward_compute: micro-batch %d's backward pass on stage %d before its "
          "forward pass", mb, pp->s);
    // Gradients zeroed after an earlier micro-batch's backward pass: the
    // micro-batches overwrite each other instead of adding up.
    if (run->backwards > 0 && grads_zero(pp)) run->zeroed_between++;
    comm_events_mark(1, mb);
    double t0 = core_now();
    for (int u = pp->u1 - 1; u >= pp->u0; u--) {
        trace_begin(run->model->units[u].name, "backward");
        gpt_acts_backward(run->model, run->acts[mb], u, run->params[u], run->grads[u]);
        trace_end();
    }
    run->backward_done[mb] = true;
    run->backwards++;
    record(pp, 1, mb, t0);
}

// mb's activations go (the harness's own tidying at the end of a step, too).
static void free_micro(Pp *pp, int mb) {
    PpRun *run = pp->run;
    gpt_acts_free(run->model, run->acts[mb]);   // refused while a send from it is in flight
    run->acts[mb] = NULL;
    run->live--;
}

void pp_end_micro(Pp *pp, int mb) {
    PpRun *run = pp->run;
    check_mb(pp, mb, "pp_end_micro");
    CHECK(run->acts[mb], "pp_end_micro: micro-batch %d is not alive on stage %d (ended twice?)", mb, pp->s);
    // Between its forward and its backward pass a micro-batch is alive,
    // whatever holds its activations: ending it there and beginning it
    // again would count a GPipe order as 1F1B's memory.
    CHECK(!run->forward_done[mb] || run->backward_done[mb], "pp_end_micro: micro-batch %d's activations on stage "
          "%d were freed before its backward pass (pp_end_micro came too early: its forward pass is done and its "
          "backward pass is not, which needs them; a micro-batch is alive from its forward pass to its backward "
          "pass, wherever its activations are kept in between)", mb, pp->s);
    free_micro(pp, mb);
}

static GptActs *alive(Pp *pp, int mb, const char *fn) {
    check_mb(pp, mb, fn);
    CHECK(pp->run->acts[mb], "%s: micro-batch %d is not alive on stage %d (pp_begin_micro first; not after "
          "pp_end_micro)", fn, mb, pp->s);
    return pp->run->acts[mb];
}

// The residual stream and its gradient: the model's precision, pp->type.
void *pp_act_in(Pp *pp, int mb) { return pp->s > 0 ? alive(pp, mb, "pp_act_in")->stream[pp->u0] : NULL; }
void *pp_act_out(Pp *pp, int mb) { return pp->s < pp->p - 1 ? alive(pp, mb, "pp_act_out")->stream[pp->u1] : NULL; }
void *pp_grad_in(Pp *pp, int mb) { return pp->s < pp->p - 1 ? alive(pp, mb, "pp_grad_in")->dstream[pp->u1] : NULL; }
void *pp_grad_out(Pp *pp, int mb) { return pp->s > 0 ? alive(pp, mb, "pp_grad_out")->dstream[pp->u0] : NULL; }
size_t pp_message_count(const Pp *pp) { return (size_t)pp->micro_rows * pp->T * pp->C; }

// ---- the stage, set up -------------------------------------------------------

void pprun_init(PpRun *run, Gpt *model, int row0, const int *x, const int *y) {
    *run = (PpRun){.model = model, .row0 = row0, .x = x, .y = y,
                   .log = malloc(PPRUN_MAX_LOG * sizeof(CommEvent))};
    CHECK(run->log, "out of memory");
}

void pprun_check_partition(Pp *pp, int nunits) {
    int p = pp->p, *all_u = malloc((size_t)2 * p * sizeof *all_u), mine_u[2] = {pp->u0, pp->u1};
    comm_all_gather_host(pp->group, mine_u, sizeof mine_u, all_u);
    int stage_u0[64], stage_u1[64], most = 0, least = nunits;
    CHECK(p <= 64, "at most 64 stages");
    for (int q = 0; q < p; q++) {
        stage_u0[q] = all_u[2 * q], stage_u1[q] = all_u[2 * q + 1];
        CHECK(stage_u0[q] == (q ? stage_u1[q - 1] : 0) && stage_u1[q] > stage_u0[q] &&
                  stage_u1[q] <= nunits && (q < p - 1 || stage_u1[q] == nunits),
              "pp_partition gave stage %d the units [%d, %d): the stages must take the %d units in order, each a "
              "range that starts where the last one ended, none empty, the last ending at %d (fix pp_partition "
              "in pipeline.c)", q, stage_u0[q], stage_u1[q], nunits, nunits);
        int n = stage_u1[q] - stage_u0[q];
        most = n > most ? n : most;
        least = n < least ? n : least;
    }
    free(all_u);
    pp->run->most = most, pp->run->least = least;
}

// Unit u's parameters initialised: fp32 in place; bf16 made in fp32 on the
// host and rounded into the weights (nothing tracked), the master keeping
// the fp32 values.
static void init_unit(const Pp *pp, int u) {
    const PpRun *run = pp->run;
    const Gpt *model = run->model;
    size_t n = model->units[u].size;
    if (pp->type == COMM_F32) {
        gpt_init_slice(model, u, run->params[u], 0, n);
        return;
    }
    float *f = malloc(n * sizeof *f);
    bf16 *h = malloc(n * sizeof *h);
    CHECK(f && h, "out of memory initialising %s", model->units[u].name);
    gpt_init_slice_host(model, u, f, 0, n);
    for (size_t i = 0; i < n; i++) h[i] = bf16_from_float(f[i]);
    mem_from_host(run->params[u], h, n * sizeof *h);
    free(f);
    free(h);
    gpt_init_slice(model, u, run->master[u], 0, n);
}

void pprun_alloc_stage(Pp *pp) {
    PpRun *run = pp->run;
    Gpt *model = run->model;
    int nunits = model->nunits;
    // Memory, measured before any of the student's code runs.
    mem_reset_peaks();
    size_t before = mem_live(MEM_ACTS);
    gpt_alloc_scratch(model);
    run->acts_scratch = (double)(mem_live(MEM_ACTS) - before);
    run->acts_set = gpt_acts_bytes(model, pp->u0, pp->u1);
    // This stage's parameters, gradients and moments: its units whole; in
    // bf16, bf16 parameters and gradients (2 bytes) and the fp32 master copy
    // beside the moments (OPTIM: 12 bytes a parameter).
    run->params = calloc((size_t)nunits, sizeof *run->params);
    run->grads = calloc((size_t)nunits, sizeof *run->grads);
    run->master = calloc((size_t)nunits, sizeof *run->master);
    run->m = calloc((size_t)nunits, sizeof *run->m), run->v = calloc((size_t)nunits, sizeof *run->v);
    CHECK(run->params && run->grads && run->master && run->m && run->v, "out of memory");
    run->stage_params = 0;
    for (int u = pp->u0; u < pp->u1; u++) {
        size_t n = model->units[u].size;
        if (pp->type == COMM_F32) {
            run->params[u] = mem_alloc_floats(n, MEM_PARAMS, model->units[u].name);
            run->grads[u] = mem_alloc_floats(n, MEM_GRADS, model->units[u].name);
        } else {
            run->params[u] = mem_alloc_bf16(n, MEM_PARAMS, model->units[u].name);
            run->grads[u] = mem_alloc_bf16(n, MEM_GRADS, model->units[u].name);
            run->master[u] = mem_alloc_floats(n, MEM_OPTIM, "master");
        }
        run->m[u] = mem_alloc_floats(n, MEM_OPTIM, "adam m");
        run->v[u] = mem_alloc_floats(n, MEM_OPTIM, "adam v");
        init_unit(pp, u);
        run->stage_params += (double)n;
    }
}

// ---- around the student's schedule, each step ----------------------------------

void pprun_step_begin(Pp *pp, int step) {
    PpRun *run = pp->run;
    run->step = step, run->loss = 0, run->backwards = 0, run->nevents = 0, run->busy = 0, run->max_live = 0;
    memset(run->forward_done, 0, sizeof run->forward_done);
    memset(run->backward_done, 0, sizeof run->backward_done);
    comm_events_start(run->log, PPRUN_MAX_LOG);
}

void pprun_step_end(Pp *pp) {
    PpRun *run = pp->run;
    run->nlog = comm_events_stop();
    for (int mb = 0; mb < pp->m; mb++) {
        CommHandle **h[] = {&pp->send_act[mb], &pp->send_grad[mb]};
        for (int i = 0; i < 2; i++)
            if (*h[i]) comm_wait(*h[i]), *h[i] = NULL, run->unwaited++;
    }
    for (int mb = 0; mb < pp->m; mb++)
        if (run->acts[mb]) free_micro(pp, mb), run->unfreed++;
    if (run->max_live > run->max_live_ever) run->max_live_ever = run->max_live;
    if (run->step > 0) run->busy_total += run->busy;
}

// ---- units, whole on the pipeline's first rank ---------------------------------

// Unit u, whole, on the pipeline's first rank (NULL elsewhere), from the
// stage that holds it, in fp32 (bf16 widened).
static float *gather_unit(const Pp *pp, void *const *units, CommType t, int u) {
    const Gpt *m = pp->run->model;
    size_t n = u >= pp->u0 && u < pp->u1 ? m->units[u].size : 0;
    float *mine = malloc((n ? n : 1) * sizeof(float));
    CHECK(mine, "out of memory");
    if (n && t == COMM_F32) {
        mem_to_host(mine, units[u], n * sizeof(float));
    } else if (n) {
        bf16 *h = malloc(n * sizeof *h);
        CHECK(h, "out of memory");
        mem_to_host(h, units[u], n * sizeof *h);
        for (size_t i = 0; i < n; i++) mine[i] = bf16_to_float(h[i]);
        free(h);
    }
    size_t lens[64];
    float *all = comm_gather_host(pp->group, mine, n * sizeof(float), 0, lens);
    free(mine);
    return all;   // on rank 0 only the owner sent anything: the unit itself
}

float **pprun_gather_units(const Pp *pp, void *const *units, CommType t) {
    const Gpt *m = pp->run->model;
    float **out = pp->s == 0 ? calloc((size_t)m->nunits, sizeof *out) : NULL;
    for (int u = 0; u < m->nunits; u++) {
        float *whole = gather_unit(pp, units, t, u);
        if (out) out[u] = whole;
        else free(whole);
    }
    return out;
}

void pprun_dump_units(const Pp *pp, DumpWriter *dw, const char *prefix, void *const *units, CommType t) {
    const Gpt *m = pp->run->model;
    for (int u = 0; u < m->nunits; u++) {
        float *g = gather_unit(pp, units, t, u);
        if (comm_rank(comm_world()) == 0) gpt_dump_host_unit(m, dw, prefix, u, g);
        free(g);
    }
}
