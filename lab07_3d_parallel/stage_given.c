// stage_given.c: lab07's pipeline stage (stage_given.h): lab05's
// micro-batch API over units that run tensor-parallel with sequence
// parallelism (lab06's functions).
#include "stage_given.h"

#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "mem.h"
#include "ops.h"
#include "prec.h"
#include "tp_net.h"
#include "trace.h"

// ---- allocation (as lab06's model_given.c lays a block's activations out) -----------

static float *fl(size_t n, const char *name) { return mem_alloc_floats(n, MEM_ACTS, name); }

static void alloc_block(const Sp *sp, SpBlockActs *a) {
    const TpShard *tp = &sp->tp;
    size_t Mt = (size_t)tp->B * sp->Tt, M = (size_t)tp->B * tp->T, C = (size_t)tp->C;
    a->ln1_mean = fl(Mt, "ln1 mean");
    a->ln1_rstd = fl(Mt, "ln1 rstd");
    a->ln1_all = fl(M * C, "ln1, all-gathered");
    a->mid = fl(Mt * C, "residual mid (this rank's tokens)");
    a->ln2_mean = fl(Mt, "ln2 mean");
    a->ln2_rstd = fl(Mt, "ln2 rstd");
    a->ln2_all = fl(M * C, "ln2, all-gathered");
    TpLayerActs *l = &a->layers;
    l->q = fl(M * tp->Ct, "q");
    l->k = fl(M * tp->Ct, "k");
    l->v = fl(M * tp->Ct, "v");
    l->y = fl(M * tp->Ct, "attention out");
    // (--recompute selective: none kept, made again into tp->att_again.)
    l->att = sp->recompute == GPT_RECOMPUTE_SELECTIVE ? NULL : fl((size_t)tp->B * tp->NHt * tp->T * tp->T, "attention");
    l->h = fl(M * tp->Ht, "mlp hidden");
    l->hg = fl(M * tp->Ht, "mlp gelu");
}

