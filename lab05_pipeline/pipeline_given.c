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

// Chunk c's micro-batch mb in the run's arrays (acts, forward_done, ...):
// slot c m + mb (mb itself for chunk 0, GPipe's and 1F1B's one chunk).
static int slot(const Pp *pp, int c, int mb) { return c * pp->m + mb; }

static void check_mb(const Pp *pp, int mb, const char *fn) {
    CHECK(mb >= 0 && mb < pp->m, "%s: micro-batch %d does not exist (this step has %d: 0 .. %d)", fn, mb, pp->m,
          pp->m - 1);
}

static void check_chunk(const Pp *pp, int c, int mb, const char *fn) {
    CHECK(c >= 0 && c < pp->v, "%s: chunk %d does not exist (this rank holds %d: 0 .. %d)", fn, c, pp->v,
          pp->v - 1);
    check_mb(pp, mb, fn);
}

// "micro-batch 3", or with chunks "chunk 1 of micro-batch 3", for the errors.
static const char *who(const Pp *pp, int c, int mb, char *buf, size_t len) {
    if (pp->v > 1) snprintf(buf, len, "chunk %d of micro-batch %d", c, mb);
    else snprintf(buf, len, "micro-batch %d", mb);
    return buf;
}

// Where this stage's step stands, in the watchdog's lines: a hang of the
// schedule is read from them (grader/spec_lab05.c: a last stage waiting for
// a gradient before its first backward pass).
static void note_progress(const Pp *pp) {
    char at[96];
    snprintf(at, sizeof at, "stage %d of %d, %d backward passes into step %d", pp->s, pp->p, pp->run->backwards,
             pp->run->step + 1);
    comm_watchdog_context(at);
}

static double record(Pp *pp, PpPass kind, int c, int mb, double t0) {
    PpRun *run = pp->run;
    double t = core_now() - t0;
    CHECK(run->nevents < PPRUN_MAX_EVENTS, "more than %d passes in one step", PPRUN_MAX_EVENTS);
    run->events[run->nevents++] = (PpEvent){.kind = kind, .mb = mb, .seconds = t, .chunk = c};
    run->busy += t;
    note_progress(pp);
    return t;
}

// ---- full recomputation's sets ---------------------------------------------------

// A micro-batch's boundary under full recomputation: what crosses the
// stage's edges and nothing between them. Its tokens (stage 0) and targets
// (the last stage), its input stream[u0] and the gradient sent back from
// it, its output stream[u1] and the gradient received for it (where those
// neighbours exist), of the model's precision: a set gpt_acts_free frees.
static GptActs *boundary_create(const Pp *pp) {
    const Gpt *m = pp->run->model;
    size_t BT = (size_t)m->cfg.B * m->cfg.T, msg = BT * m->cfg.C * gpt_elem_size(m);
    GptActs *a = calloc(1, sizeof *a);
    CHECK(a, "out of memory");
    a->u0 = pp->u0, a->u1 = pp->u1;
    a->stream = calloc((size_t)m->nunits + 1, sizeof *a->stream);
    a->dstream = calloc((size_t)m->nunits + 1, sizeof *a->dstream);
    a->blocks = calloc((size_t)(m->cfg.L > 0 ? m->cfg.L : 1), sizeof *a->blocks);
    // The split backward's slots (gpt_acts_free lets them go): never used
    // here, where the backward is whole.
    a->saved = calloc((size_t)m->nunits, sizeof *a->saved);
    a->saved_pending = calloc((size_t)m->nunits, sizeof *a->saved_pending);
    CHECK(a->stream && a->dstream && a->blocks && a->saved && a->saved_pending, "out of memory");
    if (pp->u0 == 0) a->tokens = mem_alloc(BT * sizeof(int), MEM_ACTS, "tokens");
    if (pp->u1 == m->nunits) a->targets = mem_alloc(BT * sizeof(int), MEM_ACTS, "targets");
    const int edge[2] = {pp->u0, pp->u1};
    for (int i = 0; i < 2; i++) {
        int u = edge[i];
        if (u < 1 || u > m->nunits - 1) continue;   // the tokens' slot; past the head
        a->stream[u] = mem_alloc(msg, MEM_ACTS, i ? "stage output" : "stage input");
        a->dstream[u] = mem_alloc(msg, MEM_ACTS, i ? "stage output gradient" : "stage input gradient");
    }
    return a;
}

