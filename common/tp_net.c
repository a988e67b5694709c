// tp_net.c: a tensor-parallel model composed around its split layers (tp_net.h).
#include "tp_net.h"

#include "comm.h"
#include "core.h"
#include "mem.h"
#include "ops.h"

static size_t rows(const TpNet *n) { return (size_t)n->B * n->T; }

DropoutKey tp_net_dropout_key(const TpNet *n, int layer, int site) {
    DropoutKey k = {.seed = n->seed, .layer = layer, .site = site, .step = n->step, .row0 = n->row0,
                    .t0 = 0, .c0 = 0, .Tg = n->T, .Cg = n->C};
    return k;
}

// ---- precision: gpt.c's helpers, on the composition's scratch -----------------------
//
// In fp32 each is the plain buffer, so fp32 runs are the same to the bit;
// in bf16 a kept tensor is widened into fp32 scratch to be read (rd), an op
// writes into fp32 scratch (wr) and keep() rounds it into the kept tensor.

static bool in_bf16(const TpNet *n) { return n->prec && n->prec->bf16; }

static const float *rd(const TpNet *n, const void *t, float *scratch) {
    if (!in_bf16(n)) return t;
    ops_from_bf16(scratch, t, rows(n) * n->C);
    return scratch;
}

static float *wr(const TpNet *n, void *t, float *scratch) { return in_bf16(n) ? scratch : t; }

static void keep(const TpNet *n, void *t, const float *v) {
    if (in_bf16(n)) ops_to_bf16(t, v, rows(n) * n->C);
}

// Zero a buffer of (M, C) of the run's type.
static void zero(const TpNet *n, void *t) {
    if (in_bf16(n)) mem_zero(t, rows(n) * n->C * sizeof(bf16));
    else ops_fill(t, 0, rows(n) * n->C);
}

static size_t unit_size(const TpNet *n, int u) { return n->L->size[u]; }

// The unit's parameters as the layers read them: fp32 views of the unit, or
// of its widening (bf16).
static float *unit_params(TpNet *n, int u, void *params) {
    if (!in_bf16(n)) return params;
    ops_from_bf16(n->unit32, params, unit_size(n, u));
    return n->unit32;
}

// Where the unit's backward adds its gradient: grads (fp32), or a zeroed
// fp32 unit (bf16) that unit_grads_done adds into grads with one rounding.
static float *unit_grads(TpNet *n, int u, void *grads) {
    if (!in_bf16(n)) return grads;
    ops_fill(n->gunit32, 0, unit_size(n, u));
    return n->gunit32;
}

static void unit_grads_done(TpNet *n, int u, void *grads) {
    if (in_bf16(n)) ops_accumulate_bf16(grads, n->gunit32, unit_size(n, u));
}

// x_out = x + dropout(branch), in fp32. The branch is whole on every rank,
// so every rank draws the same mask, as one device would.
static void residual(TpNet *n, float *x_out, const float *x, const float *branch, int layer, int site) {
    if (n->dropout > 0) {
        ops_dropout_forward(n->branch2, branch, n->dropout, tp_net_dropout_key(n, layer, site), n->B, n->T, n->C);
        branch = n->branch2;
    }
    ops_add(x_out, x, branch, rows(n) * n->C);
}

// The gradient reaching a dropped-out branch: dout through the same mask.
static const float *branch_grad(TpNet *n, const float *dout, int layer, int site) {
    if (n->dropout == 0) return dout;
    ops_fill(n->branch2, 0, rows(n) * n->C);
    ops_dropout_backward(n->branch2, dout, n->dropout, tp_net_dropout_key(n, layer, site), n->B, n->T, n->C);
    return n->branch2;
}

// ---- a block: x + attention(LN(x)), then the same with the MLP ----------------------
// (bf16's scratch: f32[0] x and then the output, f32[1] the LayerNorms' and
// the branches' fp32, f32[2] mid.)

void tp_net_block_forward(TpNet *n, int u, TpNetBlock *k, const GptBlockView *p, const void *x, void *out) {
    const int M = (int)rows(n), C = n->C;
    const float *x32 = rd(n, x, n->f32[0]);
    float *ln1 = wr(n, k->ln1.out, n->f32[1]);
    ops_layernorm_forward(ln1, k->ln1.mean, k->ln1.rstd, x32, p->ln1w, p->ln1b, M, C);
    keep(n, k->ln1.out, ln1);
    zero(n, n->branch);
    n->layers->attention_forward(n->ctx, k->layers, p, k->ln1.out, n->branch);
    float *mid = wr(n, k->mid, n->f32[2]);
    residual(n, mid, x32, rd(n, n->branch, n->f32[1]), u, 1);
    keep(n, k->mid, mid);
    const float *mid32 = rd(n, k->mid, n->f32[2]);   // what comes after reads the rounded tensor
    float *ln2 = wr(n, k->ln2.out, n->f32[1]);
    ops_layernorm_forward(ln2, k->ln2.mean, k->ln2.rstd, mid32, p->ln2w, p->ln2b, M, C);
    keep(n, k->ln2.out, ln2);
    zero(n, n->branch);
    n->layers->mlp_forward(n->ctx, k->layers, p, k->ln2.out, n->branch);
    if (!out) return;   // made again: the block's output was used already
    float *o = wr(n, out, n->f32[0]);   // x is read no more
    residual(n, o, mid32, rd(n, n->branch, n->f32[1]), u, 2);
    keep(n, out, o);
}

