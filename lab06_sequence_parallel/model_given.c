// model_given.c: lab06's model (model_given.h).
#include "model_given.h"

#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "core.h"
#include "mem.h"
#include "ops.h"
#include "prec.h"
#include "tp_net.h"
#include "tp_probe.h"

// ---- activations ---------------------------------------------------------------------

static MemCategory g_cat = MEM_ACTS;   // the category of what follows (the probe's are OTHER)
static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

static float *fl(size_t n, const char *name) { return mem_alloc_floats(n, g_cat, name); }
static int *ints(size_t n, const char *name) { return mem_alloc(n * sizeof(int), g_cat, name); }
// A tensor of the run's type (sp's precision: the probe's is fp32).
static void *kept(const Sp *sp, size_t n, const char *name) { return prec_alloc(sp->tp.prec, n, g_cat, name); }

static void alloc_layers(const Sp *sp, TpLayerActs *a) {
    const TpShard *tp = &sp->tp;
    size_t M = (size_t)tp->B * tp->T;
    a->q = kept(sp, M * tp->Ct, "q");
    a->k = kept(sp, M * tp->Ct, "k");
    a->v = kept(sp, M * tp->Ct, "v");
    a->y = kept(sp, M * tp->Ct, "attention out");
    // (--recompute selective: the probabilities are not kept per layer, but
    // in tp->att_again, one for all, and made again in the backward pass.)
    // (Under --recompute full the one set keeps the block running's.)
    a->att = sp->recompute == GPT_RECOMPUTE_SELECTIVE ? NULL
                                                      : kept(sp, (size_t)tp->B * tp->NHt * tp->T * tp->T, "attention");
    a->h = kept(sp, M * tp->Ht, "mlp hidden");
    a->hg = kept(sp, M * tp->Ht, "mlp gelu");
}