static void free_block(SpBlockActs *a) {
    TpLayerActs *l = &a->layers;
    void *all[] = {a->ln1_mean, a->ln1_rstd, a->ln1_all, a->mid, a->ln2_mean, a->ln2_rstd, a->ln2_all,
                   l->q, l->k, l->v, l->y, l->att, l->h, l->hg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
}

// The layers' and sp.c's scratch, shared by every micro-batch (fp32: no
// widening buffers).
static void alloc_scratch(Sp *sp) {
    TpShard *tp = &sp->tp;
    size_t M = (size_t)tp->B * tp->T, Mt = (size_t)tp->B * sp->Tt, C = (size_t)tp->C;
    for (int i = 0; i < 4; i++) tp->ct[i] = fl(M * tp->Ct, "scratch");
    tp->att = fl((size_t)tp->B * tp->NHt * tp->T * tp->T, "scratch");
    for (int i = 0; i < 2; i++) tp->ht[i] = fl(M * tp->Ht, "scratch");
    tp->dlogits = fl(M * tp->nlm, "scratch");
    tp->ids = mem_alloc(M * sizeof(int), MEM_ACTS, "scratch ids");
    for (int i = 0; i < 2; i++) sp->s.whole[i] = fl(M * C, "scratch");
    for (int i = 0; i < 2; i++) sp->s.local[i] = fl(Mt * C, "scratch");
    sp->s.blocks = fl(M * C, "scratch");
    // --recompute selective: the probabilities of the block running, one for
    // all; full: one block's set for every block and micro-batch (each
    // block's input stays in the micro-batch's stream), and where the
    // forward made again writes the block's output.
    if (sp->recompute == GPT_RECOMPUTE_SELECTIVE)
        tp->att_again = fl((size_t)tp->B * tp->NHt * tp->T * tp->T, "attention, recomputed");
    if (sp->recompute == GPT_RECOMPUTE_FULL) sp->s.again = fl(Mt * C, "scratch (the output made again)");
}

// ---- the stage --------------------------------------------------------------------------

bool stage_holds(const Pp *pp, int u) { return u >= pp->u0 && u < pp->u1; }

void stage_create(Pp *pp, PpRun *run, const Gpt *m, Sp *sp, TpLayout *L, int row0, const int *x, const int *y,
                  const Grid *g, GridStep *st, int zero) {
    memset(run, 0, sizeof *run);
    run->m = m, run->sp = sp, run->L = L, run->row0 = row0, run->x = x, run->y = y, run->grid = g, run->st = st;
    prec_init(&run->prec, false, 0, 0);
    sp->tp.prec = &run->prec;
    sp->sums_deferred = true;   // the student's grid_after_backward sums them, once a step
    pp->run = run;
    pp->type = COMM_F32, pp->elem = sizeof(float), pp->v = 1;
    pp->vs[0] = pp->s, pp->cu0[0] = pp->u0, pp->cu1[0] = pp->u1;
    size_t before = mem_live(MEM_ACTS);
    alloc_scratch(sp);
    if (sp->recompute == GPT_RECOMPUTE_FULL && m->cfg.L > 0) alloc_block(sp, &run->shared);
    run->acts_scratch = (double)(mem_live(MEM_ACTS) - before);
    run->params = calloc((size_t)m->nunits, sizeof *run->params);
    run->grads = calloc((size_t)m->nunits, sizeof *run->grads);
    CHECK(run->params && run->grads, "out of memory");

    // One flat buffer each, the units one after another, padded to the
    // replicas' equal shards under --zero 1 (the student's grid_shard).
    memset(st, 0, sizeof *st);
    st->zero = zero, st->m = pp->m;
    for (int u = pp->u0; u < pp->u1; u++) st->n += L->size[u];
    st->shard_off = 0, st->shard_len = st->n, st->padded = st->n;
    if (zero) {
        grid_shard(g, st->n, &st->shard_off, &st->shard_len);
        const size_t len = st->shard_len, least = (st->n + (size_t)g->n.dp - 1) / (size_t)g->n.dp;
        CHECK(len >= least && len <= least + 64,
              "grid_shard gives this rank %zu of the stage's %zu floats: the %d replicas of its stage and TP part "
              "(its DP group) share them out, ceil(%zu / %d) = %zu each (up to 64 more: padding); %s (fix "
              "grid_shard in grid.c)", len, st->n, g->n.dp, st->n, g->n.dp, least,
              len < least ? "a shard taken over more ranks than the DP group's leaves part of the stage to no rank"
                          : "a shard that long holds more than a replica's share");
        CHECK(st->shard_off % len == 0 && st->shard_off / len < (size_t)g->n.dp,
              "grid_shard puts this rank's shard at float %zu, shards of %zu: the DP group's %d shards start at 0, "
              "%zu, ...: rank k of the DP group holds the k-th, where comm_reduce_scatter leaves it (fix grid_shard "
              "in grid.c)", st->shard_off, len, g->n.dp, len);
        st->padded = (size_t)g->n.dp * len;
    }
    st->params = mem_alloc_floats(st->padded, MEM_PARAMS, "params (the stage's units, flat)");
    st->grads = mem_alloc_floats(st->padded, MEM_GRADS, "grads (the stage's units, flat)");
    size_t at = 0;
    for (int u = pp->u0; u < pp->u1; u++) {
        run->params[u] = st->params + at, run->grads[u] = st->grads + at;
        tp_layout_init_unit(L, u, run->params[u]);
        for (int k = 0; k < m->units[u].ntensors; k++) {
            if (L->part[u][k].split.kind != TP_REPLICATED) continue;
            CHECK(st->nrep < GRID_MAX_REPLICATED, "more than %d replicated tensors on a stage", GRID_MAX_REPLICATED);
            st->rep[st->nrep].grad = run->grads[u] + L->part[u][k].offset;
            st->rep[st->nrep].n = L->part[u][k].count;
            st->rep[st->nrep].name = m->units[u].tensors[k].name;
            st->nrep++;
        }
        at += L->size[u];
    }
    // One micro-batch's set, measured (pp_budget's acts_set).
    before = mem_live(MEM_ACTS);
    pp_begin_micro(pp, 0, 1);
    run->acts_set = (double)(mem_live(MEM_ACTS) - before);
    pp_end_micro(pp, 0);
}

void stage_step_begin(Pp *pp, int step) {
    pp->run->step = step;
    pp->run->loss = 0;
    pp->run->done = 0;
}

// ---- lab05's micro-batch API (pipeline.h) ---------------------------------------------

static void check_mb(const Pp *pp, int mb, const char *fn, bool alive) {
    CHECK(mb >= 0 && mb < pp->m, "%s: micro-batch %d does not exist (this step has %d: 0 .. %d)", fn, mb, pp->m,
          pp->m - 1);
    CHECK(!alive || pp->run->acts[mb], "%s: micro-batch %d is not alive on stage %d (pp_begin_micro first)", fn, mb,
          pp->s);
}

void pp_zero_grads(Pp *pp) {
    mem_zero(pp->run->st->grads, pp->run->st->padded * sizeof(float));   // the padding too
}

size_t pp_message_count(const Pp *pp) { return (size_t)pp->micro_rows * pp->run->sp->Tt * pp->C; }

void pp_begin_micro(Pp *pp, int mb, float loss_scale) {
    PpRun *run = pp->run;
    const Sp *sp = run->sp;
    check_mb(pp, mb, "pp_begin_micro", false);
    CHECK(!run->acts[mb], "pp_begin_micro: micro-batch %d is already alive on stage %d (begun twice?)", mb, pp->s);
    const Gpt *m = run->m;
    const int nunits = m->nunits;
    StageActs *a = calloc(1, sizeof *a);
    CHECK(a, "out of memory");
    a->stream = calloc((size_t)nunits + 1, sizeof *a->stream);
    a->dstream = calloc((size_t)nunits + 1, sizeof *a->dstream);
    a->blocks = calloc((size_t)(m->cfg.L ? m->cfg.L : 1), sizeof *a->blocks);
    CHECK(a->stream && a->dstream && a->blocks, "out of memory");
    const size_t M = (size_t)pp->micro_rows * pp->T, local = pp_message_count(pp);
    const size_t off = (size_t)mb * pp->micro_rows * pp->T;
    if (pp->u0 == 0) {
        a->tokens = mem_alloc(M * sizeof(int), MEM_ACTS, "tokens");
        mem_from_host(a->tokens, run->x + off, M * sizeof(int));
    }
    if (pp->u1 == nunits) {
        a->targets = mem_alloc(M * sizeof(int), MEM_ACTS, "targets");
        mem_from_host(a->targets, run->y + off, M * sizeof(int));
        a->losses = fl(M, "losses");
        SpHeadActs *h = &a->head;
        h->lnf_mean = fl((size_t)pp->micro_rows * sp->Tt, "lnf mean");
        h->lnf_rstd = fl((size_t)pp->micro_rows * sp->Tt, "lnf rstd");
        h->lnf_all = fl(M * pp->C, "lnf, all-gathered");
        tp_net_head_alloc(&h->ce, M, sp->tp.nlm, MEM_ACTS);
    }
    // stream[u]: unit u's input (stream[u0] received from the previous
    // stage; stream[u1] sent to the next); none before the embeddings, none
    // after the head.
    for (int u = pp->u0 > 0 ? pp->u0 : 1; u <= pp->u1 && u < nunits; u++) {
        a->stream[u] = fl(local, "residual stream");
        a->dstream[u] = fl(local, "residual stream gradient");
    }
    for (int u = pp->u0; u < pp->u1; u++)
        if (m->units[u].kind == UNIT_BLOCK && sp->recompute != GPT_RECOMPUTE_FULL) alloc_block(sp, &a->blocks[u - 1]);
    a->step = run->step, a->row0 = run->row0 + mb * pp->micro_rows, a->loss_scale = loss_scale;
    run->acts[mb] = a;
}

// Block u's activations for micro-batch a: its own, or under --recompute
// full the one set every block shares (sp_block_backward makes it again).
static SpBlockActs *block_set(PpRun *run, StageActs *a, int u) {
    return run->sp->recompute == GPT_RECOMPUTE_FULL ? &run->shared : &a->blocks[u - 1];
}

// sp's per-pass state: the micro-batch's step and first row (dropout's
// masks are keyed by the global row), and its loss scale.
static void bind(Pp *pp, const StageActs *a) {
    Sp *sp = pp->run->sp;
    sp->step = a->step, sp->row0 = a->row0;
    sp->tp.loss_scale = a->loss_scale;
}

void pp_forward_compute(Pp *pp, int mb) {
    PpRun *run = pp->run;
    check_mb(pp, mb, "pp_forward_compute", true);
    StageActs *a = run->acts[mb];
    Sp *sp = run->sp;
    bind(pp, a);
    for (int u = pp->u0; u < pp->u1; u++) {
        float *p = run->params[u];
        switch (run->m->units[u].kind) {
        case UNIT_EMBED: {
            GptEmbedView v = tp_layout_embed_view(run->L, p);
            sp_embed_forward(sp, &v, a->tokens, a->stream[1]);
            break;
        }
        case UNIT_BLOCK: {
            GptBlockView v = tp_layout_block_view(run->L, u, p);
            sp_block_forward(sp, u, block_set(run, a, u), &v, a->stream[u], a->stream[u + 1]);
            break;
        }
        case UNIT_HEAD: {
            GptHeadView v = tp_layout_head_view(run->L, p);
            size_t M = (size_t)pp->micro_rows * pp->T;
            ops_fill(a->losses, 0, M);
            sp_head_forward(sp, &a->head, &v, a->stream[u], a->targets, a->losses);
            run->loss += ops_sum(a->losses, M) / (double)M / pp->m;
            break;
        }
        }
    }
}

void pp_backward_compute(Pp *pp, int mb) {
    PpRun *run = pp->run;
    check_mb(pp, mb, "pp_backward_compute", true);
    StageActs *a = run->acts[mb];
    Sp *sp = run->sp;
    bind(pp, a);
    // The gradients add up over the micro-batches (ops.h's backward passes
    // add); the replicated tensors' sums over the TP group wait for the
    // student's grid_after_backward (sp->sums_deferred).
    for (int u = pp->u1 - 1; u >= pp->u0; u--) {
        float *p = run->params[u], *g = run->grads[u];
        switch (run->m->units[u].kind) {
        case UNIT_EMBED: {
            GptEmbedView gv = tp_layout_embed_view(run->L, g);
            sp_embed_backward(sp, &gv, a->tokens, a->dstream[1]);
            break;
        }
        case UNIT_BLOCK: {
            GptBlockView pv = tp_layout_block_view(run->L, u, p), gv = tp_layout_block_view(run->L, u, g);
            sp_block_backward(sp, u, block_set(run, a, u), &pv, &gv, a->stream[u], a->dstream[u + 1], a->dstream[u]);
            break;
        }
        case UNIT_HEAD: {
            GptHeadView pv = tp_layout_head_view(run->L, p), gv = tp_layout_head_view(run->L, g);
            mem_zero(a->dstream[u], pp_message_count(pp) * sizeof(float));
            sp_head_backward(sp, &a->head, &pv, &gv, a->stream[u], a->dstream[u]);
            break;
        }
        }
    }
    // What the student's function moves before the step's last micro-batch
    // is done is early: the step's gradients are not whole yet.
    CommStats before = comm_stats();
    trace_begin("grid_after_backward", "comm");
    grid_after_backward(run->grid, run->st, ++run->done);
    trace_end();
    CommStats after = comm_stats();
    const uint64_t moved = comm_stats_total_bus_bytes(&after) - comm_stats_total_bus_bytes(&before);
    if (run->done < pp->m && !run->early_sync && moved > 0) run->early_sync = run->done, run->early_bytes = (double)moved;
}

void pp_end_micro(Pp *pp, int mb) {
    PpRun *run = pp->run;
    check_mb(pp, mb, "pp_end_micro", true);
    StageActs *a = run->acts[mb];
    const Gpt *m = run->m;
    for (int u = 0; u <= m->nunits; u++) mem_free(a->stream[u]), mem_free(a->dstream[u]);
    for (int u = pp->u0; u < pp->u1; u++)
        if (m->units[u].kind == UNIT_BLOCK && run->sp->recompute != GPT_RECOMPUTE_FULL) free_block(&a->blocks[u - 1]);
    if (a->targets) {
        SpHeadActs *h = &a->head;
        tp_net_head_free(&h->ce);
        void *all[] = {h->lnf_mean, h->lnf_rstd, h->lnf_all, a->losses};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
    }
    mem_free(a->tokens), mem_free(a->targets);
    free(a->stream), free(a->dstream), free(a->blocks), free(a);
    run->acts[mb] = NULL;
}

// The messages: this rank's tokens of the micro-batch's stream at the
// stage's edges (NULL where there is no neighbour).
void *pp_act_in(Pp *pp, int mb) {
    check_mb(pp, mb, "pp_act_in", true);
    return pp->s > 0 ? pp->run->acts[mb]->stream[pp->u0] : NULL;
}
void *pp_act_out(Pp *pp, int mb) {
    check_mb(pp, mb, "pp_act_out", true);
    return pp->s < pp->p - 1 ? pp->run->acts[mb]->stream[pp->u1] : NULL;
}
void *pp_grad_in(Pp *pp, int mb) {
    check_mb(pp, mb, "pp_grad_in", true);
    return pp->s < pp->p - 1 ? pp->run->acts[mb]->dstream[pp->u1] : NULL;
}
void *pp_grad_out(Pp *pp, int mb) {
    check_mb(pp, mb, "pp_grad_out", true);
    return pp->s > 0 ? pp->run->acts[mb]->dstream[pp->u0] : NULL;
}

// ---- what lab07 does not run (yet) -------------------------------------------------------

void pp_recompute(Pp *pp, int mb) {
    (void)mb;
    CHECK(!pp->recompute, "pp_recompute: lab07 runs without full recomputation");
}

#define NOT_HERE(fn) CHECK(0, "%s: lab07 runs GPipe and 1F1B (no split backward, no model chunks)", fn)
void pp_backward_input(Pp *pp, int mb) { (void)pp, (void)mb; NOT_HERE("pp_backward_input"); }
void pp_backward_weight(Pp *pp, int mb) { (void)pp, (void)mb; NOT_HERE("pp_backward_weight"); }
void pp_begin_chunk(Pp *pp, int c, int mb, float s) { (void)pp, (void)c, (void)mb, (void)s; NOT_HERE("pp_begin_chunk"); }
void pp_forward_chunk(Pp *pp, int c, int mb) { (void)pp, (void)c, (void)mb; NOT_HERE("pp_forward_chunk"); }
void pp_backward_chunk(Pp *pp, int c, int mb) { (void)pp, (void)c, (void)mb; NOT_HERE("pp_backward_chunk"); }
void pp_end_chunk(Pp *pp, int c, int mb) { (void)pp, (void)c, (void)mb; NOT_HERE("pp_end_chunk"); }
void *pp_chunk_act_in(Pp *pp, int c, int mb) { (void)pp, (void)c, (void)mb; NOT_HERE("pp_chunk_act_in"); return NULL; }
void *pp_chunk_act_out(Pp *pp, int c, int mb) { (void)pp, (void)c, (void)mb; NOT_HERE("pp_chunk_act_out"); return NULL; }
void *pp_chunk_grad_in(Pp *pp, int c, int mb) { (void)pp, (void)c, (void)mb; NOT_HERE("pp_chunk_grad_in"); return NULL; }
void *pp_chunk_grad_out(Pp *pp, int c, int mb) { (void)pp, (void)c, (void)mb; NOT_HERE("pp_chunk_grad_out"); return NULL; }