// The shared set: a whole set of the stage's units without the boundary,
// which each pass borrows from its micro-batch (bind). Its own output
// buffer stays: the stage's output made again goes there.
static void shared_create(PpRun *run, int u0, int u1) {
    GptActs *a = gpt_acts_create(run->model, u0, u1);
    void **lent[] = {(void **)&a->tokens, (void **)&a->targets, &a->stream[u0], &a->dstream[u0], &a->dstream[u1]};
    for (size_t i = 0; i < sizeof lent / sizeof lent[0]; i++) mem_free(*lent[i]), *lent[i] = NULL;
    run->shared_out = a->stream[u1];
    run->shared = a;
}

// The shared set lent mb's boundary: its input and targets, its messages,
// and the key of its dropout masks (step, global row, loss scale). The
// stage's output goes into mb's message buffer (`own_out` false: the
// forward pass) or the set's own buffer (a recompute: the message was sent
// already, and its send may not have been waited on yet).
static GptActs *bind(Pp *pp, int mb, bool own_out) {
    PpRun *run = pp->run;
    GptActs *a = run->shared, *b = run->acts[mb];
    a->tokens = b->tokens, a->targets = b->targets;
    a->step = b->step, a->row0 = b->row0, a->loss_scale = b->loss_scale;
    a->stream[pp->u0] = b->stream[pp->u0], a->dstream[pp->u0] = b->dstream[pp->u0];
    a->stream[pp->u1] = own_out ? run->shared_out : b->stream[pp->u1];
    a->dstream[pp->u1] = b->dstream[pp->u1];
    return a;
}

// The set chunk c's mb passes run on: its own, or, recomputing (one chunk,
// the stage), the shared set lent its boundary.
static GptActs *set_of(Pp *pp, int c, int mb) {
    return pp->recompute ? bind(pp, mb, false) : pp->run->acts[slot(pp, c, mb)];
}

void pp_zero_grads(Pp *pp) {
    PpRun *run = pp->run;
    for (int c = 0; c < pp->v; c++)
        for (int u = pp->cu0[c]; u < pp->cu1[c]; u++) mem_zero(run->grads[u], run->model->units[u].size * pp->elem);
}

static void begin(Pp *pp, int c, int mb, float loss_scale, const char *fn) {
    PpRun *run = pp->run;
    char w[48];
    check_chunk(pp, c, mb, fn);
    int j = slot(pp, c, mb);
    CHECK(!run->acts[j], "%s: %s is already alive on stage %d (begun twice in a step?)", fn, who(pp, c, mb, w, 48),
          pp->s);
    CHECK(!run->forward_done[j], "%s: %s has already had its forward pass on stage %d this step (begun twice in a "
          "step?)", fn, who(pp, c, mb, w, 48), pp->s);
    run->acts[j] = pp->recompute ? boundary_create(pp) : gpt_acts_create(run->model, pp->cu0[c], pp->cu1[c]);
    size_t off = (size_t)mb * pp->micro_rows * pp->T;
    gpt_acts_set_batch(run->model, run->acts[j], run->x + off, run->y + off, run->step,
                       run->row0 + mb * pp->micro_rows, loss_scale);
    run->live++;
    if (run->live > run->max_live) run->max_live = run->live;
}

void pp_begin_micro(Pp *pp, int mb, float loss_scale) { begin(pp, 0, mb, loss_scale, "pp_begin_micro"); }
void pp_begin_chunk(Pp *pp, int c, int mb, float loss_scale) { begin(pp, c, mb, loss_scale, "pp_begin_chunk"); }

static void forward(Pp *pp, int c, int mb, const char *fn) {
    PpRun *run = pp->run;
    char w[48];
    check_chunk(pp, c, mb, fn);
    int j = slot(pp, c, mb);
    CHECK(run->acts[j], "%s: %s has no activations on stage %d: call %s first", fn, who(pp, c, mb, w, 48), pp->s,
          pp->v > 1 ? "pp_begin_chunk" : "pp_begin_micro");
    comm_events_mark(PP_PASS_F, pp_mark_arg(c, mb));
    double t0 = core_now();
    GptActs *a = set_of(pp, c, mb);
    for (int u = pp->cu0[c]; u < pp->cu1[c]; u++) {
        trace_begin(run->model->units[u].name, "forward");
        gpt_acts_forward(run->model, a, u, run->params[u]);
        trace_end();
    }
    if (pp->cu1[c] == run->model->nunits) run->loss += gpt_acts_loss(run->model, a) / pp->m;
    run->forward_done[j] = true;
    run->held = mb;
    record(pp, PP_PASS_F, c, mb, t0);
}