static void free_layers(TpLayerActs *a) {
    void *all[] = {a->q, a->k, a->v, a->y, a->att, a->h, a->hg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
}

static void alloc_on(const Sp *sp, SpBlockActs *a) {
    const TpShard *tp = &sp->tp;
    size_t Mt = (size_t)tp->B * sp->Tt, M = (size_t)tp->B * tp->T, C = (size_t)tp->C;
    a->ln1_mean = fl(Mt, "ln1 mean");
    a->ln1_rstd = fl(Mt, "ln1 rstd");
    a->ln1_all = kept(sp, M * C, "ln1, all-gathered");
    a->mid = kept(sp, Mt * C, "residual mid (this rank's tokens)");
    a->ln2_mean = fl(Mt, "ln2 mean");
    a->ln2_rstd = fl(Mt, "ln2 rstd");
    a->ln2_all = kept(sp, M * C, "ln2, all-gathered");
    alloc_layers(sp, &a->layers);
}

static void free_on(SpBlockActs *a) {
    void *all[] = {a->ln1_mean, a->ln1_rstd, a->ln1_all, a->mid, a->ln2_mean, a->ln2_rstd, a->ln2_all};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
    free_layers(&a->layers);
}

static void alloc_off(const Sp *sp, TpNetBlock *k, TpLayerActs *layers) {
    tp_net_block_alloc(k, (size_t)sp->tp.B * sp->tp.T, sp->tp.C, g_cat, sp->tp.prec);
    k->layers = layers;
    alloc_layers(sp, layers);
}

static void free_off(TpNetBlock *k) {
    tp_net_block_free(k);
    free_layers(k->layers);
}

// One block's kept activations and its input (a residual stream), measured
// by allocating them: what the per-layer formulas count. Under --recompute
// full a layer keeps its input alone (the set is one for all the layers).
static double measure_layer(const SpModel *sm, bool on) {
    const Sp *sp = sm->sp;
    const bool full = sp->recompute == GPT_RECOMPUTE_FULL;
    size_t before = mem_live(MEM_ACTS), stream = (size_t)sp->tp.B * (on ? sp->Tt : sp->tp.T) * sp->tp.C;
    void *x = kept(sp, stream, "block input");
    SpBlockActs a;
    TpNetBlock b;
    TpLayerActs layers;
    if (on && !full) alloc_on(sp, &a);
    else if (!full) alloc_off(sp, &b, &layers);
    double bytes = (double)(mem_live(MEM_ACTS) - before);
    if (on && !full) free_on(&a);
    else if (!full) free_off(&b);
    mem_free(x);
    return bytes;
}

// The student's scratch, of sp's type; in bf16 its fp32 widenings besides.
static void alloc_sp_scratch(Sp *sp) {
    const TpShard *tp = &sp->tp;
    size_t M = (size_t)tp->B * tp->T, Mt = (size_t)tp->B * sp->Tt, C = (size_t)tp->C;
    for (int i = 0; i < 2; i++) sp->s.whole[i] = kept(sp, M * C, "scratch");
    for (int i = 0; i < 2; i++) sp->s.local[i] = kept(sp, Mt * C, "scratch");
    sp->s.blocks = kept(sp, M * C, "scratch");
    bool bf16 = tp->prec->bf16;
    for (int i = 0; i < 4; i++) sp->s.f32[i] = bf16 ? fl(Mt * C, "bf16 widening scratch") : NULL;
    sp->s.whole32 = bf16 ? fl(M * C, "bf16 widening scratch") : NULL;
    sp->s.again = sp->recompute == GPT_RECOMPUTE_FULL ? kept(sp, Mt * C, "scratch (the output made again)") : NULL;
}

static void free_sp_scratch(Sp *sp) {
    void *all[] = {sp->s.whole[0], sp->s.whole[1], sp->s.local[0], sp->s.local[1], sp->s.blocks,
                   sp->s.f32[0], sp->s.f32[1], sp->s.f32[2], sp->s.f32[3], sp->s.whole32, sp->s.again};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
}

static void alloc_scratch(SpModel *sm) {
    Sp *sp = sm->sp;
    TpShard *tp = &sp->tp;
    size_t M = (size_t)tp->B * tp->T, C = (size_t)tp->C;
    for (int i = 0; i < 4; i++) tp->ct[i] = fl(M * tp->Ct, "scratch");
    tp->att = fl((size_t)tp->B * tp->NHt * tp->T * tp->T, "scratch");
    for (int i = 0; i < 2; i++) tp->ht[i] = fl(M * tp->Ht, "scratch");
    tp->dlogits = fl(M * tp->nlm, "scratch");
    tp->ids = ints(M, "scratch ids");
    tp->mc = sm->prec.bf16 ? fl(M * C, "bf16 widening scratch") : NULL;
    alloc_sp_scratch(sp);
    // (fp32 in both precisions: the probe's composition is fp32.)
    sm->net.branch = fl(M * C, "scratch");
    sm->net.branch2 = fl(M * C, "scratch");
    sm->net.dln = fl(M * C, "scratch");
    sm->partial = fl(M * C, "scratch");
}

// ---- --sp off: tensor parallelism alone, every token on every rank ---------------------

// The given split layers with Megatron's f and g around them, as the
// composition calls them (common/tp_net.h): g all-reduces a row-parallel
// layer's partial sums, then the bias after the layer is added once; f's
// backward all-reduces the input gradient's partial sums.

// (In the run's type: in bf16 the partial sums travel as bf16.)
static void g_forward(TpShard *tp, void *out, const float *bias) {
    comm_all_reduce_typed(tp->group, out, (size_t)tp->B * tp->T * tp->C, tp->prec->type, COMM_SUM);
    if (bias) prec_add_bias(tp->prec, out, bias, tp->B * tp->T, tp->C);
}

static void f_backward(TpShard *tp, void *dx) {
    comm_all_reduce_typed(tp->group, dx, (size_t)tp->B * tp->T * tp->C, tp->prec->type, COMM_SUM);
}

static void attention_fg(void *tp, void *a, const GptBlockView *p, const void *x, void *out) {
    tpg_attention_forward(tp, a, p, x, out);
    g_forward(tp, out, p->bo);
}

static void attention_fg_backward(void *ctx, void *a, const GptBlockView *p, GptBlockView *g, const void *x,
                                  const float *dout, void *dx) {
    TpShard *tp = ctx;
    ops_bias_backward(g->bo, dout, tp->B * tp->T, tp->C);   // the same on every rank
    if (tp->att_again) tpg_attention_again(tp, a);           // --recompute selective
    tpg_attention_backward(tp, a, p, g, x, dout, dx);
    f_backward(tp, dx);
}

static void mlp_fg(void *tp, void *a, const GptBlockView *p, const void *x, void *out) {
    tpg_mlp_forward(tp, a, p, x, out);
    g_forward(tp, out, p->b2);
}

static void mlp_fg_backward(void *ctx, void *a, const GptBlockView *p, GptBlockView *g, const void *x,
                            const float *dout, void *dx) {
    TpShard *tp = ctx;
    ops_bias_backward(g->b2, dout, tp->B * tp->T, tp->C);
    tpg_mlp_backward(tp, a, p, g, x, dout, dx);
    f_backward(tp, dx);
}

static void embed_fg(void *ctx, const GptEmbedView *p, const int *tokens, void *out) {
    TpShard *tp = ctx;
    tpg_embed_forward(tp, p, tokens, out);
    g_forward(tp, out, NULL);   // each token's row from the rank that holds it; no bias
    const size_t MC = (size_t)tp->B * tp->T * tp->C;
    float *e = prec_open(tp->prec, out, MC, tp->mc);
    ops_positions_forward(e, p->wpe, tp->B, tp->T, tp->C, 0);
    prec_keep(tp->prec, out, e, MC);
}

static void embed_fg_backward(void *ctx, GptEmbedView *g, const int *tokens, const float *dout) {
    TpShard *tp = ctx;
    ops_positions_backward(g->wpe, dout, tp->B, tp->T, tp->C, 0);
    tpg_embed_backward(tp, g, tokens, dout);
}

static void head_fg(void *tp, TpHeadActs *a, const GptHeadView *p, const void *x, const int *targets,
                    float *losses) {
    tpg_head_forward(tp, a, p, x, targets, losses);
}

static void head_fg_backward(void *tp, TpHeadActs *a, const GptHeadView *p, GptHeadView *g, const void *x,
                             void *dx) {
    tpg_head_backward(tp, a, p, g, x, dx);
    f_backward(tp, dx);   // lm_head is column-parallel
}

static const TpNetLayers layers_fg = {
    .attention_forward = attention_fg, .mlp_forward = mlp_fg,
    .attention_backward = attention_fg_backward, .mlp_backward = mlp_fg_backward,
    .embed_forward = embed_fg, .embed_backward = embed_fg_backward,
    .head_forward = head_fg, .head_backward = head_fg_backward,
};

// The composition, with dropout as sp has it now (the probe changes it).
static TpNet *off_net(SpModel *sm) {
    TpNet *n = &sm->net;
    Sp *sp = sm->sp;
    n->dropout = sp->dropout, n->seed = sp->seed, n->step = sp->step, n->row0 = sp->row0;
    n->ctx = &sp->tp;
    return n;
}

// ---- the model -----------------------------------------------------------------------------

void spm_create(SpModel *sm, const Gpt *m, Sp *sp, bool on, bool bf16) {
    memset(sm, 0, sizeof *sm);
    sm->m = m, sm->sp = sp, sm->on = on, sm->nunits = m->nunits;
    TpShard *tp = &sp->tp;
    tp_layout_make(&sm->L, m, tp->group, tpg_split, tp, false, "the given split of tp_given.c");
    tpg_sizes(tp, &sm->L);
    const int L = m->cfg.L;
    size_t M = (size_t)tp->B * tp->T, C = (size_t)tp->C, rows = (size_t)tp->B * (on ? sp->Tt : tp->T);
    // The run's precision: bf16's widening scratch holds the largest operand
    // of a product (M rows of C, Ct, Ht or this rank's vocabulary columns)
    // and one attention's probabilities.
    size_t cap = M * zmax(zmax(C, (size_t)tp->Ct), zmax((size_t)tp->Ht, (size_t)tp->nlm));
    prec_init(&sm->prec, bf16, cap, (size_t)tp->B * tp->NHt * tp->T * tp->T);
    tp->prec = &sm->prec;
    // --recompute selective: the probabilities of the block running, shared.
    if (sp->recompute == GPT_RECOMPUTE_SELECTIVE)
        tp->att_again = kept(sp, (size_t)tp->B * tp->NHt * tp->T * tp->T, "attention, recomputed");
    sm->layer_bytes[0] = measure_layer(sm, false);
    sm->layer_bytes[1] = measure_layer(sm, true);
    sm->tokens = ints(M, "tokens");
    sm->targets = ints(M, "targets");
    sm->stream = calloc((size_t)m->nunits + 1, sizeof *sm->stream);
    sm->dstream = calloc((size_t)m->nunits + 1, sizeof *sm->dstream);
    for (int u = 1; u < m->nunits; u++) {
        sm->stream[u] = kept(sp, rows * C, "residual stream");
        sm->dstream[u] = kept(sp, rows * C, "residual stream gradient");
    }
    if (on) {
        // --recompute full: one set, the block running's, given to every
        // block (block_set); each block's input stays in the stream.
        sm->nsets = sp->recompute == GPT_RECOMPUTE_FULL && L > 0 ? 1 : L;
        sm->acts = calloc((size_t)(L ? L : 1), sizeof *sm->acts);
        for (int l = 0; l < sm->nsets; l++) alloc_on(sp, &sm->acts[l]);
    } else {
        sm->off = calloc((size_t)(L ? L : 1), sizeof *sm->off);
        sm->off_layers = calloc((size_t)(L ? L : 1), sizeof *sm->off_layers);
        for (int l = 0; l < L; l++) alloc_off(sp, &sm->off[l], &sm->off_layers[l]);
    }
    SpHeadActs *h = &sm->head;
    h->lnf_mean = fl(rows, "lnf mean");
    h->lnf_rstd = fl(rows, "lnf rstd");
    h->lnf_all = kept(sp, M * C, "lnf, all-gathered");
    tp_net_head_alloc(&h->ce, M, tp->nlm, g_cat);
    sm->losses = fl(M, "losses");
    alloc_scratch(sm);
    TpNet *n = &sm->net;
    n->layers = &layers_fg, n->ctx = tp, n->m = m, n->L = &sm->L;
    n->B = tp->B, n->T = tp->T, n->C = tp->C;
    size_t unit = 0;
    for (int u = 0; u < m->nunits; u++) unit = zmax(unit, sm->L.size[u]);
    if (!on) {
        n->tokens = sm->tokens, n->targets = sm->targets, n->losses = sm->losses;
        n->stream = sm->stream, n->dstream = sm->dstream, n->blocks = sm->off;
        n->lnf = (TpNorm){h->lnf_all, h->lnf_mean, h->lnf_rstd};
        n->head = &h->ce;
        n->prec = &sm->prec;   // (with SP the composition is the probe's, in fp32)
        tp_net_alloc_bf16(n, M, tp->C, unit);
    } else if (bf16) {
        n->unit32 = mem_alloc_floats(unit, MEM_ACTS, "the unit running, widened");
        n->gunit32 = mem_alloc_floats(unit, MEM_ACTS, "the unit's fp32 gradient");
    }
}

void spm_free(SpModel *sm) {
    Sp *sp = sm->sp;
    TpShard *tp = &sp->tp;
    for (int l = 0; l < sm->m->cfg.L; l++) {
        if (sm->on && l < sm->nsets) free_on(&sm->acts[l]);
        else if (!sm->on) free_off(&sm->off[l]);
    }
    for (int u = 1; u < sm->nunits; u++) mem_free(sm->stream[u]), mem_free(sm->dstream[u]);
    tp_net_head_free(&sm->head.ce);
    free_sp_scratch(sp);
    void *rest[] = {sm->tokens, sm->targets, sm->head.lnf_mean, sm->head.lnf_rstd, sm->head.lnf_all, sm->losses,
                    tp->ct[0], tp->ct[1], tp->ct[2], tp->ct[3], tp->att, tp->ht[0], tp->ht[1], tp->dlogits,
                    tp->ids, tp->mc, sm->net.branch, sm->net.branch2, sm->net.dln, sm->partial,
                    sm->net.unit32, sm->net.gunit32, tp->att_again};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) mem_free(rest[i]);
    if (!sm->on) {
        void *f32[] = {sm->net.f32[0], sm->net.f32[1], sm->net.f32[2]};
        for (size_t i = 0; i < 3; i++) mem_free(f32[i]);
    }
    free(sm->stream);
    free(sm->dstream);
    free(sm->acts);
    free(sm->off);
    free(sm->off_layers);
    prec_free(&sm->prec);
    tp_layout_free(&sm->L);
}

