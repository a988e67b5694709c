// model_given.c: lab06's model (model_given.h).
#include "model_given.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "mem.h"
#include "ops.h"
#include "rng.h"

// ---- activations ---------------------------------------------------------------------

static MemCategory g_cat = MEM_ACTS;   // the category of what follows (the probe's are OTHER)

static float *fl(size_t n, const char *name) { return mem_alloc_floats(n, g_cat, name); }
static int *ints(size_t n, const char *name) { return mem_alloc(n * sizeof(int), g_cat, name); }

static void alloc_layers(const Sp *sp, TpLayerActs *a) {
    const TpShard *tp = &sp->tp;
    size_t M = (size_t)tp->B * tp->T;
    a->q = fl(M * tp->Ct, "q");
    a->k = fl(M * tp->Ct, "k");
    a->v = fl(M * tp->Ct, "v");
    a->y = fl(M * tp->Ct, "attention out");
    a->att = fl((size_t)tp->B * tp->NHt * tp->T * tp->T, "attention");
    a->h = fl(M * tp->Ht, "mlp hidden");
    a->hg = fl(M * tp->Ht, "mlp gelu");
}

static void free_layers(TpLayerActs *a) {
    float *all[] = {a->q, a->k, a->v, a->y, a->att, a->h, a->hg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
}

static void alloc_on(const Sp *sp, SpBlockActs *a) {
    const TpShard *tp = &sp->tp;
    size_t Mt = (size_t)tp->B * sp->Tt, M = (size_t)tp->B * tp->T, C = (size_t)tp->C;
    a->ln1_mean = fl(Mt, "ln1 mean");
    a->ln1_rstd = fl(Mt, "ln1 rstd");
    a->ln1_all = fl(M * C, "ln1, all-gathered");
    a->mid = fl(Mt * C, "residual mid (this rank's tokens)");
    a->ln2_mean = fl(Mt, "ln2 mean");
    a->ln2_rstd = fl(Mt, "ln2 rstd");
    a->ln2_all = fl(M * C, "ln2, all-gathered");
    alloc_layers(sp, &a->layers);
}

static void free_on(SpBlockActs *a) {
    float *all[] = {a->ln1_mean, a->ln1_rstd, a->ln1_all, a->mid, a->ln2_mean, a->ln2_rstd, a->ln2_all};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
    free_layers(&a->layers);
}

static void alloc_off(const Sp *sp, TpBlockActsOff *a) {
    const TpShard *tp = &sp->tp;
    size_t M = (size_t)tp->B * tp->T, C = (size_t)tp->C;
    a->ln1 = fl(M * C, "ln1");
    a->ln1_mean = fl(M, "ln1 mean");
    a->ln1_rstd = fl(M, "ln1 rstd");
    a->mid = fl(M * C, "residual mid");
    a->ln2 = fl(M * C, "ln2");
    a->ln2_mean = fl(M, "ln2 mean");
    a->ln2_rstd = fl(M, "ln2 rstd");
    alloc_layers(sp, &a->layers);
}

static void free_off(TpBlockActsOff *a) {
    float *all[] = {a->ln1, a->ln1_mean, a->ln1_rstd, a->mid, a->ln2, a->ln2_mean, a->ln2_rstd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
    free_layers(&a->layers);
}

// One block's kept activations and its input (a residual stream), measured
// by allocating them: what the per-layer formulas count.
static double measure_layer(const SpModel *sm, bool on) {
    const Sp *sp = sm->sp;
    size_t before = mem_live(MEM_ACTS), stream = (size_t)sp->tp.B * (on ? sp->Tt : sp->tp.T) * sp->tp.C;
    float *x = fl(stream, "block input");
    SpBlockActs a;
    TpBlockActsOff b;
    if (on) alloc_on(sp, &a);
    else alloc_off(sp, &b);
    double bytes = (double)(mem_live(MEM_ACTS) - before);
    if (on) free_on(&a);
    else free_off(&b);
    mem_free(x);
    return bytes;
}

static void alloc_scratch(SpModel *sm) {
    Sp *sp = sm->sp;
    TpShard *tp = &sp->tp;
    size_t M = (size_t)tp->B * tp->T, Mt = (size_t)tp->B * sp->Tt, C = (size_t)tp->C;
    for (int i = 0; i < 4; i++) tp->ct[i] = fl(M * tp->Ct, "scratch");
    tp->att = fl((size_t)tp->B * tp->NHt * tp->T * tp->T, "scratch");
    for (int i = 0; i < 2; i++) tp->ht[i] = fl(M * tp->Ht, "scratch");
    tp->dlogits = fl(M * tp->nlm, "scratch");
    tp->ids = ints(M, "scratch ids");
    for (int i = 0; i < 2; i++) sp->s.whole[i] = fl(M * C, "scratch");
    for (int i = 0; i < 2; i++) sp->s.local[i] = fl(Mt * C, "scratch");
    sp->s.blocks = fl(M * C, "scratch");
    sm->branch = fl(M * C, "scratch");
    sm->branch2 = fl(M * C, "scratch");
    sm->dln = fl(M * C, "scratch");
    sm->partial = fl(M * C, "scratch");
}

void spm_create(SpModel *sm, const Gpt *m, Sp *sp, bool on) {
    memset(sm, 0, sizeof *sm);
    sm->m = m, sm->sp = sp, sm->on = on, sm->nunits = m->nunits;
    TpShard *tp = &sp->tp;
    tp_layout_make(&sm->L, m, tp->group, tpg_split, tp, false, "the given split of tp_given.c");
    tpg_sizes(tp, &sm->L);
    sm->layer_bytes[0] = measure_layer(sm, false);
    sm->layer_bytes[1] = measure_layer(sm, true);
    const int L = m->cfg.L;
    size_t M = (size_t)tp->B * tp->T, C = (size_t)tp->C, rows = (size_t)tp->B * (on ? sp->Tt : tp->T);
    sm->tokens = ints(M, "tokens");
    sm->targets = ints(M, "targets");
    sm->stream = calloc((size_t)m->nunits + 1, sizeof *sm->stream);
    sm->dstream = calloc((size_t)m->nunits + 1, sizeof *sm->dstream);
    for (int u = 1; u < m->nunits; u++) {
        sm->stream[u] = fl(rows * C, "residual stream");
        sm->dstream[u] = fl(rows * C, "residual stream gradient");
    }
    if (on) {
        sm->acts = calloc((size_t)(L ? L : 1), sizeof *sm->acts);
        for (int l = 0; l < L; l++) alloc_on(sp, &sm->acts[l]);
    } else {
        sm->off = calloc((size_t)(L ? L : 1), sizeof *sm->off);
        for (int l = 0; l < L; l++) alloc_off(sp, &sm->off[l]);
    }
    SpHeadActs *h = &sm->head;
    h->lnf_mean = fl(rows, "lnf mean");
    h->lnf_rstd = fl(rows, "lnf rstd");
    h->lnf_all = fl(M * C, "lnf, all-gathered");
    h->ce.logits = fl(M * tp->nlm, "logits (this rank's columns)");
    h->ce.mx = fl(M, "row max");
    h->ce.sumexp = fl(M, "sum of exp");
    h->ce.target_logit = fl(M, "target logit");
    h->ce.target_ids = ints(M, "target ids");
    sm->losses = fl(M, "losses");
    alloc_scratch(sm);
}

void spm_free(SpModel *sm) {
    Sp *sp = sm->sp;
    TpShard *tp = &sp->tp;
    for (int l = 0; l < sm->m->cfg.L; l++) {
        if (sm->on) free_on(&sm->acts[l]);
        else free_off(&sm->off[l]);
    }
    for (int u = 1; u < sm->nunits; u++) mem_free(sm->stream[u]), mem_free(sm->dstream[u]);
    void *rest[] = {sm->tokens, sm->targets, sm->head.lnf_mean, sm->head.lnf_rstd, sm->head.lnf_all,
                    sm->head.ce.logits, sm->head.ce.mx, sm->head.ce.sumexp, sm->head.ce.target_logit,
                    sm->head.ce.target_ids, sm->losses, tp->ct[0], tp->ct[1], tp->ct[2], tp->ct[3], tp->att,
                    tp->ht[0], tp->ht[1], tp->dlogits, tp->ids, sp->s.whole[0], sp->s.whole[1], sp->s.local[0],
                    sp->s.local[1], sp->s.blocks, sm->branch, sm->branch2, sm->dln, sm->partial};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) mem_free(rest[i]);
    free(sm->stream);
    free(sm->dstream);
    free(sm->acts);
    free(sm->off);
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

// ---- --sp off: tensor parallelism alone, every token on every rank ---------------------

static DropoutKey key_off(const Sp *sp, int layer, int site) {
    DropoutKey k = {.seed = sp->seed, .layer = layer, .site = site, .step = sp->step, .row0 = sp->row0,
                    .t0 = 0, .c0 = 0, .Tg = sp->tp.T, .Cg = sp->tp.C};
    return k;
}

// One half-block of the TP composition: x_out = x + dropout(g(layer(f(LN(x)))) + bias).
static void half_off(SpModel *sm, bool mlp, TpBlockActsOff *a, const GptBlockView *p, const float *x, float *x_out,
                     int u) {
    Sp *sp = sm->sp;
    TpShard *tp = &sp->tp;
    const int M = tp->B * tp->T, C = tp->C;
    float *ln = mlp ? a->ln2 : a->ln1;
    ops_layernorm_forward(ln, mlp ? a->ln2_mean : a->ln1_mean, mlp ? a->ln2_rstd : a->ln1_rstd, x,
                          mlp ? p->ln2w : p->ln1w, mlp ? p->ln2b : p->ln1b, M, C);
    (mlp ? tpg_mlp_forward : tpg_attention_forward)(tp, &a->layers, p, ln, sm->branch);
    comm_all_reduce_sum(tp->group, sm->branch, (size_t)M * C);   // g
    ops_add_bias(sm->branch, mlp ? p->b2 : p->bo, M, C);
    const float *b = sm->branch;
    if (sp->dropout > 0) {
        ops_dropout_forward(sm->branch2, b, sp->dropout, key_off(sp, u, mlp ? 2 : 1), tp->B, tp->T, C);
        b = sm->branch2;
    }
    ops_add(x_out, x, b, (size_t)M * C);
}

static void half_off_backward(SpModel *sm, bool mlp, TpBlockActsOff *a, const GptBlockView *p, GptBlockView *g,
                              const float *x, const float *dout, float *dx, int u) {
    Sp *sp = sm->sp;
    TpShard *tp = &sp->tp;
    const int M = tp->B * tp->T, C = tp->C;
    const float *db = dout;
    if (sp->dropout > 0) {
        ops_fill(sm->branch2, 0, (size_t)M * C);
        ops_dropout_backward(sm->branch2, dout, sp->dropout, key_off(sp, u, mlp ? 2 : 1), tp->B, tp->T, C);
        db = sm->branch2;
    }
    ops_bias_backward(mlp ? g->b2 : g->bo, db, M, C);   // the same on every rank
    ops_fill(sm->dln, 0, (size_t)M * C);
    (mlp ? tpg_mlp_backward : tpg_attention_backward)(tp, &a->layers, p, g, mlp ? a->ln2 : a->ln1, db, sm->dln);
    comm_all_reduce_sum(tp->group, sm->dln, (size_t)M * C);   // f
    if (dx != dout) mem_copy(dx, dout, (size_t)M * C * sizeof(float));
    ops_layernorm_backward(dx, mlp ? g->ln2w : g->ln1w, mlp ? g->ln2b : g->ln1b, sm->dln, x, mlp ? p->ln2w : p->ln1w,
                           mlp ? a->ln2_mean : a->ln1_mean, mlp ? a->ln2_rstd : a->ln1_rstd, M, C);
}

static void block_off(SpModel *sm, int u, TpBlockActsOff *a, const GptBlockView *p, const float *x, float *out) {
    half_off(sm, false, a, p, x, a->mid, u);
    half_off(sm, true, a, p, a->mid, out, u);
}

static void block_off_backward(SpModel *sm, int u, TpBlockActsOff *a, const GptBlockView *p, GptBlockView *g,
                               const float *x, const float *dout, float *dx) {
    half_off_backward(sm, true, a, p, g, a->mid, dout, dx, u);
    half_off_backward(sm, false, a, p, g, x, dx, dx, u);
}

static void embed_off(SpModel *sm, const GptEmbedView *p) {
    Sp *sp = sm->sp;
    TpShard *tp = &sp->tp;
    const size_t MC = (size_t)tp->B * tp->T * tp->C;
    float *x = sp->dropout > 0 ? sm->branch : sm->stream[1];
    tpg_embed_forward(tp, p, sm->tokens, x);
    comm_all_reduce_sum(tp->group, x, MC);
    ops_positions_forward(x, p->wpe, tp->B, tp->T, tp->C, 0);
    if (sp->dropout > 0) ops_dropout_forward(sm->stream[1], x, sp->dropout, key_off(sp, 0, 0), tp->B, tp->T, tp->C);
}

static void embed_off_backward(SpModel *sm, GptEmbedView *g) {
    Sp *sp = sm->sp;
    TpShard *tp = &sp->tp;
    const float *d = sm->dstream[1];
    if (sp->dropout > 0) {
        ops_fill(sm->branch, 0, (size_t)tp->B * tp->T * tp->C);
        ops_dropout_backward(sm->branch, d, sp->dropout, key_off(sp, 0, 0), tp->B, tp->T, tp->C);
        d = sm->branch;
    }
    ops_positions_backward(g->wpe, d, tp->B, tp->T, tp->C, 0);
    tpg_embed_backward(tp, g, sm->tokens, d);
}

static void head_off(SpModel *sm, const GptHeadView *p) {
    TpShard *tp = &sm->sp->tp;
    SpHeadActs *h = &sm->head;
    ops_layernorm_forward(h->lnf_all, h->lnf_mean, h->lnf_rstd, sm->stream[sm->nunits - 1], p->lnfw, p->lnfb,
                          tp->B * tp->T, tp->C);
    tpg_head_forward(tp, &h->ce, p, h->lnf_all, sm->targets, sm->losses);
}

static void head_off_backward(SpModel *sm, const GptHeadView *p, GptHeadView *g) {
    TpShard *tp = &sm->sp->tp;
    SpHeadActs *h = &sm->head;
    const size_t MC = (size_t)tp->B * tp->T * tp->C;
    ops_fill(sm->dln, 0, MC);
    tpg_head_backward(tp, &h->ce, p, g, h->lnf_all, sm->dln);
    comm_all_reduce_sum(tp->group, sm->dln, MC);   // f
    float *dx = sm->dstream[sm->nunits - 1];
    ops_fill(dx, 0, MC);
    ops_layernorm_backward(dx, g->lnfw, g->lnfb, sm->dln, sm->stream[sm->nunits - 1], p->lnfw, h->lnf_mean,
                           h->lnf_rstd, tp->B * tp->T, tp->C);
}

// ---- the units -------------------------------------------------------------------------

void spm_unit_forward(SpModel *sm, int u, float *params) {
    Sp *sp = sm->sp;
    switch (sm->m->units[u].kind) {
    case UNIT_EMBED: {
        GptEmbedView p = tp_layout_embed_view(&sm->L, params);
        if (sm->on) sp_embed_forward(sp, &p, sm->tokens, sm->stream[1]);
        else embed_off(sm, &p);
        break;
    }
    case UNIT_BLOCK: {
        GptBlockView p = tp_layout_block_view(&sm->L, u, params);
        if (sm->on) sp_block_forward(sp, u, &sm->acts[u - 1], &p, sm->stream[u], sm->stream[u + 1]);
        else block_off(sm, u, &sm->off[u - 1], &p, sm->stream[u], sm->stream[u + 1]);
        break;
    }
    case UNIT_HEAD: {
        GptHeadView p = tp_layout_head_view(&sm->L, params);
        ops_fill(sm->losses, 0, (size_t)sp->tp.B * sp->tp.T);
        if (sm->on) sp_head_forward(sp, &sm->head, &p, sm->stream[u], sm->targets, sm->losses);
        else head_off(sm, &p);
        break;
    }
    }
}

void spm_unit_backward(SpModel *sm, int u, float *params, float *grads) {
    Sp *sp = sm->sp;
    switch (sm->m->units[u].kind) {
    case UNIT_EMBED: {
        GptEmbedView g = tp_layout_embed_view(&sm->L, grads);
        if (sm->on) sp_embed_backward(sp, &g, sm->tokens, sm->dstream[1]);
        else embed_off_backward(sm, &g);
        break;
    }
    case UNIT_BLOCK: {
        GptBlockView p = tp_layout_block_view(&sm->L, u, params), g = tp_layout_block_view(&sm->L, u, grads);
        if (sm->on) sp_block_backward(sp, u, &sm->acts[u - 1], &p, &g, sm->stream[u], sm->dstream[u + 1], sm->dstream[u]);
        else block_off_backward(sm, u, &sm->off[u - 1], &p, &g, sm->stream[u], sm->dstream[u + 1], sm->dstream[u]);
        break;
    }
    case UNIT_HEAD: {
        GptHeadView p = tp_layout_head_view(&sm->L, params), g = tp_layout_head_view(&sm->L, grads);
        if (sm->on) {
            ops_fill(sm->dstream[u], 0, (size_t)sp->tp.B * sp->Tt * sp->tp.C);
            sp_head_backward(sp, &sm->head, &p, &g, sm->stream[u], sm->dstream[u]);
        } else {
            head_off_backward(sm, &p, &g);
        }
        break;
    }
    }
}

double spm_loss(const SpModel *sm) {
    size_t M = (size_t)sm->sp->tp.B * sm->sp->tp.T;
    return ops_sum(sm->losses, M) / (double)M;
}

// ---- the probe ------------------------------------------------------------------------------

static float *random_host(size_t n, uint32_t which, float std) {
    float *x = malloc(n * sizeof *x);
    CHECK(x, "out of memory");
    rng_fill_normal(x, n, 0x5e9ull, rng_stream(RNG_TEST, 5000 + which, 0), 0, 0, std);
    return x;
}

static float *on_device(const float *host, size_t n) {
    float *d = mem_alloc_floats(n, MEM_OTHER, "probe");
    mem_from_host(d, host, n * sizeof(float));
    return d;
}

// ||got - want|| / ||want|| over this rank's tokens, want whole (B, T, C).
static double local_error(const Sp *sp, const float *got_dev, const float *want) {
    const TpShard *tp = &sp->tp;
    size_t run = (size_t)sp->Tt * tp->C, n = (size_t)tp->B * run;
    float *got = malloc(n * sizeof *got);
    mem_to_host(got, got_dev, n * sizeof(float));
    double d = 0, w = 0;
    for (int b = 0; b < tp->B; b++)
        for (size_t i = 0; i < run; i++) {
            double x = got[(size_t)b * run + i], y = want[((size_t)b * tp->T + (size_t)tp->r * sp->Tt) * tp->C + i];
            d += (x - y) * (x - y), w += y * y;
        }
    free(got);
    return isfinite(d) ? sqrt(d / (w > 0 ? w : 1)) : INFINITY;
}

// The dropout probability of the probe's masks: any, as long as both
// kinds of element are common.
#define PROBE_DROPOUT 0.5f

typedef struct {
    double mid, out, dx;   // relative errors on this rank's tokens
} BlockError;

// Block unit 1 on `params` and x, dout (B, T, C) whole, on the device:
// tensor parallelism alone (the harness's composition, on every token),
// then the student's sp_block_forward and sp_block_backward on this rank's
// tokens; the errors of the latter's mid, output and input gradient.
static BlockError probe_block(SpModel *sm, float *params, const float *x, const float *dout) {
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
    TpBlockActsOff off;
    alloc_on(sp, &on);
    alloc_off(sp, &off);
    g_cat = MEM_ACTS;
    GptBlockView p = tp_layout_block_view(&sm->L, 1, params), gon = tp_layout_block_view(&sm->L, 1, g_on),
                 goff = tp_layout_block_view(&sm->L, 1, g_off);
    block_off(sm, 1, &off, &p, x, out);
    block_off_backward(sm, 1, &off, &p, &goff, x, dout, dx);
    float *want_mid = malloc(3 * MC * sizeof *want_mid), *want_out = want_mid + MC, *want_dx = want_mid + 2 * MC;
    mem_to_host(want_mid, off.mid, MC * sizeof(float));
    mem_to_host(want_out, out, MC * sizeof(float));
    mem_to_host(want_dx, dx, MC * sizeof(float));
    BlockError e;
    sp_block_forward(sp, 1, &on, &p, xl, outl);
    e.mid = local_error(sp, on.mid, want_mid);
    e.out = local_error(sp, outl, want_out);
    sp_block_backward(sp, 1, &on, &p, &gon, xl, dl, dxl);
    e.dx = local_error(sp, dxl, want_dx);
    free_on(&on);
    free_off(&off);
    float *bufs[] = {g_on, g_off, out, dx, xl, dl, outl, dxl};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) mem_free(bufs[i]);
    free(want_mid);
    return e;
}

// Bits 1 and 2 set on any rank of c, on every rank.
static int or_over(Comm *c, int bits) {
    return (comm_max_double(c, bits & 1) > 0 ? 1 : 0) | (comm_max_double(c, bits & 2) > 0 ? 2 : 0);
}

SpProbe spm_probe(SpModel *sm) {
    Sp *sp = sm->sp;
    TpShard *tp = &sp->tp;
    SpProbe pr = {0};
    const int B = tp->B, T = tp->T, C = tp->C, Tt = sp->Tt, r = tp->r;
    const size_t M = (size_t)B * T, MC = M * C, run = (size_t)Tt * C, local = (size_t)B * run;
    // All-gather: each rank's tokens carry their own global index.
    float *h = malloc(MC * sizeof *h), *back = malloc(MC * sizeof *back);
    for (int b = 0; b < B; b++)
        for (size_t i = 0; i < run; i++) h[(size_t)b * run + i] = (float)(((size_t)b * T + (size_t)r * Tt) * C + i);
    float *dl = on_device(h, local), *dw = mem_alloc_floats(MC, MEM_OTHER, "probe");
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
        float *x = on_device(hx, MC), *dout = on_device(hd, MC);
        const size_t nwo = (size_t)tp->Ct * C, nw2 = (size_t)tp->Ht * C;   // this rank's rows of each
        float *wo = mem_alloc_floats(nwo, MEM_OTHER, "probe"), *w2 = mem_alloc_floats(nw2, MEM_OTHER, "probe");
        mem_copy(wo, p.wo, nwo * sizeof(float));
        mem_copy(w2, p.w2, nw2 * sizeof(float));
        sp->dropout = 0;
        BlockError e = probe_block(sm, params, x, dout);
        pr.block_fwd = e.out, pr.block_bwd = e.dx;
        ops_fill(p.wo, 0, nwo);
        ops_fill(p.w2, 0, nw2);
        pr.block_resid = probe_block(sm, params, x, dout).dx;
        sp->dropout = PROBE_DROPOUT;
        mem_copy(p.wo, wo, nwo * sizeof(float));   // dmid = dout, then attention's mask
        BlockError site1 = probe_block(sm, params, x, dout);
        ops_fill(p.wo, 0, nwo);
        mem_copy(p.w2, w2, nw2 * sizeof(float));   // dx = dmid: the MLP's mask alone
        BlockError site2 = probe_block(sm, params, x, dout);
        const double tol = 1e-5;
        pr.dropout_fwd = site1.mid > tol ? 1 : site1.out > tol ? 2 : 0;   // mid is attention's site, out the MLP's
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
    pr.gather = (int)comm_max_double(tp->group, pr.gather);
    pr.scatter = (int)comm_max_double(tp->group, pr.scatter);
    pr.dropout_t0 = (int)comm_max_double(tp->group, pr.dropout_t0);
    pr.block_fwd = comm_max_double(tp->group, pr.block_fwd);
    pr.block_bwd = comm_max_double(tp->group, pr.block_bwd);
    pr.block_resid = comm_max_double(tp->group, pr.block_resid);
    pr.embed_err = comm_max_double(tp->group, pr.embed_err);
    pr.embed = (int)comm_max_double(tp->group, pr.embed);
    pr.dropout_fwd = or_over(tp->group, pr.dropout_fwd);
    pr.dropout_bwd = or_over(tp->group, pr.dropout_bwd);
    sp->step = step, sp->row0 = row0;
    return pr;
}