void pp_forward_compute(Pp *pp, int mb) { forward(pp, 0, mb, "pp_forward_compute"); }
void pp_forward_chunk(Pp *pp, int c, int mb) { forward(pp, c, mb, "pp_forward_chunk"); }

void pp_recompute(Pp *pp, int mb) {
    PpRun *run = pp->run;
    check_mb(pp, mb, "pp_recompute");
    CHECK(run->acts[mb], "pp_recompute: micro-batch %d is not alive on stage %d (pp_begin_micro first; not after "
          "pp_end_micro)", mb, pp->s);
    CHECK(run->forward_done[mb], "pp_recompute: micro-batch %d has had no forward pass on stage %d: there is "
          "nothing to make again (its input arrives with the forward pass)", mb, pp->s);
    // Nothing to make again: no recomputation, or the shared set holds
    // mb's activations still (its forward or recompute was the last).
    if (!pp->recompute || run->held == mb) return;
    comm_events_mark(PP_PASS_R, pp_mark_arg(0, mb));
    OpsWork before = ops_work();
    double t0 = core_now();
    GptActs *a = bind(pp, mb, true);
    for (int u = pp->u0; u < pp->u1; u++) {
        trace_begin(run->model->units[u].name, "recompute");
        gpt_acts_forward(run->model, a, u, run->params[u]);
        trace_end();
    }
    run->held = mb;
    run->rc_seconds += record(pp, PP_PASS_R, 0, mb, t0);
    OpsWork after = ops_work();
    run->rc_matmul += after.matmul - before.matmul;
    run->rc_layernorm += after.layernorm - before.layernorm;
    run->recomputes++;
}