void spm_set_batch(SpModel *sm, const int *x, const int *y, int step, int row0, float loss_scale) {
    Sp *sp = sm->sp;
    size_t M = (size_t)sp->tp.B * sp->tp.T;
    gpt_check_tokens(x, y, M, sp->tp.V);
    mem_from_host(sm->tokens, x, M * sizeof(int));
    mem_from_host(sm->targets, y, M * sizeof(int));
    sp->step = step, sp->row0 = row0;
    sp->tp.loss_scale = loss_scale;
}

// ---- the units -------------------------------------------------------------------------

// In bf16 the functions see the unit's parameters widened to fp32, and
// their gradients go to a zeroed fp32 unit that is added into the bf16
// one once (gpt.c's unit_params and unit_grads).
static float *unit_params(SpModel *sm, int u, void *params) {
    if (!sm->prec.bf16) return params;
    ops_from_bf16(sm->net.unit32, params, sm->L.size[u]);
    return sm->net.unit32;
}

static float *unit_grads(SpModel *sm, int u, void *grads) {
    if (!sm->prec.bf16) return grads;
    ops_fill(sm->net.gunit32, 0, sm->L.size[u]);
    return sm->net.gunit32;
}

static void unit_grads_done(SpModel *sm, int u, void *grads) {
    if (sm->prec.bf16) ops_accumulate_bf16(grads, sm->net.gunit32, sm->L.size[u]);
}