void tp_net_block_backward(TpNet *n, int u, TpNetBlock *k, const GptBlockView *p, GptBlockView *g, const void *x,
                           const void *dout, void *dx) {
    const int M = (int)rows(n), C = n->C;
    const size_t MC = rows(n) * C;
    const float *dout32 = rd(n, dout, n->f32[0]);
    float *dmid = in_bf16(n) ? n->f32[2] : n->branch;
    const float *dbranch = branch_grad(n, dout32, u, 2);
    zero(n, n->dln);
    n->layers->mlp_backward(n->ctx, k->layers, p, g, k->ln2.out, dbranch, n->dln);
    mem_copy(dmid, dout32, MC * sizeof(float));   // the residual path
    ops_layernorm_backward(dmid, g->ln2w, g->ln2b, rd(n, n->dln, n->f32[1]), rd(n, k->mid, n->f32[0]), p->ln2w,
                           k->ln2.mean, k->ln2.rstd, M, C);
    dbranch = branch_grad(n, dmid, u, 1);
    zero(n, n->dln);
    n->layers->attention_backward(n->ctx, k->layers, p, g, k->ln1.out, dbranch, n->dln);
    float *d = wr(n, dx, n->f32[0]);   // dout is read no more
    mem_copy(d, dmid, MC * sizeof(float));
    const float *dln = rd(n, n->dln, n->f32[1]);
    ops_layernorm_backward(d, g->ln1w, g->ln1b, dln, rd(n, x, n->f32[2]), p->ln1w, k->ln1.mean, k->ln1.rstd, M, C);
    keep(n, dx, d);
}

// ---- the embeddings and the head ------------------------------------------------------

static void embed_forward(TpNet *n, void *params) {
    GptEmbedView p = tp_layout_embed_view(n->L, unit_params(n, 0, params));
    void *out = n->dropout > 0 ? n->branch : n->stream[1];
    zero(n, out);
    n->layers->embed_forward(n->ctx, &p, n->tokens, out);
    if (n->dropout > 0) {
        float *o = wr(n, n->stream[1], n->f32[0]);
        ops_dropout_forward(o, rd(n, out, n->f32[1]), n->dropout, tp_net_dropout_key(n, 0, 0), n->B, n->T, n->C);
        keep(n, n->stream[1], o);
    }
}

static void embed_backward(TpNet *n, void *grads) {
    GptEmbedView g = tp_layout_embed_view(n->L, unit_grads(n, 0, grads));
    n->layers->embed_backward(n->ctx, &g, n->tokens, branch_grad(n, rd(n, n->dstream[1], n->f32[0]), 0, 0));
    unit_grads_done(n, 0, grads);
}

static void head_forward(TpNet *n, void *params) {
    const int M = (int)rows(n), u = n->m->nunits - 1;
    GptHeadView p = tp_layout_head_view(n->L, unit_params(n, u, params));
    float *lnf = wr(n, n->lnf.out, n->f32[1]);
    ops_layernorm_forward(lnf, n->lnf.mean, n->lnf.rstd, rd(n, n->stream[u], n->f32[0]), p.lnfw, p.lnfb, M, n->C);
    keep(n, n->lnf.out, lnf);
    ops_fill(n->losses, 0, (size_t)M);
    n->layers->head_forward(n->ctx, n->head, &p, n->lnf.out, n->targets, n->losses);
}

static void head_backward(TpNet *n, void *params, void *grads) {
    const int M = (int)rows(n), u = n->m->nunits - 1;
    // (bf16: the parameters are still the head's widening from its forward pass)
    GptHeadView p = tp_layout_head_view(n->L, unit_params(n, u, params));
    GptHeadView g = tp_layout_head_view(n->L, unit_grads(n, u, grads));
    zero(n, n->dln);
    n->layers->head_backward(n->ctx, n->head, &p, &g, n->lnf.out, n->dln);
    float *dx = wr(n, n->dstream[u], n->f32[0]);
    ops_fill(dx, 0, rows(n) * n->C);
    ops_layernorm_backward(dx, g.lnfw, g.lnfb, rd(n, n->dln, n->f32[1]), rd(n, n->stream[u], n->f32[2]), p.lnfw,
                           n->lnf.mean, n->lnf.rstd, M, n->C);
    keep(n, n->dstream[u], dx);
    unit_grads_done(n, u, grads);
}