// Every gradient of this stage zero. bf16's are widened a unit at a time
// into the model's fp32 scratch of a unit's gradient (free between passes).
static bool grads_zero(const Pp *pp) {
    const PpRun *run = pp->run;
    double sum = 0;
    for (int c = 0; c < pp->v; c++)
        for (int u = pp->cu0[c]; u < pp->cu1[c]; u++) {
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

static void backward(Pp *pp, int c, int mb, const char *fn) {
    PpRun *run = pp->run;
    char w[48];
    check_chunk(pp, c, mb, fn);
    int j = slot(pp, c, mb);
    // Interleaved, the last stage's first backward pass is of micro-batch
    // 0's last chunk, whose forward pass comes after (v - 1) p others on
    // that stage: a warm-up shorter than that asks for it first.
    CHECK(run->acts[j] || run->forward_done[j], "%s: %s's backward pass on stage %d before its forward pass%s", fn,
          who(pp, c, mb, w, 48), pp->s, pp->v > 1 ? " (the warm-up ran too few forwards: on the last stage the first "
          "backward pass is of micro-batch 0's last chunk, the head, whose forward comes after the first chunks' "
          "of (v - 1) p micro-batches; 1F1B's warm-up of p - s - 1 forwards is too short by (p - s - 1) + (v - 1) p "
          "there: the interleaved schedule warms up with (p - s - 1) 2 + (v - 1) p)" : "");
    CHECK(run->acts[j], "%s: %s's activations on stage %d were freed before its backward pass (%s came too early: "
          "a micro-batch's activations are needed until its backward pass is done)", fn, who(pp, c, mb, w, 48), pp->s,
          pp->v > 1 ? "pp_end_chunk" : "pp_end_micro");
    CHECK(run->forward_done[j], "%s: %s's backward pass on stage %d before its forward pass", fn,
          who(pp, c, mb, w, 48), pp->s);
    CHECK(!run->input_done[j], "%s: %s's backward pass on stage %d was split already (its B, pp_backward_input, "
          "has run): finish it with its W, pp_backward_weight", fn, who(pp, c, mb, w, 48), pp->s);
    // Gradients zeroed after an earlier micro-batch's backward pass: the
    // micro-batches overwrite each other instead of adding up.
    if (run->backwards > 0 && grads_zero(pp)) run->zeroed_between++;
    // Recomputing, the shared set must hold mb's activations; where it holds
    // another's (never made again), the pass runs on them all the same, and
    // its gradients are wrong: noted for the grader, which names it.
    if (pp->recompute && run->held != mb) {
        if (!run->stale++) run->stale_step = run->step, run->stale_mb = mb, run->stale_held = run->held;
    }
    comm_events_mark(PP_PASS_B, pp_mark_arg(c, mb));
    double t0 = core_now();
    GptActs *a = set_of(pp, c, mb);
    for (int u = pp->cu1[c] - 1; u >= pp->cu0[c]; u--) {
        trace_begin(run->model->units[u].name, "backward");
        gpt_acts_backward(run->model, a, u, run->params[u], run->grads[u]);
        trace_end();
    }
    run->backward_done[j] = true;
    run->backwards++;
    record(pp, PP_PASS_B, c, mb, t0);
}

void pp_backward_compute(Pp *pp, int mb) { backward(pp, 0, mb, "pp_backward_compute"); }
void pp_backward_chunk(Pp *pp, int c, int mb) { backward(pp, c, mb, "pp_backward_chunk"); }

// ---- the backward pass in two: B and W -------------------------------------------

void pp_backward_input(Pp *pp, int mb) {
    PpRun *run = pp->run;
    check_mb(pp, mb, "pp_backward_input");
    CHECK(pp->v == 1, "pp_backward_input: the backward pass split into B and W is the zero-bubble schedules', one "
          "chunk a stage; interleaved, run each chunk's whole backward pass, pp_backward_chunk");
    CHECK(!pp->recompute, "pp_backward_input: the backward pass split into B and W under --recompute full: W reads "
          "the activations B ran on, and here the stage's units share one set that the next forward pass "
          "overwrites; split it without --recompute full, or run pp_backward_compute");
    CHECK(run->acts[mb], "pp_backward_input: micro-batch %d's activations on stage %d were freed before its B pass "
          "(pp_end_micro came too early: a micro-batch is alive until its W)", mb, pp->s);
    CHECK(run->forward_done[mb], "pp_backward_input: micro-batch %d's B pass on stage %d before its forward pass", mb,
          pp->s);
    CHECK(!run->input_done[mb] && !run->backward_done[mb], "pp_backward_input: micro-batch %d's backward pass on "
          "stage %d has run already (B twice, or after the whole backward pass)", mb, pp->s);
    comm_events_mark(PP_PASS_B, pp_mark_arg(0, mb));
    double t0 = core_now();
    GptActs *a = run->acts[mb];
    for (int u = pp->u1 - 1; u >= pp->u0; u--) {
        trace_begin(run->model->units[u].name, "backward B");
        gpt_acts_backward_input(run->model, a, u, run->params[u]);
        trace_end();
    }
    run->input_done[mb] = true;
    if (++run->pending > run->max_pending) run->max_pending = run->pending;
    record(pp, PP_PASS_B, 0, mb, t0);
}

void pp_backward_weight(Pp *pp, int mb) {
    PpRun *run = pp->run;
    check_mb(pp, mb, "pp_backward_weight");
    CHECK(pp->v == 1, "pp_backward_weight: the backward pass split into B and W is the zero-bubble schedules', one "
          "chunk a stage; interleaved, run each chunk's whole backward pass, pp_backward_chunk");
    CHECK(run->acts[mb], "pp_backward_weight: micro-batch %d's activations on stage %d were freed before its W pass "
          "(pp_end_micro came too early: a micro-batch is alive until its W)", mb, pp->s);
    CHECK(run->input_done[mb], "pp_backward_weight: micro-batch %d's W pass on stage %d before its B pass "
          "(pp_backward_input): W reads the output gradients B computes", mb, pp->s);
    CHECK(!run->backward_done[mb], "pp_backward_weight: micro-batch %d's W pass on stage %d twice", mb, pp->s);
    // As in pp_backward_compute: W is what adds into the gradients.
    if (run->backwards > 0 && grads_zero(pp)) run->zeroed_between++;
    comm_events_mark(PP_PASS_W, pp_mark_arg(0, mb));
    double t0 = core_now();
    GptActs *a = run->acts[mb];
    for (int u = pp->u1 - 1; u >= pp->u0; u--) {
        trace_begin(run->model->units[u].name, "backward W");
        gpt_acts_backward_weight(run->model, a, u, run->grads[u]);
        trace_end();
    }
    run->backward_done[mb] = true;
    run->pending--;
    run->backwards++;
    record(pp, PP_PASS_W, 0, mb, t0);
}

// The set in slot j goes (the harness's own tidying at the end of a step, too).
static void free_micro(Pp *pp, int j) {
    PpRun *run = pp->run;
    gpt_acts_free(run->model, run->acts[j]);   // refused while a send from it is in flight
    run->acts[j] = NULL;
    run->live--;
    if (run->held == j) run->held = -1;   // its boundary is gone: nothing to make it again from (one chunk: j = mb)
}

static void end(Pp *pp, int c, int mb, const char *fn) {
    PpRun *run = pp->run;
    char w[48];
    check_chunk(pp, c, mb, fn);
    int j = slot(pp, c, mb);
    CHECK(run->acts[j], "%s: %s is not alive on stage %d (ended twice?)", fn, who(pp, c, mb, w, 48), pp->s);
    CHECK(!run->input_done[j] || run->backward_done[j], "%s: %s on stage %d ended after its B and before its W "
          "(pp_backward_weight): W needs its activations and the output gradients B kept, and without it the "
          "micro-batch's parameter gradients are lost; a micro-batch is alive until its W", fn, who(pp, c, mb, w, 48),
          pp->s);
    // Between its forward and its backward pass a micro-batch is alive,
    // whatever holds its activations: ending it there and beginning it
    // again would count a GPipe order as 1F1B's memory.
    CHECK(!run->forward_done[j] || run->backward_done[j], "%s: %s's activations on stage %d were freed before its "
          "backward pass (%s came too early: its forward pass is done and its backward pass is not, which needs "
          "them; a micro-batch is alive from its forward pass to its backward pass, wherever its activations are "
          "kept in between)", fn, who(pp, c, mb, w, 48), pp->s, fn);
    free_micro(pp, j);
}

void pp_end_micro(Pp *pp, int mb) { end(pp, 0, mb, "pp_end_micro"); }
void pp_end_chunk(Pp *pp, int c, int mb) { end(pp, c, mb, "pp_end_chunk"); }

static GptActs *alive(Pp *pp, int c, int mb, const char *fn) {
    char w[48];
    check_chunk(pp, c, mb, fn);
    GptActs *a = pp->run->acts[slot(pp, c, mb)];
    CHECK(a, "%s: %s is not alive on stage %d (%s first; not after %s)", fn, who(pp, c, mb, w, 48), pp->s,
          pp->v > 1 ? "pp_begin_chunk" : "pp_begin_micro", pp->v > 1 ? "pp_end_chunk" : "pp_end_micro");
    return a;
}

// The residual stream and its gradient: the model's precision, pp->type.
// The chunk's input where it is not the embeddings (virtual stage 0), its
// output where it is not the head (the last): its units' edges.
static void *act_in(Pp *pp, int c, int mb, const char *fn) {
    return pp->cu0[c] > 0 ? alive(pp, c, mb, fn)->stream[pp->cu0[c]] : (check_chunk(pp, c, mb, fn), NULL);
}
static void *act_out(Pp *pp, int c, int mb, const char *fn) {
    bool last = pp->cu1[c] == pp->run->model->nunits;
    return !last ? alive(pp, c, mb, fn)->stream[pp->cu1[c]] : (check_chunk(pp, c, mb, fn), NULL);
}
static void *grad_in(Pp *pp, int c, int mb, const char *fn) {
    bool last = pp->cu1[c] == pp->run->model->nunits;
    return !last ? alive(pp, c, mb, fn)->dstream[pp->cu1[c]] : (check_chunk(pp, c, mb, fn), NULL);
}
static void *grad_out(Pp *pp, int c, int mb, const char *fn) {
    return pp->cu0[c] > 0 ? alive(pp, c, mb, fn)->dstream[pp->cu0[c]] : (check_chunk(pp, c, mb, fn), NULL);
}

void *pp_act_in(Pp *pp, int mb) { return act_in(pp, 0, mb, "pp_act_in"); }
void *pp_act_out(Pp *pp, int mb) { return act_out(pp, 0, mb, "pp_act_out"); }
void *pp_grad_in(Pp *pp, int mb) { return grad_in(pp, 0, mb, "pp_grad_in"); }
void *pp_grad_out(Pp *pp, int mb) { return grad_out(pp, 0, mb, "pp_grad_out"); }
void *pp_chunk_act_in(Pp *pp, int c, int mb) { return act_in(pp, c, mb, "pp_chunk_act_in"); }
void *pp_chunk_act_out(Pp *pp, int c, int mb) { return act_out(pp, c, mb, "pp_chunk_act_out"); }
void *pp_chunk_grad_in(Pp *pp, int c, int mb) { return grad_in(pp, c, mb, "pp_chunk_grad_in"); }
void *pp_chunk_grad_out(Pp *pp, int c, int mb) { return grad_out(pp, c, mb, "pp_chunk_grad_out"); }
size_t pp_message_count(const Pp *pp) { return (size_t)pp->micro_rows * pp->T * pp->C; }

// ---- the stage, set up -------------------------------------------------------

void pprun_init(PpRun *run, Gpt *model, int row0, const int *x, const int *y) {
    *run = (PpRun){.model = model, .row0 = row0, .x = x, .y = y, .held = -1, .stale_mb = -1, .stale_held = -1,
                   .w_missing_step = -1, .w_missing_mb = -1,
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

void pprun_check_chunks(Pp *pp, int nunits) {
    int p = pp->p, v = pp->v, V = p * v, mine[3 * PP_MAX_CHUNKS];
    int *all = malloc((size_t)3 * V * sizeof *all), *at = malloc((size_t)V * sizeof *at);
    CHECK(all && at && V <= 64 * PP_MAX_CHUNKS, "out of memory");
    for (int c = 0; c < v; c++) mine[3 * c] = pp->vs[c], mine[3 * c + 1] = pp->cu0[c], mine[3 * c + 2] = pp->cu1[c];
    comm_all_gather_host(pp->group, mine, (size_t)3 * v * sizeof *mine, all);
    // Every virtual stage held once: at[k] is the (stage, chunk) of k.
    for (int k = 0; k < V; k++) at[k] = -1;
    for (int i = 0; i < V; i++) {
        int k = all[3 * i], q = i / v, c = i % v;
        CHECK(k >= 0 && k < V, "pp_virtual_stage(%d, %d, %d, %d) = %d: the virtual stages are 0 .. %d (fix "
              "pp_virtual_stage in pipeline.c)", p, v, q, c, k, V - 1);
        CHECK(at[k] < 0, "pp_virtual_stage gave virtual stage %d to chunk %d of stage %d and to chunk %d of stage %d: "
              "each of the p v = %d virtual stages is held by one chunk (fix pp_virtual_stage in pipeline.c)", k,
              at[k] % v, at[k] / v, c, q, V);
        at[k] = i;
    }
    // In the order of the virtual stages, the units in order, none empty.
    int most = 0, least = nunits, end = 0;
    for (int k = 0; k < V; k++) {
        int i = at[k], u0 = all[3 * i + 1], u1 = all[3 * i + 2];
        CHECK(u0 == end && u1 > u0 && u1 <= nunits && (k < V - 1 || u1 == nunits),
              "pp_partition gave virtual stage %d (chunk %d of stage %d) the units [%d, %d): the p v = %d virtual "
              "stages must take the %d units in order, each a range that starts where the last one ended, none "
              "empty, the last ending at %d (fix pp_partition in pipeline.c)", k, i % v, i / v, u0, u1, V, nunits,
              nunits);
        end = u1;
        most = u1 - u0 > most ? u1 - u0 : most;
        least = u1 - u0 < least ? u1 - u0 : least;
    }
    free(all), free(at);
    pp->run->most = most, pp->run->least = least;
}

bool pprun_holds(const Pp *pp, int u) {
    for (int c = 0; c < pp->v; c++)
        if (u >= pp->cu0[c] && u < pp->cu1[c]) return true;
    return false;
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
    if (pp->recompute) {
        // The shared set, once; a micro-batch's boundary, made and let go.
        before = mem_live(MEM_ACTS);
        shared_create(run, pp->u0, pp->u1);
        run->acts_shared = (double)(mem_live(MEM_ACTS) - before);
        before = mem_live(MEM_ACTS);
        GptActs *b = boundary_create(pp);
        run->acts_set = (double)(mem_live(MEM_ACTS) - before);
        gpt_acts_free(model, b);
    } else {
        // Interleaved: each chunk's set, and the largest, which the bound counts.
        run->acts_set = 0;
        for (int c = 0; c < pp->v; c++) {
            run->chunk_set[c] = gpt_acts_bytes(model, pp->cu0[c], pp->cu1[c]);
            run->acts_set = run->chunk_set[c] > run->acts_set ? run->chunk_set[c] : run->acts_set;
        }
        run->acts_saved = gpt_saved_bytes(model, pp->u0, pp->u1);   // the split backward's: one chunk, the stage
    }
    // This stage's parameters, gradients and moments: its units whole; in
    // bf16, bf16 parameters and gradients (2 bytes) and the fp32 master copy
    // beside the moments (OPTIM: 12 bytes a parameter).
    run->params = calloc((size_t)nunits, sizeof *run->params);
    run->grads = calloc((size_t)nunits, sizeof *run->grads);
    run->master = calloc((size_t)nunits, sizeof *run->master);
    run->m = calloc((size_t)nunits, sizeof *run->m), run->v = calloc((size_t)nunits, sizeof *run->v);
    CHECK(run->params && run->grads && run->master && run->m && run->v, "out of memory");
    run->stage_params = 0;
    for (int u = 0; u < nunits; u++) {
        if (!pprun_holds(pp, u)) continue;
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
    // Last step's activations are of other weights and rows: the shared set
    // holds none of this step's.
    run->held = -1, run->recomputes = 0, run->rc_seconds = 0;
    memset(run->forward_done, 0, sizeof run->forward_done);   // every chunk's slots
    memset(run->backward_done, 0, sizeof run->backward_done);
    note_progress(pp);
    memset(run->input_done, 0, sizeof run->input_done);
    run->pending = 0, run->max_pending = 0;
    comm_events_start(run->log, PPRUN_MAX_LOG);
}

void pprun_step_end(Pp *pp) {
    PpRun *run = pp->run;
    run->nlog = comm_events_stop();
    for (int mb = 0; mb < pp->m; mb++) {
        CommHandle **h[] = {&pp->send_act[mb], &pp->send_grad[mb]};
        for (int i = 0; i < 2; i++)
            if (*h[i]) comm_wait(*h[i]), *h[i] = NULL, run->unwaited++;
        for (int c = 0; c < pp->v; c++) {
            CommHandle **hc[] = {&pp->chunk_send_act[c][mb], &pp->chunk_send_grad[c][mb]};
            for (int i = 0; i < 2; i++)
                if (*hc[i]) comm_wait(*hc[i]), *hc[i] = NULL, run->unwaited++;
        }
    }
    // A B whose W never came: its micro-batch's parameter gradients are
    // missing from the step.
    for (int mb = 0; mb < pp->m; mb++)
        if (run->input_done[mb] && !run->backward_done[mb] && !run->w_missing++)
            run->w_missing_step = run->step, run->w_missing_mb = mb;
    for (int j = 0; j < pp->v * pp->m; j++)
        if (run->acts[j]) free_micro(pp, j), run->unfreed++;
    if (run->max_live > run->max_live_ever) run->max_live_ever = run->max_live;
    if (run->max_pending > run->max_pending_ever) run->max_pending_ever = run->max_pending;
    if (run->recomputes > run->recomputes_most) run->recomputes_most = run->recomputes;
    if (run->step > 0) run->busy_total += run->busy, run->rc_seconds_total += run->rc_seconds;
}

// ---- units, whole on the pipeline's first rank ---------------------------------

// Unit u, whole, on the pipeline's first rank (NULL elsewhere), from the
// stage that holds it, in fp32 (bf16 widened).
static float *gather_unit(const Pp *pp, void *const *units, CommType t, int u) {
    const Gpt *m = pp->run->model;
    size_t n = pprun_holds(pp, u) ? m->units[u].size : 0;
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
    // Bookkeeping between steps: the bf16 products' widening scratch (the
    // ops' own heap, made again at the next product) is let go first, so
    // that the unit on the host does not stack on it. (Under full
    // recomputation the shared set is live here, and the schedule's bound
    // has no idle micro-batch's set left to cover both.)
    ops_release_scratch();
    for (int u = 0; u < m->nunits; u++) {
        float *g = gather_unit(pp, units, t, u);
        if (comm_rank(comm_world()) == 0) gpt_dump_host_unit(m, dw, prefix, u, g);
        free(g);
    }
}