// The activations block u's passes are given: its own, or under
// --recompute full the one set.
static SpBlockActs *block_set(SpModel *sm, int u) {
    return &sm->acts[sm->sp->recompute == GPT_RECOMPUTE_FULL ? 0 : u - 1];
}

void spm_unit_forward(SpModel *sm, int u, void *params) {
    Sp *sp = sm->sp;
    if (!sm->on) {
        tp_net_unit_forward(off_net(sm), u, params);
        return;
    }
    float *p32 = unit_params(sm, u, params);
    switch (sm->m->units[u].kind) {
    case UNIT_EMBED: {
        GptEmbedView p = tp_layout_embed_view(&sm->L, p32);
        sp_embed_forward(sp, &p, sm->tokens, sm->stream[1]);
        break;
    }
    case UNIT_BLOCK: {
        GptBlockView p = tp_layout_block_view(&sm->L, u, p32);
        OpsWork w0 = ops_work();
        sp_block_forward(sp, u, block_set(sm, u), &p, sm->stream[u], sm->stream[u + 1]);
        sm->block_fwd_work += ops_work().matmul - w0.matmul;   // (what full recomputation makes again)
        break;
    }
    case UNIT_HEAD: {
        GptHeadView p = tp_layout_head_view(&sm->L, p32);
        ops_fill(sm->losses, 0, (size_t)sp->tp.B * sp->tp.T);
        sp_head_forward(sp, &sm->head, &p, sm->stream[u], sm->targets, sm->losses);
        break;
    }
    }
}