// ---- the units ---------------------------------------------------------------------------

// What block u keeps: its own set, or under full recomputation the shared one.
static TpNetBlock *kept(TpNet *n, int u) { return n->rc ? n->rc : &n->blocks[u - 1]; }

// Full recomputation: block u's forward again, from its kept input, into
// the shared set, its cost counted.
static void block_again(TpNet *n, int u, const GptBlockView *p) {
    OpsWork w0 = ops_work();
    CommStats c0 = comm_stats();
    double t0 = core_now();
    tp_net_block_forward(n, u, n->rc, p, n->stream[u], NULL);
    CommStats c1 = comm_stats();
    n->again_work += ops_work().matmul - w0.matmul;
    n->again_bytes += (double)(comm_stats_total_bus_bytes(&c1) - comm_stats_total_bus_bytes(&c0));
    n->again_s += core_now() - t0;
}

void tp_net_unit_forward(TpNet *n, int u, void *params) {
    switch (n->m->units[u].kind) {
    case UNIT_EMBED: embed_forward(n, params); break;
    case UNIT_BLOCK: {
        GptBlockView p = tp_layout_block_view(n->L, u, unit_params(n, u, params));
        tp_net_block_forward(n, u, kept(n, u), &p, n->stream[u], n->stream[u + 1]);
        break;
    }
    case UNIT_HEAD: head_forward(n, params); break;
    }
}

void tp_net_unit_backward(TpNet *n, int u, void *params, void *grads) {
    switch (n->m->units[u].kind) {
    case UNIT_EMBED: embed_backward(n, grads); break;
    case UNIT_BLOCK: {
        GptBlockView p = tp_layout_block_view(n->L, u, unit_params(n, u, params));
        if (n->rc) block_again(n, u, &p);
        GptBlockView g = tp_layout_block_view(n->L, u, unit_grads(n, u, grads));
        tp_net_block_backward(n, u, kept(n, u), &p, &g, n->stream[u], n->dstream[u + 1], n->dstream[u]);
        unit_grads_done(n, u, grads);
        break;
    }
    case UNIT_HEAD: head_backward(n, params, grads); break;
    }
}

// ---- allocation ------------------------------------------------------------------------

void tp_net_block_alloc(TpNetBlock *k, size_t M, int C, MemCategory cat, const Prec *prec) {
    const size_t MC = M * (size_t)C;
    Prec fp32 = {.bf16 = false};
    if (!prec) prec = &fp32;
    k->ln1.out = prec_alloc(prec, MC, cat, "ln1");
    k->ln1.mean = mem_alloc_floats(M, cat, "ln1 mean");
    k->ln1.rstd = mem_alloc_floats(M, cat, "ln1 rstd");
    k->mid = prec_alloc(prec, MC, cat, "residual mid");
    k->ln2.out = prec_alloc(prec, MC, cat, "ln2");
    k->ln2.mean = mem_alloc_floats(M, cat, "ln2 mean");
    k->ln2.rstd = mem_alloc_floats(M, cat, "ln2 rstd");
    k->layers = NULL;
}

void tp_net_block_free(TpNetBlock *k) {
    void *all[] = {k->ln1.out, k->ln1.mean, k->ln1.rstd, k->mid, k->ln2.out, k->ln2.mean, k->ln2.rstd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
}

void tp_net_alloc_bf16(TpNet *n, size_t M, int C, size_t unit) {
    if (!in_bf16(n)) return;
    for (int i = 0; i < 3; i++) n->f32[i] = mem_alloc_floats(M * (size_t)C, MEM_ACTS, "bf16 widening scratch");
    n->unit32 = mem_alloc_floats(unit, MEM_ACTS, "the unit running, widened");
    n->gunit32 = mem_alloc_floats(unit, MEM_ACTS, "the unit's fp32 gradient");
}

void tp_net_free_bf16(TpNet *n) {
    void *all[] = {n->f32[0], n->f32[1], n->f32[2], n->unit32, n->gunit32};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
}

void tp_net_head_alloc(TpHeadActs *a, size_t M, int nlm, MemCategory cat) {
    a->logits = mem_alloc_floats(M * (size_t)nlm, cat, "logits (this rank's columns)");
    a->mx = mem_alloc_floats(M, cat, "row max");
    a->sumexp = mem_alloc_floats(M, cat, "sum of exp");
    a->target_logit = mem_alloc_floats(M, cat, "target logit");
    a->target_ids = mem_alloc(M * sizeof(int), cat, "target ids");
}

void tp_net_head_free(TpHeadActs *a) {
    void *all[] = {a->logits, a->mx, a->sumexp, a->target_logit, a->target_ids};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
}