void spm_unit_backward(SpModel *sm, int u, void *params, void *grads) {
    Sp *sp = sm->sp;
    if (!sm->on) {
        tp_net_unit_backward(off_net(sm), u, params, grads);
        return;
    }
    float *p32 = unit_params(sm, u, params), *g32 = unit_grads(sm, u, grads);
    switch (sm->m->units[u].kind) {
    case UNIT_EMBED: {
        GptEmbedView g = tp_layout_embed_view(&sm->L, g32);
        sp_embed_backward(sp, &g, sm->tokens, sm->dstream[1]);
        break;
    }
    case UNIT_BLOCK: {
        GptBlockView p = tp_layout_block_view(&sm->L, u, p32), g = tp_layout_block_view(&sm->L, u, g32);
        // A forward product of the given layers made in here is one made
        // again: tp_given.c counts it (again_work, again_s).
        sp->tp.recomputing = true;
        sp_block_backward(sp, u, block_set(sm, u), &p, &g, sm->stream[u], sm->dstream[u + 1], sm->dstream[u]);
        sp->tp.recomputing = false;
        break;
    }
    case UNIT_HEAD: {
        GptHeadView p = tp_layout_head_view(&sm->L, p32), g = tp_layout_head_view(&sm->L, g32);
        mem_zero(sm->dstream[u], (size_t)sp->tp.B * sp->Tt * sp->tp.C * sm->prec.elem);
        sp_head_backward(sp, &sm->head, &p, &g, sm->stream[u], sm->dstream[u]);
        break;
    }
    }
    unit_grads_done(sm, u, grads);
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// A fresh model of mode rc, configured as `like`, on its batch.
static void mode_create(SpModel *sm, Sp *sp, const Gpt *m, const Sp *like, GptRecompute rc, bool bf16, const int *x,
                        const int *y, int step, int row0, float loss_scale) {
    const TpShard *l = &like->tp;
    *sp = (Sp){.tp = {.group = l->group, .t = l->t, .r = l->r, .B = l->B, .T = l->T, .C = l->C, .NH = l->NH, .V = l->V},
               .Tt = like->Tt, .dropout = like->dropout, .seed = like->seed, .recompute = rc};
    spm_create(sm, m, sp, true, bf16);
    spm_set_batch(sm, x, y, step, row0, loss_scale);
}

// One forward and backward pass, no optimizer; the group's slowest rank's seconds.
static double mode_pass(SpModel *sm, void **params, void **grads) {
    double t0 = core_now();
    for (int u = 0; u < sm->nunits; u++) mem_zero(grads[u], sm->L.size[u] * sm->prec.elem);
    for (int u = 0; u < sm->nunits; u++) spm_unit_forward(sm, u, params[u]);
    (void)spm_loss(sm);
    for (int u = sm->nunits - 1; u >= 0; u--) spm_unit_backward(sm, u, params[u], grads[u]);
    return comm_max_double(sm->sp->tp.group, core_now() - t0);
}

void spm_measure_modes(const Gpt *m, const Sp *like, bool bf16, void **params, void **grads, const int *x,
                       const int *y, int step, int row0, float loss_scale, int passes, SpModeMeasure out[3]) {
    SpModel sm[3];
    Sp sp[3];
    // The memory and the products, a mode at a time: its peak from a reset
    // with nothing of the others' alive.
    for (int k = 0; k < 3; k++) {
        out[k] = (SpModeMeasure){0};
        ops_release_scratch();
        mem_reset_peaks();
        const double live0 = (double)mem_live(MEM_ACTS);
        mode_create(&sm[k], &sp[k], m, like, (GptRecompute)k, bf16, x, y, step, row0, loss_scale);
        const double work0 = ops_work().matmul;
        mode_pass(&sm[k], params, grads);
        out[k].work = ops_work().matmul - work0;
        out[k].again_work = sp[k].tp.again_work;
        out[k].acts_peak = (double)mem_peak(MEM_ACTS) - live0;
        spm_free(&sm[k]);
    }
    // The time, the three side by side: a pass of each in turn, a first
    // round untimed, so that the machine's drift falls on all three alike;
    // each mode's median pass, which a pass slowed by another program on
    // the machine does not move.
    double *dt = malloc((size_t)3 * passes * sizeof *dt);
    CHECK(dt, "out of memory");
    for (int k = 0; k < 3; k++) mode_create(&sm[k], &sp[k], m, like, (GptRecompute)k, bf16, x, y, step, row0, loss_scale);
    for (int round = -1; round < passes; round++)
        for (int k = 0; k < 3; k++) {
            double s = mode_pass(&sm[k], params, grads);
            if (round >= 0) dt[k * passes + round] = s;
        }
    for (int k = 2; k >= 0; k--) spm_free(&sm[k]);
    for (int k = 0; k < 3; k++) {
        qsort(dt + k * passes, (size_t)passes, sizeof *dt, by_value);
        out[k].seconds = passes % 2 ? dt[k * passes + passes / 2]
                                    : (dt[k * passes + passes / 2 - 1] + dt[k * passes + passes / 2]) / 2;
    }
    free(dt);
}

double spm_loss(const SpModel *sm) {
    size_t M = (size_t)sm->sp->tp.B * sm->sp->tp.T;
    return ops_sum(sm->losses, M) / (double)M;
}

// ---- the probe ------------------------------------------------------------------------------

static float *random_host(size_t n, uint32_t which, float std) {
    return tp_probe_random(n, 0x5e9ull, 5000 + which, std);
}

// ||got - want|| / ||want|| over this rank's tokens, want whole (B, T, C).
static double local_error(const Sp *sp, const float *got, const float *want) {
    return tp_probe_token_error(got, want, sp->tp.B, sp->tp.T, sp->tp.r * sp->Tt, sp->Tt, sp->tp.C);
}

// The dropout probability of the probe's masks: any, as long as both
// kinds of element are common.
#define PROBE_DROPOUT 0.5f

typedef struct {
    double mid, out, dx;   // relative errors on this rank's tokens
    double again_work;     // the forward products the backward pass made (again)
} BlockError;

// Every tensor of a block's set zeroed: what it holds when the backward pass
// starts is not this block's (--recompute full: the last block's forward
// left its own there).
static void zero_on(const Sp *sp, SpBlockActs *a) {
    const TpShard *tp = &sp->tp;
    const size_t Mt = (size_t)tp->B * sp->Tt, M = (size_t)tp->B * tp->T, C = (size_t)tp->C, E = tp->prec->elem;
    float *stats[] = {a->ln1_mean, a->ln1_rstd, a->ln2_mean, a->ln2_rstd};
    for (int i = 0; i < 4; i++) mem_zero(stats[i], Mt * sizeof(float));
    mem_zero(a->ln1_all, M * C * E);
    mem_zero(a->ln2_all, M * C * E);
    mem_zero(a->mid, Mt * C * E);
    TpLayerActs *l = &a->layers;
    void *ct[] = {l->q, l->k, l->v, l->y};
    for (int i = 0; i < 4; i++) mem_zero(ct[i], M * (size_t)tp->Ct * E);
    if (l->att) mem_zero(l->att, (size_t)tp->B * tp->NHt * tp->T * tp->T * E);
    mem_zero(l->h, M * (size_t)tp->Ht * E);
    mem_zero(l->hg, M * (size_t)tp->Ht * E);
}

// Block unit 1 on `params` and x, dout (B, T, C) whole, on the device:
// tensor parallelism alone (the harness's composition, on every token),
// then the student's sp_block_forward and sp_block_backward on this rank's
// tokens; the errors of the latter's mid, output and input gradient.
// `clobber`: between the two, what recomputation makes again overwritten
// (zeros), as the blocks after this one would leave it: under --recompute
// selective the shared probabilities, under full the whole set.
static BlockError probe_block(SpModel *sm, float *params, const float *x, const float *dout, bool clobber) {
    Sp *sp = sm->sp;
    TpShard *tp = &sp->tp;
    const int T = tp->T, C = tp->C, r = tp->r;
    const size_t MC = (size_t)tp->B * T * C, run = (size_t)sp->Tt * C, local = (size_t)tp->B * run;
    float *g_on = mem_alloc_floats(sm->L.size[1], MEM_OTHER, "probe grads");
    float *g_off = mem_alloc_floats(sm->L.size[1], MEM_OTHER, "probe grads");
    float *out = mem_alloc_floats(MC, MEM_OTHER, "probe"), *dx = mem_alloc_floats(MC, MEM_OTHER, "probe");
    float *xl = mem_alloc_floats(local, MEM_OTHER, "probe"), *dl = mem_alloc_floats(local, MEM_OTHER, "probe");
    float *outl = mem_alloc_floats(local, MEM_OTHER, "probe"), *dxl = mem_alloc_floats(local, MEM_OTHER, "probe");
    ops_copy_2d(xl, (int)run, x + (size_t)r * run, T * C, tp->B, (int)run);
    ops_copy_2d(dl, (int)run, dout + (size_t)r * run, T * C, tp->B, (int)run);
    g_cat = MEM_OTHER;
    SpBlockActs on;
    TpNetBlock off;
    TpLayerActs off_layers;
    alloc_on(sp, &on);
    alloc_off(sp, &off, &off_layers);
    g_cat = MEM_ACTS;
    GptBlockView p = tp_layout_block_view(&sm->L, 1, params), gon = tp_layout_block_view(&sm->L, 1, g_on),
                 goff = tp_layout_block_view(&sm->L, 1, g_off);
    tp_net_block_forward(off_net(sm), 1, &off, &p, x, out);
    tp_net_block_backward(off_net(sm), 1, &off, &p, &goff, x, dout, dx);
    float *want_mid = malloc(3 * MC * sizeof *want_mid), *want_out = want_mid + MC, *want_dx = want_mid + 2 * MC;
    mem_to_host(want_mid, off.mid, MC * sizeof(float));
    mem_to_host(want_out, out, MC * sizeof(float));
    mem_to_host(want_dx, dx, MC * sizeof(float));
    BlockError e;
    sp_block_forward(sp, 1, &on, &p, xl, outl);
    e.mid = local_error(sp, on.mid, want_mid);
    e.out = local_error(sp, outl, want_out);
    if (clobber && sp->recompute == GPT_RECOMPUTE_SELECTIVE)
        mem_zero(tp->att_again, (size_t)tp->B * tp->NHt * T * T * tp->prec->elem);
    if (clobber && sp->recompute == GPT_RECOMPUTE_FULL) zero_on(sp, &on);
    const double work0 = tp->again_work;
    tp->recomputing = true;   // (as spm_unit_backward)
    sp_block_backward(sp, 1, &on, &p, &gon, xl, dl, dxl);
    tp->recomputing = false;
    e.again_work = tp->again_work - work0;
    e.dx = local_error(sp, dxl, want_dx);
    free_on(&on);
    free_off(&off);
    float *bufs[] = {g_on, g_off, out, dx, xl, dl, outl, dxl};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) mem_free(bufs[i]);
    free(want_mid);
    return e;
}

static SpProbe probe(SpModel *sm) {
    Sp *sp = sm->sp;
    TpShard *tp = &sp->tp;
    SpProbe pr = {0};
    const int B = tp->B, T = tp->T, C = tp->C, Tt = sp->Tt, r = tp->r;
    const size_t M = (size_t)B * T, MC = M * C, run = (size_t)Tt * C, local = (size_t)B * run;
    // All-gather: each rank's tokens carry their own global index.
    float *h = calloc(MC, sizeof *h), *back = malloc(MC * sizeof *back);
    for (int b = 0; b < B; b++)
        for (size_t i = 0; i < run; i++) h[(size_t)b * run + i] = (float)(((size_t)b * T + (size_t)r * Tt) * C + i);
    float *dl = tp_probe_on_device(h, local), *dw = mem_alloc_floats(MC, MEM_OTHER, "probe");
    sp_gather_tokens(sp, dl, dw);
    mem_to_host(back, dw, MC * sizeof(float));
    for (size_t i = 0; i < MC; i++) pr.gather |= back[i] != (float)i;
    // Reduce-scatter: every rank gives the same whole; this rank's tokens
    // come back t times. Split along the channels instead, rank r gets
    // channels [r C/t, (r+1) C/t) of every token.
    for (size_t i = 0; i < MC; i++) h[i] = (float)(i % 4099);
    mem_from_host(dw, h, MC * sizeof(float));
    sp_scatter_tokens(sp, dw, dl);
    mem_to_host(back, dl, local * sizeof(float));
    bool tokens = true, channels = tp->t > 1;
    int Cw = C / tp->t;
    for (int b = 0; b < B; b++)
        for (size_t i = 0; i < run; i++) {
            size_t at = (size_t)b * run + i;
            tokens &= back[at] == tp->t * h[((size_t)b * T + (size_t)r * Tt) * C + i];
            size_t token = at / (size_t)Cw, c = at % (size_t)Cw;   // (M, C / t) read as this rank's
            channels &= token < M && back[at] == tp->t * h[token * C + (size_t)r * Cw + c];
        }
    pr.scatter = tokens ? 0 : channels ? 1 : 2;
    mem_free(dl);
    // Dropout's key, at a step and a first row that are not 0 (a key that
    // leaves them out would pass at 0).
    int step = sp->step, row0 = sp->row0;
    sp->step = 3, sp->row0 = 5;
    DropoutKey k = sp_dropout_key(sp, 1, 2);
    bool rest = k.seed == sp->seed && k.layer == 1 && k.site == 2 && k.step == sp->step && k.row0 == sp->row0 &&
                k.c0 == 0 && k.Tg == T && k.Cg == C;
    pr.dropout_t0 = rest && k.t0 == r * Tt ? 0 : rest && k.t0 == 0 ? 1 : 2;
    // A block against tensor parallelism alone, on random parameters and
    // inputs: dropout off; then attn.wo and mlp.w2 zero, where no gradient
    // comes back through the (given) layers and dx must be dout, the
    // residual path alone; then dropout on, with one of the two zero, so
    // that dx sees one site's backward mask only.
    if (sm->m->cfg.L > 0) {
        float saved = sp->dropout;
        float *whole = random_host(sm->m->units[1].size, 1, 0.3f);
        float *params = mem_alloc_floats(sm->L.size[1], MEM_OTHER, "probe params");
        tp_layout_parts_from_whole(&sm->L, 1, params, whole);
        GptBlockView p = tp_layout_block_view(&sm->L, 1, params);
        float *hx = random_host(MC, 2, 1.0f), *hd = random_host(MC, 3, 1.0f);
        float *x = tp_probe_on_device(hx, MC), *dout = tp_probe_on_device(hd, MC);
        const size_t nwo = (size_t)tp->Ct * C, nw2 = (size_t)tp->Ht * C;   // this rank's rows of each
        float *wo = mem_alloc_floats(nwo, MEM_OTHER, "probe"), *w2 = mem_alloc_floats(nw2, MEM_OTHER, "probe");
        mem_copy(wo, p.wo, nwo * sizeof(float));
        mem_copy(w2, p.w2, nw2 * sizeof(float));
        sp->dropout = 0;
        BlockError e = probe_block(sm, params, x, dout, false);
        pr.block_fwd = e.out, pr.block_bwd = e.dx;
        if (sp->recompute != GPT_RECOMPUTE_NONE) {
            BlockError again = probe_block(sm, params, x, dout, true);
            pr.again = again.dx, pr.again_work = again.again_work;
        }
        if (sp->recompute == GPT_RECOMPUTE_FULL) {   // the masks drawn the second time
            sp->dropout = PROBE_DROPOUT;
            pr.again_dropout = probe_block(sm, params, x, dout, true).dx;
            sp->dropout = 0;
        }
        ops_fill(p.wo, 0, nwo);
        ops_fill(p.w2, 0, nw2);
        pr.block_resid = probe_block(sm, params, x, dout, false).dx;
        sp->dropout = PROBE_DROPOUT;
        mem_copy(p.wo, wo, nwo * sizeof(float));   // dmid = dout, then attention's mask
        BlockError site1 = probe_block(sm, params, x, dout, false);
        ops_fill(p.wo, 0, nwo);
        mem_copy(p.w2, w2, nw2 * sizeof(float));   // dx = dmid: the MLP's mask alone
        BlockError site2 = probe_block(sm, params, x, dout, false);
        const double tol = 1e-5;
        // mid is attention's site, out the MLP's; with w2 zero out = mid +
        // dropout(b2), so an output right means a mid right, wherever the
        // student's code keeps it.
        pr.dropout_fwd = site1.out <= tol ? 0 : site1.mid > tol ? 1 : 2;
        pr.dropout_bwd = pr.dropout_fwd ? 0 : (site1.dx > tol ? 1 : 0) | (site2.dx > tol ? 2 : 0);
        sp->dropout = saved;
        float *bufs[] = {params, x, dout, wo, w2};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) mem_free(bufs[i]);
        free(whole), free(hx), free(hd);
    }
    // The embedding on this rank's tokens (dropout off) against wte[token]
    // + wpe[position], positions r Tt + t; and against the positions of the
    // local index t, the bug of a missing pos0.
    {
        float saved = sp->dropout;
        sp->dropout = 0;
        const GptUnit *eu = &sm->m->units[0];
        float *whole = random_host(eu->size, 5, 0.5f);
        float *params = mem_alloc_floats(sm->L.size[0], MEM_OTHER, "probe embed");
        tp_layout_parts_from_whole(&sm->L, 0, params, whole);
        GptEmbedView p = tp_layout_embed_view(&sm->L, params);
        const float *wte = whole + eu->tensors[0].offset, *wpe = whole + eu->tensors[1].offset;
        int *tok = malloc(M * sizeof *tok);
        for (size_t i = 0; i < M; i++) tok[i] = (int)((i * 2654435761u + 12345u) % (uint32_t)tp->V);
        mem_from_host(sm->tokens, tok, M * sizeof(int));
        float *out = mem_alloc_floats(local, MEM_OTHER, "probe embed");
        sp_embed_forward(sp, &p, sm->tokens, out);
        float *want = malloc(2 * MC * sizeof *want), *want_local = want + MC;
        for (size_t m = 0; m < M; m++)
            for (int c = 0; c < C; c++) {
                size_t t = m % (size_t)T;
                want[m * C + c] = wte[(size_t)tok[m] * C + c] + wpe[t * C + c];
                want_local[m * C + c] = wte[(size_t)tok[m] * C + c] + wpe[(t % (size_t)Tt) * C + c];
            }
        pr.embed_err = local_error(sp, out, want);
        pr.embed = pr.embed_err <= 1e-6 ? 0 : r > 0 && local_error(sp, out, want_local) <= 1e-6 ? 1 : 2;
        mem_free(out);
        mem_free(params);
        free(want), free(tok), free(whole);
        sp->dropout = saved;
    }
    mem_free(dw);
    free(h);
    free(back);
    // The group's worst.
    int *const codes[] = {&pr.gather, &pr.scatter, &pr.dropout_t0, &pr.embed};
    tp_probe_max_int(tp->group, codes, sizeof codes / sizeof codes[0]);
    double *const errors[] = {&pr.block_fwd, &pr.block_bwd, &pr.block_resid, &pr.embed_err, &pr.again,
                              &pr.again_dropout, &pr.again_work};
    tp_probe_max(tp->group, errors, sizeof errors / sizeof errors[0]);
    pr.dropout_fwd = tp_probe_any_bits(tp->group, pr.dropout_fwd, 2);
    pr.dropout_bwd = tp_probe_any_bits(tp->group, pr.dropout_bwd, 2);
    sp->step = step, sp->row0 = row0;
    return pr;
}

// In bf16 the probe runs the functions in fp32: a copy of sp of fp32
// precision, with its own fp32 scratch (OTHER), so that its measures are
// exact, as in an fp32 run.
SpProbe spm_probe(SpModel *sm) {
    if (!sm->prec.bf16) return probe(sm);
    Sp *run = sm->sp, fsp = *run;
    Prec fp32;
    prec_init(&fp32, false, 0, 0);
    fsp.tp.prec = &fp32;
    fsp.tp.mc = NULL;
    g_cat = MEM_OTHER;
    alloc_sp_scratch(&fsp);
    const TpShard *tp = &run->tp;
    if (run->recompute == GPT_RECOMPUTE_SELECTIVE)
        fsp.tp.att_again = fl((size_t)tp->B * tp->NHt * tp->T * tp->T, "probe attention");
    g_cat = MEM_ACTS;
    sm->sp = &fsp;
    SpProbe pr = probe(sm);
    sm->sp = run;
    sm->net.ctx = &run->tp;
    free_sp_scratch(&fsp);
    mem_free(fsp.tp.att_again);
    return pr;
}
